package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/fabric/eth"
	"github.com/netloom/netloom/test/ethlab"
)

// ethConfig writes an eth: fabric file for the lab's switches: v2c with
// the lab's community, or its SNMPv3 authPriv user. edit may change each
// switch's entry.
func ethConfig(t *testing.T, lab *ethlab.Lab, v3 bool, extra string, edit func(sw string, entry *string)) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(extra)
	b.WriteString(lab.NetloomConfig(v3, edit))
	path := filepath.Join(t.TempDir(), "eth.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func openEth(t *testing.T, path string) *eth.Source {
	t.Helper()
	cfg, err := eth.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	src, err := eth.Open(*cfg, eth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// wiredLinks lists the lab's links as "node:if-node:if", sorted.
func wiredLinks(lab *ethlab.Lab) []string {
	var out []string
	for _, w := range lab.Wiring() {
		x, y := w.A.Node+":"+w.A.If, w.B.Node+":"+w.B.If
		if y < x {
			x, y = y, x
		}
		out = append(out, x+"-"+y)
	}
	slices.Sort(out)
	return out
}

// discoveredLinks lists a discovered topology's links the same way.
func discoveredLinks(topo *fabric.Topology, names map[fabric.PortRef]string) []string {
	var out []string
	for _, l := range topo.Links {
		a, _ := topo.Node(l.A.GUID)
		b, _ := topo.Node(l.B.GUID)
		x, y := a.Name()+":"+names[l.A], b.Name()+":"+names[l.B]
		if y < x {
			x, y = y, x
		}
		out = append(out, x+"-"+y)
	}
	slices.Sort(out)
	return out
}

// startEthLab starts a lab and waits until every lldpd sees its wiring.
func startEthLab(t *testing.T, preset string) *ethlab.Lab {
	t.Helper()
	lab := ethlab.StartT(t, ethlab.Preset(preset), ethlab.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := lab.WaitLLDP(ctx); err != nil {
		t.Fatal(err)
	}
	return lab
}

// TestEthLab runs the Ethernet source against a lab of namespaces: real
// snmpd and lldpd on every switch, veths counted by the kernel.
func TestEthLab(t *testing.T) {
	lab := startEthLab(t, "two-leaf")
	v2 := ethConfig(t, lab, false, "", nil)

	t.Run("discovery", func(t *testing.T) { testEthDiscovery(t, lab, v2) })
	t.Run("counters", func(t *testing.T) { testEthCounters(t, lab, v2) })
	t.Run("errors", func(t *testing.T) { testEthErrors(t, lab) })
	t.Run("daemon", func(t *testing.T) { testEthDaemonSwitchDown(t, lab) })
	t.Run("link down", func(t *testing.T) { testEthLinkDown(t, lab) })
}

// testEthLinkDown takes a host's cable out (its switch port down) under a
// daemon rediscovering every 2 s: the link is gone from the fabric, a
// link_down event and the fabric_changed alert name it; back up, a
// link_up event.
func testEthLinkDown(t *testing.T, lab *ethlab.Lab) {
	var port ethlab.End // the switch end of h4's link
	for _, w := range lab.Wiring() {
		if w.A.Node == "h4" {
			port = w.B
		} else if w.B.Node == "h4" {
			port = w.A
		}
	}
	sw, _ := lab.Node(port.Node)
	ipLink := func(state string) {
		if out, err := exec.Command("ip", "-n", sw.NS, "link", "set", port.If, state).CombinedOutput(); err != nil {
			t.Fatalf("ip link set %s %s in %s: %v %s", port.If, state, sw.NS, err, out)
		}
	}
	t.Cleanup(func() { ipLink("up") })
	dir := t.TempDir()
	d, _ := serve(t, dir, nil, "--fabric", "eth:"+ethConfig(t, lab, false, "", nil), "--db", filepath.Join(dir, "netloom.db"),
		"--agent-listen", "off", "--agent-address-file", "-", "--sweep-interval", "1s", "--discover-interval", "2s")
	type event struct {
		Kind, Detail string
		Node         fabric.GUID
	}
	var links struct{ Links []fabric.Link }
	d.waitFor(func() bool {
		return d.get("/api/v1/fabric/links", &links) == 200 && len(links.Links) == len(lab.Wiring())
	}, "every link")
	var h4 fabric.Node
	var nodes struct{ Nodes []fabric.Node }
	d.get("/api/v1/fabric/nodes", &nodes)
	for _, n := range nodes.Nodes {
		if n.Description == "h4" {
			h4 = n
		}
	}
	ipLink("down")
	events := func(kind string) []event {
		var ev struct{ Events []event }
		d.get("/api/v1/events?kind="+kind+"&limit=100", &ev)
		return ev.Events
	}
	d.waitFor(func() bool {
		for _, e := range events(fabric.EventLinkDown) {
			if strings.Contains(e.Detail, h4.GUID.String()) {
				return true
			}
		}
		return false
	}, "a link_down event naming h4's link")
	var alerts struct {
		Alerts []struct {
			Kind, State, Summary string
		}
	}
	d.waitFor(func() bool {
		if d.get("/api/v1/alerts?state=firing", &alerts) != 200 {
			return false
		}
		for _, a := range alerts.Alerts {
			if a.Kind == "fabric_changed" && strings.Contains(a.Summary, "link_down") {
				return true
			}
		}
		return false
	}, "the fabric_changed alert")
	if d.get("/api/v1/fabric/links", &links); len(links.Links) != len(lab.Wiring())-1 {
		t.Errorf("with h4's cable out: %d links, want %d", len(links.Links), len(lab.Wiring())-1)
	}
	ipLink("up")
	d.waitFor(func() bool {
		for _, e := range events(fabric.EventLinkUp) {
			if strings.Contains(e.Detail, h4.GUID.String()) {
				return true
			}
		}
		return false
	}, "a link_up event naming h4's link")
}

// testEthDaemonSwitchDown runs a daemon on the lab, stops one switch's
// agent answering (a relay that drops everything) and starts it again:
// the switch's ports fail their sweeps, counted and recorded as
// port_unreachable events, the other switches are still swept, the daemon
// serves throughout, and the ports recover.
func testEthDaemonSwitchDown(t *testing.T, lab *ethlab.Lab) {
	tg := lab.SNMPTargets()
	proxy, drop := udpProxy(t, tg[1].Addr, 0)
	cfg := ethConfig(t, lab, false, "timeout: 300ms\nretries: 0\n", func(sw string, e *string) {
		if sw == tg[1].Switch {
			*e = fmt.Sprintf("  - {address: %q, name: %q}\n", proxy, sw)
		}
	})
	dir := t.TempDir()
	d, _ := serve(t, dir, nil, "--fabric", "eth:"+cfg, "--db", filepath.Join(dir, "netloom.db"),
		"--agent-listen", "off", "--agent-address-file", "-", "--sweep-interval", "500ms", "--discover-interval", "10m")
	type status struct {
		Sweep struct {
			Count, Ports, Errors int
		} `json:"sweep"`
		Unreachable int `json:"unreachable_ports"`
	}
	var st status
	d.waitFor(func() bool { return d.get("/api/v1/status", &st) == 200 && st.Sweep.Count >= 2 }, "two sweeps")
	if st.Sweep.Errors != 0 || st.Unreachable != 0 {
		t.Fatalf("healthy lab: %+v", st)
	}
	// A healthy lab's switches count no errors or discards (the lab's
	// switches take the LLDP frames they receive, as a real switch's CPU
	// does: docs/ethlab.md).
	d.waitFor(func() bool { return d.get("/api/v1/status", &st) == 200 && st.Sweep.Count >= 8 }, "eight sweeps")
	var perr struct {
		Total int
		Ports []json.RawMessage
	}
	if code := d.get("/api/v1/fabric/errors?from=-5m", &perr); code != 200 || perr.Total != 0 {
		t.Errorf("healthy lab: %d, %d ports with errors: %s", code, perr.Total, perr.Ports)
	}
	// The switch's linked ports: its uplink and its host ports.
	src := openEth(t, ethConfig(t, lab, false, "", nil))
	topo, err := src.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sw, _ := topo.FindNode(tg[1].Switch)
	want := 0
	for _, l := range topo.Links {
		if l.A.GUID == sw.GUID || l.B.GUID == sw.GUID {
			want++
		}
	}
	drop.Store(true)
	d.waitFor(func() bool { return d.get("/api/v1/status", &st) == 200 && st.Unreachable == want }, "the switch's ports unreachable")
	if st.Sweep.Errors != want || st.Sweep.Ports != len(topo.SwitchPorts(false)) {
		t.Errorf("sweep with one switch down: %+v, want %d errors of %d ports", st, want, len(topo.SwitchPorts(false)))
	}
	// metric is the value of the first sample whose line starts with
	// prefix and holds label.
	metric := func(prefix, label string) string {
		resp, err := http.Get(d.base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, prefix) && strings.Contains(line, label) {
				return line[strings.LastIndexByte(line, ' ')+1:]
			}
		}
		return ""
	}
	if m := metric("netloom_fabric_sweep_port_errors_total ", ""); m == "" || m == "0" {
		t.Errorf("netloom_fabric_sweep_port_errors_total = %q", m)
	}
	// The source's own count names the switch that did not answer.
	if m := metric("netloom_eth_errors_total{", fmt.Sprintf("switch=%q", tg[1].Switch)); m == "" || m == "0" {
		t.Errorf("netloom_eth_errors_total for %s = %q", tg[1].Switch, m)
	}
	var events struct {
		Events []fabric.Event `json:"events"`
	}
	if code := d.get("/api/v1/events?limit=100", &events); code != 200 {
		t.Fatalf("events: %d", code)
	}
	unreach := 0
	for _, e := range events.Events {
		if e.Kind == fabric.EventPortUnreachable && e.Node == sw.GUID {
			unreach++
			if !strings.Contains(e.Detail, tg[1].Switch) || !strings.Contains(e.Detail, "no answer within 300ms") {
				t.Errorf("event %q does not name the switch and what happened", e.Detail)
			}
		}
	}
	if unreach != want {
		t.Errorf("%d port_unreachable events for %s, want %d: %+v", unreach, tg[1].Switch, want, events.Events)
	}
	drop.Store(false)
	d.waitFor(func() bool { return d.get("/api/v1/status", &st) == 200 && st.Unreachable == 0 && st.Sweep.Errors == 0 }, "the ports recovered")
	d.get("/api/v1/events?limit=100", &events)
	recovered := 0
	for _, e := range events.Events {
		if e.Kind == fabric.EventPortRecovered && e.Node == sw.GUID {
			recovered++
		}
	}
	if recovered != want {
		t.Errorf("%d port_recovered events, want %d", recovered, want)
	}
	// The Prometheus port metrics: every swept switch port, named as the
	// switches name themselves, its peer as LLDP names it.
	resp, err := http.Get(d.base + "/metrics/ports?counters=xmit_data_bytes")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	series := 0
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "netloom_port_transmit_data_bytes_total{") {
			continue
		}
		series++
		named := false
		for _, s := range tg {
			named = named || strings.Contains(line, fmt.Sprintf("node=%q", s.Switch))
		}
		if !named || !strings.Contains(line, "remote_node=") {
			t.Errorf("port series names no lab switch and peer: %s", line)
		}
	}
	if n := len(topo.SwitchPorts(false)); series != n {
		t.Errorf("/metrics/ports: %d transmit series, want one per swept switch port (%d)\n%s", series, n, b)
	}
}

