package analysis

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/netloom/netloom/internal/fabric"
)

// ethLeafSpine is an L3 leaf-spine of Ethernet switches: every leaf
// linked to every spine, hosts on the leaves.
func ethLeafSpine(t testing.TB, leaves, spines, hostsPerLeaf int) *fabric.Routes {
	t.Helper()
	var nodes []fabric.Node
	var links []fabric.Link
	lid := fabric.LID(1)
	for s := 0; s < spines; s++ {
		nodes = append(nodes, fabric.Node{GUID: fabric.GUID(0x2000 + s), Type: fabric.Switch, Description: fmt.Sprintf("spine%d", s+1), LID: lid, Ports: leaves})
		lid++
	}
	for l := 0; l < leaves; l++ {
		g := fabric.GUID(0x1000 + l)
		nodes = append(nodes, fabric.Node{GUID: g, Type: fabric.Switch, Description: fmt.Sprintf("leaf%d", l+1), LID: lid, Ports: hostsPerLeaf + spines})
		lid++
		for h := 0; h < hostsPerLeaf; h++ {
			hg := fabric.GUID(0x9000 + 100*l + h)
			nodes = append(nodes, fabric.Node{GUID: hg, Type: fabric.CA, Description: fmt.Sprintf("h%d", l*hostsPerLeaf+h+1), LID: lid, Ports: 1, PortLIDs: []fabric.LID{0, lid}})
			lid++
			links = append(links, fabric.NewLink(fabric.PortRef{GUID: hg, Port: 1}, fabric.PortRef{GUID: g, Port: h + 1}, "1X", "100GbE", "Active"))
		}
		for s := 0; s < spines; s++ {
			links = append(links, fabric.NewLink(fabric.PortRef{GUID: g, Port: hostsPerLeaf + s + 1}, fabric.PortRef{GUID: fabric.GUID(0x2000 + s), Port: l + 1}, "1X", "100GbE", "Active"))
		}
	}
	topo, err := fabric.NewTopology(nodes, links)
	if err != nil {
		t.Fatal(err)
	}
	return fabric.NewRoutes(topo, nil)
}

// TestAttributeECMP checks attribution over equal-cost paths against the
// routes' own path enumeration: each flow's bytes go to every direction of
// every equal-cost path times the path's share, and no byte is lost.
func TestAttributeECMP(t *testing.T) {
	routes := ethLeafSpine(t, 4, 3, 3)
	a := NewAttributor(routes)
	if a.RouteModel() != fabric.ModelShortestPath {
		t.Fatalf("route model %q", a.RouteModel())
	}
	lids := routes.CALIDs()
	rng := rand.New(rand.NewPCG(3, 4))
	var flows []Flow
	for _, s := range lids {
		for _, d := range lids {
			if s != d && rng.IntN(2) == 0 {
				flows = append(flows, Flow{Src: s, Dst: d, Bytes: 6 * uint64(1+rng.IntN(1<<20))}) // divisible by 3 spines, 2 ...
			}
		}
	}
	got := make([]uint64, a.Directions())
	if errs := a.Attribute(flows, got); len(errs) > 0 {
		t.Fatal(errs)
	}
	want := make([]float64, a.Directions())
	var hops float64
	for _, f := range flows {
		rt, err := routes.Path(f.Src, f.Dst)
		if err != nil {
			t.Fatal(err)
		}
		paths := rt.Paths
		if len(paths) == 0 {
			paths = []fabric.SharedPath{{Share: 1, Hops: rt.Hops}}
		}
		for _, p := range paths {
			for _, h := range p.Hops {
				i, ok := a.DirectionIndex(fabric.PortRef{GUID: h.GUID, Port: h.Port})
				if !ok {
					t.Fatalf("hop %+v is not a direction", h)
				}
				want[i] += float64(f.Bytes) * p.Share
				hops += float64(f.Bytes) * p.Share
			}
		}
	}
	var sum float64
	for i := range want {
		sum += float64(got[i])
		if d := float64(got[i]) - want[i]; d > 3 || d < -3 { // at most a byte per split left over
			t.Errorf("direction %s: attributed %d, paths give %.1f", a.Direction(i), got[i], want[i])
		}
	}
	if sum != hops {
		t.Errorf("attributed %.0f byte-hops, paths give %.0f: bytes lost or made up", sum, hops)
	}
	// The matrix form agrees exactly.
	dense := matrixLoad(t, a, lids, flows)
	for i := range dense {
		if dense[i] != got[i] {
			t.Errorf("direction %s: matrix %d, flows %d", a.Direction(i), dense[i], got[i])
		}
	}
}

// TestAttributeECMPUneven checks that bytes that do not divide evenly are
// neither lost nor made up.
func TestAttributeECMPUneven(t *testing.T) {
	routes := ethLeafSpine(t, 2, 3, 1)
	a := NewAttributor(routes)
	lids := routes.CALIDs()
	load := make([]uint64, a.Directions())
	if errs := a.Attribute([]Flow{{Src: lids[0], Dst: lids[1], Bytes: 100}}, load); len(errs) > 0 {
		t.Fatal(errs)
	}
	var spine uint64
	for i, b := range load {
		if p := a.Direction(i); p.GUID >= 0x2000 && p.GUID < 0x3000 {
			spine += b
			if b != 33 && b != 34 && b != 0 {
				t.Errorf("spine direction %s carries %d of 100 over 3 paths", p, b)
			}
		}
	}
	if spine != 100 {
		t.Errorf("spines carry %d bytes, want 100", spine)
	}
}
