package place

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/netloom/netloom/internal/analysis"
	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/fabric/sim"
)

// smallFabric is a 2-level fat tree of 16 hosts from 8-port switches: four
// hosts per leaf switch (n1-n4, n5-n8, ...), routes from the simulated
// forwarding tables.
func smallFabric(t *testing.T) *Fabric {
	t.Helper()
	sp, err := sim.ParseSpec("fat-tree:hosts=16,radix=8")
	if err != nil {
		t.Fatal(err)
	}
	topo, ft, err := sim.Generate(context.Background(), sp)
	if err != nil {
		t.Fatal(err)
	}
	nm, err := analysis.NewNodeMap(topo, nil)
	if err != nil {
		t.Fatal(err)
	}
	return NewFabric(fabric.NewRoutes(topo, ft), nm)
}

// ring is a halo exchange around a ring of n ranks: b bytes each way
// between neighbours.
func ring(n int, b uint64) Traffic {
	t := Traffic{Ranks: n}
	for r := range n {
		t.Add(r, (r+1)%n, b)
		t.Add(r, (r+n-1)%n, b)
	}
	return t
}

func nodes(cores int, names ...string) []Node {
	out := make([]Node, len(names))
	for i, n := range names {
		out[i] = Node{Name: n, Cores: cores}
	}
	return out
}

func hops(t *testing.T, f *Fabric, a, b string) int {
	t.Helper()
	la, _ := f.Nodes.LID(a)
	lb, _ := f.Nodes.LID(b)
	rt, err := f.Routes.Path(la, lb)
	if err != nil {
		t.Fatal(err)
	}
	return len(rt.Hops)
}

