package fabric

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// tinyTree is two leaves under one spine with two hosts each:
//
//	      spine(L3)
//	   p1/      \p2
//	leaf1(L1)  leaf2(L2)
//	p1   p2    p1   p2
//	h4   h5    h6   h7   (host LIDs 4..7)
func tinyTree(t *testing.T) (*Topology, ForwardingTables) {
	t.Helper()
	sw := func(g GUID, lid LID, d string) Node {
		return Node{GUID: g, Type: Switch, LID: lid, Description: d, Ports: 8}
	}
	ca := func(g GUID, lid LID, d string) Node {
		return Node{GUID: g, Type: CA, LID: lid, Description: d, Ports: 1, PortLIDs: []LID{0, lid}}
	}
	nodes := []Node{
		sw(0x201, 1, "leaf1"), sw(0x202, 2, "leaf2"), sw(0x203, 3, "spine"),
		ca(0x104, 4, "n1 HCA-1"), ca(0x105, 5, "n2 HCA-1"), ca(0x106, 6, "n3 HCA-1"), ca(0x107, 7, "n4 HCA-1"),
	}
	l := func(a GUID, ap int, b GUID, bp int) Link {
		return NewLink(PortRef{a, ap}, PortRef{b, bp}, "4X", "EDR", "Active")
	}
	links := []Link{
		l(0x201, 1, 0x104, 1), l(0x201, 2, 0x105, 1), l(0x202, 1, 0x106, 1), l(0x202, 2, 0x107, 1),
		l(0x201, 5, 0x203, 1), l(0x202, 5, 0x203, 2),
	}
	topo, err := NewTopology(nodes, links)
	if err != nil {
		t.Fatal(err)
	}
	ft := ForwardingTables{
		//                 lid: 0  1  2  3  4  5  6  7
		0x201: []uint8{255, 0, 5, 5, 1, 2, 5, 5},
		0x202: []uint8{255, 5, 0, 5, 5, 5, 1, 2},
		0x203: []uint8{255, 1, 2, 0, 1, 1, 2, 2},
	}
	return topo, ft
}

func TestPath(t *testing.T) {
	topo, ft := tinyTree(t)
	r := NewRoutes(topo, ft)
	rt, err := r.Path(4, 7)
	if err != nil {
		t.Fatal(err)
	}
	want := []PortRef{{0x104, 1}, {0x201, 5}, {0x203, 2}, {0x202, 2}}
	if len(rt.Hops) != len(want) {
		t.Fatalf("hops %+v, want %v", rt.Hops, want)
	}
	for i, h := range rt.Hops {
		if (PortRef{h.GUID, h.Port}) != want[i] {
			t.Errorf("hop %d = %s:%d, want %s", i, h.GUID, h.Port, want[i])
		}
	}
	if rt.To.GUID != 0x107 || rt.To.Port != 1 {
		t.Errorf("arrives at %+v, want 0x107 port 1", rt.To)
	}
	if rt, err = r.Path(4, 3); err != nil || rt.To.GUID != 0x203 || len(rt.Hops) != 2 {
		t.Errorf("route to spine switch: %+v, %v", rt, err)
	}
	if _, err := r.Path(4, 99); err == nil {
		t.Error("route to unknown LID: no error")
	}
	ft[0x203][7] = 255
	if _, err := NewRoutes(topo, ft).Path(4, 7); err == nil {
		t.Error("missing forwarding entry: no error")
	}
}

func TestPairsThroughMatchesPaths(t *testing.T) {
	topo, ft := tinyTree(t)
	r := NewRoutes(topo, ft)
	lids := r.CALIDs()
	for _, l := range topo.Links {
		for _, from := range []PortRef{l.A, l.B} {
			got, total, err := r.PairsThrough(from, 0)
			if err != nil {
				t.Fatal(err)
			}
			want := map[Pair]bool{}
			for _, s := range lids {
				for _, d := range lids {
					if s == d {
						continue
					}
					rt, err := r.Path(s, d)
					if err != nil {
						t.Fatal(err)
					}
					for _, h := range rt.Hops {
						if (PortRef{h.GUID, h.Port}) == from {
							want[Pair{s, d}] = true
						}
					}
				}
			}
			if total != len(want) || len(got) != len(want) {
				t.Fatalf("through %s: %d pairs (total %d), want %d", from, len(got), total, len(want))
			}
			for _, p := range got {
				if !want[p] {
					t.Errorf("through %s: unexpected pair %v", from, p)
				}
			}
		}
	}
}

