/* Netloom agent: the application's own communication matrix, online, and a
 * communicator reordered from it (include/netloom.h, docs/reorder.md).
 *
 * Reading costs the hot path nothing: the matrix is the per-peer counters the
 * wrappers already add to (and Open MPI's physical counts), copied through
 * state.h, mapped from the communicator's ranks to world
 * ranks with the translation the agent caches per communicator. Only
 * netloom_matrix_all and netloom_reorder communicate, with PMPI calls on the
 * communicator the application gave (not counted as the application's). */
#define NETLOOM_AGENT_BUILD 1
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state.h"
#include "netloom.h"
#include "remap.h"

/* ------------------------------------------------- errors */

static __thread char last_err[320];
static __thread int last_code;

static int fail(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_err, sizeof last_err, fmt, ap);
	va_end(ap);
	last_code = code;
	return code;
}

static const char *const texts[] = {
	[NETLOOM_OK] = "success",
	[NETLOOM_ERR_NO_AGENT] = "the Netloom agent is not loaded",
	[NETLOOM_ERR_NOT_STARTED] = "the Netloom agent is not running (before MPI_Init, after MPI_Finalize, or MPI_Init not seen)",
	[NETLOOM_ERR_ARG] = "invalid argument",
	[NETLOOM_ERR_COMM] = "a communicator the agent does not know (MPI_COMM_NULL, or not translatable)",
	[NETLOOM_ERR_INTERCOMM] = "an intercommunicator: the matrix and the reordering need an intracommunicator",
	[NETLOOM_ERR_MARK] = "no such mark",
	[NETLOOM_ERR_PHYSICAL] = "no physical traffic: the MPI library does not report it (Open MPI needs --mca pml_monitoring_enable 1 or 2)",
	[NETLOOM_ERR_NO_SCOTCH] = "Scotch cannot be loaded (libscotch; NETLOOM_SCOTCH_LIB names it)",
	[NETLOOM_ERR_SCOTCH] = "Scotch failed to map the ranks",
	[NETLOOM_ERR_MPI] = "an MPI call failed",
	[NETLOOM_ERR_NOMEM] = "out of memory",
	[NETLOOM_ERR_MARKS_FULL] = "too many marks",
};

const char *netloom_strerror(int code)
{
	static __thread char buf[512];
	if (code < 0 || code >= (int)(sizeof texts / sizeof texts[0]) || !texts[code])
		return "netloom: unknown error code";
	if (code != NETLOOM_OK && code == last_code && *last_err) {
		snprintf(buf, sizeof buf, "netloom: %s: %s", texts[code], last_err);
		return buf;
	}
	snprintf(buf, sizeof buf, "netloom: %s", texts[code]);
	return buf;
}

/* ------------------------------------------------- counters and marks */

/* per world peer: the application's bytes and messages per class, then the
 * physical ones (Open MPI's monitoring: p2p, collectives, one-sided puts) */
#define NVAL (4 * NL_NCLASS)
enum { V_BYTES = 0, V_MSGS = NL_NCLASS, V_PBYTES = 2 * NL_NCLASS, V_PMSGS = 3 * NL_NCLASS };

struct mark {
	char name[NL_NAME_MAX];
	uint64_t *v; /* world_size x NVAL */
};
static struct mark marks[NETLOOM_MAX_MARKS];
static int nmarks;
static pthread_mutex_t mark_lock = PTHREAD_MUTEX_INITIALIZER;

static inline void values(int w, uint64_t v[NVAL])
{
	struct nl_peer_snap p;
	struct nl_monitored m;
	nl_snap_peer(w, &p);
	nl_snap_monitored(w, &m);
	for (int c = 0; c < NL_NCLASS; c++) {
		v[V_BYTES + c] = p.bytes[c];
		v[V_MSGS + c] = p.msgs[c];
		v[V_PBYTES + c] = m.bytes[c];
		v[V_PMSGS + c] = m.msgs[c];
	}
}

static int running(void)
{
	return nl_snap_running();
}

