/* Netloom agent: the replay trace (NETLOOM_TRACE=1, `netloom run --trace`).
 *
 * What `netloom model` replays in SimGrid's SMPI: per rank, the MPI events a
 * time-independent trace needs (point-to-point posts and completions,
 * collectives on MPI_COMM_WORLD) with the compute gap before each, in a
 * bounded array of fixed-size records filled by the rank's own thread. At
 * MPI_Finalize it is written as SMPI's trace text, gzip-compressed, to
 * DIR/<job>/rank-<N>.ti.gz beside the profile, with rank-<N>.ti.json saying
 * what it holds. Off by default; when off, the wrappers test one flag on
 * their timed path only (tracing times every call, so the fast path is never
 * taken while it is on). See agent/README.md, "Replay trace".
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "state.h"

enum tr_op {
	TR_COMPUTE, TR_SEND, TR_ISEND, TR_RECV, TR_IRECV, TR_WAIT, TR_BARRIER, TR_BCAST, TR_REDUCE,
	TR_ALLREDUCE, TR_ALLTOALL, TR_ALLTOALLV, TR_GATHER, TR_ALLGATHER, TR_GATHERV, TR_ALLGATHERV,
	TR_SCATTER, TR_SCATTERV, TR_REDUCESCATTER,
};

/* One record. For point-to-point: peer (world rank, -1: not known), tag,
 * a = bytes; b of an isend or irecv another post of the same request handle
 * queued behind while both are outstanding: that one's index (the request
 * table's queue). TR_WAIT: a = index of the posting record. Collectives:
 * a, b sizes in bytes, peer = root; the v-forms' per-rank counts (bytes)
 * start at side[aux]. TR_COMPUTE: a = ticks. */
struct tr_ev {
	uint8_t op;
	int32_t peer, tag;
	uint32_t aux;
	uint64_t a, b;
};

static char trace_dir[1400]; /* where the trace will be: the profile's folder */
static struct tr_ev *evs;
static size_t nev, cap;
static uint64_t *side;
static size_t nside, side_cap;
static int truncated;
static uint64_t last_exit, entry; /* ticks: the last traced call's exit, this call's entry */
static int emitted;               /* the current call recorded an event */
static uint64_t untraced_calls;   /* collectives not on MPI_COMM_WORLD, persistent requests, ... */
static uint64_t start, end;       /* ticks: MPI_Init's return, MPI_Finalize's entry */

static const char *cut_why = ""; /* what cut the trace: "events", "counts", "requests", "memory" */

/* Requests posted and not yet completed: handle -> the posting records. An
 * open-addressing hash table (linear probing, Fibonacci hash of the handle)
 * whose deletions shift the following entries back (no tombstones): a
 * lookup stops at the first empty slot, so a post or a completion costs the
 * same whatever was posted before. One entry per handle: both MPIs hand out
 * one shared handle for requests complete when posted (Open MPI's
 * ompi_request_empty for a small MPI_Isend, MPICH's built-in complete
 * requests), so a handle may stand for several outstanding posts; they are
 * queued in posting order through the records' b (first in, first
 * completed), and cost no slot. Kept at most half full: it doubles (one
 * rehash, the only allocation) when the handles outstanding at once reach a
 * new high, from 4,096 slots (64 KiB) up to req_max_slots (a quarter of
 * NETLOOM_TRACE_MB: 1,048,576 slots, 16 MiB, 524,288 handles at the default
 * 64 MB); one more cuts the trace ("requests"). A request freed with
 * MPI_Request_free (not seen here) leaves its post queued: the waits for
 * the later posts of its handle then name the post before each (the counts
 * stay right). Tracing is off under MPI_THREAD_MULTIPLE: one thread at a
 * time writes it, no lock. */
