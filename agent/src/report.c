/* Netloom agent reporting: the helper thread that snapshots the counters every
 * interval and sends them as UDP datagrams, the final report at MPI_Finalize
 * and the offline profile file. Nothing here calls MPI. */

#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "netloom/agent/v1/agent.pb-c.h"

#define DGRAM_LIMIT (63 * 1024) /* chunks stay under 64 KiB */
#define DGRAM_MAX 65507        /* the largest UDP payload over IPv4 */

/* dgram_limit is DGRAM_LIMIT, or NETLOOM_DGRAM_LIMIT (tests force chunking with it). */
static size_t dgram_limit = DGRAM_LIMIT;
#define WIRE_VERSION 1

typedef Netloom__Agent__V1__Datagram Datagram;
typedef Netloom__Agent__V1__Traffic Traffic;
typedef Netloom__Agent__V1__Process Process;
typedef Netloom__Agent__V1__PeerTraffic PeerTraffic;
typedef Netloom__Agent__V1__NodeTraffic NodeTraffic;
typedef Netloom__Agent__V1__FunctionStat FunctionStat;
typedef Netloom__Agent__V1__Region Region;

extern uint64_t nl_io_bytes[2];
extern uint64_t nl_untracked;

/* ------------------------------------------------- /proc */

static void read_proc(Process *p)
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

/* ------------------------------------------------- snapshot */

