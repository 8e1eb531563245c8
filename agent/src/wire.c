/* Netloom agents' transport (wire.h): the daemon's address, a snapshot as
 * signed UDP datagrams in chunks, the offline profile file and /proc. The
 * MPI agent and the NCCL plugin both link it; it knows neither. */

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth.h"
#include "wire.h"

typedef Netloom__Agent__V1__Datagram Datagram;
typedef Netloom__Agent__V1__Process Process;

/* dgram_limit is NL_DGRAM_LIMIT, or NETLOOM_DGRAM_LIMIT (tests force chunking with it). */
static size_t dgram_limit = NL_DGRAM_LIMIT;

void nl_wire_init(void)
{
	const char *lim = getenv("NETLOOM_DGRAM_LIMIT");
	if (lim && atol(lim) >= 256 && atol(lim) <= NL_DGRAM_LIMIT)
		dgram_limit = (size_t)atol(lim);
}

/* ------------------------------------------------- /proc */

void nl_wire_read_proc(Process *p)
{
	char buf[4096];
	FILE *f;
	if ((f = fopen("/proc/self/stat", "r"))) {
		size_t n = fread(buf, 1, sizeof buf - 1, f);
		buf[n] = 0;
		fclose(f);
		char *s = strrchr(buf, ')');
		if (s) {
			/* fields after the command: 3 state ... 14 utime 15 stime ... 39 processor */
			unsigned long long v[40] = {0};
			int field = 3;
			for (char *tok = strtok(s + 2, " "); tok && field < 40; tok = strtok(NULL, " "), field++)
				v[field] = strtoull(tok, NULL, 10);
			double hz = (double)sysconf(_SC_CLK_TCK);
			p->cpu_user_seconds = (double)v[14] / hz;
			p->cpu_system_seconds = (double)v[15] / hz;
			p->cpu = (int32_t)v[39];
		}
	}
	if ((f = fopen("/proc/self/status", "r"))) {
		unsigned long long kb;
		while (fgets(buf, sizeof buf, f)) {
			if (sscanf(buf, "VmPeak: %llu", &kb) == 1)
				p->vm_peak = kb * 1024;
			else if (sscanf(buf, "VmSize: %llu", &kb) == 1)
				p->vm_size = kb * 1024;
			else if (sscanf(buf, "VmHWM: %llu", &kb) == 1)
				p->vm_hwm = kb * 1024;
			else if (sscanf(buf, "VmRSS: %llu", &kb) == 1)
				p->vm_rss = kb * 1024;
		}
		fclose(f);
	}
	if ((f = fopen("/proc/self/io", "r"))) {
		unsigned long long v;
		while (fgets(buf, sizeof buf, f)) {
			if (sscanf(buf, "read_bytes: %llu", &v) == 1)
				p->io_read_bytes = v;
			else if (sscanf(buf, "write_bytes: %llu", &v) == 1)
				p->io_write_bytes = v;
		}
		fclose(f);
	}
}

/* ------------------------------------------------- the daemon's address */

static int sock = -1, sock_family = -1;
static struct sockaddr_storage daemon_addr;
static socklen_t daemon_addrlen;
static char daemon_spec[512]; /* the host:port daemon_addr was resolved from */

