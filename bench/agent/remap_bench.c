/* The mapping netloom_reorder computes (agent/src/remap.c), alone, on
 * synthetic matrices: its cost at 1,024 ranks cannot be measured through MPI
 * on a 2-core machine. Same code, compiled in (it knows no MPI).
 *   remap_bench RANKS PER_NODE [RUNS]
 * Patterns, each scrambled over the nodes (consecutive ranks on different
 * nodes, as reorder.c's ring): a ring (2 partners), a 3-D 7-point stencil
 * (6), and an all-to-all with a heavy ring on top (RANKS-1: Scotch's graph
 * keeps 64 per rank). Prints the median mapping time and the predicted
 * inter-node bytes before and after. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "remap.h"

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1024, per = argc > 2 ? atoi(argv[2]) : 16, runs = argc > 3 ? atoi(argv[3]) : 5;
	int nodes = n / per;
	uint64_t *m = calloc((size_t)n * (size_t)n, 8);
	int *node = malloc(sizeof(int) * (size_t)n), *cpu = malloc(sizeof(int) * (size_t)n), *key = malloc(sizeof(int) * (size_t)n);
	int *pos = malloc(sizeof(int) * (size_t)n); /* the process holding logical rank k */
	for (int p = 0; p < n; p++) {
		node[p] = p / per;
		cpu[p] = p % per;
	}
	for (int k = 0; k < n; k++)
		pos[k] = (k % nodes) * per + k / nodes; /* scrambled */
	const char *names[] = {"ring", "stencil3d", "alltoall+ring"};
	for (int pat = 0; pat < 3; pat++) {
		memset(m, 0, (size_t)n * (size_t)n * 8);
#define ADD(a, b, v) (m[(size_t)pos[a] * (size_t)n + (size_t)pos[b]] += (v))
		if (pat == 0) {
			for (int k = 0; k < n; k++) {
				ADD(k, (k + 1) % n, 1 << 20);
				ADD(k, (k + n - 1) % n, 1 << 20);
			}
		} else if (pat == 1) {
			int d = 1;
			while (d * d * d < n)
				d++;
			for (int k = 0; k < n; k++) {
				int x = k % d, y = (k / d) % d, z = k / (d * d);
				int nb[6][3] = {{x + 1, y, z}, {x - 1, y, z}, {x, y + 1, z}, {x, y - 1, z}, {x, y, z + 1}, {x, y, z - 1}};
				for (int i = 0; i < 6; i++) {
					int q = ((nb[i][2] + d) % d) * d * d + ((nb[i][1] + d) % d) * d + (nb[i][0] + d) % d;
					if (q < n && q != k)
						ADD(k, q, 1 << 18);
				}
			}
		} else {
			for (int a = 0; a < n; a++)
				for (int b = 0; b < n; b++)
					if (a != b)
						ADD(a, b, 1024);
			for (int k = 0; k < n; k++)
				ADD(k, (k + 1) % n, 1 << 22);
		}
		double t[64];
		struct nl_remap_in in = {n, m, node, cpu};
		struct nl_remap_out out = {.key = key};
		char err[512] = "";
		if (runs > 64)
			runs = 64;
		for (int r = 0; r < runs; r++) {
			double t0 = now();
			int rc = nl_remap(&in, &out, err, sizeof err);
			t[r] = now() - t0;
			if (rc) {
				fprintf(stderr, "remap: %d %s\n", rc, err);
				return 1;
			}
		}
		qsort(t, (size_t)runs, sizeof t[0], cmpd);
		printf("%-14s ranks %5d nodes %4d  map %8.4f s (median of %d, min %.4f)  inter-node %14llu -> %14llu bytes (%5.1f%% less), %s, %d moved\n",
		       names[pat], n, nodes, t[runs / 2], runs, t[0], (unsigned long long)out.before, (unsigned long long)out.after,
		       out.before ? 100.0 * (1 - (double)out.after / (double)out.before) : 0.0, out.scotch ? "scotch" : "kept", out.moved);
	}
	return 0;
}
