/* Netloom agent core: start and stop, rank translation caches, collective,
 * one-sided and MPI-IO accounting, regions, Open MPI's monitoring (physical traffic). */

#include <dlfcn.h>
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "env.h"

struct nl_agent nl_agent = {
	.region_lock = PTHREAD_MUTEX_INITIALIZER,
	.reorder_lock = PTHREAD_MUTEX_INITIALIZER,
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.pcontrol_region = -1,
};

uint64_t nl_io_bytes[2]; /* MPI-IO bytes read [0] and written [1] */

/* nl_wait_before times a barrier on comm before collective f: the time the
 * rank waits there for the last rank to arrive (load imbalance) is counted
 * apart from the collective's own time, as MPInside does (NETLOOM_WAITS=1;
 * agent/README.md, "Wait states"). */
void nl_wait_before(int f, MPI_Comm comm)
{
	if (comm == MPI_COMM_NULL)
		return;
	uint64_t t0 = nl_ticks();
	PMPI_Barrier(comm);
	nl_add(&nl_fns[f].wait, nl_ticks() - t0);
}

/* nl_wait_recv times a probe for the message a blocking receive f is about
 * to match: the time until the sender's message (its envelope, eager data or
 * rendezvous request) shows up is the late sender's cost, counted apart from
 * the receive's own time (the copy or transfer after it). Local time only.
 * The probe leaves the message where it is: the receive then matches the
 * same one, the first matching message (MPI's ordering), so the program
 * gets what it got without it. */
void nl_wait_recv(int f, int source, int tag, MPI_Comm comm)
{
	if (comm == MPI_COMM_NULL || source == MPI_PROC_NULL)
		return;
	MPI_Status st;
	uint64_t t0 = nl_ticks();
	PMPI_Probe(source, tag, comm, &st);
	nl_add(&nl_fns[f].wait, nl_ticks() - t0);
}

/* nl_inside is the wait measured inside f's own calls (nl_sendrecv_waits):
 * nl_fn_ticks leaves it out of f's time, as it is f's wait. */
static uint64_t nl_inside[NL_NFUNCS];

/* nl_sendrecv_waits is MPI_Sendrecv f with the wait for a late sender timed
 * apart (NETLOOM_WAITS): a probe before the receive, as for MPI_Recv, would
 * deadlock two ranks that exchange, each probing for the message the other
 * sends only after it. So the send is posted first (PMPI_Isend), then the
 * probe for the message the receive will match, timed as the wait, then the
 * receive and the send's completion: the exchange MPI_Sendrecv stands for,
 * the same messages in the same order, as Open MPI and MPICH carry it out
 * themselves (a nonblocking half and a blocking one). */
int nl_sendrecv_waits(int f, const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
		      void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm,
		      MPI_Status *status)
{
	MPI_Request rq;
	int rc = PMPI_Isend(sendbuf, sendcount, sendtype, dest, sendtag, comm, &rq);
	if (rc != MPI_SUCCESS)
		return rc;
	if (source != MPI_PROC_NULL) {
		MPI_Status st;
		uint64_t t0 = nl_ticks();
		rc = PMPI_Probe(source, recvtag, comm, &st);
		uint64_t w = nl_ticks() - t0;
		nl_add(&nl_fns[f].wait, w);
		nl_add(&nl_inside[f], w);
	}
	if (rc == MPI_SUCCESS)
		rc = PMPI_Recv(recvbuf, recvcount, recvtype, source, recvtag, comm, status);
	int wrc = PMPI_Wait(&rq, MPI_STATUS_IGNORE);
	return rc != MPI_SUCCESS ? rc : wrc;
}

/* fn_ticks is the time in f's calls: the first NL_EXACT_CALLS calls'
 * exactly, plus the timed calls' after them scaled up to all the calls after
 * them (the mean of a random sample times the count: an unbiased estimate;
 * exact with NETLOOM_TIME_SAMPLE=1). */
static uint64_t fn_ticks(int f)
{
	uint64_t calls = __atomic_load_n(&nl_fns[f].calls, __ATOMIC_RELAXED);
	uint64_t timed = __atomic_load_n(&nl_fns[f].timed, __ATOMIC_RELAXED);
	uint64_t ticks = __atomic_load_n(&nl_fns[f].ticks, __ATOMIC_RELAXED);
	uint64_t first = __atomic_load_n(&nl_fns[f].first, __ATOMIC_RELAXED);
	if (!timed || calls <= NL_EXACT_CALLS)
		return first;
	if (timed >= calls - NL_EXACT_CALLS)
		return first + ticks;
	return first + (uint64_t)((double)ticks * (double)(calls - NL_EXACT_CALLS) / (double)timed);
}

/* nl_fn_ticks is f's own time: its calls' less the waits inside them. */
uint64_t nl_fn_ticks(int f)
{
	uint64_t t = fn_ticks(f), in = __atomic_load_n(&nl_inside[f], __ATOMIC_RELAXED);
	return t > in ? t - in : 0;
}

/* ---------------------------------------------------------------- time */

/* clock_pair reads the TSC and CLOCK_MONOTONIC at one instant: of three
 * tries, the one whose two TSC reads around the clock read are closest (a
 * try the scheduler interrupted would put its preemption into the rate). */
static void clock_pair(uint64_t *tsc, uint64_t *mono)
{
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < 3; i++) {
		uint64_t t1 = nl_ticks(), m = nl_mono_ns(), t2 = nl_ticks();
		if (t2 - t1 < best) {
			best = t2 - t1;
			*tsc = t1 + (t2 - t1) / 2;
			*mono = m;
		}
	}
}

/* The TSC rate, measured against CLOCK_MONOTONIC over the whole run so far
 * (from MPI_Init's entry: a short job's MPI_Init is most of its time, and a
 * rate measured only after it would scale that time by its own error). */
double nl_ns_per_tick(void)
{
#ifdef NL_HAVE_TSC
	static uint64_t last_bits; /* the last rate measured, as the bits of a double */
	uint64_t t = 0, m = 0;
	clock_pair(&t, &m);
	if (t > nl_agent.start_tsc && m - nl_agent.start_mono_ns > 1000000) {
		double r = (double)(m - nl_agent.start_mono_ns) / (double)(t - nl_agent.start_tsc);
		uint64_t bits;
		memcpy(&bits, &r, sizeof bits);
		__atomic_store_n(&last_bits, bits, __ATOMIC_RELAXED);
		return r;
	}
	uint64_t bits = __atomic_load_n(&last_bits, __ATOMIC_RELAXED);
	if (bits) {
		double r;
		memcpy(&r, &bits, sizeof r);
		return r;
	}
	/* under a millisecond since start: measure for one */
	uint64_t t0 = nl_ticks(), m0 = nl_mono_ns();
	while (nl_mono_ns() - m0 < 1000000)
		;
	return (double)(nl_mono_ns() - m0) / (double)(nl_ticks() - t0);
#else
	return 1.0;
#endif
}