// testEthDiscovery: discovery equals the lab's wiring (every link, both
// ends, names), what lldpcli says in each namespace, and the interfaces'
// speeds; the same over SNMPv3 and through the CLI.
func testEthDiscovery(t *testing.T, lab *ethlab.Lab, cfg string) {
	ctx := context.Background()
	src := openEth(t, cfg)
	topo, err := src.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if errs := src.Errors(); len(errs) > 0 {
		t.Errorf("errors on a healthy lab: %+v", errs)
	}
	names := src.PortNames()
	got, want := discoveredLinks(topo, names), wiredLinks(lab)
	if !slices.Equal(got, want) {
		t.Errorf("discovered links\n %v\nlab wiring\n %v", got, want)
	}
	c := topo.Counts()
	if c.Switches != len(lab.SNMPTargets()) || c.CAs != len(lab.Desc.Hosts) {
		t.Errorf("counts %+v; lab has %d switches, %d hosts", c, len(lab.SNMPTargets()), len(lab.Desc.Hosts))
	}
	// lldpcli in every namespace: each neighbour it lists is a link.
	set := map[string]bool{}
	for _, l := range got {
		set[l] = true
	}
	for _, n := range lab.Nodes() {
		ns, err := lab.Neighbors(n.Name)
		if err != nil {
			t.Fatal(err)
		}
		if len(ns) != len(n.Ports) {
			t.Errorf("lldpcli on %s: %d neighbours for %d ports", n.Name, len(ns), len(n.Ports))
		}
		for _, nb := range ns {
			x, y := n.Name+":"+nb.LocalIf, nb.SysName+":"+nb.PortID
			if y < x {
				x, y = y, x
			}
			if !set[x+"-"+y] {
				t.Errorf("lldpcli on %s sees %s on %s; discovery has no such link", n.Name, nb.SysName+":"+nb.PortID, nb.LocalIf)
			}
		}
	}
	// Speeds: the kernel's for the switch's interface.
	for _, l := range topo.Links {
		for _, end := range []fabric.PortRef{l.A, l.B} {
			node, _ := topo.Node(end.GUID)
			if node.Type != fabric.Switch {
				continue
			}
			cmd, err := lab.Command(ctx, node.Name(), "cat", "/sys/class/net/"+names[end]+"/speed")
			if err != nil {
				t.Fatal(err)
			}
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("speed of %s %s: %v", node.Name(), names[end], err)
			}
			var mbps uint64
			fmt.Sscan(string(out), &mbps)
			if want := fabric.EthernetSpeed(mbps); l.Speed != want || l.State != "Active" {
				t.Errorf("link %s: %s %s, kernel says %d Mb/s (%s)", l.ID(), l.Speed, l.State, mbps, want)
			}
		}
	}
	// SNMPv3 (authPriv) reads the same fabric.
	src3 := openEth(t, ethConfig(t, lab, true, "", nil))
	topo3, err := src3.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got3 := discoveredLinks(topo3, src3.PortNames()); !slices.Equal(got3, want) {
		t.Errorf("over SNMPv3: %v", got3)
	}
	for i := range topo.Nodes {
		if topo3.Nodes[i].GUID != topo.Nodes[i].GUID || topo3.Nodes[i].LID != topo.Nodes[i].LID {
			t.Errorf("node %s: GUID/LID differ between discoveries", topo.Nodes[i].Description)
		}
	}
	// The CLI: discover, sweep and route.
	out, err := exec.Command(netloomBin, "fabric", "sweep", "--fabric", "eth:"+cfg, "--json").Output()
	if err != nil {
		t.Fatalf("netloom fabric sweep: %v", err)
	}
	var sw struct {
		Ports, Errors int
	}
	if err := json.Unmarshal(out, &sw); err != nil {
		t.Fatal(err)
	}
	if sw.Ports != len(topo.SwitchPorts(false)) || sw.Errors != 0 {
		t.Errorf("netloom fabric sweep: %+v, want %d ports and no errors", sw, len(topo.SwitchPorts(false)))
	}
	out, err = exec.Command(netloomBin, "fabric", "discover", "--fabric", "eth:"+cfg, "--json").Output()
	if err != nil {
		t.Fatalf("netloom fabric discover: %v", err)
	}
	var disc struct {
		Links     []fabric.Link     `json:"links"`
		Nodes     []fabric.Node     `json:"nodes"`
		PortNames map[string]string `json:"port_names"`
	}
	if err := json.Unmarshal(out, &disc); err != nil {
		t.Fatal(err)
	}
	if len(disc.Links) != len(want) || len(disc.PortNames) == 0 {
		t.Errorf("netloom fabric discover: %d links, %d port names", len(disc.Links), len(disc.PortNames))
	}
	out, err = exec.Command(netloomBin, "fabric", "route", "h1", "h3", "--fabric", "eth:"+cfg, "--json").Output()
	if err != nil {
		t.Fatalf("netloom fabric route: %v", err)
	}
	var rt fabric.Route
	if err := json.Unmarshal(out, &rt); err != nil {
		t.Fatal(err)
	}
	var path []string
	for _, h := range rt.Hops {
		path = append(path, h.Description)
	}
	if strings.Join(path, ",") != "h1,leaf1,spine1,leaf2" || rt.To.Description != "h3" || rt.RouteModel != "lldp-shortest-path (unique)" {
		t.Errorf("route h1 -> h3: %v to %s, model %q", path, rt.To.Description, rt.RouteModel)
	}
}

