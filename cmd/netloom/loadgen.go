package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/netloom/netloom/internal/loadgen"
)

func runLoadgen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("loadgen", "--system SPEC --target HOST:PORT [--duration D] [--json]", `
Simulates the MPI side of a whole system: jobs of many sizes and patterns
(halo, all-to-all, reduce trees, idle) fill every host of the simulated
fabric, and every rank sends real agent datagrams (per-node totals always,
per-peer rows within the agent's limits) to the daemon once per interval,
spread evenly over it. Jobs finish and new ones start (--job-lifetime).
The fabric side is simulated by the daemon itself: run it with
--fabric sim:SPEC for the same SPEC. It prints what it sent.

Systems (SPEC): stampede (6,541 hosts; x16 ranks = 104,656 processes),
10x-stampede, or any fat-tree:hosts=N spec (see netloom serve --help).

Example: netloom loadgen --system stampede --target 127.0.0.1:8467 --duration 60s`, stderr)
	system := fs.String("system", "stampede", "simulated `system` (a sim spec)")
	target := fs.String("target", "127.0.0.1:8467", "daemon agent `address` (UDP)")
	duration := fs.Duration("duration", time.Minute, "how long to send")
	interval := fs.Duration("interval", 45*time.Second, "each rank's snapshot `interval`")
	ppn := fs.Int("ranks-per-node", 16, "MPI ranks per host")
	maxJob := fs.Int("max-job-nodes", 1024, "largest job, in hosts")
	life := fs.Duration("job-lifetime", 0, "mean job `lifetime` (0: jobs run throughout)")
	patterns := fs.String("patterns", "", "comma-separated `patterns` to cycle through (default: a production-like mix)")
	seed := fs.Uint64("seed", 1, "random seed")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	cfg := loadgen.Config{System: *system, Target: *target, Duration: *duration, Interval: *interval,
		RanksPerNode: *ppn, MaxJobNodes: *maxJob, JobLifetime: *life, Seed: *seed}
	if *patterns != "" {
		cfg.Patterns = strings.Split(*patterns, ",")
	}
	rep, err := loadgen.Run(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(stdout, rep)
	}
	fmt.Fprintf(stdout, "%s: %d hosts, %d processes in %d jobs (%d finished)\n", rep.System, rep.Hosts, rep.Processes, rep.Jobs, rep.JobsFinished)
	fmt.Fprintf(stdout, "sent %d datagrams (%d bytes, %d errors) in %.1fs: %.0f datagrams/s, %.0f processes per %.0fs interval\n",
		rep.DatagramsSent, rep.BytesSent, rep.SendErrors, rep.Seconds, rep.DatagramsPerSec, rep.ProcessesPerInter, rep.IntervalSeconds)
	return nil
}
