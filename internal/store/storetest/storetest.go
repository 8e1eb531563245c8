// Package storetest is the conformance suite every store.Store engine
// passes: call Run from the engine's tests with a function that opens a
// fresh, empty store.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
)

// Opener returns a fresh, empty store; the suite closes it.
type Opener func(t *testing.T) store.Store

// Run runs every conformance test as a subtest. reopen, when not nil,
// also runs the tests that close and reopen a store.
func Run(t *testing.T, open Opener, reopen Reopener) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"Topology", testTopology},
		{"TopologyPortNames", testTopologyPortNames},
		{"ForwardingTables", testForwardingTables},
		{"Events", testEvents},
		{"PortSamples", testPortSamples},
		{"LatestSamples", testLatestSamples},
		{"BadSamples", testBadSamples},
		{"Prune", testPrune},
		{"Empty", testEmpty},
		{"Jobs", testJobs},
		{"JobList", testJobList},
		{"ProcessSamples", testProcessSamples},
		{"PruneJobs", testPruneJobs},
		{"Attribution", testAttribution},
		{"SchedJobs", testSchedJobs},
		{"PortRollups", testPortRollups},
		{"PortRollupTiers", testPortRollupTiers},
		{"ProcessRollups", testProcessRollups},
		{"PruneKinds", testPruneKinds},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			defer func() {
				if err := s.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
			}()
			tc.fn(t, s)
		})
	}
	t.Run("Copy", func(t *testing.T) {
		a, b := open(t), open(t)
		defer a.Close()
		defer b.Close()
		testCopy(t, a, b)
	})
	if reopen == nil {
		return
	}
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s store.Store, reopen Reopener) store.Store
	}{
		{"PortRollupResume", testPortRollupResume},
		{"ProcessRollupResume", testProcessRollupResume},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			defer func() {
				if err := s.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
			}()
			s = tc.fn(t, s, reopen)
		})
	}
}

// T0 is the suite's epoch.
var T0 = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

// Topo builds a small fat tree: sw switches of 8 ports, each with hosts
// CAs on its first ports, switches joined in a ring on their last port.
func Topo(sw, hosts int, speed string) *fabric.Topology {
	var nodes []fabric.Node
	var links []fabric.Link
	for i := 0; i < sw; i++ {
		g := fabric.GUID(0x1000 + i)
		nodes = append(nodes, fabric.Node{GUID: g, Type: fabric.Switch, Description: fmt.Sprintf("sw%d", i), LID: fabric.LID(1 + i), Ports: 8})
		for h := 0; h < hosts; h++ {
			hg := fabric.GUID(0x100000 + i*100 + h)
			lid := fabric.LID(100 + i*hosts + h)
			nodes = append(nodes, fabric.Node{GUID: hg, Type: fabric.CA, Description: fmt.Sprintf("n%d HCA-1", i*hosts+h), LID: lid,
				Ports: 1, PortLIDs: []fabric.LID{0, lid}, PortGUIDs: []fabric.GUID{0, hg + 1}})
			links = append(links, fabric.NewLink(fabric.PortRef{GUID: g, Port: 1 + h}, fabric.PortRef{GUID: hg, Port: 1}, "4X", speed, "Active"))
		}
		if sw > 1 {
			next := fabric.GUID(0x1000 + (i+1)%sw)
			if sw > 2 || i == 0 {
				links = append(links, fabric.NewLink(fabric.PortRef{GUID: g, Port: 8}, fabric.PortRef{GUID: next, Port: 7}, "4X", speed, "Active"))
			}
		}
	}
	t, err := fabric.NewTopology(nodes, links)
	if err != nil {
		panic(err)
	}
	return t
}

