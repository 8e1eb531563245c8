/* Netloom agent reporting: the helper thread that snapshots the counters every
 * interval, the final report at MPI_Finalize and the offline profile file.
 * The snapshot (take) is this file's; sending it as UDP datagrams and
 * writing the file are wire.c's, which knows nothing of MPI. Nothing here
 * calls MPI. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "state.h"
#include "auth.h"
#include "conn.h"
#include "env.h"
#include "snapshot.h"
#include "netloom/agent/v1/agent.pb-c.h"
#include "wire.h"

typedef Netloom__Agent__V1__Datagram Datagram;
typedef Netloom__Agent__V1__Traffic Traffic;
typedef Netloom__Agent__V1__Process Process;
typedef Netloom__Agent__V1__PeerTraffic PeerTraffic;
typedef Netloom__Agent__V1__NodeTraffic NodeTraffic;
typedef Netloom__Agent__V1__FunctionStat FunctionStat;
typedef Netloom__Agent__V1__Region Region;


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
	/* netloom_reorder calls (reorder.c); since points into evs */
	struct nl_reorder_ev evs[NL_MAX_REORDERS];
	Netloom__Agent__V1__Reorder reorders[NL_MAX_REORDERS];
	Netloom__Agent__V1__Reorder *reorderp[NL_MAX_REORDERS];
};

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
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
	for (int i = 0; i < nl_snap_world(); i++) {
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
		t->p2p = nl_traffic(&s->ntraffic[3 * s->nnodes], ns[NL_P2P], ns[NL_NCLASS + NL_P2P]);
		t->coll = nl_traffic(&s->ntraffic[3 * s->nnodes + 1], ns[NL_COLL], ns[NL_NCLASS + NL_COLL]);
		t->rma = nl_traffic(&s->ntraffic[3 * s->nnodes + 2], ns[NL_RMA], ns[NL_NCLASS + NL_RMA]);
		s->nodep[s->nnodes++] = t;
	}
	s->head.n_nodes = s->nnodes;
	s->head.nodes = s->nodep;
	s->proc.intra_node = nl_traffic(&s->intra, side[0][0], side[0][1]);
	s->proc.inter_node = nl_traffic(&s->inter, side[1][0], side[1][1]);
	free(sum);
}

