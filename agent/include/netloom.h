/* Netloom: mark phases of an MPI application ("regions") so that the agent
 * reports time, MPI time and traffic per phase.
 *
 *   #include <netloom.h>
 *   NETLOOM_REGION_BEGIN("solve");
 *   ...
 *   NETLOOM_REGION_END("solve");
 *
 * The functions live in the agent library (libnetloom-ompi.so or
 * libnetloom-mpich.so, loaded with LD_PRELOAD or linked). They are declared
 * weak, so a program using the macros also runs without the agent: the macros
 * then do nothing. MPI_Pcontrol(level) marks regions too (see agent/README.md).
 *
 * Regions are per process, by name; a region may be entered again (entries
 * counts the times) and nested in itself (only the outermost counts). At most
 * 64 names; names are cut to 63 bytes. */
#ifndef NETLOOM_H
#define NETLOOM_H

#ifdef __cplusplus
extern "C" {
#endif

#ifdef NETLOOM_AGENT_BUILD /* the agent's own definitions are strong */
#define NETLOOM_WEAK
#else
#define NETLOOM_WEAK __attribute__((weak))
#endif

void netloom_region_begin(const char *name) NETLOOM_WEAK;
void netloom_region_end(const char *name) NETLOOM_WEAK;

#define NETLOOM_REGION_BEGIN(name) do { if (netloom_region_begin) netloom_region_begin(name); } while (0)
#define NETLOOM_REGION_END(name) do { if (netloom_region_end) netloom_region_end(name); } while (0)

/* ------------------------------------------------------------------
 * The communication matrix, online, and a reordered communicator
 * (docs/reorder.md). Declared only when <mpi.h> was included first.
 *
 * Every function returns NETLOOM_OK (0) or one of the NETLOOM_ERR_* codes
 * below; netloom_strerror(code) says what it means (and, for the last
 * error of this process, why). They never abort and never print.
 *
 * Without the agent the weak symbols are NULL: test them
 * (if (netloom_reorder) ...) or call through the NETLOOM_CALL macro, which
 * then yields NETLOOM_ERR_NO_AGENT:
 *     int rc = NETLOOM_CALL(netloom_reorder, comm, &newcomm, NULL, &info);
 * and NETLOOM_STRERROR(rc) is netloom_strerror(rc) or a fixed text.
 *
 * The counts are the agent's own (agent/README.md, "What a rank keeps"):
 * what this process sent to each other process since MPI_Init, over every
 * communicator (the counters are per process, in world ranks), read for the
 * ranks of the communicator given. Reading them costs a load per counter
 * and makes no MPI call; only netloom_matrix_all and netloom_reorder
 * communicate, and only on the communicator given (see below). */
#if defined(MPI_VERSION) || defined(NETLOOM_DOC)
#include <stdint.h>

#define NETLOOM_OK 0
#define NETLOOM_ERR_NO_AGENT 1     /* the agent is not loaded (NETLOOM_CALL only) */
#define NETLOOM_ERR_NOT_STARTED 2  /* the agent never saw MPI_Init, or MPI_Finalize has passed */
#define NETLOOM_ERR_ARG 3          /* a NULL output, unknown class bits */
#define NETLOOM_ERR_COMM 4         /* MPI_COMM_NULL, or a communicator the agent cannot translate */
#define NETLOOM_ERR_INTERCOMM 5    /* an intercommunicator */
#define NETLOOM_ERR_MARK 6         /* no mark of that name on this rank (or on some rank, for the collective forms) */
#define NETLOOM_ERR_PHYSICAL 7     /* NETLOOM_PHYSICAL asked, but the MPI library reports no physical traffic */
#define NETLOOM_ERR_NO_SCOTCH 8    /* netloom_reorder: Scotch could not be loaded (dlopen; NETLOOM_SCOTCH_LIB) */
#define NETLOOM_ERR_SCOTCH 9       /* netloom_reorder: Scotch failed to map */
#define NETLOOM_ERR_MPI 10         /* an MPI call of the collective forms failed */
#define NETLOOM_ERR_NOMEM 11
#define NETLOOM_ERR_MARKS_FULL 12  /* more than NETLOOM_MAX_MARKS names */
#define NETLOOM_MAX_MARKS 16

/* Classes, a bit mask. NETLOOM_PHYSICAL selects what the library really sent
 * (Open MPI with --mca pml_monitoring_enable 1|2: point-to-point messages,
 * collectives as decomposed, one-sided puts) instead of the application's
 * calls (collectives as called: a bcast root sends to every rank). */
#define NETLOOM_P2P 1
#define NETLOOM_COLL 2
#define NETLOOM_RMA 4
#define NETLOOM_ALL 7
#define NETLOOM_PHYSICAL 8

/* netloom_mark records this rank's counters now under name (at most
 * NETLOOM_MAX_MARKS names of up to 63 bytes; marking a name again moves it).
 * Local, no MPI call. A region's span: mark at its begin, mark at its end. */
int netloom_mark(const char *name) NETLOOM_WEAK;

/* netloom_matrix: this rank's bytes and messages sent to each rank of comm
 * (arrays of comm's size; either may be NULL), of the classes in what,
 * between the marks from and to (NULL: from MPI_Init, to now). Local: no
 * MPI call, nothing on the hot path (it reads the counters the wrappers
 * add to). Traffic to itself is counted where the application sent it. */
int netloom_matrix(MPI_Comm comm, int what, const char *from, const char *to, uint64_t *bytes, uint64_t *msgs)
	NETLOOM_WEAK;

/* netloom_matrix_all: collective over comm (every rank must call it, as for
 * an MPI collective): every rank gets the whole matrix, row i = rank i's
 * netloom_matrix, bytes[i * n + j] (arrays of n * n; either may be NULL).
 * It makes one PMPI_Allgather on comm: the only time the agent sends
 * anything. That traffic is not in the agent's counts (it is not the
 * application's), but Open MPI's monitoring sees it (collective, internal
 * tags). A mark missing on any rank: NETLOOM_ERR_MARK on every rank. */
int netloom_matrix_all(MPI_Comm comm, int what, const char *from, const char *to, uint64_t *bytes, uint64_t *msgs)
	NETLOOM_WEAK;

struct netloom_reorder_info {
	uint64_t inter_node_before; /* predicted bytes between nodes: the matrix on the current placement */
	uint64_t inter_node_after;  /* the same matrix with the new rank order */
	uint64_t total_bytes;       /* all bytes of the matrix (both ways) */
	int ranks, nodes;           /* comm's size, the nodes its ranks run on */
	int moved;                  /* ranks whose rank in newcomm differs from their rank in comm */
	int method;                 /* NETLOOM_REORDER_SCOTCH, or _KEPT: nothing to gain, order unchanged */
	double seconds;             /* wall time of the call (on rank 0: the mapping's own in map_seconds) */
	double map_seconds;
};
#define NETLOOM_REORDER_KEPT 0
#define NETLOOM_REORDER_SCOTCH 1

/* netloom_reorder: collective over the intracommunicator comm. From the
 * matrix between the mark since (NULL: since MPI_Init) and now, all classes,
 * and the node (NETLOOM_NODE, SLURMD_NODENAME, else the hostname) and CPU
 * (sched_getcpu) each rank runs on, it maps the ranks as `netloom place`
 * does (Scotch, tree-leaf architecture: nodes, then their cores; loaded
 * with dlopen only now) and returns in *newcomm a communicator of the same
 * processes from MPI_Comm_split(comm, 0, key): rank k of newcomm is the
 * process that should play rank k's part, so that heavy partners share a
 * node. The order is kept (NETLOOM_REORDER_KEPT, newcomm still a new
 * communicator) when the mapping would not cut the inter-node bytes. info
 * (may be NULL) gets the prediction, the same on every rank. On error
 * *newcomm is MPI_COMM_NULL and every rank returns the same code. MPI
 * calls made: a PMPI_Gather and a PMPI_Bcast on comm, then PMPI_Comm_split.
 * Calling it from only some ranks of comm is erroneous (as for any MPI
 * collective): the ranks that call it wait for the others. */
int netloom_reorder(MPI_Comm comm, MPI_Comm *newcomm, const char *since, struct netloom_reorder_info *info)
	NETLOOM_WEAK;

/* netloom_strerror: a static text for a code; for the last error this
 * process had, with its detail (which mark, what dlopen said, ...). */
const char *netloom_strerror(int code) NETLOOM_WEAK;

#define NETLOOM_CALL(fn, ...) ((fn) ? (fn)(__VA_ARGS__) : NETLOOM_ERR_NO_AGENT)
#define NETLOOM_STRERROR(code) (netloom_strerror ? netloom_strerror(code) : "netloom: the agent is not loaded")

/* Fortran (mpif.h, use mpi: INTEGER handles; the agent library must be
 * linked, -lnetloom-ompi or -lnetloom-mpich, since Fortran has no weak
 * symbols):
 *   CALL NETLOOM_MARK(name, ierr)
 *   CALL NETLOOM_MATRIX(comm, what, from, to, bytes, msgs, ierr)      ! INTEGER(8) bytes(n), msgs(n); from/to: ' ' = none
 *   CALL NETLOOM_MATRIX_ALL(comm, what, from, to, bytes, msgs, ierr)  ! INTEGER(8) bytes(n*n): bytes(i*n+j+1), 0-based i, j
 *   CALL NETLOOM_REORDER(comm, newcomm, since, before, after, ierr)   ! INTEGER(8) before, after
 *   CALL NETLOOM_STRERROR(code, message)                               ! CHARACTER(*) message */
#endif

#ifdef __cplusplus
}
#endif
#endif
