package e2e

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/test/ibsim"
)

// modelWrap puts Open MPI rank r on the r-th of the node names given
// before the program (NETLOOM_NODE).
const modelWrap = `#!/bin/sh
nodes=$1
shift
NETLOOM_NODE=$(echo "$nodes" | cut -d, -f$((OMPI_COMM_WORLD_RANK + 1)))
export NETLOOM_NODE
exec "$@"
`

type modelPrediction struct {
	Scenario       string
	Elapsed        float64            `json:"elapsed_seconds"`
	MPISeconds     float64            `json:"mpi_seconds"`
	InterNodeBytes uint64             `json:"inter_node_p2p_bytes"`
	IntraNodeBytes uint64             `json:"intra_node_p2p_bytes"`
	RankMPI        []float64          `json:"rank_mpi_seconds"`
	Functions      map[string]float64 `json:"functions"`
	VsAsRan        *float64           `json:"vs_as_ran_pct"`
}

type modelResult struct {
	Ranks    int
	Platform string
	Measured struct {
		Elapsed float64 `json:"elapsed_seconds"`
	}
	AsRan   modelPrediction   `json:"as_ran"`
	WhatIfs []modelPrediction `json:"what_ifs"`
}

func (r *modelResult) whatIf(t *testing.T, name string) modelPrediction {
	t.Helper()
	for _, p := range r.WhatIfs {
		if p.Scenario == name {
			return p
		}
	}
	t.Fatalf("no %q prediction in %+v", name, r.WhatIfs)
	return modelPrediction{}
}

