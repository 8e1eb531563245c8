package ib

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/test/ibsim"
)

// The tests run against a real simulated fabric: ibsim.TestMain starts
// ibsim and OpenSM, then re-runs this binary under umad2sim, where the
// real infiniband-diags tools are the oracle.
func TestMain(m *testing.M) {
	os.Exit(ibsim.TestMain(m, "testdata/fattree.net", ibsim.Options{}))
}

// setup attaches to the fabric and opens a Source on it.
func setup(t *testing.T) (*ibsim.Fabric, *Source, context.Context) {
	t.Helper()
	f := ibsim.Attached(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	s, err := Open(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return f, s, ctx
}

func discover(t *testing.T, ctx context.Context, s *Source) *fabric.Topology {
	t.Helper()
	topo, err := s.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func TestDiscoverMatchesIbnetdiscover(t *testing.T) {
	f, s, ctx := setup(t)
	topo := discover(t, ctx, s)
	out, err := f.Run(ctx, "ibnetdiscover")
	if err != nil {
		t.Fatal(err)
	}
	want, err := parseIbnetdiscover(out)
	if err != nil {
		t.Fatal(err)
	}
	c := topo.Counts()
	if c.Switches != 6 || c.CAs != 8 || c.Links != 16 {
		t.Errorf("counts = %+v, want 6 switches, 8 CAs, 16 links", c)
	}
	// ibnetdiscover prints what a link runs at, not what it could do
	// (TestLinkCapabilities checks that against smpquery).
	links := slices.Clone(topo.Links)
	for i := range links {
		links[i].MaxWidth, links[i].MaxSpeed = "", ""
	}
	got := &fabric.Topology{Nodes: topo.Nodes, Links: links}
	if !reflect.DeepEqual(got.Nodes, want.Nodes) {
		t.Errorf("nodes differ from ibnetdiscover:\ngot  %+v\nwant %+v", got.Nodes, want.Nodes)
	}
	if !reflect.DeepEqual(got.Links, want.Links) {
		t.Errorf("links differ from ibnetdiscover:\ngot  %+v\nwant %+v", got.Links, want.Links)
	}
	// The net file gives links mixed rates, extended speeds included.
	for name, want := range map[string]string{"n3": "4X DDR", "n4": "1X SDR", "n1": "4X QDR", "n5": "4X FDR", "n7": "4X EDR", "n8": "12X EDR"} {
		n, err := topo.FindNode(name)
		if err != nil {
			t.Fatal(err)
		}
		l, ok := topo.LinkAt(fabric.PortRef{GUID: n.GUID, Port: 1})
		if !ok || l.Width+" "+l.Speed != want || l.State != "Active" {
			t.Errorf("%s link = %+v, want %s Active", name, l, want)
		}
	}
	rates := map[string]int{}
	for _, l := range topo.Links {
		rates[l.Width+" "+l.Speed]++
	}
	if rates["4X HDR"] != 4 || rates["4X EDR"] != 5 {
		t.Errorf("link rates %v, want 4 spine2 links at 4X HDR and 4+1 at 4X EDR", rates)
	}
	n1, err := topo.FindNode("n1")
	if err != nil || n1.Type != fabric.CA || len(n1.PortGUIDs) != 2 || n1.PortGUIDs[1] != n1.GUID+1 {
		t.Errorf("n1 = %+v, %v; want a CA whose port 1 GUID is its node GUID + 1 (ibsim numbering)", n1, err)
	}
}

var (
	ndHeader = regexp.MustCompile(`^(Switch|Ca|Rt)\s+(\d+)\s+"[SHR]-([0-9a-f]+)"\s+# "(.*?)"(.*)$`)
	ndPort   = regexp.MustCompile(`^\[(\d+)\](?:\(([0-9a-f]+)\))?\s+"[SHR]-([0-9a-f]+)"\[(\d+)\]\S*\s+#(.*)$`)
	ndLID    = regexp.MustCompile(`\blid (\d+)`)
	ndRate   = regexp.MustCompile(`(\d+)x(\w+)\s*$`)
)

// parseIbnetdiscover reads ibnetdiscover's text into the fabric model:
// nodes with GUID, type, description, LIDs and port GUIDs, and links with
// width and speed (it prints only active links).
func parseIbnetdiscover(out []byte) (*fabric.Topology, error) {
	var nodes []fabric.Node
	var links []fabric.Link
	seen := map[fabric.Link]bool{}
	var cur *fabric.Node
	sc := bufio.NewScanner(bytes.NewReader(out))
	for ln := 1; sc.Scan(); ln++ {
		line := strings.TrimSpace(sc.Text())
		if m := ndHeader.FindStringSubmatch(line); m != nil {
			g, _ := strconv.ParseUint(m[3], 16, 64)
			ports, _ := strconv.Atoi(m[2])
			nodes = append(nodes, fabric.Node{GUID: fabric.GUID(g), Description: m[4], Ports: ports})
			cur = &nodes[len(nodes)-1]
			switch m[1] {
			case "Switch":
				cur.Type = fabric.Switch
				lm := ndLID.FindStringSubmatch(m[5])
				if lm == nil {
					return nil, fmt.Errorf("ibnetdiscover line %d: switch without lid: %q", ln, line)
				}
				l, _ := strconv.Atoi(lm[1])
				cur.LID = fabric.LID(l)
			case "Ca":
				cur.Type = fabric.CA
			case "Rt":
				cur.Type = fabric.Router
			}
			if cur.Type != fabric.Switch {
				cur.PortLIDs = make([]fabric.LID, ports+1)
				cur.PortGUIDs = make([]fabric.GUID, ports+1)
			}
			continue
		}
		m := ndPort.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if cur == nil {
			return nil, fmt.Errorf("ibnetdiscover line %d: port before any node: %q", ln, line)
		}
		port, _ := strconv.Atoi(m[1])
		rg, _ := strconv.ParseUint(m[3], 16, 64)
		rport, _ := strconv.Atoi(m[4])
		rate := ndRate.FindStringSubmatch(m[5])
		if rate == nil {
			return nil, fmt.Errorf("ibnetdiscover line %d: no width/speed: %q", ln, line)
		}
		if cur.Type != fabric.Switch {
			pg, _ := strconv.ParseUint(m[2], 16, 64)
			cur.PortGUIDs[port] = fabric.GUID(pg)
			lm := ndLID.FindStringSubmatch(m[5])
			if lm == nil {
				return nil, fmt.Errorf("ibnetdiscover line %d: CA port without lid: %q", ln, line)
			}
			l, _ := strconv.Atoi(lm[1])
			cur.PortLIDs[port] = fabric.LID(l)
			if cur.LID == 0 {
				cur.LID = fabric.LID(l)
			}
		}
		l := fabric.NewLink(fabric.PortRef{GUID: cur.GUID, Port: port}, fabric.PortRef{GUID: fabric.GUID(rg), Port: rport},
			rate[1]+"X", rate[2], "Active")
		if !seen[l] {
			seen[l] = true
			links = append(links, l)
		}
	}
	t, err := fabric.NewTopology(nodes, links)
	if err != nil {
		return nil, fmt.Errorf("ibnetdiscover output: %w", err)
	}
	return t, nil
}

// perfquery runs perfquery (with -x for extended counters) and returns its
// fields by name.
func perfquery(t *testing.T, ctx context.Context, f *ibsim.Fabric, ext bool, lid fabric.LID, port int) map[string]uint64 {
	t.Helper()
	args := []string{strconv.Itoa(int(lid)), strconv.Itoa(port)}
	if ext {
		args = append([]string{"-x"}, args...)
	}
	out, err := f.Run(ctx, "perfquery", args...)
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]uint64{}
	for _, line := range strings.Split(string(out), "\n") {
		name, v, ok := strings.Cut(line, ":")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimLeft(v, "."), 0, 64)
		if err == nil {
			vals[name] = n
		}
	}
	return vals
}

func switchByName(t *testing.T, topo *fabric.Topology, name string) *fabric.Node {
	t.Helper()
	n, err := topo.FindNode(name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// netID is the node id ibsim's console knows a switch by: the one in the
// net file, not the GUID ibsim assigned.
func netID(t *testing.T, desc string) string {
	t.Helper()
	ids := map[string]string{
		"leaf1": "S-0000000000000011", "leaf2": "S-0000000000000012", "leaf3": "S-0000000000000013",
		"leaf4": "S-0000000000000014", "spine1": "S-0000000000000001", "spine2": "S-0000000000000002",
	}
	id, ok := ids[desc]
	if !ok {
		t.Fatalf("no net-file id for %q", desc)
	}
	return id
}

func TestSweepMatchesPerfquery(t *testing.T) {
	f, s, ctx := setup(t)
	topo := discover(t, ctx, s)
	leaf3 := switchByName(t, topo, "leaf3")
	// Port 1 of leaf3 leads to n5, off the path of any management
	// traffic from n1 to leaf3, so its counters hold still between reads.
	for _, c := range []string{
		"PortCounters.SymbolErrorCounter=5",
		"PortCounters.LinkDownedCounter=2",
		"PortCounters.PortRcvErrors=300",
		"PortCounters.PortXmitDiscards=9",
		"PortCounters.LocalLinkIntegrityErrors=3",
		"PortCounters.ExcessiveBufferOverrunErrors=2",
		"PortCounters.VL15Dropped=4",
		"PortCounters.PortXmitWait=77",
		"PortCounters.PortXmitData=1000",
		"PortCountersExtended.PortXmitData=123456789012",
		"PortCountersExtended.PortRcvData=5000",
		"PortCountersExtended.PortUnicastXmitPkts=42",
		"PortCountersExtended.PortUnicastRcvPkts=43",
		// ibsim accepts the multicast counters but never reports them (perfquery
		// reads 0 too), so they are only compared with perfquery.
		"PortCountersExtended.PortMultiCastRcvPkts=44",
	} {
		if err := f.Console(fmt.Sprintf(`PerformanceSet "%s"[1] %s`, netID(t, "leaf3"), c)); err != nil {
			t.Fatal(err)
		}
	}
	ports := topo.SwitchPorts(true)
	rs, err := s.Sweep(ctx, topo, ports, fabric.SweepOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != len(ports) {
		t.Fatalf("%d readings for %d ports", len(rs), len(ports))
	}
	var got *fabric.PortReading
	for i := range rs {
		if rs[i].Port != ports[i] {
			t.Fatalf("reading %d is for %s, want %s", i, rs[i].Port, ports[i])
		}
		if rs[i].Err != nil {
			t.Errorf("port %s: %v", ports[i], rs[i].Err)
		}
		if !rs[i].Extended {
			t.Errorf("port %s: not extended; ibsim supports PortCountersExtended", ports[i])
		}
		if rs[i].Time.IsZero() || time.Since(rs[i].Time) > time.Minute {
			t.Errorf("port %s: reading time %v", ports[i], rs[i].Time)
		}
		if ports[i] == (fabric.PortRef{GUID: leaf3.GUID, Port: 1}) {
			got = &rs[i]
		}
	}
	if got == nil {
		t.Fatal("leaf3 port 1 was not swept")
	}
	pc := perfquery(t, ctx, f, false, leaf3.LID, 1)
	px := perfquery(t, ctx, f, true, leaf3.LID, 1)
	want := map[fabric.Counter]uint64{
		fabric.SymbolErrors:         pc["SymbolErrorCounter"],
		fabric.LinkRecovers:         pc["LinkErrorRecoveryCounter"],
		fabric.LinkDowned:           pc["LinkDownedCounter"],
		fabric.RcvErrors:            pc["PortRcvErrors"],
		fabric.RcvRemotePhysErrors:  pc["PortRcvRemotePhysicalErrors"],
		fabric.RcvSwitchRelayErrors: pc["PortRcvSwitchRelayErrors"],
		fabric.XmitDiscards:         pc["PortXmitDiscards"],
		fabric.XmitConstraintErrors: pc["PortXmitConstraintErrors"],
		fabric.RcvConstraintErrors:  pc["PortRcvConstraintErrors"],
		fabric.LinkIntegrityErrors:  pc["LocalLinkIntegrityErrors"],
		fabric.ExcBufOverrunErrors:  pc["ExcessiveBufferOverrunErrors"],
		fabric.VL15Dropped:          pc["VL15Dropped"],
		fabric.XmitWait:             pc["PortXmitWait"],
		fabric.XmitData:             px["PortXmitData"] * 4,
		fabric.RcvData:              px["PortRcvData"] * 4,
		fabric.XmitPkts:             px["PortXmitPkts"],
		fabric.RcvPkts:              px["PortRcvPkts"],
		fabric.UnicastXmitPkts:      px["PortUnicastXmitPkts"],
		fabric.UnicastRcvPkts:       px["PortUnicastRcvPkts"],
		fabric.MulticastXmitPkts:    px["PortMulticastXmitPkts"],
		fabric.MulticastRcvPkts:     px["PortMulticastRcvPkts"],
	}
	for c, w := range want {
		if got.V[c] != w {
			t.Errorf("%s = %d, perfquery says %d", fabric.CounterNames[c], got.V[c], w)
		}
	}
	// The values set above, so the oracle itself is not fooling us. Data
	// counters also count the management packets ibsim moved since.
	for c, w := range map[fabric.Counter]uint64{
		fabric.SymbolErrors: 5, fabric.LinkDowned: 2, fabric.RcvErrors: 300, fabric.XmitDiscards: 9,
		fabric.LinkIntegrityErrors: 3, fabric.ExcBufOverrunErrors: 2, fabric.VL15Dropped: 4, fabric.XmitWait: 77,
		fabric.UnicastXmitPkts: 42, fabric.UnicastRcvPkts: 43,
	} {
		if got.V[c] != w {
			t.Errorf("%s = %d, set to %d", fabric.CounterNames[c], got.V[c], w)
		}
	}
	for c, w := range map[fabric.Counter]uint64{fabric.XmitData: 123456789012 * 4, fabric.RcvData: 5000 * 4} {
		if got.V[c] < w || got.V[c] > w+1<<20 {
			t.Errorf("%s = %d, set to %d words (%d bytes)", fabric.CounterNames[c], got.V[c], w/4, w)
		}
	}

	// PortCounters alone, as ibqueryerrors reads: the same error counters,
	// the 32-bit data counters perfquery without -x shows.
	p1 := []fabric.PortRef{{GUID: leaf3.GUID, Port: 1}}
	rs, err = s.Sweep(ctx, topo, p1, fabric.SweepOptions{PortCountersOnly: true})
	if err != nil || len(rs) != 1 || rs[0].Err != nil {
		t.Fatalf("PortCounters-only sweep: %v %+v", err, rs)
	}
	if rs[0].Extended {
		t.Errorf("PortCounters-only sweep read the extended counters")
	}
	pc = perfquery(t, ctx, f, false, leaf3.LID, 1)
	for c, w := range map[fabric.Counter]uint64{
		fabric.SymbolErrors: pc["SymbolErrorCounter"], fabric.LinkDowned: pc["LinkDownedCounter"],
		fabric.RcvErrors: pc["PortRcvErrors"], fabric.XmitDiscards: pc["PortXmitDiscards"],
		fabric.XmitWait: pc["PortXmitWait"], fabric.XmitData: pc["PortXmitData"] * 4,
	} {
		if rs[0].V[c] != w {
			t.Errorf("PortCounters only: %s = %d, perfquery says %d", fabric.CounterNames[c], rs[0].V[c], w)
		}
	}
	if rs[0].V[fabric.SymbolErrors] != 5 || rs[0].V[fabric.XmitData] < 1000*4 || rs[0].V[fabric.XmitData] > 1000*4+1<<20 {
		t.Errorf("PortCounters only: symbol errors %d, xmit data %d; set to 5 and 1000 words (plus management packets)", rs[0].V[fabric.SymbolErrors], rs[0].V[fabric.XmitData])
	}
}

func TestResetCounters(t *testing.T) {
	f, s, ctx := setup(t)
	topo := discover(t, ctx, s)
	leaf4 := switchByName(t, topo, "leaf4")
	for _, c := range []string{"PortCounters.SymbolErrorCounter=11", "PortCounters.PortXmitWait=12", "PortCountersExtended.PortXmitData=13"} {
		if err := f.Console(fmt.Sprintf(`PerformanceSet "%s"[2] %s`, netID(t, "leaf4"), c)); err != nil {
			t.Fatal(err)
		}
	}
	p := fabric.PortRef{GUID: leaf4.GUID, Port: 2}
	if err := s.ResetCounters(ctx, topo, []fabric.PortRef{p}); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Sweep(ctx, topo, []fabric.PortRef{p}, fabric.SweepOptions{})
	if err != nil || rs[0].Err != nil {
		t.Fatalf("sweep after reset: %v %v", err, rs[0].Err)
	}
	for _, c := range []fabric.Counter{fabric.SymbolErrors, fabric.XmitWait, fabric.XmitData} {
		if v := rs[0].V[c]; v != 0 {
			t.Errorf("%s = %d after reset", fabric.CounterNames[c], v)
		}
	}
	pc := perfquery(t, ctx, f, false, leaf4.LID, 2)
	if pc["SymbolErrorCounter"] != 0 || pc["PortXmitWait"] != 0 {
		t.Errorf("perfquery after reset: %v", pc)
	}
}

var ibrouteLine = regexp.MustCompile(`^0x([0-9a-f]+) (\d+) :`)

func TestForwardingTablesMatchIbroute(t *testing.T) {
	f, s, ctx := setup(t)
	topo := discover(t, ctx, s)
	ft, err := s.ForwardingTables(ctx, topo)
	if err != nil {
		t.Fatal(err)
	}
	if len(ft) != 6 {
		t.Errorf("%d tables, want 6", len(ft))
	}
	for i := range topo.Nodes {
		n := &topo.Nodes[i]
		if n.Type != fabric.Switch {
			continue
		}
		out, err := f.Run(ctx, "ibroute", strconv.Itoa(int(n.LID)))
		if err != nil {
			t.Fatal(err)
		}
		want := map[int]uint8{}
		for _, line := range strings.Split(string(out), "\n") {
			if m := ibrouteLine.FindStringSubmatch(line); m != nil {
				lid, _ := strconv.ParseUint(m[1], 16, 16)
				port, _ := strconv.Atoi(m[2])
				want[int(lid)] = uint8(port)
			}
		}
		if len(want) == 0 {
			t.Fatalf("ibroute %d printed no routes:\n%s", n.LID, out)
		}
		tbl := ft[n.GUID]
		for lid := 0; lid < len(tbl) || lid <= maxKey(want); lid++ {
			w, ok := want[lid]
			if !ok {
				w = fabric.NoPort
			}
			g := uint8(fabric.NoPort)
			if lid < len(tbl) {
				g = tbl[lid]
			}
			if g != w {
				t.Errorf("switch %q LID %d: port %d, ibroute says %d", n.Description, lid, g, w)
			}
		}
	}

	// Routes computed from the tables agree with ibtracert.
	r := fabric.NewRoutes(topo, ft)
	cas := r.CALIDs()
	for _, pair := range [][2]fabric.LID{{cas[0], cas[len(cas)-1]}, {cas[1], cas[2]}, {cas[len(cas)-1], cas[0]}, {cas[3], cas[4]}} {
		src, dst := pair[0], pair[1]
		rt, err := r.Path(src, dst)
		if err != nil {
			t.Fatal(err)
		}
		out, err := f.Run(ctx, "ibtracert", strconv.Itoa(int(src)), strconv.Itoa(int(dst)))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, h := range rt.Hops {
			got = append(got, fmt.Sprintf("%s/%d", h.GUID, h.Port))
		}
		if want := tracertHops(string(out)); !reflect.DeepEqual(got, want) {
			t.Errorf("route %d -> %d: %v, ibtracert says %v\n%s", src, dst, got, want, out)
		}
	}
}

func maxKey(m map[int]uint8) int {
	k := -1
	for x := range m {
		k = max(k, x)
	}
	return k
}

var (
	tracertFrom = regexp.MustCompile(`^From \w+ \{0x([0-9a-f]+)\} portnum (\d+)`)
	tracertHop  = regexp.MustCompile(`^\[(\d+)\] -> \w+ port \{0x([0-9a-f]+)\}\[(\d+)\]`)
)

// tracertHops lists the ports a packet leaves by, as ibtracert prints
// them: "From ca {GUID} portnum P", then "[OUT] -> switch port {GUID}[IN]".
// The node of each out port is the previous line's.
func tracertHops(out string) []string {
	var hops []string
	var node string
	for _, line := range strings.Split(out, "\n") {
		if m := tracertFrom.FindStringSubmatch(line); m != nil {
			g, _ := strconv.ParseUint(m[1], 16, 64)
			node = fabric.GUID(g).String()
			continue
		}
		if m := tracertHop.FindStringSubmatch(line); m != nil {
			hops = append(hops, node+"/"+m[1])
			g, _ := strconv.ParseUint(m[2], 16, 64)
			node = fabric.GUID(g).String()
		}
	}
	return hops
}

func TestUnreachablePortGetsErr(t *testing.T) {
	f, s, ctx := setup(t)
	topo := discover(t, ctx, s)
	ports := topo.SwitchPorts(true)
	n8, err := topo.FindNode("n8")
	if err != nil {
		t.Fatal(err)
	}
	// Cut n8 off: its PMA can no longer be reached, everything else can.
	if err := f.Console(`Unlink "H-0000000000000108"`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Console(`ReLink "H-0000000000000108"`); err != nil {
			t.Error(err)
		}
	})
	opt := fabric.SweepOptions{Timeout: 50 * time.Millisecond, Retries: 1}
	start := time.Now()
	rs, err := s.Sweep(ctx, topo, ports, opt)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if r.Port.GUID == n8.GUID {
			if r.Err == nil {
				t.Errorf("port %s of unlinked n8 read without error", r.Port)
			} else {
				t.Logf("n8: %v", r.Err)
			}
			continue
		}
		if r.Err != nil {
			t.Errorf("port %s: %v", ports[i], r.Err)
		}
	}
	// No wall-clock assertion (the machines are noisy); for the record:
	t.Logf("sweep of %d ports with one dead took %s", len(ports), took)
}

// TestSweepEmptyAndUnknown covers inputs without a fabric round trip.
func TestSweepEmptyAndUnknown(t *testing.T) {
	_, s, ctx := setup(t)
	topo := discover(t, ctx, s)
	rs, err := s.Sweep(ctx, topo, nil, fabric.SweepOptions{})
	if err != nil || len(rs) != 0 {
		t.Fatalf("empty sweep: %v, %v", rs, err)
	}
	bad := []fabric.PortRef{{GUID: 0xdead, Port: 1}}
	rs, err = s.Sweep(ctx, topo, bad, fabric.SweepOptions{})
	if err != nil || len(rs) != 1 || rs[0].Err == nil || !strings.Contains(rs[0].Err.Error(), "not in topology") {
		t.Fatalf("unknown port: %+v, %v", rs, err)
	}
}

func TestSweepCanceled(t *testing.T) {
	_, s, ctx := setup(t)
	topo := discover(t, ctx, s)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Sweep(cctx, topo, topo.SwitchPorts(false), fabric.SweepOptions{}); err == nil {
		t.Fatal("sweep with a canceled context succeeded")
	}
}

// TestFailingSwitchGetsErr makes ibsim fail every MAD to leaf2, so all its
// ports get Err while the rest of the sweep goes on.
func TestFailingSwitchGetsErr(t *testing.T) {
	f, s, ctx := setup(t)
	topo := discover(t, ctx, s)
	leaf2 := switchByName(t, topo, "leaf2")
	if err := f.Console(fmt.Sprintf(`Error "%s"[0] 100`, netID(t, "leaf2"))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Console(fmt.Sprintf(`Error "%s"[0] 0`, netID(t, "leaf2"))); err != nil {
			t.Error(err)
		}
	})
	ports := topo.SwitchPorts(false)
	rs, err := s.Sweep(ctx, topo, ports, fabric.SweepOptions{Timeout: 50 * time.Millisecond, Retries: 1})
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, r := range rs {
		switch {
		case r.Port.GUID == leaf2.GUID && r.Err == nil:
			t.Errorf("port %s of failing leaf2 read without error", r.Port)
		case r.Port.GUID == leaf2.GUID:
			failed++
		case r.Err != nil:
			t.Errorf("port %s: %v", r.Port, r.Err)
		}
	}
	if failed != 4 {
		t.Errorf("%d leaf2 ports failed, want its 4 linked ports", failed)
	}
	if _, err := s.ForwardingTables(ctx, topo); err == nil || !strings.Contains(err.Error(), "leaf2") {
		t.Errorf("ForwardingTables error = %v, want one naming leaf2", err)
	}
}

// TestDecode checks the attribute layouts on hand-made data, so a layout
// slip shows without a fabric too.
func TestDecode(t *testing.T) {
	pc := make([]byte, 80)
	pc[4], pc[5] = 0x01, 0x02 // SymbolErrorCounter
	pc[6], pc[7] = 3, 4       // LinkErrorRecovery, LinkDowned
	pc[9] = 5                 // PortRcvErrors
	pc[11], pc[13], pc[15] = 6, 7, 8
	pc[16], pc[17] = 9, 10
	pc[19] = 0xBC // LocalLinkIntegrity 0xB, ExcessiveBufferOverrun 0xC
	pc[23] = 11   // VL15Dropped
	pc[27], pc[31], pc[35], pc[39], pc[43] = 12, 13, 14, 15, 16
	var c fabric.Counters
	decodePortCounters(&c, pc)
	want := [fabric.NumCounters]uint64{
		fabric.SymbolErrors: 0x0102, fabric.LinkRecovers: 3, fabric.LinkDowned: 4, fabric.RcvErrors: 5,
		fabric.RcvRemotePhysErrors: 6, fabric.RcvSwitchRelayErrors: 7, fabric.XmitDiscards: 8,
		fabric.XmitConstraintErrors: 9, fabric.RcvConstraintErrors: 10, fabric.LinkIntegrityErrors: 0xB,
		fabric.ExcBufOverrunErrors: 0xC, fabric.VL15Dropped: 11, fabric.XmitData: 48, fabric.RcvData: 52,
		fabric.XmitPkts: 14, fabric.RcvPkts: 15, fabric.XmitWait: 16,
	}
	if c.V != want || c.Extended {
		t.Errorf("PortCounters decoded to %v (extended %v), want %v", c.V, c.Extended, want)
	}
	px := make([]byte, 80)
	for i := 0; i < 8; i++ {
		px[8+8*i] = 0x01 // high byte set: 64-bit counters must not truncate
		px[15+8*i] = byte(i + 1)
	}
	decodePortCountersExtended(&c, px)
	for i, ctr := range []fabric.Counter{fabric.XmitData, fabric.RcvData, fabric.XmitPkts, fabric.RcvPkts,
		fabric.UnicastXmitPkts, fabric.UnicastRcvPkts, fabric.MulticastXmitPkts, fabric.MulticastRcvPkts} {
		w := uint64(1)<<56 | uint64(i+1)
		if ctr == fabric.XmitData || ctr == fabric.RcvData {
			w *= 4
		}
		if c.V[ctr] != w {
			t.Errorf("%s = %#x, want %#x", fabric.CounterNames[ctr], c.V[ctr], w)
		}
	}
	if !c.Extended || c.V[fabric.SymbolErrors] != 0x0102 {
		t.Errorf("extended decode lost the error counters or the flag: %+v", c)
	}
}

// TestRepeatedDiscovery runs more discoveries than umad2sim has agents for
// one port: each libibnetdisc walk leaves its agents behind, and the daemon
// re-discovers forever.
func TestRepeatedDiscovery(t *testing.T) {
	_, s, ctx := setup(t)
	for i := 0; i < 40; i++ {
		topo, err := s.Discover(ctx)
		if err != nil {
			t.Fatalf("discovery %d: %v", i+1, err)
		}
		if _, err := s.ForwardingTables(ctx, topo); err != nil {
			t.Fatalf("forwarding tables after discovery %d: %v", i+1, err)
		}
	}
}

// TestLinkCapabilities checks each link's MaxWidth and MaxSpeed (what both
// ends support and have enabled) against smpquery's PortInfo of both ends,
// and that lowering one end's enabled width with ibportstate lowers it.
func TestLinkCapabilities(t *testing.T) {
	f, s, ctx := setup(t)
	topo := discover(t, ctx, s)
	leaf1 := switchByName(t, topo, "leaf1")
	portInfo := func(lid fabric.LID, port int) map[string]string {
		out, err := f.Run(ctx, "smpquery", "portinfo", strconv.Itoa(int(lid)), strconv.Itoa(port))
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, line := range strings.Split(string(out), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok {
				m[strings.TrimSpace(k)] = strings.TrimLeft(v, ".")
			}
		}
		return m
	}
	// smpquery names widths "1X or 4X" and speeds by their Gbps.
	widths := []string{"1X", "2X", "4X", "8X", "12X"}
	speeds := map[string]string{"2.5 Gbps": "SDR", "5.0 Gbps": "DDR", "10.0 Gbps": "QDR", "14.0625 Gbps": "FDR", "25.78125 Gbps": "EDR", "53.125 Gbps": "HDR"}
	order := []string{"SDR", "DDR", "QDR", "FDR", "EDR", "HDR"}
	both := func(a, b string) map[string]bool {
		in := map[string]bool{}
		for _, x := range strings.Split(a, " or ") {
			in[strings.TrimSpace(x)] = true
		}
		out := map[string]bool{}
		for _, x := range strings.Split(b, " or ") {
			if in[strings.TrimSpace(x)] {
				out[strings.TrimSpace(x)] = true
			}
		}
		return out
	}
	lidOf := func(p fabric.PortRef) fabric.LID {
		n, _ := topo.Node(p.GUID)
		if n.Type == fabric.Switch {
			return n.LID
		}
		return n.PortLID(p.Port)
	}
	checked := 0
	for _, l := range topo.Links {
		if l.A.GUID != leaf1.GUID && l.B.GUID != leaf1.GUID {
			continue
		}
		wantW, wantS := "", ""
		for k, end := range []fabric.PortRef{l.A, l.B} {
			pi := portInfo(lidOf(end), end.Port)
			w := ""
			for x := range both(pi["LinkWidthSupported"], pi["LinkWidthEnabled"]) {
				if slices.Index(widths, x) > slices.Index(widths, w) {
					w = x
				}
			}
			sp := ""
			for x := range both(pi["LinkSpeedSupported"], pi["LinkSpeedEnabled"]) {
				if slices.Index(order, speeds[x]) > slices.Index(order, sp) {
					sp = speeds[x]
				}
			}
			// extended speeds count where the node's capability mask
			// advertises them, as for the active speed (l.Speed says FDR
			// or faster then)
			if slices.Index(order, l.Speed) >= slices.Index(order, "FDR") {
				for x := range both(pi["LinkSpeedExtSupported"], pi["LinkSpeedExtEnabled"]) {
					if slices.Index(order, speeds[x]) > slices.Index(order, sp) {
						sp = speeds[x]
					}
				}
			}
			if k == 0 || slices.Index(widths, w) < slices.Index(widths, wantW) {
				wantW = w
			}
			if k == 0 || slices.Index(order, sp) < slices.Index(order, wantS) {
				wantS = sp
			}
		}
		if l.MaxWidth != wantW || l.MaxSpeed != wantS {
			t.Errorf("link %s: max %s %s, smpquery says %s %s (active %s %s)", l.ID(), l.MaxWidth, l.MaxSpeed, wantW, wantS, l.Width, l.Speed)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no link of leaf1 checked")
	}
	// leaf1's port 1 may now use 1X only: its link can do no more.
	if _, err := f.Run(ctx, "ibportstate", strconv.Itoa(int(leaf1.LID)), "1", "width", "1"); err != nil {
		t.Fatal(err)
	}
	topo = discover(t, ctx, s)
	for _, l := range topo.Links {
		if (l.A == fabric.PortRef{GUID: leaf1.GUID, Port: 1} || l.B == fabric.PortRef{GUID: leaf1.GUID, Port: 1}) && l.MaxWidth != "1X" {
			t.Errorf("after ibportstate width 1: link %s can do %s, want 1X", l.ID(), l.MaxWidth)
		}
	}
}

// TestNoPortReason: why the local port could not be opened, in words.
func TestNoPortReason(t *testing.T) {
	for _, c := range []struct {
		opt   Options
		errno syscall.Errno
		sim   bool
		want  string
	}{
		{Options{}, syscall.EOPNOTSUPP, false, "no InfiniBand adapter, or the ib_umad kernel module is not loaded"},
		{Options{}, syscall.EACCES, false, "no access to /dev/infiniband/umad*"},
		{Options{CA: "mlx5_3", Port: 2}, syscall.ENODEV, false, `no adapter "mlx5_3" with port 2 here`},
		{Options{}, syscall.EOPNOTSUPP, true, "is ibsim running, and IBSIM_SOCKNAME its socket?"},
	} {
		if got := noPortReason(c.opt, c.errno, c.sim); !strings.Contains(got, c.want) {
			t.Errorf("noPortReason(%+v, %v, sim %v) = %q, want %q in it", c.opt, c.errno, c.sim, got, c.want)
		}
	}
}
