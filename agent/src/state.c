/* Netloom agent: the counters as the rooms above the accounting read them
 * (state.h), copied out of hot.c's and core.c's. */

#include <string.h>

#include "state.h"

extern uint64_t nl_io_bytes[2]; /* core.c */

static uint64_t ld(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

void nl_snap_fn(int f, struct nl_fn_snap *o)
{
	const struct nl_fn *p = &nl_fns[f];
	o->calls = ld(&p->calls);
	o->ticks = nl_fn_ticks(f);
	o->wait = ld(&p->wait);
	o->sent = ld(&p->sent);
	o->recvd = ld(&p->recvd);
}

void nl_snap_peer(int w, struct nl_peer_snap *o)
{
	const struct nl_peer *p = &nl_peers[w];
	for (int c = 0; c < NL_NCLASS; c++) {
		o->bytes[c] = ld(&p->bytes[c]);
		o->msgs[c] = ld(&p->msgs[c]);
	}
}

int nl_snap_hist(int w, uint64_t bins[NL_NBINS])
{
	const uint64_t *h = __atomic_load_n(&nl_peers[w].hist, __ATOMIC_ACQUIRE);
	if (!h)
		return 0;
	for (int b = 0; b < NL_NBINS; b++)
		bins[b] = ld(&h[b]);
	return 1;
}

int nl_snap_monitored(int w, struct nl_monitored *o)
{
	const struct nl_monitored *m = __atomic_load_n(&nl_agent.monitored, __ATOMIC_ACQUIRE);
	int ok = m && w < nl_agent.monitored_size;
	for (int c = 0; c <= NL_FETCHED; c++) {
		o->bytes[c] = ok ? ld(&m[w].bytes[c]) : 0;
		o->msgs[c] = ok ? ld(&m[w].msgs[c]) : 0;
	}
	return ok;
}

int nl_snap_physical(void)
{
	return __atomic_load_n(&nl_agent.monitored, __ATOMIC_ACQUIRE) && nl_physical_known();
}

static void gpu_copy(struct nl_gpu_counts *o, const struct nl_gpu_counts *c)
{
	for (int d = 0; d < 2; d++)
		for (int k = 0; k < NL_NKIND; k++) {
			o->b[d][k] = ld(&c->b[d][k]);
			o->m[d][k] = ld(&c->m[d][k]);
		}
}

void nl_snap_gpu_fn(int f, struct nl_gpu_counts *o)
{
	gpu_copy(o, &nl_gfns[f]);
}

int nl_snap_gpu_peer(int w, struct nl_gpu_counts *o)
{
	const struct nl_gpu_counts *g = __atomic_load_n(&nl_gpeers, __ATOMIC_ACQUIRE);
	if (!g) {
		memset(o, 0, sizeof *o);
		return 0;
	}
	gpu_copy(o, &g[w]);
	return 1;
}

int nl_snap_world(void)
{
	return nl_world_size;
}

int nl_snap_rank(void)
{
	return nl_world_rank_self;
}

int nl_snap_mt(void)
{
	return nl_mt;
}

int nl_snap_running(void)
{
	return nl_agent.started && !nl_agent.stopped && __atomic_load_n(&nl_peers, __ATOMIC_ACQUIRE);
}

double nl_snap_ns_per_tick(void)
{
	return nl_ns_per_tick();
}

uint64_t nl_snap_io(int write)
{
	return ld(&nl_io_bytes[write ? 1 : 0]);
}
