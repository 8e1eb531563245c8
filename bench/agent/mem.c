/* Agent memory per rank, from its data structures (sizeof), for a job of N
 * ranks in an all-to-all pattern (every peer gets point-to-point traffic, so
 * every peer's histogram is allocated), one communicator besides the world.
 * Build: see run.sh. */
#include <stdio.h>
#include <stdlib.h>
#include "agent.h"

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1024;
	struct item { const char *what; long bytes; } it[] = {
		{"per-peer counters (nl_peer)", n * (long)sizeof(struct nl_peer)},
		{"per-peer size histograms (p2p peers)", n * NL_NBINS * (long)sizeof(uint64_t)},
		{"function table (one 64 B line per function)", NL_NFUNCS * (long)sizeof(struct nl_fn)},
		{"datatype size cache", NL_TCACHE * (long)sizeof(struct nl_tcache)},
		{"communicator/window cache (1024 slots of 32 B)", 1024 * 32L},
		{"persistent-request cache (4096 slots of 24 B)", 4096 * 24L},
		{"rank translation of one N-rank communicator", n * (long)sizeof(int)},
		{"regions and agent state", (long)sizeof(struct nl_agent)},
		{"physical traffic (Open MPI's monitoring on)", n * (long)sizeof(struct nl_monitored)},
		{"node map from PMIx (16 ranks per node)", (long)sizeof(struct nl_nodemap) + n * (long)sizeof(int32_t) + (n / 16 + 1) * NL_NAME_MAX},
	};
	long total = 0;
	printf("agent memory per rank, %ld ranks, all-to-all:\n", n);
	for (size_t i = 0; i < sizeof it / sizeof it[0]; i++) {
		printf("  %-48s %9ld bytes\n", it[i].what, it[i].bytes);
		total += it[i].bytes;
	}
	printf("  %-48s %9ld bytes (%.1f KiB)\n", "total", total, total / 1024.0);
	printf("  snapshot buffers on the helper thread (transient): about %ld bytes\n",
	       n * (long)(2 * NL_NCLASS * 8 + 8 + 4 + 96 + 8 + 6 * 32 + NL_NBINS * 8) + (n / 16 + 1) * (2 * NL_NCLASS * 8 + 3 * 32 + 48));
	return 0;
}
