/* Netloom agent: the mapping behind netloom_reorder (remap.h), the same kind
 * `netloom place` computes (internal/place): Scotch maps the communication
 * graph (each rank's 64 heaviest partners, both directions summed) onto a
 * tree-leaf architecture of the nodes the ranks run on and their cores
 * (links: 16 between nodes, 1 inside one), restricted to the cores the ranks
 * hold (SCOTCH_archSub); ranks Scotch put on a taken core go to the free one
 * that costs their partners least; the result is kept only if it cuts the
 * inter-node bytes. Scotch is loaded with dlopen at the first call
 * (NETLOOM_SCOTCH_LIB, else libscotch-7.0.so, else libscotch.so): it is
 * never a link dependency of the agent. No MPI here. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remap.h"

#define ERR_NO_SCOTCH 8 /* netloom.h's codes */
#define ERR_SCOTCH 9
#define ERR_NOMEM 11

#define MAX_PARTNERS 64 /* as internal/place's maxPeers */
#define NODE_COST 16    /* as internal/place's hopScale: a node's link vs a core's */

typedef int32_t snum; /* SCOTCH_Num: checked with SCOTCH_numSizeof */

static struct {
	int loaded;
	void *(*archAlloc)(void);
	void *(*graphAlloc)(void);
	void *(*stratAlloc)(void);
	int (*archInit)(void *);
	void (*archExit)(void *);
	int (*graphInit)(void *);
	void (*graphExit)(void *);
	int (*stratInit)(void *);
	void (*stratExit)(void *);
	void (*memFree)(void *);
	int (*archTleaf)(void *, snum, const snum *, const snum *);
	int (*archSub)(void *, void *, snum, const snum *);
	int (*graphBuild)(void *, snum, snum, const snum *, const snum *, const snum *, const snum *, snum, const snum *,
			  const snum *);
	int (*graphCheck)(const void *);
	int (*stratGraphMapBuild)(void *, snum, snum, double);
	int (*graphMap)(void *, const void *, void *, snum *);
	void (*randomReset)(void);
	int (*numSizeof)(void);
} sc;
static pthread_mutex_t sc_lock = PTHREAD_MUTEX_INITIALIZER;

static int scotch_load(char *err, size_t errlen)
{
	if (sc.loaded)
		return 0;
	const char *name = getenv("NETLOOM_SCOTCH_LIB");
	void *h = NULL;
	char why[512] = "";
	if (name && *name) {
		h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
		if (!h)
			snprintf(why, sizeof why, "%s", dlerror());
	} else {
		const char *names[] = {"libscotch-7.0.so", "libscotch.so", "libscotch-6.1.so"};
		for (size_t i = 0; !h && i < sizeof names / sizeof names[0]; i++)
			if (!(h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL)) && !*why)
				snprintf(why, sizeof why, "%s", dlerror());
	}
	if (!h) {
		snprintf(err, errlen, "cannot load Scotch: %s", why);
		return ERR_NO_SCOTCH;
	}
