package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/store"
)

// Job builds a job of n ranks on two nodes: rank i sent (i+1)*1000 bytes of
// point-to-point traffic to rank (i+1)%n, and calls MPI_Send.
func Job(id string, n int, start time.Time, state string) *store.Job {
	j := &store.Job{JobSummary: store.JobSummary{ID: id, State: state, Start: start, Updated: start.Add(time.Minute), Ranks: n, Reporting: n}}
	if state == store.JobFinished {
		j.End, j.EndReason = start.Add(time.Minute), store.EndFinal
	}
	for i := range n {
		b := uint64(i+1) * 1000
		p := store.Process{Rank: i, Node: fmt.Sprintf("node%d", i%2), Host: "h", PID: uint32(100 + i), Start: start,
			Time: start.Add(time.Minute), Seq: 3, ProcessUsage: store.ProcessUsage{CPUUser: 1.5, Wall: 60, MPI: 0.25, VmRSS: 1 << 20},
			Functions: []store.Function{{Name: "MPI_Send", Calls: 1, TimeNS: 500, BytesSent: b}},
			Regions:   []store.Region{{Name: "solve", Entries: 1, TimeNS: 1e9}},
			ToNodes:   store.NewNodeRows([]store.NodeTraffic{{Node: fmt.Sprintf("node%d", (i+1)%2), Classes: store.Classes{P2P: store.Traffic{Bytes: b, Msgs: 1}}}}),
			Peers: store.NewPeerRows([]store.PeerTraffic{{Peer: (i + 1) % n, Classes: store.Classes{P2P: store.Traffic{Bytes: b, Msgs: 1}},
				Histogram: []uint64{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}}}),
		}
		j.Processes = append(j.Processes, p)
	}
	j.Traffic.P2P.Bytes = uint64(n*(n+1)/2) * 1000
	j.Total = j.Traffic.Total()
	j.Nodes = min(n, 2)
	return j
}

func testJobs(t *testing.T, s store.Store) {
	ctx := context.Background()
	if _, err := s.Job(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Job(unknown): %v, want ErrNotFound", err)
	}
	j := Job("1234", 4, T0, store.JobRunning)
	// Rank 1 had CUDA loaded and ran NCCL: its GPU section is kept as is.
	j.Processes[1].GPU = &store.GPU{Probed: true,
		Functions:   []store.GPUFunction{{Name: "MPI_Send", Send: store.BufferKinds{Device: store.Traffic{Bytes: 2000, Msgs: 1}}}},
		Peers:       []store.GPUPeer{{Peer: 0, ReceivedInto: store.BufferKinds{Pinned: store.Traffic{Bytes: 1000, Msgs: 1}}}, {Peer: 2, SentFrom: store.BufferKinds{Device: store.Traffic{Bytes: 2000, Msgs: 1}}}},
		NCCLOps:     []store.NCCLOp{{Comm: 0xfedcba9876543210, CommSize: 4, CommRank: 1, Name: "AllReduce", Algorithm: "RING", Protocol: "LL", Calls: 3, Bytes: 3 << 20, TimeNS: 4e6}},
		NCCLVersion: "2.28.9", NCCLProfilerInterface: 5}
	// Every rank reordered itself once (netloom_reorder): kept as is.
	for r := range j.Processes {
		j.Processes[r].Reorders = []store.Reorder{{Time: T0.Add(3 * time.Second), Ranks: 4, CommWorld: true, Nodes: 2, Method: "scotch",
			Moved: 2, OldRank: r, NewRank: []int{0, 2, 1, 3}[r], InterNodeBefore: 4000, InterNodeAfter: 2000, TotalBytes: 8000, Since: "warm",
			Seconds: 0.002, MapSeconds: 0.001}}
	}
	if err := s.SaveJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	got, err := s.Job(ctx, "1234")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.JobSummary, j.JobSummary) {
		t.Errorf("summary:\n got %+v\nwant %+v", got.JobSummary, j.JobSummary)
	}
	if !reflect.DeepEqual(got.Processes, j.Processes) {
		t.Errorf("processes:\n got %+v\nwant %+v", got.Processes, j.Processes)
	}
	// Saving only the changed rank keeps the others.
	upd := &store.Job{JobSummary: j.JobSummary}
	upd.State, upd.End, upd.EndReason = store.JobFinished, T0.Add(2*time.Minute), store.EndTimeout
	p := j.Processes[2]
	p.Seq, p.Final = 4, true
	upd.Processes = []store.Process{p}
	if err := s.SaveJob(ctx, upd); err != nil {
		t.Fatal(err)
	}
	got, err = s.Job(ctx, "1234")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != store.JobFinished || got.EndReason != store.EndTimeout || !got.End.Equal(upd.End) {
		t.Errorf("after update: state %s %s end %s", got.State, got.EndReason, got.End)
	}
	if len(got.Processes) != 4 || got.Processes[2].Seq != 4 || !got.Processes[2].Final || got.Processes[1].Seq != 3 {
		t.Errorf("after update: processes %+v", got.Processes)
	}
	if err := s.SaveJob(ctx, &store.Job{}); err == nil {
		t.Error("saving a job without an id succeeded")
	}
}

