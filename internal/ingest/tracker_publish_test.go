package ingest

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/netloom/netloom/internal/ingest/agentpb"
	"github.com/netloom/netloom/internal/store"
)

// A large job's view is rebuilt at most every ViewEvery (a rebuild copies
// every rank); a small one's on every Publish; a finished large job's at
// once.
func TestLargeJobViewThrottled(t *testing.T) {
	tr, _, _, _ := newTracker(Options{LargeJob: 4, ViewEvery: time.Second})
	const big, small = 4, 2
	now := t0
	for r := range big {
		if err := add(t, tr, snapshot("big", r, big, 0, false), now); err != nil {
			t.Fatal(err)
		}
	}
	for r := range small {
		if err := add(t, tr, snapshot("small", r, small, 0, false), now); err != nil {
			t.Fatal(err)
		}
	}
	if l := tr.Publish(now); l.Jobs["big"].Reporting != big || l.Jobs["small"].Reporting != small {
		t.Fatalf("first publish: big %+v small %+v", l.Jobs["big"], l.Jobs["small"])
	}
	now = now.Add(250 * time.Millisecond)
	if err := add(t, tr, snapshot("big", 0, big, 1, false), now); err != nil {
		t.Fatal(err)
	}
	if err := add(t, tr, snapshot("small", 0, small, 1, false), now); err != nil {
		t.Fatal(err)
	}
	l := tr.Publish(now)
	if got := l.Jobs["small"].Full().Processes[0].Seq; got != 1 {
		t.Errorf("small job not republished at once: rank 0 seq %d", got)
	}
	if got := l.Jobs["big"].Full().Processes[0].Seq; got != 0 {
		t.Errorf("large job republished within ViewEvery: rank 0 seq %d", got)
	}
	now = now.Add(time.Second)
	if got := tr.Publish(now).Jobs["big"].Full().Processes[0].Seq; got != 1 {
		t.Errorf("large job not republished after ViewEvery: rank 0 seq %d", got)
	}
	// Ranks stay in rank order however they arrive.
	for i, p := range tr.Publish(now).Jobs["big"].Full().Processes {
		if p.Rank != i {
			t.Fatalf("process %d is rank %d", i, p.Rank)
		}
	}
	now = now.Add(100 * time.Millisecond)
	for r := range big {
		if err := add(t, tr, snapshot("big", r, big, 2, true), now); err != nil {
			t.Fatal(err)
		}
	}
	if j := tr.Publish(now).Jobs["big"]; j.State != store.JobFinished || j.Finalized != big {
		t.Errorf("finished large job not republished at once: %+v", j.JobSummary)
	}
}

// Every applied snapshot is observed once in the visible-delay histogram,
// when the first published view shows it: a throttled large job's at its
// next rebuild, not before.
func TestVisibleDelayObserved(t *testing.T) {
	tr, _, m, _ := newTracker(Options{LargeJob: 4, ViewEvery: time.Second})
	count := func() uint64 {
		var pb dto.Metric
		if err := m.visibleRecv.(prometheus.Metric).Write(&pb); err != nil {
			t.Fatal(err)
		}
		return pb.GetHistogram().GetSampleCount()
	}
	now := t0
	for r := range 4 {
		if err := add(t, tr, snapshot("big", r, 4, 0, false), now); err != nil {
			t.Fatal(err)
		}
	}
	if err := add(t, tr, snapshot("small", 0, 2, 0, false), now); err != nil {
		t.Fatal(err)
	}
	if got := count(); got != 0 {
		t.Fatalf("%d observed before any publish", got)
	}
	tr.Publish(now)
	if got := count(); got != 5 {
		t.Fatalf("first publish: %d observed, want 5", got)
	}
	now = now.Add(250 * time.Millisecond)
	if err := add(t, tr, snapshot("big", 0, 4, 1, false), now); err != nil {
		t.Fatal(err)
	}
	if err := add(t, tr, snapshot("small", 1, 2, 0, false), now); err != nil {
		t.Fatal(err)
	}
	tr.Publish(now)
	if got := count(); got != 6 {
		t.Fatalf("throttled big job: %d observed, want 6 (the small job's only)", got)
	}
	tr.Publish(now.Add(time.Second))
	if got := count(); got != 7 {
		t.Fatalf("after the big job's rebuild: %d observed, want 7", got)
	}
	tr.Publish(now.Add(2 * time.Second))
	if got := count(); got != 7 {
		t.Fatalf("republishing counted again: %d", got)
	}
}

