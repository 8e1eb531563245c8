package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/test/ibsim"
)

// placeProg is a halo exchange around a ring ("ring") or a pairwise
// exchange among all ranks ("all"): point-to-point bytes only, the same in
// every run, so a re-run's traffic is known from the first run's.
const placeProg = `#include <mpi.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	int r, n;
	MPI_Comm_rank(MPI_COMM_WORLD, &r);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	int all = strcmp(argv[1], "all") == 0, bytes = atoi(argv[2]), iter = atoi(argv[3]);
	char *s = calloc(bytes, 1), *q = calloc(bytes, 1);
	for (int i = 0; i < iter; i++) {
		if (all) {
			for (int k = 1; k < n; k++)
				MPI_Sendrecv(s, bytes, MPI_BYTE, (r + k) % n, 0, q, bytes, MPI_BYTE, (r + n - k) % n, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else {
			MPI_Sendrecv(s, bytes, MPI_BYTE, (r + 1) % n, 0, q, bytes, MPI_BYTE, (r + n - 1) % n, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			MPI_Sendrecv(s, bytes, MPI_BYTE, (r + n - 1) % n, 1, q, bytes, MPI_BYTE, (r + 1) % n, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		}
	}
	free(s);
	free(q);
	MPI_Finalize();
	return 0;
}
`

// placeWrap runs one rank on the node Hydra assigned it from the machine
// file: Hydra's fork launcher starts every "node" here and tells each rank
// its host in MPIR_CVAR_CH3_INTERFACE_HOSTNAME, which becomes the rank's
// NETLOOM_NODE (and is unset, since the names do not resolve).
const placeWrap = `#!/bin/sh
NETLOOM_NODE=$MPIR_CVAR_CH3_INTERFACE_HOSTNAME
export NETLOOM_NODE
unset MPIR_CVAR_CH3_INTERFACE_HOSTNAME
exec "$@"
`

// fakeSSH stands in for ssh when Open MPI starts its daemons on the
// rankfile's named nodes: it runs the command here, whatever the host,
// with a temporary directory of the host's own, as a real node has (the
// daemons, all on this machine, raced making one session directory in
// /tmp once: "mkdir ... /tmp/ompi.vm.0/jf.N/0: No such file or directory").
const fakeSSH = `#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in -*) shift;; *) break;; esac; done
TMPDIR="$(dirname "$0")/tmp-$1"
export TMPDIR
mkdir -p "$TMPDIR"
shift
exec sh -c "$*"
`

type placeCost struct {
	InterNodeBytes uint64 `json:"inter_node_bytes"`
	ByteHops       uint64 `json:"byte_hops"`
	HeaviestLink   *struct {
		From  fabric.PortRef
		Bytes uint64
	} `json:"heaviest_link"`
	Links []struct {
		From  fabric.PortRef
		Bytes uint64
	}
}

type placeAdvice struct {
	Job           string
	Ranks         int
	Method        string
	NothingToGain bool `json:"nothing_to_gain"`
	Reason        string
	Advice        *placeCost
	AsRan         *placeCost `json:"as_ran"`
	RoundRobin    *placeCost `json:"round_robin"`
	Random        *placeCost
	Mapping       []struct {
		Rank int
		Node string
		Core int
	}
}

// placeRig is a daemon on an ibsim fat tree and MPICH jobs whose ranks sit
// on the nodes a machine file names.
type placeRig struct {
	t               *testing.T
	f               *ibsim.Fabric
	d               *daemon
	agent, db, work string
	prog, wrap, lib string
}

func (p *placeRig) run(id string, machinefile string, np int, args ...string) {
	p.t.Helper()
	cmd := exec.Command(netloomBin, append([]string{"run", "--quiet", "--daemon", p.agent, "--interval", "200ms", "--job-id", id,
		"--lib", p.lib, "--", "mpiexec.mpich", "-launcher", "fork", "-f", machinefile, "-n", strconv.Itoa(np),
		"sh", p.wrap, p.prog}, args...)...)
	cmd.Dir = p.work
	if out, err := cmd.CombinedOutput(); err != nil {
		p.t.Fatalf("job %s: %v\n%s", id, err, out)
	}
}