int netloom_mark(const char *name)
{
	if (!running())
		return fail(NETLOOM_ERR_NOT_STARTED, "netloom_mark");
	if (!name || !*name)
		return fail(NETLOOM_ERR_ARG, "netloom_mark: an empty name");
	uint64_t *v = malloc(sizeof(uint64_t) * NVAL * (size_t)nl_snap_world());
	if (!v)
		return fail(NETLOOM_ERR_NOMEM, "a mark of %d peers", nl_snap_world());
	for (int w = 0; w < nl_snap_world(); w++)
		values(w, v + (size_t)w * NVAL);
	pthread_mutex_lock(&mark_lock);
	int i = 0;
	while (i < nmarks && strncmp(marks[i].name, name, NL_NAME_MAX - 1) != 0)
		i++;
	if (i == NETLOOM_MAX_MARKS) {
		pthread_mutex_unlock(&mark_lock);
		free(v);
		return fail(NETLOOM_ERR_MARKS_FULL, "\"%.63s\": %d marks already", name, NETLOOM_MAX_MARKS);
	}
	if (i == nmarks) {
		snprintf(marks[i].name, sizeof marks[i].name, "%s", name);
		nmarks++;
	}
	free(marks[i].v);
	marks[i].v = v;
	pthread_mutex_unlock(&mark_lock);
	return NETLOOM_OK;
}

static const uint64_t *mark_find(const char *name)
{
	for (int i = 0; i < nmarks; i++)
		if (strncmp(marks[i].name, name, NL_NAME_MAX - 1) == 0)
			return marks[i].v;
	return NULL;
}

struct span {
	int n, rank;
	const int *world;
};

/* check validates comm and what, and fills the span's translation. */
static int check(MPI_Comm comm, int what, struct span *s)
{
	if (!running())
		return fail(NETLOOM_ERR_NOT_STARTED, "no counters to read");
	if (what & ~(NETLOOM_ALL | NETLOOM_PHYSICAL) || !(what & NETLOOM_ALL))
		return fail(NETLOOM_ERR_ARG, "classes 0x%x: NETLOOM_P2P, NETLOOM_COLL, NETLOOM_RMA (NETLOOM_ALL), with NETLOOM_PHYSICAL", what);
	if (comm == MPI_COMM_NULL)
		return fail(NETLOOM_ERR_COMM, "MPI_COMM_NULL");
	int inter = 0;
	if (nl_comm_ranks(comm, &s->n, &s->rank, &inter, &s->world) != 0)
		return fail(NETLOOM_ERR_COMM, "the agent's communicator table is full or the translation failed");
	if (inter)
		return fail(NETLOOM_ERR_INTERCOMM, "of %d remote ranks", s->n);
	if (what & NETLOOM_PHYSICAL && !nl_snap_physical())
		return fail(NETLOOM_ERR_PHYSICAL, "%s", nl_agent.mpi_library);
	return NETLOOM_OK;
}

/* row reads this rank's row of comm's matrix between the marks from and to
 * (NULL or "": MPI_Init, now) into bytes and msgs (n each, may be NULL). */
static int row(const struct span *s, int what, const char *from, const char *to, uint64_t *bytes, uint64_t *msgs)
{
	pthread_mutex_lock(&mark_lock);
	const uint64_t *a = from && *from ? mark_find(from) : NULL, *b = to && *to ? mark_find(to) : NULL;
	if ((from && *from && !a) || (to && *to && !b)) {
		pthread_mutex_unlock(&mark_lock);
		return fail(NETLOOM_ERR_MARK, "\"%.63s\" was never marked on this rank", from && *from && !a ? from : to);
	}
	const int pb = what & NETLOOM_PHYSICAL ? V_PBYTES : V_BYTES, pm = what & NETLOOM_PHYSICAL ? V_PMSGS : V_MSGS;
	for (int i = 0; i < s->n; i++) {
		int w = s->world ? s->world[i] : i;
		uint64_t now[NVAL], zero[NVAL] = {0};
		const uint64_t *hi = now, *lo = zero;
		if (w < 0 || w >= nl_snap_world()) {
			memset(now, 0, sizeof now);
		} else {
			if (b)
				hi = b + (size_t)w * NVAL;
			else
				values(w, now);
			if (a)
				lo = a + (size_t)w * NVAL;
		}
		uint64_t sb = 0, sm = 0;
		for (int c = 0; c < NL_NCLASS; c++) {
			if (!(what & (1 << c)))
				continue;
			sb += hi[pb + c] - lo[pb + c];
			sm += hi[pm + c] - lo[pm + c];
		}
		if (bytes)
			bytes[i] = sb;
		if (msgs)
			msgs[i] = sm;
	}
	pthread_mutex_unlock(&mark_lock);
	return NETLOOM_OK;
}