// A running job's summary is saved every SaveEvery, its changed processes
// every ProcessSaveEvery (the first time within ProcessSaveEvery of its
// first snapshot, at a point that differs from job to job), and every
// process again when it ends.
func TestProcessesSavedLessOften(t *testing.T) {
	tr, sk, _, _ := newTracker(Options{SaveEvery: time.Second, ProcessSaveEvery: 10 * time.Second})
	const jobs = 20
	first := map[string]int{} // each job's first tick with processes
	// Ticks at 3, 6, ... 24 s.
	now := saveTicks(t, tr, sk, "s", jobs, 8, func(tick int, _ time.Time, j *store.Job) {
		if f, ok := first[j.ID]; !ok {
			if tick > 3 || len(j.Processes) != 2 {
				t.Errorf("job %s: first processes saved at tick %d: %d", j.ID, tick, len(j.Processes))
			}
			first[j.ID] = tick
		} else if tick != f+4 { // 10 s later: the fourth tick after
			t.Errorf("job %s: processes saved at ticks %d and %d", j.ID, f, tick)
		}
	})
	if len(first) != jobs {
		t.Fatalf("%d of %d jobs saved their processes", len(first), jobs)
	}
	spread := map[int]bool{}
	for _, tick := range first {
		spread[tick] = true
	}
	if len(spread) < 2 {
		t.Errorf("every job saved its processes first at tick %v", first)
	}
	for r := range 2 {
		if err := add(t, tr, snapshot("s0", r, 2, 8, true), now); err != nil {
			t.Fatal(err)
		}
	}
	if len(sk.saved) != 1 || len(sk.saved[0].Processes) != 2 {
		t.Fatalf("processes saved when the job ended: %v", sk.saved)
	}
}

