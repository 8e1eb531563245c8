package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
)

// FabricOpener opens one fresh, empty database once per fabric name: one
// store per collector, all on the same database. The suite closes them.
type FabricOpener func(t *testing.T, fabrics ...string) []store.Store

// RunFabrics checks several collectors' fabrics on one database: each
// store versions its own fabric's topology and routes, and every store
// reads all fabrics.
func RunFabrics(t *testing.T, open FabricOpener) {
	ss := open(t, "east", "west")
	defer func() {
		for _, s := range ss {
			if err := s.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		}
	}()
	testFabrics(t, ss[0], ss[1])
	testJoinedJobs(t, ss[0], ss[1])
	testConcurrentParts(t, ss[0], ss[1])
}

// Shifted is t with every GUID moved by off and every host renamed with
// prefix: another fabric built like t (same LIDs: each subnet numbers its
// own).
func Shifted(t *fabric.Topology, off fabric.GUID, prefix string) *fabric.Topology {
	nodes := make([]fabric.Node, len(t.Nodes))
	for i, n := range t.Nodes {
		n.GUID += off
		if n.PortGUIDs != nil {
			pg := make([]fabric.GUID, len(n.PortGUIDs))
			for j, g := range n.PortGUIDs {
				if g != 0 {
					pg[j] = g + off
				}
			}
			n.PortGUIDs = pg
		}
		n.Description = prefix + n.Description
		nodes[i] = n
	}
	links := make([]fabric.Link, len(t.Links))
	for i, l := range t.Links {
		l.A.GUID += off
		l.B.GUID += off
		links[i] = l
	}
	out, err := fabric.NewTopology(nodes, links)
	if err != nil {
		panic(err)
	}
	return out
}

