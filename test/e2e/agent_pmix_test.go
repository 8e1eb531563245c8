package e2e

// The agent where PMIx cannot be asked about other nodes (issue 41, item
// 5): "nodes" that share /dev/shm (the Ethernet lab's network namespaces,
// containers on one host) under PMIx's default shared-memory data store,
// and a PMIx that never answers at all. The job must run as it runs
// without the agent: the same output, every rank's profile written, at
// most a bounded delay.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netloom/netloom/test/ethlab"
)

// TestAgentSharedShmEth runs 4 ranks over the 4 hosts of a lab of network
// namespaces, which share /dev/shm and /tmp, with PMIx's default data store
// (PMIX_MCA_gds=hash, a work-around the agent must not need, is taken out
// of the launch's environment should the caller's set it), under Open MPI
// and MPICH, without and with the agent. The agent once asked PMIx for the other nodes' ranks
// (PMIx_Resolve_peers), which never returned there: every rank but the last
// lost its profile and the job hung.
func TestAgentSharedShmEth(t *testing.T) {
	buildAgent(t)
	if _, ok := ethlab.PresetOK("two-leaf"); !ok {
		t.Skip("the lab has no preset two-leaf")
	}
	lab := startEthLab(t, "two-leaf")
	hosts := []string{"h1", "h2", "h3", "h4"}
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			needMPI(t, m)
			prog := compile(t, m, filepath.Join(repoRoot(t), "test/ethlab/testdata/ring.c"))
			run := func(agent bool) (string, string) {
				out := t.TempDir()
				env := []string{"ETHLAB_ECHO=shm"}
				if agent {
					env = append(env, "LD_PRELOAD="+m.lib, "NETLOOM_OUTPUT="+out, "NETLOOM_JOB_ID=shm-"+m.name)
				}
				spec := ethlab.RunSpec{Impl: m.name, Hosts: hosts, Dir: out, Argv: []string{prog, "65536", "20"}, Env: env}
				return defaultStoreRun(t, lab, spec, out), out
			}
			plain, _ := run(false)
			with, out := run(true)
			if got, want := appLines(with), appLines(plain); !slices.Equal(got, want) {
				t.Errorf("output with the agent:\n%s\nwithout:\n%s", with, plain)
			}
			if n := strings.Count(plain, "echo=shm\n"); n != len(hosts) {
				t.Errorf("%d ranks' lines without the agent, want %d:\n%s", n, len(hosts), plain)
			}
			profiles := readProfiles(t, out, len(hosts))
			for r, d := range profiles {
				if got, want := d.GetProcess().GetNode(), hosts[r]; got != want || !d.Final {
					t.Errorf("rank %d: node %q final %v, want %q", r, got, d.Final, want)
				}
				// Each rank sends to the next one only. Open MPI's PMIx told
				// every rank's node (PMIX_HOSTNAME, from the process's own
				// data): a node row for the next rank's host. MPICH's Hydra
				// has no PMIx: no node rows (the daemon places the peer row).
				next := (r + 1) % len(hosts)
				if len(d.Peers) != 1 || d.Peers[0].Peer != uint32(next) {
					t.Errorf("rank %d: peer rows %v, want one for rank %d", r, d.Peers, next)
				}
				wantNodes := map[string][]string{"openmpi": {hosts[next]}, "mpich": nil}[m.name]
				var nodes []string
				for _, n := range d.Nodes {
					nodes = append(nodes, n.Node)
				}
				if !slices.Equal(nodes, wantNodes) {
					t.Errorf("rank %d: node rows %v, want %v", r, nodes, wantNodes)
				}
			}
		})
	}
}

// defaultStoreRun runs spec on the lab with PMIx's default data store and
// returns the job's output. MPICH's UCX over TCP sometimes hangs in
// MPI_Finalize after the job's work (docs/ethlab.md, openucx/ucx#8738),
// with or without the agent: such a run is tried again, at most 5 times.
func defaultStoreRun(t *testing.T, lab *ethlab.Lab, spec ethlab.RunSpec, out string) string {
	t.Helper()
	for try := 1; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd, err := lab.MPICommand(ctx, spec)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		cmd.Env = slices.DeleteFunc(cmd.Env, func(e string) bool { return strings.HasPrefix(e, "PMIX_MCA_gds=") })
		b, err := cmd.CombinedOutput()
		hung := ctx.Err() != nil
		cancel()
		if err == nil {
			return string(b)
		}
		if !hung || spec.Impl != "mpich" || try == 5 {
			t.Fatalf("%s (try %d, hung %v): %v\n%s", strings.Join(cmd.Args, " "), try, hung, err, b)
		}
		t.Logf("MPICH run %d hung (UCX's TCP transport in MPI_Finalize): again", try)
		entries, _ := os.ReadDir(out) // the profiles of the hung run
		for _, e := range entries {
			os.RemoveAll(filepath.Join(out, e.Name()))
		}
	}
}