int nl_wire_resolve(void)
{
	char spec[512] = "";
	const char *env = getenv("NETLOOM_DAEMON");
	if (env && *env) {
		snprintf(spec, sizeof spec, "%s", env);
	} else {
		char path[1024];
		const char *files[3] = {getenv("NETLOOM_DAEMON_FILE"), NULL, "/run/netloom/agent-address"};
		const char *xdg = getenv("XDG_RUNTIME_DIR");
		if (xdg && *xdg) {
			snprintf(path, sizeof path, "%s/netloom/agent-address", xdg);
			files[1] = path;
		}
		for (int i = 0; i < 3 && !*spec; i++) {
			if (!files[i] || !*files[i])
				continue;
			FILE *f = fopen(files[i], "r");
			if (!f)
				continue;
			if (!fgets(spec, sizeof spec, f))
				spec[0] = 0;
			fclose(f);
			spec[strcspn(spec, " \t\r\n")] = 0;
		}
	}
	if (!*spec)
		return -1;
	if (daemon_addrlen && strcmp(spec, daemon_spec) == 0)
		return 0;
	char host[512];
	snprintf(host, sizeof host, "%s", spec);
	char *port = strrchr(host, ':');
	if (!port)
		return -1;
	*port++ = 0;
	char *h = host;
	if (*h == '[') { /* [v6]:port */
		h++;
		h[strcspn(h, "]")] = 0;
	}
	struct addrinfo hints = {.ai_socktype = SOCK_DGRAM}, *res = NULL;
	if (getaddrinfo(*h ? h : "127.0.0.1", port, &hints, &res) != 0 || !res)
		return -1;
	memcpy(&daemon_addr, res->ai_addr, res->ai_addrlen);
	daemon_addrlen = res->ai_addrlen;
	int family = res->ai_family;
	freeaddrinfo(res);
	snprintf(daemon_spec, sizeof daemon_spec, "%s", spec);
	if (sock >= 0 && sock_family != family) {
		close(sock);
		sock = -1;
	}
	if (sock < 0) {
		sock = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		sock_family = family;
	}
	return sock >= 0 ? 0 : -1;
}

/* ------------------------------------------------- sending */

/* packed size of a length-delimited field holding a message of size n */
static size_t field_size(size_t n)
{
	size_t v = 1;
	while (n >= 128) {
		n >>= 7;
		v++;
	}
	return 1 + v + n;
}

/* send_datagram sends one datagram without blocking. Only the final report,
 * sent where a short wait costs the application nothing (MPI_Finalize, the
 * last NCCL communicator's end), waits (at most 4 x 50 ms) for socket space
 * when the kernel has none. */
static int send_datagram(const void *buf, size_t len, int final)
{
	for (int tries = 0;; tries++) {
		if (sendto(sock, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&daemon_addr, daemon_addrlen) == (ssize_t)len)
			return 0;
		if (!final || tries >= 4 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS))
			return -1;
		struct pollfd p = {.fd = sock, .events = POLLOUT};
		poll(&p, 1, 50);
	}
}

