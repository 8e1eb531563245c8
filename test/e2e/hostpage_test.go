package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/test/ibsim"
)

// hostNodePort is a port of GET /api/v1/nodes/{node}.
type hostNodePort struct {
	Port      int                `json:"port"`
	Peer      *fabric.PortRef    `json:"peer"`
	PeerName  string             `json:"peer_description"`
	Rates     map[string]float64 `json:"rates"`
	PeerRates map[string]float64 `json:"peer_rates"`
	NoRates   string             `json:"no_rates"`
}

type hostNode struct {
	Ports []hostNodePort `json:"ports"`
}

// portSeries is GET /api/v1/ports/{port}/counters' series.
type portSeries struct {
	Series struct {
		Time  []float64            `json:"time"`
		Span  []float64            `json:"span_seconds"`
		Delta map[string][]uint64  `json:"delta"`
		Rate  map[string][]float64 `json:"rate"`
	} `json:"series"`
}

// perfWords reads one 64-bit data counter of a port with perfquery -x, in
// the wire's 4-byte words.
func perfWords(t *testing.T, f *ibsim.Fabric, lid fabric.LID, port int, field string) uint64 {
	t.Helper()
	out, err := f.Run(context.Background(), "perfquery", "-x", strconv.Itoa(int(lid)), strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	return perfField(t, string(out), field)
}

// jumpSample waits until port's stored series holds a sample whose delta of
// counter is at least min bytes, and returns its index with the series.
func jumpSample(t *testing.T, d *daemon, port fabric.PortRef, counter string, min uint64) (int, portSeries) {
	t.Helper()
	var s portSeries
	at := -1
	d.waitFor(func() bool {
		d.get("/api/v1/ports/"+port.String()+"/counters?from=-2m&counters=xmit_data_bytes,rcv_data_bytes", &s)
		for i, v := range s.Series.Delta[counter] {
			if v >= min {
				at = i
				return true
			}
		}
		return false
	}, fmt.Sprintf("a %s jump of %d bytes stored for %s", counter, min, port))
	return at, s
}

// lastHost is the host adapter with the highest LID (far from n1, where
// OpenSM and the tools run), with the leaf switch port its link ends on.
func lastHost(t *testing.T, topo *fabric.Topology) (host *fabric.Node, leaf fabric.PortRef, sw *fabric.Node) {
	t.Helper()
	for i := range topo.Nodes {
		if n := &topo.Nodes[i]; n.Type == fabric.CA && (host == nil || n.LID > host.LID) {
			host = n
		}
	}
	leaf, ok := topo.Peer(fabric.PortRef{GUID: host.GUID, Port: 1})
	if !ok {
		t.Fatalf("%s has no link", host.Description)
	}
	sw, _ = topo.Node(leaf.GUID)
	return host, leaf, sw
}

// managementSlack is how many bytes management traffic (OpenSM's sweeps,
// the daemon's and perfquery's MADs) may add to a port's data counters
// between the readings a test compares.
const managementSlack = 100_000

// TestHostPageRates puts traffic on a host link of a real ibsim fabric and
// reads the host's node API. By default the daemon does not sweep adapter
// ports: the host port says why (no_rates not_swept) and carries the
// switch end's rates (peer_rates), equal to what perfquery counted there.
// With --sweep-ca-ports the host port's own rates are the adapter's
// counters as perfquery reads them.
func TestHostPageRates(t *testing.T) {
	f, _ := startFabric(t, 16, 8)
	topo := discoverWithTool(t, f)
	host, leaf, sw := lastHost(t, topo)
	hostID := fmt.Sprintf("H-%016x", uint64(host.GUID))
	swID := fmt.Sprintf("S-%016x", uint64(sw.GUID))
	name := strings.Fields(host.Description)[0]

	t.Run("default: not swept, the switch end's figure", func(t *testing.T) {
		d := startDaemon(t, f, filepath.Join(t.TempDir(), "netloom.db"), "--discover-interval", "5m")
		var live hostNode
		d.get("/api/v1/nodes/"+name, &live)
		if len(live.Ports) != 1 || live.Ports[0].Rates != nil || live.Ports[0].NoRates != "not_swept" || live.Ports[0].Peer == nil || *live.Ports[0].Peer != leaf {
			t.Fatalf("host %s live: %+v; want port 1 without rates, no_rates not_swept, peer %s", name, live.Ports, leaf)
		}
		// The host sends 1 GB: the leaf port receives it.
		before := perfWords(t, f, sw.LID, leaf.Port, "PortRcvData")
		const words = 250_000_000
		if err := f.Console(fmt.Sprintf(`PerformanceSet "%s"[%d] PortCountersExtended.PortRcvData=%d`, swID, leaf.Port, before+words)); err != nil {
			t.Fatal(err)
		}
		after := perfWords(t, f, sw.LID, leaf.Port, "PortRcvData")
		counted := 4 * (after - before) // bytes perfquery saw arrive
		i, s := jumpSample(t, d, leaf, "rcv_data_bytes", 4*words)
		if got := s.Series.Delta["rcv_data_bytes"][i]; got < counted || got > counted+managementSlack {
			t.Errorf("stored jump %d bytes; perfquery counted %d (+ up to %d of management traffic)", got, counted, managementSlack)
		}
		// The host's page at that sweep: no rates of its own, why, and the
		// switch end's receive rate, which is the host's transmit.
		at := s.Series.Time[i] + 0.05
		var past hostNode
		d.get(fmt.Sprintf("/api/v1/nodes/%s?at=%.3f", name, at), &past)
		p := past.Ports[0]
		want := s.Series.Rate["rcv_data_bytes"][i]
		if p.Rates != nil || p.NoRates != "not_swept" {
			t.Errorf("host port at %.3f: rates %v, no_rates %q; want none, not_swept", at, p.Rates, p.NoRates)
		}
		if got := p.PeerRates["rcv_data_bytes"]; got != want {
			t.Errorf("host port at %.3f: peer_rates.rcv_data_bytes %g, the switch port's sample %g", at, got, want)
		}
		if r := want * s.Series.Span[i]; math.Abs(r-float64(s.Series.Delta["rcv_data_bytes"][i])) > 1 {
			t.Errorf("rate %g x span %g = %g, delta %d", want, s.Series.Span[i], r, s.Series.Delta["rcv_data_bytes"][i])
		}
		if p.PeerName != sw.Description {
			t.Errorf("peer_description %q, want %q", p.PeerName, sw.Description)
		}
		// The switch's own page: its port measured, no no_rates, and the
		// host's end (not swept) as its peer, without peer_rates.
		var swNode hostNode
		d.get(fmt.Sprintf("/api/v1/nodes/%s?at=%.3f", sw.GUID, at), &swNode)
		sp := swNode.Ports[leaf.Port-1]
		if sp.Rates["rcv_data_bytes"] != want || sp.NoRates != "" || sp.PeerRates != nil {
			t.Errorf("switch port %d: rates %g, no_rates %q, peer_rates %v", leaf.Port, sp.Rates["rcv_data_bytes"], sp.NoRates, sp.PeerRates)
		}
	})

	t.Run("--sweep-ca-ports: the adapter's own counters", func(t *testing.T) {
		d := startDaemon(t, f, filepath.Join(t.TempDir(), "netloom.db"), "--discover-interval", "5m", "--sweep-ca-ports")
		before := perfWords(t, f, host.LID, 1, "PortXmitData")
		const words = 125_000_000
		if err := f.Console(fmt.Sprintf(`PerformanceSet "%s"[1] PortCountersExtended.PortXmitData=%d`, hostID, before+words)); err != nil {
			t.Fatal(err)
		}
		after := perfWords(t, f, host.LID, 1, "PortXmitData")
		counted := 4 * (after - before)
		hp := fabric.PortRef{GUID: host.GUID, Port: 1}
		i, s := jumpSample(t, d, hp, "xmit_data_bytes", 4*words)
		if got := s.Series.Delta["xmit_data_bytes"][i]; got < counted || got > counted+managementSlack {
			t.Errorf("stored jump %d bytes of the adapter; perfquery counted %d (+ up to %d)", got, counted, managementSlack)
		}
		var past hostNode
		d.get(fmt.Sprintf("/api/v1/nodes/%s?at=%.3f", name, s.Series.Time[i]+0.05), &past)
		p := past.Ports[0]
		if p.NoRates != "" || p.Rates["xmit_data_bytes"] != s.Series.Rate["xmit_data_bytes"][i] {
			t.Errorf("host port: no_rates %q, rates.xmit_data_bytes %g; want its own sample %g", p.NoRates, p.Rates["xmit_data_bytes"], s.Series.Rate["xmit_data_bytes"][i])
		}
	})
}

// noIB is the environment of a process on a machine without InfiniBand:
// no umad2sim preload, no ibsim socket.
func noIB(t *testing.T) []string {
	t.Helper()
	if _, err := os.Stat("/sys/class/infiniband_mad/abi_version"); err == nil {
		t.Skip("this machine has InfiniBand (ib_umad loaded)")
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LD_PRELOAD=") && !strings.HasPrefix(kv, "IBSIM_SOCKNAME=") {
			env = append(env, kv)
		}
	}
	return env
}

