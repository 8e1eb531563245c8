/* Netloom MPI agent: the GPU section of a snapshot (buffer kinds per
 * function and per peer), read from the counters the wrappers keep once
 * the process has CUDA (hot.h, nl_gpu_bufs), through state.h. Reporting thread and
 * MPI_Finalize only. */

#include <stdlib.h>
#include <string.h>

#include "state.h"
#include "netloom/agent/v1/agent.pb-c.h"
#include "snapshot.h"

typedef Netloom__Agent__V1__Traffic Traffic;
typedef Netloom__Agent__V1__BufferKinds BufferKinds;
typedef Netloom__Agent__V1__Gpu Gpu;
typedef Netloom__Agent__V1__GpuFunction GpuFunction;
typedef Netloom__Agent__V1__GpuPeer GpuPeer;

/* the peers with the most bytes, at most: a section that fits a datagram */
#define GPU_PEERS 256

struct section {
	Gpu gpu;
	GpuFunction fns[NL_NFUNCS], *fnp[NL_NFUNCS];
	GpuPeer peers[GPU_PEERS], *peerp[GPU_PEERS];
	BufferKinds kinds[2 * (NL_NFUNCS + GPU_PEERS)];
	Traffic traffic[2 * (NL_NFUNCS + GPU_PEERS) * NL_NKIND];
	size_t nkinds;
};

/* kinds fills a BufferKinds from one side (d) of c, a copy (state.h); NULL
 * when all zero */
static BufferKinds *kinds(struct section *s, const struct nl_gpu_counts *c, int d)
{
	uint64_t any = 0;
	for (int k = 0; k < NL_NKIND; k++)
		any |= c->b[d][k] | c->m[d][k];
	if (!any)
		return NULL;
	BufferKinds *b = &s->kinds[s->nkinds];
	Traffic *t = &s->traffic[s->nkinds * NL_NKIND];
	s->nkinds++;
	netloom__agent__v1__buffer_kinds__init(b);
	Traffic **slot[NL_NKIND] = {&b->pageable, &b->pinned, &b->device, &b->managed};
	for (int k = 0; k < NL_NKIND; k++)
		*slot[k] = nl_traffic(&t[k], c->b[d][k], c->m[d][k]);
	return b;
}

static uint64_t peer_bytes(const struct nl_gpu_counts *c)
{
	uint64_t b = 0;
	for (int d = 0; d < 2; d++)
		for (int k = 0; k < NL_NKIND; k++)
			b += c->b[d][k] + c->m[d][k];
	return b;
}

void nl_gpu_take(struct Netloom__Agent__V1__Datagram *d)
{
	nl_gpu_check();
	const char *err = nl_gpu_error();
	if (!nl_gpu_on && !*err)
		return; /* no CUDA: no section */
	struct section *s = calloc(1, sizeof *s);
	if (!s)
		return;
	netloom__agent__v1__gpu__init(&s->gpu);
	s->gpu.probed = nl_gpu_on != 0;
	s->gpu.probe_error = (char *)err;
	for (int f = 0; f < NL_NFUNCS && nl_gpu_on; f++) {
		struct nl_gpu_counts c;
		nl_snap_gpu_fn(f, &c);
		BufferKinds *snd = kinds(s, &c, 0), *rcv = kinds(s, &c, 1);
		if (!snd && !rcv)
			continue;
		GpuFunction *g = &s->fns[s->gpu.n_functions];
		netloom__agent__v1__gpu_function__init(g);
		g->name = (char *)nl_fn_names[f];
		g->send = snd;
		g->recv = rcv;
		s->fnp[s->gpu.n_functions++] = g;
	}
	s->gpu.functions = s->fnp;
	/* the GPU_PEERS busiest peers: a running minimum replaced (few peers
	 * have traffic; kept simple, GPU_PEERS x peers at worst) */
	int pick[GPU_PEERS], npick = 0;
	uint64_t pickb[GPU_PEERS];
	struct nl_gpu_counts c;
	for (int w = 0; w < nl_snap_world() && nl_snap_gpu_peer(w, &c); w++) {
		uint64_t b = peer_bytes(&c);
		if (!b)
			continue;
		if (npick < GPU_PEERS) {
			pickb[npick] = b;
			pick[npick++] = w;
			continue;
		}
		int low = 0;
		for (int i = 1; i < npick; i++)
			if (pickb[i] < pickb[low])
				low = i;
		if (pickb[low] < b) {
			pick[low] = w;
			pickb[low] = b;
		}
	}
	for (int i = 0; i < npick; i++) {
		GpuPeer *p = &s->peers[i];
		netloom__agent__v1__gpu_peer__init(p);
		p->peer = (uint32_t)pick[i];
		nl_snap_gpu_peer(pick[i], &c);
		p->sent_from = kinds(s, &c, 0);
		p->received_into = kinds(s, &c, 1);
		s->peerp[i] = p;
	}
	s->gpu.n_peers = (size_t)npick;
	s->gpu.peers = s->peerp;
	d->gpu = &s->gpu;
	nl_gpu_age(); /* ask again in the next interval: memory may have been freed and mapped anew */
}

void nl_gpu_take_free(struct Netloom__Agent__V1__Datagram *d)
{
	free(d->gpu); /* the section's first member */
	d->gpu = NULL;
}