// A published view keeps the ranks as they were: a newer snapshot of a
// rank replaces it without changing what earlier views show.
func TestPublishedViewsImmutable(t *testing.T) {
	tr, _, _, _ := newTracker(Options{})
	if err := add(t, tr, snapshot("v", 0, 2, 0, false), t0); err != nil {
		t.Fatal(err)
	}
	old := tr.Publish(t0).Jobs["v"]
	if err := add(t, tr, snapshot("v", 0, 2, 1, false), t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	cur := tr.Publish(t0.Add(time.Second)).Jobs["v"]
	if o, c := old.Full().Processes[0], cur.Full().Processes[0]; o.Seq != 0 || c.Seq != 1 || o.CPUUser >= c.CPUUser {
		t.Fatalf("old view shows seq %d (cpu %g), new one seq %d (cpu %g)", o.Seq, o.CPUUser, c.Seq, c.CPUUser)
	}
}

// A live view keeps its ranks in order and its summary equal to one summed
// from its processes, however the ranks' first snapshots arrive: in order,
// out of order, or after a rank restarted.
func TestViewMatchesProcesses(t *testing.T) {
	tr, _, _, _ := newTracker(Options{})
	// Ranks in three of the view's chunks.
	const world = 2*viewChunk + 8
	now := t0
	sent := map[int]uint64{} // each rank's last snapshot
	send := func(d *agentpb.Datagram) {
		t.Helper()
		if err := add(t, tr, d, now); err != nil {
			t.Fatal(err)
		}
		sent[int(d.Rank)] = d.Seq
	}
	check := func(step string) {
		t.Helper()
		now = now.Add(time.Second)
		v := tr.Publish(now).Jobs["v"]
		if v == nil {
			t.Fatalf("%s: no view", step)
		}
		full := v.Full()
		summed := &store.Job{JobSummary: full.JobSummary, Processes: full.Processes}
		Summarize(summed)
		if !reflect.DeepEqual(v.JobSummary, summed.JobSummary) {
			t.Errorf("%s: view summary\n %+v\nsummed from its processes\n %+v", step, v.JobSummary, summed.JobSummary)
		}
		var got []string
		for _, p := range full.Processes {
			got = append(got, fmt.Sprintf("%d:%d", p.Rank, p.Seq))
		}
		var want []string
		for _, r := range slices.Sorted(maps.Keys(sent)) {
			want = append(want, fmt.Sprintf("%d:%d", r, sent[r]))
		}
		if !slices.Equal(got, want) {
			i := 0
			for i < min(len(got), len(want)) && got[i] == want[i] {
				i++
			}
			t.Errorf("%s: view has %d ranks, want %d; from the %dth: rank:snapshot %v, want %v", step, len(got), len(want), i,
				got[i:min(i+3, len(got))], want[i:min(i+3, len(want))])
		}
	}
	for rank := range 2*viewChunk + 2 { // in order, as the agents' phases send them
		if rank != 3 && rank != 100 {
			send(snapshot("v", rank, world, 0, false))
		}
	}
	check("in order")
	for _, rank := range []int{2*viewChunk + 6, 3, 100, 2*viewChunk + 7} { // stragglers
		send(snapshot("v", rank, world, 0, false))
		check(fmt.Sprintf("rank %d late", rank))
	}
	for _, rank := range []int{0, 2*viewChunk + 6, viewChunk + 1, 1} { // later snapshots update in place
		send(snapshot("v", rank, world, 1, false))
	}
	check("second snapshots")
	// Views share the chunks that did not change.
	before := slices.Clone(tr.jobs["v"].chunks)
	send(snapshot("v", viewChunk+1, world, 2, false))
	check("one rank changed")
	after := tr.jobs["v"].chunks
	if len(after) != 3 || &after[0][0] != &before[0][0] || &after[2][0] != &before[2][0] || &after[1][0] == &before[1][0] {
		t.Error("a view copied chunks that did not change, or shared one that did")
	}
	restart := snapshot("v", 3, world, 0, false)
	restart.StartUnixNs += int64(time.Minute)
	restart.TimeUnixNs += int64(time.Minute)
	send(restart)
	check("rank 3 restarted")
	send(snapshot("v", 2*viewChunk+4, world, 0, false))
	send(snapshot("v", 2*viewChunk+6, world, 2, false))
	check("a new rank after the restart")
	nodes := map[int]bool{}
	for r := range sent {
		nodes[r/2] = true // snapshot's nodes
	}
	if v := tr.Publish(now.Add(time.Second)).Jobs["v"]; v.Reporting != len(sent) || v.Nodes != len(nodes) {
		t.Errorf("%d ranks on %d nodes reporting, want %d on %d", v.Reporting, v.Nodes, len(sent), len(nodes))
	}
	// Ranks that report from another node: node2 loses its ranks.
	for _, rank := range []int{5, 4} {
		moved := snapshot("v", rank, world, 1, false)
		moved.Process.Node = "elsewhere"
		send(moved)
		check(fmt.Sprintf("rank %d moved", rank))
	}
	if v := tr.Publish(now.Add(time.Second)).Jobs["v"]; v.Nodes != len(nodes) {
		t.Errorf("%d nodes after two ranks moved, want %d", v.Nodes, len(nodes))
	}
}

// saveTicks sends snapshot tick of every rank of jobs PREFIX0... and ticks
// 3 s later, ticks times from t0, calling f with each job saved with its
// processes at a tick; it returns the time of the last tick.
func saveTicks(t *testing.T, tr *Tracker, sk *sink, prefix string, jobs, ticks int, f func(tick int, now time.Time, j *store.Job)) time.Time {
	t.Helper()
	now := t0
	for tick := range ticks {
		addJobs(t, tr, prefix, jobs, uint64(tick), now)
		now = now.Add(3 * time.Second)
		tr.Tick(now)
		for _, j := range sk.saved {
			if len(j.Processes) > 0 {
				f(tick, now, j)
			}
		}
		sk.saved = nil
	}
	return now
}

// addJobs adds snapshot seq of both ranks of jobs PREFIX0...
func addJobs(t *testing.T, tr *Tracker, prefix string, jobs int, seq uint64, now time.Time) {
	t.Helper()
	for k := range jobs {
		for r := range 2 {
			if err := add(t, tr, snapshot(fmt.Sprint(prefix, k), r, 2, seq, false), now); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// With many ranks tracked, processes are saved less often, at about
// ProcessRowsPerSecond.
func TestProcessSavesFollowBudget(t *testing.T) {
	tr, sk, _, _ := newTracker(Options{SaveEvery: time.Second, ProcessSaveEvery: 10 * time.Second, ProcessRowsPerSecond: 2})
	const jobs, ticks = 20, 24 // 40 ranks at 2 rows/s: every 20 s
	rows := 0
	last := map[string]time.Time{}
	saveTicks(t, tr, sk, "b", jobs, ticks, func(_ int, now time.Time, j *store.Job) {
		rows += len(j.Processes)
		if l, ok := last[j.ID]; ok && now.Sub(l) < 20*time.Second {
			t.Errorf("job %s: processes saved %v apart", j.ID, now.Sub(l))
		}
		last[j.ID] = now
	})
	if secs := float64(ticks * 3); float64(rows) > 2*secs+2*jobs || rows < jobs*2 {
		t.Errorf("%d process rows saved in %g s at 2 rows/s", rows, secs)
	}
}