func testTopology(t *testing.T, s store.Store) {
	ctx := context.Background()
	if _, _, err := s.TopologyAt(ctx, T0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("TopologyAt on empty store: %v, want ErrNotFound", err)
	}
	a, b := Topo(4, 3, "EDR"), Topo(4, 3, "HDR")
	v1, changed, err := s.SaveTopology(ctx, a, T0)
	if err != nil || !changed {
		t.Fatalf("save first: %v %v", changed, err)
	}
	// Same fabric, built afresh: no new version.
	v, changed, err := s.SaveTopology(ctx, Topo(4, 3, "EDR"), T0.Add(time.Minute))
	if err != nil || changed || v != v1 {
		t.Fatalf("save equal: version %d changed %v err %v, want %d false nil", v, changed, err, v1)
	}
	v2, changed, err := s.SaveTopology(ctx, b, T0.Add(time.Hour))
	if err != nil || !changed || v2 == v1 {
		t.Fatalf("save second: %d %v %v", v2, changed, err)
	}
	if _, _, err := s.SaveTopology(ctx, a, T0.Add(30*time.Minute)); err == nil {
		t.Error("saving a different topology before the latest version succeeded")
	}
	for _, c := range []struct {
		at   time.Time
		want *fabric.Topology
		id   int64
	}{
		{T0, a, v1}, {T0.Add(59 * time.Minute), a, v1}, {T0.Add(time.Hour), b, v2}, {T0.Add(48 * time.Hour), b, v2},
	} {
		got, ver, err := s.TopologyAt(ctx, c.at)
		if err != nil {
			t.Fatalf("TopologyAt(%s): %v", c.at, err)
		}
		if ver.ID != c.id || !reflect.DeepEqual(got.Nodes, c.want.Nodes) || !reflect.DeepEqual(got.Links, c.want.Links) {
			t.Errorf("TopologyAt(%s): version %d, want %d (or content differs)", c.at, ver.ID, c.id)
		}
		if _, ok := got.Node(0x1000); !ok {
			t.Errorf("TopologyAt(%s): returned topology is not indexed", c.at)
		}
	}
	if _, _, err := s.TopologyAt(ctx, T0.Add(-time.Second)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("TopologyAt before the first version: %v, want ErrNotFound", err)
	}
	vs, err := s.Versions(ctx, T0.Add(-time.Hour), T0.Add(2*time.Hour))
	if err != nil || len(vs) != 2 {
		t.Fatalf("Versions: %v %v", vs, err)
	}
	if !vs[0].From.Equal(T0) || !vs[0].Until.Equal(T0.Add(time.Hour)) || !vs[1].Until.IsZero() ||
		vs[0].Nodes != len(a.Nodes) || vs[0].Links != len(a.Links) {
		t.Errorf("Versions: %+v", vs)
	}
	if vs, _ := s.Versions(ctx, T0.Add(2*time.Hour), T0.Add(3*time.Hour)); len(vs) != 1 || vs[0].ID != v2 {
		t.Errorf("Versions after the change: %+v, want only %d", vs, v2)
	}
	if vs, _ := s.Versions(ctx, T0.Add(time.Minute), T0.Add(2*time.Minute)); len(vs) != 1 || vs[0].ID != v1 {
		t.Errorf("Versions before the change: %+v, want only %d", vs, v1)
	}
	bad := &fabric.Topology{Nodes: []fabric.Node{{GUID: 1}, {GUID: 1}}}
	if _, _, err := s.SaveTopology(ctx, bad, T0.Add(3*time.Hour)); err == nil {
		t.Error("topology with a duplicate GUID was saved")
	}
}