func testFabrics(t *testing.T, east, west store.Store) {
	ctx := context.Background()
	a, b := Topo(2, 2, "EDR"), Shifted(Topo(3, 2, "EDR"), 0x10000000, "w")
	va, _, err := east.SaveTopology(ctx, a, T0)
	if err != nil {
		t.Fatal(err)
	}
	// One fabric in the database: read exactly as saved.
	got, v, err := west.TopologyAt(ctx, T0.Add(30*time.Second))
	if err != nil || v.ID != va || v.Fabric != "east" || !reflect.DeepEqual(got.Nodes, a.Nodes) {
		t.Fatalf("TopologyAt with one fabric: version %+v, %v; want east's version %d as saved", v, err, va)
	}
	vb, changed, err := west.SaveTopology(ctx, b, T0.Add(time.Minute))
	if err != nil || !changed {
		t.Fatalf("west's first topology: %v %v", changed, err)
	}
	// East's fabric is unchanged: west's save is not a newer version of it.
	if v, changed, err := east.SaveTopology(ctx, Topo(2, 2, "EDR"), T0.Add(2*time.Minute)); err != nil || changed || v != va {
		t.Errorf("east saved again unchanged after west saved: version %d changed %v (%v), want %d unchanged", v, changed, err, va)
	}
	for _, c := range []struct {
		s    store.Store
		name string
		want *fabric.Topology
		id   int64
	}{{east, "east", a, va}, {east, "west", b, vb}, {west, "east", a, va}} {
		got, v, err := c.s.FabricTopologyAt(ctx, c.name, T0.Add(5*time.Minute))
		if err != nil || v.ID != c.id || v.Fabric != c.name || !reflect.DeepEqual(got.Nodes, c.want.Nodes) || !reflect.DeepEqual(got.Links, c.want.Links) {
			t.Errorf("FabricTopologyAt(%s): version %+v, %v; want %d with the saved content", c.name, v, err, c.id)
		}
	}

	merged, mv, err := east.TopologyAt(ctx, T0.Add(5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if mv.ID != vb || mv.Fabric != "" || !mv.From.Equal(T0.Add(time.Minute)) || mv.Nodes != len(a.Nodes)+len(b.Nodes) || mv.Links != len(a.Links)+len(b.Links) {
		t.Errorf("merged version %+v: want id %d, from west's start, nodes and links of both", mv, vb)
	}
	if f := merged.Fabrics(); !reflect.DeepEqual(f, []string{"east", "west"}) {
		t.Errorf("merged view's fabrics: %v", f)
	}
	for _, want := range []struct {
		top  *fabric.Topology
		name string
	}{{a, "east"}, {b, "west"}} {
		for _, n := range want.top.Nodes {
			m, ok := merged.Node(n.GUID)
			if !ok || m.Fabric != want.name || m.Description != n.Description {
				t.Fatalf("merged view: node %s of %s: %+v (found %v)", n.GUID, want.name, m, ok)
			}
		}
		for _, l := range want.top.Links {
			if _, ok := merged.LinkAt(l.A); !ok {
				t.Errorf("merged view lacks %s's link %s", want.name, l.ID())
			}
		}
	}
	// Both fabrics number their hosts from LID 100: a LID names no port.
	if _, ok := merged.PortByLID(100); ok || len(merged.SharedLID(100)) != 2 {
		t.Errorf("LID 100 in both fabrics: PortByLID found a port, SharedLID %v", merged.SharedLID(100))
	}

	// East changes; west's version stays current.
	a2 := Topo(2, 3, "EDR")
	va2, changed, err := east.SaveTopology(ctx, a2, T0.Add(10*time.Minute))
	if err != nil || !changed {
		t.Fatalf("east's second topology: %v %v", changed, err)
	}
	vs, err := west.Versions(ctx, T0.Add(11*time.Minute), T0.Add(11*time.Minute))
	if err != nil || len(vs) != 2 || vs[0].ID != vb || vs[0].Fabric != "west" || !vs[0].Until.IsZero() || vs[1].ID != va2 || vs[1].Fabric != "east" {
		t.Errorf("Versions now: %+v (%v), want west's %d and east's %d, both current", vs, err, vb, va2)
	}
	vs, _ = west.Versions(ctx, T0, T0.Add(time.Hour))
	if len(vs) != 3 || vs[0].ID != va || !vs[0].Until.Equal(T0.Add(10*time.Minute)) {
		t.Errorf("Versions of the hour: %+v, want east's first closed when east changed", vs)
	}
	if _, v, _ := west.TopologyAt(ctx, T0.Add(11*time.Minute)); v.ID != va2 || v.Nodes != len(a2.Nodes)+len(b.Nodes) {
		t.Errorf("merged version after east changed: %+v, want id %d", v, va2)
	}

	// Routes: each collector's own tables, read together.
	fa := fabric.ForwardingTables{0x1000: {255, 1, 2}, 0x1001: {255, 8, 8}}
	fb := fabric.ForwardingTables{0x10001000: {255, 3, 3}}
	if err := east.SaveForwardingTables(ctx, fa, T0); err != nil {
		t.Fatal(err)
	}
	if err := west.SaveForwardingTables(ctx, fb, T0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := east.SaveForwardingTables(ctx, fa, T0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	ft, from, err := west.ForwardingTablesAt(ctx, T0.Add(3*time.Minute))
	want := fabric.ForwardingTables{0x1000: fa[0x1000], 0x1001: fa[0x1001], 0x10001000: fb[0x10001000]}
	if err != nil || !reflect.DeepEqual(ft, want) || !from.Equal(T0.Add(time.Minute)) {
		t.Errorf("ForwardingTablesAt: %v from %s (%v); want both fabrics' from west's save (east's unchanged tables not saved again)", ft, from, err)
	}
	fa2 := fabric.ForwardingTables{0x1000: {255, 2, 1}, 0x1001: {255, 8, 8}}
	if err := east.SaveForwardingTables(ctx, fa2, T0.Add(20*time.Minute)); err != nil {
		t.Fatal(err)
	}

	// Events carry the fabric they were recorded in.
	if err := east.AddEvents(ctx, []fabric.Event{{Time: T0, Kind: fabric.EventLinkDown, Node: 0x1000, Port: 8, Detail: "east down"}}); err != nil {
		t.Fatal(err)
	}
	if err := west.AddEvents(ctx, []fabric.Event{{Time: T0.Add(time.Second), Kind: fabric.EventLinkUp, Node: 0x10001000, Port: 1, Detail: "west up"}}); err != nil {
		t.Fatal(err)
	}
	ev, err := east.Events(ctx, store.EventQuery{})
	if err != nil || len(ev) != 2 || ev[0].Fabric != "west" || ev[0].Detail != "west up" || ev[1].Fabric != "east" || ev[1].Detail != "east down" {
		t.Errorf("Events: %+v (%v), want west's then east's, each with its fabric", ev, err)
	}

	// Retention keeps, of each fabric, the version and routes in force.
	if err := west.Prune(ctx, store.Retention{Topology: T0.Add(30 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	ft, _, err = east.ForwardingTablesAt(ctx, T0.Add(30*time.Minute))
	want = fabric.ForwardingTables{0x1000: fa2[0x1000], 0x1001: fa2[0x1001], 0x10001000: fb[0x10001000]}
	if err != nil || !reflect.DeepEqual(ft, want) {
		t.Errorf("ForwardingTablesAt after pruning: %v (%v), want each fabric's latest", ft, err)
	}
	if _, v, err := east.TopologyAt(ctx, T0.Add(30*time.Minute)); err != nil || v.ID != va2 || v.Nodes != len(a2.Nodes)+len(b.Nodes) {
		t.Errorf("TopologyAt after pruning: %+v (%v), want both fabrics' current versions", v, err)
	}

	// Two fabrics that share a GUID cannot be shown together.
	if _, _, err := west.SaveTopology(ctx, Topo(1, 1, "EDR"), T0.Add(40*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := east.TopologyAt(ctx, T0.Add(41*time.Minute)); err == nil || !strings.Contains(err.Error(), `fabric "east" and in fabric "west"`) {
		t.Errorf("TopologyAt with a GUID in two fabrics: %v, want an error naming both", err)
	}
}

// part is the ranks [from, from+n) of a job of size ranks, as the
// collector they report to saves them.
func part(id string, from, n, ranks int, start time.Time, state string) *store.Job {
	j := Job(id, from+n, start, state)
	j.Processes = j.Processes[from:]
	j.Ranks, j.Reporting, j.Finalized = ranks, n, 0
	j.Traffic.P2P.Bytes = 0
	j.CPUSeconds, j.CPUPercent = 0, float64(10*from+10)
	for _, p := range j.Processes {
		j.Traffic.P2P.Bytes += p.Functions[0].BytesSent
		j.CPUSeconds += p.CPUUser
	}
	j.Total = j.Traffic.Total()
	j.Agent, j.TrafficModel, j.TrafficSource = true, store.TrafficLogical, store.SourceAgent
	j.Attribution = &store.Attribution{Bytes: 100 * uint64(from+1), UnmappedNodes: []string{"far", fmt.Sprintf("near%d", from)}, UnmappedBytes: 7, Intervals: from + 1}
	return j
}

// testJoinedJobs saves a job whose ranks report to two collectors: each
// saves its part, and the job reads as their join by id.
func testJoinedJobs(t *testing.T, east, west store.Store) {
	ctx := context.Background()
	a, b := part("span", 0, 3, 5, T0, store.JobRunning), part("span", 3, 2, 5, T0.Add(time.Second), store.JobRunning)
	if err := east.SaveJob(ctx, a); err != nil {
		t.Fatal(err)
	}
	// One part: the job reads exactly as saved.
	if got, err := west.JobSummary(ctx, "span"); err != nil || !reflect.DeepEqual(*got, a.JobSummary) {
		t.Errorf("one part: %+v (%v), want east's summary as saved", got, err)
	}
	if _, err := west.JobPart(ctx, "span"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("west's part before it saved one: %v, want ErrNotFound", err)
	}
	if err := west.SaveJob(ctx, b); err != nil {
		t.Fatal(err)
	}
	for _, s := range []store.Store{east, west} {
		j, err := s.Job(ctx, "span")
		if err != nil {
			t.Fatal(err)
		}
		if len(j.Processes) != 5 || j.Processes[0].Rank != 0 || j.Processes[4].Rank != 4 {
			t.Errorf("joined job's processes: %d", len(j.Processes))
		}
		if j.State != store.JobRunning || j.Ranks != 5 || j.Reporting != 5 || !j.Start.Equal(T0) || !j.Updated.Equal(b.Updated) ||
			j.Traffic.P2P.Bytes != 15000 || j.Total.Bytes != 15000 || j.CPUSeconds != 7.5 || j.Nodes != 4 ||
			j.CPUPercent != (10*3+40*2)/5.0 || j.Memory != 0 {
			t.Errorf("joined job: %+v", j.JobSummary)
		}
		if at := j.Attribution; at == nil || at.Bytes != 500 || at.UnmappedBytes != 14 || !reflect.DeepEqual(at.UnmappedNodes, []string{"far"}) || at.Intervals != 4 {
			t.Errorf("joined attribution: %+v", at)
		}
	}
	if l, n, err := east.Jobs(ctx, store.JobQuery{Sort: "bytes"}); err != nil || n != 1 || l[0].Total.Bytes != 15000 {
		t.Errorf("jobs list: %d jobs, %+v (%v), want the joined one", n, l, err)
	}
	if p, err := west.JobPart(ctx, "span"); err != nil || !reflect.DeepEqual(*p, b.JobSummary) {
		t.Errorf("west's part: %+v (%v), want what west saved", p, err)
	}
	// East's ranks end; the job runs on while west's do.
	a.State, a.End, a.EndReason = store.JobFinished, T0.Add(2*time.Minute), store.EndFinal
	if err := east.SaveJob(ctx, &store.Job{JobSummary: a.JobSummary}); err != nil {
		t.Fatal(err)
	}
	if l, _, _ := west.Jobs(ctx, store.JobQuery{State: store.JobRunning}); len(l) != 1 || !l[0].End.IsZero() {
		t.Errorf("running jobs after one part ended: %+v, want the job running", l)
	}
	b.State, b.End, b.EndReason = store.JobFinished, T0.Add(3*time.Minute), store.EndTimeout
	if err := west.SaveJob(ctx, &store.Job{JobSummary: b.JobSummary}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []store.Store{east, west} {
		if ids, err := s.SharedJobs(ctx, T0.Add(3*time.Minute)); err != nil || !reflect.DeepEqual(ids, []string{"span"}) {
			t.Errorf("SharedJobs: %v (%v), want the joined job", ids, err)
		}
		if ids, err := s.SharedJobs(ctx, T0.Add(4*time.Minute)); err != nil || len(ids) != 0 {
			t.Errorf("SharedJobs since after it ended: %v (%v), want none", ids, err)
		}
	}
	js, err := east.JobSummary(ctx, "span")
	if err != nil || js.State != store.JobFinished || !js.End.Equal(b.End) || js.EndReason != store.EndTimeout || js.Duration != 180 {
		t.Errorf("finished joined job: %+v (%v), want the last part's end", js, err)
	}
	if err := west.Prune(ctx, store.Retention{Jobs: T0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := east.JobPart(ctx, "span"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("east's part after the job expired: %v", err)
	}
}

// testConcurrentParts has two collectors save their parts of one job at
// the same time, over and over, as their daemons do: whichever saves last,
// the job reads as the join of both last parts (the attribution bytes of
// each save are its round, so the join's are the sum of both last rounds).
func testConcurrentParts(t *testing.T, east, west store.Store) {
	ctx := context.Background()
	const rounds = 40
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for k, s := range []store.Store{east, west} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; i <= rounds; i++ {
				j := part("race", 3*k, 3-k, 5, T0, store.JobRunning)
				j.Attribution.Bytes = uint64(i * (k + 1))
				if errs[k] = s.SaveJob(ctx, j); errs[k] != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	for k, err := range errs {
		if err != nil {
			t.Fatalf("collector %d: %v", k, err)
		}
	}
	for _, s := range []store.Store{east, west} {
		js, err := s.JobSummary(ctx, "race")
		if err != nil || js.Attribution == nil || js.Attribution.Bytes != rounds*3 || js.Ranks != 5 || js.Reporting != 5 {
			t.Fatalf("job saved by two collectors at once: %+v (%v), want the join of both last parts (%d attributed bytes, 5 ranks)", js, err, rounds*3)
		}
	}
}
