/* Netloom agent: the mapping netloom_reorder computes (remap.c). Knows
 * nothing of MPI, so that bench/agent/remap_bench.c runs it alone on a
 * synthetic matrix. Scotch is loaded with dlopen at the first call. */
#ifndef NL_REMAP_H
#define NL_REMAP_H

#include <stddef.h>
#include <stdint.h>

struct nl_remap_in {
	int n;                 /* ranks */
	const uint64_t *bytes; /* n x n, bytes[i * n + j]: sent by rank i to rank j */
	const int *node;       /* n: node index (0..nodes-1) of the process holding rank i now */
	const int *cpu;        /* n: its CPU (order inside a node), or NULL */
};

struct nl_remap_out {
	int *key;       /* n (caller's): the new rank of the process holding rank i now */
	uint64_t before, after, total; /* inter-node bytes now, with the new order; all bytes */
	int nodes, moved, scotch; /* scotch: 1 if the new order is Scotch's, 0 if kept */
};

/* nl_remap returns 0, or a NETLOOM_ERR_* code with a message in err. */
int nl_remap(const struct nl_remap_in *in, struct nl_remap_out *out, char *err, size_t errlen);

#endif
