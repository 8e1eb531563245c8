package e2e

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/test/ethlab"
)

// TestEthSFlow runs the daemon's sFlow collector on the two-leaf lab with
// real sFlow agents: Debian's pmacctd (sfprobe plugin) in the switch
// namespaces, one per port, exporting to --sflow-listen on the management
// network. A TCP stream h1 -> h3 crosses leaf1's uplink (sampled 1 in 1)
// and leaf2's port to h3 (1 in 5): per link direction, the bytes the
// daemon estimates from the samples agree with the kernel's counters of
// that port within sFlow's sampling error. An agent address that is no
// switch of the eth file, an ifIndex that maps to no port, and datagrams
// that are not sFlow or are cut short are refused, counted and logged.
func TestEthSFlow(t *testing.T) {
	if _, err := exec.LookPath("pmacctd"); err != nil {
		t.Fatalf("pmacctd not installed (scripts/install-deps.sh installs pmacct): %v", err)
	}
	lab := startEthLab(t, "two-leaf")
	cfg := ethConfig(t, lab, false, "", nil)
	// The eth source's own view: the ports as the daemon numbers them.
	src := openEth(t, cfg)
	topo, err := src.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	names := src.PortNames()
	portOf := func(node, ifname string) fabric.PortRef {
		for p, n := range names {
			if nd, ok := topo.Node(p.GUID); ok && nd.Name() == node && n == ifname {
				return p
			}
		}
		t.Fatalf("no port %s:%s in the discovered topology", node, ifname)
		return fabric.PortRef{}
	}
	// wireEnd is node's interface on its wire to peer.
	wireEnd := func(node, peerPrefix string) string {
		for _, w := range lab.Wiring() {
			for _, e := range [][2]ethlab.End{{w.A, w.B}, {w.B, w.A}} {
				if e[0].Node == node && strings.HasPrefix(e[1].Node, peerPrefix) {
					return e[0].If
				}
			}
		}
		t.Fatalf("no wire from %s to %s*", node, peerPrefix)
		return ""
	}

	// A free UDP port on the management network for the collector.
	pc, err := net.ListenPacket("udp", lab.MgmtAddr()+":0")
	if err != nil {
		t.Fatal(err)
	}
	collector := pc.LocalAddr().String()
	pc.Close()
	dir := t.TempDir()
	d, _ := serve(t, dir, nil, "--fabric", "eth:"+cfg, "--db", filepath.Join(dir, "netloom.db"),
		"--agent-listen", "off", "--agent-address-file", "-", "--sflow-listen", collector,
		"--sweep-interval", "1s", "--discover-interval", "10m")
	d.waitFor(func() bool {
		var st struct {
			Sweep struct{ Count int } `json:"sweep"`
		}
		return d.get("/api/v1/status", &st) == 200 && st.Sweep.Count >= 1
	}, "a sweep")

	type probe struct {
		node, ifname string
		rate         int
		agentIP      string // "": the switch's management address
		ifIndex      string // "": the interface's own
	}
	leaf1Up, leaf2H3 := wireEnd("leaf1", "spine"), wireEnd("leaf2", "h3")
	spineL1, spineL2 := wireEnd(spineName(t, lab), "leaf1"), wireEnd(spineName(t, lab), "leaf2")
	probes := []probe{
		{node: "leaf1", ifname: leaf1Up, rate: 1},
		{node: "leaf2", ifname: leaf2H3, rate: 5},
		// No switch of the eth file: refused, unknown_agent.
		{node: spineName(t, lab), ifname: spineL2, rate: 1, agentIP: "10.254.254.254"},
		// The spine's, with an ifIndex it has not: unknown_ifindex.
		{node: spineName(t, lab), ifname: spineL1, rate: 1, ifIndex: "99999"},
	}
	for i, p := range probes {
		n, _ := lab.Node(p.node)
		if p.agentIP == "" {
			p.agentIP = n.MgmtIP
		}
		if p.ifIndex == "" {
			out, err := exec.Command("ip", "netns", "exec", n.NS, "cat", "/sys/class/net/"+p.ifname+"/ifindex").Output()
			if err != nil {
				t.Fatal(err)
			}
			p.ifIndex = strings.TrimSpace(string(out))
		}
		conf := filepath.Join(dir, fmt.Sprintf("pmacctd-%d.conf", i))
		text := fmt.Sprintf("daemonize: false\npcap_interface: %s\npcap_direction: out\nplugins: sfprobe[p]\n"+
			"sfprobe_receiver[p]: %s\nsampling_rate[p]: %d\nsfprobe_agentip[p]: %s\nsfprobe_ifindex[p]: %s\nsfprobe_direction[p]: out\n",
			p.ifname, collector, p.rate, p.agentIP, p.ifIndex)
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		startPmacctd(t, n.NS, conf)
	}
	time.Sleep(3 * time.Second) // the probes open their captures

	sent := 200 << 20
	type kc = ethlab.Counters
	read := func(node, ifname string) kc {
		c, err := lab.IfCounters(node, ifname)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	from := time.Now()
	b1, b2 := read("leaf1", leaf1Up), read("leaf2", leaf2H3)
	sendTCP(t, lab, "h1", "h3", 5311, sent)
	time.Sleep(3 * time.Second) // the probes export what they hold
	a1, a2 := read("leaf1", leaf1Up), read("leaf2", leaf2H3)

	for _, c := range []struct {
		node, ifname string
		counted      uint64
	}{{"leaf1", leaf1Up, a1.TxBytes - b1.TxBytes}, {"leaf2", leaf2H3, a2.TxBytes - b2.TxBytes}} {
		port := portOf(c.node, c.ifname)
		link := linkOf(t, topo, port)
		var ans struct {
			Directions []struct {
				From    fabric.PortRef `json:"from"`
				Bytes   uint64         `json:"estimated_bytes"`
				Samples uint64         `json:"samples"`
				Flows   []struct {
					Src     string `json:"src"`
					Dst     string `json:"dst"`
					Proto   uint8  `json:"proto"`
					DstPort uint16 `json:"dst_port"`
				} `json:"flows"`
			} `json:"directions"`
		}
		path := "/api/v1/links/" + link + "/flows?from=" + from.Add(-time.Second).UTC().Format(time.RFC3339)
		if code := d.get(path, &ans); code != 200 {
			t.Fatalf("GET %s: %d", path, code)
		}
		found := false
		for _, dir := range ans.Directions {
			if dir.From != port {
				continue
			}
			found = true
			h1, _ := lab.Node("h1")
			h3, _ := lab.Node("h3")
			if len(dir.Flows) == 0 || dir.Flows[0].Src != h1.DataIP || dir.Flows[0].Dst != h3.DataIP || dir.Flows[0].Proto != 6 || dir.Flows[0].DstPort != 5311 {
				t.Errorf("%s %s: the largest flow is not h1 -> h3:5311 over TCP: %+v", c.node, c.ifname, dir.Flows)
			}
			bound := 1.96 * math.Sqrt(1/float64(max(dir.Samples, 1)))
			dev := (float64(dir.Bytes) - float64(c.counted)) / float64(c.counted)
			t.Logf("%s %s: %d samples, %d bytes estimated, %d counted by the kernel: %+.2f%% (bound ±%.2f%%)",
				c.node, c.ifname, dir.Samples, dir.Bytes, c.counted, 100*dev, 100*bound)
			if c.counted < uint64(sent) {
				t.Errorf("%s %s: the kernel counted %d bytes out, less than the %d sent", c.node, c.ifname, c.counted, sent)
			}
			if math.Abs(dev) > bound {
				t.Errorf("%s %s: estimated %d bytes, counted %d: %+.2f%%, past the sampling error ±%.2f%%",
					c.node, c.ifname, dir.Bytes, c.counted, 100*dev, 100*bound)
			}
		}
		if !found {
			t.Errorf("link %s has no direction from %v: %+v", link, port, ans)
		}
	}
	if n := d.metric("netloom_sflow_refused_total", `reason="unknown_agent"`); n == 0 {
		t.Errorf("no datagram refused as unknown_agent (10.254.254.254's)\n%s", tailString(d.log.String(), 20))
	}
	if n := d.metric("netloom_sflow_refused_total", `reason="unknown_ifindex"`); n == 0 {
		t.Errorf("no sample refused as unknown_ifindex (ifIndex 99999)\n%s", tailString(d.log.String(), 20))
	}
	if n := d.metric("netloom_sflow_refused_total", `reason="malformed"`); n != 0 {
		t.Errorf("%g datagrams of pmacctd refused as malformed", n)
	}
	// Garbage on the collector's socket: counted as malformed, and the
	// daemon keeps serving.
	c, err := net.Dial("udp", collector)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{[]byte("not sflow"), {0, 0, 0, 5, 0, 0, 0, 1, 10, 200}, {0, 0, 0, 5, 0, 0, 0, 1, 10, 200, 0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff}} {
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	d.waitFor(func() bool { return d.metric("netloom_sflow_refused_total", `reason="malformed"`) == 3 }, "three malformed datagrams counted")
	// Each reason logged (the daemon counts a refusal, then logs it: the
	// line may come a moment after the count the wait above saw).
	for _, what := range []string{"unknown_agent", "unknown_ifindex", "malformed"} {
		d.waitFor(func() bool { return strings.Contains(d.log.String(), "reason="+what) }, "a log line for "+what)
	}
}

func spineName(t *testing.T, lab *ethlab.Lab) string {
	for _, n := range lab.Nodes() {
		if strings.HasPrefix(n.Name, "spine") {
			return n.Name
		}
	}
	t.Fatal("the lab has no spine")
	return ""
}

// linkOf is the ID of the link a port is an end of.
func linkOf(t *testing.T, topo *fabric.Topology, p fabric.PortRef) string {
	for _, l := range topo.Links {
		if l.A == p || l.B == p {
			return l.ID()
		}
	}
	t.Fatalf("no link at %v", p)
	return ""
}

// startPmacctd runs pmacctd -f conf in namespace ns, in its own process
// group (it forks its plugin), killed with the test.
func startPmacctd(t *testing.T, ns, conf string) {
	ctx, cancel := context.WithCancel(context.Background())
	logf, err := os.Create(conf + ".log")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "pmacctd", "-f", conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(conf + ".log")
			t.Logf("%s:\n%s", conf, tailString(string(b), 4))
		}
	})
}