struct tr_req {
	uintptr_t h;
	uint32_t first1; /* the oldest posting record + 1; 0: an empty slot */
	uint32_t last;   /* the newest */
};
#define TR_REQS_MIN 4096
static struct tr_req *reqs;
static size_t req_mask;      /* slots - 1 */
static unsigned req_shift;   /* 64 - log2(slots) */
static size_t req_keys;      /* slots in use: handles outstanding */
static size_t req_n;         /* requests outstanding */
static size_t req_max_slots; /* the most slots it may have */
static uint64_t req_posted, req_completed, req_peak;

/* The handles a wait or test was given, copied before the call (completed
 * ones come back as MPI_REQUEST_NULL): grown like the table, to the most
 * handles one call was given, at most req_max_slots (8 MiB at 64 MB). */
static uintptr_t *pending;
static size_t npending, pending_cap;

/* The record array: reserved at MPI_Init, its pages touched only as used,
 * in huge pages where the kernel gives them for the asking (transparent
 * huge pages "madvise" or "always"): a record is 32 bytes and a message
 * posts and completes in two or three, so with 4 KiB pages a page fault
 * (zeroing and mapping, a microsecond or more) came every 40-odd
 * messages; with 2 MiB pages every 20,000-odd. One madvise at MPI_Init. */
static void *evs_map(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
#ifdef MADV_HUGEPAGE
	(void)madvise(p, bytes, MADV_HUGEPAGE); /* a hint: refused, 4 KiB pages as before */
#endif
	return p;
}

static void evs_unmap(void)
{
	if (evs)
		munmap(evs, cap * sizeof *evs);
	evs = NULL;
}

static void cut(const char *why)
{
	if (!truncated) {
		cut_why = why;
		end = last_exit; /* what the records cover ends there */
	}
	truncated = 1;
	nl_tracing = 0; /* a replay of a prefix with its end cut is still a prefix */
}

static uintptr_t handle(MPI_Request r)
{
	uintptr_t h = 0;
	memcpy(&h, &r, sizeof r < sizeof h ? sizeof r : sizeof h);
	return h;
}

static size_t req_home(uintptr_t h)
{
	return (size_t)(((uint64_t)h * 0x9E3779B97F4A7C15ull) >> req_shift);
}

static int req_alloc(size_t slots)
{
	struct tr_req *t = calloc(slots, sizeof *t);
	if (!t)
		return 0;
	struct tr_req *old = reqs;
	size_t n = old ? req_mask + 1 : 0;
	reqs = t;
	req_mask = slots - 1;
	req_shift = 64 - (unsigned)__builtin_ctzll((unsigned long long)slots);
	for (size_t i = 0; i < n; i++)
		if (old[i].first1) {
			size_t s = req_home(old[i].h);
			while (reqs[s].first1)
				s = (s + 1) & req_mask;
			reqs[s] = old[i];
		}
	free(old);
	return 1;
}

/* req_put queues record e, the post of request h; 0: the trace is cut */
static int req_put(uintptr_t h, uint32_t e)
{
	size_t s = req_home(h);
	for (; reqs[s].first1; s = (s + 1) & req_mask)
		if (reqs[s].h == h) { /* a shared handle: behind the others */
			evs[reqs[s].last].b = e;
			reqs[s].last = e;
			goto queued;
		}
	if (2 * (req_keys + 1) > req_mask + 1) {
		if (2 * (req_mask + 1) > req_max_slots) {
			cut("requests");
			return 0;
		}
		if (!req_alloc(2 * (req_mask + 1))) {
			cut("memory");
			return 0;
		}
		for (s = req_home(h); reqs[s].first1; s = (s + 1) & req_mask)
			;
	}
	reqs[s].h = h;
	reqs[s].first1 = e + 1;
	reqs[s].last = e;
	req_keys++;
queued:
	req_posted++;
	if (++req_n > req_peak)
		req_peak = req_n;
	return 1;
}

/* req_take takes the oldest post of request h off the table: its record, or
 * -1 when the trace did not post it (persistent, a collective's, null) */
