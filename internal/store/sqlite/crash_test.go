package sqlite

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store/storetest"
)

const (
	crashEnv      = "NETLOOM_SQLITE_CRASH_DB"
	crashSwitches = 60
	crashPorts    = 36
)

// TestCrashChild is the child of TestCrashSafety: it writes sweeps as fast
// as it can and prints each sweep's index once AddPortSamples returned.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		t.Skip("only run as the child of TestCrashSafety")
	}
	ctx := context.Background()
	s, err := Open(ctx, path, Options{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		if err := s.AddPortSamples(ctx, storetest.Sweep(crashSwitches, crashPorts, i, crashTime(i))); err != nil {
			fmt.Fprintln(out, "error", err)
			out.Flush()
			os.Exit(2)
		}
		fmt.Fprintln(out, "ack", i)
		out.Flush()
	}
}

func crashTime(i int) time.Time { return storetest.T0.Add(time.Duration(i) * 30 * time.Second) }

// startChild runs this test binary's test (a child writing to the store
// at path, named by env) and returns it with a reader of its output.
func startChild(t *testing.T, test, env, path string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v=false")
	cmd.Env = append(os.Environ(), env+"="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, bufio.NewScanner(stdout)
}

func TestCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	acked := map[int]bool{}
	for round := 0; round < 3; round++ {
		cmd, sc := startChild(t, "TestCrashChild", crashEnv, path)
		got := 0
		killAfter := 15 + round*7
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "ack "); ok {
				i, err := strconv.Atoi(rest)
				if err != nil {
					t.Fatalf("child said %q", line)
				}
				acked[i] = true
				got++
				if got == killAfter {
					// Kill mid-stream: the child is already inside the next
					// sweep's transaction.
					if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
						t.Fatal(err)
					}
				}
			} else if strings.HasPrefix(line, "error") {
				t.Fatalf("child: %s", line)
			}
		}
		_ = cmd.Wait()
		if got < killAfter {
			t.Fatalf("round %d: child acknowledged only %d sweeps", round, got)
		}
		verifyCrashDB(t, path, acked)
		t.Logf("round %d: killed after %d acknowledged sweeps; all present, integrity ok", round, len(acked))
		// Each round kills at a different point, on a fresh file.
		path = filepath.Join(t.TempDir(), fmt.Sprintf("crash%d.db", round+1))
		acked = map[int]bool{}
	}
}

// reopenAfterKill opens the store a killed child left and checks the
// file's integrity.
func reopenAfterKill(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	var res string
	if err := s.w.QueryRow(`PRAGMA integrity_check`).Scan(&res); err != nil || res != "ok" {
		s.Close()
		t.Fatalf("integrity_check after kill: %q %v", res, err)
	}
	return s
}

func verifyCrashDB(t *testing.T, path string, acked map[int]bool) {
	t.Helper()
	ctx := context.Background()
	s := reopenAfterKill(t, path)
	defer s.Close()
	for i := range acked {
		want := storetest.Sweep(crashSwitches, crashPorts, i, crashTime(i))
		got, err := s.LatestSamples(ctx, crashTime(i), time.Nanosecond)
		if err != nil {
			t.Fatalf("sweep %d: %v", i, err)
		}
		if len(got) != len(want) {
			t.Fatalf("acknowledged sweep %d: %d samples stored, want %d", i, len(got), len(want))
		}
		idx := map[fabric.PortRef]fabric.PortSample{}
		for _, g := range got {
			idx[g.Port] = g
		}
		for _, w := range want {
			g := idx[w.Port]
			if g.Delta != w.Delta || g.Span != w.Span || g.Reset != w.Reset || g.Saturated != w.Saturated || !g.Time.Equal(w.Time) {
				t.Fatalf("acknowledged sweep %d, port %s: stored %+v, want %+v", i, w.Port, g, w)
			}
		}
	}
	// Whatever is stored is whole: every row holds all its ports, and the
	// running total agrees with the rows.
	var rows, samples, total int64
	if err := s.w.QueryRow(`SELECT COUNT(*), COALESCE(SUM(ports), 0), (SELECT value FROM totals WHERE name = 'port_samples') FROM port_samples`).Scan(&rows, &samples, &total); err != nil {
		t.Fatal(err)
	}
	if samples != total || rows%crashSwitches != 0 {
		t.Fatalf("after kill: %d rows, %d samples, total says %d", rows, samples, total)
	}
}
