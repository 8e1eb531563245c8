package e2e

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/test/ethlab"
)

// Attribution by what was seen (issue 44 item 3, docs/sflow.md): the ecmp
// lab (L3, two spines, the kernel hashing each TCP connection onto one)
// with every switch port exporting sFlow through a real pmacctd, and a
// daemon collecting it.

// sflowLab is the ecmp preset with every switch port exporting sFlow, a
// daemon collecting it, and test/ethlab's ring built for Open MPI.
type sflowLab struct {
	lab             *ethlab.Lab
	cfg             string
	d               *daemon
	agentAddr, prog string
	m               mpiImpl
}

// startSFlowLab starts the ecmp preset with every switch port exporting
// sFlow 1 in rate to a free UDP port of the management address, and a
// daemon collecting it there (with agents on the management network).
func startSFlowLab(t *testing.T, rate int) sflowLab {
	t.Helper()
	buildAgent(t)
	m := impls(t)[0]
	needMPI(t, m)
	prog := compile(t, m, filepath.Join(repoRoot(t), "test/ethlab/testdata/ring.c"))
	pc, err := net.ListenPacket("udp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	port := pc.LocalAddr().(*net.UDPAddr).Port
	pc.Close()
	lab := ethlab.StartT(t, ethlab.Preset("ecmp"), ethlab.Options{SFlow: fmt.Sprintf(":%d", port), SFlowRate: rate})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := lab.WaitLLDP(ctx); err != nil {
		t.Fatal(err)
	}
	cfg := ethConfig(t, lab, false, "", nil)
	d, agentAddr := serveEth(t, lab, cfg, "--sflow-listen", fmt.Sprintf("%s:%d", lab.MgmtAddr(), port))
	return sflowLab{lab: lab, cfg: cfg, d: d, agentAddr: agentAddr, prog: prog, m: m}
}

// ringJob runs test/ethlab's ring under the agent on two hosts (one rank
// each), as job id, and waits until the daemon has it finished.
func ringJob(t *testing.T, lab *ethlab.Lab, d *daemon, m mpiImpl, prog, agentAddr, id string, hosts []string, size, iters int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := lab.MPIRun(ctx, ethlab.RunSpec{Impl: m.name, Hosts: hosts, RanksPerHost: 1,
		Argv: []string{prog, fmt.Sprint(size), fmt.Sprint(iters)}, Dir: t.TempDir(),
		Env: []string{"LD_PRELOAD=" + m.lib, "NETLOOM_DAEMON=" + agentAddr, "NETLOOM_INTERVAL=1", "NETLOOM_JOB_ID=" + id}})
	if err != nil {
		t.Fatalf("mpirun %s: %v\n%s", id, err, out)
	}
	d.waitFor(func() bool {
		var j struct{ Job struct{ State string } }
		return d.get("/api/v1/jobs/"+id, &j) == 200 && j.Job.State == "finished"
	}, "job "+id+" finished")
}

// linkDir is one direction of GET /links/{link}/jobs.
type linkDir struct {
	From        fabric.PortRef `json:"from"`
	FromName    string         `json:"from_description"`
	ToName      string         `json:"to_description"`
	Measured    struct{ Bytes uint64 }
	Monitored   uint64   `json:"monitored_bytes"`
	Explained   *float64 `json:"explained_pct"`
	RouteModel  string   `json:"route_model"`
	Samples     uint64   `json:"split_samples"`
	ErrorPct    *float64 `json:"split_error_pct"`
	ObservedPct *float64 `json:"split_observed_pct"`
	Jobs        []struct {
		Job        string
		Bytes      uint64
		RouteModel string `json:"route_model"`
	}
}

// allDirections reads GET /links/{link}/jobs over [from, to] for every
// link of the daemon's fabric.
func allDirections(t *testing.T, d *daemon, from, to time.Time) []linkDir {
	t.Helper()
	var fab struct{ Links []struct{ ID string } }
	if code := d.get("/api/v1/fabric/links", &fab); code != 200 {
		t.Fatalf("fabric links: %d", code)
	}
	var out []linkDir
	for _, l := range fab.Links {
		var ans struct{ Directions []linkDir }
		path := fmt.Sprintf("/api/v1/links/%s/jobs?from=%s&to=%s", l.ID, from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
		if code := d.get(path, &ans); code != 200 {
			t.Fatalf("%s: %d", path, code)
		}
		out = append(out, ans.Directions...)
	}
	return out
}

// TestEthObservedSplit: a job whose TCP connections the kernel hashed
// onto one spine each way. With sFlow on every switch port (1 in 10), the
// bytes attributed to it per direction, split by the observed shares, are
// what the switch counters measured: explained within 95-105% on every
// direction that carried 10 MB or more (the even split read about 50% on
// the used spine), each such direction saying "sflow-observed" with its
// samples and sFlow's error bound. A second daemon on the same lab
// without a collector keeps the even split and says "ecmp-even".
func TestEthObservedSplit(t *testing.T) {
	sl := startSFlowLab(t, 10)
	lab, cfg, d, agentAddr, m, prog := sl.lab, sl.cfg, sl.d, sl.agentAddr, sl.m, sl.prog

	from := time.Now().Add(-time.Second)
	job := "obs-" + lab.ID
	ringJob(t, lab, d, m, prog, agentAddr, job, []string{"h1", "h3"}, 4<<20, 25)
	time.Sleep(snmpdCache + 3*time.Second) // the agents' caches, two sweeps
	to := time.Now()

	checked := 0
	for _, dir := range allDirections(t, d, from, to) {
		var mine uint64
		model := ""
		for _, j := range dir.Jobs {
			if j.Job == job {
				mine, model = j.Bytes, j.RouteModel
			}
		}
		t.Logf("%s -> %s: measured %d, job %d (%s), explained %.2f%%; direction: %s",
			dir.FromName, dir.ToName, dir.Measured.Bytes, mine, model, deref(dir.Explained), dir.RouteModel)
		if dir.Measured.Bytes < 10<<20 {
			continue
		}
		if strings.HasPrefix(dir.FromName, "h") || strings.HasPrefix(dir.ToName, "h") {
			if dir.RouteModel != "" || model != "" {
				t.Errorf("%s -> %s (a host link, on every path): route_model %q, job's %q; want none", dir.FromName, dir.ToName, dir.RouteModel, model)
			}
		}
		checked++
		if dir.Explained == nil || *dir.Explained < 95 || *dir.Explained > 105 {
			t.Errorf("%s -> %s: explained_pct %.2f of %d measured bytes (job %d), want 95..105",
				dir.FromName, dir.ToName, deref(dir.Explained), dir.Measured.Bytes, mine)
		}
		between := strings.HasPrefix(dir.FromName, "leaf") || strings.HasPrefix(dir.FromName, "spine")
		between = between && (strings.HasPrefix(dir.ToName, "leaf") || strings.HasPrefix(dir.ToName, "spine"))
		if !between {
			continue // a host link: one path, no split
		}
		if !strings.HasPrefix(dir.RouteModel, "sflow-observed (") || dir.Samples == 0 || dir.ErrorPct == nil {
			t.Errorf("%s -> %s: route_model %q, %d samples, error %v: want sflow-observed with its samples and error",
				dir.FromName, dir.ToName, dir.RouteModel, dir.Samples, dir.ErrorPct)
		} else if want := 196 / math.Sqrt(float64(dir.Samples)); *dir.ErrorPct < want*0.999 || *dir.ErrorPct > want*1.001 {
			t.Errorf("%s -> %s: split_error_pct %.3f for %d samples, want 196/sqrt(n) = %.3f", dir.FromName, dir.ToName, *dir.ErrorPct, dir.Samples, want)
		}
		if !strings.Contains(dir.RouteModel, fmt.Sprintf("%d samples", dir.Samples)) {
			t.Errorf("route_model %q does not say its %d samples", dir.RouteModel, dir.Samples)
		}
	}
	// h1 -> leaf1, leaf1 -> spine, spine -> leaf2, leaf2 -> h3 and back.
	if checked < 8 {
		t.Errorf("%d directions carried 10 MB or more, want 8 (4 each way)", checked)
	}

	// No collector: the even split, said.
	d2, agent2 := serveEth(t, lab, cfg)
	job2 := "even-" + lab.ID
	from2 := time.Now().Add(-time.Second)
	ringJob(t, lab, d2, m, prog, agent2, job2, []string{"h2", "h4"}, 4<<20, 10)
	time.Sleep(snmpdCache + 3*time.Second)
	evens := 0
	for _, dir := range allDirections(t, d2, from2, time.Now()) {
		for _, j := range dir.Jobs {
			if j.Job != job2 {
				continue
			}
			leafSpine := strings.HasPrefix(dir.FromName, "leaf") && strings.HasPrefix(dir.ToName, "spine") ||
				strings.HasPrefix(dir.FromName, "spine") && strings.HasPrefix(dir.ToName, "leaf")
			t.Logf("no collector: %s -> %s: measured %d, job %d (%s), explained %.2f%%", dir.FromName, dir.ToName, dir.Measured.Bytes, j.Bytes, j.RouteModel, deref(dir.Explained))
			if leafSpine {
				evens++
				if j.RouteModel != "ecmp-even" || dir.RouteModel != "ecmp-even" {
					t.Errorf("no collector, %s -> %s: route_model %q (direction %q), want ecmp-even", dir.FromName, dir.ToName, j.RouteModel, dir.RouteModel)
				}
			} else if j.RouteModel != "" {
				t.Errorf("no collector, %s -> %s (one path): route_model %q, want none", dir.FromName, dir.ToName, j.RouteModel)
			}
		}
	}
	if evens != 8 {
		t.Errorf("job %s on %d leaf-spine directions, want all 8 (the even split)", job2, evens)
	}
}

// collision is GET /hotspots' (and /why's) collisions, as the tests read
// them.
type collision struct {
	SwitchName string `json:"switch_description"`
	Port       int
	ToName     string `json:"to_description"`
	Jobs       []string
	Flows      []struct {
		Job     string
		Src     string
		Dst     string
		SrcPort uint16 `json:"src_port"`
		DstPort uint16 `json:"dst_port"`
		Bytes   uint64 `json:"estimated_bytes"`
	}
	Group []struct {
		Port          int
		ToName        string `json:"to_description"`
		MeasuredBytes uint64 `json:"measured_bytes"`
		Measured      bool
		Flows         int
	}
	LeastLoaded struct {
		Port          int
		ToName        string `json:"to_description"`
		MeasuredBytes uint64 `json:"measured_bytes"`
	} `json:"least_loaded"`
	Imbalance float64
	Basis     string `json:"imbalance_basis"`
}

func hotspotCollisions(t *testing.T, d *daemon, window time.Duration) []collision {
	t.Helper()
	var ans struct{ Collisions []collision }
	path := fmt.Sprintf("/api/v1/hotspots?min_utilization=0&window=%ds", int(window.Seconds())+1)
	if code := d.get(path, &ans); code != 200 {
		t.Fatalf("%s: %d", path, code)
	}
	return ans.Collisions
}

// TestEthCollision: two jobs pinned onto one spine (ethlab's Pin: a
// policy route per host pair on both leaves) collide on each leaf's
// uplink to it, named on the hot spots and on each job's "why" with both
// jobs and the idle spine's uplink beside; pinned onto one spine each,
// the same two jobs show no collision.
func TestEthCollision(t *testing.T) {
	sl := startSFlowLab(t, 10)
	lab, d, agentAddr, m, prog := sl.lab, sl.d, sl.agentAddr, sl.m, sl.prog
	ctx := context.Background()

	run := func(tag string) (string, string, time.Duration) {
		a, b := tag+"-a-"+lab.ID, tag+"-b-"+lab.ID
		start := time.Now()
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); ringJob(t, lab, d, m, prog, agentAddr, a, []string{"h1", "h3"}, 4<<20, 60) }()
		go func() { defer wg.Done(); ringJob(t, lab, d, m, prog, agentAddr, b, []string{"h2", "h4"}, 4<<20, 60) }()
		wg.Wait()
		time.Sleep(snmpdCache + 3*time.Second)
		return a, b, time.Since(start)
	}

	// Balanced: one spine each.
	if err := lab.Pin(ctx, "h1", "h3", "spine1"); err != nil {
		t.Fatal(err)
	}
	if err := lab.Pin(ctx, "h2", "h4", "spine2"); err != nil {
		t.Fatal(err)
	}
	a, b, took := run("bal")
	for _, c := range hotspotCollisions(t, d, took) {
		t.Errorf("balanced jobs %s and %s: a collision on %s port %d -> %s: jobs %v, imbalance %.2f", a, b, c.SwitchName, c.Port, c.ToName, c.Jobs, c.Imbalance)
	}
	for _, j := range []string{a, b} {
		var why struct{ Collisions []collision }
		if code := d.get("/api/v1/jobs/"+j+"/why", &why); code != 200 || len(why.Collisions) != 0 {
			t.Errorf("job %s alone on its spine: why %d, collisions %+v", j, code, why.Collisions)
		}
	}
	time.Sleep(11 * time.Second) // past the samples' 10-second buckets

	// Both on spine1.
	if err := lab.Pin(ctx, "h2", "h4", "spine1"); err != nil {
		t.Fatal(err)
	}
	a, b, took = run("col")
	cs := hotspotCollisions(t, d, took)
	leaves := map[string]bool{}
	for _, c := range cs {
		t.Logf("collision: %s port %d -> %s, jobs %v, imbalance %.2f (%s); least loaded port %d -> %s, %d bytes; group %+v",
			c.SwitchName, c.Port, c.ToName, c.Jobs, c.Imbalance, c.Basis, c.LeastLoaded.Port, c.LeastLoaded.ToName, c.LeastLoaded.MeasuredBytes, c.Group)
		if c.ToName != "spine1" || !strings.HasPrefix(c.SwitchName, "leaf") {
			t.Errorf("a collision on %s -> %s, want a leaf's uplink to spine1", c.SwitchName, c.ToName)
			continue
		}
		if !slices.Contains(c.Jobs, a) || !slices.Contains(c.Jobs, b) {
			t.Errorf("%s -> spine1: jobs %v, want both %s and %s", c.SwitchName, c.Jobs, a, b)
		}
		if c.LeastLoaded.ToName != "spine2" {
			t.Errorf("%s: least loaded uplink %s, want spine2's", c.SwitchName, c.LeastLoaded.ToName)
		}
		var shared, idle uint64
		for _, g := range c.Group {
			if g.ToName == "spine1" {
				shared = g.MeasuredBytes
			} else {
				idle = g.MeasuredBytes
			}
		}
		if c.Basis != "counters" || shared < 100<<20 || idle*10 > shared {
			t.Errorf("%s: basis %s, the shared uplink measured %d bytes, the other %d: want counters, the shared carrying both jobs and the other a tenth of it at most",
				c.SwitchName, c.Basis, shared, idle)
		}
		if want := 2 * float64(shared) / float64(shared+idle); c.Imbalance < want*0.999 || c.Imbalance > want*1.001 {
			t.Errorf("%s: imbalance %.4f, want max/mean of the group's measured bytes %.4f", c.SwitchName, c.Imbalance, want)
		}
		leaves[c.SwitchName] = true
	}
	if !leaves["leaf1"] || !leaves["leaf2"] {
		t.Errorf("collisions on %v, want leaf1's and leaf2's uplinks to spine1", leaves)
	}
	// Asked at a past time too (a page opened on a finished job's range):
	// the fabric is the live one's version, so the same observation.
	past := "?at=" + url.QueryEscape(time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano))
	var hs struct{ Collisions []collision }
	path := fmt.Sprintf("/api/v1/hotspots%s&min_utilization=0&window=%ds", past, int(took.Seconds())+5)
	if code := d.get(path, &hs); code != 200 {
		t.Fatalf("%s: %d", path, code)
	}
	pastLeaves := map[string]bool{}
	for _, c := range hs.Collisions {
		pastLeaves[c.SwitchName] = c.ToName == "spine1"
	}
	if !maps.Equal(pastLeaves, map[string]bool{"leaf1": true, "leaf2": true}) {
		t.Errorf("%s: collisions %+v, want leaf1's and leaf2's uplinks to spine1 as now", path, hs.Collisions)
	}
	for _, j := range []string{a, b} {
		for _, at := range []string{"", past} {
			var why struct{ Collisions []collision }
			if code := d.get("/api/v1/jobs/"+j+"/why"+at, &why); code != 200 || len(why.Collisions) == 0 {
				t.Errorf("job %s: why%s %d, no collision named", j, at, code)
				continue
			}
			for _, c := range why.Collisions {
				if !slices.Contains(c.Jobs, a) || !slices.Contains(c.Jobs, b) {
					t.Errorf("job %s's why%s: collision on %s with jobs %v, want both", j, at, c.SwitchName, c.Jobs)
				}
			}
		}
	}
}