uint64_t nl_wire_send(Datagram *d)
{
	uint64_t dropped = 0;
	int have = nl_wire_resolve() == 0;
	if (have)
		nl_auth_start(d->job_id, (int)d->rank); /* a daemon to send to: sign, when MUNGE is here */
	/* the current credential goes into every chunk, the mac after each */
	char cred[NL_AUTH_CRED_MAX];
	uint8_t key[NL_AUTH_KEY];
	size_t cred_len = 0;
	int sign = have && nl_auth_get(cred, sizeof cred, &cred_len, key) == 0;
	size_t limit = dgram_limit;
	if (sign) {
		d->credential.data = (uint8_t *)cred;
		d->credential.len = cred_len;
		limit -= NL_AUTH_OVERHEAD;
	}
	/* plan: chunk 0 carries process, functions, regions, the GPU section, the connections;
	 * nodes then peers fill chunks */
	size_t nnodes = d->n_nodes, npeers = d->n_peers;
	size_t nitems = nnodes + npeers;
	size_t *cut = calloc(nitems + 2, sizeof(size_t)); /* item index where each chunk starts */
	if (!cut)
		goto out;
	Datagram base = *d;
	base.n_nodes = base.n_peers = 0;
	base.chunk = base.chunks = 0xffffffffu; /* room for the largest values */
	base.peers_truncated = 1;
	size_t head0 = netloom__agent__v1__datagram__get_packed_size(&base);
	base.process = NULL;
	base.n_functions = base.n_regions = base.n_reorders = base.n_connections = 0;
	base.connections_truncated = 0;
	base.gpu = NULL;
	size_t headn = netloom__agent__v1__datagram__get_packed_size(&base);
	size_t nchunks = 1, cur = head0;
	cut[0] = 0;
	for (size_t i = 0; i < nitems; i++) {
		size_t sz = i < nnodes ? field_size(netloom__agent__v1__node_traffic__get_packed_size(d->nodes[i]))
		                       : field_size(netloom__agent__v1__peer_traffic__get_packed_size(d->peers[i - nnodes]));
		if (cur + sz > limit && (nchunks == 1 || cur > headn)) { /* chunk 0 carries the process: never empty */
			cut[nchunks++] = i;
			cur = headn;
		}
		cur += sz;
	}
	cut[nchunks] = nitems;
	uint8_t *buf = malloc(NL_DGRAM_MAX);
	for (size_t c = 0; buf && c < nchunks; c++) {
		Datagram k = *d;
		k.chunk = (uint32_t)c;
		k.chunks = (uint32_t)nchunks;
		if (c > 0) {
			k.process = NULL;
			k.n_functions = k.n_regions = k.n_reorders = k.n_connections = 0;
			k.connections_truncated = 0;
			k.gpu = NULL;
		}
		size_t a = cut[c], b = cut[c + 1];
		size_t na = a < nnodes ? a : nnodes, nb = b < nnodes ? b : nnodes;
		k.nodes = d->nodes + na;
		k.n_nodes = nb - na;
		k.peers = d->peers + (a - na);
		k.n_peers = (b - nb) - (a - na);
		size_t len = netloom__agent__v1__datagram__get_packed_size(&k);
		if (len + (sign ? NL_AUTH_OVERHEAD : 0) > NL_DGRAM_MAX || !have) {
			dropped += have;
			continue;
		}
		netloom__agent__v1__datagram__pack(&k, buf);
		if (sign && !(len = nl_auth_sign(buf, len, key))) {
			dropped++;
			continue;
		}
		if (send_datagram(buf, len, k.final) != 0)
			dropped++;
	}
	free(buf);
	free(cut);
out:
	d->credential.data = NULL;
	d->credential.len = 0;
	explicit_bzero(key, sizeof key);
	return dropped;
}

/* ------------------------------------------------- offline profile */

static int mkdirs(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		int err = mkdir(path, 0755) != 0 && errno != EEXIST;
		*p = '/';
		if (err)
			return -1;
	}
	return mkdir(path, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

int nl_wire_write_profile(const char *output_dir, const Datagram *d, char *jobdir, size_t cap)
{
	char dir[1400], path[1500], tmp[1600];
	snprintf(dir, sizeof dir, "%s/%s", output_dir, d->job_id);
	if (jobdir && cap)
		snprintf(jobdir, cap, "%s", dir);
	if (mkdirs(dir) != 0) {
		fprintf(stderr, "netloom: cannot create %s: %s\n", dir, strerror(errno));
		return -1;
	}
	snprintf(path, sizeof path, "%s/rank-%d.pb", dir, (int)d->rank);
	snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
	Datagram k = *d;
	k.chunk = 0;
	k.chunks = 1;
	size_t len = netloom__agent__v1__datagram__get_packed_size(&k);
	uint8_t *buf = malloc(len + 10);
	if (!buf)
		return -1;
	size_t h = 0;
	for (size_t v = len;; v >>= 7) {
		buf[h++] = (uint8_t)((v & 0x7f) | (v >= 128 ? 0x80 : 0));
		if (v < 128)
			break;
	}
	netloom__agent__v1__datagram__pack(&k, buf + h);
	FILE *f = fopen(tmp, "wb");
	if (!f || fwrite(buf, 1, h + len, f) != h + len || fclose(f) != 0 || rename(tmp, path) != 0) {
		fprintf(stderr, "netloom: cannot write %s: %s\n", path, strerror(errno));
		unlink(tmp);
	}
	free(buf);
	return 0;
}
