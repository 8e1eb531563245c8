package storetest

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/storecopy"
)

// fillAll writes some of everything a store holds, rollups, pruned link
// attribution and a topology version that ended included.
func fillAll(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	for i, topo := range []*fabric.Topology{Topo(2, 2, "EDR"), Topo(3, 2, "EDR"), Topo(3, 2, "HDR")} {
		_, _, err := s.SaveTopology(ctx, topo, T0.Add(time.Duration(i)*time.Hour))
		must("topology", err)
	}
	must("forwarding tables", s.SaveForwardingTables(ctx, fabric.ForwardingTables{0x1000: {0, 1, 2, 3}}, T0))
	must("forwarding tables", s.SaveForwardingTables(ctx, fabric.ForwardingTables{0x1000: {0, 2, 1, 3}}, T0.Add(time.Hour)))
	must("events", s.AddEvents(ctx, []fabric.Event{
		{Time: T0, Kind: fabric.EventNodeAdded, Node: 0x1000, Detail: "sw0"},
		{Time: T0.Add(time.Minute), Kind: fabric.EventLinkDown, Node: 0x1001, Port: 8, Detail: "sw1 port 8"}}))
	rollupSweeps(t, s, 2, 3, 2*time.Hour)
	for _, id := range []string{"j1", "j2"} {
		must("job", s.SaveJob(ctx, Job(id, 4, T0, store.JobFinished)))
	}
	run := Job("j3", 2, T0.Add(time.Hour), store.JobRunning)
	run.Scheduler = &store.SchedInfo{Scheduler: "slurm", ID: "j3", User: "alice", Nodes: []string{"node0", "node1"}}
	must("job", s.SaveJob(ctx, run))
	must("process samples", s.AddProcessSamples(ctx, processSamples("j1", 2, 2*time.Hour)))
	var links []store.LinkJobSample
	for i := range 6 {
		at := T0.Add(time.Duration(i+1) * 20 * time.Minute)
		links = append(links, store.LinkJobSample{Time: at, Span: 30 * time.Second, Job: "j1", Port: fabric.PortRef{GUID: 0x1000, Port: 8}, Bytes: uint64(100 * (i + 1))},
			store.LinkJobSample{Time: at, Span: 30 * time.Second, Job: "j2", Port: fabric.PortRef{GUID: 0x8000000000000030, Port: 36}, Bytes: 7})
	}
	must("link attribution", s.AddLinkJobSamples(ctx, links))
	// Raw samples of the first hour rolled up (ports into 5-minute and
	// 1-hour points), and the first hour of link attribution gone: the
	// jobs' running totals keep it, which no write API could rebuild.
	must("prune", s.Prune(ctx, store.Retention{Samples: T0.Add(time.Hour), PortRollups5m: T0.Add(30 * time.Minute),
		ProcessSamples: T0.Add(time.Hour), LinkJobSamples: T0.Add(time.Hour)}))
}

