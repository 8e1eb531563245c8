package fabric

import (
	"testing"
)

// TestSplitPair checks the weighted split over equal-cost paths: even
// without weights (the PairSharesThrough shares), by the weights where
// given, every byte conserved at every stage, and how each direction's
// bytes got there.
func TestSplitPair(t *testing.T) {
	topo := leafSpine(t, 2, 3, 1, "100GbE")
	r := NewRoutes(topo, nil)
	h1, h2 := LID(100), LID(101) // on leaf1 and leaf2
	l1, _ := topo.FindNode("leaf1")
	up := func(s int) PortRef { return PortRef{l1.GUID, 1 + 1 + s} } // leaf1's port to spine s+1
	groups := r.ECMPGroups()
	if len(groups) != 2 || len(groups[0].Ports) != 3 {
		t.Fatalf("ECMP groups %+v, want each leaf's three uplinks", groups)
	}

	split := func(w SplitWeights) (map[PortRef]uint64, map[PortRef]SplitHow) {
		got, how := map[PortRef]uint64{}, map[PortRef]SplitHow{}
		if err := r.SplitPair(h1, h2, 1000, w, func(d PortRef, b uint64, h SplitHow) { got[d] += b; how[d] = h }); err != nil {
			t.Fatal(err)
		}
		return got, how
	}
	even, how := split(nil)
	for s := 0; s < 3; s++ {
		ps, _, _ := r.PairSharesThrough(up(s), 0)
		var share float64
		for _, p := range ps {
			if p.Src == h1 && p.Dst == h2 {
				share = p.Share
			}
		}
		if b := even[up(s)]; b < 333 || b > 334 || share < 0.333 || share > 0.334 {
			t.Errorf("even: spine %d gets %d of 1000 bytes, the model's share %g", s+1, b, share)
		}
		if h := how[up(s)]; !h.ECMP || !h.Even {
			t.Errorf("even: spine %d's how %+v, want ECMP and even", s+1, h)
		}
	}
	// Weighted: the leaf's uplinks 3:1:0 by bytes seen, 30, 10 and 0 samples.
	w := func(sw GUID, ports []int) ([]uint64, []uint64) {
		if sw != l1.GUID {
			return nil, nil
		}
		return []uint64{300, 100, 0}, []uint64{30, 10, 0}
	}
	got, how := split(w)
	for s, want := range []uint64{750, 250, 0} {
		if got[up(s)] != want {
			t.Errorf("weighted: spine %d gets %d bytes, want %d", s+1, got[up(s)], want)
		}
		if h := how[up(s)]; !h.ECMP || h.Even || h.Samples != []uint64{30, 10, 0}[s] || h.GroupSamples != 40 {
			t.Errorf("weighted: spine %d's how %+v, want observed with its samples of 40", s+1, h)
		}
	}
	// Every stage carries the 1000 bytes: the host link, the uplinks, the
	// spines' downlinks, the delivery.
	var spinesDown uint64
	for d, b := range got {
		if n, _ := topo.Node(d.GUID); n.Type == Switch && n.Description[:5] == "spine" {
			spinesDown += b
		}
	}
	if spinesDown != 1000 || got[PortRef{GUID(0x9000), 1}] != 1000 {
		t.Errorf("weighted: %d bytes down from the spines, %d from h1, want 1000 each", spinesDown, got[PortRef{GUID(0x9000), 1}])
	}
	// Odd bytes go to the weighted ports only.
	odd := map[PortRef]uint64{}
	_ = r.SplitPair(h1, h2, 7, w, func(d PortRef, b uint64, _ SplitHow) { odd[d] += b })
	if odd[up(0)]+odd[up(1)] != 7 || odd[up(2)] != 0 {
		t.Errorf("7 bytes split 3:1:0 as %d, %d, %d", odd[up(0)], odd[up(1)], odd[up(2)])
	}
	if err := r.SplitPair(h1, 9999, 1, nil, func(PortRef, uint64, SplitHow) {}); err == nil {
		t.Error("a destination LID no port has: no error")
	}
}
