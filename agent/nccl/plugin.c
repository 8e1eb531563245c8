/* libnetloom-nccl.so: Netloom's NCCL profiler plugin (../../docs/nccl.md).
 *
 * NCCL (2.23 and up) loads it when NCCL_PROFILER_PLUGIN names it and takes
 * ncclProfiler_v5 (NCCL 2.27, 2.28) or ncclProfiler_v4 (NCCL 2.26) from it.
 * Per process (an NCCL rank) it counts, per communicator, each collective
 * and point-to-point operation by name, algorithm and protocol: calls,
 * bytes (count x datatype size) and time; and per peer of the communicator
 * the bytes its network transport reported (IB or socket events), or else
 * the bytes of its proxy's transfer steps. A reporting thread ships that
 * to the daemon as the MPI agent ships an MPI rank (the same Datagram,
 * wire.c, signed with MUNGE by auth.c): a snapshot every NETLOOM_INTERVAL,
 * the final one when the process's last communicator is finalized (or at
 * exit), and the profile file under NETLOOM_OUTPUT.
 *
 * The event path. NCCL calls startEvent/stopEvent/recordEventState from
 * the application's threads, its proxy threads and its profiler thread,
 * concurrently. Nothing there allocates, locks or makes a system call but
 * clock_gettime (the vDSO): an event takes a slot of a preallocated ring
 * (one relaxed atomic increment of the ring's sequence), counters are
 * relaxed atomic adds, and a handle is not a pointer but the slot's
 * sequence number with the event's kind in its low bits, so that a handle
 * NCCL hands back after its slot was reused (16,384 operations later) is
 * recognised as stale and ignored, and no handle is ever dereferenced.
 * The one lock is taken the first time a communicator sees an
 * (operation, algorithm, protocol): its row is added to the
 * communicator's table, which readers scan without a lock.
 *
 * An operation's time runs from its startEvent to the last stop of the
 * operation or of its children (its kernel's channels, its proxy
 * operations): NCCL stops a collective's own event as soon as it is
 * enqueued, before the GPU ran it.
 *
 * Failure never reaches NCCL: every entry point returns success, a
 * descriptor it cannot read is ignored, and when memory runs out the
 * plugin turns its events off with one line on stderr ("netloom: ...").
 * Built with plain gcc; protobuf-c is its one library beyond libc. */

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "env.h"
#include "profiler.h"
#include "snapshot.h"
#include "wire.h"

typedef Netloom__Agent__V1__Datagram Datagram;
typedef Netloom__Agent__V1__Process Process;
typedef Netloom__Agent__V1__Traffic Traffic;
typedef Netloom__Agent__V1__PeerTraffic PeerTraffic;
typedef Netloom__Agent__V1__FunctionStat FunctionStat;
typedef Netloom__Agent__V1__Gpu Gpu;
typedef Netloom__Agent__V1__NcclOp NcclOp;
typedef Netloom__Agent__V1__NcclPeer NcclPeer;

#define LD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define ST(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)

/* the events the plugin asks NCCL for */
#define EVENTS (NL_NCCL_COLL | NL_NCCL_P2P | NL_NCCL_PROXY_OP | NL_NCCL_PROXY_STEP | NL_NCCL_KERNEL_CH | NL_NCCL_NET_PLUGIN)

/* ------------------------------------------------- communicators */

#define NROWS 64 /* (operation, algorithm, protocol) per communicator */
enum { CLS_COLL, CLS_P2P };      /* the operation a network transfer is for */
enum { SRC_NET, SRC_PROXY };     /* network events, proxy steps */
enum { DIR_SENT, DIR_RECV };

struct row {
	const char *kfunc, *kalgo, *kproto; /* the strings' addresses NCCL passed: the fast key */
	struct row *same;                   /* set: the same strings at other addresses; counts go there */
	uint64_t dtype;                     /* the last datatype name's address | its size << 56 */
	uint64_t calls, bytes, time_ns;
	char name[32], algo[24], proto[16];
};

struct peer {
	uint64_t c[2][2][2][2]; /* [source][direction][class][bytes, msgs] */
};

struct comm {
	struct comm *next; /* every communicator, newest first: never freed */
	uint64_t hash;
	int rank, nranks;
	int live;          /* between init and finalize (g.lock) */
	int nrows;         /* rows published (release) */
	uint64_t lost;     /* operations not counted: the row table was full */
	pthread_mutex_t add;
	struct row rows[NROWS];
	struct peer *peers; /* nranks */
};

static struct comm *comms; /* pushed under g.lock, read without it */

/* ------------------------------------------------- process state */

static struct {
	pthread_mutex_t lock; /* init, finalize, exit: never the event path */
	int disabled;         /* events off after a failure (atomic) */
	int started, live, hooked, warned_thread;
	int iface;            /* the ncclProfiler_vN NCCL took */
	pid_t pid;
	char job[128], node[64], host[64], program[256], user[64], library[64], version[32];
	char out[1024];
	int rank, world;
	double interval_s;
	int64_t start_unix_ns;
	uint64_t start_mono_ns;
	uint64_t seq, dropped; /* snapshots taken; datagrams dropped (atomic) */
	int net_seen;          /* a network event was counted (atomic) */