// testCopy copies a filled store into an empty one (storecopy) and
// compares what every read method answers, then checks that a second copy
// into the non-empty target is refused without Force and replaces it with.
func testCopy(t *testing.T, src, dst store.Store) {
	ctx := context.Background()
	from, ok1 := src.(storecopy.Engine)
	to, ok2 := dst.(storecopy.Engine)
	if !ok1 || !ok2 {
		t.Fatalf("the engine does not implement storecopy.Engine")
	}
	fillAll(t, src)
	var progress []storecopy.Progress
	rep, err := storecopy.Copy(ctx, from, to, storecopy.Options{Batch: 7, Progress: func(p storecopy.Progress) { progress = append(progress, p) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Tables) != len(storecopy.Tables) || rep.Rows == 0 {
		t.Fatalf("report %+v", rep)
	}
	done := 0
	for _, p := range progress {
		if p.Done {
			done++
			if p.Rows != p.Total {
				t.Errorf("progress %s", p)
			}
		}
	}
	if done != len(storecopy.Tables) {
		t.Errorf("%d tables reported done, want %d", done, len(storecopy.Tables))
	}
	if st, err := dst.Stats(ctx); err != nil || st.PortSamples == 0 || st.PortRollups == 0 || st.Jobs != 3 || st.Versions != 3 {
		t.Fatalf("the copy holds %+v (%v), want samples, rollups, 3 jobs and 3 versions", st, err)
	}
	sameAnswers(t, src, dst)

	// Nothing is added to a store that holds data, unless forced.
	if _, err := storecopy.Copy(ctx, from, to, storecopy.Options{}); err == nil {
		t.Fatal("copy into a non-empty store succeeded")
	}
	if _, err := storecopy.Copy(ctx, from, to, storecopy.Options{Force: true}); err != nil {
		t.Fatalf("forced copy: %v", err)
	}
	sameAnswers(t, src, dst)
	// The copy goes on as a store: new versions, events and samples.
	for _, s := range []store.Store{src, dst} {
		if v, changed, err := s.SaveTopology(ctx, Topo(4, 2, "HDR"), T0.Add(3*time.Hour)); err != nil || !changed || v != 4 {
			t.Fatalf("topology after the copy: version %d changed %v: %v", v, changed, err)
		}
		if err := s.AddEvents(ctx, []fabric.Event{{Time: T0.Add(3 * time.Hour), Kind: fabric.EventNodeAdded, Node: 0x1003}}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddPortSamples(ctx, Sweep(3, 3, 0, T0.Add(3*time.Hour))); err != nil {
			t.Fatal(err)
		}
	}
	sameAnswers(t, src, dst)
}

// sameAnswers compares what two stores answer to every read method.
func sameAnswers(t *testing.T, a, b store.Store) {
	t.Helper()
	ctx := context.Background()
	far := T0.Add(24 * time.Hour)
	type answer struct {
		name string
		fn   func(s store.Store) (any, error)
	}
	ports := allPorts(3, 3)
	answers := []answer{
		{"Versions", func(s store.Store) (any, error) { return s.Versions(ctx, T0.Add(-time.Hour), far) }},
		{"TopologyAt", func(s store.Store) (any, error) {
			topo, v, err := s.TopologyAt(ctx, T0.Add(90*time.Minute))
			return []any{topo, v}, err
		}},
		{"ForwardingTablesAt", func(s store.Store) (any, error) {
			ft, at, err := s.ForwardingTablesAt(ctx, T0.Add(90*time.Minute))
			return []any{ft, at}, err
		}},
		{"Events", func(s store.Store) (any, error) {
			return s.Events(ctx, store.EventQuery{From: T0, To: far, Limit: 100})
		}},
		{"PortSeries", func(s store.Store) (any, error) { return s.PortSeries(ctx, ports, time.Time{}, time.Time{}) }},
		{"LatestSamples", func(s store.Store) (any, error) { return s.LatestSamples(ctx, T0.Add(20*time.Minute), time.Hour) }},
		{"Jobs", func(s store.Store) (any, error) {
			l, n, err := s.Jobs(ctx, store.JobQuery{Sort: "bytes"})
			return []any{l, n}, err
		}},
		{"Jobs of alice", func(s store.Store) (any, error) {
			l, n, err := s.Jobs(ctx, store.JobQuery{Owner: "alice"})
			return []any{l, n}, err
		}},
		{"Job", func(s store.Store) (any, error) { return s.Job(ctx, "j1") }},
		{"ProcessSamples", func(s store.Store) (any, error) { return s.ProcessSamples(ctx, "j1", nil, time.Time{}, time.Time{}) }},
		{"LinkJobs", func(s store.Store) (any, error) { return s.LinkJobs(ctx, nil, time.Time{}, far) }},
		{"JobLinks", func(s store.Store) (any, error) { return s.JobLinks(ctx, "j1", time.Time{}, time.Time{}, 0) }},
		{"JobLinks in a range", func(s store.Store) (any, error) { return s.JobLinks(ctx, "j2", T0, far, 0) }},
		{"Stats", func(s store.Store) (any, error) {
			st, err := s.Stats(ctx)
			st.Bytes = 0
			return st, err
		}},
	}
	for _, x := range answers {
		va, errA := x.fn(a)
		vb, errB := x.fn(b)
		if errA != nil || errB != nil {
			t.Errorf("%s: %v / %v", x.name, errA, errB)
			continue
		}
		if !reflect.DeepEqual(va, vb) {
			t.Errorf("%s differs:\nsource %+v\ncopy   %+v", x.name, va, vb)
		}
	}
}
