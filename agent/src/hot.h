/* Netloom agent: the hot path, all inline, and its state.
 *
 * The wrappers (generated from mpi.list) and the accounting rules (core.c)
 * count here: only plain or relaxed atomic increments into arrays allocated
 * at MPI_Init, no allocation after warm-up, no locks, no system calls. Time
 * comes from the TSC (rdtsc), converted to nanoseconds when a snapshot is
 * taken (snap.h).
 *
 * This header depends on nothing of the agent above it (MPI, the generated
 * function ids, the GPU probe). Its state is defined in hot.c, with the out
 * of line slow paths of the inline code (a timed call, a datatype or
 * histogram not cached yet); the one slow path that is not hot.c's is
 * nl_world_of, the communicator cache's translation to world ranks
 * (core.c). */
#ifndef NL_HOT_H
#define NL_HOT_H

#include <mpi.h>
#include <stdint.h>
#include <stddef.h>

#include "fnids.h"
#include "gpu.h"

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

/* One MPI function: 64 bytes, one cache line, so that a call touches one line
 * for its counters (calls, sampling, bytes). */
/* The first NL_EXACT_CALLS calls of every function are timed, their sum kept
 * exact in first; the later ones are sampled (core.c, nl_fn_timed). */
#define NL_EXACT_CALLS 256
struct nl_fn {
	uint64_t calls, ticks, sent, recvd;
	uint64_t timed; /* timed calls after the first NL_EXACT_CALLS, whose time is in ticks */
	uint64_t next;  /* the call (0-based, by count) to time next */
	uint64_t first; /* ticks of the first NL_EXACT_CALLS calls, all timed */
	uint64_t wait;  /* NETLOOM_WAITS: ticks in the barrier before each call (collectives), in the probe before it (MPI_Recv) */
} __attribute__((aligned(64)));

/* The datatype size cache: direct-mapped, keyed by the handle. Predefined
 * types are entered at MPI_Init; derived types on first use when only one
 * thread calls MPI at a time (not under MPI_THREAD_MULTIPLE, where the table
 * is read-only after MPI_Init), and forgotten at MPI_Type_free. */
#define NL_TCACHE 256
struct nl_tcache {
	uintptr_t key;
	uint64_t size;
};

/* hidden: the wrappers reach them PC-relative, not through the GOT */
#pragma GCC visibility push(hidden)
extern const char *const nl_fn_names[NL_NFUNCS];
extern const unsigned char nl_fn_blocks[NL_NFUNCS]; /* timed at every call */
extern struct nl_fn nl_fns[NL_NFUNCS];
extern struct nl_tcache nl_tcache[NL_TCACHE];
extern struct nl_peer *nl_peers; /* world_size entries, NULL before MPI_Init */
extern int nl_world_size, nl_world_rank_self;
extern int nl_waits;              /* NETLOOM_WAITS: a barrier before each blocking collective, a probe before MPI_Recv (set once at init) */
extern int nl_tracing;            /* NETLOOM_TRACE: record the replay trace (trace.c) */
extern int nl_mt;                 /* MPI_THREAD_MULTIPLE: use atomic read-modify-write (set once at init) */
/* nl_slow: nonzero sends every wrapper down its full path (the fast path
 * below is for the single-threaded steady state only). Bits: */
#define NL_SLOW_MT 2u   /* MPI_THREAD_MULTIPLE (set once at init) */
#define NL_SLOW_INIT 4u /* before the agent started (cleared once nl_peers is set) */
#define NL_SLOW_GPU 8u  /* CUDA in the process: buffers are probed (set once, nl_gpu_check) */
extern unsigned nl_slow;

/* Buffer kinds (gpu.h), counted once the process has CUDA (nl_gpu_on):
 * [0] the buffers sent from, [1] those received into; b: bytes, m: buffers
 * named (per function) or messages (per peer). */
struct nl_gpu_counts {
	uint64_t b[2][NL_NKIND], m[2][NL_NKIND];
};
extern struct nl_gpu_counts nl_gfns[NL_NFUNCS];
extern struct nl_gpu_counts *nl_gpeers; /* world_size entries, set before NL_SLOW_GPU */
/* the kinds of the call in progress on this thread, NL_KIND_NONE outside
 * one (nl_gpu_bufs sets them before the accounting, nl_gpu_clear after) */
extern __thread unsigned char nl_gk[2] __attribute__((tls_model("initial-exec")));
#pragma GCC visibility pop

#define NL_INLINE static inline __attribute__((always_inline))

NL_INLINE uint64_t nl_ticks(void)
{
#ifdef NL_HAVE_TSC
	return __rdtsc(); /* no fence: a few cycles of skew are noise next to an MPI call */
#else
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO, no system call */
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}