func TestRingScrambled(t *testing.T) {
	f := smallFabric(t)
	if h1, h2 := hops(t, f, "n1", "n2"), hops(t, f, "n1", "n5"); h1 != 2 || h2 != 4 {
		t.Fatalf("hops n1-n2 %d, n1-n5 %d; want 2 and 4 (same leaf, across the spine)", h1, h2)
	}
	const b = 1000
	tr := ring(8, b)
	// Scrambled: neighbours never share a node.
	asRan := []string{"n1", "n5", "n2", "n6", "n1", "n5", "n2", "n6"}
	a, err := Advise(f, Request{Traffic: tr, AsRan: asRan, Nodes: nodes(2, "n1", "n5", "n2", "n6"), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The best: pairs of neighbours share a node, the four nodes in a ring
	// that crosses the spine twice: 4 inter-node edges, 2+2+4+4 hops, both ways.
	if a.Advice.InterNodeBytes != 8*b || a.Advice.ByteHops != 2*b*12 {
		t.Errorf("advice: %d inter-node bytes, %d byte-hops; want %d and %d (method %s, mapping %v)",
			a.Advice.InterNodeBytes, a.Advice.ByteHops, 8*b, 2*b*12, a.Method, a.Mapping)
	}
	// Filling the nodes in the order given crosses the spine four times:
	// the advice is Scotch's.
	if a.Method != "scotch" || a.Block.ByteHops != 2*b*16 {
		t.Errorf("method %s, block %d byte-hops; want scotch and %d", a.Method, a.Block.ByteHops, 2*b*16)
	}
	if a.AsRan == nil || a.AsRan.InterNodeBytes != 16*b {
		t.Fatalf("as ran: %+v (%s); want all 16,000 bytes between nodes", a.AsRan, a.AsRanUnknown)
	}
	if !a.Advice.better(a.AsRan) || !a.Advice.better(a.RoundRobin) || !a.Advice.better(a.Random) || a.NothingToGain {
		t.Errorf("advice %+v is not better than as ran %+v, round-robin %+v, random %+v", a.Advice, a.AsRan, a.RoundRobin, a.Random)
	}
	if a.RoundRobin.InterNodeBytes != 16*b {
		t.Errorf("round-robin: %d inter-node bytes; want all", a.RoundRobin.InterNodeBytes)
	}
	// Each node holds two ranks on distinct cores.
	per := map[string]map[int]bool{}
	for _, m := range a.Mapping {
		if per[m.Node] == nil {
			per[m.Node] = map[int]bool{}
		}
		per[m.Node][m.Core] = true
	}
	for n, c := range per {
		if len(c) != 2 || !c[0] || !c[1] {
			t.Errorf("node %s cores %v", n, c)
		}
	}
	// The heaviest link and link loads are the attribution of the node
	// matrix: every inter-node byte leaves a host adapter once.
	var fromHosts uint64
	topo := f.Routes.Topology()
	for _, l := range a.Advice.Links {
		if n, _ := topo.Node(l.From.GUID); n.Type == fabric.CA {
			fromHosts += l.Bytes
		}
	}
	if fromHosts != a.Advice.InterNodeBytes || a.Advice.HeaviestLink == nil || a.Advice.HeaviestLink.Bytes != a.Advice.Links[0].Bytes {
		t.Errorf("links: %d bytes leave hosts of %d inter-node; heaviest %+v", fromHosts, a.Advice.InterNodeBytes, a.Advice.HeaviestLink)
	}
}

func TestCostByHand(t *testing.T) {
	f := smallFabric(t)
	tr := Traffic{Ranks: 3}
	tr.Add(0, 1, 100) // n1 -> n2: 2 hops
	tr.Add(1, 2, 10)  // n2 -> n5: 4 hops
	tr.Add(2, 0, 1)   // n5 -> n1: 4 hops
	ev, err := newEvaluator(f, []string{"n1", "n2", "n5"}, &tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ev.cost(Placement{Node: []int32{0, 1, 2}}, true)
	if err != nil {
		t.Fatal(err)
	}
	if c.InterNodeBytes != 111 || c.ByteHops != 100*2+10*4+1*4 || c.HeaviestLink.Bytes != 100 || c.NodesUsed != 3 {
		t.Errorf("cost %+v", c)
	}
	if !strings.HasPrefix(c.HeaviestLink.FromName, "n1") {
		t.Errorf("heaviest link leaves %q, want n1's adapter", c.HeaviestLink.FromName)
	}
	// With a background load on another direction, that one is heaviest.
	bg := make([]uint64, f.attr.Directions())
	for i := range bg {
		if f.attr.Direction(i) == c.Links[len(c.Links)-1].From {
			bg[i] = 1000
		}
	}
	ev.bg = bg
	c2, _ := ev.cost(Placement{Node: []int32{0, 1, 2}}, false)
	if c2.HeaviestLink.Bytes != 1000+c.Links[len(c.Links)-1].Bytes || c2.HeaviestLink.JobBytes != c.Links[len(c.Links)-1].Bytes {
		t.Errorf("with background: %+v", c2.HeaviestLink)
	}
}

func TestAllToAllNoWorse(t *testing.T) {
	f := smallFabric(t)
	const n = 16
	tr := Traffic{Ranks: n}
	for s := range n {
		for d := range n {
			tr.Add(s, d, 1000)
		}
	}
	asRan := make([]string, n)
	names := []string{"n1", "n5", "n9", "n13"}
	for r := range n {
		asRan[r] = names[r/4]
	}
	a, err := Advise(f, Request{Traffic: tr, AsRan: asRan, Nodes: nodes(4, names...), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if a.AsRan.better(a.Advice) {
		t.Errorf("advice %+v is worse than as ran %+v", a.Advice, a.AsRan)
	}
	if !a.NothingToGain {
		t.Errorf("an all-to-all on one node per leaf: want nothing to gain, got method %s gain %+v", a.Method, a.Gain["as_ran"])
	}
	// The block placement is the job as it ran: the reason says they tie,
	// never that the job as it ran costs less.
	if a.Advice.better(a.AsRan) || a.AsRan.better(a.Advice) || !strings.Contains(a.Reason, "ties the job as it ran") || strings.Contains(a.Reason, "costs less") {
		t.Errorf("advice %+v, as ran %+v: reason %q, want a tie", a.Advice, a.AsRan, a.Reason)
	}
}

func TestOneNodeNothingToGain(t *testing.T) {
	f := smallFabric(t)
	a, err := Advise(f, Request{Traffic: ring(4, 100), AsRan: []string{"n3", "n3", "n3", "n3"}, Nodes: nodes(4, "n3"), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !a.NothingToGain || a.Advice.InterNodeBytes != 0 || !strings.Contains(a.Reason, "inside") {
		t.Errorf("one node: %+v", a)
	}
}

func TestBadInputs(t *testing.T) {
	f := smallFabric(t)
	var ie *InputError
	_, err := Advise(f, Request{Traffic: ring(8, 1), Nodes: nodes(2, "n1", "n2")})
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "4 cores for 8 ranks") {
		t.Errorf("too few cores: %v", err)
	}
	_, err = Advise(f, Request{Traffic: ring(4, 1), Nodes: nodes(2, "n1", "nope")})
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), "not on the fabric") {
		t.Errorf("unknown node: %v", err)
	}
	_, err = Advise(f, Request{Traffic: ring(4, 1), Nodes: nodes(2, "n1", "n1")})
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "twice") {
		t.Errorf("duplicate node: %v", err)
	}
	// The job ran on nodes the fabric does not know: advice still comes,
	// the as-ran cost is unknown and says why.
	a, err := Advise(f, Request{Traffic: ring(4, 1), AsRan: []string{"x", "x", "y", "y"}, Nodes: nodes(2, "n1", "n2")})
	if err != nil || a.AsRan != nil || !strings.Contains(a.AsRanUnknown, `"x"`) {
		t.Errorf("as ran off the fabric: %v %+v", err, a)
	}
}

func TestFiles(t *testing.T) {
	m := []RankPlace{{0, "n1", 0}, {1, "n1", 1}, {2, "n5", 0}, {3, "n1", 2}}
	want := map[string]string{
		"openmpi": "rank 0=n1 slot=0\nrank 1=n1 slot=1\nrank 2=n5 slot=0\nrank 3=n1 slot=2\n",
		"mpich":   "n1:2\nn5:1\nn1:1\n",
		"slurm":   "n1\nn1\nn5\nn1\n",
	}
	for _, f := range Formats {
		var b bytes.Buffer
		if err := Write(&b, f, m); err != nil || b.String() != want[f] {
			t.Errorf("%s: %v\n%s", f, err, b.String())
		}
	}
	if err := Write(&bytes.Buffer{}, "lsf", m); err == nil {
		t.Error("format lsf accepted")
	}
}

func TestHierarchy(t *testing.T) {
	// Four nodes: 0,1 close (2 hops), 2,3 close, pairs 4 apart.
	h := []int32{
		0, 2, 4, 4,
		2, 0, 4, 4,
		4, 4, 0, 2,
		4, 4, 2, 0,
	}
	got := buildHierarchy(h, 4)
	if len(got.thresholds) != 2 || got.sizes[0] != 2 || got.sizes[1] != 2 {
		t.Fatalf("hierarchy %+v", got)
	}
	if got.path[3][0] != 1 || got.path[3][1] != 1 || got.path[0][0] != 0 {
		t.Errorf("paths %v", got.path)
	}
}