// trafficTo starts a TCP stream from host from to host to (about 6 MB/s,
// python3 on both ends), stopped at cleanup.
func trafficTo(t *testing.T, lab *ethlab.Lab, from, to string, port int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	dst, _ := lab.Node(to)
	recv := fmt.Sprintf(`import socket
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", %d)); s.listen(4)
while True:
    c, _ = s.accept()
    while c.recv(1 << 16): pass
`, port)
	send := fmt.Sprintf(`import socket, time
for i in range(50):
    try:
        c = socket.create_connection((%q, %d)); break
    except OSError: time.sleep(0.1)
b = b"x" * 65536
while True:
    c.sendall(b); time.sleep(0.01)
`, dst.DataIP, port)
	var cmds []*exec.Cmd
	for _, p := range []struct{ node, prog string }{{to, recv}, {from, send}} {
		cmd, err := lab.Command(ctx, p.node, "/usr/bin/python3", "-c", p.prog)
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	t.Cleanup(func() {
		cancel()
		for _, c := range cmds {
			_ = c.Wait()
		}
	})
}

// snmpdCache is how long net-snmp serves IF-MIB values from its cache
// after reading the kernel (a few seconds); the sweep waits past it.
const snmpdCache = 5 * time.Second

// testEthCounters: every swept port's counters equal the kernel's
// statistics for that interface in its namespace, between the values read
// just before the agent's cache could have been filled and just after the
// sweep, while traffic flows across both leaves and the spine.
func testEthCounters(t *testing.T, lab *ethlab.Lab, cfg string) {
	ctx := context.Background()
	src := openEth(t, cfg)
	topo, err := src.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := src.PortNames()
	trafficTo(t, lab, "h1", "h3", 5301)
	trafficTo(t, lab, "h4", "h2", 5302)
	ports := topo.SwitchPorts(false)
	type kc = ethlab.Counters
	read := func() map[fabric.PortRef]kc {
		m := map[fabric.PortRef]kc{}
		for _, p := range ports {
			n, _ := topo.Node(p.GUID)
			c, err := lab.IfCounters(n.Name(), names[p])
			if err != nil {
				t.Fatal(err)
			}
			m[p] = c
		}
		return m
	}
	time.Sleep(time.Second) // the streams connect
	for round := 0; round < 3; round++ {
		before := read()
		time.Sleep(snmpdCache)
		readings, err := src.Sweep(ctx, topo, ports, fabric.SweepOptions{})
		if err != nil {
			t.Fatal(err)
		}
		after := read()
		moved := 0
		for _, r := range readings {
			n, _ := topo.Node(r.Port.GUID)
			name := n.Name() + " " + names[r.Port]
			if r.Err != nil {
				t.Errorf("%s: %v", name, r.Err)
				continue
			}
			b, a := before[r.Port], after[r.Port]
			for _, c := range []struct {
				what       string
				got, lo, h uint64
			}{
				{"rcv bytes / rx_bytes", r.V[fabric.RcvData], b.RxBytes, a.RxBytes},
				{"xmit bytes / tx_bytes", r.V[fabric.XmitData], b.TxBytes, a.TxBytes},
				{"rcv packets / rx_packets", r.V[fabric.RcvPkts], b.RxPackets, a.RxPackets},
				{"xmit packets / tx_packets", r.V[fabric.XmitPkts], b.TxPackets, a.TxPackets},
				{"rcv errors / rx_errors", r.V[fabric.RcvErrors], b.RxErrors, a.RxErrors},
				{"rcv discards / rx_dropped", r.V[fabric.RcvSwitchRelayErrors], b.RxDropped, a.RxDropped},
				{"xmit discards / tx_dropped", r.V[fabric.XmitDiscards], b.TxDropped, a.TxDropped},
			} {
				if c.got < c.lo || c.got > c.h {
					t.Errorf("round %d: %s: %s swept %d, kernel %d before and %d after", round, name, c.what, c.got, c.lo, c.h)
				}
			}
			if a.TxBytes-b.TxBytes > 1<<20 {
				moved++
			}
		}
		if moved < 4 {
			t.Errorf("round %d: only %d ports moved over 1 MiB: is the traffic flowing?", round, moved)
		}
	}
}

// delayProxy relays UDP datagrams to target, each answer held for delay:
// a switch whose agent answers slowly.
func delayProxy(t *testing.T, target string, delay time.Duration) string {
	t.Helper()
	addr, _ := udpProxy(t, target, delay)
	return addr
}

// udpProxy is delayProxy with a switch: while drop is set, nothing is
// relayed (a switch whose agent stopped answering).
func udpProxy(t *testing.T, target string, delay time.Duration) (string, *atomic.Bool) {
	t.Helper()
	drop := &atomic.Bool{}
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up, err := net.Dial("udp4", target)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var client net.Addr
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if drop.Load() {
				continue
			}
			mu.Lock()
			client = from
			mu.Unlock()
			_, _ = up.Write(buf[:n])
		}
	}()
	go func() {
		buf := make([]byte, 65536)
		for {
			n, err := up.Read(buf)
			if err != nil {
				return
			}
			b := append([]byte(nil), buf[:n]...)
			time.AfterFunc(delay, func() {
				mu.Lock()
				c := client
				mu.Unlock()
				_, _ = pc.WriteTo(b, c)
			})
		}
	}()
	t.Cleanup(func() { pc.Close(); up.Close() })
	return pc.LocalAddr().String(), drop
}