static int64_t req_take(uintptr_t h)
{
	size_t i = req_home(h);
	for (;; i = (i + 1) & req_mask) {
		if (!reqs[i].first1)
			return -1;
		if (reqs[i].h == h)
			break;
	}
	uint32_t e = reqs[i].first1 - 1;
	req_n--;
	if (e != reqs[i].last) { /* more posts of a shared handle */
		reqs[i].first1 = (uint32_t)evs[e].b + 1;
		return e;
	}
	/* the last: backward shift, each following entry of the run moves into
	 * the hole unless its home slot lies cyclically in (hole, its slot] */
	for (size_t j = i;;) {
		j = (j + 1) & req_mask;
		if (!reqs[j].first1)
			break;
		if (((j - req_home(reqs[j].h)) & req_mask) >= ((j - i) & req_mask)) {
			reqs[i] = reqs[j];
			i = j;
		}
	}
	reqs[i].first1 = 0;
	req_keys--;
	return e;
}

/* pending_room makes room for n handles; 0: the trace is cut */
static int pending_room(size_t n)
{
	if (n <= pending_cap)
		return 1;
	if (n > req_max_slots) {
		cut("requests"); /* a wait given more handles than that */
		return 0;
	}
	size_t c = 2 * pending_cap > n ? 2 * pending_cap : n;
	if (c > req_max_slots)
		c = req_max_slots;
	uintptr_t *p = realloc(pending, c * sizeof *p);
	if (!p) {
		cut("memory");
		return 0;
	}
	pending = p;
	pending_cap = c;
	return 1;
}

void nl_trace_start(void)
{
	const char *e = getenv("NETLOOM_TRACE");
	if (!e || atoi(e) == 0 || nl_mt || !*nl_agent.output_dir)
		return;
	double mb = 64;
	const char *m = getenv("NETLOOM_TRACE_MB");
	if (m && atof(m) >= 1)
		mb = atof(m);
	cap = (size_t)(mb * 1024 * 1024 * 0.75) / sizeof *evs;
	side_cap = (size_t)(mb * 1024 * 1024 * 0.25) / sizeof *side;
	req_max_slots = TR_REQS_MIN; /* the largest power of two within a quarter of the budget */
	while ((double)req_max_slots * 2 * sizeof *reqs <= mb * 1024 * 1024 * 0.25)
		req_max_slots *= 2;
	evs = evs_map(cap * sizeof *evs); /* untouched pages cost nothing until used */
	side = malloc(side_cap * sizeof *side);
	pending_cap = 1024;
	pending = malloc(pending_cap * sizeof *pending);
	if (!evs || !side || !pending || !req_alloc(TR_REQS_MIN)) {
		evs_unmap();
		free(side);
		free(pending);
		free(reqs);
		side = NULL;
		pending = NULL;
		reqs = NULL;
		fprintf(stderr, "netloom: no memory for a %.0f MB trace: not tracing\n", mb);
		return;
	}
	start = last_exit = nl_ticks();
	snprintf(trace_dir, sizeof trace_dir, "%s/%s", nl_agent.output_dir, nl_agent.job_id);
	nl_tracing = 1;
}

static struct tr_ev *ev(int op)
{
	if (nev + 2 > cap) {
		cut("events");
		return NULL;
	}
	if (entry > last_exit) {
		struct tr_ev *c = &evs[nev++];
		memset(c, 0, sizeof *c);
		c->op = TR_COMPUTE;
		c->a = entry - last_exit;
		last_exit = entry; /* a call's second event (sendrecv's) follows at once */
	}
	struct tr_ev *x = &evs[nev++];
	memset(x, 0, sizeof *x);
	x->op = (uint8_t)op;
	emitted = 1;
	return x;
}

void nl_trace_enter(void)
{
	entry = nl_ticks();
	emitted = 0;
	npending = 0;
}

void nl_trace_enter_at(uint64_t t0)
{
	entry = t0 ? t0 : nl_ticks();
	emitted = 0;
	npending = 0;
}

void nl_trace_exit(void)
{
	if (emitted)
		last_exit = nl_ticks();
}

static uint64_t bytes(int count, MPI_Datatype t)
{
	return count > 0 ? (uint64_t)count * nl_type_size(t) : 0;
}

