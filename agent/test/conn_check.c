/* conn.c against the kernel: this process opens N TCP connections to
 * itself over the machine's first non-loopback IPv4 and IPv6 addresses
 * (both ends in the process: 2N established sockets), then checks that
 * nl_conn_take lists each end as getsockname/getpeername give it, at most
 * NL_CONN_MAX with connections_truncated set when there were more, a
 * loopback connection left out, and times a snapshot's scan.
 *   agent/test/conn.sh [N ...]   (after make) */
#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

struct end {
	uint8_t l[16], r[16];
	size_t len;
	unsigned lp, rp;
	int seen;
};

static struct end ends[4096];
static int nends;

static void addr_of(const struct sockaddr_storage *s, uint8_t *a, size_t *len, unsigned *port)
{
	if (s->ss_family == AF_INET) {
		const struct sockaddr_in *v = (const void *)s;
		memcpy(a, &v->sin_addr, 4);
		*len = 4;
		*port = ntohs(v->sin_port);
	} else {
		const struct sockaddr_in6 *v = (const void *)s;
		memcpy(a, &v->sin6_addr, 16);
		*len = 16;
		*port = ntohs(v->sin6_port);
	}
}

static void record(int fd)
{
	struct sockaddr_storage l, r;
	socklen_t ll = sizeof l, rl = sizeof r;
	if (getsockname(fd, (void *)&l, &ll) || getpeername(fd, (void *)&r, &rl)) {
		perror("getsockname");
		exit(1);
	}
	struct end *e = &ends[nends++];
	addr_of(&l, e->l, &e->len, &e->lp);
	addr_of(&r, e->r, &e->len, &e->rp);
}

/* connect n times to itself at a (family af); both ends recorded */
static void connect_self(const struct sockaddr *a, socklen_t alen, int af, int n)
{
	int ls = socket(af, SOCK_STREAM, 0);
	struct sockaddr_storage s;
	memcpy(&s, a, alen);
	((struct sockaddr_in *)&s)->sin_port = 0; /* same offset in sockaddr_in6 */
	if (ls < 0 || bind(ls, (void *)&s, alen) || listen(ls, 128)) {
		perror("listen");
		exit(1);
	}
	socklen_t sl = alen;
	getsockname(ls, (void *)&s, &sl);
	for (int i = 0; i < n; i++) {
		int c = socket(af, SOCK_STREAM, 0);
		if (c < 0 || connect(c, (void *)&s, alen)) {
			perror("connect");
			exit(1);
		}
		int acc = accept(ls, NULL, NULL);
		if (acc < 0) {
			perror("accept");
			exit(1);
		}
		record(c);
		record(acc);
	}
}

static int nfds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n - 3; /* ., .. and the directory's own */
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 8;
	struct ifaddrs *ifs, *v4 = NULL, *v6 = NULL;
	if (getifaddrs(&ifs)) {
		perror("getifaddrs");
		return 1;
	}
	for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
		if (!i->ifa_addr)
			continue;
		if (i->ifa_addr->sa_family == AF_INET && !v4 && ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr != htonl(INADDR_LOOPBACK))
			v4 = i;
		const struct in6_addr *a6 = &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
		if (i->ifa_addr->sa_family == AF_INET6 && !v6 && !IN6_IS_ADDR_LOOPBACK(a6) && !IN6_IS_ADDR_LINKLOCAL(a6))
			v6 = i;
	}
	if (!v4) {
		fprintf(stderr, "conn_check: no non-loopback IPv4 address\n");
		return 1;
	}
	int n6 = v6 ? n / 4 : 0;
	connect_self(v4->ifa_addr, sizeof(struct sockaddr_in), AF_INET, n - n6);
	if (n6)
		connect_self(v6->ifa_addr, sizeof(struct sockaddr_in6), AF_INET6, n6);
	/* a loopback connection: left out */
	struct sockaddr_in lo = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int keep = nends;
	connect_self((void *)&lo, sizeof lo, AF_INET, 1);
	nends = keep;

	Netloom__Agent__V1__Datagram d;
	netloom__agent__v1__datagram__init(&d);
	nl_conn_take(&d);
	int want = nends < NL_CONN_MAX ? nends : NL_CONN_MAX, bad = 0;
	if ((int)d.n_connections != want || d.connections_truncated != (nends > NL_CONN_MAX)) {
		fprintf(stderr, "conn_check: %zu connections (truncated %d), want %d of %d\n", d.n_connections,
			(int)d.connections_truncated, want, nends);
		bad = 1;
	}
	for (size_t i = 0; i < d.n_connections; i++) {
		Netloom__Agent__V1__Connection *c = d.connections[i];
		int found = 0;
		for (int j = 0; j < nends && !found; j++) {
			struct end *e = &ends[j];
			found = !e->seen && strcmp(c->kind, "tcp") == 0 && c->local_addr.len == e->len && c->remote_addr.len == e->len &&
				memcmp(c->local_addr.data, e->l, e->len) == 0 && memcmp(c->remote_addr.data, e->r, e->len) == 0 &&
				c->local_port == e->lp && c->remote_port == e->rp && c->peer == 0xFFFFFFFFu;
			e->seen |= found;
		}
		if (!found) {
			char l[64], r[64];
			inet_ntop(c->local_addr.len == 4 ? AF_INET : AF_INET6, c->local_addr.data, l, sizeof l);
			inet_ntop(c->remote_addr.len == 4 ? AF_INET : AF_INET6, c->remote_addr.data, r, sizeof r);
			fprintf(stderr, "conn_check: connection %s:%u -> %s:%u is none of the process's sockets\n", l, c->local_port, r,
				c->remote_port);
			bad = 1;
		}
	}
	/* the scan's cost per snapshot */
	int iters = 2000;
	double t = now_us();
	for (int i = 0; i < iters; i++)
		nl_conn_take(&d);
	double per = (now_us() - t) / iters;
	printf("conn: %d established sockets (%d IPv6), %zu sent%s, %d fds: %.1f us a snapshot\n", nends, 2 * n6, d.n_connections,
	       d.connections_truncated ? " (truncated)" : "", nfds(), per);
	freeifaddrs(ifs);
	return bad;
}