// testEthErrors: a switch that does not answer, answers slowly, or is
// asked with the wrong community or SNMPv3 credentials is an error naming
// it, counted; the other switches are still read.
func testEthErrors(t *testing.T, lab *ethlab.Lab) {
	ctx := context.Background()
	tg := lab.SNMPTargets()
	good := len(wiredLinks(lab))
	mgmt := strings.TrimSuffix(lab.MgmtAddr(), ".1") + ".250" // on the management network, nobody there
	slow := delayProxy(t, tg[1].Addr, 700*time.Millisecond)
	for _, c := range []struct {
		name, extra string
		v3          bool
		edit        func(sw string, e *string)
		bad         string   // the switch that fails
		words       []string // the error says
		links       int      // links discovered, where no switch is bad
	}{
		{name: "wrong community", extra: "timeout: 300ms\nretries: 0\n",
			edit: func(sw string, e *string) {
				if sw == tg[2].Switch {
					*e = strings.Replace(*e, "}", ", community: wrong}", 1)
				}
			}, bad: tg[2].Switch, words: []string{"no answer within 300ms", "wrong community"}},
		{name: "no answer", extra: "timeout: 300ms\nretries: 1\n",
			edit: func(sw string, e *string) {
				if sw == tg[0].Switch {
					*e = fmt.Sprintf("  - {address: %q, name: %q}\n", mgmt+":161", "ghost")
				}
			}, bad: "ghost", words: []string{"no answer within 300ms, 2 tries"}},
		{name: "slow answer", extra: "timeout: 300ms\nretries: 0\n",
			edit: func(sw string, e *string) {
				if sw == tg[1].Switch {
					*e = fmt.Sprintf("  - {address: %q, name: %q}\n", slow, "slow")
				}
			}, bad: "slow", words: []string{"no answer within 300ms"}},
		{name: "slow answer within the timeout", extra: "timeout: 3s\nretries: 0\n",
			edit: func(sw string, e *string) {
				if sw == tg[1].Switch {
					*e = fmt.Sprintf("  - {address: %q, name: %q}\n", slow, "slow")
				}
			}, links: good},
		{name: "wrong v3 auth", v3: true, extra: "timeout: 1s\nretries: 0\n",
			edit: func(sw string, e *string) {
				if sw == tg[2].Switch {
					*e = strings.Replace(*e, "}", ", v3: {user: netloom, auth_pass: wrong-auth-pass, priv_pass: "+tg[2].V3PrivPass+"}}", 1)
				}
			}, bad: tg[2].Switch, words: []string{"SNMPv3", "fails authentication"}},
		{name: "wrong v3 user", v3: true, extra: "timeout: 1s\nretries: 0\n",
			edit: func(sw string, e *string) {
				if sw == tg[2].Switch {
					*e = strings.Replace(*e, "}", ", v3: {user: nobody, auth_pass: "+tg[2].V3AuthPass+", priv_pass: "+tg[2].V3PrivPass+"}}", 1)
				}
			}, bad: tg[2].Switch, words: []string{"SNMPv3", "nobody"}},
		{name: "wrong v3 priv", v3: true, extra: "timeout: 1s\nretries: 0\n",
			edit: func(sw string, e *string) {
				if sw == tg[2].Switch {
					*e = strings.Replace(*e, "}", ", v3: {user: netloom, auth_pass: "+tg[2].V3AuthPass+", priv_pass: wrong-priv-pass}}", 1)
				}
			}, bad: tg[2].Switch, words: []string{"no answer within 1s", "wrong priv_pass"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := openEth(t, ethConfig(t, lab, c.v3, c.extra, c.edit))
			start := time.Now()
			topo, err := src.Discover(ctx)
			if err != nil {
				t.Fatalf("discovery failed with one bad switch: %v", err)
			}
			took := time.Since(start)
			errs := src.Errors()
			if c.bad == "" {
				if len(errs) > 0 {
					t.Errorf("errors %+v", errs)
				}
				if len(topo.Links) != c.links {
					t.Errorf("%d links, want %d", len(topo.Links), c.links)
				}
				if took < 700*time.Millisecond {
					t.Errorf("discovery took %s through a 700ms proxy", took)
				}
				return
			}
			var found bool
			for _, e := range errs {
				if strings.Contains(e.Switch, c.bad) && e.Field != "" && e.Count > 0 {
					found = true
				}
			}
			if !found {
				t.Errorf("no error counted for switch %s: %+v", c.bad, errs)
			}
			// Every other switch was read: its links are there.
			var readSwitches int
			for _, n := range topo.Nodes {
				if n.Type == fabric.Switch {
					readSwitches++
					if strings.Contains(n.Description, c.bad) {
						t.Errorf("switch %s in the topology", c.bad)
					}
				}
			}
			if readSwitches != len(tg)-1 {
				t.Errorf("%d switches read, want %d", readSwitches, len(tg)-1)
			}
			// A sweep: the good switches' ports read, none of the bad one's.
			readings, err := src.Sweep(ctx, topo, topo.SwitchPorts(false), fabric.SweepOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range readings {
				if r.Err != nil {
					t.Errorf("port %s of a good switch: %v", r.Port, r.Err)
				}
			}
			// The error message names the switch and says what happened.
			msg := errorText(t, c.v3, c.extra, lab, c.edit, c.bad)
			for _, w := range c.words {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not say %q", msg, w)
				}
			}
		})
	}
}

