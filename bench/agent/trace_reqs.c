/* What the replay trace (agent/src/trace.c, NETLOOM_TRACE=1) costs per
 * nonblocking request, alone: trace.c is compiled in here with the few agent
 * symbols it reads stubbed, and driven as the generated wrappers drive it
 * (nl_trace_enter, nl_tr_isend/nl_tr_irecv, nl_trace_exit for a post;
 * nl_trace_enter, nl_tr_reqs, nl_tr_waited, nl_trace_exit for a wait), with
 * request handles handed out as Open MPI hands them out: addresses of
 * 512-byte request objects from a free list, the last freed reused first. No
 * MPI call is made (PMPI_Request_f2c is only linked).
 *
 * For each N: "window": N requests posted in windows of 64 (isend and irecv
 * in turn), each window completed by one MPI_Waitall; "outstanding": N
 * posted, all outstanding at once, then completed by MPI_Waitall in chunks
 * of 64 in posting order. Prints ns per post and per completion, and their
 * ratio to the first N's. Every completion must record a wait: checked.
 * Build and run: bench/agent/trace.sh. */
#include <time.h>

#include "trace.c" /* -I agent/src */

/* ---- the agent state trace.c reads */
struct nl_agent nl_agent;
struct nl_tcache nl_tcache[NL_TCACHE];
int nl_world_size = 2, nl_world_rank_self = 0, nl_mt = 0;
int nl_tracing; /* hot.c's */
uint64_t nl_type_size_slow(MPI_Datatype t)
{
	(void)t;
	return 1;
}
int nl_world_of(MPI_Comm comm, int rank)
{
	(void)comm;
	return rank;
}
double nl_snap_ns_per_tick(void)
{
	return 1;
}

/* ---- request objects, as a free list hands them out */
#define OBJ 512
static char *objs;
static MPI_Request *freel;
static size_t nfree;

static MPI_Request req_new(void)
{
	return freel[--nfree];
}
static void req_free(MPI_Request r)
{
	freel[nfree++] = r;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* reset starts a fresh trace; the record array (NETLOOM_TRACE_MB) is
 * allocated and touched once, so that what is measured is the trace's work,
 * not the kernel's first touch of its pages (the same before and after the
 * request table: see README.md) */
static void reset(void)
{
	if (!evs) {
		nl_trace_start();
		if (!nl_tracing) {
			fprintf(stderr, "trace_reqs: tracing did not start\n");
			exit(1);
		}
		memset(evs, 0, cap * sizeof *evs);
	}
	free(reqs);
	reqs = NULL;
	nev = nside = npending = req_n = req_keys = 0;
	req_posted = req_completed = req_peak = 0;
	truncated = 0;
	cut_why = "";
	if (!req_alloc(TR_REQS_MIN)) {
		fprintf(stderr, "trace_reqs: no memory\n");
		exit(1);
	}
	nl_tracing = 1;
}

static void post(MPI_Request *r, int i)
{
	*r = req_new();
	nl_trace_enter();
	if (i & 1)
		nl_tr_irecv(8, MPI_BYTE, 1, i, MPI_COMM_WORLD, r);
	else
		nl_tr_isend(8, MPI_BYTE, 1, i, MPI_COMM_WORLD, r);
	nl_trace_exit();
}

static void waitall(MPI_Request *r, int n)
{
	nl_trace_enter();
	nl_tr_reqs(n, r);
	for (int i = 0; i < n; i++) { /* what the library does */
		req_free(r[i]);
		r[i] = MPI_REQUEST_NULL;
	}
	nl_tr_waited(0, NULL, 1);
	nl_trace_exit();
}

/* the mean number of slots a lookup of an entry in the table reads now */
static double probes(void)
{
	size_t used = 0, d = 0;
	for (size_t i = 0; i <= req_mask; i++)
		if (reqs[i].first1) {
			used++;
			d += ((i - req_home(reqs[i].h)) & req_mask) + 1;
		}
	return used ? (double)d / (double)used : 0;
}

static double peak_probes; /* probes() with the most requests outstanding */

/* rounds: N requests, at most out outstanding at once, completed 64 at a
 * time; ns per post and per completion */