func testForwardingTables(t *testing.T, s store.Store) {
	ctx := context.Background()
	if _, _, err := s.ForwardingTablesAt(ctx, T0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ForwardingTablesAt on empty store: %v, want ErrNotFound", err)
	}
	a := fabric.ForwardingTables{0x1000: {255, 1, 2, 3}, 0x1001: {255, 3, 3}}
	b := fabric.ForwardingTables{0x1000: {255, 1, 2, 4}, 0x1001: {255, 3, 3}}
	for i, c := range []struct {
		ft fabric.ForwardingTables
		at time.Time
	}{{a, T0}, {fabric.ForwardingTables{0x1000: {255, 1, 2, 3, 255}, 0x1001: {255, 3, 3}}, T0.Add(time.Minute)}, {b, T0.Add(time.Hour)}} {
		if err := s.SaveForwardingTables(ctx, c.ft, c.at); err != nil {
			t.Fatalf("save %d: %v", i, err)
		}
	}
	for _, c := range []struct {
		at   time.Time
		want fabric.ForwardingTables
		from time.Time
	}{{T0.Add(30 * time.Minute), a, T0}, {T0.Add(time.Hour), b, T0.Add(time.Hour)}} {
		got, from, err := s.ForwardingTablesAt(ctx, c.at)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, c.want) || !from.Equal(c.from) {
			t.Errorf("ForwardingTablesAt(%s) = %v from %s, want %v from %s (an equal table must not make a new entry)", c.at, got, from, c.want, c.from)
		}
	}
}