int netloom_matrix(MPI_Comm comm, int what, const char *from, const char *to, uint64_t *bytes, uint64_t *msgs)
{
	struct span s;
	int rc = check(comm, what, &s);
	if (rc)
		return rc;
	if (!bytes && !msgs)
		return fail(NETLOOM_ERR_ARG, "netloom_matrix: no output array");
	return row(&s, what, from, to, bytes, msgs);
}

int netloom_matrix_all(MPI_Comm comm, int what, const char *from, const char *to, uint64_t *bytes, uint64_t *msgs)
{
	struct span s;
	int rc = check(comm, what, &s); /* the same answer on every rank */
	if (rc)
		return rc;
	/* one row per rank: its code, then bytes and messages */
	const size_t len = 1 + 2 * (size_t)s.n;
	uint64_t *mine = malloc(sizeof(uint64_t) * len), *all = malloc(sizeof(uint64_t) * len * (size_t)s.n);
	if (!mine || !all) {
		free(mine);
		free(all);
		/* the others wait in the allgather: abort rather than hang? No:
		 * a rank out of memory cannot take part; say so */
		return fail(NETLOOM_ERR_NOMEM, "the matrix of %d ranks", s.n);
	}
	mine[0] = (uint64_t)row(&s, what, from, to, mine + 1, mine + 1 + s.n);
	int mrc = PMPI_Allgather(mine, (int)len, MPI_UINT64_T, all, (int)len, MPI_UINT64_T, comm);
	free(mine);
	if (mrc != MPI_SUCCESS) {
		free(all);
		return fail(NETLOOM_ERR_MPI, "PMPI_Allgather on the communicator: error %d", mrc);
	}
	for (int i = 0; i < s.n; i++)
		if (all[len * (size_t)i]) {
			rc = (int)all[len * (size_t)i];
			if (i != s.rank)
				fail(rc, "on rank %d of the communicator", i);
			free(all);
			return rc;
		}
	for (int i = 0; i < s.n; i++) {
		const uint64_t *r = all + len * (size_t)i + 1;
		if (bytes)
			memcpy(bytes + (size_t)i * (size_t)s.n, r, sizeof(uint64_t) * (size_t)s.n);
		if (msgs)
			memcpy(msgs + (size_t)i * (size_t)s.n, r + s.n, sizeof(uint64_t) * (size_t)s.n);
	}
	free(all);
	return NETLOOM_OK;
}

/* ------------------------------------------------- reorder */

struct contrib {
	int32_t rc, cpu;
	char node[NL_NAME_MAX];
};

struct verdict {
	int32_t rc, scotch, nodes, moved;
	uint64_t before, after, total;
	double map_seconds;
	char err[256];
};

static void record(const struct verdict *v, int n, int old_rank, int new_rank, int world, const char *since, double secs)
{
	pthread_mutex_lock(&nl_agent.reorder_lock);
	nl_agent.reorders_total++;
	if (nl_agent.nreorders < NL_MAX_REORDERS) {
		struct nl_reorder_ev *e = &nl_agent.reorders[nl_agent.nreorders++];
		memset(e, 0, sizeof *e);
		e->unix_ns = nl_unix_ns();
		e->ranks = n;
		e->nodes = v->nodes;
		e->moved = v->moved;
		e->scotch = v->scotch;
		e->old_rank = old_rank;
		e->new_rank = new_rank;
		e->comm_world = world;
		e->before = v->before;
		e->after = v->after;
		e->total = v->total;
		e->seconds = secs;
		e->map_seconds = v->map_seconds;
		snprintf(e->since, sizeof e->since, "%s", since ? since : "");
	}
	pthread_mutex_unlock(&nl_agent.reorder_lock);
}

void nl_reorders_copy(struct nl_reorder_ev *out, int *n, uint64_t *total)
{
	pthread_mutex_lock(&nl_agent.reorder_lock);
	*n = nl_agent.nreorders;
	*total = nl_agent.reorders_total;
	memcpy(out, nl_agent.reorders, sizeof(struct nl_reorder_ev) * (size_t)*n);
	pthread_mutex_unlock(&nl_agent.reorder_lock);
}