static void p2p(int op, int count, MPI_Datatype t, int peer, int tag, MPI_Comm comm, MPI_Request *req)
{
	if (peer == MPI_PROC_NULL)
		return;
	struct tr_ev *x = ev(op);
	if (!x)
		return;
	x->peer = peer == MPI_ANY_SOURCE ? -1 : nl_world_rank(comm, peer);
	x->tag = tag == MPI_ANY_TAG ? -1 : tag;
	x->a = bytes(count, t);
	if (req && !req_put(handle(*req), (uint32_t)(x - evs)))
		nev--; /* the trace stops before the post it could not follow */
}

void nl_tr_send(int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm)
{
	p2p(TR_SEND, count, t, dest, tag, comm, NULL);
}

void nl_tr_isend(int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm, MPI_Request *req)
{
	p2p(TR_ISEND, count, t, dest, tag, comm, req);
}

void nl_tr_irecv(int count, MPI_Datatype t, int source, int tag, MPI_Comm comm, MPI_Request *req)
{
	p2p(TR_IRECV, count, t, source, tag, comm, req);
}

/* nl_tr_recv: a blocking receive; the status names the sender of a
 * receive from MPI_ANY_SOURCE when the program kept it. */
void nl_tr_recv(int count, MPI_Datatype t, int source, int tag, MPI_Comm comm, const MPI_Status *st)
{
	if (st != MPI_STATUS_IGNORE) {
		if (source == MPI_ANY_SOURCE)
			source = st->MPI_SOURCE;
		if (tag == MPI_ANY_TAG)
			tag = st->MPI_TAG;
	}
	p2p(TR_RECV, count, t, source, tag, comm, NULL);
}

void nl_tr_sendrecv(int scount, MPI_Datatype st, int dest, int stag, int rcount, MPI_Datatype rt, int source, int rtag,
                    MPI_Comm comm, const MPI_Status *status)
{
	/* SMPI has no sendrecv: both posted, then both waited for */
	uint32_t first = (uint32_t)nev;
	if (status != MPI_STATUS_IGNORE && source == MPI_ANY_SOURCE)
		source = status->MPI_SOURCE;
	if (status != MPI_STATUS_IGNORE && rtag == MPI_ANY_TAG)
		rtag = status->MPI_TAG;
	p2p(TR_IRECV, rcount, rt, source, rtag, comm, NULL);
	p2p(TR_ISEND, scount, st, dest, stag, comm, NULL);
	for (uint32_t i = first; i < nev; i++)
		if (evs[i].op == TR_IRECV || evs[i].op == TR_ISEND) {
			struct tr_ev *w = ev(TR_WAIT);
			if (!w)
				return;
			w->a = i;
		}
}

/* nl_tr_reqs keeps the handles a wait or test was given (before the call:
 * completed ones are set to MPI_REQUEST_NULL). */
void nl_tr_reqs(int n, const MPI_Request *r)
{
	npending = 0;
	if (n <= 0 || !pending_room((size_t)n))
		return;
	for (int i = 0; i < n; i++)
		pending[npending++] = handle(r[i]);
}

/* nl_tr_reqs_f is nl_tr_reqs for a Fortran wrapper: n INTEGER handles. */
void nl_tr_reqs_f(int n, const MPI_Fint *r)
{
	npending = 0;
	if (n <= 0 || !pending_room((size_t)n))
		return;
	for (int i = 0; i < n; i++)
		pending[npending++] = handle(PMPI_Request_f2c(r[i]));
}

static void completed(int i)
{
	if (i < 0 || (size_t)i >= npending)
		return;
	int64_t e = req_take(pending[i]);
	if (e < 0)
		return; /* not one the trace posted (persistent, or a collective's) */
	struct tr_ev *w = ev(TR_WAIT);
	if (w) {
		w->a = (uint64_t)e;
		req_completed++;
	}
}

/* nl_tr_waited_f is nl_tr_waited for a Fortran wrapper: the indices count
 * from 1 there. */
