package model

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// pingPong measures the one-way time of messages of growing size between
// two ranks, best of several rounds: what SMPI's calibration measures.
const pingPong = `#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
	int r;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &r);
	static const int sizes[] = {1, 1024, 65536, 1 << 20, 4 << 20};
	char *b = calloc(4 << 20, 1);
	for (int s = 0; s < 5; s++) {
		int n = sizes[s] >= (1 << 20) ? 20 : 200;
		double best = 1e30;
		for (int round = 0; round < 5; round++) {
			MPI_Barrier(MPI_COMM_WORLD);
			double t = MPI_Wtime();
			for (int i = 0; i < n; i++) {
				if (r == 0) {
					MPI_Send(b, sizes[s], MPI_BYTE, 1, 0, MPI_COMM_WORLD);
					MPI_Recv(b, sizes[s], MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				} else if (r == 1) {
					MPI_Recv(b, sizes[s], MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
					MPI_Send(b, sizes[s], MPI_BYTE, 0, 0, MPI_COMM_WORLD);
				}
			}
			t = (MPI_Wtime() - t) / (2.0 * n);
			if (t < best)
				best = t;
		}
		if (r == 0)
			printf("pingpong %d %.9f\n", sizes[s], best);
	}
	free(b);
	MPI_Finalize();
	return 0;
}
`

// Calibration is a network's latency and bandwidth as a ping-pong saw them.
type Calibration struct {
	Latency   float64   `json:"latency_seconds"`
	Bandwidth float64   `json:"bandwidth_bytes_per_second"`
	Sizes     []int     `json:"sizes"`
	OneWay    []float64 `json:"one_way_seconds"`
	Launcher  string    `json:"launcher"`
	// On this machine (the default launcher): its CPUs (nproc) and load
	// average (1 minute) just before the ping-pong, and what they say of
	// the measurement.
	CPUs        int      `json:"cpus,omitempty"`
	LoadAverage *float64 `json:"load_average,omitempty"`
	Warnings    []string `json:"warnings,omitempty"`
}

// Bounds past which a calibration is implausible for any network MPI runs
// on: shared memory takes about a microsecond, InfiniBand a few, TCP tens;
// a ping-pong whose ranks wait for a core measures the scheduler instead
// (a millisecond and more).
const (
	PlausibleLatency   = 100e-6
	PlausibleBandwidth = 100e6
)

// Check says what is implausible in a calibration (file names it), and
// repeats what was said when it was measured.
func (c *Calibration) Check(file string) []string {
	out := append([]string{}, c.Warnings...)
	var bad []string
	if c.Latency > PlausibleLatency {
		bad = append(bad, fmt.Sprintf("a latency of %s (more than %s)", Duration(c.Latency), Duration(PlausibleLatency)))
	}
	if c.Bandwidth < PlausibleBandwidth {
		bad = append(bad, fmt.Sprintf("a bandwidth of %s (less than %s)", Rate(c.Bandwidth), Rate(PlausibleBandwidth)))
	}
	if len(bad) > 0 {
		if file != "" {
			file = " " + file
		}
		out = append(out, fmt.Sprintf("the calibration%s measured %s: implausible for shared memory (about 1 us) or any MPI network (TCP: tens of us); its ranks likely waited for a core (a busy or oversubscribed machine), and every message of the calibrated replay costs as much: its predictions are too slow by that much",
			file, strings.Join(bad, " and ")))
	}
	return out
}

// LocalLoad is this machine's CPUs (nproc) and load average over the last
// minute (/proc/loadavg; nil when it cannot be read).
func LocalLoad() (int, *float64) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return runtime.NumCPU(), nil
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return runtime.NumCPU(), nil
	}
	l, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return runtime.NumCPU(), nil
	}
	return runtime.NumCPU(), &l
}

// BusyWarning says when this machine's load left the ping-pong's two
// ranks less than a core each ("": it did not).
func BusyWarning(cores int, load *float64) string {
	switch {
	case cores < 2:
		return fmt.Sprintf("this machine has %d CPU: the ping-pong's 2 ranks shared it, and its latency is the scheduler's", cores)
	case load != nil && *load+2 > float64(cores):
		return fmt.Sprintf("this machine's load average was %.2f on %d CPUs when measured: the ping-pong's 2 ranks shared cores with other work, and its latency may be the scheduler's", *load, cores)
	}
	return ""
}

// Calibrate compiles the ping-pong with mpicc and runs it on two ranks with
// launcher (e.g. "mpirun -np 2" or "mpiexec.mpich -n 2"), in work. Latency
// is the 1-byte one-way time; bandwidth fits the largest message's time
// after the latency.
func Calibrate(ctx context.Context, mpicc string, launcher []string, work string) (*Calibration, error) {
	dir, err := os.MkdirTemp(work, "calibrate-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	src, bin := filepath.Join(dir, "pingpong.c"), filepath.Join(dir, "pingpong")
	if err := os.WriteFile(src, []byte(pingPong), 0o644); err != nil {
		return nil, err
	}
	if out, err := exec.CommandContext(ctx, mpicc, "-O2", "-o", bin, src).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", mpicc, err, out)
	}
	if len(launcher) == 0 {
		return nil, fmt.Errorf("no launcher")
	}
	args := append(append([]string{}, launcher[1:]...), bin)
	cmd := exec.CommandContext(ctx, launcher[0], args...)
	cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", strings.Join(launcher, " "), err, out.String())
	}
	c := &Calibration{Launcher: strings.Join(launcher, " ")}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "pingpong" {
			continue
		}
		s, err1 := strconv.Atoi(f[1])
		t, err2 := strconv.ParseFloat(f[2], 64)
		if err1 == nil && err2 == nil {
			c.Sizes, c.OneWay = append(c.Sizes, s), append(c.OneWay, t)
		}
	}
	if len(c.Sizes) < 2 {
		return nil, fmt.Errorf("the ping-pong printed no timings:\n%s", out.String())
	}
	c.Latency = c.OneWay[0]
	last := len(c.Sizes) - 1
	if d := c.OneWay[last] - c.Latency; d > 0 {
		c.Bandwidth = float64(c.Sizes[last]) / d
	} else {
		return nil, fmt.Errorf("the ping-pong's largest message took no longer than its smallest: %v", c.OneWay)
	}
	return c, nil
}

// ReadCalibration reads a file Calibrate's result was saved to (JSON).
func ReadCalibration(path string) (*Calibration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c Calibration
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if c.Latency < 0 || c.Bandwidth <= 0 {
		return nil, fmt.Errorf("%s: latency_seconds %g, bandwidth_bytes_per_second %g: want latency >= 0 and bandwidth > 0", path, c.Latency, c.Bandwidth)
	}
	return &c, nil
}
