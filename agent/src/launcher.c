/* Netloom agent: the node of every rank, from the launcher, without MPI
 * traffic.
 *
 * A rank knows its own node. With the other ranks' nodes it can send its
 * traffic per destination node, which the daemon needs when a rank has too
 * many peers to send them all (NETLOOM_PEER_LIMIT). Asking the other ranks
 * over MPI would be traffic the application never sent, so the map comes
 * from the launcher's PMIx server when the MPI library uses one (Open MPI's
 * mpirun, Slurm's srun --mpi=pmix): every rank's PMIX_HOSTNAME, which the
 * server gave every process with the job's maps at its start. The library
 * is the one the MPI library already loaded (dlopen with RTLD_NOLOAD): the
 * agent starts no PMIx client of its own, and without PMIx (MPICH's Hydra)
 * there is no map.
 *
 * Only what the process already holds is read (PMIX_OPTIONAL: PMIx never
 * asks its server). Asking the server about another node's data
 * (PMIx_Resolve_peers, as the agent once did) never returns where PMIx's
 * shared-memory store (gds ds12/ds21) is shared by several "nodes" (network
 * namespaces or containers on one host sharing /dev/shm): it wedges PMIx's
 * progress thread, and with it the rank's own MPI_Finalize.
 *
 * PMIx may still not answer (a wedged or dead progress thread): the
 * lookup runs on a thread of its own, and a report waits for it at most
 * NL_MAP_WAIT_NS in the whole process, then goes on without node rows (the
 * per-peer rows, as without PMIx); NETLOOM_DEBUG=1 says so once. The map is
 * used only when it puts this rank on the node this rank reports
 * (NETLOOM_NODE or SLURMD_NODENAME may name another), so that the names in
 * node rows are the names the other ranks report of themselves.
 *
 * Runs before each report (helper thread, then MPI_Finalize after joining
 * it, before PMPI_Finalize), while the MPI library's PMIx client is up,
 * until the map is known or known not to come. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "state.h"
#include "env.h"

/* The PMIx standard's types, declared here so that the agent builds without
 * PMIx's headers (the PMIx ABI: the same in every version since 2).
 * PMIX_MAX_NSLEN is 255, PMIX_MAX_KEYLEN 511. */
typedef struct {
	char nspace[256];
	uint32_t rank;
} nl_pmix_proc;
typedef struct {
	uint16_t type; /* PMIX_BOOL 1, PMIX_STRING 3 */
	union {
		_Bool flag;
		char *string;
		char pad[56]; /* room for the largest member of any version */
	} data;
} nl_pmix_value;
typedef struct {
	char key[512];
	uint32_t flags;
	nl_pmix_value value;
} nl_pmix_info;
#define NL_PMIX_BOOL 1
#define NL_PMIX_STRING 3
typedef int (*initialized_fn)(void);
typedef int (*get_fn)(const nl_pmix_proc *proc, const char *key, const nl_pmix_info *info, size_t ninfo,
		      nl_pmix_value **val);

/* The most a process's reports wait for PMIx, all together. */
#define NL_MAP_WAIT_NS 1000000000ull

static void map_free(struct nl_nodemap *m)
{
	if (!m)
		return;
	free(m->names);
	free(m->node_of);
	free(m);
}

static void value_free(nl_pmix_value *v)
{
	if (!v)
		return;
	if (v->type == NL_PMIX_STRING)
		free(v->data.string);
	free(v);
}

/* pmix_map asks PMIx; NULL when it cannot say where every rank is, with
 * *again set when PMIx is there but did not answer in full (worth asking
 * at the next report). */
static struct nl_nodemap *pmix_map(const char *nspace, int world, int *again)
{
	*again = 0;
	void *lib = dlopen("libpmix.so.2", RTLD_LAZY | RTLD_NOLOAD);
	if (!lib)
		return NULL;
	initialized_fn initialized = (initialized_fn)dlsym(lib, "PMIx_Initialized");
	get_fn get = (get_fn)dlsym(lib, "PMIx_Get");
	struct nl_nodemap *m = NULL;
	if (!initialized || !get || !initialized())
		goto out;
	*again = 1;
	m = calloc(1, sizeof *m);
	if (!m)
		goto out;
	m->node_of = malloc(sizeof *m->node_of * (size_t)world);
	int cap = 16;
	m->names = calloc((size_t)cap, sizeof *m->names);
	if (!m->node_of || !m->names)
		goto fail;
	/* only this process's own data: PMIx never asks its server */
	static nl_pmix_info optional = {.key = "pmix.optional", .value = {.type = NL_PMIX_BOOL, .data.flag = 1}};
	nl_pmix_proc p;
	memset(&p, 0, sizeof p);
	memcpy(p.nspace, nspace, strlen(nspace) + 1);
	int k = -1; /* the last rank's node: ranks come in blocks */
	for (int r = 0; r < world; r++) {
		nl_pmix_value *v = NULL;
		p.rank = (uint32_t)r;
		if (get(&p, "pmix.hname", &optional, 1, &v) != 0 || !v || v->type != NL_PMIX_STRING || !v->data.string ||
		    strlen(v->data.string) >= NL_NAME_MAX) {
			value_free(v);
			goto fail;
		}
		const char *host = v->data.string;
		if (k < 0 || strcmp(m->names[k], host) != 0) {
			for (k = 0; k < m->nnodes && strcmp(m->names[k], host) != 0; k++)
				;
			if (k == m->nnodes) {
				if (m->nnodes == cap) {
					void *more = realloc(m->names, sizeof *m->names * (size_t)cap * 2);
					if (!more) {
						value_free(v);
						goto fail;
					}
					m->names = more;
					cap *= 2;
				}
				memcpy(m->names[m->nnodes++], host, strlen(host) + 1);
			}
		}
		m->node_of[r] = k;
		value_free(v);
	}
	*again = 0;
	goto out;
fail:
	map_free(m);
	m = NULL;
out:
	dlclose(lib); /* drops the reference RTLD_NOLOAD took; the MPI library keeps its own */
	return m;
}