// errorText is the error a discovery of the bad switch alone gives.
func errorText(t *testing.T, v3 bool, extra string, lab *ethlab.Lab, edit func(string, *string), bad string) string {
	t.Helper()
	only := func(sw string, e *string) {
		edit(sw, e)
		if !strings.Contains(*e, bad) {
			*e = ""
		}
	}
	src := openEth(t, ethConfig(t, lab, v3, extra, only))
	_, err := src.Discover(context.Background())
	if err == nil {
		t.Fatalf("discovery of the bad switch %s alone succeeded", bad)
	}
	var e *eth.Error
	if !errors.As(err, &e) || !strings.Contains(e.Switch, bad) {
		t.Errorf("error %v does not name switch %s", err, bad)
	}
	return err.Error()
}

// ethFrame is the bytes a TCP/IPv4 packet adds on an Ethernet link beyond
// its payload: the Ethernet header (14; the veth counts no preamble, FCS
// or gap), IPv4 (20) and TCP with the timestamp option Linux sends (32).
// A veth passes GSO packets whole, so a packet here is one the kernel
// counted (statistics/*_packets), of up to 64 KiB.
const ethFrame = 14 + 20 + 32

// TestEthAttribution runs an Open MPI job under the agent between a host
// of each leaf, with a daemon reading the lab's switches, and checks, on
// every link direction of the job's routes, the bytes attributed to the
// job against what the switch counters measured over the job. Framing is
// counted explicitly: the packets the kernel counted on the direction's
// switch port times ethFrame, added to the job's MPI payload (Open MPI's
// own TCP BTL headers and LLDP frames are the small rest). On a tree
// ("two-leaf") every direction is checked alone; on an L3 leaf-spine with
// two spines ("ecmp") the route model splits each pair evenly over the
// two paths, while the switches hash each TCP connection onto one of
// them: each stage of the path (the two uplinks of a leaf together, the
// two spines' downlinks together) is checked as a whole, and each
// direction's attribution equals the model's even share.
func TestEthAttribution(t *testing.T) {
	buildAgent(t)
	for _, c := range []struct {
		preset string
		impl   int // impls(t)[impl]
	}{{"two-leaf", 0}, {"ecmp", 0}, {"two-leaf", 1}} {
		m := impls(t)[c.impl]
		t.Run(c.preset+"/"+m.name, func(t *testing.T) {
			if _, ok := ethlab.PresetOK(c.preset); !ok {
				t.Skipf("the lab has no preset %q", c.preset)
			}
			needMPI(t, m)
			prog := compile(t, m, filepath.Join(repoRoot(t), "test/ethlab/testdata/ring.c"))
			testEthAttribution(t, m, prog, c.preset)
		})
	}
}

