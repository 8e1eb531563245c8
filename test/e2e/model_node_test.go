package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestModelNodeShared replays osu_bw's pattern (testdata/mpi/window.c: 64
// messages of 1 MiB in flight at once, then an acknowledgement) run on one
// node, traced, on a platform calibrated on this machine, beside the same
// pattern one message at a time. A node's messages share its loopback, so
// the replay stands about as close to the measured run with 64 in flight
// as with one (the replay's time over the measured, the two within a
// factor of 2.5 of each other; under SimGrid's FATPIPE loopback, as before
// issue 42, the window replayed at 1.8% of its measured time against 65%
// for one message: 36 times apart), the prediction says the bytes went inside the
// node, and the job placed on two nodes joined at the calibrated bandwidth
// is predicted about as fast (it was +3593%), under Open MPI and MPICH.
// Ratios of two runs measured side by side: the machine's load divides
// both.
func TestModelNodeShared(t *testing.T) {
	if _, err := exec.LookPath("smpirun"); err != nil {
		t.Fatalf("SimGrid's smpirun not installed (scripts/install-deps.sh installs simgrid): %v", err)
	}
	buildAgent(t)
	work := t.TempDir()
	env := append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	netloom := func(t *testing.T, args ...string) string {
		t.Helper()
		cmd := exec.Command(netloomBin, args...)
		cmd.Dir, cmd.Env = work, env
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil {
			t.Fatalf("netloom %s: %v\n%s%s", strings.Join(args, " "), err, o.String(), e.String())
		}
		return o.String()
	}
	type prediction struct {
		Scenario string  `json:"scenario"`
		Elapsed  float64 `json:"elapsed_seconds"`
		Inter    uint64  `json:"inter_node_p2p_bytes"`
		Intra    uint64  `json:"intra_node_p2p_bytes"`
	}
	type result struct {
		Measured struct {
			Elapsed float64 `json:"elapsed_seconds"`
		} `json:"measured"`
		AsRan   prediction   `json:"as_ran"`
		WhatIfs []prediction `json:"what_ifs"`
	}
	twoNodes := filepath.Join(work, "two-nodes")
	if err := os.WriteFile(twoNodes, []byte("n1\nn2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			needMPI(t, m)
			win := compile(t, m, "testdata/mpi/window.c")
			launch := []string{m.launch, "-n", "2"}
			calib := []string{"model", "calibrate", "-o", filepath.Join(work, m.name+"-calib.json"), "--mpi", "mpich", "--"}
			if m.name == "openmpi" {
				launch = []string{m.launch, "--oversubscribe", "-np", "2"}
				calib = []string{"model", "calibrate", "-o", filepath.Join(work, m.name+"-calib.json"), "--"}
			}
			netloom(t, append(calib, launch...)...)
			ratio := map[int]float64{}
			for _, c := range []struct{ window, iters int }{{64, 8}, {1, 256}} {
				name := m.name + "-w" + strconv.Itoa(c.window)
				dir := filepath.Join(work, name)
				netloom(t, append(append([]string{"run", "--quiet", "--trace", "--output", dir, "--job-id", name, "--lib", m.lib,
					"--daemon", "127.0.0.1:9", "--"}, launch...), win, "1048576", strconv.Itoa(c.window), strconv.Itoa(c.iters))...)
				var r result
				out := netloom(t, "model", "--json", dir, "--platform", "calibrated", "--calibration", filepath.Join(work, m.name+"-calib.json"),
					"--placement", twoNodes, "--network", "perfect")
				if err := json.Unmarshal([]byte(out), &r); err != nil {
					t.Fatalf("netloom model: %v\n%s", err, out)
				}
				sent := uint64(1048576 * c.window * (c.iters + 1))
				if r.AsRan.Inter != 0 || r.AsRan.Intra < sent {
					t.Errorf("window %d: as ran %d bytes between nodes, %d inside: want none, at least the %d sent", c.window, r.AsRan.Inter, r.AsRan.Intra, sent)
				}
				ratio[c.window] = r.AsRan.Elapsed / r.Measured.Elapsed
				t.Logf("window %d: measured %.4f s, replay as ran %.4f s (%.0f%%)", c.window, r.Measured.Elapsed, r.AsRan.Elapsed, 100*ratio[c.window])
				for _, p := range r.WhatIfs {
					if p.Scenario != "placement" {
						continue
					}
					t.Logf("window %d on two nodes: %.4f s, %d bytes between nodes", c.window, p.Elapsed, p.Inter)
					if p.Inter < sent || p.Elapsed > 2*r.AsRan.Elapsed || p.Elapsed < r.AsRan.Elapsed/2 {
						t.Errorf("window %d on two nodes: %.4f s, %d bytes between them; as ran %.4f s: want about as fast, all %d bytes between them",
							c.window, p.Elapsed, p.Inter, r.AsRan.Elapsed, sent)
					}
				}
			}
			// Measured here: 50-61% with 64 in flight, 102-126% with one
			// (FATPIPE: 1.8% against 65%). What is left is the cache: the
			// calibration's ping-pong and the window of one copy a buffer
			// that stays in it, the window of 64 streams 64 MiB through
			// memory.
			if q := ratio[64] / ratio[1]; q < 0.4 || q > 2.5 {
				t.Errorf("the replay stands at %.0f%% of the measured run with 64 messages in flight, at %.0f%% with one: want within a factor of 2.5", 100*ratio[64], 100*ratio[1])
			}
		})
	}
}