void nl_tr_waited_f(int n, const MPI_Fint *indices, int flag)
{
	if (!flag)
		return;
	for (int i = 0; i < n; i++)
		if (indices[i] != MPI_UNDEFINED)
			completed(indices[i] - 1);
}

void nl_tr_waited(int n, const int *indices, int flag)
{
	if (!flag)
		return;
	if (!indices) {
		for (int i = 0; i < (int)npending; i++)
			completed(i);
		return;
	}
	for (int i = 0; i < n; i++)
		if (indices[i] != MPI_UNDEFINED)
			completed(indices[i]);
}

static void coll(int op, uint64_t a, uint64_t b, int root)
{
	struct tr_ev *x = ev(op);
	if (x) {
		x->a = a;
		x->b = b;
		x->peer = root;
	}
}

static int world(MPI_Comm comm)
{
	if (comm == MPI_COMM_WORLD)
		return 1;
	untraced_calls++;
	return 0;
}

/* counts: the n counts of a v-collective, in bytes, into side (0: full) */
static int vcounts(struct tr_ev *x, const int *counts, MPI_Datatype t)
{
	if (!x)
		return 0;
	if (nside + (size_t)nl_world_size > side_cap) {
		cut("counts");
		nev--;
		return 0;
	}
	x->aux = (uint32_t)nside;
	uint64_t sz = nl_type_size(t);
	for (int i = 0; i < nl_world_size; i++)
		side[nside++] = counts ? (uint64_t)(counts[i] > 0 ? counts[i] : 0) * sz : 0;
	return 1;
}

void nl_tr_barrier(MPI_Comm comm)
{
	if (world(comm))
		coll(TR_BARRIER, 0, 0, 0);
}

void nl_tr_bcast(int count, MPI_Datatype t, int root, MPI_Comm comm)
{
	if (world(comm))
		coll(TR_BCAST, bytes(count, t), 0, root);
}

void nl_tr_reduce(int count, MPI_Datatype t, int root, MPI_Comm comm)
{
	if (world(comm))
		coll(TR_REDUCE, bytes(count, t), 0, root);
}

void nl_tr_allreduce(int count, MPI_Datatype t, MPI_Comm comm)
{
	if (world(comm))
		coll(TR_ALLREDUCE, bytes(count, t), 0, 0);
}

void nl_tr_alltoall(int scount, MPI_Datatype st, int rcount, MPI_Datatype rt, MPI_Comm comm)
{
	if (world(comm))
		coll(TR_ALLTOALL, bytes(scount, st), bytes(rcount, rt), 0);
}

void nl_tr_alltoallv(const int *scounts, MPI_Datatype st, const int *rcounts, MPI_Datatype rt, MPI_Comm comm)
{
	if (!world(comm))
		return;
	struct tr_ev *x = ev(TR_ALLTOALLV);
	size_t at = nside;
	if (vcounts(x, scounts, st) && vcounts(x, rcounts, rt))
		x->aux = (uint32_t)at; /* the send counts, then the receive counts */
}

/* gather and allgather (root -1), scatter */
void nl_tr_gather(int op, int scount, MPI_Datatype st, int rcount, MPI_Datatype rt, int root, MPI_Comm comm)
{
	if (world(comm))
		coll(op == 0 ? TR_GATHER : op == 1 ? TR_ALLGATHER : TR_SCATTER, bytes(scount, st), bytes(rcount, rt), root);
}

void nl_tr_gatherv(int all, int scount, MPI_Datatype st, const int *rcounts, MPI_Datatype rt, int root, MPI_Comm comm)
{
	if (!world(comm))
		return;
	struct tr_ev *x = ev(all ? TR_ALLGATHERV : TR_GATHERV);
	if (!x)
		return;
	x->a = bytes(scount, st);
	x->peer = root;
	/* only the root's (or every rank's, allgatherv) receive counts are valid */
	vcounts(x, all || nl_world_rank_self == root ? rcounts : NULL, rt);
}

