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
	"time"
)

// pingPong measures the one-way time of messages of growing size between
// two ranks, best of several rounds: what SMPI's calibration measures.
// Then osu_bw's pattern: 64 messages of 1 MiB in flight at once (each its
// own buffer) and a 4-byte acknowledgement, best of 5 rounds of 4 after a
// warm-up: the aggregate rate at which the pair's messages cross at once,
// which one message at a time does not reach. Rank 0 prints both ranks'
// processor names.
const pingPong = `#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
	enum { W = 64, WS = 1 << 20 };
	char *wb = malloc((size_t)W * WS);
	memset(wb, 1, (size_t)W * WS);
	MPI_Request req[W];
	int ack = 0;
	double wbest = 1e30;
	for (int round = 0; round < 6; round++) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t = MPI_Wtime();
		for (int i = 0; i < 4; i++) {
			if (r == 0) {
				for (int w = 0; w < W; w++)
					MPI_Isend(wb + (size_t)w * WS, WS, MPI_BYTE, 1, w, MPI_COMM_WORLD, &req[w]);
				MPI_Waitall(W, req, MPI_STATUSES_IGNORE);
				MPI_Recv(&ack, 1, MPI_INT, 1, W, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			} else if (r == 1) {
				for (int w = 0; w < W; w++)
					MPI_Irecv(wb + (size_t)w * WS, WS, MPI_BYTE, 0, w, MPI_COMM_WORLD, &req[w]);
				MPI_Waitall(W, req, MPI_STATUSES_IGNORE);
				MPI_Send(&ack, 1, MPI_INT, 0, W, MPI_COMM_WORLD);
			}
		}
		t = (MPI_Wtime() - t) / 4;
		if (round > 0 && t < wbest)
			wbest = t;
	}
	free(wb);
	char name[MPI_MAX_PROCESSOR_NAME], names[2 * MPI_MAX_PROCESSOR_NAME];
	int len;
	memset(name, 0, sizeof name);
	MPI_Get_processor_name(name, &len);
	if (r < 2) {
		if (r == 1)
			MPI_Send(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, W + 1, MPI_COMM_WORLD);
		else {
			memcpy(names, name, MPI_MAX_PROCESSOR_NAME);
			MPI_Recv(names + MPI_MAX_PROCESSOR_NAME, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 1, W + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			printf("window %d %d %.9f\n", W, WS, wbest);
			printf("hosts %s %s\n", names, names + MPI_MAX_PROCESSOR_NAME);
		}
	}
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
	// Node is the node's own loopback, measured with two ranks on one
	// node (nil in a file written before it was measured: the calibrated
	// platform's loopback is then the ping-pong's figures).
	Node *NodeCalibration `json:"node,omitempty"`
}

// NodeCalibration is what two ranks on one node measured of its memory:
// one pair's one-way latency and ping-pong bandwidth, and the aggregate
// bandwidth of a window of messages in flight at once (osu_bw's), which
// the node's shared loopback carries.
type NodeCalibration struct {
	Host       string  `json:"host"`
	MeasuredAt string  `json:"measured_at"`
	Launcher   string  `json:"launcher"`
	Latency    float64 `json:"latency_seconds"`
	Bandwidth  float64 `json:"bandwidth_bytes_per_second"`
	// AggregateBandwidth is Window messages of WindowBytes in flight at
	// once, over WindowSeconds (the best round's time, one latency off).
	AggregateBandwidth float64 `json:"aggregate_bandwidth_bytes_per_second"`
	Window             int     `json:"window"`
	WindowBytes        int     `json:"window_message_bytes"`
	WindowSeconds      float64 `json:"window_seconds"`
}

// From says where the node's figures came from.
func (n *NodeCalibration) From() string {
	return "calibrated on " + n.Host + " at " + n.MeasuredAt
}

// Loopback is the node's loopback on a calibrated platform: shared by
// its messages in flight at once at the aggregate bandwidth, each at most
// one pair's bandwidth where that is lower, after one pair's latency.
func (n *NodeCalibration) Loopback() Link {
	l := Link{ID: "loopback", Bandwidth: n.AggregateBandwidth, Latency: n.Latency, From: n.From()}
	if n.Bandwidth < n.AggregateBandwidth {
		l.PairBandwidth = n.Bandwidth
	}
	return l
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

// measurement is what one run of the ping-pong printed.
type measurement struct {
	sizes          []int
	oneWay         []float64
	window, wbytes int
	windowSeconds  float64
	hosts          []string
}

// runPingPong runs the compiled ping-pong bin with launcher and reads what
// it printed.
func runPingPong(ctx context.Context, bin string, launcher []string) (*measurement, error) {
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
	m := &measurement{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 3 && f[0] == "pingpong":
			s, err1 := strconv.Atoi(f[1])
			t, err2 := strconv.ParseFloat(f[2], 64)
			if err1 == nil && err2 == nil {
				m.sizes, m.oneWay = append(m.sizes, s), append(m.oneWay, t)
			}
		case len(f) == 4 && f[0] == "window":
			w, err1 := strconv.Atoi(f[1])
			b, err2 := strconv.Atoi(f[2])
			t, err3 := strconv.ParseFloat(f[3], 64)
			if err1 == nil && err2 == nil && err3 == nil {
				m.window, m.wbytes, m.windowSeconds = w, b, t
			}
		case len(f) == 3 && f[0] == "hosts":
			m.hosts = f[1:]
		}
	}
	if len(m.sizes) < 2 {
		return nil, fmt.Errorf("the ping-pong printed no timings:\n%s", out.String())
	}
	if m.window == 0 || len(m.hosts) != 2 {
		return nil, fmt.Errorf("the ping-pong printed no window or hosts:\n%s", out.String())
	}
	return m, nil
}

// fit is the 1-byte one-way time and the bandwidth of the largest
// message's time after it.
func (m *measurement) fit() (lat, bw float64, err error) {
	lat = m.oneWay[0]
	last := len(m.sizes) - 1
	d := m.oneWay[last] - lat
	if d <= 0 {
		return 0, 0, fmt.Errorf("the ping-pong's largest message took no longer than its smallest: %v", m.oneWay)
	}
	return lat, float64(m.sizes[last]) / d, nil
}

// Calibrate compiles the ping-pong with mpicc and runs it on two ranks with
// launcher (e.g. "mpirun -np 2" or "mpiexec.mpich -n 2"), in work. Latency
// is the 1-byte one-way time; bandwidth fits the largest message's time
// after the latency. The node's loopback (Node) is measured by the same
// run when its two ranks shared one node, else by a second run with
// nodeLauncher, which must start both on one node (nil: none).
func Calibrate(ctx context.Context, mpicc string, launcher, nodeLauncher []string, work string) (*Calibration, error) {
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
	m, err := runPingPong(ctx, bin, launcher)
	if err != nil {
		return nil, err
	}
	c := &Calibration{Launcher: strings.Join(launcher, " "), Sizes: m.sizes, OneWay: m.oneWay}
	if c.Latency, c.Bandwidth, err = m.fit(); err != nil {
		return nil, err
	}
	node, nl := m, launcher
	if m.hosts[0] != m.hosts[1] {
		if len(nodeLauncher) == 0 {
			return c, nil
		}
		if node, err = runPingPong(ctx, bin, nodeLauncher); err != nil {
			return nil, fmt.Errorf("the node's loopback: %w", err)
		}
		nl = nodeLauncher
		if node.hosts[0] != node.hosts[1] {
			return nil, fmt.Errorf("the node's loopback: %s started its ranks on %s and %s: want both on one node", strings.Join(nl, " "), node.hosts[0], node.hosts[1])
		}
	}
	n := &NodeCalibration{Host: node.hosts[0], MeasuredAt: time.Now().UTC().Format(time.RFC3339), Launcher: strings.Join(nl, " "),
		Window: node.window, WindowBytes: node.wbytes, WindowSeconds: node.windowSeconds}
	if n.Latency, n.Bandwidth, err = node.fit(); err != nil {
		return nil, fmt.Errorf("the node's loopback: %w", err)
	}
	if d := node.windowSeconds - n.Latency; d > 0 {
		n.AggregateBandwidth = float64(node.window) * float64(node.wbytes) / d
	} else {
		return nil, fmt.Errorf("the node's loopback: a window of %d messages of %d bytes took %g s", node.window, node.wbytes, node.windowSeconds)
	}
	c.Node = n
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
	if n := c.Node; n != nil && (n.Latency < 0 || n.Bandwidth <= 0 || n.AggregateBandwidth <= 0) {
		return nil, fmt.Errorf("%s: node: latency_seconds %g, bandwidth_bytes_per_second %g, aggregate_bandwidth_bytes_per_second %g: want latency >= 0 and bandwidths > 0",
			path, n.Latency, n.Bandwidth, n.AggregateBandwidth)
	}
	return &c, nil
}