// sendTCP sends n bytes from one lab host to another over one TCP
// connection and returns once the receiver has them all.
func sendTCP(t *testing.T, lab *ethlab.Lab, from, to string, port, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dst, _ := lab.Node(to)
	recv := fmt.Sprintf(`import socket
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", %d)); s.listen(1)
c, _ = s.accept(); n = 0
while True:
    b = c.recv(1 << 16)
    if not b: break
    n += len(b)
print(n)
`, port)
	send := fmt.Sprintf(`import socket, time
for i in range(50):
    try:
        c = socket.create_connection((%q, %d)); break
    except OSError: time.sleep(0.1)
b = b"x" * (1 << 20)
for i in range(%d): c.sendall(b)
c.close()
`, dst.DataIP, port, n>>20)
	rc, err := lab.Command(ctx, to, "/usr/bin/python3", "-c", recv)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rc.Stdout = &out
	if err := rc.Start(); err != nil {
		t.Fatal(err)
	}
	sc, err := lab.Command(ctx, from, "/usr/bin/python3", "-c", send)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := sc.CombinedOutput(); err != nil {
		t.Fatalf("sender: %v\n%s", err, b)
	}
	if err := rc.Wait(); err != nil {
		t.Fatalf("receiver: %v", err)
	}
	if got := strings.TrimSpace(out.String()); got != fmt.Sprint(n) {
		t.Fatalf("received %s bytes, sent %d", got, n)
	}
}
