package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/netloom/netloom/internal/loadgen"
)

func loadgenCmd() *cobra.Command {
	var (
		cfg      loadgen.Config
		patterns string
		asJSON   bool
	)
	c := &cobra.Command{
		Use:   "loadgen --system SPEC --target HOST:PORT",
		Short: "simulate a whole system's MPI jobs sending agent datagrams to a daemon",
		Long: `Simulates the MPI side of a whole system: jobs of many sizes and patterns
(halo, all-to-all, reduce trees, idle) fill every host of the simulated
fabric, and every rank sends real agent datagrams (per-node totals always,
per-peer rows within the agent's limits) to the daemon once per interval,
spread evenly over it. Jobs finish and new ones start (--job-lifetime).
The fabric side is simulated by the daemon itself: run it with
--fabric sim:SPEC for the same SPEC. It prints what it sent.

Systems (SPEC): stampede (6,541 hosts; x16 ranks = 104,656 processes),
10x-stampede, or any fat-tree:hosts=N spec (see netloom serve --help).`,
		Example:           `  netloom loadgen --system stampede --target 127.0.0.1:8467 --duration 60s`,
		Args:              posArgs(),
		ValidArgsFunction: noFiles,
		RunE: func(c *cobra.Command, _ []string) error {
			if patterns != "" {
				cfg.Patterns = strings.Split(patterns, ",")
			}
			rep, err := loadgen.Run(c.Context(), cfg, c.ErrOrStderr())
			if err != nil {
				return err
			}
			stdout := c.OutOrStdout()
			if asJSON {
				return writeJSON(stdout, rep)
			}
			fmt.Fprintf(stdout, "%s: %d hosts, %d processes in %d jobs (%d finished)\n", rep.System, rep.Hosts, rep.Processes, rep.Jobs, rep.JobsFinished)
			fmt.Fprintf(stdout, "sent %d datagrams (%d bytes, %d errors) in %.1fs: %.0f datagrams/s, %.0f processes per %.0fs interval\n",
				rep.DatagramsSent, rep.BytesSent, rep.SendErrors, rep.Seconds, rep.DatagramsPerSec, rep.ProcessesPerInter, rep.IntervalSeconds)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&cfg.System, "system", "stampede", "simulated `system` (a sim spec)")
	f.StringVar(&cfg.Target, "target", "127.0.0.1:8467", "daemon agent `address` (UDP)")
	f.DurationVar(&cfg.Duration, "duration", time.Minute, "how long to send")
	f.DurationVar(&cfg.Interval, "interval", 45*time.Second, "each rank's snapshot `interval`")
	f.IntVar(&cfg.RanksPerNode, "ranks-per-node", 16, "MPI ranks per host")
	f.IntVar(&cfg.MaxJobNodes, "max-job-nodes", 1024, "largest job, in hosts")
	f.DurationVar(&cfg.JobLifetime, "job-lifetime", 0, "mean job `lifetime` (0: jobs run throughout)")
	f.StringVar(&patterns, "patterns", "", "comma-separated `patterns` to cycle through (default: a production-like mix)")
	f.Uint64Var(&cfg.Seed, "seed", 1, "random seed")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	completeFlag(c, "system", "stampede", "10x-stampede", "fat-tree:hosts=")
	return c
}
