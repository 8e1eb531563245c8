package storetest

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
)

// named is Topo(sw, hosts) with every port named as an Ethernet fabric
// names them: switch ports swp1.., host ports eth0.
func named(sw, hosts int) *fabric.Topology {
	t := Topo(sw, hosts, "10GbE")
	nodes := append([]fabric.Node(nil), t.Nodes...)
	for i := range nodes {
		n := &nodes[i]
		n.PortNames = make([]string, n.Ports+1)
		for p := 1; p <= n.Ports; p++ {
			n.PortNames[p] = fmt.Sprintf("swp%d", p)
			if n.Type == fabric.CA {
				n.PortNames[p] = fmt.Sprintf("eth%d", p-1)
			}
		}
	}
	nt, err := fabric.NewTopology(nodes, append([]fabric.Link(nil), t.Links...))
	if err != nil {
		panic(err)
	}
	return nt
}

// testTopologyPortNames: a topology stored as before port names were kept
// (no port_names) reads back without names; the same fabric with its
// ports named is a new version, and reads back with every name, on the
// nodes and on both ends of every link; saved again, no new version.
func testTopologyPortNames(t *testing.T, s store.Store) {
	ctx := context.Background()
	plain, withNames := Topo(2, 2, "10GbE"), named(2, 2)
	v1, _, err := s.SaveTopology(ctx, plain, T0)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := s.TopologyAt(ctx, T0)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range got.Nodes {
		if n.PortNames != nil {
			t.Errorf("a topology stored without names: node %s reads back with %q", n.Description, n.PortNames)
		}
	}
	for _, l := range got.Links {
		if l.AName != "" || l.BName != "" {
			t.Errorf("a topology stored without names: link %s reads back with names %q, %q", l.ID(), l.AName, l.BName)
		}
	}
	v2, changed, err := s.SaveTopology(ctx, withNames, T0.Add(time.Minute))
	if err != nil || !changed || v2 == v1 {
		t.Fatalf("the fabric with its ports named: version %d (was %d), changed %v, %v; want a new version", v2, v1, changed, err)
	}
	got, ver, err := s.TopologyAt(ctx, T0.Add(time.Minute))
	if err != nil || ver.ID != v2 {
		t.Fatalf("TopologyAt: version %d, %v; want %d", ver.ID, err, v2)
	}
	if !reflect.DeepEqual(got.Nodes, withNames.Nodes) {
		t.Errorf("nodes read back differ from those saved with names")
	}
	if len(got.Links) != len(withNames.Links) || len(got.Links) == 0 {
		t.Fatalf("%d links read back, %d saved", len(got.Links), len(withNames.Links))
	}
	for i, l := range got.Links {
		a, _ := got.Node(l.A.GUID)
		b, _ := got.Node(l.B.GUID)
		if l.AName != a.PortNames[l.A.Port] || l.BName != b.PortNames[l.B.Port] || l.AName == "" || l.BName == "" {
			t.Errorf("link %s read back with names %q, %q; its nodes name the ports %q, %q", l.ID(), l.AName, l.BName, a.PortNames[l.A.Port], b.PortNames[l.B.Port])
		}
		if l.ID() != withNames.Links[i].ID() {
			t.Errorf("link %d: id %s, saved %s", i, l.ID(), withNames.Links[i].ID())
		}
	}
	if v, changed, err := s.SaveTopology(ctx, named(2, 2), T0.Add(2*time.Minute)); err != nil || changed || v != v2 {
		t.Errorf("the same named fabric again: version %d changed %v err %v, want %d false nil", v, changed, err, v2)
	}
}