func testEvents(t *testing.T, s store.Store) {
	ctx := context.Background()
	var ev []fabric.Event
	for i := 0; i < 30; i++ {
		kind := []string{fabric.EventLinkDown, fabric.EventLinkUp, fabric.EventCounterReset}[i%3]
		ev = append(ev, fabric.Event{Time: T0.Add(time.Duration(i) * time.Minute), Kind: kind, Node: fabric.GUID(0x1000 + i%5), Port: i % 8, Detail: fmt.Sprintf("event %d", i)})
	}
	if err := s.AddEvents(ctx, ev); err != nil {
		t.Fatal(err)
	}
	check := func(q store.EventQuery, want func(e fabric.Event) bool) {
		t.Helper()
		got, err := s.Events(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var exp []fabric.Event
		for i := len(ev) - 1; i >= 0; i-- {
			e := ev[i]
			if (q.From.IsZero() || !e.Time.Before(q.From)) && (q.To.IsZero() || !e.Time.After(q.To)) && want(e) {
				exp = append(exp, e)
			}
		}
		if n, err := s.EventCount(ctx, q); err != nil || n != len(exp) {
			t.Errorf("EventCount(%+v) = %d, %v; want %d (the limit ignored)", q, n, err, len(exp))
		}
		if q.Limit > 0 && len(exp) > q.Limit {
			exp = exp[:q.Limit]
		}
		if len(got) != len(exp) {
			t.Fatalf("Events(%+v): %d events, want %d", q, len(got), len(exp))
		}
		for i := range got {
			if !got[i].Time.Equal(exp[i].Time) || got[i].Kind != exp[i].Kind || got[i].Node != exp[i].Node ||
				got[i].Port != exp[i].Port || got[i].Detail != exp[i].Detail {
				t.Fatalf("Events(%+v)[%d] = %+v, want %+v", q, i, got[i], exp[i])
			}
		}
	}
	all := func(fabric.Event) bool { return true }
	check(store.EventQuery{}, all)
	check(store.EventQuery{From: T0.Add(5 * time.Minute), To: T0.Add(10 * time.Minute)}, all)
	check(store.EventQuery{Limit: 4}, all)
	check(store.EventQuery{Kind: fabric.EventLinkDown}, func(e fabric.Event) bool { return e.Kind == fabric.EventLinkDown })
	check(store.EventQuery{Node: 0x1002, Limit: 3}, func(e fabric.Event) bool { return e.Node == 0x1002 })
	check(store.EventQuery{Node: 0x1002, Kind: fabric.EventLinkUp, To: T0.Add(20 * time.Minute)},
		func(e fabric.Event) bool { return e.Node == 0x1002 && e.Kind == fabric.EventLinkUp })
	if err := s.AddEvents(ctx, []fabric.Event{{Time: T0, Kind: ""}}); err == nil {
		t.Error("event without a kind accepted")
	}
	st, err := s.Stats(ctx)
	if err != nil || st.Events != int64(len(ev)) {
		t.Errorf("Stats events = %d (%v), want %d", st.Events, err, len(ev))
	}
}

// Sweep makes deterministic samples of switches × ports at time at, the
// i-th sweep of a sequence.
func Sweep(switches, ports int, i int, at time.Time) []fabric.PortSample {
	var out []fabric.PortSample
	for sw := 0; sw < switches; sw++ {
		for p := 1; p <= ports; p++ {
			x := uint64(sw*1000+p*7+i*13) + 1
			s := fabric.PortSample{Port: fabric.PortRef{GUID: fabric.GUID(0x1000 + sw), Port: p}, Time: at, Span: 30 * time.Second}
			s.Delta[fabric.XmitData] = x * x * 4096
			s.Delta[fabric.RcvData] = x * 4
			s.Delta[fabric.XmitPkts] = x * x
			s.Delta[fabric.RcvPkts] = x + 3
			s.Delta[fabric.MulticastRcvPkts] = 3
			s.Delta[fabric.UnicastXmitPkts] = x * x
			s.Delta[fabric.UnicastRcvPkts] = x
			s.Delta[fabric.XmitWait] = x % 5
			if x%17 == 0 {
				s.Delta[fabric.SymbolErrors] = x % 3
				s.Reset = true
			}
			if x%23 == 0 {
				s.Saturated = true
				s.Span += time.Millisecond
			}
			out = append(out, s)
		}
	}
	return out
}

func sampleEqual(a, b fabric.PortSample) bool {
	return a.Port == b.Port && a.Time.Equal(b.Time) && a.Span == b.Span && a.Delta == b.Delta &&
		a.Reset == b.Reset && a.Saturated == b.Saturated
}

func testPortSamples(t *testing.T, s store.Store) {
	ctx := context.Background()
	const sweeps = 20
	var all [][]fabric.PortSample
	for i := 0; i < sweeps; i++ {
		sw := Sweep(3, 6, i, T0.Add(time.Duration(i)*30*time.Second))
		all = append(all, sw)
		if err := s.AddPortSamples(ctx, sw); err != nil {
			t.Fatalf("sweep %d: %v", i, err)
		}
	}
	want := []fabric.PortRef{{GUID: 0x1000, Port: 1}, {GUID: 0x1002, Port: 6}, {GUID: 0x1001, Port: 3}}
	from, to := T0.Add(5*30*time.Second), T0.Add(14*30*time.Second)
	got, err := s.PortSamples(ctx, append(want, fabric.PortRef{GUID: 0x9999, Port: 1}), from, to)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("PortSamples returned %d ports, want %d", len(got), len(want))
	}
	for _, p := range want {
		var exp []fabric.PortSample
		for i := 5; i <= 14; i++ {
			for _, smp := range all[i] {
				if smp.Port == p {
					exp = append(exp, smp)
				}
			}
		}
		if len(got[p]) != len(exp) {
			t.Fatalf("port %s: %d samples, want %d", p, len(got[p]), len(exp))
		}
		for i := range exp {
			if !sampleEqual(got[p][i], exp[i]) {
				t.Fatalf("port %s sample %d:\n got %+v\nwant %+v", p, i, got[p][i], exp[i])
			}
		}
	}
	st, err := s.Stats(ctx)
	if err != nil || st.PortSamples != sweeps*18 || st.Bytes <= 0 {
		t.Errorf("Stats = %+v (%v), want %d port samples and some bytes", st, err, sweeps*18)
	}
	// The same sweep twice is refused, and nothing changes.
	if err := s.AddPortSamples(ctx, all[3]); err == nil {
		t.Error("storing a sweep twice succeeded")
	}
	if st2, _ := s.Stats(ctx); st2.PortSamples != st.PortSamples {
		t.Errorf("failed AddPortSamples changed the count: %d -> %d", st.PortSamples, st2.PortSamples)
	}
}

