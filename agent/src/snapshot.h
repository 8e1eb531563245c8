/* Netloom agents' snapshot builder, shared by the MPI agent (report.c) and
 * the NCCL plugin (../nccl/plugin.c): what every snapshot carries whatever
 * it counts (the header: job, rank, sequence, times; the process: who and
 * where it is, its /proc figures, its wall time) and the traffic rows' cells.
 * MPI- and NCCL-free, as wire.h, which sends what is built here. */
#ifndef NL_SNAPSHOT_H
#define NL_SNAPSHOT_H

#include <stdint.h>

#include "netloom/agent/v1/agent.pb-c.h"

/* Who is reporting: set once at the start, pointers into the agent's own
 * storage, which outlives every snapshot. */
struct nl_ident {
	char *job_id, *node, *host, *library, *program, *user;
	uint32_t rank, world;
	int64_t start_unix_ns;       /* the header's start */
	uint64_t wall_start_mono_ns; /* the process's wall time counts from here */
	double interval_s;
};

/* nl_snapshot_frame initializes d and p and fills what every snapshot says:
 * d's header (seq, final, now) with d->process = p, and p's identity, /proc
 * figures (wire.c), wall time and datagrams dropped. The caller adds what
 * it counts. */
void nl_snapshot_frame(Netloom__Agent__V1__Datagram *d, Netloom__Agent__V1__Process *p, const struct nl_ident *id,
		       uint64_t seq, int final, uint64_t dropped);

/* nl_traffic fills t and returns it, or NULL when bytes and msgs are 0 (the
 * row's cell left out); nl_traffic0 keeps zeros. */
Netloom__Agent__V1__Traffic *nl_traffic(Netloom__Agent__V1__Traffic *t, uint64_t bytes, uint64_t msgs);
Netloom__Agent__V1__Traffic *nl_traffic0(Netloom__Agent__V1__Traffic *t, uint64_t bytes, uint64_t msgs);

#endif
