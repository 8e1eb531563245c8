package ethlab

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDemoEth runs scripts/demo-eth.sh (what `make demo-eth` runs after
// building) for a short while on a lab of its own: the ring job's links
// are the twelve directions its ranks' sends cross, each carrying one
// rank's bytes, and the switches' counters of every direction shown are
// explained by them (payload only; the rest is framing). The lab is gone
// afterwards.
func TestDemoEth(t *testing.T) {
	skipUnlessLab(t)
	for _, tool := range []string{"go", "mpicc", "mpirun", "curl"} {
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
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "scripts/demo-eth.sh")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "DEMO_SECONDS=25", "DEMO_LISTEN="+listen, "DEMO_LAB="+id, "DEMO_DIR="+dir)
	out, err := cmd.CombinedOutput()
	t.Logf("scripts/demo-eth.sh:\n%s", out)
	if err != nil {
		t.Fatalf("scripts/demo-eth.sh: %v", err)
	}
	for _, want := range []string{"Netloom Ethernet demo is running.", "ring jobs ran", "explained"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "ring-1-why.json"))
	if err != nil {
		t.Fatal(err)
	}
	var why struct {
		RouteModel string `json:"route_model"`
		Links      []struct {
			From     string `json:"from_description"`
			To       string `json:"to_description"`
			JobBytes uint64 `json:"job_bytes"`
			Measured struct {
				Bytes uint64
			}
			Explained *float64 `json:"explained_pct"`
		}
		Total     int
		Truncated bool
	}
	if err := json.Unmarshal(b, &why); err != nil {
		t.Fatalf("ring-1's why: %v\n%s", err, b)
	}
	// The ring crosses 12 directions: all of them listed (the summary
	// asks for up to 100), and said so.
	if why.RouteModel != "lldp-shortest-path" || len(why.Links) != 12 || why.Total != 12 || why.Truncated {
		t.Fatalf("ring-1's why: route_model %q, %d links of %d, truncated %v; want 12 of 12", why.RouteModel, len(why.Links), why.Total, why.Truncated)
	}
	if !bytes.Contains(out, []byte("; 12 of its 12 directions\n")) {
		t.Errorf("the demo's summary does not say how many of the job's directions it lists")
	}
	for _, l := range why.Links {
		// The wire carried the payload and its framing: never less.
		if l.JobBytes != size*iters || l.Measured.Bytes < l.JobBytes || l.Explained == nil || *l.Explained < 95 || *l.Explained > 100 {
			t.Errorf("%s -> %s: job %d bytes (want %d), measured %d, explained %v", l.From, l.To, l.JobBytes, size*iters, l.Measured.Bytes, l.Explained)
		}
	}
	for _, st := range Labs() {
		if st.ID == id {
			t.Errorf("lab %s is still there after the demo", id)
		}
	}
}