// attributed waits until the daemon attributed all the job's inter-node
// bytes, and returns its link directions' bytes.
func (p *placeRig) attributed(id string, interNode uint64) map[fabric.PortRef]uint64 {
	p.t.Helper()
	var j struct {
		State       string
		InterNode   struct{ Bytes uint64 } `json:"inter_node"`
		Attribution *struct{ Bytes uint64 }
	}
	waitAPI(p.t, p.d, 60*time.Second, "job "+id+" finished and attributed", func() bool {
		return p.d.get("/api/v1/jobs/"+id, &struct{ Job any }{&j}) == 200 && j.State == "finished" &&
			j.InterNode.Bytes == interNode && j.Attribution != nil && j.Attribution.Bytes == interNode
	})
	var links struct {
		Links []struct {
			From  fabric.PortRef
			Bytes uint64
		}
	}
	if code := p.d.get("/api/v1/jobs/"+id+"/links?limit=1000", &links); code != 200 {
		p.t.Fatalf("job %s links: %d", id, code)
	}
	out := map[fabric.PortRef]uint64{}
	for _, l := range links.Links {
		out[l.From] += l.Bytes
	}
	return out
}

// place runs netloom place on a stored job; it returns the JSON advice,
// stderr and the exit status.
func (p *placeRig) place(args ...string) (*placeAdvice, string, int) {
	p.t.Helper()
	cmd := exec.Command(netloomBin, append([]string{"place", "--db", p.db}, args...)...)
	cmd.Dir = p.work
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		code = -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
	}
	var a placeAdvice
	if code == 0 && strings.Contains(strings.Join(args, " "), "--json") {
		if err := json.Unmarshal([]byte(out.String()), &a); err != nil {
			p.t.Fatalf("netloom place %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
	}
	return &a, errb.String(), code
}

func machineFile(t *testing.T, dir, name string, nodes ...string) string {
	t.Helper()
	var b strings.Builder
	for _, n := range nodes {
		fmt.Fprintf(&b, "%s:1\n", n)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPlace: a ring halo exchange whose 8 ranks were started in a
// scrambled order over 4 named nodes of an ibsim fat tree (two on one leaf
// switch, two on another), read by netloom serve --fabric ib. netloom place
// advises a placement; the job re-run with the advice's machine file has
// exactly the inter-node bytes and link loads the advice predicted, and
// fewer than the scrambled run and round-robin. The rankfile runs under
// mpirun --rankfile. An all-to-all gets no worse advice; a job on one node
// gets "nothing to gain"; bad inputs get clear errors.
func TestPlace(t *testing.T) {
	if _, err := exec.LookPath("mpiexec.mpich"); err != nil {
		t.Skip("MPICH not installed")
	}
	f, _ := startFabric(t, 16, 8)
	buildAgent(t)
	m := impls(t)[1]
	needMPI(t, m)
	work := t.TempDir()
	src := filepath.Join(work, "place.c")
	wrap := filepath.Join(work, "wrap.sh")
	ssh := filepath.Join(work, "fakessh")
	for path, text := range map[string]string{src: placeProg, wrap: placeWrap, ssh: fakeSSH} {
		if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	db := filepath.Join(work, "netloom.db")
	d, agent := serve(t, f.Dir, f.Env(), "--fabric", "ib", "--db", db, "--agent-listen", "127.0.0.1:0", "--agent-address-file", "-",
		"--sweep-interval", "300ms", "--discover-interval", "5s", "--job-timeout", "20s")
	waitAPI(t, d, 60*time.Second, "two sweeps with routes", func() bool {
		var st struct {
			Sweep  struct{ Count int } `json:"sweep"`
			Routes bool
		}
		return d.get("/api/v1/status", &st) == 200 && st.Sweep.Count >= 2 && st.Routes
	})
	p := &placeRig{t: t, f: f, d: d, agent: agent, db: db, work: work, prog: compile(t, m, src), wrap: wrap, lib: m.lib}

	// n1, n2 share a leaf switch, as do n5, n6; the ring's neighbours never
	// share a node.
	const bytes, iter = 100000, 5
	scrambled := machineFile(t, work, "scrambled", "n1", "n5", "n2", "n6", "n1", "n5", "n2", "n6")
	p.run("place-scrambled", scrambled, 8, "ring", strconv.Itoa(bytes), strconv.Itoa(iter))
	ranLinks := p.attributed("place-scrambled", 8*2*bytes*iter)

	a, stderr, code := p.place("place-scrambled", "--format", "mpich", "-o", "machinefile", "--json")
	if code != 0 {
		t.Fatalf("netloom place: exit status %d\n%s", code, stderr)
	}
	if a.AsRan == nil || a.AsRan.InterNodeBytes != 8*2*bytes*iter {
		t.Fatalf("as ran: %+v; want all %d bytes between nodes", a.AsRan, 8*2*bytes*iter)
	}
	// As ran, the prediction is what the daemon attributed.
	checkLinks(t, "the scrambled run", ranLinks, a.AsRan)
	if a.Advice.InterNodeBytes >= a.AsRan.InterNodeBytes || a.Advice.ByteHops >= a.AsRan.ByteHops ||
		a.Advice.ByteHops >= a.RoundRobin.ByteHops || a.Advice.InterNodeBytes >= a.RoundRobin.InterNodeBytes {
		t.Errorf("advice %+v; as ran %+v, round-robin %+v: want fewer inter-node bytes and bytes x hops", a.Advice, a.AsRan, a.RoundRobin)
	}
	// The ring's best: neighbour pairs share nodes, the spine is crossed twice.
	if a.Advice.InterNodeBytes != 4*2*bytes*iter {
		t.Errorf("advice: %d inter-node bytes, want %d", a.Advice.InterNodeBytes, 4*2*bytes*iter)
	}
	mf, err := os.ReadFile(filepath.Join(work, "machinefile"))
	if err != nil {
		t.Fatal(err)
	}

	// The API gives the same advice and file.
	var api struct {
		placeAdvice
		File struct{ Format, Name, Content string }
	}
	if code := d.get("/api/v1/jobs/place-scrambled/placement?format=mpich", &api); code != 200 || api.File.Content != string(mf) ||
		api.Advice == nil || api.Advice.ByteHops != a.Advice.ByteHops || api.AsRan.ByteHops != a.AsRan.ByteHops || api.File.Name != "machinefile" {
		t.Errorf("GET placement: %d, file %+v, advice %+v; the CLI's machine file:\n%s", code, api.File, api.Advice, mf)
	}
	var apiErr struct{ Error string }
	if code := d.get("/api/v1/jobs/place-scrambled/placement?nodes=n1,n2", &apiErr); code != 400 || !strings.Contains(apiErr.Error, "4 cores for 8 ranks") {
		t.Errorf("GET placement?nodes=n1,n2: %d %q; want 400 naming the cores", code, apiErr.Error)
	}
	if code := d.get("/api/v1/jobs/no-such-job/placement", &apiErr); code != 404 {
		t.Errorf("GET placement of an unknown job: %d %q", code, apiErr.Error)
	}

	// The re-run with the advice's machine file (accepted by MPICH's -f).
	p.run("place-advised", filepath.Join(work, "machinefile"), 8, "ring", strconv.Itoa(bytes), strconv.Itoa(iter))
	advisedLinks := p.attributed("place-advised", a.Advice.InterNodeBytes)
	checkLinks(t, "the advised re-run", advisedLinks, a.Advice)
	var nodes struct {
		Nodes []struct {
			Node  string
			Ranks []int
		}
	}
	d.get("/api/v1/jobs/place-advised/nodes", &nodes)
	for _, n := range nodes.Nodes {
		for _, r := range n.Ranks {
			if a.Mapping[r].Node != n.Node {
				t.Errorf("re-run: rank %d ran on %s, the advice says %s (machine file:\n%s)", r, n.Node, a.Mapping[r].Node, mf)
			}
		}
	}

	// The same advice as a rankfile and a Slurm host file.
	for _, format := range []string{"openmpi", "slurm"} {
		if _, stderr, code := p.place("place-scrambled", "--format", format, "-o", format+".txt"); code != 0 {
			t.Fatalf("netloom place --format %s: %d\n%s", format, code, stderr)
		}
	}
	rankfile, _ := os.ReadFile(filepath.Join(work, "openmpi.txt"))
	hostfile, _ := os.ReadFile(filepath.Join(work, "slurm.txt"))
	hosts := strings.Fields(string(hostfile))
	ranks := regexp.MustCompile(`(?m)^rank (\d+)=(\S+) slot=(\d+)$`).FindAllStringSubmatch(string(rankfile), -1)
	if len(ranks) != 8 || len(hosts) != 8 {
		t.Fatalf("rankfile:\n%s\nhost file:\n%s", rankfile, hostfile)
	}
	for i, rk := range ranks {
		if rk[1] != strconv.Itoa(i) || rk[2] != a.Mapping[i].Node || hosts[i] != a.Mapping[i].Node || rk[3] != strconv.Itoa(a.Mapping[i].Core) {
			t.Errorf("rank %d: rankfile %q, host file %q; advice %+v", i, rk[0], hosts[i], a.Mapping[i])
		}
	}
	// Open MPI accepts the rankfile: it starts a daemon per named node
	// (through the ssh stand-in), and binds each rank to its slot.
	if _, err := exec.LookPath("mpirun.openmpi"); err == nil {
		out, err := exec.Command("mpirun.openmpi", "--allow-run-as-root", "--mca", "plm_rsh_agent", ssh, "--rankfile", filepath.Join(work, "openmpi.txt"),
			"-np", "8", "sh", "-c", `echo "rank $OMPI_COMM_WORLD_RANK daemon ${OMPI_MCA_orte_local_daemon_uri%%;*} cpus $(grep Cpus_allowed_list /proc/self/status | cut -f2)"`).CombinedOutput()
		if err != nil {
			t.Fatalf("mpirun --rankfile: %v\n%s\nrankfile:\n%s", err, out, rankfile)
		}
		daemons := map[string]string{} // node -> daemon
		lines := regexp.MustCompile(`(?m)^rank (\d+) daemon (\S+) cpus (\S+)$`).FindAllStringSubmatch(string(out), -1)
		if len(lines) != 8 {
			t.Fatalf("mpirun --rankfile printed:\n%s", out)
		}
		for _, l := range lines {
			r, _ := strconv.Atoi(l[1])
			node := a.Mapping[r].Node
			if prev, ok := daemons[node]; ok && prev != l[2] {
				t.Errorf("rank %d on %s ran under daemon %s, another rank of %s under %s", r, node, l[2], node, prev)
			}
			daemons[node] = l[2]
			if l[3] != strconv.Itoa(a.Mapping[r].Core) {
				t.Errorf("rank %d bound to CPUs %s, the rankfile says slot %d", r, l[3], a.Mapping[r].Core)
			}
		}
		if len(daemons) != 4 {
			t.Errorf("%d Open MPI daemons for 4 nodes: %v", len(daemons), daemons)
		}
	}

	t.Run("AllToAll", func(t *testing.T) {
		p := *p
		p.t = t
		mf := machineFile(t, work, "a2a", "n1", "n1", "n5", "n5", "n2", "n2", "n6", "n6")
		p.run("place-a2a", mf, 8, "all", "10000", "2")
		p.attributed("place-a2a", 8*6*10000*2)
		a, stderr, code := p.place("place-a2a", "--json")
		if code != 0 {
			t.Fatalf("netloom place: %d\n%s", code, stderr)
		}
		if a.AsRan == nil || a.Advice.ByteHops > a.AsRan.ByteHops || a.Advice.InterNodeBytes > a.AsRan.InterNodeBytes {
			t.Errorf("all-to-all: advice %+v is worse than as ran %+v", a.Advice, a.AsRan)
		}
	})
	t.Run("OneNode", func(t *testing.T) {
		p := *p
		p.t = t
		mf := machineFile(t, work, "one", "n3", "n3", "n3", "n3")
		p.run("place-one", mf, 4, "ring", "10000", "2")
		var a *placeAdvice
		var stderr string
		var code int
		// Nothing crosses a link: wait for the finished job in the store.
		waitAPI(t, d, 60*time.Second, "the one-node job stored", func() bool {
			a, stderr, code = p.place("place-one", "--json")
			return code == 0
		})
		if code != 0 || !a.NothingToGain || a.Advice.InterNodeBytes != 0 {
			t.Errorf("one node: exit status %d, %+v\n%s", code, a, stderr)
		}
		cmd := exec.Command(netloomBin, "place", "--db", db, "place-one", "-o", filepath.Join(work, "one.rankfile"))
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "nothing to gain") {
			t.Errorf("one node, text: %v\n%s", err, out)
		}
	})
	t.Run("BadInputs", func(t *testing.T) {
		p := *p
		p.t = t
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"no-such-job"}, `job "no-such-job": no such job in db`},
			{[]string{"place-scrambled", "--nodes", "n1,n2"}, "the 2 nodes have 4 cores for 8 ranks"},
			{[]string{"place-scrambled", "--nodes", "n1,n2,x7,n6"}, `nodes not on the fabric: node "x7"`},
			{[]string{"place-scrambled", "--nodes", "n[1-"}, "nodes: hostlist"},
		} {
			_, stderr, code := p.place(c.args...)
			if code != 1 || !strings.Contains(stderr, c.want) {
				t.Errorf("netloom place %s: exit status %d, %q; want 1 and %q", strings.Join(c.args, " "), code, stderr, c.want)
			}
		}
		_, stderr, code := p.place("place-scrambled", "--format", "lsf")
		if code != 2 || !strings.Contains(stderr, "--format") {
			t.Errorf("--format lsf: exit status %d, %q; want a usage error", code, stderr)
		}
	})
}

// checkLinks compares the link directions the daemon attributed a run with
// a placement's predicted ones.
func checkLinks(t *testing.T, what string, got map[fabric.PortRef]uint64, want *placeCost) {
	t.Helper()
	pred := map[fabric.PortRef]uint64{}
	for _, l := range want.Links {
		pred[l.From] += l.Bytes
	}
	if len(pred) == 0 || !mapsEqual(got, pred) {
		t.Errorf("%s: the daemon attributed %v, the advice predicted %v", what, got, pred)
	}
	var heaviest uint64
	for _, b := range got {
		heaviest = max(heaviest, b)
	}
	if want.HeaviestLink == nil || want.HeaviestLink.Bytes != heaviest {
		t.Errorf("%s: heaviest attributed direction %d bytes, predicted %+v", what, heaviest, want.HeaviestLink)
	}
}
