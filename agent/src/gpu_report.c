/* Netloom MPI agent: the GPU section of a snapshot (buffer kinds per
 * function and per peer), read from the counters the wrappers keep once
 * the process has CUDA (nl.h, nl_gpu_bufs). Reporting thread and
 * MPI_Finalize only. */

#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "netloom/agent/v1/agent.pb-c.h"

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

static uint64_t ld(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* kinds fills a BufferKinds from one side (d) of c; NULL when all zero */
static BufferKinds *kinds(struct section *s, const struct nl_gpu_counts *c, int d)
{
	uint64_t any = 0;
	for (int k = 0; k < NL_NKIND; k++)
		any |= ld(&c->b[d][k]) | ld(&c->m[d][k]);
	if (!any)
		return NULL;
	BufferKinds *b = &s->kinds[s->nkinds];
	Traffic *t = &s->traffic[s->nkinds * NL_NKIND];
	s->nkinds++;
	netloom__agent__v1__buffer_kinds__init(b);
	Traffic **slot[NL_NKIND] = {&b->pageable, &b->pinned, &b->device, &b->managed};
	for (int k = 0; k < NL_NKIND; k++) {
		netloom__agent__v1__traffic__init(&t[k]);
		t[k].bytes = ld(&c->b[d][k]);
		t[k].msgs = ld(&c->m[d][k]);
		if (t[k].bytes || t[k].msgs)
			*slot[k] = &t[k];
	}
	return b;
}

static uint64_t peer_bytes(const struct nl_gpu_counts *c)
{
	uint64_t b = 0;
	for (int d = 0; d < 2; d++)
		for (int k = 0; k < NL_NKIND; k++)
			b += ld(&c->b[d][k]) + ld(&c->m[d][k]);
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
		BufferKinds *snd = kinds(s, &nl_gfns[f], 0), *rcv = kinds(s, &nl_gfns[f], 1);
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
	const struct nl_gpu_counts *gp = __atomic_load_n(&nl_gpeers, __ATOMIC_ACQUIRE);
	/* the GPU_PEERS busiest peers: a running minimum replaced (few peers
	 * have traffic; kept simple, GPU_PEERS x peers at worst) */
	int pick[GPU_PEERS], npick = 0;
	for (int w = 0; gp && w < nl_world_size; w++) {
		uint64_t b = peer_bytes(&gp[w]);
		if (!b)
			continue;
		if (npick < GPU_PEERS) {
			pick[npick++] = w;
			continue;
		}
		int low = 0;
		for (int i = 1; i < npick; i++)
			if (peer_bytes(&gp[pick[i]]) < peer_bytes(&gp[pick[low]]))
				low = i;
		if (peer_bytes(&gp[pick[low]]) < b)
			pick[low] = w;
	}
	for (int i = 0; i < npick; i++) {
		GpuPeer *p = &s->peers[i];
		netloom__agent__v1__gpu_peer__init(p);
		p->peer = (uint32_t)pick[i];
		p->sent_from = kinds(s, &gp[pick[i]], 0);
		p->received_into = kinds(s, &gp[pick[i]], 1);
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
