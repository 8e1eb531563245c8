package ethlab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDemoEth runs scripts/demo-eth.sh (what `make demo-eth` runs after
// building) for a short while on a lab of its own: the routed two-spine
// lab with sFlow from every switch port, and two ring jobs at once, alpha-1
// over h1 and h3 and beta-1 over h2 and h4, both pinned over spine1. The
// leaves' uplinks' own counters (the kernel's, read by the script before
// and after the round) are the oracle: leaf1's and leaf2's uplinks to
// spine1 carried both jobs' bytes, the ones to spine2 next to nothing. Each
// job's links are listed whole; the directions between a host and its leaf
// carry that job alone and are explained by its bytes (payload only; the
// rest is framing); the uplinks' measured bytes are the counters'. The
// collision the daemon names on the hot spots and on each job's why is
// each leaf's uplink to spine1, shared by alpha-1 and beta-1, with the one
// to spine2 as the idle alternative and the imbalance the counters give.
// The lab is gone afterwards.
func TestDemoEth(t *testing.T) {
	skipUnlessLab(t)
	for _, tool := range []string{"go", "mpicc", "mpirun", "curl", "pmacctd", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not on PATH", tool)
		}
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// The script runs bin/netloom and the agent library, as make builds them.
	for _, c := range [][]string{{"go", "build", "-o", "bin/netloom", "./cmd/netloom"}, {"make", "-s", "-C", "agent"}} {
		cmd := exec.Command(c[0], c[1:]...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	id := randomID()
	t.Cleanup(func() { _ = Sweep(id) })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	const size, iters = 4 << 20, 200 // the demo's defaults
	const payload = size * iters     // each rank's, to the other leaf
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "scripts/demo-eth.sh")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "DEMO_SECONDS=20", "DEMO_LISTEN="+listen, "DEMO_LAB="+id, "DEMO_DIR="+dir)
	out, err := cmd.CombinedOutput()
	t.Logf("scripts/demo-eth.sh:\n%s", out)
	if err != nil {
		t.Fatalf("scripts/demo-eth.sh: %v", err)
	}
	for _, want := range []string{"Netloom Ethernet demo is running.", "the first round of alpha and beta, measured by the switches:", "explained",
		"alpha-N (h1 <-> h3) and beta-N (h2 <-> h4) both cross leaf1's uplink to spine1", "sflow_listen"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
	// The oracle: the uplinks' transmitted bytes over the first round.
	up := map[string]uint64{} // "leaf1>spine1"
	for _, when := range []string{"before", "after"} {
		b, err := os.ReadFile(filepath.Join(dir, "uplinks-1."+when))
		if err != nil {
			t.Fatal(err)
		}
		for _, ln := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var leaf, spine, port string
			var v uint64
			if _, err := fmt.Sscan(ln, &leaf, &spine, &port, &v); err != nil {
				t.Fatalf("uplinks-1.%s: %q: %v", when, ln, err)
			}
			if when == "before" {
				up[leaf+">"+spine] -= v
			} else {
				up[leaf+">"+spine] += v
			}
		}
	}
	if len(up) != 4 {
		t.Fatalf("uplink counters %v: want the 4 leaf uplinks", up)
	}
	for _, leaf := range []string{"leaf1", "leaf2"} {
		on, off := up[leaf+">spine1"], up[leaf+">spine2"]
		t.Logf("%s's uplinks over the round: %d bytes to spine1, %d to spine2 (kernel)", leaf, on, off)
		if on < 2*payload || off > payload/100 {
			t.Errorf("%s's uplinks sent %d bytes to spine1 and %d to spine2: want both jobs' %d on spine1, none on spine2", leaf, on, off, 2*payload)
		}
	}
	type link struct {
		From      string `json:"from_description"`
		To        string `json:"to_description"`
		JobBytes  uint64 `json:"job_bytes"`
		Measured  struct{ Bytes uint64 }
		Explained *float64 `json:"explained_pct"`
	}
	for _, job := range []struct{ name, a, b string }{{"alpha-1", "h1", "h3"}, {"beta-1", "h2", "h4"}} {
		b, err := os.ReadFile(filepath.Join(dir, job.name+"-why.json"))
		if err != nil {
			t.Fatal(err)
		}
		var why struct {
			RouteModel string `json:"route_model"`
			Links      []link
			Total      int
			Truncated  bool
		}
		if err := json.Unmarshal(b, &why); err != nil {
			t.Fatalf("%s's why: %v\n%s", job.name, err, b)
		}
		if !strings.HasPrefix(why.RouteModel, "lldp-shortest-path") || len(why.Links) != why.Total || why.Truncated || why.Total == 0 {
			t.Fatalf("%s's why: route_model %q, %d links of %d, truncated %v", job.name, why.RouteModel, len(why.Links), why.Total, why.Truncated)
		}
		edges := 0
		for _, l := range why.Links {
			switch {
			case l.From == job.a || l.To == job.a || l.From == job.b || l.To == job.b:
				// A host's own link carries this job alone: the wire
				// carried the payload and its framing, never less.
				edges++
				if l.JobBytes != payload || l.Measured.Bytes < l.JobBytes || l.Explained == nil || *l.Explained < 95 || *l.Explained > 100 {
					t.Errorf("%s: %s -> %s: job %d bytes (want %d), measured %d, explained %v", job.name, l.From, l.To, l.JobBytes, payload, l.Measured.Bytes, l.Explained)
				}
			case strings.HasPrefix(l.From, "leaf") && strings.HasPrefix(l.To, "spine"):
				// The switches' counters as polled: the kernel's over the
				// round (the range adds 10 s of LLDP).
				k := up[l.From+">"+l.To]
				if float64(l.Measured.Bytes) < 0.97*float64(k) || float64(l.Measured.Bytes) > 1.03*float64(k)+1e6 {
					t.Errorf("%s: %s -> %s measured %d bytes; the kernel counted %d", job.name, l.From, l.To, l.Measured.Bytes, k)
				}
			}
		}
		if edges != 4 {
			t.Errorf("%s: %d directions between a host and its leaf, want 4: %+v", job.name, edges, why.Links)
		}
	}
	// The collision the daemon names, against the counters: on each leaf,
	// the uplink to spine1 shared by both jobs, the one to spine2 the idle
	// alternative, the imbalance of the pair the counters'.
	type port struct {
		To       string `json:"to_description"`
		Measured uint64 `json:"measured_bytes"`
	}
	type collision struct {
		Switch    string `json:"switch_description"`
		To        string `json:"to_description"`
		Jobs      []string
		Group     []port
		Least     port    `json:"least_loaded"`
		Imbalance float64 `json:"imbalance"`
		Basis     string  `json:"imbalance_basis"`
	}
	checkCollisions := func(where string, cs []collision) {
		for _, leaf := range []string{"leaf1", "leaf2"} {
			on, off := up[leaf+">spine1"], up[leaf+">spine2"]
			var c *collision
			for i := range cs {
				if cs[i].Switch == leaf {
					c = &cs[i]
				}
			}
			if c == nil {
				t.Errorf("%s: no collision on %s: %+v", where, leaf, cs)
				continue
			}
			t.Logf("%s: %s -> %s shared by %v, least loaded %s (%d bytes), imbalance %.3f (%s)", where, leaf, c.To, c.Jobs, c.Least.To, c.Least.Measured, c.Imbalance, c.Basis)
			if c.To != "spine1" || !slices.Contains(c.Jobs, "alpha-1") || !slices.Contains(c.Jobs, "beta-1") || c.Least.To != "spine2" {
				t.Errorf("%s: %s's collision: shared uplink to %s by %v, least loaded to %s; want spine1 by alpha-1 and beta-1, spine2 idle", where, leaf, c.To, c.Jobs, c.Least.To)
			}
			if c.Least.Measured > payload/100 {
				t.Errorf("%s: %s's idle alternative measured %d bytes; the kernel counted %d", where, leaf, c.Least.Measured, off)
			}
			for _, g := range c.Group {
				if g.To == "spine1" && (float64(g.Measured) < 0.97*float64(on) || float64(g.Measured) > 1.03*float64(on)+1e6) {
					t.Errorf("%s: %s's shared uplink measured %d bytes; the kernel counted %d", where, leaf, g.Measured, on)
				}
			}
			// max over mean of the two uplinks' loads, by the kernel.
			want := float64(max(on, off)) / (float64(on+off) / 2)
			if c.Basis != "counters" || math.Abs(c.Imbalance-want) > 0.02 {
				t.Errorf("%s: %s's imbalance %.3f (%s); the kernel's counters give %.3f", where, leaf, c.Imbalance, c.Basis, want)
			}
		}
		for _, c := range cs {
			if c.To != "spine1" {
				t.Errorf("%s: a collision on %s's uplink to %s, which carried no job", where, c.Switch, c.To)
			}
		}
	}
	var hot struct{ Collisions []collision }
	if b, err := os.ReadFile(filepath.Join(dir, "hotspots.json")); err != nil || json.Unmarshal(b, &hot) != nil {
		t.Fatalf("hotspots.json: %v\n%s", err, b)
	}
	checkCollisions("hot spots", hot.Collisions)
	for _, job := range []string{"alpha-1", "beta-1"} {
		var why struct{ Collisions []collision }
		if b, err := os.ReadFile(filepath.Join(dir, job+"-why.json")); err != nil || json.Unmarshal(b, &why) != nil {
			t.Fatalf("%s-why.json: %v\n%s", job, err, b)
		}
		checkCollisions(job+"'s why", why.Collisions)
	}
	for _, st := range Labs() {
		if st.ID == id {
			t.Errorf("lab %s is still there after the demo", id)
		}
	}
}
