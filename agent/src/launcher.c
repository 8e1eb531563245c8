/* Netloom agent: the node of every rank, from the launcher, without MPI
 * traffic.
 *
 * A rank knows its own node. With the other ranks' nodes it can send its
 * traffic per destination node, which the daemon needs when a rank has too
 * many peers to send them all (NETLOOM_PEER_LIMIT). Asking the other ranks
 * over MPI would be traffic the application never sent, so the map comes
 * from the launcher's PMIx server when the MPI library uses one (Open MPI's
 * mpirun, Slurm's srun --mpi=pmix): PMIx_Resolve_nodes and
 * PMIx_Resolve_peers read the job's node and process maps, which the server
 * gave every process at its start. The library is the one the MPI library
 * already loaded (dlopen with RTLD_NOLOAD): the agent starts no PMIx client
 * of its own, and without PMIx (MPICH's Hydra) there is no map.
 *
 * The map is used only when it puts this rank on the node this rank reports
 * (NETLOOM_NODE or SLURMD_NODENAME may name another), so that the names in
 * node rows are the names the other ranks report of themselves.
 *
 * Runs before each report (helper thread, then MPI_Finalize after joining
 * it, before PMPI_Finalize), while the MPI library's PMIx client is up,
 * until the map is known or known not to come. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"

/* The PMIx standard's types, declared here so that the agent builds without
 * PMIx's headers: PMIX_MAX_NSLEN is 255 in every version. */
typedef struct {
	char nspace[256];
	uint32_t rank;
} nl_pmix_proc;
typedef int (*initialized_fn)(void);
typedef int (*resolve_nodes_fn)(const char *nspace, char **nodelist);
typedef int (*resolve_peers_fn)(const char *node, const char *nspace, nl_pmix_proc **procs, size_t *nprocs);

static void map_free(struct nl_nodemap *m)
{
	if (!m)
		return;
	free(m->names);
	free(m->node_of);
	free(m);
}

/* pmix_map asks PMIx; NULL when it cannot say where every rank is, with
 * *again set when PMIx is there but did not answer in full (worth asking
 * at the next report). */
static struct nl_nodemap *pmix_map(int world, int *again)
{
	*again = 0;
	const char *nspace = getenv("PMIX_NAMESPACE");
	if (!nspace || !*nspace || strlen(nspace) > 255)
		return NULL;
	void *lib = dlopen("libpmix.so.2", RTLD_LAZY | RTLD_NOLOAD);
	if (!lib)
		return NULL;
	initialized_fn initialized = (initialized_fn)dlsym(lib, "PMIx_Initialized");
	resolve_nodes_fn resolve_nodes = (resolve_nodes_fn)dlsym(lib, "PMIx_Resolve_nodes");
	resolve_peers_fn resolve_peers = (resolve_peers_fn)dlsym(lib, "PMIx_Resolve_peers");
	struct nl_nodemap *m = NULL;
	char *list = NULL;
	if (!initialized || !resolve_nodes || !resolve_peers || !initialized())
		goto out;
	*again = 1;
	if (resolve_nodes(nspace, &list) != 0 || !list || !*list)
		goto out;
	m = calloc(1, sizeof *m);
	if (!m)
		goto out;
	m->node_of = malloc(sizeof *m->node_of * (size_t)world);
	int cap = 1;
	for (const char *c = list; *c; c++)
		cap += *c == ',';
	m->names = calloc((size_t)cap, sizeof *m->names);
	if (!m->node_of || !m->names)
		goto fail;
	for (int i = 0; i < world; i++)
		m->node_of[i] = -1;
	int placed = 0;
	char *save = NULL;
	for (char *node = strtok_r(list, ",", &save); node; node = strtok_r(NULL, ",", &save)) {
		if (m->nnodes == cap || strlen(node) >= NL_NAME_MAX)
			goto fail;
		nl_pmix_proc *procs = NULL;
		size_t n = 0;
		if (resolve_peers(node, nspace, &procs, &n) != 0)
			goto fail;
		int k = m->nnodes++;
		memcpy(m->names[k], node, strlen(node) + 1);
		for (size_t i = 0; i < n; i++) {
			uint32_t r = procs[i].rank;
			if (r < (uint32_t)world && m->node_of[r] < 0 && strncmp(procs[i].nspace, nspace, 256) == 0) {
				m->node_of[r] = k;
				placed++;
			}
		}
		free(procs);
	}
	if (placed != world)
		goto fail;
	*again = 0;
	goto out;
fail:
	map_free(m);
	m = NULL;
out:
	free(list);
	dlclose(lib); /* drops the reference RTLD_NOLOAD took; the MPI library keeps its own */
	return m;
}

void nl_nodemap_load(void)
{
	/* Settled once the map is known, or known not to come: before each
	 * report by the helper, then by MPI_Finalize after it (never both at
	 * once). A PMIx that answered in part is asked again next time. */
	static int settled;
	const char *env = getenv("NETLOOM_NODE_MAP");
	if (settled || (env && strcmp(env, "0") == 0))
		return;
	int again;
	struct nl_nodemap *m = pmix_map(nl_world_size, &again);
	settled = !again;
	if (!m)
		return;
	int self = m->node_of[nl_world_rank_self];
	if (strcmp(m->names[self], nl_agent.node) != 0) {
		map_free(m); /* this rank reports another node name than the launcher's */
		return;
	}
	m->self = self;
	__atomic_store_n(&nl_agent.nodemap, m, __ATOMIC_RELEASE);
}

void nl_nodemap_free(void)
{
	map_free(__atomic_exchange_n(&nl_agent.nodemap, NULL, __ATOMIC_ACQ_REL));
}