#define SYM(f)                                                                                 \
	if (!(*(void **)&sc.f = dlsym(h, "SCOTCH_" #f))) {                                     \
		snprintf(err, errlen, "Scotch lacks SCOTCH_%s (%s)", #f, name ? name : "libscotch"); \
		return ERR_NO_SCOTCH;                                                          \
	}
	SYM(archAlloc) SYM(graphAlloc) SYM(stratAlloc) SYM(archInit) SYM(archExit) SYM(graphInit) SYM(graphExit)
	SYM(stratInit) SYM(stratExit) SYM(memFree) SYM(archTleaf) SYM(archSub) SYM(graphBuild) SYM(graphCheck)
	SYM(stratGraphMapBuild) SYM(graphMap) SYM(randomReset) SYM(numSizeof)
#undef SYM
	if (sc.numSizeof() != (int)sizeof(snum)) {
		snprintf(err, errlen, "Scotch's SCOTCH_Num is %d bytes, the agent expects %d", sc.numSizeof(), (int)sizeof(snum));
		return ERR_NO_SCOTCH;
	}
	sc.loaded = 1;
	return 0;
}

static inline uint64_t w_of(const struct nl_remap_in *in, int i, int j)
{
	return in->bytes[(size_t)i * (size_t)in->n + (size_t)j] + in->bytes[(size_t)j * (size_t)in->n + (size_t)i];
}

/* inter_node: bytes (both ways) between ranks on different nodes when rank
 * r sits on node nodeof[r]. */
static uint64_t inter_node(const struct nl_remap_in *in, const int *nodeof)
{
	uint64_t s = 0;
	for (int i = 0; i < in->n; i++)
		for (int j = 0; j < in->n; j++)
			if (i != j && nodeof[i] != nodeof[j])
				s += in->bytes[(size_t)i * (size_t)in->n + (size_t)j];
	return s;
}

struct cand {
	int j;
	uint64_t w;
};

static int cand_cmp(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;
	return x->w < y->w ? 1 : x->w > y->w ? -1 : x->j - y->j;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

struct slot_order {
	int p, node, cpu;
};

static int slot_cmp(const void *a, const void *b)
{
	const struct slot_order *x = a, *y = b;
	if (x->node != y->node)
		return x->node - y->node;
	if (x->cpu != y->cpu)
		return x->cpu - y->cpu;
	return x->p - y->p;
}

int nl_remap(const struct nl_remap_in *in, struct nl_remap_out *out, char *err, size_t errlen)
{
	const int n = in->n;
	int rc = 0;
	memset(&out->before, 0, sizeof *out - offsetof(struct nl_remap_out, before));
	for (int p = 0; p < n; p++)
		out->key[p] = p;
	int nodes = 0;
	for (int p = 0; p < n; p++)
		if (in->node[p] + 1 > nodes)
			nodes = in->node[p] + 1;
	out->nodes = nodes;
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++)
			if (i != j)
				out->total += in->bytes[(size_t)i * (size_t)n + (size_t)j];
	out->before = out->after = inter_node(in, in->node);
	pthread_mutex_lock(&sc_lock); /* Scotch is needed whatever the matrix: the same answer everywhere */
	rc = scotch_load(err, errlen);
	pthread_mutex_unlock(&sc_lock);
	if (rc)
		return rc;
	if (nodes <= 1 || out->before == 0 || n < 2)
		return 0; /* nothing crosses a node: nothing to gain */

	/* the terminals: one per process, numbered node x maxper + its index
	 * in the node (by CPU) */
	int *per = calloc((size_t)nodes, sizeof(int)), *local = malloc(sizeof(int) * (size_t)n);
	struct slot_order *so = malloc(sizeof *so * (size_t)n);
	snum *terms = malloc(sizeof(snum) * (size_t)n), *part = malloc(sizeof(snum) * (size_t)n);
	int *slot = malloc(sizeof(int) * (size_t)n), *taken = calloc((size_t)n, sizeof(int)), *nodeof = malloc(sizeof(int) * (size_t)n);
	struct cand *cands = malloc(sizeof *cands * (size_t)n);
	uint64_t *pairs = NULL;
	snum *verttab = NULL, *edgetab = NULL, *edlotab = NULL;
	void *arch = NULL, *sub = NULL, *graph = NULL, *strat = NULL;
	if (!per || !local || !so || !terms || !part || !slot || !taken || !nodeof || !cands) {
		rc = ERR_NOMEM;
		goto out;
	}
	for (int p = 0; p < n; p++)
		so[p] = (struct slot_order){p, in->node[p], in->cpu ? in->cpu[p] : 0};
	qsort(so, (size_t)n, sizeof *so, slot_cmp);
	int maxper = 0;
	for (int k = 0; k < n; k++) {
		local[so[k].p] = per[so[k].node]++;
		if (per[so[k].node] > maxper)
			maxper = per[so[k].node];
	}
	for (int p = 0; p < n; p++)
		terms[p] = (snum)(in->node[p] * maxper + local[p]);

	/* the graph: each rank's heaviest partners, as undirected pairs */
	size_t np = 0, cap = 0;
	for (int i = 0; i < n; i++) {
		int k = 0;
		for (int j = 0; j < n; j++) {
			uint64_t w = j == i ? 0 : w_of(in, i, j);
			if (w)
				cands[k++] = (struct cand){j, w};
		}
		if (k > MAX_PARTNERS) {
			qsort(cands, (size_t)k, sizeof *cands, cand_cmp);
			k = MAX_PARTNERS;
		}
		if (np + (size_t)k > cap) {
			cap = (np + (size_t)k) * 2;
			uint64_t *q = realloc(pairs, sizeof(uint64_t) * cap);
			if (!q) {
				rc = ERR_NOMEM;
				goto out;
			}
			pairs = q;
		}
		for (int c = 0; c < k; c++) {
			int a = i < cands[c].j ? i : cands[c].j, b = i < cands[c].j ? cands[c].j : i;
			pairs[np++] = (uint64_t)a << 32 | (uint64_t)b;
		}
	}
	qsort(pairs, np, sizeof(uint64_t), u64_cmp);
	size_t m = 0;
	for (size_t k = 0; k < np; k++)
		if (m == 0 || pairs[k] != pairs[m - 1])
			pairs[m++] = pairs[k];
	double total = 0;
	for (size_t k = 0; k < m; k++)
		total += (double)w_of(in, (int)(pairs[k] >> 32), (int)(pairs[k] & 0xffffffff));
	double scale = 1, budget = (double)(1 << 29) / NODE_COST / 2; /* Scotch sums weight x distance in 32 bits */
	if (total > budget)
		scale = budget / total;
	verttab = calloc((size_t)n + 1, sizeof(snum));
	edgetab = malloc(sizeof(snum) * (2 * m + 1));
	edlotab = malloc(sizeof(snum) * (2 * m + 1));
	if (!verttab || !edgetab || !edlotab) {
		rc = ERR_NOMEM;
		goto out;
	}
	for (size_t k = 0; k < m; k++) {
		verttab[(pairs[k] >> 32) + 1]++;
		verttab[(pairs[k] & 0xffffffff) + 1]++;
	}
	for (int i = 0; i < n; i++)
		verttab[i + 1] += verttab[i];
	for (int i = 0; i < n; i++)
		slot[i] = verttab[i]; /* fill pointers */
	for (size_t k = 0; k < m; k++) {
		int a = (int)(pairs[k] >> 32), b = (int)(pairs[k] & 0xffffffff);
		double wd = (double)w_of(in, a, b) * scale + 0.5;
		snum w = wd < 1 ? 1 : (snum)wd;
		edgetab[slot[a]] = b;
		edlotab[slot[a]++] = w;
		edgetab[slot[b]] = a;
		edlotab[slot[b]++] = w;
	}

	char step[64] = "";
	pthread_mutex_lock(&sc_lock); /* Scotch's random state is global */
	arch = sc.archAlloc(), sub = sc.archAlloc(), graph = sc.graphAlloc(), strat = sc.stratAlloc();
	if (!arch || !sub || !graph || !strat) {
		pthread_mutex_unlock(&sc_lock);
		rc = ERR_NOMEM;
		goto out;
	}
	sc.randomReset(); /* the same matrix gives the same order */
	sc.archInit(arch);
	sc.archInit(sub);
	sc.graphInit(graph);
	sc.stratInit(strat);
	const snum sizes[2] = {nodes, maxper}, links[2] = {NODE_COST, 1};
	if (sc.archTleaf(arch, 2, sizes, links) != 0)
		snprintf(step, sizeof step, "building the tree-leaf architecture");
	else if (sc.archSub(sub, arch, n, terms) != 0)
		snprintf(step, sizeof step, "restricting it to the ranks' cores");
	else if (sc.graphBuild(graph, 0, n, verttab, NULL, NULL, NULL, (snum)(2 * m), edgetab, edlotab) != 0)
		snprintf(step, sizeof step, "building the communication graph");
	else if (sc.graphCheck(graph) != 0)
		snprintf(step, sizeof step, "checking the communication graph");
	else if (sc.stratGraphMapBuild(strat, 1 /* SCOTCH_STRATQUALITY */, n, 0.01) != 0)
		snprintf(step, sizeof step, "building the strategy");
	else if (sc.graphMap(graph, sub, strat, part) != 0)
		snprintf(step, sizeof step, "mapping");
	sc.stratExit(strat);
	sc.graphExit(graph);
	sc.archExit(sub);
	sc.archExit(arch);
	pthread_mutex_unlock(&sc_lock);
	if (*step) {
		snprintf(err, errlen, "Scotch: %s failed (%d ranks, %zu pairs, %d nodes)", step, n, m, nodes);
		rc = ERR_SCOTCH;
		goto out;
	}

	/* part[r]: the process (terminal) that plays rank r; a rank put on a
	 * taken process goes to the free one costing its partners least */
	int homeless = 0;
	for (int r = 0; r < n; r++) {
		slot[r] = -1;
		if (part[r] >= 0 && part[r] < n && !taken[part[r]]) {
			taken[part[r]] = 1;
			slot[r] = part[r];
		} else {
			homeless++;
		}
	}
	for (int r = 0; homeless && r < n; r++) {
		if (slot[r] >= 0)
			continue;
		int best = -1;
		uint64_t bestc = UINT64_MAX;
		for (int p = 0; p < n; p++) {
			if (taken[p])
				continue;
			uint64_t c = 0;
			for (snum k = verttab[r]; k < verttab[r + 1]; k++) {
				int q = edgetab[k];
				if (slot[q] >= 0 && in->node[slot[q]] != in->node[p])
					c += (uint64_t)edlotab[k];
			}
			if (c < bestc)
				best = p, bestc = c;
		}
		taken[best] = 1;
		slot[r] = best;
	}
	for (int r = 0; r < n; r++)
		nodeof[r] = in->node[slot[r]];
	uint64_t after = inter_node(in, nodeof);
	if (after < out->before) { /* never worse than as it runs */
		out->after = after;
		out->scotch = 1;
		for (int r = 0; r < n; r++) {
			out->key[slot[r]] = r;
			out->moved += slot[r] != r;
		}
	}
out:
	if (sc.memFree) {
		if (strat)
			sc.memFree(strat);
		if (graph)
			sc.memFree(graph);
		if (sub)
			sc.memFree(sub);
		if (arch)
			sc.memFree(arch);
	}
	free(per);
	free(local);
	free(so);
	free(terms);
	free(part);
	free(slot);
	free(taken);
	free(nodeof);
	free(cands);
	free(pairs);
	free(verttab);
	free(edgetab);
	free(edlotab);
	if (rc == ERR_NOMEM)
		snprintf(err, errlen, "out of memory mapping %d ranks", n);
	return rc;
}