struct snapshot {
	Datagram head;
	Process proc;
	Traffic intra, inter;
	size_t nfns, nregions, nnodes, npeers;
	FunctionStat *fns;
	FunctionStat **fnp;
	Region *regions;
	Region **regionp;
	Traffic *rtraffic; /* 3 per region */
	PeerTraffic *peers;
	PeerTraffic **peerp;
	Traffic *ptraffic; /* 7 per peer */
	NodeTraffic *nodes;
	NodeTraffic **nodep;
	Traffic *ntraffic; /* 3 per node */
	uint64_t *hist;    /* NL_NBINS per peer */
	int truncated;
};

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static uint64_t ld(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* traffic0 is traffic, zeros included. */
static Traffic *traffic0(Traffic *t, uint64_t bytes, uint64_t msgs)
{
	netloom__agent__v1__traffic__init(t);
	t->bytes = bytes;
	t->msgs = msgs;
	return t;
}

static Traffic *traffic(Traffic *t, uint64_t bytes, uint64_t msgs)
{
	if (!bytes && !msgs)
		return NULL;
	return traffic0(t, bytes, msgs);
}

static const uint64_t *sort_bytes; /* only the helper or finalize sorts, never both at once */

static int by_bytes_desc(const void *a, const void *b)
{
	uint64_t x = sort_bytes[*(const int *)a], y = sort_bytes[*(const int *)b];
	return x < y ? 1 : x > y ? -1 : *(const int *)a - *(const int *)b;
}

static void snapshot_free(struct snapshot *s)
{
	free(s->fns);
	free(s->fnp);
	free(s->regions);
	free(s->regionp);
	free(s->rtraffic);
	free(s->peers);
	free(s->peerp);
	free(s->ptraffic);
	free(s->hist);
	free(s->nodes);
	free(s->nodep);
	free(s->ntraffic);
	memset(s, 0, sizeof *s);
}

/* take builds a snapshot of the counters; with all_peers, every peer with
 * traffic is included however many there are.
 *
 * A rank knows its own node; the others' it knows only when the launcher
 * tells (launcher.c: learning them over MPI would be traffic the
 * application never asked for). Then it sends its traffic per destination
 * node as well, complete even when its peer rows are cut to the top K;
 * else the daemon makes node rows from the peer rows and the node every
 * rank reports of itself. */
static void node_rows(struct snapshot *s, const struct nl_nodemap *m, const uint64_t *pb)
{
	uint64_t *sum = calloc((size_t)m->nnodes * 2 * NL_NCLASS, sizeof(uint64_t));
	s->nodes = calloc((size_t)m->nnodes, sizeof *s->nodes);
	s->nodep = calloc((size_t)m->nnodes, sizeof *s->nodep);
	s->ntraffic = calloc((size_t)m->nnodes * 3, sizeof(Traffic));
	if (!sum || !s->nodes || !s->nodep || !s->ntraffic) {
		free(sum);
		return; /* no node rows: the daemon makes them from peer rows when it can */
	}
	uint64_t side[2][2] = {{0, 0}, {0, 0}}; /* intra, inter: bytes, msgs */
	for (int i = 0; i < nl_world_size; i++) {
		const uint64_t *row = &pb[(size_t)i * 2 * NL_NCLASS];
		int k = m->node_of[i];
		uint64_t *ns = &sum[(size_t)k * 2 * NL_NCLASS];
		for (int c = 0; c < 2 * NL_NCLASS; c++) {
			ns[c] += row[c];
			side[k != m->self][c >= NL_NCLASS] += row[c];
		}
	}
	for (int k = 0; k < m->nnodes; k++) {
		const uint64_t *ns = &sum[(size_t)k * 2 * NL_NCLASS];
		int any = 0;
		for (int c = 0; c < 2 * NL_NCLASS; c++)
			any |= ns[c] != 0;
		if (!any)
			continue;
		NodeTraffic *t = &s->nodes[s->nnodes];
		netloom__agent__v1__node_traffic__init(t);
		t->node = (char *)m->names[k];
		t->p2p = traffic(&s->ntraffic[3 * s->nnodes], ns[NL_P2P], ns[NL_NCLASS + NL_P2P]);
		t->coll = traffic(&s->ntraffic[3 * s->nnodes + 1], ns[NL_COLL], ns[NL_NCLASS + NL_COLL]);
		t->rma = traffic(&s->ntraffic[3 * s->nnodes + 2], ns[NL_RMA], ns[NL_NCLASS + NL_RMA]);
		s->nodep[s->nnodes++] = t;
	}
	s->head.n_nodes = s->nnodes;
	s->head.nodes = s->nodep;
	s->proc.intra_node = traffic(&s->intra, side[0][0], side[0][1]);
	s->proc.inter_node = traffic(&s->inter, side[1][0], side[1][1]);
	free(sum);
}

static int take(struct snapshot *s, int final, int all_peers)
{
	memset(s, 0, sizeof *s);
	nl_nodemap_load(); /* PMIx is up: take runs before MPI_Finalize's PMPI_Finalize */
	int n = nl_world_size;
	double npt = nl_ns_per_tick();

	/* per-peer counters, read once */
	uint64_t *pb = calloc((size_t)n * 2 * NL_NCLASS, sizeof(uint64_t));
	uint64_t *tot = calloc((size_t)n, sizeof(uint64_t));
	int *order = calloc((size_t)n, sizeof(int));
	s->fns = calloc(NL_NFUNCS, sizeof *s->fns);
	s->fnp = calloc(NL_NFUNCS, sizeof *s->fnp);
	s->regions = calloc(NL_MAX_REGIONS, sizeof *s->regions);
	s->regionp = calloc(NL_MAX_REGIONS, sizeof *s->regionp);
	s->rtraffic = calloc(NL_MAX_REGIONS * 3, sizeof(Traffic));
	s->peers = calloc((size_t)n, sizeof *s->peers);
	s->peerp = calloc((size_t)n, sizeof *s->peerp);
	s->ptraffic = calloc((size_t)n * 7, sizeof(Traffic));
	s->hist = calloc((size_t)n * NL_NBINS, sizeof(uint64_t));
	struct nl_region *regs = calloc(NL_MAX_REGIONS, sizeof *regs);
	if (!pb || !tot || !order || !s->fns || !s->fnp || !s->regions || !s->regionp || !s->rtraffic ||
	    !s->peers || !s->peerp || !s->ptraffic || !s->hist || !regs) {
		free(pb);
		free(tot);
		free(order);
		free(regs);
		snapshot_free(s);
		return -1;
	}

	Datagram *d = &s->head;
	netloom__agent__v1__datagram__init(d);
	d->version = WIRE_VERSION;
	d->job_id = nl_agent.job_id;
	d->rank = (uint32_t)nl_world_rank_self;
	d->world_size = (uint32_t)n;
	d->seq = nl_agent.seq++;
	d->time_unix_ns = nl_unix_ns();
	d->final = final;
	d->start_unix_ns = nl_agent.start_unix_ns;
	d->interval_ns = (uint64_t)(nl_agent.interval_s * 1e9);

	int active = 0; /* peers with traffic, as the application asked or as the library sent */
	const struct nl_monitored *mon = __atomic_load_n(&nl_agent.monitored, __ATOMIC_ACQUIRE);
	int phys = mon && nl_physical_known();
	int nmon = phys ? nl_agent.monitored_size : 0;
	for (int i = 0; i < n; i++) {
		uint64_t *row = &pb[(size_t)i * 2 * NL_NCLASS];
		uint64_t msgs = 0;
		for (int c = 0; c < NL_NCLASS; c++) {
			row[c] = ld(&nl_peers[i].bytes[c]);
			row[NL_NCLASS + c] = ld(&nl_peers[i].msgs[c]);
			tot[i] += row[c];
			msgs += row[NL_NCLASS + c];
		}
		for (int c = 0; i < nmon && c <= NL_FETCHED; c++)
			msgs += ld(&mon[i].msgs[c]);
		active += tot[i] || msgs;
		order[i] = i;
	}

	/* process */
	Process *p = &s->proc;
	netloom__agent__v1__process__init(p);
	p->node = nl_agent.node;
	p->host = nl_agent.host;
	p->pid = (uint32_t)getpid();
	p->mpi_library = nl_agent.mpi_library;
	p->program = nl_agent.program;
	p->user = nl_agent.user;
	if (*nl_trace_dir())
		p->trace_dir = (char *)nl_trace_dir();
	read_proc(p);
	p->wall_seconds = (double)(nl_mono_ns() - nl_agent.wall_start_mono_ns) / 1e9;
	p->mpiio_read_bytes = ld(&nl_io_bytes[0]);
	p->mpiio_write_bytes = ld(&nl_io_bytes[1]);
	p->datagrams_dropped = nl_agent.datagrams_dropped;
	d->process = p;

	/* functions: sampled times are estimates whose mean can fall as samples
	 * come in, but every reported counter is cumulative, so a function's time
	 * never goes below what an earlier snapshot said (snapshots are taken by
	 * one thread at a time: the helper, then MPI_Finalize after joining it). */
	static uint64_t reported_ticks[NL_NFUNCS];
	/* and in ns: the TSC rate is measured anew at each snapshot (npt), and
	 * at the first one, right after MPI_Init, over a few milliseconds under
	 * load it can be off enough that MPI_Init's ticks came out longer then
	 * than later (the daemon rejected a snapshot as counter_backwards) */
	static uint64_t reported_ns[NL_NFUNCS], reported_wait_ns[NL_NFUNCS];
	static double reported_mpi;
	/* The MPI time is the sum of the functions' as reported, each clamped
	 * on its own: a snapshot's MPI time then grows by no less than its
	 * waits, so no interval waits longer than it spent in MPI. */
	uint64_t mpi_ns = 0;
	for (int f = 0; f < NL_NFUNCS; f++) {
		uint64_t calls = ld(&nl_fns[f].calls);
		uint64_t ticks = nl_fn_ticks(f);
		if (ticks < reported_ticks[f])
			ticks = reported_ticks[f];
		reported_ticks[f] = ticks;
		uint64_t wait = ld(&nl_fns[f].wait);
		if (!calls)
			continue;
		FunctionStat *fs = &s->fns[s->nfns];
		netloom__agent__v1__function_stat__init(fs);
		fs->name = (char *)nl_fn_names[f];
		fs->calls = calls;
		fs->time_ns = reported_ns[f] = max_u64((uint64_t)((double)ticks * npt), reported_ns[f]);
		fs->wait_ns = reported_wait_ns[f] = max_u64((uint64_t)((double)wait * npt), reported_wait_ns[f]);
		mpi_ns += fs->time_ns + fs->wait_ns;
		fs->bytes_sent = ld(&nl_fns[f].sent);
		fs->bytes_received = ld(&nl_fns[f].recvd);
		s->fnp[s->nfns++] = fs;
	}
	p->mpi_seconds = (double)mpi_ns / 1e9;
	if (p->mpi_seconds < reported_mpi)
		p->mpi_seconds = reported_mpi;
	reported_mpi = p->mpi_seconds;
	d->n_functions = s->nfns;
	d->functions = s->fnp;

	/* regions */
	int nr = 0;
	nl_regions_copy(regs, &nr);
	for (int i = 0; i < nr; i++) {
		Region *r = &s->regions[i];
		netloom__agent__v1__region__init(r);
		r->name = regs[i].name;
		r->entries = regs[i].entries;
		r->time_ns = regs[i].time_ns;
		r->mpi_time_ns = (uint64_t)((double)regs[i].mpi_ticks * npt);
		/* sampled times are estimates: one thread cannot be in MPI longer than the region */
		if (!nl_mt && r->mpi_time_ns > r->time_ns)
			r->mpi_time_ns = r->time_ns;
		r->wait_ns = (uint64_t)((double)regs[i].wait_ticks * npt);
		if (r->wait_ns > r->mpi_time_ns)
			r->wait_ns = r->mpi_time_ns;
		r->p2p = traffic(&s->rtraffic[3 * i], regs[i].bytes[NL_P2P], regs[i].msgs[NL_P2P]);
		r->coll = traffic(&s->rtraffic[3 * i + 1], regs[i].bytes[NL_COLL], regs[i].msgs[NL_COLL]);
		r->rma = traffic(&s->rtraffic[3 * i + 2], regs[i].bytes[NL_RMA], regs[i].msgs[NL_RMA]);
		s->regionp[s->nregions++] = r;
	}
	d->n_regions = s->nregions;
	d->regions = s->regionp;

	const struct nl_nodemap *map = __atomic_load_n(&nl_agent.nodemap, __ATOMIC_ACQUIRE);
	if (map)
		node_rows(s, map, pb);

	/* peers: every one with traffic when they are few enough, else the top
	 * K by bytes (then, without node rows, the daemon cannot tell the
	 * traffic to each node) */
	int limit = n;
	if (!all_peers && active > nl_agent.peer_limit) {
		sort_bytes = tot;
		qsort(order, (size_t)n, sizeof(int), by_bytes_desc);
		limit = nl_agent.top_peers < n ? nl_agent.top_peers : n;
		s->truncated = 1;
	}
	for (int j = 0; j < limit; j++) {
		int i = order[j];
		uint64_t *row = &pb[(size_t)i * 2 * NL_NCLASS];
		struct nl_monitored m = {{0}, {0}};
		int any = 0;
		for (int c = 0; i < nmon && c <= NL_FETCHED; c++) {
			m.bytes[c] = ld(&mon[i].bytes[c]);
			m.msgs[c] = ld(&mon[i].msgs[c]);
			any |= m.bytes[c] || m.msgs[c];
		}
		for (int c = 0; c < NL_NCLASS; c++)
			any |= row[c] || row[NL_NCLASS + c];
		if (!any)
			continue;
		PeerTraffic *pt = &s->peers[s->npeers];
		Traffic *tr = &s->ptraffic[(size_t)7 * s->npeers];
		netloom__agent__v1__peer_traffic__init(pt);
		pt->peer = (uint32_t)i;
		pt->p2p = traffic(&tr[0], row[NL_P2P], row[NL_NCLASS + NL_P2P]);
		pt->coll = traffic(&tr[1], row[NL_COLL], row[NL_NCLASS + NL_COLL]);
		pt->rma = traffic(&tr[2], row[NL_RMA], row[NL_NCLASS + NL_RMA]);
		/* every row of a rank whose library tells what it sent carries
		 * it, zeros too: the daemon then knows the rank's rows are physical */
		pt->monitored_p2p = phys ? traffic0(&tr[3], m.bytes[NL_P2P], m.msgs[NL_P2P]) : NULL;
		pt->monitored_coll = traffic(&tr[4], m.bytes[NL_COLL], m.msgs[NL_COLL]);
		pt->monitored_rma = traffic(&tr[5], m.bytes[NL_RMA], m.msgs[NL_RMA]);
		pt->monitored_fetched = traffic(&tr[6], m.bytes[NL_FETCHED], m.msgs[NL_FETCHED]);
		const uint64_t *h = __atomic_load_n(&nl_peers[i].hist, __ATOMIC_ACQUIRE);
		if (h) {
			uint64_t *dst = &s->hist[(size_t)NL_NBINS * s->npeers];
			size_t top = 0;
			for (size_t b = 0; b < NL_NBINS; b++)
				if ((dst[b] = ld(&h[b])))
					top = b + 1;
			pt->n_size_histogram = top;
			pt->size_histogram = dst;
		}
		s->peerp[s->npeers++] = pt;
	}
	d->n_peers = s->npeers;
	d->peers = s->peerp;
	d->peers_truncated = s->truncated;

	free(pb);
	free(tot);
	free(order);
	/* region names live in regs; copy them into the snapshot's own storage */
	for (size_t i = 0; i < s->nregions; i++)
		s->regions[i].name = strdup(regs[i].name);
	free(regs);
	return 0;
}

static void take_free(struct snapshot *s)
{
	for (size_t i = 0; i < s->nregions; i++)
		free(s->regions[i].name);
	snapshot_free(s);
}

/* ------------------------------------------------- sending */

static int sock = -1, sock_family = -1;
static struct sockaddr_storage daemon_addr;
static socklen_t daemon_addrlen;
static char daemon_spec[512]; /* the host:port daemon_addr was resolved from */

/* resolve finds the daemon's address: NETLOOM_DAEMON, else the first line of
 * NETLOOM_DAEMON_FILE, $XDG_RUNTIME_DIR/netloom/agent-address or
 * /run/netloom/agent-address (read again each time: the daemon may start late). */
static int resolve(void)
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

/* send_snapshot sends s in chunks under DGRAM_LIMIT. A chunk that cannot be
 * sent is dropped and counted; this never blocks. */

/* send_datagram sends one datagram without blocking. Only the final report,
 * sent from MPI_Finalize where a short wait costs the application nothing,
 * waits (at most 4 x 50 ms) for socket space when the kernel has none. */
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

static void send_snapshot(struct snapshot *s)
{
	Datagram *d = &s->head;
	int have = resolve() == 0;
	if (have)
		nl_auth_start(); /* a daemon to send to: sign, when MUNGE is here */
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
	/* plan: chunk 0 carries process, functions, regions; nodes then peers fill chunks */
	size_t nitems = s->nnodes + s->npeers;
	size_t *cut = calloc(nitems + 2, sizeof(size_t)); /* item index where each chunk starts */
	if (!cut)
		return;
	Datagram base = *d;
	base.n_nodes = base.n_peers = 0;
	base.chunk = base.chunks = 0xffffffffu; /* room for the largest values */
	base.peers_truncated = 1;
	size_t head0 = netloom__agent__v1__datagram__get_packed_size(&base);
	base.process = NULL;
	base.n_functions = base.n_regions = 0;
	size_t headn = netloom__agent__v1__datagram__get_packed_size(&base);
	size_t nchunks = 1, cur = head0;
	cut[0] = 0;
	for (size_t i = 0; i < nitems; i++) {
		size_t sz = i < s->nnodes ? field_size(netloom__agent__v1__node_traffic__get_packed_size(s->nodep[i]))
		                          : field_size(netloom__agent__v1__peer_traffic__get_packed_size(s->peerp[i - s->nnodes]));
		if (cur + sz > limit && (nchunks == 1 || cur > headn)) { /* chunk 0 carries the process: never empty */
			cut[nchunks++] = i;
			cur = headn;
		}
		cur += sz;
	}
	cut[nchunks] = nitems;
	uint8_t *buf = malloc(DGRAM_MAX);
	for (size_t c = 0; buf && c < nchunks; c++) {
		Datagram k = *d;
		k.chunk = (uint32_t)c;
		k.chunks = (uint32_t)nchunks;
		if (c > 0) {
			k.process = NULL;
			k.n_functions = k.n_regions = 0;
		}
		size_t a = cut[c], b = cut[c + 1];
		size_t na = a < s->nnodes ? a : s->nnodes, nb = b < s->nnodes ? b : s->nnodes;
		k.nodes = s->nodep + na;
		k.n_nodes = nb - na;
		k.peers = s->peerp + (a - na);
		k.n_peers = (b - nb) - (a - na);
		size_t len = netloom__agent__v1__datagram__get_packed_size(&k);
		if (len + (sign ? NL_AUTH_OVERHEAD : 0) > DGRAM_MAX || !have) {
			nl_agent.datagrams_dropped += have;
			continue;
		}
		netloom__agent__v1__datagram__pack(&k, buf);
		if (sign && !(len = nl_auth_sign(buf, len, key))) {
			nl_agent.datagrams_dropped++;
			continue;
		}
		if (send_datagram(buf, len, k.final) != 0)
			nl_agent.datagrams_dropped++;
	}
	free(buf);
	free(cut);
	d->credential.data = NULL;
	d->credential.len = 0;
	explicit_bzero(key, sizeof key);
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

/* write_profile writes DIR/<job>/rank-<N>.pb: the final snapshot as one
 * Datagram (chunk 0 of 1, every peer), preceded by its length as a varint. */
static void write_profile(struct snapshot *s)
{
	char dir[1400], path[1500], tmp[1600];
	snprintf(dir, sizeof dir, "%s/%s", nl_agent.output_dir, nl_agent.job_id);
	if (mkdirs(dir) != 0) {
		fprintf(stderr, "netloom: cannot create %s: %s\n", dir, strerror(errno));
		return;
	}
	snprintf(path, sizeof path, "%s/rank-%d.pb", dir, nl_world_rank_self);
	snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
	Datagram k = s->head;
	k.chunk = 0;
	k.chunks = 1;
	size_t len = netloom__agent__v1__datagram__get_packed_size(&k);
	uint8_t *buf = malloc(len + 10);
	if (!buf)
		return;
	size_t h = 0;
	for (size_t v = len; ; v >>= 7) {
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
	nl_trace_write(dir);
}

/* ------------------------------------------------- helper thread */

static void add_ns(struct timespec *t, uint64_t ns)
{
	t->tv_sec += (time_t)(ns / 1000000000u);
	t->tv_nsec += (long)(ns % 1000000000u);
	if (t->tv_nsec >= 1000000000) {
		t->tv_sec++;
		t->tv_nsec -= 1000000000;
	}
}

static void *helper(void *arg)
{
	(void)arg;
	/* credentials from the start, off the application's thread (resolve
	 * may ask DNS) */
	if (resolve() == 0) {
		nl_auth_start();
		/* A first report at once, before the phase below: it tells the
		 * daemon this rank's node, which it needs to place the other
		 * ranks' traffic to this one (a rank knows no other's node), even
		 * in a job that ends before this rank's first phase. */
		nl_auth_wait_first(500);
		struct snapshot s;
		if (take(&s, 0, 0) == 0) {
			send_snapshot(&s);
			take_free(&s);
		}
	}
	pthread_mutex_lock(&nl_agent.lock);
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	/* The ranks of a job start together; their reports are spread over
	 * the interval (rank r of n first reports (r + 1/2) / n of an interval
	 * after MPI_Init, then every interval), so that the daemon sees a
	 * steady stream: the 16,384 ranks of a 1,024-node all-to-all job
	 * reporting in one second would be 350 MB at once, more than its
	 * socket buffer takes. */
	uint64_t ns = (uint64_t)(nl_agent.interval_s * 1e9);
	if (nl_world_size > 0)
		add_ns(&next, ns / 2 / (uint64_t)nl_world_size + ns / (uint64_t)nl_world_size * (uint64_t)nl_world_rank_self);
	else
		add_ns(&next, ns);
	while (!nl_agent.quit) {
		while (!nl_agent.quit && pthread_cond_timedwait(&nl_agent.wake, &nl_agent.lock, &next) != ETIMEDOUT)
			;
		if (nl_agent.quit)
			break;
		pthread_mutex_unlock(&nl_agent.lock);
		struct snapshot s;
		if (take(&s, 0, 0) == 0) {
			send_snapshot(&s);
			take_free(&s);
		}
		pthread_mutex_lock(&nl_agent.lock);
		add_ns(&next, (uint64_t)(nl_agent.interval_s * 1e9));
	}
	pthread_mutex_unlock(&nl_agent.lock);
	return NULL;
}

void nl_report_start(void)
{
	const char *lim = getenv("NETLOOM_DGRAM_LIMIT");
	if (lim && atol(lim) >= 256 && atol(lim) <= DGRAM_LIMIT)
		dgram_limit = (size_t)atol(lim);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&nl_agent.wake, &ca);
	pthread_condattr_destroy(&ca);

	/* the helper takes no signal meant for the application */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	nl_agent.helper_running = pthread_create(&nl_agent.helper, NULL, helper, NULL) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!nl_agent.helper_running)
		fprintf(stderr, "netloom: no helper thread: live reports disabled\n");
}

void nl_report_final(void)
{
	if (nl_agent.helper_running) {
		pthread_mutex_lock(&nl_agent.lock);
		nl_agent.quit = 1;
		pthread_cond_signal(&nl_agent.wake);
		pthread_mutex_unlock(&nl_agent.lock);
		pthread_join(nl_agent.helper, NULL);
		nl_agent.helper_running = 0;
	}
	/* a job shorter than munged's first answer: wait for it, briefly */
	nl_auth_wait_first(500);
	struct snapshot s;
	if (take(&s, 1, 0) == 0) {
		send_snapshot(&s);
		take_free(&s);
	}
	nl_auth_stop();
	if (*nl_agent.output_dir) {
		nl_agent.seq--; /* the file holds the same snapshot as the final report */
		if (take(&s, 1, 1) == 0) {
			write_profile(&s);
			take_free(&s);
		}
	}
	nl_nodemap_free();
}