/* decide runs on the communicator's rank 0: the nodes, the matrix, the
 * mapping; keys[p] is process p's rank in the new communicator. */
static void decide(int n, const char *buf, size_t len, struct verdict *v, int *keys)
{
	uint64_t *m = malloc(sizeof(uint64_t) * (size_t)n * (size_t)n);
	int *node = malloc(sizeof(int) * (size_t)n), *cpu = malloc(sizeof(int) * (size_t)n);
	if (!m || !node || !cpu) {
		v->rc = NETLOOM_ERR_NOMEM;
		snprintf(v->err, sizeof v->err, "mapping %d ranks", n);
		goto out;
	}
	int nodes = 0;
	for (int p = 0; p < n; p++) {
		const struct contrib *c = (const struct contrib *)(buf + len * (size_t)p);
		if (c->rc) {
			v->rc = c->rc;
			snprintf(v->err, sizeof v->err, "on rank %d of the communicator", p);
			goto out;
		}
		cpu[p] = c->cpu;
		node[p] = -1;
		for (int q = 0; q < p && node[p] < 0; q++) /* the first rank on the same node names it */
			if (strncmp(c->node, ((const struct contrib *)(buf + len * (size_t)q))->node, NL_NAME_MAX) == 0)
				node[p] = node[q];
		if (node[p] < 0)
			node[p] = nodes++;
		memcpy(m + (size_t)p * (size_t)n, buf + len * (size_t)p + sizeof(struct contrib), sizeof(uint64_t) * (size_t)n);
	}
	struct nl_remap_in in = {.n = n, .bytes = m, .node = node, .cpu = cpu};
	struct nl_remap_out o = {.key = keys};
	uint64_t t0 = nl_mono_ns();
	v->rc = nl_remap(&in, &o, v->err, sizeof v->err);
	v->map_seconds = (double)(nl_mono_ns() - t0) / 1e9;
	v->scotch = o.scotch;
	v->nodes = o.nodes;
	v->moved = o.moved;
	v->before = o.before;
	v->after = o.after;
	v->total = o.total;
out:
	free(m);
	free(node);
	free(cpu);
}

int netloom_reorder(MPI_Comm comm, MPI_Comm *newcomm, const char *since, struct netloom_reorder_info *info)
{
	uint64_t t0 = nl_mono_ns();
	if (!newcomm)
		return fail(NETLOOM_ERR_ARG, "netloom_reorder: newcomm is NULL");
	*newcomm = MPI_COMM_NULL;
	struct span s;
	int rc = check(comm, NETLOOM_ALL, &s); /* the same answer on every rank */
	if (rc)
		return rc;
	const int n = s.n;
	const size_t len = sizeof(struct contrib) + sizeof(uint64_t) * (size_t)n;
	char *mine = calloc(1, len), *all = NULL;
	const size_t vlen = sizeof(struct verdict) + sizeof(int) * (size_t)n;
	char *vbuf = calloc(1, vlen);
	if (!mine || !vbuf) {
		free(mine);
		free(vbuf);
		return fail(NETLOOM_ERR_NOMEM, "the matrix row of %d ranks", n);
	}
	struct contrib *c = (struct contrib *)mine;
	c->rc = row(&s, NETLOOM_ALL, since, NULL, (uint64_t *)(mine + sizeof *c), NULL);
	c->cpu = sched_getcpu();
	snprintf(c->node, sizeof c->node, "%s", nl_agent.node);
	struct verdict *v = (struct verdict *)vbuf;
	int *keys = (int *)(vbuf + sizeof *v);
	if (s.rank == 0) {
		all = malloc(len * (size_t)n);
		if (!all) /* still takes part: the verdict says so */
			v->rc = NETLOOM_ERR_NOMEM;
	}
	int mrc = PMPI_Gather(mine, (int)len, MPI_BYTE, all, all ? (int)len : 0, MPI_BYTE, 0, comm);
	if (s.rank == 0 && mrc == MPI_SUCCESS && !v->rc)
		decide(n, all, len, v, keys);
	else if (mrc != MPI_SUCCESS)
		v->rc = NETLOOM_ERR_MPI;
	free(all);
	free(mine);
	mrc = PMPI_Bcast(vbuf, (int)vlen, MPI_BYTE, 0, comm);
	if (mrc != MPI_SUCCESS) {
		free(vbuf);
		return fail(NETLOOM_ERR_MPI, "PMPI_Bcast on the communicator: error %d", mrc);
	}
	if (v->rc) {
		rc = fail(v->rc, "%s", v->err);
		free(vbuf);
		return rc;
	}
	int key = keys[s.rank];
	mrc = PMPI_Comm_split(comm, 0, key, newcomm);
	if (mrc != MPI_SUCCESS) {
		free(vbuf);
		*newcomm = MPI_COMM_NULL;
		return fail(NETLOOM_ERR_MPI, "PMPI_Comm_split: error %d", mrc);
	}
	double secs = (double)(nl_mono_ns() - t0) / 1e9;
	if (info) {
		memset(info, 0, sizeof *info);
		info->inter_node_before = v->before;
		info->inter_node_after = v->after;
		info->total_bytes = v->total;
		info->ranks = n;
		info->nodes = v->nodes;
		info->moved = v->moved;
		info->method = v->scotch ? NETLOOM_REORDER_SCOTCH : NETLOOM_REORDER_KEPT;
		info->seconds = secs;
		info->map_seconds = v->map_seconds;
	}
	record(v, n, s.rank, key, comm == MPI_COMM_WORLD, since, secs);
	free(vbuf);
	return NETLOOM_OK;
}

