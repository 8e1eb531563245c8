package health

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/netloom/netloom/internal/analysis"
	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/fabric/sim"
	"github.com/netloom/netloom/internal/store"
)

// impactFabric is a two-level fat tree of 8 hosts (radix 4) with its
// up/down routes.
func impactFabric(t *testing.T) (*fabric.Topology, *fabric.Routes, *analysis.NodeMap) {
	t.Helper()
	topo, err := sim.GenerateFatTree(8, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	ft, _, err := sim.ComputeRoutes(context.Background(), topo)
	if err != nil {
		t.Fatal(err)
	}
	nm, err := analysis.NewNodeMap(topo, nil)
	if err != nil {
		t.Fatal(err)
	}
	return topo, fabric.NewRoutes(topo, ft), nm
}

type pairBytes struct {
	src, dst string
	bytes    uint64
}

// testJob builds a job of pairs (node names) and the load link
// attribution gives it: each pair's bytes on every hop of its route,
// computed here by walking the routes.
func testJob(t *testing.T, topo *fabric.Topology, routes *fabric.Routes, nm *analysis.NodeMap, id string, pairs []pairBytes) (ImpactJob, []store.LinkJobBytes) {
	t.Helper()
	var names []string
	idx := map[string]int{}
	for _, p := range pairs {
		for _, n := range []string{p.src, p.dst} {
			if _, ok := idx[n]; !ok {
				idx[n] = len(names)
				names = append(names, n)
			}
		}
	}
	n := len(names)
	m := analysis.Matrix{LIDs: make([]fabric.LID, n), Bytes: make([]uint64, n*n)}
	for i, name := range names {
		l, err := nm.LID(name)
		if err != nil {
			t.Fatal(err)
		}
		m.LIDs[i] = l
	}
	load := map[fabric.PortRef]uint64{}
	for _, p := range pairs {
		m.Bytes[idx[p.dst]*n+idx[p.src]] += p.bytes
		rt, err := routes.Path(m.LIDs[idx[p.src]], m.LIDs[idx[p.dst]])
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range rt.Hops {
			load[fabric.PortRef{GUID: h.GUID, Port: h.Port}] += p.bytes
		}
	}
	var out []store.LinkJobBytes
	for p, b := range load {
		out = append(out, store.LinkJobBytes{Job: id, Port: p, Bytes: b})
	}
	j := ImpactJob{Summary: store.JobSummary{ID: id, User: "u-" + id, Ranks: 2 * n}, Matrix: m, Names: names, RanksOn: map[string]int{}}
	for _, name := range names {
		j.RanksOn[name] = 2
	}
	return j, out
}

func hops(t *testing.T, routes *fabric.Routes, nm *analysis.NodeMap, a, b string) []fabric.PortRef {
	t.Helper()
	la, _ := nm.LID(a)
	lb, _ := nm.LID(b)
	rt, err := routes.Path(la, lb)
	if err != nil {
		t.Fatal(err)
	}
	var out []fabric.PortRef
	for _, h := range rt.Hops {
		out = append(out, fabric.PortRef{GUID: h.GUID, Port: h.Port})
	}
	return out
}

// leafUplink is the first switch-to-switch hop of a route.
func leafUplink(t *testing.T, topo *fabric.Topology, route []fabric.PortRef) *fabric.Link {
	t.Helper()
	for _, p := range route {
		peer, _ := topo.Peer(p)
		a, _ := topo.Node(p.GUID)
		b, _ := topo.Node(peer.GUID)
		if a.Type == fabric.Switch && b.Type == fabric.Switch {
			l, _ := topo.LinkAt(p)
			return l
		}
	}
	t.Fatalf("no switch-to-switch hop in %v", route)
	return nil
}

// checkConservation checks the impact's after loads: every direction's
// after is its before less the moved bytes of the pairs whose route before
// crossed it plus those whose route after crosses it.
func checkConservation(t *testing.T, im *Impact, before []store.LinkJobBytes) {
	t.Helper()
	want := map[fabric.PortRef]int64{}
	for _, x := range before {
		want[x.Port] += int64(x.Bytes)
	}
	for _, p := range im.Pairs {
		for _, h := range p.Before {
			want[h] -= int64(p.Bytes)
		}
		for _, h := range p.After {
			want[h] += int64(p.Bytes)
		}
	}
	removed := map[fabric.PortRef]bool{}
	for _, r := range im.Removed {
		removed[r.From] = true
	}
	got := map[fabric.PortRef]int64{}
	for _, x := range before {
		got[x.Port] += int64(x.Bytes)
	}
	for _, c := range im.Changes {
		if int64(c.Before) != got[c.From] {
			t.Errorf("%s: before %d, attributed %d", c.From, c.Before, got[c.From])
		}
		got[c.From] = int64(c.After)
	}
	for p, w := range want {
		if removed[p] {
			if w != 0 {
				t.Errorf("removed direction %s keeps %d bytes not moved", p, w)
			}
			continue
		}
		if got[p] != w {
			t.Errorf("direction %s after: %d, want %d", p, got[p], w)
		}
	}
}

func TestImpactLinkPredicted(t *testing.T) {
	topo, routes, nm := impactFabric(t)
	// n1 -> n5 crosses a leaf uplink (another leaf); n1 -> n2 stays in the leaf.
	up := leafUplink(t, topo, hops(t, routes, nm, "n1", "n5"))
	j1, l1 := testJob(t, topo, routes, nm, "j1", []pairBytes{{"n1", "n5", 6000}, {"n5", "n1", 4000}, {"n1", "n2", 999}})
	j2, l2 := testJob(t, topo, routes, nm, "j2", []pairBytes{{"n3", "n4", 500}}) // one leaf: never crosses
	tg, err := ResolveTarget(topo, nm, up.ID(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	load := append(l1, l2...)
	im, err := ComputeImpact(ImpactInput{Target: tg, Topo: topo, Before: routes, Jobs: []ImpactJob{j1, j2}, Load: load})
	if err != nil {
		t.Fatal(err)
	}
	if im.RouteModel != RoutesPredicted || im.State != "up" || im.RouteNote == "" {
		t.Errorf("model %q state %q note %q", im.RouteModel, im.State, im.RouteNote)
	}
	// Which of j1's pairs cross the uplink, by the routes.
	// Bytes: the pairs with traffic; pairs crossing: every ordered pair
	// of the job's nodes (a route crosses whether or not it carried bytes).
	var onLink uint64
	crossing := 0
	for _, p := range []pairBytes{{"n1", "n5", 6000}, {"n5", "n1", 4000}, {"n1", "n2", 999}} {
		for _, h := range hops(t, routes, nm, p.src, p.dst) {
			if h == up.A || h == up.B {
				onLink += p.bytes
			}
		}
	}
	for _, a := range []string{"n1", "n2", "n5"} {
		for _, b := range []string{"n1", "n2", "n5"} {
			if a == b {
				continue
			}
			for _, h := range hops(t, routes, nm, a, b) {
				if h == up.A || h == up.B {
					crossing++
				}
			}
		}
	}
	if crossing == 0 {
		t.Fatal("no pair crosses the uplink")
	}
	if len(im.Jobs) != 1 || im.Jobs[0].Job != "j1" || im.Jobs[0].Bytes != onLink || im.Jobs[0].PairsCrossing != crossing ||
		im.Jobs[0].User != "u-j1" || im.Jobs[0].MovedBytes != onLink {
		t.Fatalf("jobs %+v, want j1 alone with %d bytes on the link over %d pairs", im.Jobs, onLink, crossing)
	}
	if im.MovedBytes != onLink || im.UnroutableBytes != 0 || len(im.Errors) != 0 {
		t.Errorf("moved %d unroutable %d errors %v", im.MovedBytes, im.UnroutableBytes, im.Errors)
	}
	for _, p := range im.Pairs {
		if len(p.After) == 0 || p.Unroutable != "" {
			t.Errorf("pair %s->%s: no route after (%s)", p.Src, p.Dst, p.Unroutable)
		}
		for _, h := range p.After {
			if h == up.A || h == up.B {
				t.Errorf("pair %s->%s still crosses the link after", p.Src, p.Dst)
			}
		}
	}
	checkConservation(t, im, load)
	if im.HeaviestBefore == nil || im.HeaviestAfter == nil {
		t.Fatal("no heaviest direction")
	}
	if len(im.Removed) != 2 {
		t.Errorf("removed: %+v", im.Removed)
	}
}

func TestImpactSwitchAndRead(t *testing.T) {
	topo, routes, nm := impactFabric(t)
	route := hops(t, routes, nm, "n1", "n7")
	up := leafUplink(t, topo, route)
	spine, _ := topo.Peer(up.A)
	if spine.GUID == route[1].GUID {
		spine, _ = topo.Peer(up.B)
	}
	if n, _ := topo.Node(spine.GUID); n.Type != fabric.Switch {
		t.Fatal("no spine")
	}
	sp, _ := topo.Node(spine.GUID)
	j1, l1 := testJob(t, topo, routes, nm, "j1", []pairBytes{{"n1", "n7", 7000}, {"n7", "n1", 3000}, {"n2", "n8", 100}})
	tg, err := ResolveTarget(topo, nm, "", sp.Description, nil)
	if err != nil {
		t.Fatal(err)
	}
	im, err := ComputeImpact(ImpactInput{Target: tg, Topo: topo, Before: routes, Jobs: []ImpactJob{j1}, Load: l1})
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Jobs) != 1 || im.Jobs[0].MovedBytes == 0 || im.UnroutableBytes != 0 {
		t.Fatalf("jobs %+v unroutable %d errors %v", im.Jobs, im.UnroutableBytes, im.Errors)
	}
	for _, p := range im.Pairs {
		for _, h := range p.After {
			if h.GUID == sp.GUID {
				t.Errorf("pair %s->%s still crosses the switch", p.Src, p.Dst)
			}
		}
	}
	checkConservation(t, im, l1)

	// The same switch once down: the routes after are given (here the
	// fat tree's own routes computed without it, as a subnet manager
	// would), and are the ones reported.
	var gone []fabric.Link
	for _, l := range topo.Links {
		if l.A.GUID == sp.GUID || l.B.GUID == sp.GUID {
			gone = append(gone, l)
		}
	}
	after, err := Without(topo, gone)
	if err != nil {
		t.Fatal(err)
	}
	ft, _, err := sim.ComputeRoutes(context.Background(), after)
	if err != nil {
		t.Fatal(err)
	}
	ar := fabric.NewRoutes(after, ft)
	im, err = ComputeImpact(ImpactInput{Target: tg, Topo: topo, Before: routes, After: ar, Down: im.To.Add(1), Jobs: []ImpactJob{j1}, Load: l1})
	if err != nil {
		t.Fatal(err)
	}
	if im.RouteModel != RoutesRead || im.State != "down" {
		t.Errorf("model %s state %s", im.RouteModel, im.State)
	}
	for _, p := range im.Pairs {
		if fmt.Sprint(p.After) != fmt.Sprint(hops(t, ar, nm, p.Src, p.Dst)) {
			t.Errorf("pair %s->%s after %v, the given routes %v", p.Src, p.Dst, p.After, hops(t, ar, nm, p.Src, p.Dst))
		}
	}
	checkConservation(t, im, l1)
}

func TestImpactNodes(t *testing.T) {
	topo, routes, nm := impactFabric(t)
	j1, l1 := testJob(t, topo, routes, nm, "j1", []pairBytes{{"n1", "n5", 6000}, {"n2", "n1", 10}})
	j2, l2 := testJob(t, topo, routes, nm, "j2", []pairBytes{{"n3", "n6", 500}})
	tg, err := ResolveTarget(topo, nm, "", "", []string{"n2"})
	if err != nil {
		t.Fatal(err)
	}
	im, err := ComputeImpact(ImpactInput{Target: tg, Topo: topo, Before: routes, Jobs: []ImpactJob{j1, j2}, Load: append(l1, l2...)})
	if err != nil {
		t.Fatal(err)
	}
	if im.RouteModel != RoutesUnchanged || len(im.Jobs) != 1 || im.Jobs[0].Job != "j1" || im.Jobs[0].MovedBytes != 6010 || im.Jobs[0].RanksAffected != 2 {
		t.Fatalf("model %s jobs %+v", im.RouteModel, im.Jobs)
	}
	// Every byte of j1 leaves; j2's stay.
	for _, c := range im.Changes {
		var j1b uint64
		for _, x := range l1 {
			if x.Port == c.From {
				j1b += x.Bytes
			}
		}
		if c.Before-c.After != j1b {
			t.Errorf("%s: %d -> %d, j1 had %d there", c.From, c.Before, c.After, j1b)
		}
	}
}

func TestImpactBadInput(t *testing.T) {
	topo, _, nm := impactFabric(t)
	var nf *NotFoundError
	var pe *ParamError
	if _, err := ResolveTarget(topo, nm, "0x1:1-0x2:1", "", nil); !errors.As(err, &nf) || nf.Param != "link" {
		t.Errorf("unknown link: %v", err)
	}
	if _, err := ResolveTarget(topo, nm, "", "n1", nil); !errors.As(err, &pe) || pe.Param != "switch" {
		t.Errorf("a host as switch: %v", err)
	}
	if _, err := ResolveTarget(topo, nm, "", "no-such-switch", nil); !errors.As(err, &nf) || nf.Param != "switch" {
		t.Errorf("unknown switch: %v", err)
	}
	_, err := ResolveTarget(topo, nm, "", "", []string{"n1", "n99"})
	if !errors.As(err, &nf) || nf.Param != "nodes" || !contains(err.Error(), "n99") || contains(err.Error(), "n1,") {
		t.Errorf("unknown node: %v", err)
	}
	if _, err := ResolveTarget(topo, nm, "", "", nil); !errors.As(err, &pe) {
		t.Errorf("nothing asked: %v", err)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestDegraded(t *testing.T) {
	topo, routes, nm := impactFabric(t)
	if d := FindDegraded(topo); len(d) != 0 {
		t.Fatalf("a uniform fabric has degraded links: %+v", d)
	}
	up := leafUplink(t, topo, hops(t, routes, nm, "n1", "n5"))
	host, _ := topo.LinkAt(hops(t, routes, nm, "n3", "n4")[0])
	links := append([]fabric.Link(nil), topo.Links...)
	for i := range links {
		switch links[i].ID() {
		case up.ID():
			links[i].Width = "1X"
		case host.ID():
			links[i].Speed = "SDR"
		}
	}
	t2, err := fabric.NewTopology(append([]fabric.Node(nil), topo.Nodes...), links)
	if err != nil {
		t.Fatal(err)
	}
	d := FindDegraded(t2)
	if len(d) != 2 {
		t.Fatalf("degraded: %+v", d)
	}
	byLink := map[string]Degraded{}
	for _, x := range d {
		byLink[x.Link] = x
	}
	if x := byLink[up.ID()]; !x.Narrower || x.Slower || x.Expected.Width != "4X" || x.Fraction != 0.25 || x.Kind != "switch-switch" {
		t.Errorf("narrow uplink: %+v", x)
	}
	if x := byLink[host.ID()]; x.Narrower || !x.Slower || x.Expected.Speed != "EDR" || x.Kind != "switch-host" {
		t.Errorf("slow host link: %+v", x)
	}
	// The jobs they slow: by routes, with their bytes.
	r2 := fabric.NewRoutes(t2, routes.Tables())
	j1, l1 := testJob(t, t2, r2, nm, "j1", []pairBytes{{"n1", "n5", 6000}})
	j2, l2 := testJob(t, t2, r2, nm, "j2", []pairBytes{{"n3", "n4", 70}})
	DegradedJobs(d, r2, []ImpactJob{j1, j2}, append(l1, l2...))
	for _, x := range d {
		want := "j1"
		if x.Link == host.ID() {
			want = "j2"
		}
		if len(x.Jobs) != 1 || x.Jobs[0].Job != want || x.Jobs[0].Bytes == 0 {
			t.Errorf("%s: jobs %+v, want %s", x.Link, x.Jobs, want)
		}
	}
}

// TestDegradedEthernet: on an Ethernet fabric (speeds as ifHighSpeed
// names them) a 10GbE host link among 100GbE ones is degraded, in
// Ethernet's terms; beside an InfiniBand fabric in one view, neither is
// held to the other's rate.
func TestDegradedEthernet(t *testing.T) {
	topo, routes, nm := impactFabric(t)
	host, _ := topo.LinkAt(hops(t, routes, nm, "n3", "n4")[0])
	links := append([]fabric.Link(nil), topo.Links...)
	for i := range links {
		links[i].Width, links[i].Speed = "1X", "100GbE"
		if links[i].ID() == host.ID() {
			links[i].Speed = "10GbE"
		}
	}
	eth, err := fabric.NewTopology(append([]fabric.Node(nil), topo.Nodes...), links)
	if err != nil {
		t.Fatal(err)
	}
	d := FindDegraded(eth)
	if len(d) != 1 || d[0].Link != host.ID() || !d[0].Slower || d[0].Expected.Speed != "100GbE" || d[0].Fraction != 0.1 ||
		d[0].Kind != "switch-host" || !strings.Contains(d[0].Reason, "at 10GbE where 100GbE is expected") {
		t.Fatalf("degraded: %+v", d)
	}
	// Half the host links InfiniBand 4X EDR, half 100GbE: two families,
	// each uniform, so none is degraded (the tie would otherwise call the
	// slower family degraded).
	for i := range links {
		links[i].Speed = "100GbE"
		if i%2 == 0 {
			links[i].Width, links[i].Speed = "4X", "EDR"
		}
	}
	mixed, err := fabric.NewTopology(append([]fabric.Node(nil), topo.Nodes...), links)
	if err != nil {
		t.Fatal(err)
	}
	if d := FindDegraded(mixed); len(d) != 0 {
		t.Fatalf("two uniform families: %+v", d)
	}
}

// TestCrossingAgreesWithRoutes: for every host pair and every link of the
// fabric, crossTest says what walking the route says.
func TestCrossingAgreesWithRoutes(t *testing.T) {
	topo, routes, _ := impactFabric(t)
	lids := routes.CALIDs()
	for _, l := range topo.Links {
		c := newCrossing(routes, map[fabric.PortRef]bool{l.A: true, l.B: true})
		for _, s := range lids {
			for _, d := range lids {
				if s == d {
					continue
				}
				rt, err := routes.Path(s, d)
				if err != nil {
					t.Fatal(err)
				}
				want := false
				for _, h := range rt.Hops {
					if p := (fabric.PortRef{GUID: h.GUID, Port: h.Port}); p == l.A || p == l.B {
						want = true
					}
				}
				if got := c.crosses(s, d); got != want {
					t.Errorf("link %s, %d -> %d: crosses %v, the route says %v", l.ID(), s, d, got, want)
				}
			}
		}
	}
}

// TestImpactLeafUnroutable: taking out the leaf a job's nodes hang off
// leaves its traffic no route: the bytes are unroutable, not moved, and
// named so.
func TestImpactLeafUnroutable(t *testing.T) {
	topo, routes, nm := impactFabric(t)
	first := hops(t, routes, nm, "n1", "n5")
	leaf, _ := topo.Node(first[1].GUID) // n1's leaf
	j1, l1 := testJob(t, topo, routes, nm, "j1", []pairBytes{{"n1", "n5", 6000}, {"n5", "n1", 3000}})
	tg, err := ResolveTarget(topo, nm, "", leaf.Description, nil)
	if err != nil {
		t.Fatal(err)
	}
	im, err := ComputeImpact(ImpactInput{Target: tg, Topo: topo, Before: routes, Jobs: []ImpactJob{j1}, Load: l1})
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Jobs) != 1 || im.Jobs[0].Bytes != 9000 || im.UnroutableBytes != 9000 || im.MovedBytes != 0 {
		t.Fatalf("jobs %+v, moved %d, unroutable %d", im.Jobs, im.MovedBytes, im.UnroutableBytes)
	}
	for _, p := range im.Pairs {
		if p.Unroutable == "" || len(p.After) != 0 {
			t.Errorf("pair %s->%s: after %v, unroutable %q", p.Src, p.Dst, p.After, p.Unroutable)
		}
	}
}

// TestImpactNodeOverrides: names the daemon's --node-map gives resolve as
// link attribution resolves them; without the overrides they are unknown.
func TestImpactNodeOverrides(t *testing.T) {
	topo, _, nm := impactFabric(t)
	want, err := nm.LID("n3")
	if err != nil {
		t.Fatal(err)
	}
	n3, err := topo.FindNode("n3")
	if err != nil {
		t.Fatal(err)
	}
	req := ImpactRequest{NodeOverrides: map[string]string{"gpu7": n3.GUID.String()}}
	m, err := req.nodeMap(topo)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := m.LID("gpu7"); err != nil || got != want {
		t.Fatalf("gpu7 with the overrides: LID %d, %v; want n3's %d", got, err, want)
	}
	if _, err := ResolveTarget(topo, m, "", "", []string{"gpu7"}); err != nil {
		t.Fatalf("gpu7 with the overrides: %v", err)
	}
	plain, err := (&ImpactRequest{}).nodeMap(topo)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ResolveTarget(topo, plain, "", "", []string{"gpu7"}); err == nil {
		t.Fatal("gpu7 without the overrides resolved")
	}
	// Overrides that do not fit the topology (an older version): the
	// default rule still maps the rest.
	bad := ImpactRequest{NodeOverrides: map[string]string{"gpu7": "0x00000000deadbeef"}}
	if m, err := bad.nodeMap(topo); err != nil {
		t.Fatal(err)
	} else if got, err := m.LID("n3"); err != nil || got != want {
		t.Fatalf("n3 under unfitting overrides: %d, %v", got, err)
	}
}
