package ingest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"google.golang.org/protobuf/proto"

	"github.com/netloom/netloom/internal/ingest/agentpb"
	"github.com/netloom/netloom/internal/store"
)

func TestTrackerJob(t *testing.T) {
	tr, sk, m, _ := newTracker(Options{})
	now := t0
	const n = 4
	for seq := uint64(0); seq < 3; seq++ {
		for r := range n {
			for _, c := range split(snapshot("7", r, n, seq, seq == 2), 1) {
				if err := add(t, tr, c, now); err != nil {
					t.Fatalf("seq %d rank %d chunk %d: %v", seq, r, c.Chunk, err)
				}
			}
		}
		now = now.Add(5 * time.Second)
		tr.Tick(now)
	}
	live := tr.Publish(now)
	j := live.Jobs["7"]
	if j == nil {
		t.Fatal("job not live")
	}
	if j.State != store.JobFinished || j.EndReason != store.EndFinal || j.Finalized != n || j.Reporting != n || j.Nodes != 2 {
		t.Errorf("summary %+v", j.JobSummary)
	}
	// 3 intervals: each rank sent 3000 bytes p2p; ranks 1..3 300 bytes coll.
	if j.Traffic.P2P.Bytes != 4*3000 || j.Traffic.Coll.Bytes != 3*300 || j.Traffic.P2P.Msgs != 4*30 {
		t.Errorf("traffic %+v", j.Traffic)
	}
	if j.IntraNode.Bytes+j.InterNode.Bytes != j.Total.Bytes {
		t.Errorf("intra %d + inter %d != total %d", j.IntraNode.Bytes, j.InterNode.Bytes, j.Total.Bytes)
	}
	if !j.Start.Equal(t0) || !j.End.Equal(t0.Add(15*time.Second)) || j.Duration != 15 {
		t.Errorf("start %s end %s duration %g", j.Start, j.End, j.Duration)
	}
	if j.CPUPercent != 90 || j.MPIPercent != 20 {
		t.Errorf("cpu %g%% mpi %g%%", j.CPUPercent, j.MPIPercent)
	}
	// Deltas: 2 per rank (seq 1 and 2 against the one before).
	if len(sk.samples) != 2*n {
		t.Fatalf("%d samples, want %d", len(sk.samples), 2*n)
	}
	for _, s := range sk.samples {
		if s.Span != 5*time.Second || s.Traffic.P2P.Bytes != 1000 || s.CPUUser != 4 || s.IOWrite != 4096 || s.Wait != 0.25 {
			t.Errorf("sample %+v", s)
		}
	}
	// Saved when it finished, with all ranks.
	last := sk.saved[len(sk.saved)-1]
	if last.State != store.JobFinished || len(last.Processes) != n {
		t.Errorf("last save: state %s, %d processes", last.State, len(last.Processes))
	}
	mx, err := RankMatrix(j, "p2p", "bytes")
	if err != nil {
		t.Fatal(err)
	}
	for r := range n {
		for c := range n {
			want := uint64(0)
			if c == (r+1)%n {
				want = 3000
			}
			if mx.Values[r][c] != want {
				t.Errorf("p2p[%d][%d] = %d, want %d", r, c, mx.Values[r][c], want)
			}
		}
	}
	nm, _ := NodeMatrix(j, "all", "bytes")
	// node0 = ranks 0,1; node1 = ranks 2,3. p2p 0->1 intra, 1->2 inter, 2->3 intra, 3->0 inter;
	// collectives 1->0 intra, 2->0 and 3->0 inter.
	want := [][]uint64{{3000 + 300, 3000}, {300 + 3000 + 300, 3000}}
	if fmt.Sprint(nm.Values) != fmt.Sprint(want) || fmt.Sprint(nm.Labels) != "[node0 node1]" {
		t.Errorf("node matrix %v %v, want %v", nm.Labels, nm.Values, want)
	}
	pr := BuildProfile(j)
	if pr.Functions[0] != "MPI_Recv" || pr.Totals[0].Calls != 4*30 || pr.TimeNS[0][0] != 1500e6 {
		t.Errorf("profile %+v", pr)
	}
	h := BuildHistogram(j, 1)
	if h.Job[8] != 4*30 || h.Peers[2][8] != 30 {
		t.Errorf("histogram %+v", h)
	}
	if rg := BuildRegions(j); len(rg) != 1 || rg[0].Entries != 12 || len(rg[0].Ranks) != n {
		t.Errorf("regions %+v", rg)
	}
	// Chunks per snapshot: a head, then one per peer row (ranks 1 and 2
	// have two peers).
	if got := value(m.accepted); got != 3*10 {
		t.Errorf("accepted %g, want %d", got, 3*10)
	}
	// Late datagrams of the finished job are stale.
	if err := add(t, tr, snapshot("7", 0, n, 1, false), now); reasonOf(err) != ReasonStale {
		t.Errorf("late datagram: %v", err)
	}
}