/* ------------------------------------------------- handle caches
 * Open addressing, keys stored inline. A slot's key is EMPTY, BUSY (being
 * written), TOMB (freed) or a tagged handle; the fields are written before the
 * key is published with a release store, so lookups take no lock. */

#define KEY_EMPTY 0ull
#define KEY_BUSY 1ull
#define KEY_TOMB 2ull
#define TAG_COMM (1ull << 60)
#define TAG_WIN (2ull << 60)
#define TAG_REQ (3ull << 60)
#define HANDLE_MASK ((1ull << 60) - 1)

struct nl_comm {
	uint64_t key;
	int size, rank, inter;
	int topo;   /* world holds the neighbour lists after the ranks (see add_neighbours) */
	int *world; /* world rank of each rank (remote group for intercommunicators) */
};

#define CTAB_BITS 10
#define RTAB_BITS 12
static struct nl_comm ctab[1u << CTAB_BITS];

struct nl_preq {
	uint64_t key;
	int world;
	uint64_t bytes;
};
static struct nl_preq rtab[1u << RTAB_BITS];

uint64_t nl_untracked; /* handles that did not fit in a cache */

static inline unsigned hash(uint64_t k, unsigned bits)
{
	return (unsigned)((k * 0x9E3779B97F4A7C15ull) >> (64 - bits));
}

/* slot_find returns the index of key in a table of n slots of size sz, or -1;
 * with claim, a free slot is claimed (its key set to BUSY) and its index
 * returned with *claimed set. */
