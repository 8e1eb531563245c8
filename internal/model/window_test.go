package model

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestFindPeriod(t *testing.T) {
	seq := func(s string) []uint64 {
		out := make([]uint64, len(s))
		for i, c := range s {
			out[i] = uint64(c)
		}
		return out
	}
	for _, c := range []struct {
		in                   string
		start, period, count int
		ok                   bool
	}{
		{"xy" + strings.Repeat("abc", 40) + "zz", 2, 3, 40, true},
		{strings.Repeat("ab", 50), 0, 2, 50, true},
		{"q" + strings.Repeat("abcab", 30) + "ab", 1, 5, 30, true},
		{strings.Repeat("abcdefghijklmnopqrstuvwxyz", 4), 0, 0, 0, false},
		{"abc", 0, 0, 0, false},
	} {
		start, period, count, ok := findPeriod(seq(c.in))
		if ok != c.ok || ok && (start != c.start || period != c.period || count != c.count) {
			t.Errorf("findPeriod(%q) = %d, %d, %d, %v; want %d, %d, %d, %v", c.in, start, period, count, ok, c.start, c.period, c.count, c.ok)
		}
	}
}

// haloActions is rank r of n's trace: a broadcast, then iters times
// compute (10 ms +- noise, at 1 Gflop/s), a ring exchange of size bytes
// both ways and an allreduce, then a barrier.
func haloActions(r, n, iters, size int, noise float64, rng *rand.Rand) []string {
	acts := []string{"bcast 1024 0", "compute 5e6"}
	right, left := (r+1)%n, (r+n-1)%n
	for range iters {
		acts = append(acts, fmt.Sprintf("compute %.0f", 1e7*(1+noise*(2*rng.Float64()-1))))
		for tag, pair := range [][2]int{{right, left}, {left, right}} {
			acts = append(acts, fmt.Sprintf("irecv %d %d %d", pair[1], tag, size), fmt.Sprintf("isend %d %d %d", pair[0], tag, size),
				fmt.Sprintf("wait %d %d %d", pair[1], r, tag), fmt.Sprintf("wait %d %d %d", r, pair[0], tag))
		}
		acts = append(acts, "allreduce 8 0")
	}
	return append(acts, "barrier")
}

// A noisy halo kernel replayed in part predicts what its whole replay
// does: the elapsed time within 1%, the MPI time within 2%. Per function
// within 10% (or 0.5% of all MPI time), each rank's MPI time within 20%:
// the window samples 86 of the 600 iterations, and a rank's wait there is
// the others' noise minus its own.
func TestWindowReplayPredictsTheWhole(t *testing.T) {
	needSmpirun(t)
	const ranks, iters = 16, 600
	var actions [][]string
	nodes := make([]string, ranks)
	for r := range ranks {
		rng := rand.New(rand.NewPCG(uint64(r), 7))
		actions = append(actions, haloActions(r, ranks, iters, 256<<10, 0.2, rng))
		nodes[r] = fmt.Sprintf("n%d", r/2)
	}
	j := traceJob(t, nodes, actions)
	p := Flat("flat", Hosts(nodes), Cores(nodes), 1e-6, 5e9, DefaultLoopback)
	ctx := context.Background()
	whole, err := replayWhole(ctx, t, j, p, nodes, "whole", true)
	if err != nil {
		t.Fatal(err)
	}
	var said []string
	res, err := Predict(ctx, j, Request{Platform: p, HostOf: nodes, WindowActions: j.Events / 6, Work: t.TempDir(),
		Progress: func(format string, args ...any) { said = append(said, fmt.Sprintf(format, args...)) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(said) != 3 || !strings.Contains(said[1], "repeats a period of up to 10 events 600 times") || said[2] != "replaying as ran (1 of 1)" {
		t.Errorf("progress: %q", said)
	}
	w := res.Window
	if w == nil {
		t.Fatalf("no window for %d actions over a budget of %d (%v)", j.Events, j.Events/6, res.Warnings)
	}
	if w.Periods != iters || w.PeriodEvents != 10 || w.Kept >= iters/4 || w.Kept < minWindowPeriods || w.Actions[1] > j.Events/6 {
		t.Errorf("window %+v for %d iterations of 10 actions, budget %d actions", w, iters, j.Events/6)
	}
	part := res.AsRan
	t.Logf("whole: %.4f s, MPI %.4f s; window %+v: %.4f s, MPI %.4f s", whole.Elapsed, whole.MPISeconds, *w, part.Elapsed, part.MPISeconds)
	if !near(part.Elapsed, whole.Elapsed, 0.01) || !near(part.MPISeconds, whole.MPISeconds, 0.02) {
		t.Errorf("elapsed %.4f s, MPI %.4f s; the whole replay's %.4f s, %.4f s", part.Elapsed, part.MPISeconds, whole.Elapsed, whole.MPISeconds)
	}
	for f, want := range whole.Functions {
		if got := part.Functions[f]; !near(got, want, 0.1) && math.Abs(got-want) > 0.005*whole.MPISeconds {
			t.Errorf("%s: %.4f s, the whole replay's %.4f s", f, got, want)
		}
	}
	for r, want := range whole.RankMPI {
		if got := part.RankMPI[r]; !near(got, want, 0.2) {
			t.Errorf("rank %d's MPI %.4f s, the whole replay's %.4f s", r, got, want)
		}
	}
	if part.InterNodeBytes != whole.InterNodeBytes {
		t.Errorf("inter-node bytes %d, the whole trace's %d", part.InterNodeBytes, whole.InterNodeBytes)
	}
}

// Traces the window cannot shorten are replayed whole, and Predict says
// why.
func TestWindowRefuses(t *testing.T) {
	const ranks = 4
	rng := rand.New(rand.NewPCG(1, 2))
	cases := map[string]func(r int) []string{
		// each send is waited one iteration later: no rotation of the
		// period waits only for what it posted
		"not closed": func(r int) []string {
			acts := []string{fmt.Sprintf("isend %d 1 8", r^1)}
			for range 3000 {
				acts = append(acts, "compute 1e6", fmt.Sprintf("irecv %d 1 8", r^1), fmt.Sprintf("wait %d %d 1", r, r^1),
					fmt.Sprintf("isend %d 1 8", r^1), fmt.Sprintf("wait %d %d 1", r^1, r))
			}
			return append(acts, fmt.Sprintf("wait %d %d 1", r, r^1))
		},
		"no repetition": func(r int) []string {
			var acts []string
			for i := range 300 {
				acts = append(acts, fmt.Sprintf("allreduce %d 0", i+1))
			}
			return acts
		},
		"too few": func(r int) []string { return haloActions(r, ranks, 40, 8, 0.1, rng) },
		// rank 0 repeats every two iterations, the others every one
		"periods differ": func(r int) []string {
			var acts []string
			for i := range 3000 {
				size := 8
				if r == 0 {
					size += 8 * (i % 2)
				}
				acts = append(acts, "compute 1e6", fmt.Sprintf("allreduce %d 0", size))
			}
			return acts
		},
	}
	for name, acts := range cases {
		var actions [][]string
		for r := range ranks {
			actions = append(actions, acts(r))
		}
		j := traceJob(t, []string{"a", "b", "c", "d"}, actions)
		w, why := planWindow(j.shapes, j.Events/10)
		if w != nil || why == "" {
			t.Errorf("%s: window %+v (%q)", name, w, why)
		}
		if w, why := planWindow(j.shapes, j.Events+10); w != nil || why != "" {
			t.Errorf("%s, within the budget: window %+v (%q)", name, w, why)
		}
		t.Logf("%s: %s", name, why)
	}
}
