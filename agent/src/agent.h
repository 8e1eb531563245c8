/* Netloom agent: state outside the hot path, shared by core.c and report.c. */
#ifndef NL_AGENT_H
#define NL_AGENT_H

#include <pthread.h>
#include <stdint.h>

#include "env.h"
#include "nl.h"

#define NL_NAME_MAX 64
#define NL_MAX_REGIONS 64

struct nl_region {
	char name[NL_NAME_MAX];
	int depth;             /* nesting of begin/end with this name */
	uint64_t entries;
	uint64_t time_ns, mpi_ticks, wait_ticks; /* wait_ticks: NETLOOM_WAITS, of mpi_ticks */
	uint64_t bytes[NL_NCLASS], msgs[NL_NCLASS];
	/* values when the outermost begin happened */
	uint64_t t0_ns, mpi_t0, wait_t0;
	uint64_t bytes0[NL_NCLASS], msgs0[NL_NCLASS];
};

/* What Open MPI's PML and one-sided components really sent to one peer (its
 * monitoring's per-peer counts): p2p, collectives as decomposed, one-sided
 * puts; NL_FETCHED: one-sided data fetched from the peer (the peer sent it). */
#define NL_FETCHED NL_NCLASS
struct nl_monitored {
	uint64_t bytes[NL_NCLASS + 1], msgs[NL_NCLASS + 1];
};

/* The node of every rank, from the launcher (launcher.c). */
struct nl_nodemap {
	int nnodes, self;          /* self: this rank's node */
	char (*names)[NL_NAME_MAX];
	int32_t *node_of;          /* per world rank: index into names */
};

/* One netloom_reorder this rank took part in (reorder.c), for the reports. */
#define NL_MAX_REORDERS 16
struct nl_reorder_ev {
	int64_t unix_ns;         /* when it returned */
	int ranks, nodes, moved, scotch;
	int old_rank, new_rank;  /* this rank's in comm and in the new communicator */
	int comm_world;          /* comm was MPI_COMM_WORLD */
	uint64_t before, after, total;
	double seconds, map_seconds;
	char since[NL_NAME_MAX]; /* the mark the matrix started at, "" for MPI_Init */
};

struct nl_agent {
	int started, stopped;
	char job_id[128];
	char node[NL_NAME_MAX];
	char host[NL_NAME_MAX];
	char mpi_library[128];
	char program[256];
	char user[64];
	int64_t start_unix_ns;         /* MPI_Init's entry */
	uint64_t wall_start_mono_ns;   /* MPI_Init's entry: wall time starts here */
	uint64_t start_mono_ns, start_tsc; /* MPI_Init's entry too: the TSC rate is measured from here */

	/* configuration */
	double interval_s;
	int peer_limit, top_peers;
	char output_dir[1024];

	/* physical traffic, from Open MPI's monitoring (core.c): added to by the
	 * ranks' threads, read by the helper; NULL until sized */
	struct nl_monitored *monitored;
	int monitored_size;

	/* every rank's node, set once by the helper thread when the launcher tells */
	struct nl_nodemap *nodemap;

	/* netloom_reorder calls (reorder.c), read by the reports under reorder_lock */
	pthread_mutex_t reorder_lock;
	int nreorders;           /* kept: the first NL_MAX_REORDERS */
	uint64_t reorders_total; /* all of them */
	struct nl_reorder_ev reorders[NL_MAX_REORDERS];

	/* regions */
	pthread_mutex_t region_lock;
	int nregions;
	struct nl_region regions[NL_MAX_REGIONS];
	int pcontrol_region; /* index of the region opened by MPI_Pcontrol, or -1 */

	/* helper thread */
	pthread_t helper;
	int helper_running;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	int quit;
	uint64_t seq;
	uint64_t datagrams_dropped;
};

extern struct nl_agent nl_agent;

void nl_trace_start(void);            /* trace.c: NETLOOM_TRACE */
void nl_trace_end(void);              /* at MPI_Finalize's entry */
const char *nl_trace_dir(void);       /* "" unless tracing */
void nl_trace_write(const char *dir); /* after the final report, beside the profile */
void nl_totals(uint64_t bytes[NL_NCLASS], uint64_t msgs[NL_NCLASS], uint64_t *mpi_ticks, uint64_t *wait_ticks);

/* core.c: a communicator's size, this rank's rank in it, whether it is an
 * intercommunicator, and its ranks' world ranks (*world NULL: the world
 * itself); -1 if it cannot be translated. Builds the cached entry. */
int nl_comm_ranks(MPI_Comm comm, int *size, int *rank, int *inter, const int **world);
void nl_reorders_copy(struct nl_reorder_ev *out, int *n, uint64_t *total);

/* core.c, read by state.c only (the rooms above read state.h) */
int nl_physical_known(void);
uint64_t nl_fn_ticks(int f);
double nl_ns_per_tick(void);

/* core.c: the accounting's start and stop (life.c calls them) */
void nl_core_start(void);
void nl_core_stop(void);

/* report.c */
void nl_report_start(void);  /* starts the helper thread */
void nl_report_final(void);  /* stops it, sends the final report, writes the profile */
void nl_regions_copy(struct nl_region *out, int *n);

/* gpu_report.c: the snapshot's GPU section (buffer kinds), set on d->gpu when
 * the process has CUDA loaded; nl_gpu_take_free frees what it allocated */
void nl_gpu_check(void); /* core.c: starts probing buffers once CUDA is here */
struct Netloom__Agent__V1__Datagram;
void nl_gpu_take(struct Netloom__Agent__V1__Datagram *d);
void nl_gpu_take_free(struct Netloom__Agent__V1__Datagram *d);

/* launcher.c (helper thread and MPI_Finalize only) */
void nl_nodemap_load(void); /* sets nodemap when the launcher says where every rank is */
void nl_nodemap_free(void);

/* auth.c (auth.h) and wire.c (wire.h), MUNGE signing and the transport,
 * know nothing of MPI: report.c includes their headers itself. */

#endif
