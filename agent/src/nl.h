/* Netloom agent: state shared by the generated wrappers and the agent's core.
 *
 * The hot path (everything inline in this file) only does plain or relaxed
 * atomic increments into arrays allocated at MPI_Init: no allocation after
 * warm-up, no locks, no system calls. Time comes from the TSC (rdtsc), converted
 * to nanoseconds when a snapshot is taken. */
#ifndef NL_H
#define NL_H

#include <mpi.h>
#include <stdint.h>
#include <stddef.h>

#include "fnids.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define NL_HAVE_TSC 1
#else
#include <time.h>
#endif

#define NL_NBINS 48 /* bin i: 2^(i-1) <= size < 2^i; bin 0: empty; last bin: the rest */

enum nl_class { NL_P2P, NL_COLL, NL_RMA, NL_NCLASS };

/* One peer (world rank): what this rank sent to it. 64 bytes, one cache line. */
struct nl_peer {
	uint64_t bytes[NL_NCLASS];
	uint64_t msgs[NL_NCLASS];
	uint64_t *hist; /* NL_NBINS point-to-point size bins, allocated on first use */
	uint64_t pad;
};

struct nl_fn {
	uint64_t calls, ticks, sent, recvd;
	uint64_t timed; /* calls whose time is in ticks (see nl_begin) */
};

extern const char *const nl_fn_names[NL_NFUNCS];
extern struct nl_fn nl_fns[NL_NFUNCS];
extern struct nl_peer *nl_peers; /* world_size entries, NULL before MPI_Init */
extern int nl_world_size, nl_world_rank_self;
extern int nl_mt;                 /* MPI_THREAD_MULTIPLE: use atomic read-modify-write */
extern volatile int nl_poll_due;  /* set by the helper thread: read MPI_T pvars */
extern uint64_t nl_time_mask;     /* time one call in NETLOOM_TIME_SAMPLE (a power of two) */

static inline uint64_t nl_ticks(void)
{
#ifdef NL_HAVE_TSC
	return __rdtsc();
#else
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO, no system call */
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}

/* nl_add adds v to a counter the helper thread reads concurrently. Without
 * MPI_THREAD_MULTIPLE only this thread writes, so a relaxed load and store
 * (a plain add) suffice; with it, a relaxed atomic add. */
static inline void nl_add(uint64_t *p, uint64_t v)
{
	if (__builtin_expect(nl_mt, 0))
		__atomic_fetch_add(p, v, __ATOMIC_RELAXED);
	else
		__atomic_store_n(p, __atomic_load_n(p, __ATOMIC_RELAXED) + v, __ATOMIC_RELAXED);
}

void nl_poll(void);

/* nl_begin starts timing a call of f: every call, or with NETLOOM_TIME_SAMPLE=N
 * one call in N (the first, the N+1th, ...), 0 meaning "not timed". */
static inline uint64_t nl_begin(int f)
{
	if (__atomic_load_n(&nl_fns[f].calls, __ATOMIC_RELAXED) & nl_time_mask)
		return 0;
	return nl_ticks();
}

static inline void nl_fn_done(int f, uint64_t t0)
{
	nl_add(&nl_fns[f].calls, 1);
	if (t0) {
		nl_add(&nl_fns[f].ticks, nl_ticks() - t0);
		nl_add(&nl_fns[f].timed, 1);
	}
	if (__builtin_expect(nl_poll_due, 0))
		nl_poll();
}

static inline uint64_t nl_type_size(MPI_Datatype t)
{
	int s = 0;
	if (PMPI_Type_size(t, &s) != MPI_SUCCESS || s < 0)
		return 0;
	return (uint64_t)s;
}

static inline unsigned nl_bin(uint64_t s)
{
	unsigned b = s ? 64u - (unsigned)__builtin_clzll(s) : 0u;
	return b < NL_NBINS ? b : NL_NBINS - 1;
}

int nl_world_of(MPI_Comm comm, int rank); /* -1 if unknown */
uint64_t *nl_hist_alloc(struct nl_peer *p);

static inline int nl_world_rank(MPI_Comm comm, int rank)
{
	if (comm == MPI_COMM_WORLD)
		return rank;
	return nl_world_of(comm, rank);
}

