/* A stand-in for NCCL 2.28 in front of libnetloom-nccl.so: it dlopens the
 * plugin, takes ncclProfiler_v5 or ncclProfiler_v4 as NCCL does, and calls
 * init, startEvent, recordEventState, stopEvent and finalize with
 * descriptors laid out as NCCL passes them (../profiler.h, whose offsets
 * are asserted there against NCCL's headers), for a known set of
 * operations. test/e2e/nccl_test.go runs it and checks every figure.
 *
 *   driver LIB v5|v4 net|proxy
 *   driver LIB v5 stress
 *
 * DRIVER_WAIT_MS: how long to wait before the end (live reports go out
 * meanwhile); DRIVER_NO_FINALIZE: end without finalizing the
 * communicators (the plugin reports at exit).
 *
 * One process is one rank of a 2-rank job (RANK=0|1, WORLD_SIZE=2): a
 * communicator A (hash 0xA11CE, 2 ranks) and B (hash 0xB0B, 1 rank). On A:
 * 3 AllReduce of 1 MiB (262144 ncclFloat32, RING, SIMPLE), each with a
 * proxy send to the peer (4 steps of 65536 bytes; with "net" each step
 * carries 2 IB work requests of 32768 bytes) and a proxy receive from it
 * (4 steps of 65536; with "net" one socket event of 65536 each), the first
 * with a kernel channel that stops 20 ms after the operation started;
 * 2 Broadcast of 1000 ncclInt8 (TREE, LL); 2 Send and 2 Recv of 4096
 * ncclFloat32 with the peer, each with a proxy operation of one 16384-byte
 * step (with "net", one IB event to the peer for a send, one socket event
 * from it for a receive). On B: 1 AllGather of 1024 ncclFloat32 (RING, LL).
 * And events the plugin must ignore: a NULL descriptor, unknown types, a
 * collective without a name, NULL and forged handles, a proxy operation of
 * another process and one to a peer outside the communicator, network
 * events without a payload or of an unknown transport. A child it forks
 * exits (atexit handlers run) without reporting or hanging.
 *
 * "stress" instead: an AllReduce of 1 KiB on A with a proxy send of one
 * 1024-byte step and one IB event of 1024 bytes, 3,000 times in each of 4
 * threads at once (as NCCL's application, proxy and profiler threads call
 * concurrently; fewer than a ring of slots holds, so that a thread the
 * scheduler stops for a while still finds its slots), then 70,000 times
 * in one thread (every ring of slots wraps), 82,000 in all; and says on
 * stderr what an event cost. */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "profiler.h"

/* NCCL's version as the plugin asks it (dlsym(RTLD_DEFAULT)): the driver
 * is linked with -rdynamic */
int ncclGetVersion(int *v)
{
	*v = 22809;
	return 0;
}

static struct nl_nccl_profiler_v5 *p5;
static struct nl_nccl_profiler_v4 *p4;
static int net; /* send network events */

static void die(const char *what)
{
	fprintf(stderr, "driver: %s\n", what);
	exit(1);
}

/* One descriptor type for both versions: filled as v5, converted for v4
 * member by member (the v4 layout has a 1-byte type and no API events). */
static void *start(void *ctx, struct nl_nccl_descr_v5 *d)
{
	void *h = (void *)0x1; /* the plugin must set it */
	if (p5) {
		if (p5->start_event(ctx, &h, d) != 0)
			die("startEvent failed");
		return h;
	}
	struct nl_nccl_descr_v4 e;
	memset(&e, 0, sizeof e);
	e.type = (uint8_t)d->type;
	e.parent = d->parent;
	e.rank = d->rank;
	switch (d->type) {
	case NL_NCCL_COLL:
		e.coll.seq_number = d->coll.seq_number;
		e.coll.func = d->coll.func;
		e.coll.count = d->coll.count;
		e.coll.root = d->coll.root;
		e.coll.datatype = d->coll.datatype;
		e.coll.nchannels = d->coll.nchannels;
		e.coll.algo = d->coll.algo;
		e.coll.proto = d->coll.proto;
		break;
	case NL_NCCL_P2P:
		e.p2p.func = d->p2p.func;
		e.p2p.datatype = d->p2p.datatype;
		e.p2p.count = d->p2p.count;
		e.p2p.peer = d->p2p.peer;
		break;
	default:
		memcpy(&e.proxy_op, &d->proxy_op, sizeof e.proxy_op > sizeof e.net ? sizeof e.proxy_op : sizeof e.net);
		break;
	}
	if (d->type > 0xff)
		return NULL; /* no such event in v4 */
	if (p4->start_event(ctx, &h, &e) != 0)
		die("startEvent failed");
	return h;
}

static void stop(void *h)
{
	if ((p5 ? p5->stop_event(h) : p4->stop_event(h)) != 0)
		die("stopEvent failed");
}

