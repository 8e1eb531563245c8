package fabric

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// leafSpine builds an L3 leaf-spine Ethernet fabric: leaves L1..Ln each
// linked to every spine, hosts per leaf; switch ports are numbered hosts
// first, then spines. LIDs: switches 1.., hosts from 100.
func leafSpine(t testing.TB, leaves, spines, hostsPerLeaf int, speed string) *Topology {
	t.Helper()
	var nodes []Node
	var links []Link
	sw := func(i int) GUID { return GUID(0x1000 + i) }
	lid := LID(1)
	for s := 0; s < spines; s++ {
		nodes = append(nodes, Node{GUID: sw(100 + s), Type: Switch, Description: "spine" + string(rune('1'+s)), LID: lid, Ports: leaves})
		lid++
	}
	hostLID := LID(100)
	for l := 0; l < leaves; l++ {
		nodes = append(nodes, Node{GUID: sw(l), Type: Switch, Description: "leaf" + string(rune('1'+l)), LID: lid, Ports: hostsPerLeaf + spines})
		lid++
		for h := 0; h < hostsPerLeaf; h++ {
			g := GUID(0x9000 + l*100 + h)
			nodes = append(nodes, Node{GUID: g, Type: CA, Description: "h" + string(rune('1'+l*hostsPerLeaf+h)), LID: hostLID, Ports: 1, PortLIDs: []LID{0, hostLID}})
			hostLID++
			links = append(links, NewLink(PortRef{g, 1}, PortRef{sw(l), h + 1}, "1X", speed, "Active"))
		}
		for s := 0; s < spines; s++ {
			links = append(links, NewLink(PortRef{sw(l), hostsPerLeaf + s + 1}, PortRef{sw(100 + s), l + 1}, "1X", speed, "Active"))
		}
	}
	topo, err := NewTopology(nodes, links)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func TestEthernetSpeeds(t *testing.T) {
	for _, c := range []struct {
		mbps uint64
		s    string
		cap  float64
	}{{100000, "100GbE", 12.5e9}, {25000, "25GbE", 25e9 / 8}, {2500, "2.5GbE", 2.5e9 / 8}, {100, "100MbE", 12.5e6}, {0, "", 0}} {
		if got := EthernetSpeed(c.mbps); got != c.s {
			t.Errorf("EthernetSpeed(%d) = %q, want %q", c.mbps, got, c.s)
		}
		if got := LinkCapacity("1X", c.s); got != c.cap {
			t.Errorf("LinkCapacity(1X, %q) = %g, want %g", c.s, got, c.cap)
		}
	}
	if LinkCapacity("", "100GbE") != 12.5e9 || LinkCapacity("2X", "50GbE") != 12.5e9 {
		t.Error("Ethernet width handling")
	}
	for _, bad := range []string{"NaNGbE", "InfGbE", "-1GbE", "GbE", "1e9GbE", "EDR"} {
		if IsEthernetSpeed(bad) {
			t.Errorf("IsEthernetSpeed(%q) = true", bad)
		}
	}
	// InfiniBand's capacities are what they were.
	if LinkCapacity("4X", "EDR") != 4*25.78125*64/66*1e9/8 || LinkCapacity("4X", "HDR") != 25e9 || LinkCapacity("4X", "100GbE") != 4*12.5e9 {
		t.Error("InfiniBand capacity changed")
	}
}

// TestShortestPathECMP checks the shortest-path model on a leaf-spine with
// two spines: a route across leaves has two equal-cost paths, each half the
// traffic; within a leaf it is unique.
func TestShortestPathECMP(t *testing.T) {
	topo := leafSpine(t, 2, 2, 2, "100GbE")
	r := NewRoutes(topo, nil)
	if r.Model() != ModelShortestPath {
		t.Fatalf("model %q", r.Model())
	}
	rt, err := r.Path(100, 102) // h1 (leaf1) -> h3 (leaf2)
	if err != nil {
		t.Fatal(err)
	}
	if rt.PathCount != 2 || len(rt.Paths) != 2 || !strings.Contains(rt.RouteModel, "ecmp: 2 equal-cost paths") {
		t.Fatalf("route %+v", rt)
	}
	spines := map[GUID]bool{}
	for _, p := range rt.Paths {
		if p.Share != 0.5 || len(p.Hops) != 4 {
			t.Errorf("path %+v: want share 0.5 over 4 hops", p)
		}
		spines[p.Hops[2].GUID] = true
	}
	if len(spines) != 2 {
		t.Errorf("paths cross spines %v, want both", spines)
	}
	if rt.To.LID != 102 || rt.Hops[0].Description != "h1" {
		t.Errorf("route ends %+v from %+v", rt.To, rt.Hops[0])
	}
	var buf bytes.Buffer
	if err := FormatRoute(&buf, rt); err != nil || !strings.Contains(buf.String(), "# route model: lldp-shortest-path (ecmp") {
		t.Errorf("FormatRoute: %v\n%s", err, buf.String())
	}
	rt, err = r.Path(100, 101) // same leaf
	if err != nil {
		t.Fatal(err)
	}
	if rt.RouteModel != "lldp-shortest-path (unique)" || len(rt.Paths) != 0 || len(rt.Hops) != 2 {
		t.Errorf("same-leaf route %+v", rt)
	}
	// Each uplink of leaf1 carries half of every cross-leaf pair from
	// leaf1's hosts.
	up := PortRef{GUID(0x1000), 3}
	ps, total, err := r.PairSharesThrough(up, 0)
	if err != nil {
		t.Fatal(err)
	}
	if total != 4 { // h1,h2 -> h3,h4
		t.Errorf("%d pairs through leaf1's uplink, want 4: %+v", total, ps)
	}
	for _, p := range ps {
		if p.Share != 0.5 || p.Src > 101 || p.Dst < 102 {
			t.Errorf("pair %+v", p)
		}
	}
	// Downlink of spine1 toward leaf2: half of leaf1's hosts' traffic to leaf2.
	ps, total, _ = r.PairSharesThrough(PortRef{GUID(0x1000 + 100), 2}, 0)
	if total != 4 {
		t.Errorf("spine1 -> leaf2: %d pairs %+v", total, ps)
	}
	// Forwarding-table routing is untouched by the model: a fabric with
	// InfiniBand speeds has no model.
	if NewRoutes(leafSpine(t, 2, 2, 2, "EDR"), nil).Model() != "" {
		t.Error("an InfiniBand fabric got the shortest-path model")
	}
}

// TestShortestPathTree checks a tree (one spine): every route is unique.
func TestShortestPathTree(t *testing.T) {
	topo := leafSpine(t, 3, 1, 2, "10GbE")
	r := NewRoutes(topo, nil)
	for _, s := range []LID{100, 101, 102, 103, 104, 105} {
		for _, d := range []LID{100, 101, 102, 103, 104, 105} {
			if s == d {
				continue
			}
			rt, err := r.Path(s, d)
			if err != nil {
				t.Fatal(err)
			}
			if rt.RouteModel != "lldp-shortest-path (unique)" || rt.PathCount != 1 {
				t.Errorf("%d -> %d: %q %d", s, d, rt.RouteModel, rt.PathCount)
			}
		}
	}
	// To a switch.
	rt, err := r.Path(100, 1)
	if err != nil || rt.To.Type != Switch || rt.To.Description != "spine1" {
		t.Errorf("to spine: %+v %v", rt, err)
	}
	// A link down cuts the path.
	for i := range topo.Links {
		if topo.Links[i].A.GUID == 0x1000 && topo.Links[i].A.Port == 3 {
			topo.Links[i].State = "Down"
		}
	}
	if _, err := NewRoutes(topo, nil).Path(100, 102); err == nil || !strings.Contains(err.Error(), "no path") {
		t.Errorf("route over a down link: %v", err)
	}
}

// TestShortestPathShares checks, on a larger leaf-spine, that the shares
// of every pair over the ports of each switch sum to 1 where it passes.
func TestShortestPathShares(t *testing.T) {
	topo := leafSpine(t, 4, 3, 2, "25GbE")
	r := NewRoutes(topo, nil)
	sum := map[Pair]float64{}
	for i := range topo.Nodes {
		n := &topo.Nodes[i]
		if n.Type != Switch || !strings.HasPrefix(n.Description, "spine") {
			continue
		}
		for p := 1; p <= n.Ports; p++ {
			ps, _, err := r.PairSharesThrough(PortRef{n.GUID, p}, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range ps {
				sum[x.Pair] += x.Share
			}
		}
	}
	// Every cross-leaf pair crosses the spine layer exactly once in all.
	if len(sum) != 8*6 {
		t.Errorf("%d pairs cross the spines, want 48", len(sum))
	}
	for p, s := range sum {
		if math.Abs(s-1) > 1e-9 {
			t.Errorf("pair %v: shares over the spines sum to %g", p, s)
		}
	}
}

// TestShortestPathMerged checks the model in a view of two fabrics whose
// LIDs overlap (an Ethernet leaf-spine beside a copy of it with
// InfiniBand speeds and forwarding tables): PathBetween names ports, not
// LIDs, and answers in both.
func TestShortestPathMerged(t *testing.T) {
	ethT := leafSpine(t, 2, 2, 2, "100GbE")
	ibT := leafSpine(t, 2, 2, 2, "EDR")
	// Move the InfiniBand copy's GUIDs away; keep its LIDs (they overlap).
	var nodes []Node
	for _, n := range ibT.Nodes {
		n.GUID += 0x100000
		nodes = append(nodes, n)
	}
	var links []Link
	for _, l := range ibT.Links {
		links = append(links, NewLink(PortRef{l.A.GUID + 0x100000, l.A.Port}, PortRef{l.B.GUID + 0x100000, l.B.Port}, l.Width, l.Speed, l.State))
	}
	ib2, err := NewTopology(nodes, links)
	if err != nil {
		t.Fatal(err)
	}
	// The InfiniBand copy's tables: the Ethernet model's first ports.
	ft := ForwardingTables{}
	er := NewRoutes(ethT, nil)
	for _, n := range ethT.Nodes {
		if n.Type != Switch {
			continue
		}
		tbl := make([]uint8, 200)
		for i := range tbl {
			tbl[i] = NoPort
		}
		for d := LID(1); d < 200; d++ {
			if ps := er.NextPorts(n.GUID, d); len(ps) > 0 {
				tbl[d] = uint8(ps[0])
			}
		}
		ft[n.GUID+0x100000] = tbl
	}
	m, err := Merge(map[string]*Topology{"eth": ethT, "ib": ib2})
	if err != nil {
		t.Fatal(err)
	}
	r := NewRoutes(m, ft)
	from, to := PortRef{0x9000, 1}, PortRef{0x9064, 1} // h1 -> h3 of the Ethernet fabric
	rt, err := r.PathBetween(from, to)
	if err != nil {
		t.Fatal(err)
	}
	if rt.PathCount != 2 || len(rt.Paths) != 2 || rt.To.GUID != 0x9064 {
		t.Errorf("Ethernet route in the merged view: %d paths to %s (%s)", rt.PathCount, rt.To.GUID, rt.RouteModel)
	}
	rt, err = r.PathBetween(PortRef{0x109000, 1}, PortRef{0x109064, 1})
	if err != nil {
		t.Fatal(err)
	}
	if rt.RouteModel != "" || rt.PathCount != 0 || len(rt.Hops) != 4 || rt.To.GUID != 0x109064 {
		t.Errorf("InfiniBand route in the merged view: %+v", rt)
	}
}
