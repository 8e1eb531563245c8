/* Netloom agents' connections (conn.h): the process's established TCP
 * connections at the snapshot. Runs on the reporting thread only; the MPI
 * hot path never comes here. Its storage is static: a snapshot's
 * connections point into it until the next call. The queries are
 * read-only: a socket the application closes meanwhile (and whose number
 * it may reuse) is only missed, or seen as what the number is now. */

#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "conn.h"

typedef Netloom__Agent__V1__Connection Connection;

static struct {
	Connection msg[NL_CONN_MAX];
	Connection *ptr[NL_CONN_MAX];
	uint8_t addr[NL_CONN_MAX][2][16];
} cs;

/* end reads a socket address: its IP address into a (4 or 16 bytes, the
 * length returned; 0 for another family) and its port. */
static size_t end(const struct sockaddr_storage *s, uint8_t *a, uint32_t *port)
{
	if (s->ss_family == AF_INET) {
		const struct sockaddr_in *v = (const struct sockaddr_in *)s;
		memcpy(a, &v->sin_addr, 4);
		*port = ntohs(v->sin_port);
		return 4;
	}
	if (s->ss_family == AF_INET6) {
		const struct sockaddr_in6 *v = (const struct sockaddr_in6 *)s;
		memcpy(a, &v->sin6_addr, 16);
		*port = ntohs(v->sin6_port);
		return 16;
	}
	return 0;
}

/* loopback: 127.0.0.0/8, ::1 and ::ffff:127.0.0.0/104 never cross a switch */
static int loopback(const uint8_t *a, size_t len)
{
	static const uint8_t one[16] = {[15] = 1}, mapped[12] = {[10] = 0xff, [11] = 0xff};
	if (len == 4)
		return a[0] == 127;
	return memcmp(a, one, 16) == 0 || (memcmp(a, mapped, 12) == 0 && a[12] == 127);
}

/* tcp fills c, its addresses in addr, from fd when it is an established
 * TCP socket between two addresses that are not loopback; 0 when it is
 * not one. */
static int tcp(int fd, Connection *c, uint8_t addr[2][16])
{
	int proto;
	socklen_t len = sizeof proto;
	if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len) != 0 || proto != IPPROTO_TCP)
		return 0;
	uint8_t state = 0; /* struct tcp_info's first byte: tcpi_state */
	len = sizeof state;
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &state, &len) != 0 || state != TCP_ESTABLISHED)
		return 0;
	struct sockaddr_storage l, r;
	socklen_t ll = sizeof l, rl = sizeof r;
	if (getsockname(fd, (struct sockaddr *)&l, &ll) != 0 || getpeername(fd, (struct sockaddr *)&r, &rl) != 0)
		return 0;
	netloom__agent__v1__connection__init(c);
	size_t la = end(&l, addr[0], &c->local_port), ra = end(&r, addr[1], &c->remote_port);
	if (!la || la != ra || loopback(addr[0], la) || loopback(addr[1], ra))
		return 0;
	c->kind = (char *)"tcp";
	c->local_addr.data = addr[0];
	c->local_addr.len = la;
	c->remote_addr.data = addr[1];
	c->remote_addr.len = ra;
	c->peer = 0xFFFFFFFFu; /* the daemon finds the far rank: the agent knows no other rank's address */
	return 1;
}

void nl_conn_take(Netloom__Agent__V1__Datagram *d)
{
	size_t n = 0;
	int truncated = 0;
	DIR *dir = opendir("/proc/self/fd");
	if (dir) {
		int self = dirfd(dir);
		struct dirent *e;
		while ((e = readdir(dir))) {
			if (e->d_name[0] < '0' || e->d_name[0] > '9' || atoi(e->d_name) == self)
				continue;
			Connection spare;
			uint8_t spare_addr[2][16];
			int more = n == NL_CONN_MAX; /* one more tells the list is cut */
			if (!tcp(atoi(e->d_name), more ? &spare : &cs.msg[n], more ? spare_addr : cs.addr[n]))
				continue;
			if (more) {
				truncated = 1;
				break;
			}
			cs.ptr[n] = &cs.msg[n];
			n++;
		}
		closedir(dir);
	}
	d->n_connections = n;
	d->connections = n ? cs.ptr : NULL;
	d->connections_truncated = truncated;
}