static void record(void *h, int state, union nl_nccl_state_args *a)
{
	if ((p5 ? p5->record_event_state(h, state, a) : p4->record_event_state(h, state, a)) != 0)
		die("recordEventState failed");
}

static void *init(uint64_t hash, int nranks, int rank)
{
	void *ctx = NULL;
	int mask = 0;
	int rc = p5 ? p5->init(&ctx, hash, &mask, "test", 1, nranks, rank, NULL)
	            : p4->init(&ctx, &mask, "test", hash, 1, nranks, rank, NULL);
	if (rc != 0 || !ctx)
		die("init failed");
	int want = NL_NCCL_COLL | NL_NCCL_P2P | NL_NCCL_PROXY_OP | NL_NCCL_PROXY_STEP | NL_NCCL_KERNEL_CH | NL_NCCL_NET_PLUGIN;
	if (mask != want)
		die("unexpected activation mask");
	return ctx;
}

static void finalize(void *ctx)
{
	if ((p5 ? p5->finalize(ctx) : p4->finalize(ctx)) != 0)
		die("finalize failed");
}

static void *group(void *ctx)
{
	struct nl_nccl_descr_v5 d = {.type = NL_NCCL_GROUP};
	return start(ctx, &d);
}

static void *coll(void *ctx, void *parent, const char *func, size_t count, const char *dtype, const char *algo, const char *proto)
{
	struct nl_nccl_descr_v5 d = {.type = NL_NCCL_COLL, .parent = parent};
	d.coll.func = func;
	d.coll.count = count;
	d.coll.datatype = dtype;
	d.coll.algo = algo;
	d.coll.proto = proto;
	d.coll.nchannels = 2;
	return start(ctx, &d);
}

static void *p2p(void *ctx, void *parent, const char *func, size_t count, const char *dtype, int peer)
{
	struct nl_nccl_descr_v5 d = {.type = NL_NCCL_P2P, .parent = parent};
	d.p2p.func = func;
	d.p2p.count = count;
	d.p2p.datatype = dtype;
	d.p2p.peer = peer;
	d.p2p.nchannels = 1;
	return start(ctx, &d);
}

static void *proxy(void *ctx, void *parent, pid_t pid, int peer, int send, int nsteps, int chunk)
{
	struct nl_nccl_descr_v5 d = {.type = NL_NCCL_PROXY_OP, .parent = parent};
	d.proxy_op.pid = pid;
	d.proxy_op.channel = 0;
	d.proxy_op.peer = peer;
	d.proxy_op.nsteps = nsteps;
	d.proxy_op.chunk_size = chunk;
	d.proxy_op.is_send = send;
	return start(ctx, &d);
}

static void *net_event(void *ctx, void *step, int64_t id, void *payload)
{
	struct nl_nccl_descr_v5 d = {.type = NL_NCCL_NET_PLUGIN, .parent = step};
	d.net.id = id;
	d.net.data = payload;
	return start(ctx, &d);
}

/* a proxy step of size bytes; with ib > 0, that many IB work requests of
 * ib bytes each; with sock > 0, one socket event of sock bytes */
static void step(void *ctx, void *op, int n, size_t size, int ib, size_t ib_len, size_t sock)
{
	struct nl_nccl_descr_v5 d = {.type = NL_NCCL_PROXY_STEP, .parent = op};
	d.proxy_step.step = n;
	void *s = start(ctx, &d);
	union nl_nccl_state_args a = {.proxy_step = {.trans_size = 1000}};
	record(s, NL_NCCL_STEP_SEND_GPU_WAIT, &a); /* sizes reported along the way: the last counts */
	a.proxy_step.trans_size = size;
	record(s, NL_NCCL_STEP_SEND_WAIT, &a);
	if (net) {
		for (int i = 0; i < ib; i++) {
			struct nl_nccl_net_ib_v1 q = {.type = NL_NCCL_NET_IB_QP};
			q.qp.device = 0;
			q.qp.wr_id = (uint64_t)i;
			q.qp.opcode = 1; /* IBV_WR_RDMA_WRITE_WITH_IMM */
			q.qp.qp_num = 77;
			q.qp.length = ib_len;
			void *e = net_event(ctx, s, NL_NCCL_NET_TYPE_IB | 1, &q);
			union nl_nccl_state_args u = {.net = {.data = &q}};
			record(e, NL_NCCL_NET_UPDATE, &u);
			stop(e);
		}
		if (sock) {
			struct nl_nccl_net_sock_v1 k = {.type = NL_NCCL_NET_SOCK_OP};
			k.sock.fd = 9;
			k.sock.op = 1;
			k.sock.length = sock;
			stop(net_event(ctx, s, NL_NCCL_NET_TYPE_SOCK | 1, &k));
		}
		/* ignored: no payload, an unknown transport, an unknown version */
		struct nl_nccl_net_ib_v1 q = {.type = NL_NCCL_NET_IB_QP};
		q.qp.length = 1 << 20;
		stop(net_event(ctx, s, NL_NCCL_NET_TYPE_IB | 1, NULL));
		stop(net_event(ctx, s, (int64_t)(7u << 16) | 1, &q));
		stop(net_event(ctx, s, NL_NCCL_NET_TYPE_IB | 9, &q));
	}
	stop(s);
}

