package model

import (
	"compress/gzip"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netloom/netloom/internal/analysis"
	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/fabric/sim"
)

func TestParseNetwork(t *testing.T) {
	for in, want := range map[string]Network{
		"perfect":                        {Name: "perfect network", Perfect: true},
		"x2":                             {Name: "x2 bandwidth", Factor: 2, Latency: -1},
		"x0.5":                           {Name: "x0.5 bandwidth", Factor: 0.5, Latency: -1},
		"bandwidth=100Gb/s":              {Name: "bandwidth=100Gb/s", Bandwidth: 12.5e9, Latency: -1},
		"bandwidth=25GB/s,latency=600ns": {Name: "bandwidth=25GB/s,latency=600ns", Bandwidth: 25e9, Latency: 600e-9},
		"latency=2us":                    {Name: "latency=2us", Latency: 2e-6},
	} {
		got, err := ParseNetwork(in)
		if err != nil || got != want {
			t.Errorf("ParseNetwork(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"x0", "x-1", "xfast", "fast", "bandwidth=12", "bandwidth=-1GB/s", "latency=soon", "speed=1GB/s", "",
		"xNaN", "xnan", "xInf", "x+Inf", "x1e300", "x1e-300", "x1001", "bandwidth=NaNGB/s", "bandwidth=InfGB/s", "bandwidth=1e300GB/s",
		"bandwidth=0.1b/s", "latency=1000h", "latency=11s"} {
		if _, err := ParseNetwork(bad); err == nil {
			t.Errorf("ParseNetwork(%q) accepted", bad)
		}
	}
}

func TestHostsOf(t *testing.T) {
	got, err := HostsOf("rank 1=n2 slot=0\nrank 0=n1 slot=1\n# comment\nrank 2=n1 slot=0\n", 3)
	if err != nil || strings.Join(got, ",") != "n1,n2,n1" {
		t.Errorf("rankfile: %v, %v", got, err)
	}
	got, err = HostsOf("n1:2\nn5\nn6:1\n", 4)
	if err != nil || strings.Join(got, ",") != "n1,n1,n5,n6" {
		t.Errorf("machine file: %v, %v", got, err)
	}
	for _, bad := range []string{"n1:2\n", "rank 7=n1\nn1:3", "n1:x\nn2:9", "rank 0=\nn1:4"} {
		if _, err := HostsOf(bad, 4); err == nil {
			t.Errorf("HostsOf(%q) accepted", bad)
		}
	}
}

// traceJob writes ranks' traces (SMPI actions after "R init", before
// "R finalize") as the agent does, and returns the job.
func traceJob(t *testing.T, nodes []string, actions [][]string) *Job {
	t.Helper()
	dir := t.TempDir()
	j := &Job{ID: "t", Dir: dir, Ranks: len(actions), Nodes: nodes}
	for r, acts := range actions {
		path := filepath.Join(dir, fmt.Sprintf("rank-%d.ti.gz", r))
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		z := gzip.NewWriter(f)
		fmt.Fprintf(z, "%d init\n", r)
		for _, a := range acts {
			fmt.Fprintf(z, "%d %s\n", r, a)
			j.Events++
		}
		fmt.Fprintf(z, "%d finalize\n", r)
		if err := z.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		j.Traces = append(j.Traces, path)
	}
	if err := j.CheckTraces(); err != nil {
		t.Fatal(err)
	}
	return j
}

// replayWhole replays every action of the job's traces on the platform.
func replayWhole(ctx context.Context, t *testing.T, j *Job, p *Platform, hostOf []string, scenario string, perFunction bool) (*Prediction, error) {
	t.Helper()
	traces, err := j.Prepare(t.TempDir(), 0)
	if err != nil {
		return nil, err
	}
	defer traces.Close()
	return traces.Replay(ctx, j, p, hostOf, scenario, perFunction)
}

func needSmpirun(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath(Smpirun); err != nil {
		if testing.Short() {
			t.Skip("SimGrid's smpirun not installed")
		}
		t.Fatalf("SimGrid's smpirun not installed (scripts/install-deps.sh installs simgrid): %v", err)
	}
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol*math.Abs(want) }

// On a simulated fat tree with one host link slowed to 1X SDR, two
// independent pairs exchange the same bytes: the pair whose route crosses
// that link takes its time, the other its own links' time; a perfect
// network takes neither; twice the bandwidth halves the transfer.
func TestReplayFollowsLinkSpeeds(t *testing.T) {
	needSmpirun(t)
	topo, err := sim.GenerateFatTree(16, 8, 0)
	if err != nil {
		t.Fatal(err)
	}
	nm, err := analysis.NewNodeMap(topo, nil)
	if err != nil {
		t.Fatal(err)
	}
	h2, _ := topo.FindNode("n2")
	slow := -1
	for i, l := range topo.Links {
		if l.A.GUID == h2.GUID || l.B.GUID == h2.GUID {
			topo.Links[i].Width, topo.Links[i].Speed = "1X", "SDR"
			slow = i
		}
	}
	if slow < 0 {
		t.Fatal("n2 has no link")
	}
	lft, _, err := sim.ComputeRoutes(context.Background(), topo)
	if err != nil {
		t.Fatal(err)
	}
	routes := fabric.NewRoutes(topo, lft)
	fast := topo.Links[0]
	for _, l := range topo.Links {
		if l.Width == "4X" {
			fast = l
			break
		}
	}
	const bytes, iters = 50e6, 4
	var actions [][]string
	nodes := []string{"n1", "n2", "n5", "n6"}
	for r := range 4 {
		peer := r ^ 1
		acts := []string{"compute 1e6"} // 1 ms at the hosts' 1 Gflop/s
		for i := range iters {          // posted together, one tag each
			acts = append(acts, fmt.Sprintf("irecv %d %d %d", peer, i, int(bytes)), fmt.Sprintf("isend %d %d %d", peer, i, int(bytes)))
		}
		for i := range iters {
			acts = append(acts, fmt.Sprintf("wait %d %d %d", peer, r, i), fmt.Sprintf("wait %d %d %d", r, peer, i))
		}
		actions = append(actions, acts)
	}
	j := traceJob(t, nodes, actions)
	lo := Link{ID: "lo", Bandwidth: 10e9, Latency: 3e-7}
	p, err := FromRoutes("sim", routes, nodes, Cores(nodes), nm.LID, 1e-7, lo)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	run := func(p *Platform) *Prediction {
		t.Helper()
		pr, err := replayWhole(ctx, t, j, p, nodes, p.Name, true)
		if err != nil {
			t.Fatal(err)
		}
		return pr
	}
	asRan := run(p)
	slowBW, fastBW := topo.Links[slow].Capacity(), fast.Capacity()
	// Both directions at once on split-duplex links: each direction takes
	// iters x bytes at the slowest link of its route.
	if want := iters * bytes / slowBW; !near(asRan.RankMPI[0], want, 0.1) || !near(asRan.RankMPI[1], want, 0.1) {
		t.Errorf("pair across the 1X SDR link: MPI %v s, want %.3f s each", asRan.RankMPI[:2], want)
	}
	if want := iters * bytes / fastBW; !near(asRan.RankMPI[2], want, 0.1) || !near(asRan.RankMPI[3], want, 0.1) {
		t.Errorf("pair on 4X links: MPI %v s, want %.3f s each", asRan.RankMPI[2:], want)
	}
	if want := 1e-3 + iters*bytes/slowBW; !near(asRan.Elapsed, want, 0.1) {
		t.Errorf("elapsed %.4f s, want %.4f", asRan.Elapsed, want)
	}
	t.Logf("as ran: elapsed %.4f s, MPI per rank %v (1X SDR %.3g B/s, 4X %.3g B/s)", asRan.Elapsed, asRan.RankMPI, slowBW, fastBW)
	perfect := run(Network{Name: "perfect", Perfect: true}.Apply(p))
	if perfect.Elapsed > 1.01e-3 || perfect.MPISeconds > 1e-4 {
		t.Errorf("perfect network: elapsed %g s, MPI %g s; want the compute alone", perfect.Elapsed, perfect.MPISeconds)
	}
	x2 := run(Network{Name: "x2", Factor: 2}.Apply(p))
	if !near(x2.RankMPI[0], asRan.RankMPI[0]/2, 0.1) {
		t.Errorf("x2: rank 0's MPI %g s, want half of %g", x2.RankMPI[0], asRan.RankMPI[0])
	}
	quick, err := replayWhole(ctx, t, j, p, nodes, "elapsed only", false)
	if err != nil || quick.Elapsed != asRan.Elapsed || quick.PerFunction || quick.RankMPI != nil {
		t.Errorf("elapsed only: %+v, %v; want the elapsed %g alone", quick, err, asRan.Elapsed)
	}
	if b := j.InterNodeBytes(nodes); b != 4*iters*bytes {
		t.Errorf("inter-node bytes %d, want %d", b, uint64(4*iters*bytes))
	}
	if b := j.InterNodeBytes([]string{"n1", "n1", "n5", "n5"}); b != 0 {
		t.Errorf("pairs on one node each: %d inter-node bytes", b)
	}
}

func TestCheckTracesRefuses(t *testing.T) {
	for name, acts := range map[string][]string{
		"any source":   {"recv -1 0 10"},
		"out of range": {"send 9 0 10"},
		"bad size":     {"send 1 0 lots"},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "rank-0.ti.gz")
		f, _ := os.Create(path)
		z := gzip.NewWriter(f)
		for _, a := range acts {
			fmt.Fprintf(z, "0 %s\n", a)
		}
		z.Close()
		f.Close()
		j := &Job{Ranks: 2, Traces: []string{path, path}}
		if err := j.CheckTraces(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzCheckActions feeds trace text that the agent did not write to the
// checker `netloom model` runs before SMPI: it must accept or refuse every
// input without a panic, refusals naming the line, and count only sizes
// it could read.
func FuzzCheckActions(f *testing.F) {
	f.Add("0 init\n0 send 1 0 1024\n0 irecv 1 0 8\n0 wait 1 0 0\n0 compute 1e6\n0 allreduce 8 1e3\n0 finalize\n")
	f.Add("0 recv -1 0 10\n")
	f.Add("0 send 9 0 10\n")
	f.Add("0 send 1 0 lots\n")
	f.Add("1 send 0 0 1\n")
	f.Add("0 init\n" + strings.Repeat("0 compute 1e6\n0 irecv 1 0 8\n0 isend 1 0 8\n0 wait 1 0 0\n0 wait 0 1 0\n0 allreduce 8 0\n", 40) + "0 finalize\n")
	// hostile: more actions than the bound, a line longer than it, a binary file
	f.Add(strings.Repeat("0 compute 1\n", 600))
	f.Add("0 compute " + strings.Repeat("9", 600) + "\n")
	f.Add("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + strings.Repeat("\x00", 300))
	f.Fuzz(func(t *testing.T, text string) {
		sent := map[int]uint64{}
		var sh shaper
		lim := &actionLimit{max: 500, line: 256}
		err := checkActions(strings.NewReader(text), "rank-0.ti", 0, 2, sent, new(int), &sh, lim)
		if err == nil && (lim.n.Load() > 500 || strings.Count(text, "\n") > 500) {
			t.Errorf("accepted %d actions, more than the bound of 500", lim.n.Load())
		}
		for i, line := range strings.Split(text, "\n") {
			if err == nil && len(line) > 256 {
				t.Errorf("accepted line %d of %d bytes, more than the bound of 256", i+1, len(line))
			}
		}
		if err != nil && len(err.Error()) > 400 {
			t.Errorf("the error echoes %d bytes of the input", len(err.Error()))
		}
		if err == nil {
			// where the trace repeats, and whether the window may leave
			// its period out
			if got := sh.shape(); got.period > 0 {
				traffic(0, got.first)
				planWindow([]*shape{got, got}, 1)
			}
		}
		if err != nil && !strings.HasPrefix(err.Error(), "rank-0.ti") {
			t.Errorf("the error does not name the trace: %v", err)
		}
		for peer := range sent {
			if peer < 0 || peer >= 2 {
				t.Errorf("bytes counted for rank %d of 2", peer)
			}
		}
	})
}

// TestGroupsAndGain: the measured and replayed times per function compare
// under shared names (an MPI_Sendrecv measured against the isend, irecv
// and wait it replays as), and a what-if's gain is against the replay as
// it ran, not the measured run (issue 28: an imbalanced halo measured
// 20.68 s, replayed as ran 15.90 s, perfect 15.74 s: the network's gain
// is 1.0%, not 24%).
func TestGroupsAndGain(t *testing.T) {
	measured := groups(map[string]float64{"MPI_Sendrecv": 70.27, "MPI_Allreduce": 5, "MPI_Init": 0.5})
	replayed := groups(map[string]float64{"MPI_Isend": 1, "MPI_Irecv": 2, "MPI_Wait": 49, "MPI_Allreduce": 4})
	if measured[PointToPoint] != 70.27 || replayed[PointToPoint] != 52 || measured["MPI_Allreduce"] != 5 || replayed["MPI_Allreduce"] != 4 ||
		measured["MPI_Init"] != 0.5 || len(measured) != 3 || len(replayed) != 2 {
		t.Errorf("groups: measured %v, replayed %v", measured, replayed)
	}
	r := &Result{AsRan: &Prediction{Elapsed: 15.90}}
	if g := r.Gain(&Prediction{Elapsed: 15.74}); math.Abs(g-(-1.006)) > 0.001 {
		t.Errorf("gain of a perfect network: %.3f%%, want -1.006%% (against the replay as ran)", g)
	}
}