func TestDiff(t *testing.T) {
	t0 := time.Unix(1000, 0)
	prev := &PortReading{Time: t0, Counters: Counters{Extended: true}}
	prev.V[XmitData], prev.V[SymbolErrors] = 4000, 3
	cur := &PortReading{Time: t0.Add(10 * time.Second), Counters: Counters{Extended: true}}
	cur.V[XmitData], cur.V[SymbolErrors] = 14000, 5
	s := Diff(prev, cur)
	if s.Delta[XmitData] != 10000 || s.Delta[SymbolErrors] != 2 || s.Reset || s.Saturated {
		t.Fatalf("plain diff: %+v", s)
	}
	if r := s.Rate(XmitData); r != 1000 {
		t.Errorf("rate %v, want 1000", r)
	}
	// A switch reboot: counters restart from zero, never a negative or huge delta.
	reboot := &PortReading{Time: cur.Time.Add(10 * time.Second), Counters: Counters{Extended: true}}
	reboot.V[XmitData] = 800
	s = Diff(cur, reboot)
	if !s.Reset || s.Delta[XmitData] != 800 || s.Delta[SymbolErrors] != 0 {
		t.Fatalf("reset diff: %+v", s)
	}
	// 32-bit counters stick at their maximum.
	narrow := &PortReading{Time: cur.Time}
	narrow.V[XmitData] = max32(XmitData) - 40
	full := &PortReading{Time: cur.Time.Add(time.Second)}
	full.V[XmitData] = max32(XmitData)
	s = Diff(narrow, full)
	if !s.Saturated || s.Delta[XmitData] != 40 {
		t.Fatalf("saturation: %+v", s)
	}
	if !NearSaturation(full, 0.75) || NearSaturation(prev, 0.75) {
		t.Error("NearSaturation wrong")
	}
}

func TestChanges(t *testing.T) {
	topo, _ := tinyTree(t)
	at := time.Unix(5, 0)
	if ev := Changes(nil, topo, at); len(ev) != len(topo.Nodes)+len(topo.Links) {
		t.Fatalf("from empty: %d events", len(ev))
	}
	nodes := append([]Node(nil), topo.Nodes...)
	nodes[0].LID = 42
	links := append([]Link(nil), topo.Links[1:]...)
	cur, err := NewTopology(nodes, links)
	if err != nil {
		t.Fatal(err)
	}
	ev := Changes(topo, cur, at)
	kinds := map[string]int{}
	for _, e := range ev {
		kinds[e.Kind]++
	}
	if kinds[EventLIDChanged] != 1 || kinds[EventLinkDown] != 1 || len(ev) != 2 {
		t.Fatalf("events %+v", ev)
	}
}

func TestFindNode(t *testing.T) {
	topo, _ := tinyTree(t)
	for key, want := range map[string]GUID{"n3": 0x106, "0x0000000000000106": 0x106, "6": 0x106, "spine": 0x203, "n3 HCA-1": 0x106} {
		n, err := topo.FindNode(key)
		if err != nil || n.GUID != want {
			t.Errorf("FindNode(%q) = %v, %v; want %s", key, n, err, want)
		}
	}
	for _, bad := range []string{"n9", "0xzz", "99"} {
		if _, err := topo.FindNode(bad); err == nil {
			t.Errorf("FindNode(%q): no error", bad)
		}
	}
	if _, err := NewTopology(append(topo.Nodes, topo.Nodes[0]), nil); err == nil {
		t.Error("duplicate GUID accepted")
	}
}

// shifted is tinyTree with its GUIDs moved: another subnet built alike,
// numbering its LIDs the same.
func shifted(t *testing.T, topo *Topology, ft ForwardingTables, off GUID) (*Topology, ForwardingTables) {
	t.Helper()
	var nodes []Node
	for _, n := range topo.Nodes {
		n.GUID += off
		nodes = append(nodes, n)
	}
	var links []Link
	for _, l := range topo.Links {
		links = append(links, NewLink(PortRef{l.A.GUID + off, l.A.Port}, PortRef{l.B.GUID + off, l.B.Port}, l.Width, l.Speed, l.State))
	}
	out, err := NewTopology(nodes, links)
	if err != nil {
		t.Fatal(err)
	}
	ft2 := ForwardingTables{}
	for g, tbl := range ft {
		ft2[g+off] = tbl
	}
	return out, ft2
}