/* The lookup's thread and the reports meet here. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t done;
	int cond_ready;
	enum { MAP_IDLE, MAP_RUNNING, MAP_SETTLED } state;
	uint64_t waited_ns; /* all the reports' waits together */
	char nspace[256];
} lk = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void publish(struct nl_nodemap *m)
{
	if (!m)
		return;
	int self = m->node_of[nl_snap_rank()];
	if (strcmp(m->names[self], nl_agent.node) != 0) {
		map_free(m); /* this rank reports another node name than the launcher's */
		return;
	}
	m->self = self;
	__atomic_store_n(&nl_agent.nodemap, m, __ATOMIC_RELEASE);
}

static void *lookup(void *arg)
{
	(void)arg;
	int again;
	struct nl_nodemap *m = pmix_map(lk.nspace, nl_snap_world(), &again);
	publish(m);
	pthread_mutex_lock(&lk.lock);
	lk.state = again ? MAP_IDLE : MAP_SETTLED; /* answered in part: asked again next time */
	pthread_cond_broadcast(&lk.done);
	pthread_mutex_unlock(&lk.lock);
	return NULL;
}

void nl_nodemap_load(void)
{
	/* Settled once the map is known, or known not to come: before each
	 * report by the helper, then by MPI_Finalize after it (never both at
	 * once). A PMIx that answered in part is asked again next time. */
	const char *env = getenv("NETLOOM_NODE_MAP");
	if (env && strcmp(env, "0") == 0)
		return;
	pthread_mutex_lock(&lk.lock);
	if (lk.state == MAP_IDLE) {
		const char *nspace = getenv("PMIX_NAMESPACE");
		void *lib = nspace && *nspace && strlen(nspace) < sizeof lk.nspace ? dlopen("libpmix.so.2", RTLD_LAZY | RTLD_NOLOAD) : NULL;
		if (!lib) { /* no PMIx in this process: no map, no thread */
			lk.state = MAP_SETTLED;
			pthread_mutex_unlock(&lk.lock);
			return;
		}
		dlclose(lib);
		if (!lk.cond_ready) {
			nl_cond_monotonic(&lk.done);
			lk.cond_ready = 1;
		}
		memcpy(lk.nspace, nspace, strlen(nspace) + 1);
		/* detached, no signal meant for the application: a PMIx that
		 * never answers keeps it, not the report */
		pthread_t t;
		lk.state = nl_thread(&t, 1, lookup) == 0 ? MAP_RUNNING : MAP_SETTLED;
	}
	/* wait for a lookup under way, within what is left of the budget */
	while (lk.state == MAP_RUNNING && lk.waited_ns < NL_MAP_WAIT_NS) {
		uint64_t t0 = nl_mono_ns(), deadline = t0 + (NL_MAP_WAIT_NS - lk.waited_ns);
		struct timespec ts = {(time_t)(deadline / 1000000000ull), (long)(deadline % 1000000000ull)};
		int rc = pthread_cond_timedwait(&lk.done, &lk.lock, &ts);
		lk.waited_ns += nl_mono_ns() - t0;
		if (rc == ETIMEDOUT || lk.waited_ns >= NL_MAP_WAIT_NS) {
			lk.waited_ns = NL_MAP_WAIT_NS;
			if (lk.state == MAP_RUNNING && nl_env_debug())
				fprintf(stderr, "netloom: rank %d: PMIx gave no node map in %.1f s: reports go without node rows\n",
					nl_snap_rank(), NL_MAP_WAIT_NS / 1e9);
		}
	}
	pthread_mutex_unlock(&lk.lock);
}

void nl_nodemap_free(void)
{
	map_free(__atomic_exchange_n(&nl_agent.nodemap, NULL, __ATOMIC_ACQ_REL));
}