#define STRESS_THREADS 4
#define STRESS_OPS 3000
#define STRESS_WRAP 70000

static void *stress_ctx;
static uint64_t stress_events; /* calls into the plugin */

static int stress_peer;

static void *stress(void *arg)
{
	int peer = stress_peer, ops = *(int *)arg;
	pid_t pid = getpid();
	uint64_t n = 0;
	for (int i = 0; i < ops; i++) {
		void *c = coll(stress_ctx, NULL, "AllReduce", 256, "ncclFloat32", "RING", "LL");
		stop(c);
		void *ps = proxy(stress_ctx, c, pid, peer, 1, 1, 1024);
		struct nl_nccl_descr_v5 d = {.type = NL_NCCL_PROXY_STEP, .parent = ps};
		void *s = start(stress_ctx, &d);
		union nl_nccl_state_args a = {.proxy_step = {.trans_size = 1024}};
		record(s, NL_NCCL_STEP_SEND_WAIT, &a);
		struct nl_nccl_net_ib_v1 q = {.type = NL_NCCL_NET_IB_QP};
		q.qp.length = 1024;
		stop(net_event(stress_ctx, s, NL_NCCL_NET_TYPE_IB | 1, &q));
		stop(s);
		stop(ps);
		n += 10;
	}
	__atomic_add_fetch(&stress_events, n, __ATOMIC_RELAXED);
	return NULL;
}

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void sleep_ms(int ms)
{
	struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000};
	nanosleep(&t, NULL);
}