// runNoIB runs netloom without InfiniBand in dir.
func runNoIB(t *testing.T, env []string, dir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(netloomBin, args...)
	cmd.Env, cmd.Dir = env, dir
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

// writeProfile writes a two-rank profile directory (ranks on n1 and n2) in
// the agent's file format: length-prefixed snapshots.
func writeProfile(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Minute)
	for r := uint32(0); r < 2; r++ {
		rec := snap(t, "noib", r, 2, 0, start, "alice")
		b := binary.AppendUvarint(nil, uint64(len(rec)))
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("rank-%d.pb", r)), append(b, rec...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNoInfiniBandHint runs the commands that open the local umad port on
// a machine without InfiniBand: each fails with exit status 1 (a runtime
// error, docs/cli.md) and names what it can use instead; fabric route --db
// reads the routes a daemon stored and needs no InfiniBand at all.
func TestNoInfiniBandHint(t *testing.T) {
	env := noIB(t)
	dir := t.TempDir()
	cache, err := filepath.Abs("../../internal/fabric/ib/testdata/fattree.cache")
	if err != nil {
		t.Fatal(err)
	}
	prof := filepath.Join(dir, "prof")
	writeProfile(t, prof)
	for _, c := range []struct {
		name string
		args []string
		want []string // alternatives named
		not  []string // alternatives that would not help it
	}{
		{"route", []string{"fabric", "route", "n1", "n2"}, []string{"--db DB", "--fabric sim:SPEC"}, []string{"--load-cache"}},
		{"route --load-cache", []string{"fabric", "route", "--load-cache", cache, "n1", "n2"}, []string{"--db DB", "--fabric sim:SPEC"}, []string{"--load-cache"}},
		{"discover", []string{"fabric", "discover"}, []string{"--load-cache FILE", "--db DB", "--fabric sim:SPEC"}, nil},
		{"sweep", []string{"fabric", "sweep"}, []string{"--fabric sim:SPEC"}, []string{"--db", "--load-cache"}},
		{"sweep --load-cache", []string{"fabric", "sweep", "--load-cache", cache}, []string{"--fabric sim:SPEC"}, []string{"--db", "--load-cache FILE"}},
		{"place", []string{"place", prof, "--nodes", "n[1-2]"}, []string{"--db DB", "--fabric sim:SPEC"}, []string{"--load-cache"}},
		{"serve", []string{"serve", "--db", filepath.Join(dir, "s.db"), "--listen", "127.0.0.1:0", "--agent-listen", "off", "--agent-address-file", "-"},
			[]string{"--fabric sim:SPEC", "--role api --db DB"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, stderr, code := runNoIB(t, env, dir, c.args...)
			if code != 1 {
				t.Errorf("netloom %s: exit status %d, want 1 (runtime error)\n%s", strings.Join(c.args, " "), code, stderr)
			}
			for _, w := range append([]string{"no InfiniBand management port here", "without InfiniBand here, use:"}, c.want...) {
				if !strings.Contains(stderr, w) {
					t.Errorf("netloom %s: stderr does not name %q:\n%s", strings.Join(c.args, " "), w, stderr)
				}
			}
			_, hint, _ := strings.Cut(stderr, "without InfiniBand here")
			for _, n := range c.not {
				if strings.Contains(hint, n) {
					t.Errorf("netloom %s: offers %q, which still needs the fabric:\n%s", strings.Join(c.args, " "), n, stderr)
				}
			}
		})
	}

	t.Run("fabric route --db", func(t *testing.T) {
		// A daemon on a simulated fabric stores its topology and tables.
		const spec = "sim:fat-tree:hosts=16,radix=8"
		db := filepath.Join(dir, "netloom.db")
		d, _ := serve(t, dir, nil, "--fabric", spec, "--db", db, "--agent-listen", "off", "--agent-address-file", "-", "--sweep-interval", "200ms")
		d.waitFor(func() bool {
			var st struct{ Sweep struct{ Count int } }
			return d.get("/api/v1/status", &st) == 200 && st.Sweep.Count >= 2
		}, "two sweeps")
		d.stop()
		got, stderr, code := runNoIB(t, env, dir, "fabric", "route", "--db", db, "n1", "n16", "--json")
		if code != 0 {
			t.Fatalf("fabric route --db without InfiniBand: exit status %d\n%s", code, stderr)
		}
		want, stderr, code := runNoIB(t, env, dir, "fabric", "route", "--fabric", spec, "n1", "n16", "--json")
		if code != 0 {
			t.Fatalf("fabric route --fabric %s: exit status %d\n%s", spec, code, stderr)
		}
		if got != want {
			t.Errorf("route from the stored tables:\n%s\nfrom the fabric:\n%s", got, want)
		}
	})
}