	/* the reporting thread */
	pthread_t thread;
	int running, quit;
	pthread_mutex_t tlock;
	pthread_cond_t wake;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER, .tlock = PTHREAD_MUTEX_INITIALIZER};

static void disable(const char *why)
{
	if (!__atomic_exchange_n(&g.disabled, 1, __ATOMIC_RELAXED))
		fprintf(stderr, "netloom: %s: NCCL profiling off\n", why);
}

/* ------------------------------------------------- rows */

static unsigned type_size(const char *t)
{
	static const struct {
		const char *name;
		unsigned size;
	} types[] = {
	    {"ncclFloat32", 4}, {"ncclBfloat16", 2}, {"ncclFloat16", 2}, {"ncclInt32", 4},     {"ncclUint32", 4},
	    {"ncclInt64", 8},   {"ncclUint64", 8},   {"ncclFloat64", 8}, {"ncclInt8", 1},      {"ncclUint8", 1},
	    {"ncclChar", 1},    {"ncclInt", 4},      {"ncclHalf", 2},    {"ncclFloat", 4},     {"ncclDouble", 8},
	    {"ncclFloat8e4m3", 1}, {"ncclFloat8e5m2", 1},
	};
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
		if (strcmp(t, types[i].name) == 0)
			return types[i].size;
	return 0; /* "Unknown": no bytes */
}

#define PTR_BITS ((1ull << 56) - 1)

/* bytes_of: count x the datatype's size; the size of the name last seen
 * at that address is kept in the row (one word: address and size) */
static uint64_t bytes_of(struct row *r, const char *dtype, size_t count)
{
	if (!dtype)
		return 0;
	uint64_t key = (uint64_t)(uintptr_t)dtype & PTR_BITS, c = LD(&r->dtype);
	unsigned size;
	if (c && (c & PTR_BITS) == key) {
		size = (unsigned)(c >> 56);
	} else {
		size = type_size(dtype);
		ST(&r->dtype, key | (uint64_t)size << 56);
	}
	return (uint64_t)count * size;
}

static const char *str(const char *s)
{
	return s ? s : "";
}

/* row_add adds the row of (f, a, p) once, under the communicator's lock:
 * the first time it sees these strings at these addresses */
static struct row *row_add(struct comm *c, const char *f, const char *a, const char *p)
{
	struct row *found = NULL, *canon = NULL;
	pthread_mutex_lock(&c->add);
	int n = c->nrows;
	for (int i = 0; i < n; i++) {
		struct row *r = &c->rows[i];
		if (r->kfunc == f && r->kalgo == a && r->kproto == p) { /* added meanwhile */
			found = r->same ? r->same : r;
			goto out;
		}
		if (!r->same && !canon && strncmp(r->name, str(f), sizeof r->name - 1) == 0 &&
		    strncmp(r->algo, str(a), sizeof r->algo - 1) == 0 && strncmp(r->proto, str(p), sizeof r->proto - 1) == 0)
			canon = r;
	}
	if (n == NROWS) {
		ADD(&c->lost, 1);
		goto out;
	}
	struct row *r = &c->rows[n];
	r->kfunc = f;
	r->kalgo = a;
	r->kproto = p;
	r->same = canon;
	snprintf(r->name, sizeof r->name, "%s", str(f));
	snprintf(r->algo, sizeof r->algo, "%s", str(a));
	snprintf(r->proto, sizeof r->proto, "%s", str(p));
	found = canon ? canon : r;
	__atomic_store_n(&c->nrows, n + 1, __ATOMIC_RELEASE);
out:
	pthread_mutex_unlock(&c->add);
	return found;
}

static struct row *row_for(struct comm *c, const char *f, const char *a, const char *p)
{
	int n = __atomic_load_n(&c->nrows, __ATOMIC_ACQUIRE);
	for (int i = 0; i < n; i++) {
		struct row *r = &c->rows[i];
		if (r->kfunc == f && r->kalgo == a && r->kproto == p)
			return r->same ? r->same : r;
	}
	return row_add(c, f, a, p);
}

/* ------------------------------------------------- event slots and handles */

/* A handle is (sequence << 4 | kind), never a pointer. */
enum { K_COLL = 1, K_P2P, K_KCH, K_PROXY, K_STEP, K_NET, K_OTHER };
#define KBITS 4

static void *mk(uint64_t seq, unsigned kind)
{
	return (void *)(uintptr_t)(seq << KBITS | kind);
}

static unsigned kind_of(const void *h)
{
	return (unsigned)((uintptr_t)h & ((1u << KBITS) - 1));
}

static uint64_t seq_of(const void *h)
{
	return (uint64_t)(uintptr_t)h >> KBITS;
}

#define TOKEN(k) mk(0, (k)) /* a handle without a slot: its stop does nothing */

/* Ring sizes: a child event (a proxy operation, a step, a network event, a
 * kernel channel's stop) counts only while its parent's slot was not
 * taken again, i.e. within NOPS operations, NPROXY proxy operations or
 * NSTEPS steps started after its parent; NCCL's own limits keep far fewer
 * in flight (8 steps per proxy operation, one per channel and peer).
 * About 3 MB, touched as they fill. */
#define NOPS 16384   /* operations (collectives, sends, receives) */
#define NPROXY 16384 /* proxy operations */
#define NSTEPS 65536 /* proxy steps */