int main(int argc, char **argv)
{
	if (argc != 4)
		die("usage: driver LIB v5|v4 net|proxy|stress");
	void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		die(dlerror());
	if (strcmp(argv[2], "v5") == 0)
		p5 = dlsym(lib, "ncclProfiler_v5");
	else
		p4 = dlsym(lib, "ncclProfiler_v4");
	if (!p5 && !p4)
		die("no ncclProfiler_v5/v4");
	if (strcmp(p5 ? p5->name : p4->name, "netloom") != 0)
		die("unexpected plugin name");
	net = strcmp(argv[3], "net") == 0;
	const char *r = getenv("RANK");
	int rank = r ? atoi(r) : 0, peer = 1 - rank;
	pid_t pid = getpid();

	void *a = init(0xA11CE, 2, rank);
	if (strcmp(argv[3], "stress") == 0) {
		stress_ctx = a;
		stress_peer = peer;
		pthread_t t[STRESS_THREADS];
		int ops = STRESS_OPS, wrap = STRESS_WRAP;
		uint64_t t0 = now_ns();
		for (int i = 0; i < STRESS_THREADS; i++)
			if (pthread_create(&t[i], NULL, stress, &ops) != 0)
				die("pthread_create");
		for (int i = 0; i < STRESS_THREADS; i++)
			pthread_join(t[i], NULL);
		uint64_t t1 = now_ns(), n1 = stress_events;
		stress(&wrap);
		uint64_t t2 = now_ns();
		fprintf(stderr, "driver: %llu events from %d threads in %.1f ms; %llu from one in %.1f ms: %.1f ns per event\n",
		        (unsigned long long)n1, STRESS_THREADS, (double)(t1 - t0) / 1e6,
		        (unsigned long long)(stress_events - n1), (double)(t2 - t1) / 1e6,
		        (double)(t2 - t1) / (double)(stress_events - n1));
		finalize(a);
		return 0;
	}
	void *b = init(0xB0B, 1, 0);

	/* 3 AllReduce of 1 MiB; the third names its strings from other
	 * addresses (another copy of NCCL's constants: the same row) */
	char *f3 = strdup("AllReduce"), *t3 = strdup("ncclFloat32"), *a3 = strdup("RING"), *p3 = strdup("SIMPLE");
	for (int i = 0; i < 3; i++) {
		void *g = group(a);
		void *c = i < 2 ? coll(a, g, "AllReduce", 262144, "ncclFloat32", "RING", "SIMPLE")
		                : coll(a, g, f3, 262144, t3, a3, p3);
		void *k = NULL;
		if (i == 0) {
			struct nl_nccl_descr_v5 d = {.type = NL_NCCL_KERNEL_CH, .parent = c};
			d.kernel_ch.channel = 0;
			d.kernel_ch.ptimer = 1000;
			k = start(a, &d);
		}
		stop(c); /* NCCL stops a collective once enqueued */
		stop(g);
		void *ps = proxy(a, c, pid, peer, 1, 4, 65536);
		void *pr = proxy(a, c, pid, peer, 0, 4, 65536);
		for (int s = 0; s < 4; s++) {
			step(a, ps, s, 65536, 2, 32768, 0);
			step(a, pr, s, 65536, 0, 0, 65536);
		}
		record(ps, NL_NCCL_PROXY_OP_IN_PROGRESS, NULL);
		stop(ps);
		stop(pr);
		if (k) {
			sleep_ms(20);
			union nl_nccl_state_args st = {.kernel_ch = {.ptimer = 2000}};
			record(k, NL_NCCL_KERNEL_CH_STOP, &st);
			stop(k);
		}
	}
	free(f3);
	free(t3);
	free(a3);
	free(p3);

	/* 2 Broadcast of 1000 bytes */
	for (int i = 0; i < 2; i++)
		stop(coll(a, NULL, "Broadcast", 1000, "ncclInt8", "TREE", "LL"));

	/* 2 Send and 2 Recv of 16 KiB with the peer */
	for (int i = 0; i < 2; i++) {
		void *g = group(a);
		void *s = p2p(a, g, "Send", 4096, "ncclFloat32", peer);
		void *v = p2p(a, g, "Recv", 4096, "ncclFloat32", peer);
		stop(s);
		stop(v);
		stop(g);
		void *ps = proxy(a, s, pid, peer, 1, 1, 16384);
		step(a, ps, 0, 16384, 1, 16384, 0);
		stop(ps);
		void *pr = proxy(a, v, pid, peer, 0, 1, 16384);
		step(a, pr, 0, 16384, 0, 0, 16384);
		stop(pr);
	}

	/* a forked child (a data loader's worker) exits: it is no rank and
	 * must neither report nor wait for its parent's threads */
	pid_t child = fork();
	if (child == 0)
		exit(0);
	if (child < 0 || waitpid(child, NULL, 0) != child)
		die("fork");

	/* B: 1 AllGather of 4 KiB */
	stop(coll(b, NULL, "AllGather", 1024, "ncclFloat32", "RING", "LL"));

	/* all ignored */
	void *h = (void *)0x1;
	if (p5 ? p5->start_event(a, &h, NULL) : p4->start_event(a, &h, NULL))
		die("startEvent(NULL) failed");
	if (h)
		die("a NULL descriptor got a handle");
	struct nl_nccl_descr_v5 unknown = {.type = p5 ? 1u << 20 : 3};
	if (start(a, &unknown))
		die("an unknown event type got a handle");
	stop(coll(a, NULL, NULL, 1000, "ncclInt8", "RING", "LL")); /* no name */
	stop(coll(NULL, NULL, "AllReduce", 1000, "ncclInt8", "RING", "LL")); /* no context */
	stop(NULL);
	record(NULL, NL_NCCL_STEP_SEND_WAIT, NULL);
	stop((void *)0xdeadbeef);
	stop((void *)(uintptr_t)0x7777777777777775ull);
	union nl_nccl_state_args junk = {.proxy_step = {.trans_size = 1 << 30}};
	record((void *)0x12345, NL_NCCL_STEP_SEND_WAIT, &junk);
	void *other = proxy(a, NULL, pid + 100000, peer, 1, 4, 65536); /* PXN: another process's */
	step(a, other, 0, 65536, 1, 65536, 0);
	stop(other);
	void *far = proxy(a, NULL, pid, 5, 1, 4, 65536); /* peer 5 of 2 */
	step(a, far, 0, 65536, 1, 65536, 0);
	stop(far);
	struct nl_nccl_descr_v5 orphan = {.type = NL_NCCL_KERNEL_CH};
	stop(start(a, &orphan));
	struct nl_nccl_descr_v5 ctrl = {.type = NL_NCCL_PROXY_CTRL};
	void *pc = start(a, &ctrl);
	union nl_nccl_state_args ca = {.proxy_ctrl = {.appended_proxy_ops = 3}};
	record(pc, 17, &ca);
	stop(pc);
	if (p5) {
		struct nl_nccl_descr_v5 api = {.type = NL_NCCL_COLL_API};
		api.coll_api.func = "AllReduce";
		api.coll_api.count = 99;
		api.coll_api.datatype = "ncclFloat32";
		stop(start(a, &api));
	}

	/* live reports while it runs (NETLOOM_INTERVAL), then the final one
	 * when the last communicator ends */
	const char *wait = getenv("DRIVER_WAIT_MS");
	sleep_ms(wait ? atoi(wait) : 0);
	if (getenv("DRIVER_NO_FINALIZE"))
		return 0; /* as a program that never destroys its communicators: the report comes at exit */
	finalize(b);
	finalize(a);
	return 0;
}