NL_INLINE uint64_t nl_ld(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* nl_addm adds v to a counter the helper thread reads concurrently. Without
 * MPI_THREAD_MULTIPLE (mt == 0) only one thread at a time writes, so a relaxed
 * load and store (a plain add) suffice; with it, a relaxed atomic add. Callers
 * load nl_mt once (it is set once at MPI_Init) and pass it. */
NL_INLINE void nl_addm(int mt, uint64_t *p, uint64_t v)
{
	if (__builtin_expect(mt, 0))
		__atomic_fetch_add(p, v, __ATOMIC_RELAXED);
	else
		__atomic_store_n(p, nl_ld(p) + v, __ATOMIC_RELAXED);
}

NL_INLINE void nl_add(uint64_t *p, uint64_t v)
{
	nl_addm(nl_mt, p, v);
}

/* nl_gpu_bufs: the wrappers of the calls naming buffers (mpi.list, @bufs)
 * call it when nl_gpu_on, before their accounting, with the buffer sent
 * from (s) and the one received into (r), NULL for none; MPI_IN_PLACE means
 * the other one. The accounting below then adds bytes by kind. */
NL_INLINE void nl_gpu_bufs(int f, const void *s, const void *r)
{
	if (s == MPI_IN_PLACE)
		s = r;
	if (r == MPI_IN_PLACE)
		r = s;
	/* MPI_BOTTOM and the sentinels: not memory */
	unsigned ks = (uintptr_t)s < 4096 || s == MPI_IN_PLACE ? NL_KIND_NONE : nl_gpu_kind(s);
	unsigned kr = (uintptr_t)r < 4096 || r == MPI_IN_PLACE ? NL_KIND_NONE : nl_gpu_kind(r);
	nl_gk[0] = (unsigned char)ks;
	nl_gk[1] = (unsigned char)kr;
	const int mt = nl_mt;
	if (ks < NL_NKIND)
		nl_addm(mt, &nl_gfns[f].m[0][ks], 1);
	if (kr < NL_NKIND)
		nl_addm(mt, &nl_gfns[f].m[1][kr], 1);
}

NL_INLINE void nl_gpu_clear(void)
{
	nl_gk[0] = nl_gk[1] = NL_KIND_NONE;
}

/* bytes of function f sent (d = 0) or received (d = 1) by the current call's kind */
NL_INLINE void nl_gpu_fn(int f, int d, uint64_t b)
{
	unsigned k = nl_gk[d];
	if (k < NL_NKIND)
		nl_addm(nl_mt, &nl_gfns[f].b[d][k], b);
}

/* one point-to-point message of b bytes sent to (d = 0) or received from
 * (d = 1) world rank w: both ends count the same messages, which the daemon
 * pairs into paths (collectives and one-sided count by function only: the
 * other end of their messages is not known) */
NL_INLINE void nl_gpu_peer(int w, int d, uint64_t b)
{
	unsigned k = nl_gk[d];
	struct nl_gpu_counts *g = __atomic_load_n(&nl_gpeers, __ATOMIC_ACQUIRE);
	if (k >= NL_NKIND || !g)
		return;
	const int mt = nl_mt;
	nl_addm(mt, &g[w].b[d][k], b);
	nl_addm(mt, &g[w].m[d][k], 1);
}

/* hot.c */
void nl_fn_timed(int f, uint64_t call, uint64_t ticks);
void nl_time_sample(uint64_t span); /* 2N-1 for NETLOOM_TIME_SAMPLE=N (at MPI_Init) */
uint64_t nl_type_size_slow(MPI_Datatype t);
void nl_type_forget(MPI_Datatype t);
void nl_type_cache_init(void); /* the predefined types (at MPI_Init) */

/* nl_begin starts timing a call of f when it is the one to time (see
 * nl_fn_timed: every call by default with NETLOOM_TIME_SAMPLE=1, else one call
 * in N on average at random gaps), 0 meaning "not timed". */
NL_INLINE uint64_t nl_begin(int f)
{
	if (__builtin_expect(nl_ld(&nl_fns[f].calls) < nl_ld(&nl_fns[f].next), 1))
		return 0;
	return nl_ticks();
}

/* The untimed fast path of the generated wrappers: is this call not one to
 * time? Then nl_fn_count counts it, and the wrapper tail-calls PMPI_X. */
NL_INLINE int nl_untimed(int f)
{
	return nl_ld(&nl_fns[f].calls) < nl_ld(&nl_fns[f].next);
}

NL_INLINE void nl_fn_count(int f)
{
	nl_addm(nl_mt, &nl_fns[f].calls, 1);
}

NL_INLINE void nl_fn_done(int f, uint64_t t0)
{
	uint64_t t1 = t0 ? nl_ticks() : 0;
	struct nl_fn *p = &nl_fns[f];
	uint64_t c;
	if (__builtin_expect(nl_mt, 0))
		c = __atomic_fetch_add(&p->calls, 1, __ATOMIC_RELAXED);
	else {
		c = nl_ld(&p->calls);
		__atomic_store_n(&p->calls, c + 1, __ATOMIC_RELAXED);
	}
	if (__builtin_expect(t0 != 0, 0))
		nl_fn_timed(f, c, t1 - t0);
}

NL_INLINE unsigned nl_thash(uintptr_t k)
{
	return (unsigned)(((uint64_t)k * 0x9E3779B97F4A7C15ull) >> 56); /* NL_TCACHE = 256 */
}

NL_INLINE uint64_t nl_type_size(MPI_Datatype t)
{
	const struct nl_tcache *e = &nl_tcache[nl_thash((uintptr_t)t)];
	if (__builtin_expect(e->key == (uintptr_t)t, 1))
		return e->size;
	return nl_type_size_slow(t);
}

/* the bin without a branch: s clamped to 2^46 (the last bin), then the
 * highest bit of 2s + 1, which is 0 for s = 0 and floor(log2 s) + 1 else */
NL_INLINE unsigned nl_bin(uint64_t s)
{
	const uint64_t top = 1ull << (NL_NBINS - 2);
	s = s < top ? s : top;
	return 63u - (unsigned)__builtin_clzll(2 * s + 1);
}

int nl_world_of(MPI_Comm comm, int rank); /* core.c: -1 if unknown */
uint64_t *nl_hist_alloc(struct nl_peer *p); /* hot.c */

NL_INLINE int nl_world_rank(MPI_Comm comm, int rank)
{
	if (comm == MPI_COMM_WORLD)
		return rank;
	return nl_world_of(comm, rank);
}

/* nl_peer_add records one message of b bytes of class c to world rank w. */
NL_INLINE void nl_peer_addm(int mt, int w, int c, uint64_t b)
{
	if ((unsigned)w >= (unsigned)nl_world_size || !nl_peers)
		return;
	struct nl_peer *p = &nl_peers[w];
	nl_addm(mt, &p->bytes[c], b);
	nl_addm(mt, &p->msgs[c], 1);
	if (c == NL_P2P) {
		if (__builtin_expect(nl_gpu_on, 0))
			nl_gpu_peer(w, 0, b);
		uint64_t *h = __atomic_load_n(&p->hist, __ATOMIC_ACQUIRE);
		if (__builtin_expect(!h, 0))
			h = nl_hist_alloc(p);
		if (h)
			nl_addm(mt, &h[nl_bin(b)], 1);
	}
}

NL_INLINE void nl_peer_add(int w, int c, uint64_t b)
{
	nl_peer_addm(nl_mt, w, c, b);
}

/* nl_fn_sentm, nl_fn_sent, nl_fn_recvd: b bytes of a call of f sent or
 * received (nl_fn_sentm: nl_mt loaded by the caller, as nl_addm) */
NL_INLINE void nl_fn_sentm(int mt, int f, uint64_t b)
{
	nl_addm(mt, &nl_fns[f].sent, b);
	if (__builtin_expect(nl_gpu_on, 0))
		nl_gpu_fn(f, 0, b);
}

/* Point-to-point send of count x datatype to dest in comm. */
NL_INLINE void nl_p2p(int f, int count, MPI_Datatype t, int dest, MPI_Comm comm)
{
	if (dest < 0 || count < 0) /* MPI_PROC_NULL */
		return;
	const int mt = nl_mt; /* one load for all the counters */
	uint64_t b = (uint64_t)count * nl_type_size(t);
	nl_fn_sentm(mt, f, b);
	nl_peer_addm(mt, nl_world_rank(comm, dest), NL_P2P, b);
}

NL_INLINE void nl_fn_sent(int f, uint64_t b)
{
	nl_fn_sentm(nl_mt, f, b);
}

NL_INLINE void nl_fn_recvd(int f, uint64_t b)
{
	nl_add(&nl_fns[f].recvd, b);
	if (__builtin_expect(nl_gpu_on, 0))
		nl_gpu_fn(f, 1, b);
}

/* Receive posted for count x datatype from source in comm (the posted
 * size, not the matched one). With buffers probed, a receive from a known
 * source counts for that peer (MPI_ANY_SOURCE: for none). */
NL_INLINE void nl_recvd(int f, int count, MPI_Datatype t, int source, MPI_Comm comm)
{
	if (source == MPI_PROC_NULL || count < 0)
		return;
	uint64_t b = count ? (uint64_t)count * nl_type_size(t) : 0;
	if (b)
		nl_fn_recvd(f, b);
	/* a zero-count receive is a message too, as its zero-count send is */
	if (__builtin_expect(nl_gpu_on, 0) && source >= 0) {
		int w = nl_world_rank(comm, source);
		if ((unsigned)w < (unsigned)nl_world_size)
			nl_gpu_peer(w, 1, b);
	}
}

/* The fast path of the generated wrappers of the untimed calls that count
 * only calls, point-to-point sends (nl_p2p) and posted receives (nl_recvd):
 * single-threaded steady state (nl_slow == 0), datatype in the size cache,
 * MPI_COMM_WORLD, the peer's histogram allocated. The wrapper first checks
 * everything (nl_fast, then nl_p2p_ok / nl_recvd_ok, which write nothing), then
 * counts (nl_fast_count, nl_p2p_do, nl_recvd_do) and tail-calls PMPI_X; if a
 * check fails it tail-calls its full path (the timed call, the first use of a
 * communicator or datatype, atomic counts), which does the same
 * accounting as before. No call on the fast path, so it sets up no frame and
 * saves few registers, if any. With one writer (nl_slow == 0), the counts are
 * plain adds (nl_add1, as nl_addm(0, ...)). */
NL_INLINE int nl_fast(int f, uint64_t *calls)
{
	uint64_t c = nl_ld(&nl_fns[f].calls);
	if (__builtin_expect(c >= nl_ld(&nl_fns[f].next), 0))
		return 0;
	if (__builtin_expect(__atomic_load_n(&nl_slow, __ATOMIC_RELAXED) != 0, 0))
		return 0;
	*calls = c;
	return 1;
}

/* nl_add1 adds v to a counter that only this thread writes (nl_slow == 0) and
 * the helper thread reads: on x86-64 one add to memory (an aligned 8-byte store,
 * which a concurrent load sees whole, as with a relaxed load and store; the
 * compiler does not fuse those into one instruction, and they take a register),
 * elsewhere the relaxed load and store of nl_addm(0, ...). */
NL_INLINE void nl_add1(uint64_t *p, uint64_t v)
{
#if defined(__x86_64__)
	__asm__("addq %1, %0" : "+m"(*p) : "er"(v));
#else
	__atomic_store_n(p, nl_ld(p) + v, __ATOMIC_RELAXED);
#endif
}

NL_INLINE void nl_fast_count(int f, uint64_t calls)
{
	__atomic_store_n(&nl_fns[f].calls, calls + 1, __ATOMIC_RELAXED);
}

struct nl_p2p_x {
	uint64_t b;
	struct nl_peer *p; /* NULL: nothing to count (MPI_PROC_NULL) */
	uint64_t *h;
};

NL_INLINE int nl_p2p_ok(struct nl_p2p_x *x, int count, MPI_Datatype t, int dest, MPI_Comm comm)
{
	if ((dest | count) < 0) { /* as nl_p2p: MPI_PROC_NULL */
		x->p = NULL;
		return 1;
	}
	const struct nl_tcache *e = &nl_tcache[nl_thash((uintptr_t)t)];
	if (__builtin_expect(e->key != (uintptr_t)t, 0))
		return 0;
	if (__builtin_expect(comm != MPI_COMM_WORLD, 0))
		return 0;
	if (__builtin_expect((unsigned)dest >= (unsigned)nl_world_size, 0))
		return 0;
	struct nl_peer *p = &nl_peers[dest]; /* set before NL_SLOW_INIT is cleared */
	uint64_t *h = __atomic_load_n(&p->hist, __ATOMIC_ACQUIRE);
	if (__builtin_expect(!h, 0))
		return 0;
	x->b = (uint64_t)count * e->size;
	x->p = p;
	x->h = h;
	return 1;
}

NL_INLINE void nl_p2p_do(int f, const struct nl_p2p_x *x)
{
	if (!x->p)
		return;
	nl_add1(&nl_fns[f].sent, x->b);
	nl_add1(&x->p->bytes[NL_P2P], x->b);
	nl_add1(&x->p->msgs[NL_P2P], 1);
	nl_add1(&x->h[nl_bin(x->b)], 1);
}

struct nl_recvd_x {
	uint64_t b; /* 0: nothing to count */
};

NL_INLINE int nl_recvd_ok(struct nl_recvd_x *x, int count, MPI_Datatype t, int source, MPI_Comm comm)
{
	(void)comm; /* used with buffers probed only, never on this path */
	x->b = 0;
	if (source == MPI_PROC_NULL || count <= 0) /* as nl_recvd */
		return 1;
	const struct nl_tcache *e = &nl_tcache[nl_thash((uintptr_t)t)];
	if (__builtin_expect(e->key != (uintptr_t)t, 0))
		return 0;
	x->b = (uint64_t)count * e->size;
	return 1;
}

NL_INLINE void nl_recvd_do(int f, const struct nl_recvd_x *x)
{
	if (x->b)
		nl_add1(&nl_fns[f].recvd, x->b);
}

#endif