/* nl_peer_add records one message of b bytes of class c to world rank w. */
static inline void nl_peer_add(int w, int c, uint64_t b)
{
	if (w < 0 || w >= nl_world_size || !nl_peers)
		return;
	struct nl_peer *p = &nl_peers[w];
	nl_add(&p->bytes[c], b);
	nl_add(&p->msgs[c], 1);
	if (c == NL_P2P) {
		uint64_t *h = __atomic_load_n(&p->hist, __ATOMIC_ACQUIRE);
		if (__builtin_expect(!h, 0))
			h = nl_hist_alloc(p);
		if (h)
			nl_add(&h[nl_bin(b)], 1);
	}
}

/* Point-to-point send of count x datatype to dest in comm. */
static inline void nl_p2p(int f, int count, MPI_Datatype t, int dest, MPI_Comm comm)
{
	if (dest < 0 || count < 0) /* MPI_PROC_NULL */
		return;
	uint64_t b = (uint64_t)count * nl_type_size(t);
	nl_add(&nl_fns[f].sent, b);
	nl_peer_add(nl_world_rank(comm, dest), NL_P2P, b);
}

/* Receive posted for count x datatype (the posted size, not the matched one). */
static inline void nl_recvd(int f, int count, MPI_Datatype t, int source)
{
	if (source == MPI_PROC_NULL || count <= 0)
		return;
	nl_add(&nl_fns[f].recvd, (uint64_t)count * nl_type_size(t));
}

/* persistent requests */
void nl_persist(MPI_Request req, int count, MPI_Datatype t, int dest, MPI_Comm comm);
void nl_start(int f, MPI_Request req);
void nl_startall(int f, int n, const MPI_Request *reqs);
void nl_startall_f(int f, int n, const MPI_Fint *reqs);
void nl_forget_request(MPI_Request req);
void nl_forget_comm(MPI_Comm comm);
void nl_forget_win(MPI_Win win);

/* collectives (rules in README.md) */
void nl_bcast(int f, int count, MPI_Datatype t, int root, MPI_Comm comm);
void nl_reduce(int f, int count, MPI_Datatype t, int root, MPI_Comm comm);
void nl_allreduce(int f, int count, MPI_Datatype t, MPI_Comm comm);
void nl_gather(int f, const void *sbuf, int scount, MPI_Datatype st, int rcount, MPI_Datatype rt, int root, MPI_Comm comm);
void nl_gatherv(int f, const void *sbuf, int scount, MPI_Datatype st, const int *rcounts, MPI_Datatype rt, int root, MPI_Comm comm);
void nl_scatter(int f, int scount, MPI_Datatype st, const void *rbuf, int rcount, MPI_Datatype rt, int root, MPI_Comm comm);
void nl_scatterv(int f, const int *scounts, MPI_Datatype st, const void *rbuf, int rcount, MPI_Datatype rt, int root, MPI_Comm comm);
void nl_allgather(int f, const void *sbuf, int scount, MPI_Datatype st, int rcount, MPI_Datatype rt, MPI_Comm comm);
void nl_allgatherv(int f, const void *sbuf, int scount, MPI_Datatype st, const int *rcounts, MPI_Datatype rt, MPI_Comm comm);
void nl_alltoall(int f, const void *sbuf, int scount, MPI_Datatype st, int rcount, MPI_Datatype rt, MPI_Comm comm);
void nl_alltoallv(int f, const void *sbuf, const int *scounts, MPI_Datatype st, const int *rcounts, MPI_Datatype rt, MPI_Comm comm);
void nl_alltoallw(int f, const void *sbuf, const int *scounts, const MPI_Datatype *st, const int *rcounts, const MPI_Datatype *rt, MPI_Comm comm);
void nl_alltoallw_f(int f, const void *sbuf, const int *scounts, const MPI_Fint *st, const int *rcounts, const MPI_Fint *rt, MPI_Comm comm);
void nl_reduce_scatter(int f, const int *rcounts, MPI_Datatype t, MPI_Comm comm);
void nl_reduce_scatter_block(int f, int rcount, MPI_Datatype t, MPI_Comm comm);
void nl_scan(int f, int count, MPI_Datatype t, MPI_Comm comm, int exclusive);

/* one-sided and MPI-IO */
void nl_rma(int f, int count, MPI_Datatype t, int target, MPI_Win win);
void nl_io(int f, int count, MPI_Datatype t, int write);

/* Fortran support */
void *nl_fsym(void **cache, const char *name);
const void *nl_fbuf(const void *fortran_buf);

/* lifecycle (core.c) and reporting (report.c) */
void nl_start_agent(void);
void nl_stop_agent(void);
void nl_pcontrol(int level);

#endif