func testLatestSamples(t *testing.T, s store.Store) {
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		sw := Sweep(3, 4, i, T0.Add(time.Duration(i)*30*time.Second))
		if i == 4 {
			// The last sweep missed switch 0x1001 port 2: its newest
			// sample is then the one before.
			for j := range sw {
				if sw[j].Port == (fabric.PortRef{GUID: 0x1001, Port: 2}) {
					sw = append(sw[:j], sw[j+1:]...)
					break
				}
			}
		}
		if err := s.AddPortSamples(ctx, sw); err != nil {
			t.Fatal(err)
		}
	}
	at := T0.Add(4*30*time.Second + time.Second)
	got, err := s.LatestSamples(ctx, at, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 12 {
		t.Fatalf("LatestSamples: %d samples, want 12", len(got))
	}
	if !sort.SliceIsSorted(got, func(i, j int) bool { return got[i].Port.Less(got[j].Port) }) {
		t.Error("LatestSamples not sorted by port")
	}
	for _, smp := range got {
		wantT := T0.Add(4 * 30 * time.Second)
		if smp.Port == (fabric.PortRef{GUID: 0x1001, Port: 2}) {
			wantT = T0.Add(3 * 30 * time.Second)
		}
		if !smp.Time.Equal(wantT) {
			t.Errorf("LatestSamples %s at %s, want %s", smp.Port, smp.Time, wantT)
		}
	}
	// A short window leaves out the older sample.
	if got, _ := s.LatestSamples(ctx, at, 10*time.Second); len(got) != 11 {
		t.Errorf("LatestSamples with 10s window: %d samples, want 11", len(got))
	}
	// In the past.
	got, err = s.LatestSamples(ctx, T0.Add(45*time.Second), time.Minute)
	if err != nil || len(got) != 12 || !got[0].Time.Equal(T0.Add(30*time.Second)) {
		t.Errorf("LatestSamples in the past: %d samples (%v)", len(got), err)
	}
	if got, _ := s.LatestSamples(ctx, T0.Add(-time.Hour), time.Minute); len(got) != 0 {
		t.Errorf("LatestSamples before any sweep: %d samples", len(got))
	}
}

func testBadSamples(t *testing.T, s store.Store) {
	ctx := context.Background()
	good := Sweep(2, 3, 0, T0)
	cases := []struct {
		name  string
		field string
		edit  func([]fabric.PortSample)
	}{
		{"mixed times", "Time", func(x []fabric.PortSample) { x[3].Time = T0.Add(time.Second) }},
		{"zero time", "Time", func(x []fabric.PortSample) {
			for i := range x {
				x[i].Time = time.Time{}
			}
		}},
		{"negative span", "Span", func(x []fabric.PortSample) { x[1].Span = -time.Second }},
		{"port out of range", "Port.Port", func(x []fabric.PortSample) { x[2].Port.Port = 255 }},
		{"zero guid", "Port.GUID", func(x []fabric.PortSample) { x[2].Port.GUID = 0 }},
		{"duplicate port", "Port", func(x []fabric.PortSample) { x[2].Port = x[1].Port }},
	}
	for _, c := range cases {
		x := append([]fabric.PortSample(nil), good...)
		c.edit(x)
		err := s.AddPortSamples(ctx, x)
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if !containsWord(err.Error(), c.field) {
			t.Errorf("%s: error %q does not name the field %s", c.name, err, c.field)
		}
	}
	if st, _ := s.Stats(ctx); st.PortSamples != 0 {
		t.Errorf("rejected sweeps left %d samples", st.PortSamples)
	}
	if err := s.AddPortSamples(ctx, good); err != nil {
		t.Errorf("good sweep after bad ones: %v", err)
	}
}

func containsWord(s, w string) bool {
	for i := 0; i+len(w) <= len(s); i++ {
		if s[i:i+len(w)] == w {
			return true
		}
	}
	return false
}

