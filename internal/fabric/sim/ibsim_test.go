package sim

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
)

const umad2sim = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"

// missingIbsim says which tools the ibsim test lacks ("" when none).
func missingIbsim() string {
	var miss []string
	for _, b := range []string{"ibsim", "opensm", "ibnetdiscover"} {
		if _, err := exec.LookPath(b); err != nil {
			miss = append(miss, b)
		}
	}
	if _, err := os.Stat(umad2sim); err != nil {
		miss = append(miss, umad2sim)
	}
	if len(miss) == 0 {
		return ""
	}
	return "missing " + strings.Join(miss, ", ") + " (install ibsim-utils, opensm, infiniband-diags)"
}

// simFabric is ibsim serving a net file with OpenSM as its subnet manager.
type simFabric struct {
	dir, sock string
	env       []string
	fifo      *os.File
	procs     []*exec.Cmd
}

func startIbsim(ctx context.Context, t *testing.T, netfile string) *simFabric {
	t.Helper()
	dir := t.TempDir()
	f := &simFabric{dir: dir, sock: fmt.Sprintf("netloom-sim-%d-%d", os.Getpid(), time.Now().UnixNano())}
	f.env = append(os.Environ(), "IBSIM_SOCKNAME="+f.sock)
	t.Cleanup(f.stop)
	fifo := filepath.Join(dir, "console")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Opening read-write never blocks and keeps ibsim's stdin open: at EOF
	// ibsim would exit.
	var err error
	if f.fifo, err = os.OpenFile(fifo, os.O_RDWR, 0); err != nil {
		t.Fatal(err)
	}
	spawn := func(env []string, log string, name string, args ...string) {
		out, err := os.Create(filepath.Join(dir, log))
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if name == "ibsim" {
			cmd.Stdin = f.fifo
		}
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting %s: %v", name, err)
		}
		f.procs = append(f.procs, cmd)
	}
	spawn(f.env, "ibsim.log", "ibsim", "-s", netfile)
	waitFor(ctx, t, filepath.Join(dir, "ibsim.log"), "sim>")
	osm := filepath.Join(dir, "osm")
	if err := os.Mkdir(osm, 0o755); err != nil {
		t.Fatal(err)
	}
	f.env = append(f.env, "LD_PRELOAD="+umad2sim)
	spawn(append(f.env, "OSM_TMP_DIR="+osm, "OSM_CACHE_DIR="+osm), "opensm.out",
		"opensm", "-s", "0", "-f", filepath.Join(dir, "opensm.log"))
	waitFor(ctx, t, filepath.Join(dir, "opensm.out"), "Entering MASTER state")
	return f
}

func waitFor(ctx context.Context, t *testing.T, path, want string) {
	t.Helper()
	for {
		b, _ := os.ReadFile(path)
		if bytes.Contains(b, []byte(want)) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %q in %s: %v; it says:\n%s", want, path, ctx.Err(), b)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (f *simFabric) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = f.dir, f.env // umad2sim writes a sys-PID tree in its cwd
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s: %w: %s", name, err, stderr.String())
	}
	return out, nil
}

func (f *simFabric) stop() {
	for i := len(f.procs) - 1; i >= 0; i-- {
		c := f.procs[i]
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	f.procs = nil
	if f.fifo != nil {
		f.fifo.Close()
	}
}

// linkShapes describes every link by its ends' descriptions and port
// numbers, which survive ibsim (it assigns its own GUIDs).
func linkShapes(t *fabric.Topology) []string {
	out := make([]string, 0, len(t.Links))
	for _, l := range t.Links {
		a, _ := t.Node(l.A.GUID)
		b, _ := t.Node(l.B.GUID)
		x := fmt.Sprintf("%s[%d]", a.Description, l.A.Port)
		y := fmt.Sprintf("%s[%d]", b.Description, l.B.Port)
		if y < x {
			x, y = y, x
		}
		out = append(out, x+"-"+y)
	}
	sort.Strings(out)
	return out
}

// TestNetfileUnderIbsim serves generated fat trees with the real ibsim,
// lets OpenSM sweep them, and checks that ibnetdiscover finds exactly the
// fabric WriteNetfile described.
func TestNetfileUnderIbsim(t *testing.T) {
	if m := missingIbsim(); m != "" {
		t.Skipf("cannot run ibsim here: %s", m)
	}
	for _, sp := range []Spec{
		{Kind: KindFatTree, Hosts: 16, Radix: 8, Levels: 2},
		{Kind: KindFatTree, Hosts: 20, Radix: 8, Levels: 3},
	} {
		t.Run(sp.String(), func(t *testing.T) {
			if sp.Levels == 3 && testing.Short() {
				t.Skip("short mode: one fabric is enough")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			topo, _, err := Generate(ctx, sp)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := WriteNetfile(&buf, topo); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "fabric.net")
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			f := startIbsim(ctx, t, path)
			// OpenSM may still be assigning LIDs; rediscover until every
			// host has one.
			var seen *fabric.Topology
			for {
				out, err := f.run(ctx, "ibnetdiscover")
				if err == nil {
					seen, err = ParseNetfile(bytes.NewReader(out), "ibnetdiscover output")
					if err != nil {
						t.Fatalf("%v\n%s", err, out)
					}
					if allLIDs(seen) {
						break
					}
				}
				select {
				case <-ctx.Done():
					t.Fatalf("ibnetdiscover never saw every host with a LID: %v", err)
				case <-time.After(200 * time.Millisecond):
				}
			}
			if got, want := seen.Counts(), topo.Counts(); got != want {
				t.Fatalf("ibnetdiscover sees %+v, generated %+v", got, want)
			}
			for k := 1; k <= sp.Hosts; k++ {
				n, err := seen.FindNode(fmt.Sprintf("n%d", k))
				if err != nil {
					t.Fatal(err)
				}
				if n.Description != fmt.Sprintf("n%d HCA-1", k) || n.LID == 0 {
					t.Errorf("host n%d seen as %q LID %d", k, n.Description, n.LID)
				}
			}
			got, want := linkShapes(seen), linkShapes(topo)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("ibnetdiscover links differ:\n got %v\nwant %v", got, want)
			}
		})
	}
}

func allLIDs(t *fabric.Topology) bool {
	for i := range t.Nodes {
		if t.Nodes[i].Type == fabric.CA && t.Nodes[i].LID == 0 {
			return false
		}
	}
	return true
}