/* ------------------------------------------------- Fortran (mpif.h, use mpi)
 * gfortran's conventions: lower case, a trailing underscore, CHARACTER
 * lengths as hidden size_t arguments at the end. Blank strings: no mark. */

static const char *fstr(const char *s, size_t len, char *buf, size_t n)
{
	while (len > 0 && s[len - 1] == ' ')
		len--;
	if (len == 0)
		return NULL;
	if (len >= n)
		len = n - 1;
	memcpy(buf, s, len);
	buf[len] = 0;
	return buf;
}

void netloom_mark_(const char *name, MPI_Fint *ierr, size_t lname)
{
	char b[NL_NAME_MAX];
	const char *s = fstr(name, lname, b, sizeof b);
	*ierr = s ? netloom_mark(s) : fail(NETLOOM_ERR_ARG, "NETLOOM_MARK: a blank name");
}

void netloom_matrix_(MPI_Fint *comm, MPI_Fint *what, const char *from, const char *to, uint64_t *bytes, uint64_t *msgs,
		     MPI_Fint *ierr, size_t lfrom, size_t lto)
{
	char a[NL_NAME_MAX], b[NL_NAME_MAX];
	*ierr = netloom_matrix(PMPI_Comm_f2c(*comm), *what, fstr(from, lfrom, a, sizeof a), fstr(to, lto, b, sizeof b), bytes, msgs);
}

void netloom_matrix_all_(MPI_Fint *comm, MPI_Fint *what, const char *from, const char *to, uint64_t *bytes,
			 uint64_t *msgs, MPI_Fint *ierr, size_t lfrom, size_t lto)
{
	char a[NL_NAME_MAX], b[NL_NAME_MAX];
	*ierr = netloom_matrix_all(PMPI_Comm_f2c(*comm), *what, fstr(from, lfrom, a, sizeof a), fstr(to, lto, b, sizeof b), bytes,
				   msgs);
}

void netloom_reorder_(MPI_Fint *comm, MPI_Fint *newcomm, const char *since, int64_t *before, int64_t *after, MPI_Fint *ierr,
		      size_t lsince)
{
	char a[NL_NAME_MAX];
	struct netloom_reorder_info info = {0};
	MPI_Comm nc = MPI_COMM_NULL;
	*ierr = netloom_reorder(PMPI_Comm_f2c(*comm), &nc, fstr(since, lsince, a, sizeof a), &info);
	*newcomm = PMPI_Comm_c2f(nc);
	*before = (int64_t)info.inter_node_before;
	*after = (int64_t)info.inter_node_after;
}

void netloom_strerror_(MPI_Fint *code, char *msg, size_t lmsg)
{
	const char *s = netloom_strerror(*code);
	size_t k = strlen(s);
	if (k > lmsg)
		k = lmsg;
	memcpy(msg, s, k);
	memset(msg + k, ' ', lmsg - k);
}