// TestModel traces real Open MPI jobs (netloom run --trace) and replays
// them with SimGrid (netloom model):
//   - on a platform calibrated to this machine by a ping-pong, the replay
//     of a job reproduces its measured time within 15%, and a perfect
//     network never predicts more than measured;
//   - a perfect network keeps an injected imbalance: rank k still waits
//     for the last rank what the program made it wait;
//   - on the ibsim fabric (mixed link rates; n4's link is 1X SDR), two
//     independent pairs are predicted at the speed of their own routes:
//     the pair through n4's link at its 250 MB/s, the other at 4X FDR;
//   - the trace's inter-node bytes are what the agent measured, and a
//     placement that puts each pair on one node predicts none, which the
//     job re-run that way then measures.
func TestModel(t *testing.T) {
	if _, err := exec.LookPath("smpirun"); err != nil {
		t.Fatalf("SimGrid's smpirun not installed (scripts/install-deps.sh installs simgrid): %v", err)
	}
	buildAgent(t)
	m := impls(t)[0]
	needMPI(t, m)
	work := t.TempDir()
	wrap := filepath.Join(work, "wrap.sh")
	if err := os.WriteFile(wrap, []byte(modelWrap), 0o755); err != nil {
		t.Fatal(err)
	}
	pairs := compile(t, m, "testdata/mpi/pairs.c")
	imbalance := compile(t, m, "testdata/mpi/imbalance.c")
	env := append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	netloom := func(t *testing.T, extraEnv []string, args ...string) []byte {
		t.Helper()
		cmd := exec.Command(netloomBin, args...)
		cmd.Dir, cmd.Env = work, append(env, extraEnv...)
		out, err := cmd.Output()
		if err != nil {
			stderr := ""
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("netloom %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
		}
		return out
	}
	daemonAt := "127.0.0.1:9" // no daemon: the datagrams go nowhere
	traced := func(t *testing.T, name, nodes string, prog string, args ...string) string {
		t.Helper()
		dir := filepath.Join(work, name)
		netloom(t, nil, append([]string{"run", "--quiet", "--trace", "--output", dir, "--job-id", name, "--lib", m.lib, "--daemon", daemonAt,
			"--interval", "200ms", "--", "mpirun", "--oversubscribe", "-np", "4", "sh", wrap, nodes, prog}, args...)...)
		return dir
	}
	predict := func(t *testing.T, extraEnv []string, args ...string) *modelResult {
		t.Helper()
		var r modelResult
		out := netloom(t, extraEnv, append([]string{"model", "--json"}, args...)...)
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("netloom model %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("%s: measured %.4f s; as ran %.4f s (MPI %v); what-ifs %+v", r.Platform, r.Measured.Elapsed, r.AsRan.Elapsed, r.AsRan.RankMPI, r.WhatIfs)
		return &r
	}
	netloom(t, nil, "model", "calibrate", "-o", "calib.json")

	t.Run("calibrated replay reproduces the run", func(t *testing.T) {
		dir := traced(t, "pairs-work", "n3,n4,n5,n6", pairs, "400000", "5", "20000")
		r := predict(t, nil, dir, "--platform", "calibrated", "--calibration", "calib.json")
		if d := math.Abs(r.AsRan.Elapsed-r.Measured.Elapsed) / r.Measured.Elapsed; d > 0.15 {
			t.Errorf("replay %.4f s, measured %.4f s: %.0f%% off, want within 15%%", r.AsRan.Elapsed, r.Measured.Elapsed, 100*d)
		}
		if p := r.whatIf(t, "perfect network"); p.Elapsed > r.Measured.Elapsed || p.Elapsed > r.AsRan.Elapsed {
			t.Errorf("perfect network %.4f s: more than measured %.4f s or replayed %.4f s", p.Elapsed, r.Measured.Elapsed, r.AsRan.Elapsed)
		}
	})

	t.Run("a long run replayed in part", func(t *testing.T) {
		// 600 exchanges of 40 kB after 1 ms of work: 5 actions per
		// iteration and rank, 12,000 in all, over a budget of 7,000: every
		// other round is replayed
		dir := traced(t, "pairs-long", "n3,n3,n5,n5", pairs, "40000", "600", "1000")
		args := []string{dir, "--platform", "calibrated", "--calibration", "calib.json", "--network", "perfect"}
		whole := predict(t, nil, append(args, "--full-replay")...)
		var part struct {
			modelResult
			Window *struct {
				Periods int
				Kept    int `json:"kept_periods"`
			}
		}
		out := netloom(t, nil, append([]string{"model", "--json", "--window-actions", "7000"}, args...)...)
		if err := json.Unmarshal(out, &part); err != nil {
			t.Fatalf("netloom model: %v\n%s", err, out)
		}
		if w := part.Window; w == nil || w.Periods < 590 || w.Kept < 280 || w.Kept > 300 {
			t.Fatalf("window %+v, want about 600 periods, every other one kept", w)
		}
		t.Logf("window %+v: as ran %.4f s (whole %.4f s), perfect %.4f s (whole %.4f s), measured %.4f s", *part.Window,
			part.AsRan.Elapsed, whole.AsRan.Elapsed, part.whatIf(t, "perfect network").Elapsed, whole.whatIf(t, "perfect network").Elapsed, whole.Measured.Elapsed)
		for _, pair := range [][2]modelPrediction{{part.AsRan, whole.AsRan}, {part.whatIf(t, "perfect network"), whole.whatIf(t, "perfect network")}} {
			got, want := pair[0], pair[1]
			// The MPI time here is the partners' waits for each other's
			// noisy 1 ms of work, a few rounds' scheduling hiccups
			// making most of it (on a loaded machine, a 1 ms sleep takes
			// several): the window samples them, so it is held to 3% of
			// the ranks' time, the elapsed time to 3%.
			if math.Abs(got.Elapsed-want.Elapsed) > 0.03*want.Elapsed || math.Abs(got.MPISeconds-want.MPISeconds) > 0.03*4*want.Elapsed {
				t.Errorf("%s: window %.4f s, MPI %.4f s; whole replay %.4f s, MPI %.4f s", want.Scenario, got.Elapsed, got.MPISeconds, want.Elapsed, want.MPISeconds)
			}
		}
		text := string(netloom(t, nil, append([]string{"model", "--window-actions", "7000"}, args...)...))
		if !strings.Contains(text, "Replayed in part: every rank repeats") {
			t.Errorf("the text output does not say the trace was replayed in part:\n%s", text)
		}
	})

	t.Run("perfect network keeps the imbalance", func(t *testing.T) {
		const d, iters = 0.02, 10 // imbalance.c: rank k works k x 20 ms per round
		dir := traced(t, "imbalance", "n3,n3,n5,n5", imbalance, "20", "10")
		r := predict(t, nil, dir, "--platform", "calibrated", "--calibration", "calib.json", "--network", "perfect")
		p := r.whatIf(t, "perfect network")
		if p.Elapsed > r.Measured.Elapsed {
			t.Errorf("perfect network %.4f s > measured %.4f s", p.Elapsed, r.Measured.Elapsed)
		}
		for k, got := range p.RankMPI {
			// the wait for the last rank, plus the final gather's
			want := float64(3-k) * d * iters
			if math.Abs(got-want) > 0.1*want+0.005 {
				t.Errorf("perfect network: rank %d in MPI %.4f s, want its injected wait %.4f s", k, got, want)
			}
		}
	})

	// What a perfect network leaves of the MPI time is the ranks' waits
	// for each other, from each rank's own compute gaps: the late
	// receivers a rendezvous send waits for, and the late senders of
	// receives completed in MPI_Wait, which the agent cannot time
	// (agent/README.md, "Wait states"). latesend.c injects them: the
	// waiting rank's MPI time on a perfect network is what the program
	// measured it waited (on the host's one clock), within 10% (or 10 ms),
	// and it is in the function that waits.
	t.Run("waits on a perfect network", func(t *testing.T) {
		latesend := compile(t, m, "testdata/mpi/latesend.c")
		for _, c := range []struct{ mode, fn string }{{"receiver", "MPI_Send"}, {"irecv", "MPI_Wait"}} {
			dir := filepath.Join(work, "latesend-"+c.mode)
			out := string(netloom(t, nil, "run", "--quiet", "--trace", "--output", dir, "--job-id", "latesend-"+c.mode, "--lib", m.lib,
				"--daemon", daemonAt, "--", "mpirun", "--oversubscribe", "-np", "4", latesend, "50", "4", "262144", c.mode))
			late := ownWaits(out, "latesend")
			if len(late) != 4 {
				t.Fatalf("%s: program output %s", c.mode, out)
			}
			p := predict(t, nil, dir, "--network", "perfect").whatIf(t, "perfect network")
			all := 0.0
			for rank, want := range late {
				all += want
				if got := p.RankMPI[rank]; math.Abs(got-want) > math.Max(0.1*want, 0.01) {
					t.Errorf("%s: rank %d in MPI %.4f s on a perfect network; it waited %.4f s for its peer", c.mode, rank, got, want)
				}
			}
			if got := p.Functions[c.fn]; got < 0.9*all || all < 0.9*(0.05+0.1)*4 {
				t.Errorf("%s: %s %.4f s on a perfect network; the ranks waited %.4f s in all (injected %.1f s)", c.mode, c.fn, got, all, 0.6)
			}
		}
	})

	t.Run("fabric routes and link speeds", func(t *testing.T) {
		if m := ibsim.Missing(); m != "" {
			t.Fatal(m)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		f, err := ibsim.Start(ctx, filepath.Join(repoRoot(t), "internal/fabric/ib/testdata/fattree.net"), ibsim.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Stop()
		d, agent := serve(t, f.Dir, f.Env(), "--fabric", "ib", "--db", filepath.Join(work, "netloom.db"), "--agent-listen", "127.0.0.1:0",
			"--agent-address-file", "-", "--sweep-interval", "300ms", "--discover-interval", "5s", "--job-timeout", "20s", "--trace-root", work)
		waitAPI(t, d, 60*time.Second, "routes", func() bool {
			var st struct{ Routes bool }
			return d.get("/api/v1/status", &st) == 200 && st.Routes
		})
		daemonAt = agent
		const bytes, iters = 4000000, 5
		dir := traced(t, "pairs", "n3,n4,n5,n6", pairs, "4000000", "5")
		r := predict(t, f.Env(), dir, "--fabric", "ib", "--network", "x2")
		// The daemon answers the same from the trace its ranks named.
		var api modelResult
		waitAPI(t, d, 60*time.Second, "the traced job's prediction", func() bool {
			return d.get("/api/v1/jobs/pairs/model?network=x2", &api) == 200
		})
		if api.AsRan.Elapsed != r.AsRan.Elapsed || api.Ranks != 4 || len(api.WhatIfs) != 1 || api.WhatIfs[0].Elapsed != r.WhatIfs[0].Elapsed {
			t.Errorf("GET /model: as ran %.6f s, x2 %+v; netloom model: %.6f s, %+v", api.AsRan.Elapsed, api.WhatIfs, r.AsRan.Elapsed, r.WhatIfs)
		}
		// The advice replayed (placement=advice: the job page's predicted
		// time): the daemon's advice, written as a rankfile and replayed by
		// netloom model --placement, takes the same time, and its change is
		// against the replay as ran.
		var advice struct{ File struct{ Content string } }
		if code := d.get("/api/v1/jobs/pairs/placement", &advice); code != 200 || advice.File.Content == "" {
			t.Fatalf("GET /placement: %d, %+v", code, advice)
		}
		rankfile := filepath.Join(work, "pairs.rankfile")
		if err := os.WriteFile(rankfile, []byte(advice.File.Content), 0o644); err != nil {
			t.Fatal(err)
		}
		var withAdvice modelResult
		waitAPI(t, d, 60*time.Second, "the advice's prediction", func() bool {
			return d.get("/api/v1/jobs/pairs/model?placement=advice", &withAdvice) == 200
		})
		cli := predict(t, f.Env(), dir, "--fabric", "ib", "--placement", rankfile)
		if len(withAdvice.WhatIfs) != 1 || withAdvice.WhatIfs[0].Scenario != "placement" || withAdvice.WhatIfs[0].VsAsRan == nil {
			t.Fatalf("GET /model?placement=advice: %+v", withAdvice.WhatIfs)
		}
		pl := withAdvice.WhatIfs[0]
		if got := cli.whatIf(t, "placement"); got.Elapsed != pl.Elapsed || cli.AsRan.Elapsed != withAdvice.AsRan.Elapsed {
			t.Errorf("the advice replayed by the daemon: %.6f s (as ran %.6f s); by netloom model --placement: %.6f s (as ran %.6f s)", pl.Elapsed, withAdvice.AsRan.Elapsed, got.Elapsed, cli.AsRan.Elapsed)
		}
		if want := 100 * (pl.Elapsed - withAdvice.AsRan.Elapsed) / withAdvice.AsRan.Elapsed; math.Abs(*pl.VsAsRan-want) > 1e-9 {
			t.Errorf("vs_as_ran_pct %.4f, want %.4f", *pl.VsAsRan, want)
		}

		rate := map[string]float64{"1X SDR": fabric.LinkCapacity("1X", "SDR"), "4X FDR": fabric.LinkCapacity("4X", "FDR")}
		// n3 (4X DDR) <-> n4 (1X SDR): n4's link sets the pace; n5 <-> n6, both 4X FDR on one leaf.
		// A pair's route is measured by the rank of it that waits least: the
		// other also waits for its partner's time outside MPI as traced (the
		// replay keeps it; under load one traced rank 2 started late and
		// rank 3 replayed at 0.00684 s against the route's 0.00293 s).
		for pair, link := range map[[2]int]string{{0, 1}: "1X SDR", {2, 3}: "4X FDR"} {
			want := iters * bytes / rate[link]
			if got := min(r.AsRan.RankMPI[pair[0]], r.AsRan.RankMPI[pair[1]]); math.Abs(got-want) > 0.15*want {
				t.Errorf("ranks %d and %d: MPI %.5f s on the fabric (the least of %.5f, %.5f), want %.5f s (%d x %d bytes at %s)", pair[0], pair[1], got, r.AsRan.RankMPI[pair[0]], r.AsRan.RankMPI[pair[1]], want, iters, bytes, link)
			}
		}
		x2 := r.whatIf(t, "x2 bandwidth")
		if got, want := x2.RankMPI[1], r.AsRan.RankMPI[1]/2; math.Abs(got-want) > 0.15*want {
			t.Errorf("x2 bandwidth: rank 1 in MPI %.5f s, want about %.5f s", got, want)
		}

		// Inter-node bytes: the trace's equal the agent's, and a placement
		// keeping each pair on one node predicts none, as its re-run shows.
		measured := func(dir string) uint64 {
			var rep struct {
				Job struct {
					InterNode struct{ Bytes uint64 } `json:"inter_node"`
				}
			}
			out := netloom(t, nil, "report", dir, "--json")
			if err := json.Unmarshal(out, &rep); err != nil {
				t.Fatalf("report: %v\n%s", err, out)
			}
			return rep.Job.InterNode.Bytes
		}
		if got := measured(dir); r.AsRan.InterNodeBytes != got || got != 2*2*iters*bytes {
			t.Errorf("inter-node bytes: trace %d, agent %d, want %d", r.AsRan.InterNodeBytes, got, 2*2*iters*bytes)
		}
		if err := os.WriteFile(filepath.Join(work, "together"), []byte("n3:2\nn5:2\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r = predict(t, f.Env(), dir, "--fabric", "ib", "--network", "x2", "--placement", "together")
		p := r.whatIf(t, "placement")
		rerun := traced(t, "pairs-together", "n3,n3,n5,n5", pairs, "4000000", "5")
		if got := measured(rerun); p.InterNodeBytes != 0 || got != 0 {
			t.Errorf("placement: %d inter-node bytes predicted, %d measured on the re-run; want none", p.InterNodeBytes, got)
		}
		// netloom place on a traced profile carries the advice's predicted time.
		var adv struct {
			Predicted *struct {
				AsRan  float64 `json:"as_ran_seconds"`
				Advice float64 `json:"advice_seconds"`
			}
		}
		if err := json.Unmarshal(netloom(t, f.Env(), "place", dir, "--fabric", "ib", "--nodes", "n3,n5", "--cores-per-node", "2", "--json", "-o", "rankfile"), &adv); err != nil {
			t.Fatal(err)
		}
		if p := adv.Predicted; p == nil || p.AsRan != r.AsRan.Elapsed || p.Advice >= p.AsRan {
			t.Errorf("place's predicted times %+v: want as ran %.6f s (netloom model's) and a faster advice", p, r.AsRan.Elapsed)
		}
		// A job run without --trace has no prediction, and says why.
		netloom(t, nil, "run", "--quiet", "--job-id", "untraced", "--lib", m.lib, "--daemon", agent, "--interval", "200ms", "--",
			"mpirun", "--oversubscribe", "-np", "4", "sh", wrap, "n3,n4,n5,n6", pairs, "1000", "1")
		waitAPI(t, d, 60*time.Second, "the untraced job", func() bool {
			var j struct{ State string }
			return d.get("/api/v1/jobs/untraced", &struct{ Job any }{&j}) == 200 && j.State == "finished"
		})
		var e struct{ Error string }
		if code := d.get("/api/v1/jobs/untraced/model", &e); code != 404 || !strings.Contains(e.Error, "netloom run --trace") {
			t.Errorf("untraced job's model: %d %q", code, e.Error)
		}
		if p.Elapsed >= r.AsRan.Elapsed {
			t.Errorf("placement inside nodes: %.4f s, not faster than as ran %.4f s", p.Elapsed, r.AsRan.Elapsed)
		}
	})
}
