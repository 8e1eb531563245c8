package sqlite

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/storetest"
)

const (
	rollupCrashEnv    = "NETLOOM_SQLITE_ROLLUP_CRASH_DB"
	rollupCrashSweeps = 40 // 20 minutes: four 5-minute buckets
)

var rollupCrashRetention = store.Retention{Samples: storetest.T0.Add(rollupCrashSweeps * 30 * time.Second)}

// TestRollupCrashChild is the child of TestRollupCrashSafety: it rolls up
// one small step at a time and prints each step once it committed.
func TestRollupCrashChild(t *testing.T) {
	path := os.Getenv(rollupCrashEnv)
	if path == "" {
		t.Skip("only run as the child of TestRollupCrashSafety")
	}
	ctx := context.Background()
	s, err := Open(ctx, path, Options{RollupPortRows: 7})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		more, err := s.PruneStep(ctx, rollupCrashRetention)
		if err != nil {
			fmt.Fprintln(out, "error", err)
			out.Flush()
			os.Exit(2)
		}
		fmt.Fprintln(out, "step", i)
		out.Flush()
		if !more {
			fmt.Fprintln(out, "done")
			out.Flush()
			os.Exit(0)
		}
	}
}

// TestRollupCrashSafety kills a process in the middle of rolling up, three
// times at different points, and checks after each kill that the file is
// sound and every sample is counted exactly once; then finishes the
// rollup and checks the buckets are whole.
func TestRollupCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rollup-crash.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var want [fabric.NumCounters]uint64
	for i := 0; i < rollupCrashSweeps; i++ {
		sw := storetest.Sweep(crashSwitches, crashPorts, i, crashTime(i))
		for _, x := range sw {
			for c := range x.Delta {
				want[c] += x.Delta[c]
			}
		}
		if err := s.AddPortSamples(ctx, sw); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 3; round++ {
		cmd, sc := startChild(t, "TestRollupCrashChild", rollupCrashEnv, path)
		steps, killAfter, done := 0, 3+round*11, false
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "step "):
				if steps++; steps == killAfter {
					// The child is already in its next step's transaction.
					if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
						t.Fatal(err)
					}
				}
			case line == "done":
				done = true
			case strings.HasPrefix(line, "error"):
				t.Fatalf("child: %s", line)
			}
		}
		_ = cmd.Wait()
		if done {
			t.Fatalf("round %d: the rollup finished after %d steps, before the kill; make the steps smaller", round, steps)
		}
		verifyRollupCrash(t, path, want, false)
		t.Logf("round %d: killed after %d steps; file sound, every sample counted once", round, steps)
	}
	verifyRollupCrash(t, path, want, true)
}

// verifyRollupCrash checks the file's integrity, that the running totals
// agree with the rows, and that the counters summed over raw samples and
// rollups are what was written. With finish, it rolls up the rest first
// and checks every port has one whole point per bucket.
func verifyRollupCrash(t *testing.T, path string, want [fabric.NumCounters]uint64, finish bool) {
	t.Helper()
	ctx := context.Background()
	s := reopenAfterKill(t, path)
	defer s.Close()
	if finish {
		if err := s.Prune(ctx, rollupCrashRetention); err != nil {
			t.Fatal(err)
		}
	}
	var samples, samplesTotal, points, pointsTotal int64
	if err := s.w.QueryRow(`SELECT COALESCE(SUM(ports), 0), (SELECT value FROM totals WHERE name = 'port_samples') FROM port_samples`).Scan(&samples, &samplesTotal); err != nil {
		t.Fatal(err)
	}
	if err := s.w.QueryRow(`SELECT COALESCE(SUM(ports), 0), (SELECT value FROM totals WHERE name = 'port_rollups') FROM port_rollups`).Scan(&points, &pointsTotal); err != nil {
		t.Fatal(err)
	}
	if samples != samplesTotal || points != pointsTotal {
		t.Fatalf("totals: %d samples (total says %d), %d rollup points (total says %d)", samples, samplesTotal, points, pointsTotal)
	}
	var refs []fabric.PortRef
	for sw := 0; sw < crashSwitches; sw++ {
		for p := 1; p <= crashPorts; p++ {
			refs = append(refs, fabric.PortRef{GUID: fabric.GUID(0x1000 + sw), Port: p})
		}
	}
	got, err := s.PortSeries(ctx, refs, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var sum [fabric.NumCounters]uint64
	for _, p := range refs {
		n := 0
		for _, x := range got[p] {
			n += x.Samples
			for c := range x.Delta {
				sum[c] += x.Delta[c]
			}
			if finish && (x.Resolution != store.Rollup5m || x.Samples != 10) {
				t.Fatalf("after finishing, port %s: point %+v, want 5-minute points of 10 samples", p, x)
			}
		}
		if n != rollupCrashSweeps {
			t.Fatalf("port %s: %d samples counted, want %d", p, n, rollupCrashSweeps)
		}
		if finish && len(got[p]) != rollupCrashSweeps/10 {
			t.Fatalf("after finishing, port %s: %d points, want %d", p, len(got[p]), rollupCrashSweeps/10)
		}
	}
	if sum != want {
		t.Fatalf("counters summed over samples and rollups:\n got %v\nwant %v", sum, want)
	}
}
