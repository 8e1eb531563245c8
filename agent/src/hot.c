/* Netloom agent: the hot path's state (hot.h) and the slow paths of its
 * inline code: the timed call (sampling), the datatype size cache's misses,
 * a peer's first histogram. Nothing here knows of the rest of the agent. */

#include <stdlib.h>

#include "hot.h"

struct nl_fn nl_fns[NL_NFUNCS];
struct nl_peer *nl_peers;
int nl_world_size, nl_world_rank_self;
int nl_mt;
unsigned nl_slow = NL_SLOW_INIT;
struct nl_gpu_counts nl_gfns[NL_NFUNCS];
struct nl_gpu_counts *nl_gpeers;
__thread unsigned char nl_gk[2] __attribute__((tls_model("initial-exec"))) = {NL_KIND_NONE, NL_KIND_NONE};
int nl_waits;
int nl_tracing;
struct nl_tcache nl_tcache[NL_TCACHE];
static uint64_t time_span = 1; /* 2N-1 for NETLOOM_TIME_SAMPLE=N: gaps uniform in [1, 2N-1] */

/* nl_time_sample sets NETLOOM_TIME_SAMPLE's gap span (1: every call timed). */
void nl_time_sample(uint64_t span)
{
	time_span = span;
}

/* nl_fn_timed records the time of a timed call (the call-th of f, 0-based)
 * and picks the next call to time. A function that can wait for another
 * process (nl_fn_blocks) is timed at every call: its durations are heavy-tailed
 * (a late peer, a descheduled rank), and a sample scaled up by N multiplies
 * one long wait by N. The others: the first NL_EXACT_CALLS calls are all timed
 * and summed apart, exactly (the first often pays for lazy set-up, and a short
 * job's few calls make a poor sample: a 0.3 s job's scaled estimate once
 * passed its wall time), then one call in N on average, at gaps drawn
 * uniformly from [1, 2N-1] (from the measured duration's low bits, so the
 * samples do not lock onto a periodic pattern of the application). N = 1:
 * every call. Out of line: it runs for the timed calls only. */
void nl_fn_timed(int f, uint64_t call, uint64_t ticks)
{
	struct nl_fn *p = &nl_fns[f];
	uint64_t gap = 1;
	if (call < NL_EXACT_CALLS) {
		nl_add(&p->first, ticks);
	} else {
		nl_add(&p->ticks, ticks);
		nl_add(&p->timed, 1);
		if (time_span > 1 && !nl_fn_blocks[f]) {
			uint64_t x = (ticks ^ (call << 20)) * 0x9E3779B97F4A7C15ull; /* the duration's low bits are noise */
			gap = 1 + (((x >> 32) * time_span) >> 32);
		}
	}
	__atomic_store_n(&p->next, call + gap, __ATOMIC_RELAXED);
}

/* datatype sizes */

static uint64_t type_size_query(MPI_Datatype t)
{
	int s = 0;
	if (PMPI_Type_size(t, &s) != MPI_SUCCESS || s < 0)
		return 0;
	return (uint64_t)s;
}

/* A miss in the cache: ask MPI, and remember the answer unless several threads
 * may call MPI at once (then the table stays as MPI_Init left it). */
uint64_t nl_type_size_slow(MPI_Datatype t)
{
	uint64_t s = type_size_query(t);
	if (!nl_mt && !(__atomic_load_n(&nl_slow, __ATOMIC_RELAXED) & NL_SLOW_INIT)) {
		struct nl_tcache *e = &nl_tcache[nl_thash((uintptr_t)t)];
		e->key = (uintptr_t)t;
		e->size = s;
	}
	return s;
}

/* MPI_Type_free: the handle may come back for another type. */
void nl_type_forget(MPI_Datatype t)
{
	if (nl_mt)
		return; /* never entered: derived types are not cached then */
	struct nl_tcache *e = &nl_tcache[nl_thash((uintptr_t)t)];
	if (e->key == (uintptr_t)t) {
		e->key = 0;
		e->size = 0;
	}
}

/* The predefined types, most used first (a later one never evicts an earlier
 * one that hashes to the same slot). */
void nl_type_cache_init(void)
{
	const MPI_Datatype pre[] = {
		MPI_BYTE, MPI_CHAR, MPI_INT, MPI_DOUBLE, MPI_FLOAT, MPI_LONG, MPI_UNSIGNED_CHAR,
		MPI_SIGNED_CHAR, MPI_SHORT, MPI_UNSIGNED_SHORT, MPI_UNSIGNED, MPI_UNSIGNED_LONG,
		MPI_LONG_LONG, MPI_UNSIGNED_LONG_LONG, MPI_LONG_DOUBLE, MPI_WCHAR, MPI_PACKED,
		MPI_INT8_T, MPI_INT16_T, MPI_INT32_T, MPI_INT64_T, MPI_UINT8_T, MPI_UINT16_T,
		MPI_UINT32_T, MPI_UINT64_T, MPI_C_BOOL, MPI_C_FLOAT_COMPLEX, MPI_C_DOUBLE_COMPLEX,
		MPI_AINT, MPI_OFFSET, MPI_COUNT, MPI_FLOAT_INT, MPI_DOUBLE_INT, MPI_LONG_INT,
		MPI_2INT, MPI_SHORT_INT, MPI_LONG_DOUBLE_INT, MPI_INTEGER, MPI_REAL,
		MPI_DOUBLE_PRECISION, MPI_COMPLEX, MPI_DOUBLE_COMPLEX, MPI_LOGICAL, MPI_CHARACTER,
		MPI_2REAL, MPI_2DOUBLE_PRECISION, MPI_2INTEGER,
	};
	for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++) {
		if (pre[i] == MPI_DATATYPE_NULL)
			continue;
		struct nl_tcache *e = &nl_tcache[nl_thash((uintptr_t)pre[i])];
		if (e->key)
			continue;
		int s = 0;
		if (PMPI_Type_size(pre[i], &s) != MPI_SUCCESS || s < 0)
			continue;
		e->key = (uintptr_t)pre[i];
		e->size = (uint64_t)s;
	}
}

uint64_t *nl_hist_alloc(struct nl_peer *p)
{
	uint64_t *h = calloc(NL_NBINS, sizeof(uint64_t)), *old = NULL;
	if (!h)
		return NULL;
	if (!__atomic_compare_exchange_n(&p->hist, &old, h, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		free(h);
		return old;
	}
	return h;
}