func testPrune(t *testing.T, s store.Store) {
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		at := T0.Add(time.Duration(i) * time.Hour)
		if err := s.AddPortSamples(ctx, Sweep(2, 4, i, at)); err != nil {
			t.Fatal(err)
		}
		if err := s.AddEvents(ctx, []fabric.Event{{Time: at, Kind: fabric.EventLinkUp, Node: 0x1000, Detail: "x"}}); err != nil {
			t.Fatal(err)
		}
		speed := "EDR"
		if i%2 == 1 {
			speed = "HDR"
		}
		if _, _, err := s.SaveTopology(ctx, Topo(2, 2, speed), at); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveForwardingTables(ctx, fabric.ForwardingTables{0x1000: {255, uint8(i)}}, at); err != nil {
			t.Fatal(err)
		}
	}
	limit := T0.Add(5*time.Hour + 30*time.Minute)
	// Rollups that expire too: the samples go, not into rollups.
	rollups := T0.Add(6 * time.Hour)
	if err := s.Prune(ctx, store.Retention{Samples: limit, PortRollups5m: rollups, PortRollups1h: rollups, Events: limit, Topology: limit}); err != nil {
		t.Fatal(err)
	}
	got, err := s.PortSamples(ctx, []fabric.PortRef{{GUID: 0x1000, Port: 1}}, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got[fabric.PortRef{GUID: 0x1000, Port: 1}]); n != 4 {
		t.Errorf("after prune: %d samples of a port, want 4", n)
	}
	if ev, _ := s.Events(ctx, store.EventQuery{}); len(ev) != 4 {
		t.Errorf("after prune: %d events, want 4", len(ev))
	}
	// The version and tables in force at the limit survive.
	if _, v, err := s.TopologyAt(ctx, limit); err != nil || !v.From.Equal(T0.Add(5*time.Hour)) {
		t.Errorf("topology at the prune limit: %+v %v", v, err)
	}
	if _, _, err := s.TopologyAt(ctx, T0.Add(4*time.Hour)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("topology before the prune limit: %v, want ErrNotFound", err)
	}
	if _, from, err := s.ForwardingTablesAt(ctx, limit); err != nil || !from.Equal(T0.Add(5*time.Hour)) {
		t.Errorf("forwarding tables at the prune limit: from %s, %v", from, err)
	}
	st, err := s.Stats(ctx)
	if err != nil || st.PortSamples != 4*8 || st.PortRollups != 0 || st.Events != 4 || st.Versions != 5 {
		t.Errorf("Stats after prune = %+v (%v), want 32 samples, no rollups, 4 events, 5 versions", st, err)
	}
	// Zero retention keeps everything.
	if err := s.Prune(ctx, store.Retention{}); err != nil {
		t.Fatal(err)
	}
	if st2, _ := s.Stats(ctx); st2.PortSamples != st.PortSamples || st2.Events != st.Events {
		t.Errorf("empty retention deleted data: %+v -> %+v", st, st2)
	}
}

func testEmpty(t *testing.T, s store.Store) {
	ctx := context.Background()
	if err := s.AddPortSamples(ctx, nil); err != nil {
		t.Errorf("AddPortSamples(nil): %v", err)
	}
	if err := s.AddEvents(ctx, nil); err != nil {
		t.Errorf("AddEvents(nil): %v", err)
	}
	if got, err := s.PortSamples(ctx, nil, T0, T0); err != nil || len(got) != 0 {
		t.Errorf("PortSamples(nil) = %v, %v", got, err)
	}
	if got, err := s.LatestSamples(ctx, T0, time.Hour); err != nil || len(got) != 0 {
		t.Errorf("LatestSamples on empty = %v, %v", got, err)
	}
	if ev, err := s.Events(ctx, store.EventQuery{}); err != nil || len(ev) != 0 {
		t.Errorf("Events on empty = %v, %v", ev, err)
	}
	if vs, err := s.Versions(ctx, time.Time{}, time.Time{}); err != nil || len(vs) != 0 {
		t.Errorf("Versions on empty = %v, %v", vs, err)
	}
	if st, err := s.Stats(ctx); err != nil || st.PortSamples != 0 || st.Events != 0 || st.Versions != 0 {
		t.Errorf("Stats on empty = %+v, %v", st, err)
	}
}
