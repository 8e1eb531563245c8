/* Netloom agent: the one interface through which the rooms above the
 * accounting (report.c, gpu_report.c, reorder.c, trace.c) read the agent's
 * counters. Every read is a copy taken with relaxed loads, never a pointer
 * into the counters the wrappers add to; state.c is the only file that
 * reads hot.c's and core.c's counters for them. The rooms read their own
 * state (regions: core.c; reorderings: reorder.c) through the copies their
 * own functions make, and the agent's identity and settings, set once at
 * MPI_Init, in nl_agent (agent.h). */
#ifndef NL_STATE_H
#define NL_STATE_H

#include <stdint.h>

#include "agent.h"

/* one MPI function: calls, its own time in ticks (sampled calls scaled up,
 * the waits inside it left out), its waits' ticks, bytes sent and received */
struct nl_fn_snap {
	uint64_t calls, ticks, wait, sent, recvd;
};
void nl_snap_fn(int f, struct nl_fn_snap *o);

/* one peer (world rank w < nl_snap_world()): what the application sent it,
 * by class; nl_snap_hist copies its point-to-point size bins, 0 when it has
 * none yet */
struct nl_peer_snap {
	uint64_t bytes[NL_NCLASS], msgs[NL_NCLASS];
};
void nl_snap_peer(int w, struct nl_peer_snap *o);
int nl_snap_hist(int w, uint64_t bins[NL_NBINS]);

/* what the MPI library itself sent to w (Open MPI's monitoring, core.c):
 * 0 and zeros when it keeps no count for w; nl_snap_physical: it reports to
 * the agent, so every peer's count is known (zeros included) */
int nl_snap_monitored(int w, struct nl_monitored *o);
int nl_snap_physical(void);

/* the buffer kinds (GPU buffers) of function f and of peer w; 0 when the
 * per-peer counts are not kept (no CUDA) */
void nl_snap_gpu_fn(int f, struct nl_gpu_counts *o);
int nl_snap_gpu_peer(int w, struct nl_gpu_counts *o);

int nl_snap_world(void);         /* MPI_COMM_WORLD's size, 0 before MPI_Init */
int nl_snap_rank(void);          /* this rank in it */
int nl_snap_running(void);       /* between MPI_Init and MPI_Finalize */
int nl_snap_mt(void);            /* MPI_THREAD_MULTIPLE: several threads count */
double nl_snap_ns_per_tick(void); /* the TSC's rate, measured anew at each call */
uint64_t nl_snap_io(int write);  /* MPI-IO bytes read (0) or written (1) */

#endif