// TestMerge joins two subnets with the same LIDs: every node keeps its
// fabric, a LID names no port of the merged view, and the pairs through
// a link are those of its own fabric only.
func TestMerge(t *testing.T) {
	a, fa := tinyTree(t)
	b, fb := shifted(t, a, fa, 0x10000)
	m, err := Merge(map[string]*Topology{"west": b, "east": a})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Nodes) != 14 || len(m.Links) != 12 || len(m.Fabrics()) != 2 {
		t.Fatalf("merged: %d nodes, %d links, fabrics %v", len(m.Nodes), len(m.Links), m.Fabrics())
	}
	if n, _ := m.Node(0x104); n.Fabric != "east" {
		t.Errorf("node 0x104 in fabric %q, want east", n.Fabric)
	}
	if n, _ := m.Node(0x10104); n.Fabric != "west" {
		t.Errorf("node 0x10104 in fabric %q, want west", n.Fabric)
	}
	if a.Nodes[0].Fabric != "" {
		t.Error("Merge changed a fabric's own topology")
	}
	if _, ok := m.PortByLID(4); ok {
		t.Error("LID 4 of both fabrics names a port of the merged view")
	}
	ft := ForwardingTables{}
	for g, tbl := range fa {
		ft[g] = tbl
	}
	for g, tbl := range fb {
		ft[g] = tbl
	}
	r := NewRoutes(m, ft)
	if _, err := r.Path(4, 7); err == nil || !strings.Contains(err.Error(), "several fabrics (east, west)") {
		t.Errorf("Path over a shared LID: %v, want an error naming both fabrics", err)
	}
	// By port, routes answer within each fabric, as in the fabric alone.
	want1, _ := NewRoutes(a, fa).Path(4, 7)
	src, _ := m.Endpoint("0x0000000000010104")
	dst, _ := m.Endpoint("0x0000000000010107")
	got1, err := r.PathBetween(src, dst)
	if err != nil || len(got1.Hops) != len(want1.Hops) || got1.Hops[1].GUID != want1.Hops[1].GUID+0x10000 {
		t.Errorf("west's route 4 -> 7 in the merged view: %+v (%v), want east's shifted %+v", got1, err, want1)
	}
	east4, _ := m.Endpoint("0x0000000000000104")
	if _, err := r.PathBetween(east4, dst); err == nil || !strings.Contains(err.Error(), "no route joins fabrics") {
		t.Errorf("route across fabrics: %v", err)
	}
	if _, err := m.Endpoint("4"); err == nil || !strings.Contains(err.Error(), "several fabrics") {
		t.Errorf("endpoint LID 4 of both fabrics: %v", err)
	}
	// leaf1's uplink carries east's hosts 4 and 5 to 6 and 7, as in east alone.
	want, _, err := NewRoutes(a, fa).PairsThrough(PortRef{0x201, 5}, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, total, err := r.PairsThrough(PortRef{0x201, 5}, 0)
	if err != nil || total != len(want) || !reflect.DeepEqual(got, want) {
		t.Errorf("PairsThrough in the merged view: %v (%d, %v), want east's own %v", got, total, err, want)
	}
	got, _, _ = r.PairsThrough(PortRef{0x10104, 1}, 0)
	if len(got) != 3 {
		t.Errorf("PairsThrough a west host's port: %v, want its 3 west peers", got)
	}
	if _, err := Merge(map[string]*Topology{"east": a, "again": a}); err == nil || !strings.Contains(err.Error(), `fabric "again" and in fabric "east"`) {
		t.Errorf("merging one fabric under two names: %v", err)
	}
}

func TestWithAlternatives(t *testing.T) {
	base := &NoLocalPortError{Err: errors.New("umad_open_port((first), 0): Operation not supported"), Reason: "no InfiniBand adapter"}
	wrapped := fmt.Errorf("fabric %q: %w", "ib", base)
	err := WithAlternatives(wrapped, AltDB, AltSim)
	want := `fabric "ib": no InfiniBand management port here: umad_open_port((first), 0): Operation not supported (no InfiniBand adapter)
without InfiniBand here, use:
  --db DB            the topology and forwarding tables a netloom daemon stored in DB
  --fabric sim:SPEC  a simulated fabric (specs: netloom serve --help)`
	if err.Error() != want {
		t.Errorf("got\n%s\nwant\n%s", err, want)
	}
	var np *NoLocalPortError
	if !errors.As(err, &np) || np != base {
		t.Errorf("the NoLocalPortError is not in the chain: %v", err)
	}
	// A second call replaces the alternatives.
	again := WithAlternatives(err, AltSim)
	if strings.Contains(again.Error(), "--db") || strings.Count(again.Error(), "without InfiniBand") != 1 {
		t.Errorf("replaced alternatives:\n%s", again)
	}
	// Other errors, nil and no alternatives come back as they are.
	other := errors.New("db x: no such file")
	if WithAlternatives(other, AltSim) != other || WithAlternatives(nil, AltSim) != nil || WithAlternatives(wrapped) != wrapped {
		t.Error("WithAlternatives changed an error it should leave alone")
	}
}
