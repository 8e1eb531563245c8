package sim

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
)

// clock is a settable test clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTestSource(t testing.TB, sp Spec, seed int64) (*Source, *clock) {
	t.Helper()
	c := &clock{t: DefaultEpoch().Add(400 * 24 * time.Hour)}
	s, err := NewSource(context.Background(), sp, Options{Seed: seed, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

func TestSourceCounters(t *testing.T) {
	ctx := context.Background()
	s, clk := newTestSource(t, Spec{Kind: KindStampede}, 7)
	topo, err := s.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ports := topo.SwitchPorts(false)
	if len(ports) != 2*16893-6541 {
		t.Fatalf("%d linked switch ports", len(ports))
	}
	r0, err := s.Sweep(ctx, topo, ports, fabric.SweepOptions{})
	if err != nil {
		t.Fatal(err)
	}
	span := 10 * time.Second
	clk.t = clk.t.Add(span)
	r1, err := s.Sweep(ctx, topo, ports, fabric.SweepOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var hot, idle, moderate int
	var waitHot, waitIdle float64
	for i := range ports {
		if r0[i].Err != nil || r1[i].Err != nil || !r1[i].Extended || r1[i].Port != ports[i] {
			t.Fatalf("port %s: bad reading %+v", ports[i], r1[i])
		}
		d := fabric.Diff(&r0[i], &r1[i])
		if d.Reset {
			t.Fatalf("port %s: counters went backwards: %v -> %v", ports[i], r0[i].V, r1[i].V)
		}
		l, _ := topo.LinkAt(ports[i])
		util := d.Rate(fabric.XmitData) / l.Capacity()
		if util > 1 {
			t.Fatalf("port %s sends at %.2f of capacity", ports[i], util)
		}
		switch {
		case util > 0.7:
			hot++
			waitHot += d.Rate(fabric.XmitWait)
		case util < 0.01:
			idle++
			waitIdle += d.Rate(fabric.XmitWait)
		default:
			moderate++
		}
		if pk := d.Delta[fabric.XmitPkts]; pk > 0 {
			if avg := float64(d.Delta[fabric.XmitData]) / float64(pk); avg < 1000 || avg > 4200 {
				t.Fatalf("port %s: %.0f bytes per packet", ports[i], avg)
			}
		}
		if u, m := d.Delta[fabric.UnicastXmitPkts], d.Delta[fabric.MulticastXmitPkts]; u+m != d.Delta[fabric.XmitPkts] {
			t.Fatalf("port %s: unicast %d + multicast %d != packets %d", ports[i], u, m, d.Delta[fabric.XmitPkts])
		}
		// What a port receives is what its peer sends.
		peer, _ := topo.Peer(ports[i])
		pr, _ := s.Sweep(ctx, topo, []fabric.PortRef{peer}, fabric.SweepOptions{})
		if pr[0].V[fabric.XmitData] != r1[i].V[fabric.RcvData] {
			t.Fatalf("port %s receives %d bytes, peer %s sent %d", ports[i], r1[i].V[fabric.RcvData], peer, pr[0].V[fabric.XmitData])
		}
	}
	n := len(ports)
	t.Logf("%d hot, %d moderate, %d idle ports", hot, moderate, idle)
	if hot < n/50 || hot > n/8 || idle < n/10 || moderate < n/2 {
		t.Errorf("load mix %d hot, %d moderate, %d idle of %d: want a few hot, most moderate, some idle", hot, moderate, idle, n)
	}
	if waitHot/float64(hot) < 100*waitIdle/float64(idle) {
		t.Errorf("XmitWait does not rise with load: hot ports %.0f/s, idle ports %.0f/s", waitHot/float64(hot), waitIdle/float64(idle))
	}

	// Over a day, rates change and a few ports count errors.
	clk.t = clk.t.Add(24 * time.Hour)
	r2, _ := s.Sweep(ctx, topo, ports, fabric.SweepOptions{})
	var errPorts, changed int
	for i := range ports {
		d1, d2 := fabric.Diff(&r0[i], &r1[i]), fabric.Diff(&r1[i], &r2[i])
		for c := fabric.FirstError; c < fabric.NumCounters; c++ {
			if r2[i].V[c] > 0 {
				errPorts++
				break
			}
		}
		if a, b := d1.Rate(fabric.XmitData), d2.Rate(fabric.XmitData); a > 1.2*b || b > 1.2*a {
			changed++
		}
	}
	if errPorts == 0 || errPorts > n/20 {
		t.Errorf("%d of %d ports count errors, want a few", errPorts, n)
	}
	if changed < n/10 {
		t.Errorf("only %d of %d ports changed rate over a day", changed, n)
	}

	// Same seed and time, same counters; another seed, other counters.
	same, c2 := newTestSource(t, Spec{Kind: KindStampede}, 7)
	other, c3 := newTestSource(t, Spec{Kind: KindStampede}, 8)
	c2.t, c3.t = clk.t, clk.t
	a, _ := same.Sweep(ctx, topo, ports[:100], fabric.SweepOptions{})
	b, _ := other.Sweep(ctx, topo, ports[:100], fabric.SweepOptions{})
	differ := 0
	for i := range a {
		if a[i].Counters != r2[i].Counters {
			t.Fatalf("port %s: same seed and time gave %v and %v", ports[i], a[i].V, r2[i].V)
		}
		if b[i].V[fabric.XmitData] != a[i].V[fabric.XmitData] {
			differ++
		}
	}
	if differ < 90 {
		t.Errorf("another seed changed only %d of 100 ports", differ)
	}
}

func TestSourceEvents(t *testing.T) {
	ctx := context.Background()
	s, clk := newTestSource(t, Spec{Kind: KindFatTree, Hosts: 16, Radix: 8}, 1)
	before, _ := s.Discover(ctx)
	ft0, err := s.ForwardingTables(ctx, before)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := before.FindNode("l1-sw1")
	up := fabric.PortRef{GUID: leaf.GUID, Port: 5}
	peer, _ := before.Peer(up)

	if err := s.SetLinkDown(up, true); err != nil {
		t.Fatal(err)
	}
	after, _ := s.Discover(ctx)
	if len(after.Links) != len(before.Links)-1 {
		t.Fatalf("%d links after taking one down, had %d", len(after.Links), len(before.Links))
	}
	ev := fabric.Changes(before, after, clk.t)
	if len(ev) != 1 || ev[0].Kind != fabric.EventLinkDown {
		t.Errorf("changes %+v, want one link_down", ev)
	}
	rs, _ := s.Sweep(ctx, before, []fabric.PortRef{up, peer, {GUID: leaf.GUID, Port: 1}}, fabric.SweepOptions{})
	if rs[0].Err == nil || rs[1].Err == nil || rs[2].Err != nil {
		t.Errorf("sweep with a link down: errors %v, %v, %v; want the two ends unreadable", rs[0].Err, rs[1].Err, rs[2].Err)
	}
	ft1, err := s.ForwardingTables(ctx, after)
	if err != nil {
		t.Fatal(err)
	}
	if ft1.Equal(ft0) {
		t.Error("forwarding tables unchanged after a link went down")
	}
	checkRoutes(t, after, ft1, 0)
	if err := s.SetLinkDown(up, false); err != nil {
		t.Fatal(err)
	}
	again, _ := s.Discover(ctx)
	if len(again.Links) != len(before.Links) {
		t.Error("link did not come back")
	}
	if ft, _ := s.ForwardingTables(ctx, again); !ft.Equal(ft0) {
		t.Error("tables differ once the link is back")
	}

	p := fabric.PortRef{GUID: leaf.GUID, Port: 2}
	r0, _ := s.Sweep(ctx, before, []fabric.PortRef{p}, fabric.SweepOptions{})
	if err := s.AddErrors(p, fabric.SymbolErrors, 5); err != nil {
		t.Fatal(err)
	}
	r1, _ := s.Sweep(ctx, before, []fabric.PortRef{p}, fabric.SweepOptions{})
	if r1[0].V[fabric.SymbolErrors]-r0[0].V[fabric.SymbolErrors] != 5 {
		t.Errorf("AddErrors: symbol errors %d -> %d", r0[0].V[fabric.SymbolErrors], r1[0].V[fabric.SymbolErrors])
	}
	if err := s.ResetCounters(ctx, before, []fabric.PortRef{p}); err != nil {
		t.Fatal(err)
	}
	r2, _ := s.Sweep(ctx, before, []fabric.PortRef{p}, fabric.SweepOptions{})
	if r2[0].V != ([fabric.NumCounters]uint64{}) {
		t.Errorf("after reset: %v", r2[0].V)
	}
	clk.t = clk.t.Add(time.Second)
	r3, _ := s.Sweep(ctx, before, []fabric.PortRef{p}, fabric.SweepOptions{})
	if d := fabric.Diff(&r2[0], &r3[0]); d.Reset || r3[0].V[fabric.XmitData] == 0 {
		t.Errorf("counters after reset do not grow: %v", r3[0].V)
	}
	// Bad input gets errors, not panics.
	bogus := fabric.PortRef{GUID: 1, Port: 1}
	if s.SetLinkDown(bogus, true) == nil || s.AddErrors(bogus, fabric.RcvErrors, 1) == nil ||
		s.AddErrors(p, fabric.NumCounters, 1) == nil || s.ResetCounters(ctx, before, []fabric.PortRef{bogus}) == nil {
		t.Error("events on a port that does not exist succeeded")
	}
	if rs, _ := s.Sweep(ctx, before, []fabric.PortRef{bogus}, fabric.SweepOptions{}); rs[0].Err == nil {
		t.Error("sweeping a port that does not exist succeeded")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Sweep(cctx, before, []fabric.PortRef{p}, fabric.SweepOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("sweep with a canceled context: %v", err)
	}
}

func TestSourceNoRoutes(t *testing.T) {
	topo, err := GenerateFatTree(4, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	s := NewSourceFrom(topo, nil, Options{})
	if _, err := s.ForwardingTables(context.Background(), topo); !errors.Is(err, ErrNoRoutes) {
		t.Errorf("ForwardingTables without tables: %v", err)
	}
}

func BenchmarkGenerateStampede(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		if _, _, err := Generate(ctx, Spec{Kind: KindStampede}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSweepStampede(b *testing.B) {
	s, clk := newTestSource(b, Spec{Kind: KindStampede}, 1)
	ctx := context.Background()
	topo, _ := s.Discover(ctx)
	ports := make([]fabric.PortRef, 0, 27504)
	// Every switch port, linked or not, as a daemon sweeping all of them would.
	for i := range topo.Nodes {
		if n := &topo.Nodes[i]; n.Type == fabric.Switch {
			for p := 1; p <= n.Ports; p++ {
				ports = append(ports, fabric.PortRef{GUID: n.GUID, Port: p})
			}
		}
	}
	b.ReportMetric(float64(len(ports)), "ports")
	b.ReportAllocs()
	for b.Loop() {
		clk.t = clk.t.Add(time.Second)
		if _, err := s.Sweep(ctx, topo, ports, fabric.SweepOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSourceErrorsAsRealFabrics: on Stampede, as on a real fabric, error
// counters read zero on almost every port and count on a few bad links,
// never past what their PortCounters field holds (4-bit
// LocalLinkIntegrityErrors stops at 15), and only trickle: over a minute
// no port gains more than one (an alert on totals fired on 213 of them,
// issue 28).
func TestSourceErrorsAsRealFabrics(t *testing.T) {
	ctx := context.Background()
	s, clk := newTestSource(t, Spec{Kind: KindStampede}, 0)
	topo, err := s.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ports := topo.SwitchPorts(false)
	r0, err := s.Sweep(ctx, topo, ports, fabric.SweepOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clk.t = clk.t.Add(time.Minute)
	r1, _ := s.Sweep(ctx, topo, ports, fabric.SweepOptions{})
	bad, rising := 0, 0
	for i := range r0 {
		reads := false
		for c := fabric.FirstError; c < fabric.NumCounters; c++ {
			v, w := r1[i].V[c], r1[i].V[c]-r0[i].V[c]
			if v > 0 {
				reads = true
			}
			if top := uint64(1)<<fabric.Width32[c] - 1; v > top {
				t.Errorf("%s %s = %d, past its field's %d", ports[i], fabric.CounterNames[c], v, top)
			}
			if w > 1 {
				t.Errorf("%s %s rose by %d in a minute", ports[i], fabric.CounterNames[c], w)
			}
			if w > 0 {
				rising++
			}
		}
		if reads {
			bad++
		}
	}
	t.Logf("%d of %d switch ports read errors; %d rose in a minute", bad, len(ports), rising)
	if bad == 0 || bad > len(ports)/200 {
		t.Errorf("%d of %d ports read errors: want a few, not none nor more than 0.5%%", bad, len(ports))
	}
}
