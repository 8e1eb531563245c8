// Package e2e runs the netloom binary against real simulated fabrics
// (ibsim + OpenSM) and checks what it reports against infiniband-diags.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/fabric/sim"
	"github.com/netloom/netloom/test/ibsim"
)

// netloomBin is the binary under test, built once by TestMain.
var netloomBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "netloom-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	netloomBin = filepath.Join(dir, "netloom")
	build := exec.Command("go", "build", "-o", netloomBin, "github.com/netloom/netloom/cmd/netloom")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building netloom:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// startFabric generates a fat tree, writes it as a net file and starts
// ibsim and OpenSM on it.
func startFabric(t *testing.T, hosts, radix int) (*ibsim.Fabric, *fabric.Topology) {
	t.Helper()
	if m := ibsim.Missing(); m != "" {
		t.Skip("simulated fabric unavailable: " + m)
	}
	topo, err := sim.GenerateFatTree(hosts, radix, 0)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := sim.WriteNetfile(&buf, topo); err != nil {
		t.Fatal(err)
	}
	net := filepath.Join(t.TempDir(), "fabric.net")
	if err := os.WriteFile(net, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f, err := ibsim.Start(ctx, net, ibsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	return f, topo
}

// daemon is a running `netloom serve`.
type daemon struct {
	t    *testing.T
	cmd  *exec.Cmd
	base string
	log  *bytes.Buffer
}

func startDaemon(t *testing.T, f *ibsim.Fabric, db string, extra ...string) *daemon {
	t.Helper()
	d, _ := serve(t, f.Dir, f.Env(), append([]string{"--fabric", "ib", "--db", db, "--agent-listen", "off", "--agent-address-file", "-",
		"--sweep-interval", "300ms", "--discover-interval", "2s"}, extra...)...)
	d.waitFor(func() bool {
		var st struct {
			Sweep struct{ Count int } `json:"sweep"`
		}
		return d.get("/api/v1/status", &st) == 200 && st.Sweep.Count >= 2
	}, "two sweeps")
	return d
}

var (
	httpLine = regexp.MustCompile(`(https?)://(\S+)`)
	udpLine  = regexp.MustCompile(`udp://(\S+)`)
)

// serve starts `netloom serve --listen 127.0.0.1:0 --log-level debug
// --anonymous admin --agent-auth none ARGS` in dir with env added, as
// serveBare does.
func serve(t *testing.T, dir string, env []string, args ...string) (*daemon, string) {
	t.Helper()
	// Anonymous admin, and agents' datagrams accepted unverified (these
	// tests' agents run without munged: the default, auto, would refuse
	// them all), unless a test says otherwise (a later flag wins).
	return serveBare(t, dir, env, append([]string{"--anonymous", "admin", "--agent-auth", "none"}, args...)...)
}

// serveBare starts `netloom serve --listen 127.0.0.1:0 --log-level debug
// ARGS` in dir with env added, with none of serve's test-bench defaults
// (the daemon as an administrator who sets nothing else gets it), and
// returns once it printed its HTTP address and, unless ARGS turn agents
// off, its agent address (returned too).
func serveBare(t *testing.T, dir string, env []string, args ...string) (*daemon, string) {
	t.Helper()
	cmd := exec.Command(netloomBin, append([]string{"serve", "--listen", "127.0.0.1:0", "--log-level", "debug"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	d := &daemon{t: t, cmd: cmd, log: &bytes.Buffer{}}
	cmd.Stderr = d.log
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.kill)
	wantAgent := !strings.Contains(strings.Join(args, " "), "--agent-listen off")
	r := bufio.NewReader(out)
	var agent string
	for d.base == "" || (wantAgent && agent == "") {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("daemon did not start: %v\n%s", err, d.log)
		}
		if m := httpLine.FindStringSubmatch(line); m != nil {
			d.base = m[1] + "://" + m[2]
		}
		if m := udpLine.FindStringSubmatch(line); m != nil {
			agent = m[1]
		}
	}
	go io.Copy(io.Discard, out)
	return d, agent
}

// dropped lists the daemon's nonzero drop counters, for failure messages.
func (d *daemon) dropped() string {
	resp, err := http.Get(d.base + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "_dropped_total{") && !strings.HasSuffix(line, " 0") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// in returns the daemon bound to a subtest, so its failures stop that test.
func (d *daemon) in(t *testing.T) *daemon {
	c := *d
	c.t = t
	return &c
}

// stop stops the daemon as a service manager does (SIGTERM): it writes
// what it holds before it exits.
func (d *daemon) stop() {
	d.t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	if err := d.cmd.Wait(); err != nil {
		d.t.Fatalf("daemon: %v\n%s", err, tailString(d.log.String(), 30))
	}
}

func (d *daemon) kill() {
	if d.cmd.Process != nil {
		_ = d.cmd.Process.Signal(syscall.SIGKILL)
		_ = d.cmd.Wait()
	}
}

// get fetches path into v and returns the HTTP status.
func (d *daemon) get(path string, v any) int {
	d.t.Helper()
	resp, err := http.Get(d.base + path)
	if err != nil {
		d.t.Fatalf("GET %s: %v\nlog:\n%s", path, err, d.log)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			d.t.Fatalf("GET %s: %v in %s", path, err, b)
		}
	}
	return resp.StatusCode
}

func (d *daemon) waitFor(cond func() bool, what string) {
	d.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			d.t.Fatalf("timed out waiting for %s; daemon log:\n%s", what, tailString(d.log.String(), 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func tailString(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func discoverWithTool(t *testing.T, f *ibsim.Fabric) *fabric.Topology {
	t.Helper()
	out, err := f.Run(context.Background(), "ibnetdiscover")
	if err != nil {
		t.Fatal(err)
	}
	topo, err := sim.ParseNetfile(bytes.NewReader(out), "ibnetdiscover")
	if err != nil {
		t.Fatalf("parsing ibnetdiscover output: %v\n%s", err, out)
	}
	return topo
}

type apiNode struct {
	GUID        fabric.GUID `json:"guid"`
	Type        string      `json:"type"`
	LID         fabric.LID  `json:"lid"`
	Description string      `json:"description"`
	Ports       int         `json:"ports"`
}

type apiLink struct {
	A, B         fabric.PortRef
	Width, Speed string
}

// TestDaemonAgainstDiags runs the daemon on a 3-level fat tree and compares
// topology, routes and counters with ibnetdiscover, ibtracert and perfquery.
func TestDaemonAgainstDiags(t *testing.T) {
	f, _ := startFabric(t, 24, 8)
	d := startDaemon(t, f, filepath.Join(t.TempDir(), "netloom.db"), "--discover-interval", "5m")
	want := discoverWithTool(t, f)

	t.Run("topology equals ibnetdiscover", func(t *testing.T) {
		d := d.in(t)
		var nodes struct{ Nodes []apiNode }
		if code := d.get("/api/v1/fabric/nodes", &nodes); code != 200 {
			t.Fatalf("status %d", code)
		}
		if len(nodes.Nodes) != len(want.Nodes) {
			t.Fatalf("%d nodes, ibnetdiscover has %d", len(nodes.Nodes), len(want.Nodes))
		}
		for i, n := range nodes.Nodes {
			w := want.Nodes[i]
			if n.GUID != w.GUID || n.Type != w.Type.String() || n.Description != w.Description || n.LID != w.LID || n.Ports != w.Ports {
				t.Errorf("node %d: netloom %+v, ibnetdiscover %+v", i, n, w)
			}
		}
		var links struct{ Links []apiLink }
		d.get("/api/v1/fabric/links", &links)
		if len(links.Links) != len(want.Links) {
			t.Fatalf("%d links, ibnetdiscover has %d", len(links.Links), len(want.Links))
		}
		for i, l := range links.Links {
			w := want.Links[i]
			if l.A != w.A || l.B != w.B || l.Width != w.Width || l.Speed != w.Speed {
				t.Errorf("link %d: netloom %+v, ibnetdiscover %+v", i, l, w)
			}
		}
	})

	t.Run("routes equal ibtracert", func(t *testing.T) {
		d := d.in(t)
		var cas []fabric.Node
		for _, n := range want.Nodes {
			if n.Type == fabric.CA {
				cas = append(cas, n)
			}
		}
		for i := 0; i < len(cas); i += 5 {
			for j := len(cas) - 1; j >= 0; j -= 7 {
				src, dst := cas[i], cas[j]
				if src.GUID == dst.GUID {
					continue
				}
				out, err := f.Run(context.Background(), "ibtracert", strconv.Itoa(int(src.LID)), strconv.Itoa(int(dst.LID)))
				if err != nil {
					t.Fatal(err)
				}
				wantHops := parseTracert(t, string(out))
				var rt fabric.Route
				q := fmt.Sprintf("/api/v1/routes?src=%s&dst=%d", url.QueryEscape(src.Name()), dst.LID)
				if code := d.get(q, &rt); code != 200 {
					t.Fatalf("GET %s: %d", q, code)
				}
				var got []fabric.PortRef
				for _, h := range rt.Hops {
					got = append(got, fabric.PortRef{GUID: h.GUID, Port: h.Port})
				}
				if fmt.Sprint(got) != fmt.Sprint(wantHops) {
					t.Errorf("route %s -> %s: netloom %v, ibtracert %v", src.Description, dst.Description, got, wantHops)
				}
			}
		}
	})

	t.Run("counters equal perfquery", func(t *testing.T) {
		d := d.in(t)
		// Give one switch port known data and error counts through ibsim:
		// the leaf port of the last host, which management traffic (from
		// the tools and OpenSM at n1, and the daemon's sweeps of switch
		// port 0) does not cross while no discovery runs.
		var last *fabric.Node
		for i := range want.Nodes {
			if n := &want.Nodes[i]; n.Type == fabric.CA && (last == nil || n.LID > last.LID) {
				last = n
			}
		}
		leafPort, _ := want.Peer(fabric.PortRef{GUID: last.GUID, Port: 1})
		sw, _ := want.Node(leafPort.GUID)
		id := fmt.Sprintf("S-%016x", uint64(sw.GUID))
		for _, c := range []string{
			fmt.Sprintf(`PerformanceSet "%s"[%d] PortCountersExtended.PortXmitData=123456789`, id, leafPort.Port),
			fmt.Sprintf(`PerformanceSet "%s"[%d] PortCounters.SymbolErrorCounter=7`, id, leafPort.Port),
		} {
			if err := f.Console(c); err != nil {
				t.Skipf("ibsim console does not take %q here: %v", c, err)
			}
		}
		port := leafPort
		pq := []string{strconv.Itoa(int(sw.LID)), strconv.Itoa(port.Port)}
		out, err := f.Run(context.Background(), "perfquery", append([]string{"-x"}, pq...)...)
		if err != nil {
			t.Fatal(err)
		}
		xmitWords := perfField(t, string(out), "PortXmitData")
		if xmitWords != 123456789 {
			t.Fatalf("perfquery shows PortXmitData %d after PerformanceSet", xmitWords)
		}
		out, err = f.Run(context.Background(), "perfquery", pq...)
		if err != nil {
			t.Fatal(err)
		}
		symbol := perfField(t, string(out), "SymbolErrorCounter")
		metric := func(name string) float64 {
			resp, err := http.Get(d.base + "/metrics/ports")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			re := regexp.MustCompile(name + `\{guid="` + port.GUID.String() + `",node="[^"]*",port="` + strconv.Itoa(port.Port) + `",[^}]*\} (\S+)`)
			m := re.FindSubmatch(b)
			if m == nil {
				return -1
			}
			v, _ := strconv.ParseFloat(string(m[1]), 64)
			return v
		}
		d.waitFor(func() bool {
			return metric("netloom_port_transmit_data_bytes_total") == float64(4*xmitWords) &&
				metric("netloom_port_symbol_error_total") == float64(symbol)
		}, fmt.Sprintf("metrics to show %d bytes and %d symbol errors", 4*xmitWords, symbol))

		// The jump appears as a sample delta in the stored history. The
		// counter held some management traffic before it was set, so the
		// stored deltas add up to the set value less that.
		var series struct {
			Series struct {
				Delta map[string][]uint64 `json:"delta"`
			}
		}
		d.waitFor(func() bool {
			d.get("/api/v1/ports/"+port.String()+"/counters?from=-1m&counters=xmit_data_bytes,symbol_errors", &series)
			var bytes, errs uint64
			for i, v := range series.Series.Delta["xmit_data_bytes"] {
				bytes += v
				errs += series.Series.Delta["symbol_errors"][i]
			}
			return bytes <= 4*123456789 && bytes > 4*123456789-100_000 && errs == symbol
		}, "the counter jump in the stored series")
	})

	t.Run("bad parameters get clear errors", func(t *testing.T) {
		d := d.in(t)
		for path, want := range map[string]string{
			"/api/v1/links/top?by=colour":                "parameter by",
			"/api/v1/links/top?n=-3":                     "parameter n",
			"/api/v1/events?from=yesterday":              "parameter from",
			"/api/v1/routes?src=n1":                      "parameter dst",
			"/api/v1/routes?src=nosuch&dst=n2":           "parameter src",
			"/api/v1/ports/0xzz:1/counters":              "parameter port",
			"/api/v1/ports/0x1:1/counters?counters=nope": "parameter counters",
			"/api/v1/fabric/nodes?at=1e30":               "parameter at",
		} {
			var body struct{ Error string }
			code := d.get(path, &body)
			if code != 400 || !strings.Contains(body.Error, want) {
				t.Errorf("GET %s: %d %q, want 400 naming %q", path, code, body.Error, want)
			}
		}
		var body struct{ Error string }
		if code := d.get("/api/v1/nodes/n999", &body); code != 404 {
			t.Errorf("unknown node: %d %q", code, body.Error)
		}
	})
}

// TestLinkDownAndTimeTravel unlinks a cable through ibsim's console and
// checks the event, the new topology version, and the old one by time.
func TestLinkDownAndTimeTravel(t *testing.T) {
	f, _ := startFabric(t, 16, 8)
	d := startDaemon(t, f, filepath.Join(t.TempDir(), "netloom.db"))
	var before struct{ Links []apiLink }
	d.get("/api/v1/fabric/links", &before)
	beforeTime := time.Now()
	time.Sleep(50 * time.Millisecond)

	// Take down an uplink of the first switch that has one.
	var victim apiLink
	topo := discoverWithTool(t, f)
	for _, l := range before.Links {
		a, _ := topo.Node(l.A.GUID)
		b, _ := topo.Node(l.B.GUID)
		if a.Type == fabric.Switch && b.Type == fabric.Switch {
			victim = l
			break
		}
	}
	if err := f.Console(fmt.Sprintf(`Unlink "S-%016x"[%d]`, uint64(victim.A.GUID), victim.A.Port)); err != nil {
		t.Fatal(err)
	}
	d.waitFor(func() bool {
		var ev struct{ Events []fabric.Event }
		d.get("/api/v1/events?from=-5m&kind=link_down", &ev)
		for _, e := range ev.Events {
			if e.Node == victim.A.GUID && e.Port == victim.A.Port {
				return true
			}
		}
		return false
	}, "a link_down event for "+victim.A.String())
	var after struct {
		Version int64
		Links   []apiLink
	}
	d.get("/api/v1/fabric/links", &after)
	if len(after.Links) != len(before.Links)-1 {
		t.Errorf("after unlink: %d links, before %d", len(after.Links), len(before.Links))
	}
	var past struct{ Links []apiLink }
	d.get("/api/v1/fabric/links?at="+url.QueryEscape(beforeTime.Format(time.RFC3339Nano)), &past)
	if len(past.Links) != len(before.Links) {
		t.Errorf("time travel to before the unlink: %d links, want %d", len(past.Links), len(before.Links))
	}
	var versions struct{ Versions []struct{ Version int64 } }
	d.get("/api/v1/fabric/versions?from=-5m", &versions)
	if len(versions.Versions) < 2 {
		t.Errorf("versions %+v: want the old and the new topology", versions)
	}
}

// TestCrashKeepsCommittedSamples kills the daemon with SIGKILL while it
// sweeps every 100ms and checks that every sample it had served survives.
func TestCrashKeepsCommittedSamples(t *testing.T) {
	f, _ := startFabric(t, 8, 8)
	db := filepath.Join(t.TempDir(), "netloom.db")
	d := startDaemon(t, f, db, "--sweep-interval", "100ms")
	var ports []fabric.PortRef
	var nodes struct{ Nodes []apiNode }
	d.get("/api/v1/fabric/nodes?type=switch", &nodes)
	var node struct {
		Ports []struct {
			Port int
			Link *struct{} `json:"link"`
		}
	}
	d.get("/api/v1/nodes/"+nodes.Nodes[0].GUID.String(), &node)
	for _, p := range node.Ports {
		if p.Link != nil {
			ports = append(ports, fabric.PortRef{GUID: nodes.Nodes[0].GUID, Port: p.Port})
		}
	}
	time.Sleep(1500 * time.Millisecond)
	seen := map[fabric.PortRef][]float64{}
	cut := time.Now()
	for _, p := range ports {
		var s struct{ Series struct{ Time []float64 } }
		d.get(fmt.Sprintf("/api/v1/ports/%s/counters?from=-1h&to=%d", p, cut.Unix()+1), &s)
		if len(s.Series.Time) == 0 {
			t.Fatalf("no samples stored for %s before the crash", p)
		}
		seen[p] = s.Series.Time
	}
	time.Sleep(120 * time.Millisecond) // kill in the middle of further sweeps
	d.kill()

	out, err := exec.Command("sqlite3", db, "PRAGMA integrity_check").CombinedOutput()
	if err == nil && strings.TrimSpace(string(out)) != "ok" {
		t.Errorf("integrity_check after SIGKILL: %s", out)
	}
	d2 := startDaemon(t, f, db)
	for _, p := range ports {
		var s struct{ Series struct{ Time []float64 } }
		d2.get(fmt.Sprintf("/api/v1/ports/%s/counters?from=-1h&to=%d", p, cut.Unix()+1), &s)
		got := map[float64]bool{}
		for _, x := range s.Series.Time {
			got[x] = true
		}
		for _, x := range seen[p] {
			if !got[x] {
				t.Errorf("port %s: sample at %v served before the crash is gone", p, x)
			}
		}
	}
}

// TestBadInputsGetClearErrors feeds a corrupt config and a malformed net
// file to the CLI.
func TestBadInputsGetClearErrors(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "netloom.yaml")
	os.WriteFile(cfg, []byte("listen: localhost:0\nsweep_interval: fast\n"), 0o644)
	out, err := exec.Command(netloomBin, "serve", "--config", cfg).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "line 2") {
		t.Errorf("corrupt config: %v %s; want an error naming line 2", err, out)
	}
	os.WriteFile(cfg, []byte("listne: localhost:0\n"), 0o644)
	out, err = exec.Command(netloomBin, "serve", "--config", cfg).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "listne") {
		t.Errorf("unknown key: %v %s; want an error naming the key", err, out)
	}
	net := filepath.Join(dir, "bad.net")
	os.WriteFile(net, []byte("Switch 8 \"S-1\"\n[1] \"H-2\"[1]\n\nHca 1 \"H-2\"\n[1 \"S-1\"[1]\n"), 0o644)
	out, err = exec.Command(netloomBin, "fabric", "discover", "--fabric", "sim:file:"+net).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "bad.net:5") {
		t.Errorf("malformed net file: %v %s; want an error naming bad.net line 5", err, out)
	}
	out, err = exec.Command(netloomBin, "fabric", "route").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "Usage") {
		t.Errorf("route without arguments: %v %s; want usage", err, out)
	}
}

var tracertHop = regexp.MustCompile(`^\[(\d+)\] -> \S+(?: port)? \{(0x[0-9a-f]+)\}`)
var tracertFrom = regexp.MustCompile(`^From \S+ \{(0x[0-9a-f]+)\}`)

// parseTracert returns the (node, output port) of every hop ibtracert shows.
func parseTracert(t *testing.T, out string) []fabric.PortRef {
	t.Helper()
	var nodes []fabric.GUID
	var ports []int
	for _, line := range strings.Split(out, "\n") {
		if m := tracertFrom.FindStringSubmatch(line); m != nil {
			g, _ := fabric.ParseGUID(m[1])
			nodes = append(nodes, g)
		}
		if m := tracertHop.FindStringSubmatch(line); m != nil {
			p, _ := strconv.Atoi(m[1])
			g, _ := fabric.ParseGUID(m[2])
			ports = append(ports, p)
			nodes = append(nodes, g)
		}
	}
	if len(nodes) == 0 || len(ports) == 0 {
		t.Fatalf("cannot parse ibtracert output:\n%s", out)
	}
	hops := make([]fabric.PortRef, len(ports))
	for i := range ports {
		hops[i] = fabric.PortRef{GUID: nodes[i], Port: ports[i]}
	}
	return hops
}

func perfField(t *testing.T, out, name string) uint64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + name + `:\.*(\d+)`)
	m := re.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no %s in perfquery output:\n%s", name, out)
	}
	v, _ := strconv.ParseUint(m[1], 10, 64)
	return v
}