void nl_tr_scatterv(const int *scounts, MPI_Datatype st, int rcount, MPI_Datatype rt, int root, MPI_Comm comm)
{
	if (!world(comm))
		return;
	struct tr_ev *x = ev(TR_SCATTERV);
	if (!x)
		return;
	x->b = bytes(rcount, rt);
	x->peer = root;
	vcounts(x, nl_world_rank_self == root ? scounts : NULL, st);
}

void nl_tr_reduce_scatter(const int *rcounts, MPI_Datatype t, MPI_Comm comm)
{
	if (!world(comm))
		return;
	vcounts(ev(TR_REDUCESCATTER), rcounts, t);
}

/* ------------------------------------------------- writing */

static void put_counts(gzFile f, size_t at, int n)
{
	for (int i = 0; i < n; i++)
		gzprintf(f, " %llu", (unsigned long long)side[at + (size_t)i]);
}

/* gather's and scatter's v-forms want the root's counts on every rank; a
 * rank that is not the root writes the sizes it knows (its own) and zeros:
 * SMPI's algorithms use the root's. */
static void write_ev(gzFile f, int r, const struct tr_ev *x, double npt)
{
	int n = nl_world_size;
	switch (x->op) {
	case TR_COMPUTE: /* at 1 Gflop/s, what netloom model's platforms give every host */
		gzprintf(f, "%d compute %.0f\n", r, (double)x->a * npt);
		break;
	case TR_SEND:
	case TR_ISEND:
	case TR_RECV:
	case TR_IRECV: {
		static const char *const name[] = {[TR_SEND] = "send", [TR_ISEND] = "isend", [TR_RECV] = "recv", [TR_IRECV] = "irecv"};
		gzprintf(f, "%d %s %d %d %llu\n", r, name[x->op], x->peer, x->tag < 0 ? 0 : x->tag, (unsigned long long)x->a);
		break;
	}
	case TR_WAIT: {
		const struct tr_ev *p = &evs[x->a];
		int send = p->op == TR_ISEND;
		gzprintf(f, "%d wait %d %d %d\n", r, send ? r : p->peer, send ? p->peer : r, p->tag < 0 ? 0 : p->tag);
		break;
	}
	case TR_BARRIER:
		gzprintf(f, "%d barrier\n", r);
		break;
	case TR_BCAST:
		gzprintf(f, "%d bcast %llu %d\n", r, (unsigned long long)x->a, x->peer);
		break;
	case TR_REDUCE:
		gzprintf(f, "%d reduce %llu 0 %d\n", r, (unsigned long long)x->a, x->peer);
		break;
	case TR_ALLREDUCE:
		gzprintf(f, "%d allreduce %llu 0\n", r, (unsigned long long)x->a);
		break;
	case TR_ALLTOALL:
		gzprintf(f, "%d alltoall %llu %llu\n", r, (unsigned long long)x->a, (unsigned long long)x->b);
		break;
	case TR_ALLTOALLV: {
		uint64_t s = 0, q = 0;
		for (int i = 0; i < n; i++) {
			s += side[x->aux + (size_t)i];
			q += side[x->aux + (size_t)n + (size_t)i];
		}
		gzprintf(f, "%d alltoallv %llu", r, (unsigned long long)s);
		put_counts(f, x->aux, n);
		gzprintf(f, " %llu", (unsigned long long)q);
		put_counts(f, x->aux + (size_t)n, n);
		gzprintf(f, "\n");
		break;
	}
	case TR_GATHER:
		gzprintf(f, "%d gather %llu %llu %d\n", r, (unsigned long long)x->a, (unsigned long long)x->b, x->peer);
		break;
	case TR_ALLGATHER:
		gzprintf(f, "%d allgather %llu %llu\n", r, (unsigned long long)x->a, (unsigned long long)x->b);
		break;
	case TR_SCATTER:
		gzprintf(f, "%d scatter %llu %llu %d\n", r, (unsigned long long)x->a, (unsigned long long)x->b, x->peer);
		break;
	case TR_GATHERV:
	case TR_ALLGATHERV:
		gzprintf(f, "%d %s %llu", r, x->op == TR_GATHERV ? "gatherv" : "allgatherv", (unsigned long long)x->a);
		put_counts(f, x->aux, n);
		if (x->op == TR_GATHERV)
			gzprintf(f, " %d", x->peer);
		gzprintf(f, "\n");
		break;
	case TR_SCATTERV:
		gzprintf(f, "%d scatterv", r);
		put_counts(f, x->aux, n);
		gzprintf(f, " %llu %d\n", (unsigned long long)x->b, x->peer);
		break;
	case TR_REDUCESCATTER:
		gzprintf(f, "%d reducescatter", r);
		put_counts(f, x->aux, n);
		gzprintf(f, " 0\n");
		break;
	}
}

