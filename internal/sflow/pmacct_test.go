package sflow

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestPmacctSFlow decodes what a real sFlow agent sends: Debian's pmacctd
// with its sfprobe plugin, sampling every packet of a veth in a network
// namespace, while a TCP connection from the namespace sends 4 MB out of
// it. Checked against the kernel: the samples of that connection carry
// the 5-tuple the test made, the agent address and ifIndex pmacctd was
// given, and their frames' bytes are the bytes the kernel counted out of
// the interface (every packet sampled: the same, less what was not the
// connection's).
func TestPmacctSFlow(t *testing.T) {
	if testing.Short() {
		t.Skip("starts pmacctd in a network namespace")
	}
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	for _, tool := range []string{"ip", "pmacctd", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not installed (scripts/install-deps.sh installs iproute2, pmacct and python3): %v", tool, err)
		}
	}
	id := rand.IntN(1 << 16)
	ns, rootIf, nsIf := fmt.Sprintf("nlsf%04x", id), fmt.Sprintf("nlsf%04xr", id), "sf0"
	sub := fmt.Sprintf("10.%d.%d", 200+id%50, id%250)
	rootAddr, nsAddr := sub+".1", sub+".2"
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run("ip", "netns", "add", ns)
	t.Cleanup(func() {
		_ = exec.Command("ip", "netns", "del", ns).Run()
		_ = exec.Command("ip", "link", "del", rootIf).Run()
	})
	run("ip", "link", "add", rootIf, "type", "veth", "peer", "name", nsIf)
	run("ip", "link", "set", nsIf, "netns", ns)
	run("ip", "addr", "add", rootAddr+"/30", "dev", rootIf)
	run("ip", "link", "set", rootIf, "up")
	run("ip", "-n", ns, "addr", "add", nsAddr+"/30", "dev", nsIf)
	run("ip", "-n", ns, "link", "set", nsIf, "up")
	ifIndex := run("ip", "netns", "exec", ns, "cat", "/sys/class/net/"+nsIf+"/ifindex")
	txBytes := func() uint64 {
		v, err := strconv.ParseUint(run("ip", "netns", "exec", ns, "cat", "/sys/class/net/"+nsIf+"/statistics/tx_bytes"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	// The collector: this test, on the root namespace's end of the veth.
	pc, err := net.ListenPacket("udp", rootAddr+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	conf := filepath.Join(t.TempDir(), "pmacctd.conf")
	// docs/sflow.md's configuration (pmacctd 1.7.7's keys: the plugin's
	// own named after it, the rate as sampling_rate; the port's egress
	// only, so every sample's output is the port), with this test's
	// interface, addresses and ifIndex.
	doc, err := os.ReadFile("../../docs/sflow.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```conf\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/sflow.md has no ```conf block")
	}
	text := string(m[1])
	for _, r := range [][2]string{{"pcap_interface: swp1", "pcap_interface: " + nsIf}, {"10.200.0.1:6343", pc.LocalAddr().String()},
		{"sfprobe_agentip[p]: 10.200.0.3", "sfprobe_agentip[p]: " + nsAddr}, {"sfprobe_ifindex[p]: 5", "sfprobe_ifindex[p]: " + ifIndex}} {
		if !strings.Contains(text, r[0]) {
			t.Fatalf("docs/sflow.md's configuration has no %q:\n%s", r[0], text)
		}
		text = strings.ReplaceAll(text, r[0], r[1])
	}
	os.WriteFile(conf, []byte(text), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// pmacctd forks its plugin: the whole process group is stopped, and
	// its output goes to a file (a pipe would be held open by the plugin).
	logFile := filepath.Join(filepath.Dir(conf), "pmacctd.log")
	lf, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	probe := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "pmacctd", "-f", conf)
	probe.Stdout, probe.Stderr = lf, lf
	probe.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	probe.Cancel = func() error { return syscall.Kill(-probe.Process.Pid, syscall.SIGKILL) }
	if err := probe.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = probe.Wait() }()
	log := func() string { b, _ := os.ReadFile(logFile); return string(b) }

	type flow struct {
		frames, bytes uint64
		out           uint32
	}
	var (
		mu        sync.Mutex // got, between the reader and the test
		datagrams int
		got       = map[string]*flow{}
		agentSeen = map[netip.Addr]bool{}
		decodeErr error
	)
	received := make(chan struct{})
	go func() {
		defer close(received)
		buf := make([]byte, 65536)
		var d Datagram
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			mu.Lock()
			datagrams++
			if err := Decode(buf[:n], &d); err != nil {
				mu.Unlock()
				decodeErr = err
				continue
			}
			agentSeen[d.Agent] = true
			for _, f := range d.Flows {
				if !f.HasHeader || f.SamplingRate != 1 {
					continue
				}
				h := f.Header
				k := fmt.Sprintf("%s:%d>%s:%d/%d", h.Src, h.SrcPort, h.Dst, h.DstPort, h.Proto)
				if got[k] == nil {
					got[k] = &flow{out: f.Output}
				}
				got[k].frames++
				got[k].bytes += uint64(h.FrameLength - min(h.Stripped, h.FrameLength)) // the FCS the kernel does not count
			}
			mu.Unlock()
		}
	}()
	// pmacctd is capturing once the link type is logged.
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(log(), "Sampling at"); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pmacctd did not start sampling in 20 s:\n%s", log())
		}
	}
	time.Sleep(500 * time.Millisecond)

	l, err := net.Listen("tcp", rootAddr+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const size = 4 << 20
	tx0 := txBytes()
	send := exec.Command("ip", "netns", "exec", ns, "python3", "-c",
		fmt.Sprintf("import socket; s = socket.create_connection(('%s', %d)); print(s.getsockname()[1], flush=True); s.sendall(b'x' * %d); s.close()",
			rootAddr, l.Addr().(*net.TCPAddr).Port, size))
	var sport strings.Builder
	send.Stdout = &sport
	if err := send.Start(); err != nil {
		t.Fatal(err)
	}
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	buf := make([]byte, 1<<16)
	for {
		k, err := c.Read(buf)
		n += k
		if err != nil {
			break
		}
	}
	c.Close()
	if err := send.Wait(); err != nil || n != size {
		t.Fatalf("the connection moved %d bytes of %d: %v", n, size, err)
	}
	tx := txBytes() - tx0
	key := fmt.Sprintf("%s:%s>%s:%d/6", nsAddr, strings.TrimSpace(sport.String()), rootAddr, l.Addr().(*net.TCPAddr).Port)

	// pmacctd exports as it samples; wait until the connection's bytes
	// stop growing (at most 20 s).
	var last uint64
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		time.Sleep(time.Second)
		cur := uint64(0)
		mu.Lock()
		if f := got[key]; f != nil {
			cur = f.bytes
		}
		mu.Unlock()
		if cur > 0 && cur == last {
			break
		}
		last = cur
	}
	pc.Close()
	<-received
	if decodeErr != nil {
		t.Errorf("a datagram of pmacctd's did not decode: %v", decodeErr)
	}
	f := got[key]
	if f == nil {
		t.Fatalf("%d datagrams, no sample of the connection %s; flows seen: %v\npmacctd:\n%s", datagrams, key, keys(got), log())
	}
	idx, _ := strconv.ParseUint(ifIndex, 10, 32)
	if !agentSeen[netip.MustParseAddr(nsAddr)] || len(agentSeen) != 1 {
		t.Errorf("agent addresses %v, want %s (sfprobe_agentip)", agentSeen, nsAddr)
	}
	if f.out != uint32(idx) {
		t.Errorf("the connection's samples went out on ifIndex %d; want %d (sfprobe_ifindex)", f.out, idx)
	}
	// Every packet sampled: the connection's frames are what the kernel
	// sent out of the interface, but for the few packets that were not
	// the connection's (ARP, neighbour discovery).
	t.Logf("%d datagrams; the connection: %d frames, %d bytes sampled; the kernel sent %d bytes out of %s; payload %d", datagrams, f.frames, f.bytes, tx, nsIf, size)
	if f.bytes < size || float64(f.bytes) < 0.98*float64(tx) || f.bytes > tx {
		t.Errorf("sampled %d bytes of the connection, the kernel sent %d (payload %d): want the kernel's to within 2%%", f.bytes, tx, size)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
