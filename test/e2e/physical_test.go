package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
)

// physicalNodes are the fabric hosts the physical test's ranks run on, two
// ranks each: n1, n2 share a leaf switch of the 16-host fat tree, as do n5, n6.
var physicalNodes = []string{"n1", "n2", "n5", "n6"}

// physicalWrap puts Open MPI rank r on physicalNodes[r/2].
const physicalWrap = `#!/bin/sh
set -- n1 n2 n5 n6 "$@"
i=$((OMPI_COMM_WORLD_RANK / 2))
eval NETLOOM_NODE=\${$((i + 1))}
export NETLOOM_NODE
shift 4
exec "$@"
`

// TestPhysicalTraffic runs a program of bcast, reduce, allreduce, alltoall,
// alltoallv, gather, point-to-point, puts and gets on 8 Open MPI ranks over 4
// named hosts of an ibsim fat tree, under netloom run and a daemon reading the
// fabric. Open MPI's own monitoring files of a run without the agent are the
// oracle: each rank's physical counts per peer equal their E, I, S and R
// lines; the job says traffic_model physical; and every link direction on the
// routes ibtracert reports gets exactly the bytes that crossed it (E, I and
// S from the sender's node, R from the target's), which the application's
// own view (a bcast's root sending to everyone) gets wrong. Under MPICH the
// same job is logical.
func TestPhysicalTraffic(t *testing.T) {
	f, _ := startFabric(t, 16, 8)
	buildAgent(t)
	m := impls(t)[0]
	needMPI(t, m)
	work := t.TempDir()
	wrap := filepath.Join(work, "wrap.sh")
	if err := os.WriteFile(wrap, []byte(physicalWrap), 0o755); err != nil {
		t.Fatal(err)
	}
	prog := compile(t, m, "testdata/mpi/physical.c")
	const np = 8
	mpirun := func(dir string) []string {
		return []string{"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", strconv.Itoa(np),
			"--mca", "pml_monitoring_enable", "2", "--mca", "pml_monitoring_enable_output", "3",
			"--mca", "pml_monitoring_filename", filepath.Join(dir, "prof"), "sh", wrap, prog}
	}
	run := func(argv ...string) {
		t.Helper()
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "physical done on 8 ranks") {
			t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
		}
	}
	// The oracle: Open MPI's monitoring of a run without the agent.
	plain := t.TempDir()
	run(mpirun(plain)...)
	oracle := monitoringOutput(t, plain, np)

	d, agent := serve(t, f.Dir, f.Env(), "--fabric", "ib", "--db", filepath.Join(work, "netloom.db"), "--agent-listen", "127.0.0.1:0",
		"--agent-address-file", "-", "--sweep-interval", "300ms", "--discover-interval", "5s", "--job-timeout", "20s")
	waitAPI(t, d, 60*time.Second, "two sweeps with routes", func() bool {
		var st struct {
			Sweep  struct{ Count int } `json:"sweep"`
			Routes bool
		}
		return d.get("/api/v1/status", &st) == 200 && st.Sweep.Count >= 2 && st.Routes
	})
	withAgent := t.TempDir()
	run(append([]string{netloomBin, "run", "--quiet", "--physical", "--daemon", agent, "--interval", "200ms", "--job-id", "phys-ompi", "--lib", m.lib, "--"},
		mpirun(withAgent)...)...)
	// Open MPI's files are the same with the agent.
	without, with := monitoringFiles(t, plain, np), monitoringFiles(t, withAgent, np)
	for r := range np {
		if with[r] != without[r] {
			t.Errorf("rank %d's monitoring file differs with the agent:\n%s\nwithout:\n%s", r, with[r], without[r])
		}
	}

	// Per node pair, the bytes that crossed from one node to the other.
	node := func(r int) string { return physicalNodes[r/2] }
	pairs := map[[2]string]uint64{}
	var total uint64
	for kind, lines := range oracle {
		for k, tr := range lines {
			src, dst := node(k[0]), node(k[1])
			switch kind {
			case "E", "I", "S":
			case "R": // a get: the target's adapter sent the data
				src, dst = dst, src
			default:
				continue
			}
			if src != dst {
				pairs[[2]string{src, dst}] += tr.bytes
				total += tr.bytes
			}
		}
	}

	var j struct {
		State        string
		TrafficModel string `json:"traffic_model"`
		Attribution  *struct{ Bytes uint64 }
	}
	waitAPI(t, d, 60*time.Second, "the job finished and attributed", func() bool {
		return d.get("/api/v1/jobs/phys-ompi", &struct{ Job any }{&j}) == 200 && j.State == "finished" &&
			j.Attribution != nil && j.Attribution.Bytes == total
	})
	if j.TrafficModel != "physical" {
		t.Errorf("traffic_model %q, want physical", j.TrafficModel)
	}
	// Each rank's physical counts, peer by peer, are Open MPI's lines.
	for r := range np {
		var p struct {
			Peers []struct {
				Peer      int
				Monitored *struct {
					P2P, Coll, RMA, Fetched struct{ Bytes, Msgs uint64 }
				}
			}
		}
		if code := d.get(fmt.Sprintf("/api/v1/jobs/phys-ompi/processes/%d", r), &struct{ Process any }{&p}); code != 200 {
			t.Fatalf("rank %d: %d", r, code)
		}
		got := map[string]map[[2]int]traffic{}
		for _, x := range p.Peers {
			if x.Monitored == nil {
				t.Errorf("rank %d -> %d: no physical counts", r, x.Peer)
				continue
			}
			for kind, c := range map[string]struct{ Bytes, Msgs uint64 }{"E": x.Monitored.P2P, "I": x.Monitored.Coll, "S": x.Monitored.RMA, "R": x.Monitored.Fetched} {
				if c.Msgs > 0 {
					if got[kind] == nil {
						got[kind] = map[[2]int]traffic{}
					}
					got[kind][[2]int{r, x.Peer}] = traffic{c.Bytes, c.Msgs}
				}
			}
		}
		for _, kind := range []string{"E", "I", "S", "R"} {
			want := map[[2]int]traffic{}
			for k, v := range oracle[kind] {
				if k[0] == r {
					want[k] = v
				}
			}
			if fmt.Sprint(got[kind]) != fmt.Sprint(want) && !(len(got[kind]) == 0 && len(want) == 0) {
				t.Errorf("rank %d %s: netloom %v, Open MPI's monitoring %v", r, kind, got[kind], want)
			}
		}
	}

	// Every link direction gets the bytes whose route crosses it.
	topo := discoverWithTool(t, f)
	want := map[fabric.PortRef]uint64{}
	for k, b := range pairs {
		s, err := topo.EndpointLID(k[0])
		if err != nil {
			t.Fatal(err)
		}
		dl, err := topo.EndpointLID(k[1])
		if err != nil {
			t.Fatal(err)
		}
		out, err := f.Run(context.Background(), "ibtracert", strconv.Itoa(int(s)), strconv.Itoa(int(dl)))
		if err != nil {
			t.Fatal(err)
		}
		for _, hop := range parseTracert(t, string(out)) {
			want[hop] += b
		}
	}
	var links struct {
		TrafficModel string `json:"traffic_model"`
		Links        []struct {
			From  fabric.PortRef
			Bytes uint64
		}
	}
	if code := d.get("/api/v1/jobs/phys-ompi/links?limit=1000", &links); code != 200 {
		t.Fatalf("links: %d", code)
	}
	got := map[fabric.PortRef]uint64{}
	for _, l := range links.Links {
		got[l.From] += l.Bytes
	}
	if !mapsEqual(got, want) || links.TrafficModel != "physical" {
		t.Errorf("link directions (%s): netloom %v, want %v", links.TrafficModel, got, want)
	}
	// The application's view puts other bytes between the nodes.
	var logical struct {
		InterNode struct{ Bytes uint64 } `json:"inter_node"`
	}
	d.get("/api/v1/jobs/phys-ompi", &struct{ Job any }{&logical})
	if logical.InterNode.Bytes == total {
		t.Errorf("the application's inter-node bytes equal the library's (%d): the program does not tell them apart", total)
	}
	t.Logf("inter-node bytes: %d as the library sent them, %d as the application called", total, logical.InterNode.Bytes)

	// netloom run's default leaves Open MPI's monitoring off (it costs
	// small messages a fifth to a third of their rate: bench/agent/small.sh):
	// the same job is then logical.
	run(netloomBin, "run", "--quiet", "--daemon", agent, "--interval", "200ms", "--job-id", "phys-default", "--lib", m.lib, "--",
		"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", strconv.Itoa(np), "sh", wrap, prog)
	var dj struct {
		State        string
		TrafficModel string `json:"traffic_model"`
	}
	waitAPI(t, d, 60*time.Second, "the default job finished", func() bool {
		return d.get("/api/v1/jobs/phys-default", &struct{ Job any }{&dj}) == 200 && dj.State == "finished"
	})
	if dj.TrafficModel != "logical" {
		t.Errorf("netloom run without --physical: traffic_model %q, want logical", dj.TrafficModel)
	}

	// MPICH tells nothing of what it sends: the job is logical.
	mp := impls(t)[1]
	if _, err := exec.LookPath(mp.launch); err == nil {
		mprog := compile(t, mp, "testdata/mpi/physical.c")
		out, err := exec.Command(netloomBin, "run", "--quiet", "--daemon", agent, "--interval", "200ms", "--job-id", "phys-mpich", "--lib", mp.lib,
			"--", mp.launch, "-n", "4", mprog).CombinedOutput()
		if err != nil {
			t.Fatalf("MPICH job: %v\n%s", err, out)
		}
		var mj struct {
			State        string
			TrafficModel string `json:"traffic_model"`
		}
		waitAPI(t, d, 60*time.Second, "the MPICH job finished", func() bool {
			return d.get("/api/v1/jobs/phys-mpich", &struct{ Job any }{&mj}) == 200 && mj.State == "finished"
		})
		if mj.TrafficModel != "logical" {
			t.Errorf("MPICH job: traffic_model %q, want logical", mj.TrafficModel)
		}
	}
}