/* nl_trace_dir is the folder the trace goes to ("" when not tracing). */
const char *nl_trace_dir(void)
{
	return trace_dir;
}

/* nl_trace_end records the compute after the last traced call, up to
 * MPI_Finalize's entry, and stops recording. */
void nl_trace_end(void)
{
	if (!nl_tracing)
		return;
	nl_tracing = 0;
	uint64_t fin = end = nl_ticks();
	if (fin > last_exit && nev < cap) {
		memset(&evs[nev], 0, sizeof evs[nev]);
		evs[nev].op = TR_COMPUTE;
		evs[nev].a = fin - last_exit;
		nev++;
	}
}

/* nl_trace_write writes DIR/rank-<N>.ti.gz and rank-<N>.ti.json (DIR: the
 * profile's folder, already made). */
void nl_trace_write(const char *dir)
{
	if (!evs)
		return;
	double npt = nl_snap_ns_per_tick();
	int r = nl_world_rank_self;
	char path[1600], tmp[1700];
	snprintf(path, sizeof path, "%s/rank-%d.ti.gz", dir, r);
	snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
	gzFile f = gzopen(tmp, "wb6");
	if (!f) {
		fprintf(stderr, "netloom: cannot write %s: %s\n", path, strerror(errno));
		return;
	}
	gzprintf(f, "%d init\n", r);
	for (size_t i = 0; i < nev; i++)
		write_ev(f, r, &evs[i], npt);
	gzprintf(f, "%d finalize\n", r);
	if (gzclose(f) != Z_OK || rename(tmp, path) != 0) {
		fprintf(stderr, "netloom: cannot write %s\n", path);
		unlink(tmp);
		return;
	}
	snprintf(path, sizeof path, "%s/rank-%d.ti.json", dir, r);
	FILE *j = fopen(path, "w");
	if (j) {
		/* elapsed: the span the trace covers, MPI_Init's return to MPI_Finalize's entry
		 * (to the end of what it holds when cut: it said 0 before);
		 * truncated_reason: what cut it ("" when whole); requests_*: the nonblocking
		 * requests recorded, those whose completion was recorded (a wait each), the
		 * most outstanding at once, and the most the table holds */
		fprintf(j, "{\"rank\": %d, \"world_size\": %d, \"events\": %zu, \"truncated\": %s, \"truncated_reason\": \"%s\", \"untraced_calls\": %llu, "
			   "\"requests_posted\": %llu, \"requests_completed\": %llu, \"requests_outstanding_max\": %llu, \"requests_limit\": %zu, "
			   "\"host_flops\": 1e9, \"elapsed_seconds\": %.9f}\n",
			r, nl_world_size, nev, truncated ? "true" : "false", truncated ? cut_why : "", (unsigned long long)untraced_calls,
			(unsigned long long)req_posted, (unsigned long long)req_completed, (unsigned long long)req_peak, req_max_slots / 2,
			end > start ? (double)(end - start) * npt / 1e9 : 0.0);
		fclose(j);
	}
	evs_unmap();
	free(side);
	free(reqs);
	free(pending);
	side = NULL;
	reqs = NULL;
	pending = NULL;
}