static long slot_find(void *tab, size_t sz, unsigned bits, uint64_t key, int claim, int *claimed)
{
	unsigned n = 1u << bits, h = hash(key, bits);
	long tomb = -1;
	for (unsigned i = 0; i < n; i++) {
		unsigned s = (h + i) & (n - 1);
		uint64_t *kp = (uint64_t *)((char *)tab + s * sz);
		uint64_t k = __atomic_load_n(kp, __ATOMIC_ACQUIRE);
		if (k == key)
			return s;
		if (k == KEY_TOMB && tomb < 0)
			tomb = s;
		if (k == KEY_EMPTY)
			break;
	}
	if (!claim)
		return -1;
	for (int pass = 0; pass < 2; pass++) {
		for (unsigned i = 0; i < n; i++) {
			unsigned s = (h + i) & (n - 1);
			if (pass == 0 && tomb >= 0)
				s = (unsigned)tomb;
			uint64_t *kp = (uint64_t *)((char *)tab + s * sz);
			uint64_t k = __atomic_load_n(kp, __ATOMIC_ACQUIRE);
			if ((k == KEY_EMPTY || k == KEY_TOMB) &&
			    __atomic_compare_exchange_n(kp, &k, KEY_BUSY, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
				*claimed = 1;
				return s;
			}
			if (pass == 0)
				break;
		}
	}
	return -1;
}

static struct nl_comm world_entry;

/* build fills e from a group (the communicator's, or its remote group). */
static int build(struct nl_comm *e, MPI_Group g, int rank, int inter)
{
	MPI_Group wg;
	int n;
	PMPI_Group_size(g, &n);
	int *in = malloc(sizeof(int) * (size_t)n), *out = malloc(sizeof(int) * (size_t)n);
	if (!in || !out) {
		free(in);
		free(out);
		return -1;
	}
	for (int i = 0; i < n; i++)
		in[i] = i;
	PMPI_Comm_group(MPI_COMM_WORLD, &wg);
	PMPI_Group_translate_ranks(g, n, in, wg, out);
	PMPI_Group_free(&wg);
	free(in);
	e->size = n;
	e->rank = rank;
	e->inter = inter;
	e->topo = 0;
	e->world = out;
	return 0;
}

/* add_neighbours appends a communicator's process topology, when it has one,
 * to its rank translation: world[size] = out-degree, world[size+1] =
 * in-degree, then the destinations and the sources of its neighbourhood
 * collectives in their order (MPI-3.1 7.6), as world ranks (-1 for
 * MPI_PROC_NULL: the neighbours a non-periodic cartesian dimension lacks).
 * Cartesian: for each dimension the neighbour below then above (the source and
 * destination of MPI_Cart_shift(d, 1)), for sending and receiving alike;
 * graph: MPI_Graph_neighbors, both ways; distributed graph: the destinations
 * and sources of MPI_Dist_graph_neighbors. Done once per communicator, at its
 * first use, before the entry is published. */
static int add_neighbours(struct nl_comm *e, MPI_Comm comm)
{
	int status = MPI_UNDEFINED, nout = 0, nin = 0;
	if (PMPI_Topo_test(comm, &status) != MPI_SUCCESS || status == MPI_UNDEFINED)
		return 0;
	int *ranks = NULL, *w = NULL; /* communicator ranks: destinations, then sources */
	if (status == MPI_CART) {
		int nd = 0;
		PMPI_Cartdim_get(comm, &nd);
		nout = nin = 2 * nd;
		ranks = malloc(sizeof(int) * (size_t)(nout + nin + 1));
		for (int d = 0; ranks && d < nd; d++) {
			PMPI_Cart_shift(comm, d, 1, &ranks[2 * d], &ranks[2 * d + 1]);
			ranks[nout + 2 * d] = ranks[2 * d];
			ranks[nout + 2 * d + 1] = ranks[2 * d + 1];
		}
	} else if (status == MPI_GRAPH) {
		PMPI_Graph_neighbors_count(comm, e->rank, &nout);
		nin = nout;
		ranks = malloc(sizeof(int) * (size_t)(nout + nin + 1));
		if (ranks) {
			PMPI_Graph_neighbors(comm, e->rank, nout, ranks);
			for (int i = 0; i < nout; i++)
				ranks[nout + i] = ranks[i];
		}
	} else if (status == MPI_DIST_GRAPH) {
		int weighted = 0;
		PMPI_Dist_graph_neighbors_count(comm, &nin, &nout, &weighted);
		ranks = malloc(sizeof(int) * (size_t)(nout + nin + 1));
		w = malloc(sizeof(int) * (size_t)(nout + nin + 1)); /* the weights, unused */
		if (ranks && w)
			PMPI_Dist_graph_neighbors(comm, nin, ranks + nout, w + nout, nout, ranks, w);
	} else {
		return 0;
	}
	free(w);
	if (!ranks || nout < 0 || nin < 0) {
		free(ranks);
		return -1;
	}
	int *all = realloc(e->world, sizeof(int) * (size_t)(e->size + 2 + nout + nin));
	if (!all) {
		free(ranks);
		return -1;
	}
	all[e->size] = nout;
	all[e->size + 1] = nin;
	for (int i = 0; i < nout + nin; i++) {
		int r = ranks[i];
		all[e->size + 2 + i] = r >= 0 && r < e->size ? all[r] : -1;
	}
	free(ranks);
	e->world = all;
	e->topo = 1;
	return 0;
}

static struct nl_comm *comm_entry(MPI_Comm comm)
{
	if (comm == MPI_COMM_WORLD)
		return &world_entry;
	if (comm == MPI_COMM_NULL)
		return NULL;
	uint64_t key = ((uint64_t)(uintptr_t)comm & HANDLE_MASK) | TAG_COMM;
	long s = slot_find(ctab, sizeof ctab[0], CTAB_BITS, key, 0, NULL);
	if (s >= 0)
		return &ctab[s];
	int claimed = 0;
	s = slot_find(ctab, sizeof ctab[0], CTAB_BITS, key, 1, &claimed);
	if (s < 0) {
		__atomic_fetch_add(&nl_untracked, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	struct nl_comm *e = &ctab[s];
	int inter = 0, rank = -1;
	MPI_Group g;
	PMPI_Comm_test_inter(comm, &inter);
	PMPI_Comm_rank(comm, &rank);
	if (inter)
		PMPI_Comm_remote_group(comm, &g);
	else
		PMPI_Comm_group(comm, &g);
	int err = build(e, g, rank, inter);
	PMPI_Group_free(&g);
	if (!err && !inter && add_neighbours(e, comm) != 0) {
		free(e->world);
		e->world = NULL;
		err = -1;
	}
	__atomic_store_n(&e->key, err ? KEY_TOMB : key, __ATOMIC_RELEASE);
	return err ? NULL : e;
}

int nl_comm_ranks(MPI_Comm comm, int *size, int *rank, int *inter, const int **world)
{
	struct nl_comm *e = comm_entry(comm);
	if (!e)
		return -1;
	*size = e->size;
	*rank = e->rank;
	*inter = e->inter;
	*world = e == &world_entry ? NULL : e->world;
	return 0;
}

static struct nl_comm *win_entry(MPI_Win win)
{
	uint64_t key = ((uint64_t)(uintptr_t)win & HANDLE_MASK) | TAG_WIN;
	long s = slot_find(ctab, sizeof ctab[0], CTAB_BITS, key, 0, NULL);
	if (s >= 0)
		return &ctab[s];
	int claimed = 0;
	s = slot_find(ctab, sizeof ctab[0], CTAB_BITS, key, 1, &claimed);
	if (s < 0) {
		__atomic_fetch_add(&nl_untracked, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	struct nl_comm *e = &ctab[s];
	MPI_Group g;
	PMPI_Win_get_group(win, &g);
	int rank = -1;
	PMPI_Group_rank(g, &rank);
	int err = build(e, g, rank, 0);
	PMPI_Group_free(&g);
	__atomic_store_n(&e->key, err ? KEY_TOMB : key, __ATOMIC_RELEASE);
	return err ? NULL : e;
}

static void forget(uint64_t key)
{
	long s = slot_find(ctab, sizeof ctab[0], CTAB_BITS, key, 0, NULL);
	if (s < 0)
		return;
	uint64_t k = key;
	if (!__atomic_compare_exchange_n(&ctab[s].key, &k, KEY_BUSY, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return;
	free(ctab[s].world);
	ctab[s].world = NULL;
	__atomic_store_n(&ctab[s].key, KEY_TOMB, __ATOMIC_RELEASE);
}

void nl_forget_comm(MPI_Comm comm)
{
	if (comm != MPI_COMM_WORLD && comm != MPI_COMM_NULL)
		forget(((uint64_t)(uintptr_t)comm & HANDLE_MASK) | TAG_COMM);
}

void nl_forget_win(MPI_Win win)
{
	forget(((uint64_t)(uintptr_t)win & HANDLE_MASK) | TAG_WIN);
}

static inline int wrank(const struct nl_comm *e, int i)
{
	return e->world ? e->world[i] : i;
}

int nl_world_of(MPI_Comm comm, int rank)
{
	struct nl_comm *e = comm_entry(comm);
	if (!e || rank < 0 || rank >= e->size)
		return -1;
	return wrank(e, rank);
}

/* ------------------------------------------------- persistent requests */

void nl_persist(MPI_Request req, int count, MPI_Datatype t, int dest, MPI_Comm comm)
{
	if (dest < 0 || count < 0)
		return;
	uint64_t key = ((uint64_t)(uintptr_t)req & HANDLE_MASK) | TAG_REQ;
	int claimed = 0;
	long s = slot_find(rtab, sizeof rtab[0], RTAB_BITS, key, 1, &claimed);
	if (s < 0) {
		__atomic_fetch_add(&nl_untracked, 1, __ATOMIC_RELAXED);
		return;
	}
	if (!claimed) { /* a handle reused without MPI_Request_free: take it over */
		uint64_t k = key;
		if (!__atomic_compare_exchange_n(&rtab[s].key, &k, KEY_BUSY, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return;
	}
	rtab[s].world = nl_world_rank(comm, dest);
	rtab[s].bytes = (uint64_t)count * nl_type_size(t);
	__atomic_store_n(&rtab[s].key, key, __ATOMIC_RELEASE);
}

void nl_start(int f, MPI_Request req)
{
	uint64_t key = ((uint64_t)(uintptr_t)req & HANDLE_MASK) | TAG_REQ;
	long s = slot_find(rtab, sizeof rtab[0], RTAB_BITS, key, 0, NULL);
	if (s < 0)
		return; /* a receive, or a request we do not know */
	nl_fn_sent(f, rtab[s].bytes);
	nl_peer_add(rtab[s].world, NL_P2P, rtab[s].bytes);
}

void nl_startall(int f, int n, const MPI_Request *reqs)
{
	for (int i = 0; i < n; i++)
		nl_start(f, reqs[i]);
}

void nl_startall_f(int f, int n, const MPI_Fint *reqs)
{
	for (int i = 0; i < n; i++)
		nl_start(f, PMPI_Request_f2c(reqs[i]));
}

void nl_forget_request(MPI_Request req)
{
	uint64_t key = ((uint64_t)(uintptr_t)req & HANDLE_MASK) | TAG_REQ;
	long s = slot_find(rtab, sizeof rtab[0], RTAB_BITS, key, 0, NULL);
	if (s >= 0) {
		uint64_t k = key;
		__atomic_compare_exchange_n(&rtab[s].key, &k, KEY_TOMB, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
	}
}

/* ------------------------------------------------- collectives */

static inline void coll_send(int f, const struct nl_comm *e, int i, uint64_t b)
{
	if (i == e->rank)
		return;
	nl_fn_sent(f, b);
	nl_peer_add(wrank(e, i), NL_COLL, b);
}

static inline void coll_recv(int f, uint64_t b)
{
	nl_fn_recvd(f, b);
}

/* intra returns the communicator's entry if its collectives are accounted:
 * intercommunicator collectives are counted (calls, time) but not per peer. */
static struct nl_comm *intra(MPI_Comm comm)
{
	if (!nl_peers)
		return NULL;
	struct nl_comm *e = comm_entry(comm);
	return e && !e->inter && e->rank >= 0 ? e : NULL;
}

void nl_bcast(int f, int count, MPI_Datatype t, int root, MPI_Comm comm)
{
	struct nl_comm *e = intra(comm);
	if (!e || count <= 0)
		return;
	uint64_t b = (uint64_t)count * nl_type_size(t);
	if (e->rank == root) {
		for (int i = 0; i < e->size; i++)
			coll_send(f, e, i, b);
	} else {
		coll_recv(f, b);
	}
}

void nl_reduce(int f, int count, MPI_Datatype t, int root, MPI_Comm comm)
{
	struct nl_comm *e = intra(comm);
	if (!e || count <= 0)
		return;
	uint64_t b = (uint64_t)count * nl_type_size(t);
	if (e->rank != root)
		coll_send(f, e, root, b);
	else
		coll_recv(f, b * (uint64_t)(e->size - 1));
}

void nl_allreduce(int f, int count, MPI_Datatype t, MPI_Comm comm)
{
	struct nl_comm *e = intra(comm);
	if (!e || count <= 0)
		return;
	uint64_t b = (uint64_t)count * nl_type_size(t);
	for (int i = 0; i < e->size; i++)
		coll_send(f, e, i, b);
	coll_recv(f, b * (uint64_t)(e->size - 1));
}

void nl_gather(int f, const void *sbuf, int scount, MPI_Datatype st, int rcount, MPI_Datatype rt, int root, MPI_Comm comm)
{
	struct nl_comm *e = intra(comm);
	if (!e)
		return;
	if (e->rank != root) {
		if (sbuf != MPI_IN_PLACE && scount > 0)
			coll_send(f, e, root, (uint64_t)scount * nl_type_size(st));
	} else if (rcount > 0) {
		coll_recv(f, (uint64_t)rcount * nl_type_size(rt) * (uint64_t)(e->size - 1));
	}
}

void nl_gatherv(int f, const void *sbuf, int scount, MPI_Datatype st, const int *rcounts, MPI_Datatype rt, int root, MPI_Comm comm)
{
	struct nl_comm *e = intra(comm);
	if (!e)
		return;
	if (e->rank != root) {
		if (sbuf != MPI_IN_PLACE && scount > 0)
			coll_send(f, e, root, (uint64_t)scount * nl_type_size(st));
		return;
	}
	uint64_t sz = nl_type_size(rt), sum = 0;
	for (int i = 0; i < e->size; i++)
		if (i != e->rank && rcounts[i] > 0)
			sum += (uint64_t)rcounts[i] * sz;
	coll_recv(f, sum);
}

void nl_scatter(int f, int scount, MPI_Datatype st, const void *rbuf, int rcount, MPI_Datatype rt, int root, MPI_Comm comm)
{
	struct nl_comm *e = intra(comm);
	if (!e)
		return;
	if (e->rank == root) {
		if (scount <= 0)
			return;
		uint64_t b = (uint64_t)scount * nl_type_size(st);
		for (int i = 0; i < e->size; i++)
			coll_send(f, e, i, b);
	} else if (rbuf != MPI_IN_PLACE && rcount > 0) {
		coll_recv(f, (uint64_t)rcount * nl_type_size(rt));
	}
}

void nl_scatterv(int f, const int *scounts, MPI_Datatype st, const void *rbuf, int rcount, MPI_Datatype rt, int root, MPI_Comm comm)
{
	struct nl_comm *e = intra(comm);
	if (!e)
		return;
	if (e->rank == root) {
		uint64_t sz = nl_type_size(st);
		for (int i = 0; i < e->size; i++)
			if (scounts[i] > 0)
				coll_send(f, e, i, (uint64_t)scounts[i] * sz);
	} else if (rbuf != MPI_IN_PLACE && rcount > 0) {
		coll_recv(f, (uint64_t)rcount * nl_type_size(rt));
	}
}

void nl_allgather(int f, const void *sbuf, int scount, MPI_Datatype st, int rcount, MPI_Datatype rt, MPI_Comm comm)
{
	struct nl_comm *e = intra(comm);
	if (!e)
		return;
	uint64_t rb = rcount > 0 ? (uint64_t)rcount * nl_type_size(rt) : 0;
	uint64_t b = sbuf == MPI_IN_PLACE ? rb : scount > 0 ? (uint64_t)scount * nl_type_size(st) : 0;
	for (int i = 0; i < e->size; i++)
		coll_send(f, e, i, b);
	coll_recv(f, rb * (uint64_t)(e->size - 1));
}

void nl_allgatherv(int f, const void *sbuf, int scount, MPI_Datatype st, const int *rcounts, MPI_Datatype rt, MPI_Comm comm)
{
	struct nl_comm *e = intra(comm);
	if (!e)
		return;
	uint64_t rsz = nl_type_size(rt), sum = 0;
	uint64_t b = sbuf == MPI_IN_PLACE ? (uint64_t)(rcounts[e->rank] > 0 ? rcounts[e->rank] : 0) * rsz
	                                  : scount > 0 ? (uint64_t)scount * nl_type_size(st) : 0;
	for (int i = 0; i < e->size; i++) {
		coll_send(f, e, i, b);
		if (i != e->rank && rcounts[i] > 0)
			sum += (uint64_t)rcounts[i] * rsz;
	}
	coll_recv(f, sum);
}

void nl_alltoall(int f, const void *sbuf, int scount, MPI_Datatype st, int rcount, MPI_Datatype rt, MPI_Comm comm)
{
	nl_allgather(f, sbuf, scount, st, rcount, rt, comm); /* same bytes: one block to each other rank */
}

/* Element sizes of the all-to-all variants' blocks: one type for all
 * blocks (v), one per rank (w), or one Fortran handle per rank (w, Fortran). */
typedef uint64_t (*nl_block_size)(const void *types, int i);

static uint64_t one_type(const void *t, int i)
{
	(void)i;
	return nl_type_size(*(const MPI_Datatype *)t);
}

static uint64_t rank_type(const void *t, int i)
{
	return nl_type_size(((const MPI_Datatype *)t)[i]);
}

static uint64_t rank_ftype(const void *t, int i)
{
	return nl_type_size(PMPI_Type_f2c(((const MPI_Fint *)t)[i]));
}

/* alltoall_blocks counts the v and w all-to-alls: scounts[i] elements of
 * ssize(st, i) bytes to each other rank i, rcounts[i] of rsize(rt, i) from
 * it; in place, the receive counts and types describe the blocks sent. */
static void alltoall_blocks(int f, const void *sbuf, const int *scounts, nl_block_size ssize, const void *st,
                            const int *rcounts, nl_block_size rsize, const void *rt, MPI_Comm comm)
{
	struct nl_comm *e = intra(comm);
	if (!e)
		return;
	int inplace = sbuf == MPI_IN_PLACE;
	uint64_t sum = 0;
	for (int i = 0; i < e->size; i++) {
		if (i == e->rank)
			continue;
		int c = inplace ? rcounts[i] : scounts[i];
		if (c > 0)
			coll_send(f, e, i, (uint64_t)c * (inplace ? rsize(rt, i) : ssize(st, i)));
		if (rcounts[i] > 0)
			sum += (uint64_t)rcounts[i] * rsize(rt, i);
	}
	coll_recv(f, sum);
}

void nl_alltoallv(int f, const void *sbuf, const int *scounts, MPI_Datatype st, const int *rcounts, MPI_Datatype rt, MPI_Comm comm)
{
	alltoall_blocks(f, sbuf, scounts, one_type, &st, rcounts, one_type, &rt, comm);
}

void nl_alltoallw(int f, const void *sbuf, const int *scounts, const MPI_Datatype *st, const int *rcounts, const MPI_Datatype *rt, MPI_Comm comm)
{
	alltoall_blocks(f, sbuf, scounts, rank_type, st, rcounts, rank_type, rt, comm);
}

void nl_alltoallw_f(int f, const void *sbuf, const int *scounts, const MPI_Fint *st, const int *rcounts, const MPI_Fint *rt, MPI_Comm comm)
{
	alltoall_blocks(f, sbuf, scounts, rank_ftype, st, rcounts, rank_ftype, rt, comm);
}

/* ------------------------------------------------- neighbourhood collectives
 * Block i goes to the i-th destination of the communicator's topology, the
 * i-th receive block comes from its i-th source (add_neighbours). Nothing to
 * or from MPI_PROC_NULL, nothing to oneself (a periodic dimension of size 1),
 * no empty blocks; a neighbour listed twice (a periodic dimension of size 2)
 * gets two messages. Communicators without a topology: calls and time only. */

static void neighbour_blocks(int f, MPI_Comm comm, const int *scounts, int scount, nl_block_size ssize, const void *st,
                             const int *rcounts, int rcount, nl_block_size rsize, const void *rt)
{
	struct nl_comm *e = intra(comm);
	if (!e || !e->topo)
		return;
	const int *nb = e->world + e->size, nout = nb[0], nin = nb[1];
	const int *dst = nb + 2, *src = nb + 2 + nout;
	const int self = nl_world_rank_self;
	uint64_t sum = 0;
	for (int i = 0; i < nout; i++) {
		int c = scounts ? scounts[i] : scount;
		if (dst[i] >= 0 && dst[i] != self && c > 0) {
			uint64_t b = (uint64_t)c * ssize(st, i);
			nl_fn_sent(f, b);
			nl_peer_add(dst[i], NL_COLL, b);
		}
	}
	for (int i = 0; i < nin; i++) {
		int c = rcounts ? rcounts[i] : rcount;
		if (src[i] >= 0 && src[i] != self && c > 0)
			sum += (uint64_t)c * rsize(rt, i);
	}
	coll_recv(f, sum);
}

void nl_neighbor_allgather(int f, int scount, MPI_Datatype st, int rcount, MPI_Datatype rt, MPI_Comm comm)
{
	neighbour_blocks(f, comm, NULL, scount, one_type, &st, NULL, rcount, one_type, &rt);
}

void nl_neighbor_allgatherv(int f, int scount, MPI_Datatype st, const int *rcounts, MPI_Datatype rt, MPI_Comm comm)
{
	neighbour_blocks(f, comm, NULL, scount, one_type, &st, rcounts, 0, one_type, &rt);
}

void nl_neighbor_alltoall(int f, int scount, MPI_Datatype st, int rcount, MPI_Datatype rt, MPI_Comm comm)
{
	neighbour_blocks(f, comm, NULL, scount, one_type, &st, NULL, rcount, one_type, &rt);
}

void nl_neighbor_alltoallv(int f, const int *scounts, MPI_Datatype st, const int *rcounts, MPI_Datatype rt, MPI_Comm comm)
{
	neighbour_blocks(f, comm, scounts, 0, one_type, &st, rcounts, 0, one_type, &rt);
}

void nl_neighbor_alltoallw(int f, const int *scounts, const MPI_Datatype *st, const int *rcounts, const MPI_Datatype *rt, MPI_Comm comm)
{
	neighbour_blocks(f, comm, scounts, 0, rank_type, st, rcounts, 0, rank_type, rt);
}

void nl_neighbor_alltoallw_f(int f, const int *scounts, const MPI_Fint *st, const int *rcounts, const MPI_Fint *rt, MPI_Comm comm)
{
	neighbour_blocks(f, comm, scounts, 0, rank_ftype, st, rcounts, 0, rank_ftype, rt);
}

void nl_reduce_scatter(int f, const int *rcounts, MPI_Datatype t, MPI_Comm comm)
{
	struct nl_comm *e = intra(comm);
	if (!e)
		return;
	uint64_t sz = nl_type_size(t);
	for (int i = 0; i < e->size; i++)
		if (rcounts[i] > 0)
			coll_send(f, e, i, (uint64_t)rcounts[i] * sz);
	if (rcounts[e->rank] > 0)
		coll_recv(f, (uint64_t)rcounts[e->rank] * sz * (uint64_t)(e->size - 1));
}

void nl_reduce_scatter_block(int f, int rcount, MPI_Datatype t, MPI_Comm comm)
{
	struct nl_comm *e = intra(comm);
	if (!e || rcount <= 0)
		return;
	uint64_t b = (uint64_t)rcount * nl_type_size(t);
	for (int i = 0; i < e->size; i++)
		coll_send(f, e, i, b);
	coll_recv(f, b * (uint64_t)(e->size - 1));
}

void nl_scan(int f, int count, MPI_Datatype t, MPI_Comm comm, int exclusive)
{
	(void)exclusive; /* an exclusive scan moves the same contributions */
	struct nl_comm *e = intra(comm);
	if (!e || count <= 0)
		return;
	uint64_t b = (uint64_t)count * nl_type_size(t);
	for (int i = e->rank + 1; i < e->size; i++)
		coll_send(f, e, i, b);
	coll_recv(f, b * (uint64_t)e->rank);
}

/* ------------------------------------------------- one-sided, MPI-IO */

void nl_rma(int f, int count, MPI_Datatype t, int target, MPI_Win win)
{
	if (target < 0 || count <= 0 || !nl_peers)
		return;
	struct nl_comm *e = win_entry(win);
	if (!e || target >= e->size)
		return;
	uint64_t b = (uint64_t)count * nl_type_size(t);
	if (f == NL_FN_MPI_Get || f == NL_FN_MPI_Rget)
		nl_fn_recvd(f, b);
	else
		nl_fn_sent(f, b);
	nl_peer_add(wrank(e, target), NL_RMA, b);
}

void nl_io(int f, int count, MPI_Datatype t, int write)
{
	if (count <= 0)
		return;
	uint64_t b = (uint64_t)count * nl_type_size(t);
	if (write)
		nl_fn_sent(f, b);
	else
		nl_fn_recvd(f, b);
	nl_add(&nl_io_bytes[write ? 1 : 0], b);
}

/* ------------------------------------------------- Fortran support */

void *nl_fsym(void **cache, const char *name)
{
	void *p = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
	if (__builtin_expect(p != NULL, 1))
		return p;
	p = dlsym(RTLD_NEXT, name);
	if (!p) {
		fprintf(stderr, "netloom: %s not found in the MPI library: %s\n", name, dlerror());
		abort();
	}
	__atomic_store_n(cache, p, __ATOMIC_RELEASE);
	return p;
}

static const void *f_in_place[4], *f_bottom[4], *f_status_ignore[4];

const void *nl_fbuf(const void *b)
{
	for (int i = 0; b && i < 4; i++) {
		if (b == f_in_place[i])
			return MPI_IN_PLACE;
		if (b == f_bottom[i])
			return MPI_BOTTOM;
	}
	return b;
}

/* Fortran's MPI_STATUS_IGNORE is the address of a common block, under each
 * compiler's mangling (found at start); PMPI_Status_f2c is not called on it. */
static int fstatus_ignored(const void *f)
{
	if (!f || f == (const void *)MPI_F_STATUS_IGNORE)
		return 1;
	for (int i = 0; i < 4; i++)
		if (f == f_status_ignore[i])
			return 1;
	return 0;
}

const MPI_Status *nl_fstatus(const void *f, MPI_Status *c)
{
	if (fstatus_ignored(f))
		return MPI_STATUS_IGNORE;
	return PMPI_Status_f2c((const MPI_Fint *)f, c) == MPI_SUCCESS ? c : MPI_STATUS_IGNORE;
}

/* nl_fsendrecv_waits is a Fortran MPI_Sendrecv (mpif.h, use mpi, use
 * mpi_f08: the same arguments) with NETLOOM_WAITS, in place of the library's
 * binding: nl_sendrecv_waits on the arguments converted, the status
 * converted back (an f08 TYPE(MPI_Status) is laid out as mpif.h's array). */
void nl_fsendrecv_waits(const void *sendbuf, const MPI_Fint *sendcount, const MPI_Fint *sendtype, const MPI_Fint *dest,
			const MPI_Fint *sendtag, void *recvbuf, const MPI_Fint *recvcount, const MPI_Fint *recvtype,
			const MPI_Fint *source, const MPI_Fint *recvtag, const MPI_Fint *comm, MPI_Fint *status, MPI_Fint *ierr)
{
	MPI_Status st;
	int ignore = fstatus_ignored(status);
	int rc = nl_sendrecv_waits(NL_FN_MPI_Sendrecv, nl_fbuf(sendbuf), *sendcount, PMPI_Type_f2c(*sendtype), *dest, *sendtag,
				   (void *)nl_fbuf(recvbuf), *recvcount, PMPI_Type_f2c(*recvtype), *source, *recvtag,
				   PMPI_Comm_f2c(*comm), ignore ? MPI_STATUS_IGNORE : &st);
	if (rc == MPI_SUCCESS && !ignore)
		PMPI_Status_c2f(&st, status);
	*ierr = rc;
}

/* ------------------------------------------------- Open MPI monitoring: what the PML sends */

/* With Open MPI's monitoring on (--mca pml_monitoring_enable N), its pml, coll
 * and osc monitoring components call these two functions of
 * libmca_common_monitoring for every message the PML sends (collectives as
 * the library decomposed them: their internal tags are negative) and every
 * one-sided transfer. They are what Open MPI's own monitoring files are made
 * of (E, I, S and R lines). The agent, preloaded, defines them first: it
 * counts each call into the rank's physical per-peer counters, as Open MPI
 * does (only while its monitoring is started), then calls Open MPI's own.
 * No MPI_T pvar is touched: starting one turns Open MPI's own output off for
 * the rest of the run, and the pml ones are gone after MPI_Init in Open MPI
 * 4.1 (agent/README.md). Hot path: an array index and two adds (atomic
 * under MPI_THREAD_MULTIPLE). */
enum { OSC_SEND, OSC_RECV }; /* Open MPI's enum mca_monitoring_osc_direction */
typedef void (*record_pml_fn)(int, size_t, int);
typedef void (*record_osc_fn)(int, size_t, int);
static record_pml_fn real_record_pml;
static record_osc_fn real_record_osc;
static const int32_t *monitoring_state; /* Open MPI's: 0 while its monitoring is stopped */
static int physical_off = -1;            /* NETLOOM_PHYSICAL=0; -1 until read */

/* physical_resolve finds Open MPI's functions, at the first call (the
 * monitoring library is loaded during MPI_Init, after the agent). */
static void physical_resolve(void)
{
	/* The next definition after the agent's; if the library was loaded out
	 * of the global scope, from its own handle (never the agent's: that
	 * would call itself) */
	void *lib = RTLD_NEXT;
	if (!dlsym(lib, "mca_common_monitoring_record_pml")) {
		lib = dlopen("libmca_common_monitoring.so.50", RTLD_LAZY | RTLD_NOLOAD);
		if (!lib)
			lib = dlopen("libmca_common_monitoring.so", RTLD_LAZY | RTLD_NOLOAD);
	}
	monitoring_state = lib ? dlsym(lib == RTLD_NEXT ? RTLD_DEFAULT : lib, "mca_common_monitoring_current_state") : NULL;
	__atomic_store_n(&real_record_osc, lib ? (record_osc_fn)dlsym(lib, "mca_common_monitoring_record_osc") : NULL, __ATOMIC_RELEASE);
	__atomic_store_n(&real_record_pml, lib ? (record_pml_fn)dlsym(lib, "mca_common_monitoring_record_pml") : NULL, __ATOMIC_RELEASE);
	const char *e = getenv("NETLOOM_PHYSICAL");
	__atomic_store_n(&physical_off, e && *e && atoi(e) == 0, __ATOMIC_RELEASE);
}

/* physical_alloc gives the physical counters their rows: at MPI_Init's
 * entry when the launcher tells the world's size (Open MPI's mpirun does),
 * so that what the PML sends during MPI_Init is counted as Open MPI counts
 * it, else once MPI_Init has returned. */
static void physical_alloc(int size)
{
	if (size <= 0 || nl_agent.monitored)
		return;
	struct nl_monitored *m = calloc((size_t)size, sizeof *m);
	if (!m)
		return;
	nl_agent.monitored_size = size;
	__atomic_store_n(&nl_agent.monitored, m, __ATOMIC_RELEASE);
}

/* nl_physical_known: Open MPI's monitoring reports to the agent, so every
 * peer row carries what the library really sent (zeros included). */
int nl_physical_known(void)
{
	return __atomic_load_n(&real_record_pml, __ATOMIC_ACQUIRE) && monitoring_state && !physical_off;
}

NL_INLINE void physical_add(int rank, size_t bytes, int class)
{
	struct nl_monitored *m = __atomic_load_n(&nl_agent.monitored, __ATOMIC_ACQUIRE);
	if (!m || rank < 0 || rank >= nl_agent.monitored_size || !monitoring_state ||
	    !__atomic_load_n(monitoring_state, __ATOMIC_RELAXED) || physical_off)
		return;
	/* Open MPI calls these from the thread that made the MPI call: one
	 * writer unless MPI_THREAD_MULTIPLE, as for the agent's own counts */
	nl_addm(nl_mt, &m[rank].bytes[class], (uint64_t)bytes);
	nl_addm(nl_mt, &m[rank].msgs[class], 1);
}

void mca_common_monitoring_record_pml(int world_rank, size_t data_size, int tag)
{
	record_pml_fn real = __atomic_load_n(&real_record_pml, __ATOMIC_ACQUIRE);
	if (__builtin_expect(!real, 0)) {
		physical_resolve();
		if (!(real = real_record_pml))
			return;
	}
	physical_add(world_rank, data_size, tag < 0 ? NL_COLL : NL_P2P);
	real(world_rank, data_size, tag);
}

void mca_common_monitoring_record_osc(int world_rank, size_t data_size, int direction)
{
	record_osc_fn real = __atomic_load_n(&real_record_osc, __ATOMIC_ACQUIRE);
	if (__builtin_expect(!real, 0)) {
		physical_resolve();
		if (!(real = real_record_osc))
			return;
	}
	/* a put or accumulate: this rank's adapter sends; a get: the target's sends to it */
	if (direction == OSC_SEND)
		physical_add(world_rank, data_size, NL_RMA);
	else
		physical_add(world_rank, data_size, NL_FETCHED);
	real(world_rank, data_size, direction);
}

/* ------------------------------------------------- regions */

void nl_totals(uint64_t bytes[NL_NCLASS], uint64_t msgs[NL_NCLASS], uint64_t *mpi_ticks, uint64_t *wait_ticks)
{
	for (int c = 0; c < NL_NCLASS; c++)
		bytes[c] = msgs[c] = 0;
	for (int i = 0; nl_peers && i < nl_world_size; i++)
		for (int c = 0; c < NL_NCLASS; c++) {
			bytes[c] += __atomic_load_n(&nl_peers[i].bytes[c], __ATOMIC_RELAXED);
			msgs[c] += __atomic_load_n(&nl_peers[i].msgs[c], __ATOMIC_RELAXED);
		}
	uint64_t t = 0, w = 0;
	for (int f = 0; f < NL_NFUNCS; f++) {
		uint64_t wf = __atomic_load_n(&nl_fns[f].wait, __ATOMIC_RELAXED);
		t += nl_fn_ticks(f) + wf;
		w += wf;
	}
	*mpi_ticks = t;
	*wait_ticks = w;
}

static int region_index(const char *name)
{
	for (int i = 0; i < nl_agent.nregions; i++)
		if (strncmp(nl_agent.regions[i].name, name, NL_NAME_MAX - 1) == 0)
			return i;
	if (nl_agent.nregions == NL_MAX_REGIONS)
		return -1;
	struct nl_region *r = &nl_agent.regions[nl_agent.nregions];
	memset(r, 0, sizeof *r);
	snprintf(r->name, sizeof r->name, "%s", name);
	return nl_agent.nregions++;
}

static void region_begin(int i)
{
	struct nl_region *r = &nl_agent.regions[i];
	if (r->depth++ > 0)
		return;
	r->entries++;
	r->t0_ns = nl_mono_ns();
	nl_totals(r->bytes0, r->msgs0, &r->mpi_t0, &r->wait_t0);
}

static void region_end(int i)
{
	struct nl_region *r = &nl_agent.regions[i];
	if (r->depth == 0 || --r->depth > 0)
		return;
	uint64_t b[NL_NCLASS], m[NL_NCLASS], t, w;
	nl_totals(b, m, &t, &w);
	r->time_ns += nl_mono_ns() - r->t0_ns;
	r->mpi_ticks += t > r->mpi_t0 ? t - r->mpi_t0 : 0; /* sampled estimates may step back */
	r->wait_ticks += w - r->wait_t0;                     /* exact: every wait is timed */
	for (int c = 0; c < NL_NCLASS; c++) {
		r->bytes[c] += b[c] - r->bytes0[c];
		r->msgs[c] += m[c] - r->msgs0[c];
	}
}

void netloom_region_begin(const char *name)
{
	if (!name)
		return;
	pthread_mutex_lock(&nl_agent.region_lock);
	int i = region_index(name);
	if (i >= 0)
		region_begin(i);
	pthread_mutex_unlock(&nl_agent.region_lock);
}

void netloom_region_end(const char *name)
{
	if (!name)
		return;
	pthread_mutex_lock(&nl_agent.region_lock);
	for (int i = 0; i < nl_agent.nregions; i++)
		if (strncmp(nl_agent.regions[i].name, name, NL_NAME_MAX - 1) == 0)
			region_end(i);
	pthread_mutex_unlock(&nl_agent.region_lock);
}

/* MPI_Pcontrol(level): level > 0 starts region "pcontrol-<level>" (ending the
 * one a previous MPI_Pcontrol started), level 0 ends it. */
void nl_pcontrol(int level)
{
	pthread_mutex_lock(&nl_agent.region_lock);
	if (nl_agent.pcontrol_region >= 0) {
		region_end(nl_agent.pcontrol_region);
		nl_agent.pcontrol_region = -1;
	}
	if (level > 0) {
		char name[32];
		snprintf(name, sizeof name, "pcontrol-%d", level);
		int i = region_index(name);
		if (i >= 0) {
			region_begin(i);
			nl_agent.pcontrol_region = i;
		}
	}
	pthread_mutex_unlock(&nl_agent.region_lock);
}

void nl_regions_copy(struct nl_region *out, int *n)
{
	pthread_mutex_lock(&nl_agent.region_lock);
	*n = nl_agent.nregions;
	memcpy(out, nl_agent.regions, sizeof(struct nl_region) * (size_t)*n);
	pthread_mutex_unlock(&nl_agent.region_lock);
}

/* ------------------------------------------------- start and stop */

static void library_version(void)
{
	char v[MPI_MAX_LIBRARY_VERSION_STRING] = "";
	int len = 0, a = 0, b = 0, c = 0;
	PMPI_Get_library_version(v, &len);
	const char *p;
	if ((p = strstr(v, "Open MPI v")) && sscanf(p, "Open MPI v%d.%d.%d", &a, &b, &c) == 3)
		snprintf(nl_agent.mpi_library, sizeof nl_agent.mpi_library, "Open MPI %d.%d.%d", a, b, c);
	else if ((p = strstr(v, "MPICH Version:"))) {
		char ver[32] = "";
		sscanf(p + strlen("MPICH Version:"), "%31s", ver);
		snprintf(nl_agent.mpi_library, sizeof nl_agent.mpi_library, "MPICH %s", ver);
	} else {
		v[strcspn(v, "\n,")] = 0;
		snprintf(nl_agent.mpi_library, sizeof nl_agent.mpi_library, "%s", v);
	}
}

/* job_id finds the job's id without any MPI call, so that every rank of a
 * launch finds the same one: the scheduler's, NETLOOM_JOB_ID (`netloom run`
 * sets it), Open MPI's (its mpirun's address and the job's number, which
 * every rank of one mpirun shares), else one made from the host and the
 * parent process: the ranks of a single-host MPICH/Hydra launch share their
 * proxy (Hydra gives no job id; on several hosts set NETLOOM_JOB_ID or use
 * `netloom run`). */
static void job_id(char *out, size_t n)
{
	nl_env_copy(out, n, "SLURM_JOB_ID", "PBS_JOBID");
	if (!*out)
		nl_env_copy(out, n, "NETLOOM_JOB_ID", NULL);
	const char *ompi = getenv("OMPI_MCA_ess_base_jobid"), *hnp = getenv("OMPI_MCA_orte_hnp_uri");
	if (!*out && ompi && *ompi) {
		/* the HNP's URI: "<jobfam>.0;tcp://<addr>:<port>;..." */
		const char *addr = hnp ? strstr(hnp, "://") : NULL;
		int len = addr ? (int)strcspn(addr + 3, ";") : 0;
		snprintf(out, n, "ompi-%s-%.*s", ompi, len, addr ? addr + 3 : "");
	}
	nl_job_id_finish(out, n);
}

/* nl_init_begin reads the clocks at MPI_Init's entry: a rank's wall time
 * starts there, as its MPI time does (MPI_Init's own time is part of both). */
void nl_init_begin(void)
{
	if (nl_agent.wall_start_mono_ns)
		return;
	clock_pair(&nl_agent.start_tsc, &nl_agent.start_mono_ns);
	nl_agent.wall_start_mono_ns = nl_agent.start_mono_ns;
	nl_agent.start_unix_ns = nl_unix_ns();
	physical_alloc(nl_env_count("OMPI_COMM_WORLD_SIZE", 0));
}

/* nl_core_start: the accounting's start, once MPI is up (life.c). */
void nl_core_start(void)
{
	nl_agent.started = 1;
	nl_init_begin(); /* MPI_Init was not seen (the agent linked after it?) */

	int provided = MPI_THREAD_SINGLE;
	PMPI_Query_thread(&provided);
	nl_mt = provided == MPI_THREAD_MULTIPLE;
	if (nl_mt)
		__atomic_fetch_or(&nl_slow, NL_SLOW_MT, __ATOMIC_RELAXED);
	PMPI_Comm_rank(MPI_COMM_WORLD, &nl_world_rank_self);
	PMPI_Comm_size(MPI_COMM_WORLD, &nl_world_size);
	world_entry.size = nl_world_size;
	world_entry.rank = nl_world_rank_self;

	nl_agent.interval_s = nl_env_double("NETLOOM_INTERVAL", 5.0);
	nl_agent.peer_limit = nl_env_count("NETLOOM_PEER_LIMIT", 256);
	nl_agent.top_peers = nl_env_count("NETLOOM_TOP_PEERS", 32);
	nl_waits = nl_env_count("NETLOOM_WAITS", 0) != 0;
	double sample = nl_env_double("NETLOOM_TIME_SAMPLE", 32);
	if (sample < 1)
		sample = 1;
	if (sample > (1u << 20))
		sample = 1u << 20;
	/* the trace needs every call's entry and exit */
	nl_time_sample(nl_env_count("NETLOOM_TRACE", 0) != 0 ? 1 : 2 * (uint64_t)sample - 1);
	nl_type_cache_init();
	nl_env_copy(nl_agent.output_dir, sizeof nl_agent.output_dir, "NETLOOM_OUTPUT", NULL);

	gethostname(nl_agent.host, sizeof nl_agent.host);
	nl_agent.host[sizeof nl_agent.host - 1] = 0;
	nl_node_program_user(nl_agent.node, sizeof nl_agent.node, nl_agent.host, nl_agent.program, sizeof nl_agent.program,
	                     nl_agent.user, sizeof nl_agent.user);
	job_id(nl_agent.job_id, sizeof nl_agent.job_id);

	library_version();

	static const char *const inplace[4] = {"mpi_fortran_in_place_", "mpi_fortran_in_place__", "mpi_fortran_in_place", "MPI_FORTRAN_IN_PLACE"};
	static const char *const bottom[4] = {"mpi_fortran_bottom_", "mpi_fortran_bottom__", "mpi_fortran_bottom", "MPI_FORTRAN_BOTTOM"};
	static const char *const stignore[4] = {"mpi_fortran_status_ignore_", "mpi_fortran_status_ignore__",
	                                        "mpi_fortran_status_ignore", "MPI_FORTRAN_STATUS_IGNORE"};
	for (int i = 0; i < 4; i++) {
		f_in_place[i] = dlsym(RTLD_DEFAULT, inplace[i]);
		f_bottom[i] = dlsym(RTLD_DEFAULT, bottom[i]);
		f_status_ignore[i] = dlsym(RTLD_DEFAULT, stignore[i]);
	}

	struct nl_peer *peers = NULL;
	if (posix_memalign((void **)&peers, 64, sizeof(struct nl_peer) * (size_t)nl_world_size) != 0) {
		fprintf(stderr, "netloom: out of memory for %d peers\n", nl_world_size);
		abort();
	}
	memset(peers, 0, sizeof(struct nl_peer) * (size_t)nl_world_size);
	physical_alloc(nl_world_size);
	__atomic_store_n(&nl_peers, peers, __ATOMIC_RELEASE);
	__atomic_fetch_and(&nl_slow, ~NL_SLOW_INIT, __ATOMIC_RELEASE); /* the wrappers' fast path may read nl_peers now */
	nl_gpu_check();
}

/* nl_gpu_check starts probing buffers once the process has CUDA (gpu.h):
 * MPI_Init, then each snapshot. The per-peer counts come first, then every
 * wrapper leaves its fast path (NL_SLOW_GPU) for the one naming buffers. */
void nl_gpu_check(void)
{
	if (__atomic_load_n(&nl_slow, __ATOMIC_RELAXED) & NL_SLOW_GPU || !nl_peers || !nl_gpu_poll())
		return;
	struct nl_gpu_counts *g = calloc((size_t)nl_world_size, sizeof *g);
	if (!g) {
		fprintf(stderr, "netloom: out of memory for %d peers' buffer kinds\n", nl_world_size);
		return; /* kinds per function only */
	}
	__atomic_store_n(&nl_gpeers, g, __ATOMIC_RELEASE);
	__atomic_fetch_or(&nl_slow, NL_SLOW_GPU, __ATOMIC_RELEASE);
}

/* nl_core_stop: regions left open are closed (life.c, at MPI_Finalize). */
void nl_core_stop(void)
{
	pthread_mutex_lock(&nl_agent.region_lock);
	for (int i = 0; i < nl_agent.nregions; i++) /* close regions left open */
		while (nl_agent.regions[i].depth > 0)
			region_end(i);
	nl_agent.pcontrol_region = -1;
	pthread_mutex_unlock(&nl_agent.region_lock);
}

/* ------------------------------------------------- hand-written wrappers
 * (MPI_Init, MPI_Init_thread and MPI_Finalize: life.c) */

int MPI_Pcontrol(const int level, ...)
{
	const uint64_t t0 = nl_ticks();
	nl_pcontrol(level);
	int rc = PMPI_Pcontrol(level);
	nl_fn_done(NL_FN_MPI_Pcontrol, t0);
	return rc;
}
