package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// caSweeps is how many sweeps of each daemon run are timed (after the
// first, which also reads ClassPortInfo).
const caSweeps = 8

var sweepLog = regexp.MustCompile(`msg=sweep ports=(\d+) errors=(\d+) seconds=([0-9.e+-]+)`)

// benchCACost runs `netloom serve` on the fabric without and with
// --sweep-ca-ports, runs rounds of each in turn, and prints the ports each
// sweeps and the median and best sweep seconds, so that what host adapter
// ports add to a sweep is measured in the daemon itself.
func benchCACost(spec, bin string, runs int) error {
	ctx := context.Background()
	f, c, dir, stop, err := startFabric(ctx, spec)
	if err != nil {
		return err
	}
	defer stop()
	var secs [2][]float64
	var ports [2]int
	for r := 0; r < runs; r++ {
		for mode := 0; mode < 2; mode++ {
			n, s, err := daemonSweeps(ctx, f.Env(), f.Dir, filepath.Join(dir, fmt.Sprintf("ca%d-%d.db", mode, r)), bin, mode == 1)
			if err != nil {
				return err
			}
			ports[mode] = n
			secs[mode] = append(secs[mode], s...)
		}
	}
	med := func(v []float64) float64 {
		v = slices.Clone(v)
		slices.Sort(v)
		return v[len(v)/2]
	}
	fmt.Printf("%d hosts, %d switches: %d sweeps of each, %d rounds\n", c.CAs, c.Switches, caSweeps, runs)
	fmt.Printf("%-18s %7s %10s %10s %10s\n", "daemon sweep", "ports", "median", "best", "us/port")
	for mode, name := range []string{"switch ports only", "+ CA ports"} {
		fmt.Printf("%-18s %7d %9.3fs %9.3fs %10.1f\n", name, ports[mode], med(secs[mode]), slices.Min(secs[mode]), med(secs[mode])*1e6/float64(ports[mode]))
	}
	added := med(secs[1]) - med(secs[0])
	fmt.Printf("CA ports add %d ports (+%.0f%%) and %.3f s (+%.0f%%) to the median sweep: %.1f us per added port, %.2f%% of a 30 s interval\n",
		ports[1]-ports[0], 100*float64(ports[1]-ports[0])/float64(ports[0]), added, 100*added/med(secs[0]),
		added*1e6/float64(ports[1]-ports[0]), 100*med(secs[1])/30)
	return nil
}

// daemonSweeps starts `netloom serve` on the fabric, reads the sweep
// times it logs, and stops it after caSweeps+1 sweeps; it returns the
// ports swept and the seconds of all but the first sweep.
func daemonSweeps(ctx context.Context, env []string, dir, db, bin string, caPorts bool) (int, []float64, error) {
	args := []string{"serve", "--fabric", "ib", "--db", db, "--listen", "127.0.0.1:0", "--log-level", "debug",
		"--sweep-interval", "3s", "--discover-interval", "1h", "--agent-listen", "off", "--agent-address-file", "-",
		"--anonymous", "admin", "--sweep-ca-ports=" + strconv.FormatBool(caPorts)}
	if pin != "" {
		args = append([]string{"-c", pin, bin}, args...)
		bin = "taskset"
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return 0, nil, err
	}
	if err := cmd.Start(); err != nil {
		return 0, nil, err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // ends through exit(): ibsim gets its client slot back
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
		}
	}()
	var (
		ports int
		secs  []float64
		tail  []string
	)
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	deadline := time.Now().Add(10 * time.Minute)
	for n := 0; n <= caSweeps && sc.Scan(); {
		line := sc.Text()
		tail = append(tail, line)
		if len(tail) > 10 {
			tail = tail[1:]
		}
		if time.Now().After(deadline) {
			return 0, nil, fmt.Errorf("netloom serve: no %d sweeps in 10 minutes", caSweeps+1)
		}
		m := sweepLog.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if m[2] != "0" {
			return 0, nil, fmt.Errorf("netloom serve: a sweep with %s failed ports: %s", m[2], line)
		}
		ports, _ = strconv.Atoi(m[1])
		s, _ := strconv.ParseFloat(m[3], 64)
		if n > 0 {
			secs = append(secs, s)
		}
		n++
	}
	if len(secs) < caSweeps {
		return 0, nil, fmt.Errorf("netloom serve ended after %d sweeps:\n%s", len(secs), strings.Join(tail, "\n"))
	}
	return ports, secs, nil
}
