package ethlab

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/sflow"
)

// TestSFlowPin brings up the routed two-spine preset with sFlow on: one
// pmacctd per switch port, exporting to this test's socket on the
// management network, 1 in 4. Pinning h2 <-> h4 over one spine moves all of
// that pair's traffic there (the kernel's counters of both leaves' uplinks,
// both directions), and again over the other spine. Sixteen TCP flows h1 ->
// h3 (same addresses, different ports) are spread by the leaves' L4 hash
// over both spines: the samples show them on both of leaf1's uplinks, and
// the pinned pair's on one only. Every switch port that carried traffic
// sent samples with its own ifIndex as output and its switch's management
// address as agent, at the rate asked for, and per port the bytes they
// estimate are the kernel's transmitted bytes within the sampling error.
// Closing the lab leaves no pmacctd.
func TestSFlowPin(t *testing.T) {
	skipUnlessLab(t)
	if _, err := exec.LookPath("pmacctd"); err != nil {
		t.Fatalf("pmacctd not installed (scripts/install-deps.sh installs pmacct): %v", err)
	}
	const rate = 4
	port := 20000 + rand.IntN(40000)
	lab := StartT(t, Preset("ecmp"), Options{SFlow: fmt.Sprintf(":%d", port), SFlowRate: rate})
	id := lab.ID
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// One probe per switch port, with the kernel's ifIndex of the port.
	probes := lab.SFlowProbes()
	nports := 0
	for _, n := range lab.Nodes() {
		if n.Kind == "switch" {
			nports += len(n.Ports)
		}
	}
	type dirKey struct {
		agent netip.Addr
		out   uint32
	}
	probeOf := map[dirKey]SFlowProbe{}
	for _, p := range probes {
		n, _ := lab.Node(p.Switch)
		out, err := exec.Command("ip", "-n", n.NS, "-o", "link", "show", "dev", p.Port).Output()
		idx, _, _ := strings.Cut(string(out), ":")
		if err != nil || idx != fmt.Sprint(p.IfIndex) || p.Agent != n.MgmtIP || p.Rate != rate || p.Collector != fmt.Sprintf("%s:%d", lab.MgmtAddr(), port) {
			t.Errorf("probe %+v: ifindex %q (%v), switch's management address %s", p, idx, err, n.MgmtIP)
		}
		probeOf[dirKey{netip.MustParseAddr(p.Agent), uint32(p.IfIndex)}] = p
	}
	if len(probes) != nports || len(probeOf) != nports {
		t.Fatalf("%d probes (%d distinct) for %d switch ports: %+v", len(probes), len(probeOf), nports, probes)
	}

	pc, err := net.ListenPacket("udp", fmt.Sprintf("%s:%d", lab.MgmtAddr(), port))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	// Twelve probes' bursts: a receive buffer as the daemon's collector
	// asks for (capped by net.core.rmem_max); with the default 208 KiB,
	// datagrams were lost (gaps in a probe's sample sequence).
	if err := pc.(*net.UDPConn).SetReadBuffer(16 << 20); err != nil {
		t.Fatal(err)
	}
	// The samples of TCP between the hosts, per switch port and flow
	// (both ends' address and port): each connection of the test is told
	// apart by its source port, whenever its samples come.
	type flowKey struct {
		dir      dirKey
		src, dst netip.AddrPort
	}
	type est struct {
		samples      int
		bytes, sumSq float64 // estimated bytes; the sampled frames' squared lengths
		rates        map[uint32]int
	}
	var (
		mu        sync.Mutex
		samples   = map[flowKey]*est{}
		strangers = map[string]int{}
		decodeErr error
		lastTCP   time.Time                // when the last sample of TCP between hosts came
		seqs      = map[dirKey][4]uint32{} // first and last sample sequence, samples, last sample pool
	)
	hosts := map[netip.Addr]string{}
	for _, n := range lab.Nodes() {
		if n.Kind == "host" {
			hosts[netip.MustParseAddr(n.DataIP)] = n.Name
		}
	}
	go func() {
		buf := make([]byte, 65536)
		var d sflow.Datagram
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			mu.Lock()
			if err := sflow.Decode(buf[:n], &d); err != nil {
				decodeErr = err
			}
			for _, f := range d.Flows {
				k := dirKey{d.Agent, f.Output}
				if _, ok := probeOf[k]; !ok || f.OutputFormat != 0 {
					strangers[fmt.Sprintf("agent %s output %d (format %d)", d.Agent, f.Output, f.OutputFormat)]++
					continue
				}
				sq := seqs[k]
				if sq[0] == 0 || f.Sequence < sq[0] {
					sq[0] = f.Sequence
				}
				sq[1] = max(sq[1], f.Sequence)
				sq[2]++
				sq[3] = max(sq[3], f.SamplePool)
				seqs[k] = sq
				h := f.Header
				if !f.HasHeader || h.Proto != 6 || hosts[h.Src] == "" || hosts[h.Dst] == "" {
					continue
				}
				lastTCP = time.Now()
				fk := flowKey{k, netip.AddrPortFrom(h.Src, h.SrcPort), netip.AddrPortFrom(h.Dst, h.DstPort)}
				e := samples[fk]
				if e == nil {
					e = &est{rates: map[uint32]int{}}
					samples[fk] = e
				}
				frame := float64(h.FrameLength - min(h.Stripped, h.FrameLength))
				e.samples++
				e.bytes += frame * float64(f.SamplingRate)
				e.sumSq += frame * frame
				e.rates[f.SamplingRate]++
			}
			mu.Unlock()
		}
	}()

	// The test's connections: the client's address and port, by phase.
	type conn struct {
		phase, pair string
		client      netip.AddrPort
	}
	var conns []conn
	send := func(phase, from, to string, flows, each int) {
		n, _ := lab.Node(from)
		for i := 0; i < flows; i++ {
			_, sport, err := throughput(lab, from, to, each)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, conn{phase, from + ">" + to, netip.AddrPortFrom(netip.MustParseAddr(n.DataIP), sport)})
		}
	}
	// sampled sums the samples of a phase's connections (of one pair, ""
	// any) per switch port, both directions (data and ACKs).
	sampled := func(phase, pair string) map[SFlowProbe]*est {
		out := map[SFlowProbe]*est{}
		mine := map[netip.AddrPort]bool{}
		for _, c := range conns {
			if c.phase == phase && (pair == "" || c.pair == pair) {
				mine[c.client] = true
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for fk, e := range samples {
			if !mine[fk.src] && !mine[fk.dst] {
				continue
			}
			p := probeOf[fk.dir]
			o := out[p]
			if o == nil {
				o = &est{rates: map[uint32]int{}}
				out[p] = o
			}
			o.samples += e.samples
			o.bytes += e.bytes
			o.sumSq += e.sumSq
			for r, n := range e.rates {
				o.rates[r] += n
			}
		}
		return out
	}
	// pmacctd's sfprobe exports a datagram once it is full or at its
	// tick, once a second while packets come: wait until the samples of
	// what was sent have come (3 s, and no sample of TCP for 3 s).
	settle := func() {
		t0 := time.Now()
		for deadline := t0.Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			mu.Lock()
			quiet := time.Since(t0) > 3*time.Second && time.Since(lastTCP) > 3*time.Second
			mu.Unlock()
			if quiet {
				return
			}
		}
		t.Fatal("samples still coming after 30 s")
	}
	uplink := func(leaf, spine string) string { return peerPort(t, lab, leaf, spine) }
	tx := func() map[SFlowProbe]uint64 {
		m := map[SFlowProbe]uint64{}
		for _, p := range probes {
			c, err := lab.IfCounters(p.Switch, p.Port)
			if err != nil {
				t.Fatal(err)
			}
			m[p] = c.TxBytes
		}
		return m
	}
	probeAt := func(sw, port string) SFlowProbe {
		for _, p := range probes {
			if p.Switch == sw && p.Port == port {
				return p
			}
		}
		t.Fatalf("no probe on %s %s", sw, port)
		return SFlowProbe{}
	}

	// spineOf is the spine a port is on or leads to ("" for a leaf's
	// port to a host).
	spineOf := func(p SFlowProbe) string {
		if strings.HasPrefix(p.Switch, "spine") {
			return p.Switch
		}
		for _, w := range lab.Wiring() {
			if w.A.Node == p.Switch && w.A.If == p.Port && strings.HasPrefix(w.B.Node, "spine") {
				return w.B.Node
			}
			if w.B.Node == p.Switch && w.B.If == p.Port && strings.HasPrefix(w.A.Node, "spine") {
				return w.A.Node
			}
		}
		return ""
	}

	// Pinned: all of h2 <-> h4 over the spine pinned, none over the other
	// (what the idle uplinks send meanwhile is LLDP: a few hundred bytes),
	// by the kernel's counters and by the samples.
	const pinned = 4 << 20
	spines := [][2]string{{"spine2", "spine1"}, {"spine1", "spine2"}}
	for _, sp := range spines {
		if err := lab.Pin(ctx, "h2", "h4", sp[0]); err != nil {
			t.Fatal(err)
		}
		b := tx()
		send("pin-"+sp[0], "h2", "h4", 8, pinned/8)
		send("pin-"+sp[0], "h4", "h2", 8, pinned/8)
		a := tx()
		for _, leaf := range []string{"leaf1", "leaf2"} {
			on, off := probeAt(leaf, uplink(leaf, sp[0])), probeAt(leaf, uplink(leaf, sp[1]))
			dOn, dOff := a[on]-b[on], a[off]-b[off]
			t.Logf("h2 <-> h4 pinned over %s: %s %s (to %s) sent %d bytes, %s (to %s) %d", sp[0], leaf, on.Port, sp[0], dOn, off.Port, sp[1], dOff)
			if dOn < pinned || dOff > pinned/100 {
				t.Errorf("pinned over %s: %s's uplinks sent %d (to %s) and %d (to %s) for %d bytes each way", sp[0], leaf, dOn, sp[0], dOff, sp[1], pinned)
			}
		}
	}

	// Hashed and pinned at once: sixteen flows h1 -> h3, h2 <-> h4 over
	// spine1 (the last pin).
	b := tx()
	send("mixed", "h1", "h3", 16, 4<<20)
	send("mixed", "h2", "h4", 4, 4<<20)
	send("mixed", "h4", "h2", 4, 4<<20)
	a := tx()
	settle()
	mu.Lock()
	if decodeErr != nil {
		t.Errorf("a datagram did not decode: %v", decodeErr)
	}
	if len(strangers) > 0 {
		t.Errorf("samples from no probe of the lab: %v", strangers)
	}
	mu.Unlock()

	// The pinned pair's samples: on the pinned spine's ports only.
	for _, c := range []struct{ phase, pair, spine string }{
		{"pin-spine2", "", "spine2"}, {"pin-spine1", "", "spine1"}, {"mixed", "h2>h4", "spine1"}, {"mixed", "h4>h2", "spine1"},
	} {
		got := sampled(c.phase, c.pair)
		var where []string
		for p, e := range got {
			where = append(where, fmt.Sprintf("%s %s %d", p.Switch, p.Port, e.samples))
			// A spine's port, or a leaf's port to a spine: that spine only.
			if sp := spineOf(p); sp != "" && sp != c.spine {
				t.Errorf("%s %s pinned over %s: %d samples at %s %s", c.phase, c.pair, c.spine, e.samples, p.Switch, p.Port)
			}
		}
		sort.Strings(where)
		for _, leaf := range []string{"leaf1", "leaf2"} {
			if got[probeAt(leaf, uplink(leaf, c.spine))] == nil {
				t.Errorf("%s %s pinned over %s: no sample at %s's uplink to it (samples at %s)", c.phase, c.pair, c.spine, leaf, where)
			}
		}
	}
	// h1 -> h3's sixteen flows: on both of leaf1's uplinks.
	hashed := sampled("mixed", "h1>h3")
	for _, sp := range []string{"spine1", "spine2"} {
		if e := hashed[probeAt("leaf1", uplink("leaf1", sp))]; e == nil || e.samples == 0 {
			t.Errorf("leaf1's uplink to %s: no sample of h1 -> h3 (16 flows hashed over both spines)", sp)
		}
	}
	// Per switch port: the bytes the samples of the last phase estimate
	// against the kernel's.
	mixed := sampled("mixed", "")
	var lines []string
	for _, p := range probes {
		counted := float64(a[p] - b[p])
		e := mixed[p]
		if e == nil {
			e = &est{}
		}
		// The estimate's standard deviation: each packet sampled with
		// probability 1/N (pmacctd samples at random), so Var = (N-1)·Σ
		// size², Σ size² estimated as N times the sampled frames' (sFlow's
		// own bound assumes equal sizes; these range from ACKs to 64 KiB
		// GSO frames).
		sigma := math.Sqrt(float64(rate*(rate-1)) * e.sumSq)
		lines = append(lines, fmt.Sprintf("%-6s %-4s ifIndex %-3d: %4d samples, %11.0f bytes estimated, %10.0f sent (kernel), %+6.2f%%, 4σ %5.2f%%",
			p.Switch, p.Port, p.IfIndex, e.samples, e.bytes, counted, 100*(e.bytes-counted)/max(counted, 1), 400*sigma/max(counted, 1)))
		if counted < 1<<20 {
			continue // a port toward ACKs only, or an idle uplink: LLDP and ARP
		}
		if e.samples < 20 || math.Abs(e.bytes-counted) > 4*sigma+float64(64<<10) {
			t.Errorf("%s %s: %d samples estimate %.0f bytes, the kernel sent %.0f (4σ %.0f)", p.Switch, p.Port, e.samples, e.bytes, counted, 4*sigma)
		}
		if len(e.rates) != 1 || e.rates[rate] == 0 {
			t.Errorf("%s %s: sampling rates %v, want %d", p.Switch, p.Port, e.rates, rate)
		}
	}
	if t.Failed() {
		// Lost datagrams show as gaps in a probe's sample sequence; a
		// capture that missed packets, as a sample pool short of the
		// packets the kernel sent.
		mu.Lock()
		for k, v := range seqs {
			c, _ := lab.IfCounters(probeOf[k].Switch, probeOf[k].Port)
			t.Logf("%s %s: samples %d..%d, %d received; sample pool %d, the kernel sent %d packets", probeOf[k].Switch, probeOf[k].Port, v[0], v[1], v[2], v[3], c.TxPackets)
		}
		mu.Unlock()
		for _, p := range probes {
			b, _ := os.ReadFile(filepath.Join(lab.Dir, p.Switch+"-"+p.Port+"-pmacctd.log"))
			t.Logf("%s %s pmacctd:\n%s", p.Switch, p.Port, b)
		}
	}
	t.Logf("per switch port, 64 MiB h1 -> h3 in 16 flows and 16 MiB each way h2 <-> h4, sampled 1 in %d:\n%s", rate, strings.Join(lines, "\n"))
	if err := lab.Close(); err != nil {
		t.Fatal(err)
	}
	assertGone(t, id)
}