struct op { /* a collective or a send/receive */
	uint64_t seq;
	struct row *row;
	uint64_t end; /* the latest stop of it or its children; its start at first */
	uint64_t pad;
};

struct proxy { /* a proxy operation: one channel's transfers with one peer */
	uint64_t seq;
	struct comm *comm;
	uint64_t parent; /* the operation's sequence, 0: none in this process */
	int32_t peer, send, cls, pad;
};

struct step { /* one transfer of a proxy operation */
	uint64_t seq;
	uint64_t proxy; /* the proxy operation's sequence */
	uint64_t size;  /* the last size NCCL reported for it */
	uint64_t pad;
};

static struct op ops[NOPS];
static struct proxy proxies[NPROXY];
static struct step steps[NSTEPS];
static struct {
	uint64_t v;
	char pad[56];
} op_next, proxy_next, step_next; /* each on its own cache line */

/* A slot is a seqlock: its writer zeroes seq, writes, then publishes the
 * new seq; a reader checks seq before and after reading. */
static void claim(uint64_t *seq)
{
	ST(seq, 0);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

static void publish(uint64_t *seq, uint64_t v)
{
	__atomic_store_n(seq, v, __ATOMIC_RELEASE);
}

static int holds(const uint64_t *seq, uint64_t v)
{
	return v && __atomic_load_n(seq, __ATOMIC_ACQUIRE) == v;
}

static int still(const uint64_t *seq, uint64_t v)
{
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return LD(seq) == v;
}

static uint64_t next_seq(uint64_t *counter)
{
	return __atomic_add_fetch(counter, 1, __ATOMIC_RELAXED) & ((1ull << 60) - 1);
}

/* op_extend moves operation seq's end to now, adding the difference to its
 * row's time */
static void op_extend(uint64_t seq, uint64_t now)
{
	struct op *o = &ops[seq & (NOPS - 1)];
	if (!holds(&o->seq, seq))
		return;
	struct row *r = LD(&o->row);
	uint64_t end = LD(&o->end);
	if (!still(&o->seq, seq))
		return;
	while (now > end)
		if (__atomic_compare_exchange_n(&o->end, &end, now, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
			ADD(&r->time_ns, now - end);
			return;
		}
}

static void op_start(struct comm *c, void **h, unsigned kind, const char *func, size_t count, const char *dtype,
                     const char *algo, const char *proto)
{
	if (!func)
		return;
	struct row *r = row_for(c, func, algo, proto);
	if (!r) {
		*h = TOKEN(K_OTHER);
		return;
	}
	ADD(&r->calls, 1);
	ADD(&r->bytes, bytes_of(r, dtype, count));
	uint64_t now = nl_mono_ns(), seq = next_seq(&op_next.v);
	struct op *o = &ops[seq & (NOPS - 1)];
	claim(&o->seq);
	ST(&o->row, r);
	ST(&o->end, now);
	publish(&o->seq, seq);
	*h = mk(seq, kind);
}

static void count(struct comm *c, int peer, int src, int dir, int cls, uint64_t bytes)
{
	uint64_t *v = c->peers[peer].c[src][dir][cls];
	ADD(&v[0], bytes);
	ADD(&v[1], 1);
}

static void proxy_start(struct comm *c, void **h, void *parent, pid_t pid, int peer, int send)
{
	if (peer < 0 || peer >= c->nranks) {
		*h = TOKEN(K_OTHER);
		return;
	}
	unsigned pk = kind_of(parent);
	uint64_t seq = next_seq(&proxy_next.v);
	struct proxy *x = &proxies[seq & (NPROXY - 1)];
	claim(&x->seq);
	ST(&x->comm, c);
	ST(&x->parent, pid == g.pid && (pk == K_COLL || pk == K_P2P) ? seq_of(parent) : 0);
	ST(&x->peer, peer);
	ST(&x->send, send != 0);
	ST(&x->cls, pk == K_P2P ? CLS_P2P : CLS_COLL);
	publish(&x->seq, seq);
	*h = mk(seq, K_PROXY);
}

/* proxy_get reads proxy operation seq; 0: it is still there */
static int proxy_get(uint64_t seq, struct proxy *out)
{
	struct proxy *x = &proxies[seq & (NPROXY - 1)];
	if (!holds(&x->seq, seq))
		return -1;
	out->comm = LD(&x->comm);
	out->parent = LD(&x->parent);
	out->peer = LD(&x->peer);
	out->send = LD(&x->send);
	out->cls = LD(&x->cls);
	return still(&x->seq, seq) ? 0 : -1;
}

static void proxy_stop(uint64_t seq)
{
	struct proxy x;
	if (proxy_get(seq, &x) == 0 && x.parent)
		op_extend(x.parent, nl_mono_ns());
}

static void step_start(void **h, void *parent)
{
	if (kind_of(parent) != K_PROXY || !seq_of(parent)) {
		*h = TOKEN(K_OTHER);
		return;
	}
	uint64_t seq = next_seq(&step_next.v);
	struct step *s = &steps[seq & (NSTEPS - 1)];
	claim(&s->seq);
	ST(&s->proxy, seq_of(parent));
	ST(&s->size, 0);
	publish(&s->seq, seq);
	*h = mk(seq, K_STEP);
}

static void step_record(uint64_t seq, size_t size)
{
	struct step *s = &steps[seq & (NSTEPS - 1)];
	if (holds(&s->seq, seq))
		ST(&s->size, (uint64_t)size);
}

/* step_get reads step seq's proxy operation and size; 0: found */
static int step_get(uint64_t seq, uint64_t *proxy, uint64_t *size)
{
	struct step *s = &steps[seq & (NSTEPS - 1)];
	if (!holds(&s->seq, seq))
		return -1;
	*proxy = LD(&s->proxy);
	*size = LD(&s->size);
	return still(&s->seq, seq) ? 0 : -1;
}

/* a step's bytes count when it stops, once, with the size last reported */
static void step_stop(uint64_t seq)
{
	uint64_t p, size;
	struct proxy x;
	if (step_get(seq, &p, &size) == 0 && size && proxy_get(p, &x) == 0)
		count(x.comm, x.peer, SRC_PROXY, x.send ? DIR_SENT : DIR_RECV, x.cls, size);
}

/* a network event counts at its start: the transport's payload gives its
 * length; its proxy step's operation, the peer and the direction */
static void net_start(void **h, void *parent, int64_t id, const void *data)
{
	*h = TOKEN(K_NET);
	if (!data || kind_of(parent) != K_STEP)
		return;
	uint32_t type = (uint32_t)id & NL_NCCL_NET_TYPE_MASK, ver = (uint32_t)id & NL_NCCL_NET_VER_MASK;
	size_t len;
	if (type == NL_NCCL_NET_TYPE_IB && ver == 1 && ((const struct nl_nccl_net_ib_v1 *)data)->type == NL_NCCL_NET_IB_QP)
		len = ((const struct nl_nccl_net_ib_v1 *)data)->qp.length;
	else if (type == NL_NCCL_NET_TYPE_SOCK && ver == 1 &&
	         ((const struct nl_nccl_net_sock_v1 *)data)->type == NL_NCCL_NET_SOCK_OP)
		len = ((const struct nl_nccl_net_sock_v1 *)data)->sock.length;
	else
		return;
	uint64_t p, size;
	struct proxy x;
	if (step_get(seq_of(parent), &p, &size) != 0 || proxy_get(p, &x) != 0)
		return;
	count(x.comm, x.peer, SRC_NET, x.send ? DIR_SENT : DIR_RECV, x.cls, len);
	if (!LD(&g.net_seen))
		ST(&g.net_seen, 1);
}

static void kch_start(void **h, void *parent)
{
	unsigned k = kind_of(parent);
	*h = (k == K_COLL || k == K_P2P) && seq_of(parent) ? mk(seq_of(parent), K_KCH) : TOKEN(K_OTHER);
}

/* ------------------------------------------------- NCCL's entry points */

/* NETLOOM_DEBUG=1: the events NCCL started, by type, told at the end (what
 * a release of NCCL sends this plugin) */
static int debug;
static uint64_t seen[16];

static void saw(uint64_t type)
{
	if (__builtin_expect(debug, 0))
		__atomic_fetch_add(&seen[type ? __builtin_ctzll(type) & 15 : 15], 1, __ATOMIC_RELAXED);
}


/* The descriptors of v4 and v5 name the same members alike: one body. The
 * context is dereferenced only for events of this process's own
 * communicators (a PXN proxy operation carries another process's). */
#define DISPATCH(c, h, d)                                                                                           \
	switch ((uint64_t)d->type) {                                                                                \
	case NL_NCCL_COLL:                                                                                          \
		if (c)                                                                                              \
			op_start(c, h, K_COLL, d->coll.func, d->coll.count, d->coll.datatype, d->coll.algo,         \
			         d->coll.proto);                                                                    \
		break;                                                                                              \
	case NL_NCCL_P2P:                                                                                           \
		if (c)                                                                                              \
			op_start(c, h, K_P2P, d->p2p.func, d->p2p.count, d->p2p.datatype, NULL, NULL);              \
		break;                                                                                              \
	case NL_NCCL_PROXY_OP:                                                                                      \
		if (c && d->proxy_op.pid == g.pid)                                                                  \
			proxy_start(c, h, d->parent, d->proxy_op.pid, d->proxy_op.peer, d->proxy_op.is_send);       \
		else                                                                                                \
			*h = TOKEN(K_OTHER);                                                                        \
		break;                                                                                              \
	case NL_NCCL_PROXY_STEP:                                                                                    \
		step_start(h, d->parent);                                                                           \
		break;                                                                                              \
	case NL_NCCL_KERNEL_CH:                                                                                     \
		kch_start(h, d->parent);                                                                            \
		break;                                                                                              \
	case NL_NCCL_NET_PLUGIN:                                                                                    \
		net_start(h, d->parent, d->net.id, d->net.data);                                                    \
		break;                                                                                              \
	case NL_NCCL_GROUP:                                                                                         \
	case NL_NCCL_PROXY_CTRL:                                                                                    \
	case NL_NCCL_GROUP_API:                                                                                     \
	case NL_NCCL_COLL_API:                                                                                      \
	case NL_NCCL_P2P_API:                                                                                       \
	case NL_NCCL_KERNEL_LAUNCH:                                                                                 \
		*h = TOKEN(K_OTHER); /* not counted; a handle all the same, NCCL may want a parent */               \
		break;                                                                                              \
	default:                                                                                                    \
		break; /* an event type this plugin does not know: no handle */                                     \
	}

static nl_nccl_result start_v5(void *context, void **h, struct nl_nccl_descr_v5 *d)
{
	if (!h)
		return NL_NCCL_SUCCESS;
	*h = NULL;
	if (!d || LD(&g.disabled))
		return NL_NCCL_SUCCESS;
	struct comm *c = context;
	saw(d->type);
	DISPATCH(c, h, d);
	return NL_NCCL_SUCCESS;
}

static nl_nccl_result start_v4(void *context, void **h, struct nl_nccl_descr_v4 *d)
{
	if (!h)
		return NL_NCCL_SUCCESS;
	*h = NULL;
	if (!d || LD(&g.disabled))
		return NL_NCCL_SUCCESS;
	struct comm *c = context;
	DISPATCH(c, h, d);
	return NL_NCCL_SUCCESS;
}

static nl_nccl_result stop_event(void *h)
{
	uint64_t seq = seq_of(h);
	if (!seq || LD(&g.disabled))
		return NL_NCCL_SUCCESS;
	switch (kind_of(h)) {
	case K_COLL:
	case K_P2P:
	case K_KCH:
		op_extend(seq, nl_mono_ns());
		break;
	case K_PROXY:
		proxy_stop(seq);
		break;
	case K_STEP:
		step_stop(seq);
		break;
	default:
		break;
	}
	return NL_NCCL_SUCCESS;
}

static nl_nccl_result record_event_state(void *h, int state, union nl_nccl_state_args *args)
{
	uint64_t seq = seq_of(h);
	if (!seq || !args || kind_of(h) != K_STEP || LD(&g.disabled))
		return NL_NCCL_SUCCESS;
	switch (state) {
	case NL_NCCL_STEP_SEND_GPU_WAIT:
	case NL_NCCL_STEP_SEND_PEER_WAIT:
	case NL_NCCL_STEP_SEND_WAIT:
	case NL_NCCL_STEP_RECV_WAIT:
	case NL_NCCL_STEP_RECV_FLUSH_WAIT:
	case NL_NCCL_STEP_RECV_GPU_WAIT:
		step_record(seq, args->proxy_step.trans_size);
		break;
	default:
		break;
	}
	return NL_NCCL_SUCCESS;
}

/* ------------------------------------------------- identity */

/* the job: Slurm's, NETLOOM_JOB_ID (netloom run), torchrun's run id, else
 * <host>-<parent pid> (the ranks torchrun starts on one host share it) */
static void job_id(char *out, size_t n)
{
	nl_env_copy(out, n, "SLURM_JOB_ID", "NETLOOM_JOB_ID");
	if (!*out) {
		nl_env_copy(out, n, "TORCHELASTIC_RUN_ID", NULL);
		if (strcmp(out, "none") == 0) /* torchrun's default without a rendezvous id */
			*out = 0;
	}
	nl_job_id_finish(out, n);
}

static void identity(int nranks, int rank)
{
	g.pid = getpid();
	g.start_unix_ns = nl_unix_ns();
	g.start_mono_ns = nl_mono_ns();
	g.interval_s = nl_env_double("NETLOOM_INTERVAL", 5.0);
	nl_env_copy(g.out, sizeof g.out, "NETLOOM_OUTPUT", NULL);
	gethostname(g.host, sizeof g.host);
	g.host[sizeof g.host - 1] = 0;
	nl_node_program_user(g.node, sizeof g.node, g.host, g.program, sizeof g.program, g.user, sizeof g.user);
	job_id(g.job, sizeof g.job);

	/* NCCL's version, from the library that loaded the plugin: in the
	 * global scope, or loaded locally (PyTorch's Python extensions) */
	int (*get_version)(int *) = (int (*)(int *))dlsym(RTLD_DEFAULT, "ncclGetVersion");
	void *nccl = get_version ? NULL : dlopen("libnccl.so.2", RTLD_LAZY | RTLD_NOLOAD);
	if (nccl) {
		get_version = (int (*)(int *))dlsym(nccl, "ncclGetVersion");
		dlclose(nccl); /* RTLD_NOLOAD took a reference; NCCL holds its own */
	}
	int code = 0;
	if (get_version && get_version(&code) == 0 && code >= 10000)
		snprintf(g.version, sizeof g.version, "%d.%d.%d", code / 10000, code / 100 % 100, code % 100);
	snprintf(g.library, sizeof g.library, "NCCL%s%s", *g.version ? " " : "", g.version);

	/* the rank: torchrun's, Slurm's, else NCCL's in the first communicator */
	g.rank = nl_env_count("RANK", -1);
	if (g.rank < 0)
		g.rank = nl_env_count("SLURM_PROCID", -1);
	g.world = nl_env_count("WORLD_SIZE", 0);
	if (g.world <= 0)
		g.world = nl_env_count("SLURM_NTASKS", 0);
	if (g.rank < 0)
		g.rank = rank;
	if (g.world <= 0)
		g.world = nranks;
	if (g.rank >= g.world) {
		g.rank = rank;
		g.world = nranks;
	}
}

/* ------------------------------------------------- snapshots */

struct snap {
	Datagram d;
	Process p;
	Gpu gpu;
	NcclOp *ops, **opp;
	FunctionStat *fns, **fnp;
	char (*fnames)[40];
	NcclPeer *np, **npp;
	PeerTraffic *pt, **ptp;
	Traffic *tr;   /* 2 per nccl peer, 2 per peer row */
	uint64_t *acc; /* per world rank: sent [class][bytes, msgs] */
	size_t ntr;
};

static Traffic *traffic(struct snap *s, uint64_t bytes, uint64_t msgs)
{
	Traffic *t = nl_traffic(&s->tr[s->ntr], bytes, msgs);
	s->ntr += t != NULL;
	return t;
}

static void take_free(struct snap *s)
{
	free(s->ops);
	free(s->opp);
	free(s->fns);
	free(s->fnp);
	free(s->fnames);
	free(s->np);
	free(s->npp);
	free(s->pt);
	free(s->ptp);
	free(s->tr);
	free(s->acc);
	memset(s, 0, sizeof *s);
}

static int take(struct snap *s, int final)
{
	memset(s, 0, sizeof *s);
	/* what is there now; rows and communicators that come meanwhile wait
	 * for the next snapshot */
	size_t nrows = 0, npeers = 0;
	struct comm *head = __atomic_load_n(&comms, __ATOMIC_ACQUIRE);
	for (struct comm *c = head; c; c = c->next) {
		nrows += (size_t)__atomic_load_n(&c->nrows, __ATOMIC_ACQUIRE);
		npeers += (size_t)c->nranks;
	}
	int world = g.world;
	s->ops = calloc(nrows + 1, sizeof *s->ops);
	s->opp = calloc(nrows + 1, sizeof *s->opp);
	s->fns = calloc(nrows + 1, sizeof *s->fns);
	s->fnp = calloc(nrows + 1, sizeof *s->fnp);
	s->fnames = calloc(nrows + 1, sizeof *s->fnames);
	s->np = calloc(npeers + 1, sizeof *s->np);
	s->npp = calloc(npeers + 1, sizeof *s->npp);
	s->pt = calloc((size_t)world, sizeof *s->pt);
	s->ptp = calloc((size_t)world, sizeof *s->ptp);
	s->tr = calloc(2 * (npeers + (size_t)world) + 1, sizeof *s->tr);
	s->acc = calloc((size_t)world * 4, sizeof *s->acc);
	if (!s->ops || !s->opp || !s->fns || !s->fnp || !s->fnames || !s->np || !s->npp || !s->pt || !s->ptp || !s->tr || !s->acc) {
		take_free(s);
		return -1;
	}

	Gpu *gp = &s->gpu;
	netloom__agent__v1__gpu__init(gp);
	gp->nccl_version = g.version;
	gp->nccl_profiler_interface = (uint32_t)g.iface;
	int net = LD(&g.net_seen) != 0;
	gp->nccl_net_events = net;
	int src = net ? SRC_NET : SRC_PROXY;
	size_t nfns = 0;
	for (struct comm *c = head; c; c = c->next) {
		int n = __atomic_load_n(&c->nrows, __ATOMIC_ACQUIRE);
		for (int i = 0; i < n; i++) {
			struct row *r = &c->rows[i];
			uint64_t calls = LD(&r->calls);
			if (r->same || !calls || gp->n_nccl_ops == nrows)
				continue;
			NcclOp *o = &s->ops[gp->n_nccl_ops];
			netloom__agent__v1__nccl_op__init(o);
			o->comm = c->hash;
			o->comm_rank = (uint32_t)c->rank;
			o->comm_size = (uint32_t)c->nranks;
			o->name = r->name;
			o->algorithm = r->algo;
			o->protocol = r->proto;
			o->calls = calls;
			o->bytes = LD(&r->bytes);
			o->time_ns = LD(&r->time_ns);
			s->opp[gp->n_nccl_ops++] = o;
			/* and beside the MPI functions: "ncclAllReduce", summed over
			 * communicators, algorithms and protocols */
			char fname[40];
			snprintf(fname, sizeof fname, "nccl%s", r->name);
			size_t f = 0;
			while (f < nfns && strcmp(s->fnames[f], fname) != 0)
				f++;
			FunctionStat *fs = &s->fns[f];
			if (f == nfns) {
				netloom__agent__v1__function_stat__init(fs);
				memcpy(s->fnames[f], fname, sizeof fname);
				fs->name = s->fnames[f];
				s->fnp[nfns++] = fs;
			}
			fs->calls += o->calls;
			fs->time_ns += o->time_ns;
			if (strcmp(r->name, "Recv") == 0)
				fs->bytes_received += o->bytes;
			else
				fs->bytes_sent += o->bytes;
		}
		/* per peer of the communicator, from the network events when the
		 * transport reported any, else from the proxy's steps */
		for (int p = 0; p < c->nranks; p++) {
			const struct peer *pe = &c->peers[p];
			uint64_t v[2][2] = {{0, 0}, {0, 0}}; /* [direction][bytes, msgs] */
			for (int d = 0; d < 2; d++)
				for (int k = 0; k < 2; k++)
					for (int f = 0; f < 2; f++)
						v[d][f] += LD(&pe->c[src][d][k][f]);
			if (!v[0][0] && !v[0][1] && !v[1][0] && !v[1][1])
				continue;
			NcclPeer *np = &s->np[gp->n_nccl_peers];
			netloom__agent__v1__nccl_peer__init(np);
			np->comm = c->hash;
			np->peer = (uint32_t)p;
			np->sent = traffic(s, v[0][0], v[0][1]);
			np->received = traffic(s, v[1][0], v[1][1]);
			s->npp[gp->n_nccl_peers++] = np;
			/* a communicator of the job's size numbers its ranks as the job */
			if (c->nranks == world)
				for (int k = 0; k < 2; k++)
					for (int f = 0; f < 2; f++)
						s->acc[(size_t)p * 4 + (size_t)k * 2 + (size_t)f] += LD(&pe->c[src][DIR_SENT][k][f]);
		}
	}
	gp->nccl_ops = s->opp;
	gp->nccl_peers = s->npp;

	Datagram *d = &s->d;
	const struct nl_ident id = {.job_id = g.job, .node = g.node, .host = g.host, .library = g.library,
				    .program = g.program, .user = g.user, .rank = (uint32_t)g.rank, .world = (uint32_t)world,
				    .start_unix_ns = g.start_unix_ns, .wall_start_mono_ns = g.start_mono_ns, .interval_s = g.interval_s};
	nl_snapshot_frame(d, &s->p, &id, g.seq++, final, LD(&g.dropped));
	d->n_functions = nfns;
	d->functions = s->fnp;
	d->gpu = gp;

	for (int w = 0; w < world; w++) {
		const uint64_t *a = &s->acc[(size_t)w * 4];
		if (!a[0] && !a[1] && !a[2] && !a[3])
			continue;
		PeerTraffic *pt = &s->pt[d->n_peers];
		netloom__agent__v1__peer_traffic__init(pt);
		pt->peer = (uint32_t)w;
		pt->coll = traffic(s, a[CLS_COLL * 2], a[CLS_COLL * 2 + 1]);
		pt->p2p = traffic(s, a[CLS_P2P * 2], a[CLS_P2P * 2 + 1]);
		/* these are the bytes NCCL's network transport moved to the peer
		 * (its network events, else its proxy steps): what crossed the
		 * links, as Open MPI's monitoring tells the MPI agent. The daemon
		 * puts a rank's monitored peer bytes on the links' directions
		 * (traffic_model physical). */
		pt->monitored_coll = pt->coll;
		pt->monitored_p2p = pt->p2p;
		s->ptp[d->n_peers++] = pt;
	}
	d->peers = s->ptp;
	return 0;
}

/* send_snapshot takes a snapshot and sends it; the final one also goes
 * into the profile file */
static void send_snapshot(int final)
{
	struct snap s;
	if (take(&s, final) != 0)
		return;
	ADD(&g.dropped, nl_wire_send(&s.d));
	if (final && *g.out) {
		char dir[1400];
		nl_wire_write_profile(g.out, &s.d, dir, sizeof dir);
	}
	take_free(&s);
}

/* ------------------------------------------------- the reporting thread */

static void *reporter(void *arg)
{
	(void)arg;
	/* a first report at once: it tells the daemon the rank's node */
	if (nl_wire_resolve() == 0) {
		nl_auth_start(g.job, g.rank);
		nl_auth_wait_first(500);
		send_snapshot(0);
	}
	pthread_mutex_lock(&g.tlock);
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	/* the ranks' reports spread over the interval, as the MPI agent's */
	uint64_t ns = (uint64_t)(g.interval_s * 1e9), w = (uint64_t)g.world;
	nl_timespec_add(&next, ns / 2 / w + ns / w * (uint64_t)g.rank);
	while (!g.quit) {
		while (!g.quit && pthread_cond_timedwait(&g.wake, &g.tlock, &next) != ETIMEDOUT)
			;
		if (g.quit)
			break;
		pthread_mutex_unlock(&g.tlock);
		send_snapshot(0);
		pthread_mutex_lock(&g.tlock);
		nl_timespec_add(&next, ns);
	}
	pthread_mutex_unlock(&g.tlock);
	return NULL;
}

/* under g.lock */
static void start_reporter(void)
{
	pthread_mutex_lock(&g.tlock);
	g.quit = 0;
	pthread_mutex_unlock(&g.tlock);
	g.running = nl_thread(&g.thread, 0, reporter) == 0; /* no signal meant for the application */
	if (!g.running && !g.warned_thread) {
		g.warned_thread = 1;
		fprintf(stderr, "netloom: no reporting thread: live NCCL reports off\n");
	}
}

/* under g.lock */
static void stop_reporter(void)
{
	if (!g.running)
		return;
	pthread_mutex_lock(&g.tlock);
	g.quit = 1;
	pthread_cond_signal(&g.wake);
	pthread_mutex_unlock(&g.tlock);
	pthread_join(g.thread, NULL);
	g.running = 0;
}

/* under g.lock: the final report, the profile file */
static void final_report(void)
{
	if (debug) {
		fprintf(stderr, "netloom: NCCL events started, by type bit:");
		for (int i = 0; i < 16; i++)
			if (seen[i])
				fprintf(stderr, " %d:%llu", i, (unsigned long long)seen[i]);
		fprintf(stderr, "\n");
	}
	stop_reporter();
	nl_auth_wait_first(500); /* a job shorter than munged's first answer */
	send_snapshot(1);
	for (struct comm *c = comms; c; c = c->next) {
		uint64_t lost = __atomic_exchange_n(&c->lost, 0, __ATOMIC_RELAXED);
		if (lost)
			fprintf(stderr, "netloom: %llu NCCL operations of communicator %llx not counted: more than %d kinds\n",
			        (unsigned long long)lost, (unsigned long long)c->hash, NROWS);
	}
}

static void at_exit(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_sec += 2;
	if (pthread_mutex_timedlock(&g.lock, &t) != 0)
		return;
	if (g.started && (g.running || g.live > 0)) /* never finalized, or a communicator left */
		final_report();
	nl_auth_stop();
	pthread_mutex_unlock(&g.lock);
}

/* A child forked by an NCCL process (a data loader's worker, say) is no
 * rank: it reports nothing, and its exit waits for no thread of its
 * parent's. */
static void forked_child(void)
{
	pthread_mutex_init(&g.lock, NULL);
	pthread_mutex_init(&g.tlock, NULL);
	g.running = 0;
	g.live = 0;
	g.started = 0;
	ST(&g.disabled, 1);
}

/* ------------------------------------------------- init and finalize */

/* under g.lock: the record of (hash, rank, nranks), a finalized one again
 * when NCCL makes the communicator anew (its counters go on) */
static struct comm *comm_for(uint64_t hash, int nranks, int rank)
{
	for (struct comm *c = comms; c; c = c->next)
		if (!c->live && c->hash == hash && c->nranks == nranks && c->rank == rank)
			return c;
	struct comm *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->peers = calloc((size_t)nranks, sizeof *c->peers); /* pages touched only for peers with traffic */
	if (!c->peers) {
		free(c);
		return NULL;
	}
	c->hash = hash;
	c->nranks = nranks;
	c->rank = rank;
	pthread_mutex_init(&c->add, NULL);
	c->next = comms;
	__atomic_store_n(&comms, c, __ATOMIC_RELEASE);
	return c;
}

static nl_nccl_result init_common(void **context, int *mask, uint64_t hash, int nranks, int rank, int iface)
{
	if (context)
		*context = NULL;
	if (!context || !mask)
		return NL_NCCL_SUCCESS;
	pthread_mutex_lock(&g.lock);
	if (LD(&g.disabled)) {
		*mask = 0;
		goto out;
	}
	*mask = EVENTS;
	debug = nl_env_debug();
	/* (NCCL 2.28.9 starts no event at all for a one-rank communicator,
	 * not even the v5 API ones: test/gpu, TestNCCL) */
	if (debug)
		fprintf(stderr, "netloom: NCCL communicator %llx, rank %d of %d, profiler v%d, events 0x%x\n",
		        (unsigned long long)hash, rank, nranks, iface, *mask);
	if (nranks <= 0 || rank < 0 || rank >= nranks)
		goto out; /* a communicator it cannot count: its events are ignored */
	if (!g.started) {
		identity(nranks, rank);
		g.iface = iface;
		nl_cond_monotonic(&g.wake);
		nl_wire_init();
		g.started = 1;
	}
	struct comm *c = comm_for(hash, nranks, rank);
	if (!c) {
		disable("out of memory for a communicator");
		*mask = 0;
		goto out;
	}
	c->live = 1;
	g.live++;
	if (!g.hooked) {
		g.hooked = atexit(at_exit) == 0;
		pthread_atfork(NULL, NULL, forked_child);
	}
	if (!g.running)
		start_reporter();
	*context = c;
out:
	pthread_mutex_unlock(&g.lock);
	return NL_NCCL_SUCCESS;
}

static nl_nccl_result init_v5(void **context, uint64_t comm_id, int *mask, const char *comm_name, int nnodes, int nranks,
                              int rank, nl_nccl_logger log)
{
	(void)comm_name;
	(void)nnodes;
	(void)log;
	return init_common(context, mask, comm_id, nranks, rank, 5);
}

static nl_nccl_result init_v4(void **context, int *mask, const char *comm_name, uint64_t comm_hash, int nnodes, int nranks,
                              int rank, nl_nccl_logger log)
{
	(void)comm_name;
	(void)nnodes;
	(void)log;
	return init_common(context, mask, comm_hash, nranks, rank, 4);
}

/* NCCL finalizes each communicator: the process's report ends with its last */
static nl_nccl_result finalize(void *context)
{
	struct comm *c = context;
	pthread_mutex_lock(&g.lock);
	if (c && c->live) {
		c->live = 0;
		if (--g.live == 0)
			final_report();
	}
	pthread_mutex_unlock(&g.lock);
	return NL_NCCL_SUCCESS;
}

struct nl_nccl_profiler_v5 ncclProfiler_v5 = {
    .name = "netloom",
    .init = init_v5,
    .start_event = start_v5,
    .stop_event = stop_event,
    .record_event_state = record_event_state,
    .finalize = finalize,
};

struct nl_nccl_profiler_v4 ncclProfiler_v4 = {
    .name = "netloom",
    .init = init_v4,
    .start_event = start_v4,
    .stop_event = stop_event,
    .record_event_state = record_event_state,
    .finalize = finalize,
};