func TestTrackerRejects(t *testing.T) {
	tr, _, m, _ := newTracker(Options{ReassemblyTimeout: time.Second})
	now := t0
	must := func(d *agentpb.Datagram) {
		t.Helper()
		if err := add(t, tr, d, now); err != nil {
			t.Fatal(err)
		}
	}
	must(snapshot("9", 0, 4, 0, false))
	must(snapshot("9", 0, 4, 1, false))
	// Same snapshot again, and an older one.
	if err := add(t, tr, snapshot("9", 0, 4, 1, false), now); reasonOf(err) != ReasonStale {
		t.Errorf("repeat: %v", err)
	}
	// A counter going backwards within the run.
	back := snapshot("9", 0, 4, 2, false)
	back.Process.CpuUserSeconds = 1
	if err := add(t, tr, back, now); reasonOf(err) != ReasonBackwards {
		t.Errorf("backwards: %v", err)
	}
	// Times may wobble a little (agent clock conversion), counts may not.
	jitter := snapshot("9", 0, 4, 2, false)
	jitter.Functions[0].TimeNs = 400e6*2 - 500
	jitter.Process.MpiSeconds = 1.9999
	if err := add(t, tr, jitter, now); err != nil {
		t.Errorf("time jitter rejected: %v", err)
	}
	back = snapshot("9", 0, 4, 3, false)
	back.Functions[0].Calls = 1
	if err := add(t, tr, back, now); reasonOf(err) != ReasonBackwards {
		t.Errorf("calls backwards: %v", err)
	}
	back = snapshot("9", 0, 4, 3, false)
	back.Functions[0].TimeNs = 100e6
	if err := add(t, tr, back, now); reasonOf(err) != ReasonBackwards {
		t.Errorf("time far backwards: %v", err)
	}
	back = snapshot("9", 0, 4, 3, false)
	back.Peers[0].P2P.Bytes = 10
	if err := add(t, tr, back, now); reasonOf(err) != ReasonBackwards {
		t.Errorf("peer backwards: %v", err)
	}
	// A destination node's traffic going backwards, whichever row it is
	// (the rows arrive unsorted; a node new in this snapshot is no decrease).
	for i := range snapshot("9", 0, 4, 3, false).Nodes {
		back = snapshot("9", 0, 4, 3, false)
		back.Nodes = append([]*agentpb.NodeTraffic{{Node: "node9", P2P: &agentpb.Traffic{Bytes: 1, Msgs: 1}}}, back.Nodes...)
		slices.Reverse(back.Nodes)
		n := back.Nodes[i]
		if n.P2P.Bytes == 0 {
			continue
		}
		n.P2P.Bytes = 1
		if err := add(t, tr, back, now); reasonOf(err) != ReasonBackwards || !strings.Contains(err.Error(), "node "+n.Node) {
			t.Errorf("node %s backwards: %v", n.Node, err)
		}
	}
	// A new run (later start) may begin from zero.
	restart := snapshot("9", 0, 4, 0, false)
	restart.StartUnixNs += int64(time.Minute)
	restart.TimeUnixNs += int64(time.Minute)
	if err := add(t, tr, restart, now); err != nil {
		t.Errorf("new run rejected: %v", err)
	}
	// World size changes.
	if err := add(t, tr, snapshot("9", 1, 8, 0, false), now); reasonOf(err) != ReasonWorldChanged {
		t.Errorf("world change: %v", err)
	}
	// Chunks: duplicate, then a snapshot that never completes.
	parts := split(snapshot("9", 2, 4, 0, false), 1)
	must(parts[0])
	if err := add(t, tr, parts[0], now); reasonOf(err) != ReasonDuplicate {
		t.Errorf("duplicate chunk: %v", err)
	}
	now = now.Add(2 * time.Second)
	tr.Tick(now)
	if got := dropped(m, ReasonIncomplete); got != 1 {
		t.Errorf("incomplete = %g, want 1", got)
	}
	// Duplicate peers across chunks.
	d := snapshot("9", 3, 4, 0, false)
	d.Peers = append(d.Peers, proto.Clone(d.Peers[0]).(*agentpb.PeerTraffic))
	var last error
	for _, c := range split(d, 1) {
		last = add(t, tr, c, now)
	}
	if reasonOf(last) != ReasonPeer {
		t.Errorf("duplicate peer: %v", last)
	}
	for _, r := range []string{ReasonStale, ReasonBackwards, ReasonWorldChanged, ReasonDuplicate, ReasonPeer} {
		if dropped(m, r) == 0 {
			t.Errorf("reason %s not counted", r)
		}
	}
}