static void round_(size_t n, size_t out, MPI_Request *r, double *post_ns, double *done_ns)
{
	double tp = 0, tw = 0;
	uint64_t completed0 = req_completed;
	size_t nev0 = nev;
	for (size_t base = 0; base < n; base += out) {
		size_t m = n - base < out ? n - base : out;
		double t0 = now();
		for (size_t i = 0; i < m; i++)
			post(&r[i], (int)(base + i));
		double t1 = now();
		if (m == n)
			peak_probes = probes();
		for (size_t i = 0; i < m; i += 64)
			waitall(&r[i], (int)(m - i < 64 ? m - i : 64));
		tw += now() - t1;
		tp += t1 - t0;
	}
	size_t waits = 0;
	for (size_t i = nev0; i < nev; i++)
		waits += evs[i].op == TR_WAIT;
	if (truncated || waits != n || req_completed - completed0 != n || req_n != 0) {
		fprintf(stderr, "trace_reqs: N=%zu: truncated %d (%s), %zu waits recorded, %llu completed, %zu left\n", n, truncated,
		        cut_why, waits, (unsigned long long)(req_completed - completed0), req_n);
		exit(1);
	}
	*post_ns = tp / (double)n;
	*done_ns = tw / (double)n;
}

/* run: in one trace, a first round (the table grows to hold out requests
 * if it must: v[0], v[1]), then the same again (v[2], v[3]) */
static void run(size_t n, size_t out, double v[4])
{
	static MPI_Request *r;
	static size_t rcap;
	if (rcap < out) {
		free(r);
		r = malloc(out * sizeof *r);
		rcap = out;
	}
	reset();
	round_(n, out, r, &v[0], &v[1]);
	round_(n, out, r, &v[2], &v[3]);
}

static double median(double *v, int m)
{
	for (int i = 0; i < m; i++)
		for (int j = i + 1; j < m; j++)
			if (v[j] < v[i]) {
				double t = v[i];
				v[i] = v[j];
				v[j] = t;
			}
	return m % 2 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2;
}

int main(int argc, char **argv)
{
	size_t ns[8] = {1000, 10000, 100000, 1000000}, nn = 4;
	int reps = 5;
	if (argc > 1) {
		nn = 0;
		for (char *s = strtok(argv[1], ","); s && nn < 8; s = strtok(NULL, ","))
			ns[nn++] = (size_t)atol(s);
	}
	if (argc > 2)
		reps = atoi(argv[2]);
	if (reps < 1 || reps > 31)
		reps = 5;
	size_t most = 0;
	for (size_t i = 0; i < nn; i++)
		most = ns[i] > most ? ns[i] : most;
	objs = aligned_alloc(64, (most + 64) * OBJ);
	freel = malloc((most + 64) * sizeof *freel);
	for (size_t i = most + 64; i-- > 0;)
		freel[nfree++] = (MPI_Request)(void *)(objs + i * OBJ);
	setenv("NETLOOM_TRACE", "1", 1);
	if (!getenv("NETLOOM_TRACE_MB"))
		setenv("NETLOOM_TRACE_MB", "256", 1); /* 2 rounds of 1,000,000 outstanding: ~6 M records */
	strcpy(nl_agent.output_dir, "/nonexistent");
	strcpy(nl_agent.job_id, "bench");
	printf("trace.c alone: ns per post and per completion (ratio to N=%zu), median of %d; NETLOOM_TRACE_MB=%s\n", ns[0], reps,
	       getenv("NETLOOM_TRACE_MB"));
	printf("window: N requests in windows of 64; outstanding: all N at once (first: the round in which the table grows);\n"
	       "probes: slots a lookup reads on average, with all N outstanding, and the table's size then\n");
	const char *col[8] = {"window post", "window done", "", "", "out. first post", "out. first done", "outstanding post", "outstanding done"};
	printf("%-9s", "N");
	for (int c = 0; c < 8; c++)
		if (*col[c])
			printf(" %17s", col[c]);
	printf("\n");
	double base[8] = {0};
	for (size_t k = 0; k < nn; k++) {
		double v[8][32], med[8];
		for (int rep = 0; rep < reps; rep++) {
			double w[4], o[4];
			run(ns[k], 64, w);
			run(ns[k], ns[k], o);
			/* the window's steady rounds; the first of outstanding, then its steady one */
			v[0][rep] = w[2], v[1][rep] = w[3], v[2][rep] = w[0], v[3][rep] = w[1];
			v[4][rep] = o[0], v[5][rep] = o[1], v[6][rep] = o[2], v[7][rep] = o[3];
		}
		printf("%-9zu", ns[k]);
		for (int c = 0; c < 8; c++) {
			med[c] = median(v[c], reps);
			if (k == 0)
				base[c] = med[c];
			if (*col[c])
				printf(" %9.1f (%5.2f)", med[c], med[c] / base[c]);
		}
		printf("  probes %.2f, table %zu KiB\n", peak_probes, (req_mask + 1) * sizeof *reqs / 1024);
	}
	return 0;
}