// appLines are the application's lines of a launcher's output, sorted
// (ranks print in any order): Open MPI's own diagnostics ("[host:pid] ...",
// as its rsh launcher's setpgid warning, which comes and goes) left out.
func appLines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if !strings.HasPrefix(l, "[") {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

// silentPMIx is a PMIx client library that never answers: every query
// blocks for good, as behind a wedged progress thread (PMIx_Get, and the
// PMIx_Resolve_* the agent once used). Preloaded under its soname, it is
// the libpmix.so.2 the agent finds in the process.
const silentPMIx = `#include <unistd.h>
int PMIx_Initialized(void) { return 1; }
static int never(void)
{
	for (;;)
		pause();
}
int PMIx_Get(const void *proc, const char *key, const void *info, unsigned long ninfo, void **val) { return never(); }
int PMIx_Resolve_nodes(const char *nspace, char **nodelist) { return never(); }
int PMIx_Resolve_peers(const char *node, const char *nspace, void **procs, unsigned long *nprocs) { return never(); }
`

// finTimer prints one line per rank, then MPI_Finalize's duration when
// FIN_TIMES is set (to stderr, as "fin R SECONDS").
const finTimer = `#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char **argv)
{
	int r, n, x;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &r);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	x = r;
	MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	printf("rank %d of %d: sum %d\n", r, n, x);
	fflush(stdout);
	double t0 = now();
	MPI_Finalize();
	if (getenv("FIN_TIMES"))
		fprintf(stderr, "fin %d %.3f\n", r, now() - t0);
	return 0;
}
`

// TestAgentSilentPMIx: a PMIx that never answers the agent's node map costs
// the job at most the agent's bound (1 s, all reports together), said once
// per rank on stderr with NETLOOM_DEBUG; the output is the job's own, and
// every rank's profile is written (without node rows). MPICH on this host,
// its ranks given the silent library and a PMIx namespace.
func TestAgentSilentPMIx(t *testing.T) {
	buildAgent(t)
	m := impls(t)[1]
	needMPI(t, m)
	dir := t.TempDir()
	prog := compileSource(t, m, "fin.c", finTimer)
	pmix := filepath.Join(dir, "libpmix.so.2")
	if err := os.WriteFile(pmix+".c", []byte(silentPMIx), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cc", "-shared", "-fPIC", "-Wl,-soname,libpmix.so.2", "-o", pmix, pmix+".c").CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	const np = 4
	silent := []string{"LD_PRELOAD=" + pmix, "PMIX_NAMESPACE=silent"}
	plain := runRanks(t, m, np, 1, "", nil, nil, time.Minute, prog)
	out := t.TempDir()
	with := runRanks(t, m, np, 1, m.lib, append(slices.Clone(silent), "NETLOOM_OUTPUT="+out, "NETLOOM_JOB_ID=silent"), nil, time.Minute, prog)
	if got, want := appLines(with), appLines(plain); !slices.Equal(got, want) {
		t.Errorf("output with the agent and a silent PMIx:\n%s\nwithout the agent:\n%s", with, plain)
	}
	for _, d := range readProfiles(t, out, np) {
		if !d.Final || len(d.Nodes) != 0 || len(d.Peers) == 0 {
			t.Errorf("rank %d: final %v, %d node rows, %d peers", d.Rank, d.Final, len(d.Nodes), len(d.Peers))
		}
	}

	// With NETLOOM_DEBUG: one line per rank says it, and MPI_Finalize
	// waits at most the rest of the bound.
	debug := runRanks(t, m, np, 1, m.lib, append(slices.Clone(silent), "NETLOOM_DEBUG=1", "FIN_TIMES=1"), nil, time.Minute, prog)
	said := map[int]int{}
	for _, l := range strings.Split(debug, "\n") {
		var r int
		var secs float64
		if _, err := fmt.Sscanf(l, "netloom: rank %d: PMIx gave no node map in 1.0 s: reports go without node rows", &r); err == nil {
			said[r]++
		}
		if _, err := fmt.Sscanf(l, "fin %d %f", &r, &secs); err == nil && secs > 1.5 {
			t.Errorf("rank %d: MPI_Finalize took %.3f s with a silent PMIx (bound 1 s)", r, secs)
		}
	}
	for r := range np {
		if said[r] != 1 {
			t.Errorf("rank %d said %d times that PMIx gave no node map, want once:\n%s", r, said[r], debug)
		}
	}
	if strings.Count("\n"+debug, "\nfin ") != np {
		t.Errorf("not every rank timed its MPI_Finalize:\n%s", debug)
	}
}