func TestTrackerTimeoutAndBounds(t *testing.T) {
	tr, sk, m, _ := newTracker(Options{JobTimeout: 10 * time.Second, MaxJobs: 2, Linger: time.Minute})
	now := t0
	for _, id := range []string{"a", "b"} {
		if err := add(t, tr, snapshot(id, 0, 2, 0, false), now); err != nil {
			t.Fatal(err)
		}
	}
	if err := add(t, tr, snapshot("c", 0, 2, 0, false), now); reasonOf(err) != ReasonTooManyJobs {
		t.Errorf("third job: %v", err)
	}
	now = now.Add(11 * time.Second)
	tr.Tick(now)
	j := tr.Publish(now).Jobs["a"]
	if j == nil || j.State != store.JobFinished || j.EndReason != store.EndTimeout {
		t.Fatalf("job a after timeout: %+v", j)
	}
	if len(sk.saved) < 2 {
		t.Errorf("timed-out jobs not saved: %d saves", len(sk.saved))
	}
	now = now.Add(2 * time.Minute)
	tr.Tick(now)
	if l := tr.Publish(now); len(l.Jobs) != 0 {
		t.Errorf("finished jobs still live after linger: %v", l.Jobs)
	}
	if err := add(t, tr, snapshot("c", 0, 2, 0, false), now); err != nil {
		t.Errorf("room again: %v", err)
	}
	_ = m
}

// TestPublishAfterFinal: the view published after the last rank's final
// report shows the job finished (a save rebuilding the view must not hide
// it from Publish).
func TestPublishAfterFinal(t *testing.T) {
	tr, _, _, _ := newTracker(Options{})
	for seq := uint64(0); seq < 2; seq++ {
		for r := range 2 {
			if err := add(t, tr, snapshot("f", r, 2, seq, seq == 1), t0); err != nil {
				t.Fatal(err)
			}
		}
		if seq == 0 {
			tr.Publish(t0)
		}
	}
	j := tr.Publish(t0).Jobs["f"].Full()
	if j.State != store.JobFinished || j.Finalized != 2 || j.Processes[0].Seq != 1 {
		t.Errorf("published %+v", j.JobSummary)
	}
}

// A job whose agent says it reports every 45 s is not timed out between
// its first and second snapshots, however short --job-timeout is.
func TestAgentIntervalSetsTimeout(t *testing.T) {
	tr, _, _, _ := newTracker(Options{JobTimeout: 10 * time.Second, JobTimeoutIntervals: 6, Linger: time.Minute})
	d := snapshot("slow", 0, 2, 0, false)
	d.IntervalNs = uint64(45 * time.Second)
	now := t0
	if err := add(t, tr, d, now); err != nil {
		t.Fatal(err)
	}
	now = now.Add(50 * time.Second)
	tr.Tick(now)
	if j := tr.Publish(now).Jobs["slow"]; j == nil || j.State == store.JobFinished {
		t.Fatalf("job timed out within one agent interval: %+v", j)
	}
	now = now.Add(6 * 45 * time.Second)
	tr.Tick(now)
	if j := tr.Publish(now).Jobs["slow"]; j == nil || j.State != store.JobFinished {
		t.Fatalf("job not timed out after 6 intervals of silence: %+v", j)
	}
}