func testEthAttribution(t *testing.T, m mpiImpl, prog, preset string) {
	lab := startEthLab(t, preset)
	cfg := ethConfig(t, lab, false, "", nil)
	d, agentAddr := serveEth(t, lab, cfg)

	// The routes' link directions, by stage (hop number), both ways, with
	// the model's share of each.
	src := openEth(t, cfg)
	topo, err := src.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	names := src.PortNames()
	if got, want := discoveredLinks(topo, names), wiredLinks(lab); !slices.Equal(got, want) {
		t.Errorf("discovered links\n %v\nlab wiring\n %v", got, want)
	}
	routes := fabric.NewRoutes(topo, nil)
	h1, _ := topo.FindNode("h1")
	h3, _ := topo.FindNode("h3")
	type stage struct {
		dirs  []fabric.PortRef
		share map[fabric.PortRef]float64
	}
	var stages []*stage
	pairOf := map[fabric.PortRef][2]fabric.LID{} // the job's pair crossing each direction
	wantPaths := map[string]int{"two-leaf": 1, "ecmp": 2}[preset]
	for _, pair := range [][2]fabric.LID{{h1.LID, h3.LID}, {h3.LID, h1.LID}} {
		rt, err := routes.Path(pair[0], pair[1])
		if err != nil {
			t.Fatal(err)
		}
		if rt.PathCount != wantPaths {
			t.Fatalf("route %d -> %d: %d paths (%s), want %d", pair[0], pair[1], rt.PathCount, rt.RouteModel, wantPaths)
		}
		paths := rt.Paths
		if len(paths) == 0 {
			paths = []fabric.SharedPath{{Share: 1, Hops: rt.Hops}}
		}
		first := len(stages)
		for _, p := range paths {
			for k, h := range p.Hops {
				for len(stages) <= first+k {
					stages = append(stages, &stage{share: map[fabric.PortRef]float64{}})
				}
				st := stages[first+k]
				ref := fabric.PortRef{GUID: h.GUID, Port: h.Port}
				if _, seen := st.share[ref]; !seen {
					st.dirs = append(st.dirs, ref)
				}
				pairOf[ref] = pair
				st.share[ref] += p.Share
			}
		}
	}
	// A direction's packets: the sending switch port's transmitted ones,
	// or for a host's port the receiving switch port's.
	packets := func() map[fabric.PortRef]uint64 {
		out := map[fabric.PortRef]uint64{}
		for _, st := range stages {
			for _, p := range st.dirs {
				n, _ := topo.Node(p.GUID)
				if n.Type == fabric.Switch {
					c, err := lab.IfCounters(n.Name(), names[p])
					if err != nil {
						t.Fatal(err)
					}
					out[p] = c.TxPackets
					continue
				}
				peer, _ := topo.Peer(p)
				pn, _ := topo.Node(peer.GUID)
				c, err := lab.IfCounters(pn.Name(), names[peer])
				if err != nil {
					t.Fatal(err)
				}
				out[p] = c.RxPackets
			}
		}
		return out
	}
	time.Sleep(2 * time.Second)
	before := packets()
	const size, iters = 4 << 20, 25
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := lab.MPIRun(ctx, ethlab.RunSpec{Impl: m.name, Hosts: []string{"h1", "h3"}, RanksPerHost: 1,
		Argv: []string{prog, fmt.Sprint(size), fmt.Sprint(iters)}, Dir: t.TempDir(),
		Env: []string{"LD_PRELOAD=" + m.lib, "NETLOOM_DAEMON=" + agentAddr, "NETLOOM_INTERVAL=1", "NETLOOM_JOB_ID=eth-" + lab.ID + "-" + m.name}})
	if err != nil {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	// Past the agent's last report and two sweeps (and net-snmp's cache).
	time.Sleep(snmpdCache + 3*time.Second)
	after := packets()
	var job string
	t.Logf("mpirun output:\n%s", out)
	d.waitFor(func() bool {
		var list struct {
			Jobs []struct {
				ID    string
				State string
				Nodes int
			}
		}
		if d.get("/api/v1/jobs?limit=10", &list) != 200 {
			return false
		}
		for _, j := range list.Jobs {
			if j.State == "finished" && j.Nodes == 2 {
				job = j.ID
				return true
			}
		}
		return false
	}, "the job, finished")
	type dirJSON struct {
		From           fabric.PortRef
		Measured       struct{ Bytes uint64 }
		MonitoredBytes uint64   `json:"monitored_bytes"`
		Explained      *float64 `json:"explained_pct"`
		Jobs           []struct {
			Job   string
			Bytes uint64
		}
	}
	// The answers resting on the routes say they are the LLDP model's.
	for _, path := range []string{"/jobs/" + job + "/why", "/jobs/" + job + "/links", "/hotspots?min_utilization=0"} {
		var ans struct {
			RouteModel string `json:"route_model"`
		}
		if code := d.get("/api/v1"+path, &ans); code != 200 || ans.RouteModel != fabric.ModelShortestPath {
			t.Errorf("%s: %d, route_model %q, want %q", path, code, ans.RouteModel, fabric.ModelShortestPath)
		}
	}
	payload := float64(size * iters) // each way
	for k, st := range stages {
		var mine, measured, framing float64
		for _, p := range st.dirs {
			var got dirJSON
			var split struct {
				Directions []dirJSON
				RouteModel string `json:"route_model"`
			}
			if code := d.get("/api/v1/links/"+p.String()+"/jobs?from=-15m", &split); code != 200 {
				t.Fatalf("link %s jobs: %d", p, code)
			}
			if split.RouteModel != fabric.ModelShortestPath {
				t.Errorf("link %s jobs: route_model %q, want %q", p, split.RouteModel, fabric.ModelShortestPath)
			}
			// The link's routes give the job's pair the same share.
			var lr struct {
				Directions []struct {
					From  fabric.PortRef
					Pairs []fabric.PairShare
				}
				RouteModel string `json:"route_model"`
			}
			if code := d.get("/api/v1/links/"+p.String()+"/routes", &lr); code != 200 || lr.RouteModel != fabric.ModelShortestPath {
				t.Fatalf("link %s routes: %d, route_model %q", p, code, lr.RouteModel)
			}
			share := -1.0
			for _, dr := range lr.Directions {
				for _, ps := range dr.Pairs {
					if dr.From == p && ps.Src == pairOf[p][0] && ps.Dst == pairOf[p][1] {
						share = ps.Share
					}
				}
			}
			if math.Abs(share-st.share[p]) > 1e-9 {
				t.Errorf("link %s routes: pair %v share %g, want %g", p, pairOf[p], share, st.share[p])
			}
			for _, dj := range split.Directions {
				if dj.From == p {
					got = dj
				}
			}
			var b uint64
			for _, j := range got.Jobs {
				if j.Job == job {
					b = j.Bytes
				}
			}
			n, _ := topo.Node(p.GUID)
			name := n.Name() + ":" + names[p]
			// The model's share of the job's payload, no more, no less.
			if want := payload * st.share[p]; float64(b) < want || float64(b) > want*1.01 {
				t.Errorf("%s: %d bytes attributed to job %s, the model's share %.2f of %.0f is %.0f", name, b, job, st.share[p], payload, want)
			}
			pk := after[p] - before[p]
			t.Logf("stage %d %s: measured %d bytes, %d packets; attributed %d (share %.2f), framing %d x %d = %d; explained_pct (payload only) %.2f",
				k, name, got.Measured.Bytes, pk, b, st.share[p], pk, ethFrame, pk*ethFrame, deref(got.Explained))
			mine += float64(b)
			measured += float64(got.Measured.Bytes)
			framing += float64(pk * ethFrame)
		}
		ratio := (mine + framing) / measured
		t.Logf("stage %d (%d directions): payload %.0f + framing %.0f = %.3f%% of the %.0f bytes measured", k, len(st.dirs), mine, framing, 100*ratio, measured)
		if ratio < 0.95 || ratio > 1.05 {
			t.Errorf("stage %d: payload and framing explain %.2f%% of the measured bytes, want 95..105%%", k, 100*ratio)
		}
	}
}

func deref(p *float64) float64 {
	if p == nil {
		return -1
	}
	return *p
}

// TestEthFabricsPostgres runs an Ethernet fabric beside a simulated
// InfiniBand one on one PostgreSQL database: a collector for each (fabric
// names "ib" and "eth") and an API daemon reading both. Every daemon's
// node list holds both fabrics, links of both are measured, and routes
// answer in each: the Ethernet one with its route model, the InfiniBand
// one from its forwarding tables, though their LIDs overlap.
func TestEthFabricsPostgres(t *testing.T) {
	lab := startEthLab(t, "two-leaf")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	pg := startPostgres(t, ctx)
	dbURL, err := pg.CreateDB(ctx, "ethfabrics")
	if err != nil {
		t.Fatal(err)
	}
	common := []string{"--db", dbURL, "--agent-listen", "off", "--agent-address-file", "-", "--poll-interval", "500ms",
		"--sweep-interval", "500ms", "--discover-interval", "10m"}
	colIB, _ := serve(t, t.TempDir(), nil, append([]string{"--fabric", "sim:fat-tree:hosts=8,radix=4", "--fabric-name", "ib"}, common...)...)
	colEth, _ := serve(t, t.TempDir(), nil, append([]string{"--fabric", "eth:" + ethConfig(t, lab, false, "", nil), "--fabric-name", "eth"}, common...)...)
	apid, _ := serve(t, t.TempDir(), nil, "--role", "api", "--db", dbURL, "--agent-listen", "off",
		"--sweep-interval", "500ms", "--poll-interval", "500ms")
	type node struct {
		GUID              fabric.GUID
		Type, Description string
		Fabric            string
	}
	for _, d := range []*daemon{colIB, colEth, apid} {
		var nodes struct{ Nodes []node }
		d.waitFor(func() bool {
			return d.get("/api/v1/fabric/nodes", &nodes) == 200 && len(nodes.Nodes) == (8+6)+(4+3)
		}, "both fabrics' nodes")
		by := map[string]int{}
		for _, n := range nodes.Nodes {
			by[n.Fabric+" "+n.Type]++
		}
		if by["ib ca"] != 8 || by["ib switch"] != 6 || by["eth ca"] != 4 || by["eth switch"] != 3 {
			t.Errorf("%s: nodes by fabric and type %v", d.base, by)
		}
		d.waitFor(func() bool {
			var top struct {
				Links []struct {
					Link     struct{ A fabric.PortRef }
					Measured bool
				}
			}
			if d.get("/api/v1/links/top?n=200", &top) != 200 {
				return false
			}
			seen := map[string]bool{}
			for _, l := range top.Links {
				for _, n := range nodes.Nodes {
					if n.GUID == l.Link.A.GUID && l.Measured {
						seen[n.Fabric] = true
					}
				}
			}
			return seen["ib"] && seen["eth"]
		}, "measured links of both fabrics")
		// A collector routes its own fabric (internal/daemon/fabrics.go);
		// the API daemon, reading the store, both.
		if d != colIB {
			var rt fabric.Route
			d.waitFor(func() bool { return d.get("/api/v1/routes?src=h1&dst=h3", &rt) == 200 }, "the Ethernet route")
			if rt.RouteModel != "lldp-shortest-path (unique)" || len(rt.Hops) != 4 || rt.To.Description != "h3" {
				t.Errorf("%s: Ethernet route h1 -> h3: %+v", d.base, rt)
			}
		}
		if d != colEth {
			var ib fabric.Route
			d.waitFor(func() bool { return d.get("/api/v1/routes?src=n1&dst=n8", &ib) == 200 }, "the InfiniBand route")
			if ib.RouteModel != "" || len(ib.Hops) < 2 {
				t.Errorf("%s: InfiniBand route n1 -> n8: %+v", d.base, ib)
			}
		}
	}
}

// serveEth starts a daemon on the lab (the Ethernet source of cfg, swept
// every second, MPI agents reporting over the lab's management network)
// and waits for its routes and two sweeps.
func serveEth(t *testing.T, lab *ethlab.Lab, cfg string, args ...string) (*daemon, string) {
	t.Helper()
	dir := t.TempDir()
	d, agentAddr := serve(t, dir, nil, append([]string{"--fabric", "eth:" + cfg, "--db", filepath.Join(dir, "netloom.db"),
		"--agent-listen", lab.MgmtAddr() + ":0", "--agent-address-file", "-",
		"--sweep-interval", "1s", "--discover-interval", "10m"}, args...)...)
	d.waitFor(func() bool {
		var st struct {
			Routes bool
			Sweep  struct{ Count int } `json:"sweep"`
		}
		return d.get("/api/v1/status", &st) == 200 && st.Sweep.Count >= 2 && st.Routes
	}, "two sweeps")
	return d, agentAddr
}