static int take(struct snapshot *s, int final, int all_peers)
{
	memset(s, 0, sizeof *s);
	nl_nodemap_load(); /* PMIx is up: take runs before MPI_Finalize's PMPI_Finalize */
	int n = nl_snap_world();
	double npt = nl_snap_ns_per_tick();

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
	Process *p = &s->proc;
	const struct nl_ident id = {.job_id = nl_agent.job_id, .node = nl_agent.node, .host = nl_agent.host,
				    .library = nl_agent.mpi_library, .program = nl_agent.program, .user = nl_agent.user,
				    .rank = (uint32_t)nl_snap_rank(), .world = (uint32_t)n,
				    .start_unix_ns = nl_agent.start_unix_ns, .wall_start_mono_ns = nl_agent.wall_start_mono_ns,
				    .interval_s = nl_agent.interval_s};
	nl_snapshot_frame(d, p, &id, nl_agent.seq++, final, nl_agent.datagrams_dropped);

	int active = 0; /* peers with traffic, as the application asked or as the library sent */
	int phys = nl_snap_physical();
	for (int i = 0; i < n; i++) {
		uint64_t *row = &pb[(size_t)i * 2 * NL_NCLASS];
		uint64_t msgs = 0;
		struct nl_peer_snap ps;
		nl_snap_peer(i, &ps);
		for (int c = 0; c < NL_NCLASS; c++) {
			row[c] = ps.bytes[c];
			row[NL_NCLASS + c] = ps.msgs[c];
			tot[i] += row[c];
			msgs += row[NL_NCLASS + c];
		}
		struct nl_monitored m;
		for (int c = 0; phys && nl_snap_monitored(i, &m) && c <= NL_FETCHED; c++)
			msgs += m.msgs[c];
		active += tot[i] || msgs;
		order[i] = i;
	}

	/* the process, beyond the frame */
	if (*nl_trace_dir())
		p->trace_dir = (char *)nl_trace_dir();
	p->mpiio_read_bytes = nl_snap_io(0);
	p->mpiio_write_bytes = nl_snap_io(1);

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
		struct nl_fn_snap fn;
		nl_snap_fn(f, &fn);
		uint64_t calls = fn.calls, ticks = fn.ticks, wait = fn.wait;
		if (ticks < reported_ticks[f])
			ticks = reported_ticks[f];
		reported_ticks[f] = ticks;
		if (!calls)
			continue;
		FunctionStat *fs = &s->fns[s->nfns];
		netloom__agent__v1__function_stat__init(fs);
		fs->name = (char *)nl_fn_names[f];
		fs->calls = calls;
		fs->time_ns = reported_ns[f] = max_u64((uint64_t)((double)ticks * npt), reported_ns[f]);
		fs->wait_ns = reported_wait_ns[f] = max_u64((uint64_t)((double)wait * npt), reported_wait_ns[f]);
		mpi_ns += fs->time_ns + fs->wait_ns;
		fs->bytes_sent = fn.sent;
		fs->bytes_received = fn.recvd;
		s->fnp[s->nfns++] = fs;
	}
	p->mpi_seconds = (double)mpi_ns / 1e9;
	/* A sampled estimate can pass the wall time it was measured over (a
	 * rank descheduled in one sampled call adds that stall N times): the
	 * process spent at most its wall time in MPI, as a region is capped at
	 * its own. The functions keep their estimates. */
	if (p->mpi_seconds > p->wall_seconds)
		p->mpi_seconds = p->wall_seconds;
	if (p->mpi_seconds < reported_mpi)
		p->mpi_seconds = reported_mpi;
	reported_mpi = p->mpi_seconds;
	d->n_functions = s->nfns;
	d->functions = s->fnp;
	nl_gpu_take(d); /* the GPU section (gpu_report.c), when the process has CUDA */
	nl_conn_take(d); /* the process's TCP connections (conn.c), for sFlow's flows to jobs */

	/* the reorderings (chunk 0 only, like the regions) */
	int nev = 0;
	uint64_t nev_total = 0;
	nl_reorders_copy(s->evs, &nev, &nev_total);
	for (int i = 0; i < nev; i++) {
		Netloom__Agent__V1__Reorder *o = &s->reorders[i];
		const struct nl_reorder_ev *e = &s->evs[i];
		netloom__agent__v1__reorder__init(o);
		o->index = (uint32_t)i;
		o->time_unix_ns = e->unix_ns;
		o->ranks = (uint32_t)e->ranks;
		o->comm_world = e->comm_world;
		o->nodes = (uint32_t)e->nodes;
		o->method = (char *)(e->scotch ? "scotch" : "kept");
		o->moved = (uint32_t)e->moved;
		o->old_rank = (uint32_t)e->old_rank;
		o->new_rank = (uint32_t)e->new_rank;
		o->inter_node_before = e->before;
		o->inter_node_after = e->after;
		o->total_bytes = e->total;
		o->since = s->evs[i].since;
		o->seconds = e->seconds;
		o->map_seconds = e->map_seconds;
		s->reorderp[i] = o;
	}
	d->n_reorders = (size_t)nev;
	d->reorders = nev ? s->reorderp : NULL;

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
		if (!nl_snap_mt() && r->mpi_time_ns > r->time_ns)
			r->mpi_time_ns = r->time_ns;
		r->wait_ns = (uint64_t)((double)regs[i].wait_ticks * npt);
		if (r->wait_ns > r->mpi_time_ns)
			r->wait_ns = r->mpi_time_ns;
		r->p2p = nl_traffic(&s->rtraffic[3 * i], regs[i].bytes[NL_P2P], regs[i].msgs[NL_P2P]);
		r->coll = nl_traffic(&s->rtraffic[3 * i + 1], regs[i].bytes[NL_COLL], regs[i].msgs[NL_COLL]);
		r->rma = nl_traffic(&s->rtraffic[3 * i + 2], regs[i].bytes[NL_RMA], regs[i].msgs[NL_RMA]);
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
		if (phys)
			nl_snap_monitored(i, &m);
		for (int c = 0; c <= NL_FETCHED; c++)
			any |= m.bytes[c] || m.msgs[c];
		for (int c = 0; c < NL_NCLASS; c++)
			any |= row[c] || row[NL_NCLASS + c];
		if (!any)
			continue;
		PeerTraffic *pt = &s->peers[s->npeers];
		Traffic *tr = &s->ptraffic[(size_t)7 * s->npeers];
		netloom__agent__v1__peer_traffic__init(pt);
		pt->peer = (uint32_t)i;
		pt->p2p = nl_traffic(&tr[0], row[NL_P2P], row[NL_NCLASS + NL_P2P]);
		pt->coll = nl_traffic(&tr[1], row[NL_COLL], row[NL_NCLASS + NL_COLL]);
		pt->rma = nl_traffic(&tr[2], row[NL_RMA], row[NL_NCLASS + NL_RMA]);
		/* every row of a rank whose library tells what it sent carries
		 * it, zeros too: the daemon then knows the rank's rows are physical */
		pt->monitored_p2p = phys ? nl_traffic0(&tr[3], m.bytes[NL_P2P], m.msgs[NL_P2P]) : NULL;
		pt->monitored_coll = nl_traffic(&tr[4], m.bytes[NL_COLL], m.msgs[NL_COLL]);
		pt->monitored_rma = nl_traffic(&tr[5], m.bytes[NL_RMA], m.msgs[NL_RMA]);
		pt->monitored_fetched = nl_traffic(&tr[6], m.bytes[NL_FETCHED], m.msgs[NL_FETCHED]);
		uint64_t *dst = &s->hist[(size_t)NL_NBINS * s->npeers];
		if (nl_snap_hist(i, dst)) {
			size_t top = 0;
			for (size_t b = 0; b < NL_NBINS; b++)
				if (dst[b])
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
	nl_gpu_take_free(&s->head);
	for (size_t i = 0; i < s->nregions; i++)
		free(s->regions[i].name);
	snapshot_free(s);
}