// Ranks share one copy of the strings they repeat.
func TestTrackerInternsStrings(t *testing.T) {
	tr, _, _, _ := newTracker(Options{})
	for r := range 4 {
		if err := add(t, tr, snapshot("i", r, 4, 0, false), t0); err != nil {
			t.Fatal(err)
		}
	}
	ps := tr.Publish(t0).Jobs["i"].Full().Processes
	same := func(a, b string) bool { return len(a) > 0 && unsafe.StringData(a) == unsafe.StringData(b) }
	if !same(ps[0].User, ps[3].User) || !same(ps[0].Node, ps[1].Node) || !same(ps[0].Functions[0].Name, ps[2].Functions[0].Name) {
		t.Errorf("strings not interned: %q %q %q", ps[0].User, ps[0].Node, ps[0].Functions[0].Name)
	}
	if ps[0].Node != "node0" || ps[2].Node != "node1" || ps[0].Program != "ring" {
		t.Errorf("wrong strings: %q %q %q", ps[0].Node, ps[2].Node, ps[0].Program)
	}
	// Later snapshots keep sharing them, also when a rank's functions come
	// in another order and one of its strings changes.
	for r := range 4 {
		d := snapshot("i", r, 4, 1, false)
		if r == 2 {
			slices.Reverse(d.Functions)
			d.Process.Program = "ring2"
		}
		if err := add(t, tr, d, t0); err != nil {
			t.Fatal(err)
		}
	}
	ps = tr.Publish(t0.Add(time.Second)).Jobs["i"].Full().Processes
	last := len(ps[2].Functions) - 1
	if !same(ps[0].User, ps[2].User) || !same(ps[1].Node, ps[0].Node) || ps[2].Program != "ring2" ||
		ps[2].Functions[last].Name != ps[0].Functions[0].Name || !same(ps[2].Functions[last].Name, ps[0].Functions[0].Name) {
		t.Errorf("second snapshots: %q %q %q %q", ps[2].User, ps[2].Program, ps[2].Functions[last].Name, ps[0].Functions[0].Name)
	}
}

// Ranks' destination nodes are packed against a name table per job; a
// job whose agents keep inventing node names gets a new table past a
// bound, and every rank's rows still read back as sent.
func TestNodeNameTableBounded(t *testing.T) {
	tr, _, _, _ := newTracker(Options{Limits: Limits{MaxNodes: 4}})
	now := t0
	for seq := uint64(0); seq < 20; seq++ {
		for r := range 4 {
			d := snapshot("names", r, 4, seq, false)
			d.Nodes = d.Nodes[:0]
			for k := range 3 {
				d.Nodes = append(d.Nodes, &agentpb.NodeTraffic{Node: fmt.Sprintf("n%d-%d-%d", seq, r, k), P2P: &agentpb.Traffic{Bytes: 1}})
			}
			if err := add(t, tr, d, now); err != nil {
				t.Fatalf("seq %d rank %d: %v", seq, r, err)
			}
		}
		now = now.Add(5 * time.Second)
		j := tr.jobs["names"]
		if n := j.nodes.Len(); n > 16+3 {
			t.Fatalf("seq %d: name table of %d", seq, n)
		}
		for r := range 4 {
			rows := j.ranks[r].cur.ToNodes.Slice()
			if len(rows) != 3 || rows[2].Node != fmt.Sprintf("n%d-%d-2", seq, r) || rows[2].P2P.Bytes != 1 {
				t.Fatalf("seq %d rank %d: rows %+v", seq, r, rows)
			}
		}
	}
}

// A destination node reported twice in one snapshot, even far apart in an
// unsorted list, is refused.
func TestDuplicateNodeRefused(t *testing.T) {
	tr, _, _, _ := newTracker(Options{})
	d := snapshot("dup", 0, 4, 0, false)
	d.Nodes = append(d.Nodes, &agentpb.NodeTraffic{Node: "other", P2P: &agentpb.Traffic{Bytes: 1}}, proto.Clone(d.Nodes[0]).(*agentpb.NodeTraffic))
	if err := add(t, tr, d, t0); reasonOf(err) != ReasonPeer || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("a node twice: %v", err)
	}
}