func testJobList(t *testing.T, s store.Store) {
	ctx := context.Background()
	if l, n, err := s.Jobs(ctx, store.JobQuery{}); err != nil || n != 0 || len(l) != 0 {
		t.Fatalf("empty store: %v %d %v", l, n, err)
	}
	for i := range 5 {
		state := store.JobFinished
		if i%2 == 0 {
			state = store.JobRunning
		}
		j := Job(fmt.Sprintf("j%d", i), 2+i%3, T0.Add(time.Duration(i)*time.Hour), state)
		// j0, j2: alice by the agents' word; j1: bob's per the scheduler
		// though the agents claimed alice; j3, j4: bob.
		j.User = []string{"alice", "alice", "alice", "bob", "bob"}[i]
		if i == 1 {
			j.Scheduler = &store.SchedInfo{Scheduler: "slurm", ID: "j1", User: "bob"}
		}
		if err := s.SaveJob(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(l []store.JobSummary) []string {
		out := []string{}
		for _, j := range l {
			out = append(out, j.ID)
		}
		return out
	}
	for _, c := range []struct {
		q     store.JobQuery
		want  []string
		total int
	}{
		{store.JobQuery{}, []string{"j4", "j3", "j2", "j1", "j0"}, 5},
		{store.JobQuery{Asc: true, Limit: 2}, []string{"j0", "j1"}, 5},
		{store.JobQuery{Limit: 2, Offset: 2}, []string{"j2", "j1"}, 5},
		{store.JobQuery{State: store.JobRunning}, []string{"j4", "j2", "j0"}, 3},
		{store.JobQuery{State: store.JobFinished, Sort: "start", Asc: true}, []string{"j1", "j3"}, 2},
		// ranks: j0 2, j1 3, j2 4, j3 2, j4 3; ties by id.
		{store.JobQuery{Sort: "ranks"}, []string{"j2", "j1", "j4", "j0", "j3"}, 5},
		{store.JobQuery{Sort: "p2p_bytes", Asc: true}, []string{"j0", "j3", "j1", "j4", "j2"}, 5},
		{store.JobQuery{Exclude: []string{"j4", "j0"}}, []string{"j3", "j2", "j1"}, 3},
		{store.JobQuery{Owner: "alice"}, []string{"j2", "j0"}, 2},
		{store.JobQuery{Owner: "bob", Asc: true}, []string{"j1", "j3", "j4"}, 3},
		{store.JobQuery{Owner: "mallory"}, []string{}, 0},
		// Finished jobs end a minute after they start; running ones run on.
		{store.JobQuery{From: T0.Add(90 * time.Minute), To: T0.Add(3*time.Hour + 30*time.Second)}, []string{"j3", "j2", "j0"}, 3},
		{store.JobQuery{From: T0.Add(62 * time.Minute)}, []string{"j4", "j3", "j2", "j0"}, 4},
		{store.JobQuery{From: T0.Add(61 * time.Minute)}, []string{"j4", "j3", "j2", "j1", "j0"}, 5},
		{store.JobQuery{To: T0.Add(time.Hour)}, []string{"j1", "j0"}, 2},
	} {
		l, n, err := s.Jobs(ctx, c.q)
		if err != nil {
			t.Errorf("Jobs(%+v): %v", c.q, err)
			continue
		}
		if !reflect.DeepEqual(ids(l), c.want) || n != c.total {
			t.Errorf("Jobs(%+v) = %v (total %d), want %v (total %d)", c.q, ids(l), n, c.want, c.total)
		}
	}
	for _, key := range store.JobSortKeys {
		if _, _, err := s.Jobs(ctx, store.JobQuery{Sort: key}); err != nil {
			t.Errorf("sort by %s: %v", key, err)
		}
	}
	if _, _, err := s.Jobs(ctx, store.JobQuery{Sort: "id; DROP TABLE jobs"}); err == nil {
		t.Error("unknown sort key accepted")
	}
	if _, _, err := s.Jobs(ctx, store.JobQuery{State: "sleeping"}); err == nil {
		t.Error("unknown state accepted")
	}
}

func testProcessSamples(t *testing.T, s store.Store) {
	ctx := context.Background()
	var in []store.ProcessSample
	for i := range 3 {
		for rank := range 2 {
			in = append(in, store.ProcessSample{Job: "7", Rank: rank, Time: T0.Add(time.Duration(i) * 5 * time.Second), Span: 5 * time.Second,
				CPUUser: 4.5, CPUSystem: 0.25, MPI: 1.125, Wait: float64(rank) * 0.5, VmRSS: 1 << 30, VmSize: 2 << 30, IORead: 7, IOWrite: 8, MPIIORead: 9, MPIIOWrite: 10,
				Traffic:   store.Classes{P2P: store.Traffic{Bytes: uint64(1000 * i), Msgs: 3}, Coll: store.Traffic{Bytes: 11, Msgs: 1}, RMA: store.Traffic{Bytes: 12, Msgs: 2}},
				IntraNode: store.Traffic{Bytes: 13, Msgs: 4}, InterNode: store.Traffic{Bytes: 1 << 40, Msgs: 5}})
		}
	}
	if err := s.AddProcessSamples(ctx, in); err != nil {
		t.Fatal(err)
	}
	got, err := s.ProcessSamples(ctx, "7", nil, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || len(got[0]) != 3 || len(got[1]) != 3 {
		t.Fatalf("samples: %v", got)
	}
	for i, x := range got[1] {
		want := in[2*i+1]
		want.Time = want.Time.UTC()
		if !reflect.DeepEqual(x, want) {
			t.Errorf("sample %d:\n got %+v\nwant %+v", i, x, want)
		}
	}
	got, err = s.ProcessSamples(ctx, "7", []int{0}, T0.Add(time.Second), T0.Add(time.Minute))
	if err != nil || len(got) != 1 || len(got[0]) != 2 {
		t.Errorf("rank 0 from T0+1s: %v %v", got, err)
	}
	if got, err := s.ProcessSamples(ctx, "other", nil, time.Time{}, time.Time{}); err != nil || len(got) != 0 {
		t.Errorf("other job: %v %v", got, err)
	}
	if err := s.AddProcessSamples(ctx, []store.ProcessSample{{Rank: 1, Time: T0}}); err == nil {
		t.Error("a sample without a job was stored")
	}
}

func testPruneJobs(t *testing.T, s store.Store) {
	ctx := context.Background()
	old := Job("old", 2, T0, store.JobFinished)
	running := Job("running", 2, T0, store.JobRunning)
	fresh := Job("fresh", 2, T0.Add(time.Hour), store.JobFinished)
	for _, j := range []*store.Job{old, running, fresh} {
		if err := s.SaveJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		if err := s.AddProcessSamples(ctx, []store.ProcessSample{{Job: j.ID, Rank: 0, Time: j.Start.Add(time.Second)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Prune(ctx, store.Retention{Jobs: T0.Add(30 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Job(ctx, "old"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("old finished job kept: %v", err)
	}
	for _, id := range []string{"running", "fresh"} {
		if _, err := s.Job(ctx, id); err != nil {
			t.Errorf("job %s: %v", id, err)
		}
	}
	if got, _ := s.ProcessSamples(ctx, "old", nil, time.Time{}, time.Time{}); len(got) != 0 {
		t.Errorf("samples of the pruned job kept: %v", got)
	}
	if err := s.Prune(ctx, store.Retention{ProcessSamples: T0.Add(30 * time.Minute), ProcessRollups5m: T0.Add(time.Hour), ProcessRollups1h: T0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.ProcessSamples(ctx, "running", nil, time.Time{}, time.Time{}); len(got) != 0 {
		t.Errorf("old samples kept: %v", got)
	}
	if got, _ := s.ProcessSamples(ctx, "fresh", nil, time.Time{}, time.Time{}); len(got[0]) != 1 {
		t.Errorf("fresh samples pruned: %v", got)
	}
	st, err := s.Stats(ctx)
	if err != nil || st.Jobs != 2 {
		t.Errorf("stats: %+v %v", st, err)
	}
}