/* ------------------------------------------------- sending (wire.c) */

static void send_snapshot(struct snapshot *s)
{
	nl_agent.datagrams_dropped += nl_wire_send(&s->head);
}

/* write_profile writes DIR/<job>/rank-<N>.pb (wire.c), then the replay
 * trace beside it. */
static void write_profile(struct snapshot *s)
{
	char dir[1400];
	if (nl_wire_write_profile(nl_agent.output_dir, &s->head, dir, sizeof dir) == 0)
		nl_trace_write(dir);
}

/* ------------------------------------------------- helper thread */

static void *helper(void *arg)
{
	(void)arg;
	/* credentials from the start, off the application's thread (resolve
	 * may ask DNS) */
	if (nl_wire_resolve() == 0) {
		nl_auth_start(nl_agent.job_id, nl_snap_rank());
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
	uint64_t world = (uint64_t)nl_snap_world();
	if (world > 0)
		nl_timespec_add(&next, ns / 2 / world + ns / world * (uint64_t)nl_snap_rank());
	else
		nl_timespec_add(&next, ns);
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
		nl_timespec_add(&next, (uint64_t)(nl_agent.interval_s * 1e9));
	}
	pthread_mutex_unlock(&nl_agent.lock);
	return NULL;
}

void nl_report_start(void)
{
	nl_wire_init();
	nl_cond_monotonic(&nl_agent.wake);
	/* the helper takes no signal meant for the application */
	nl_agent.helper_running = nl_thread(&nl_agent.helper, 0, helper) == 0;
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
