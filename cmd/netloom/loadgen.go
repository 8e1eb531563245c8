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
		cfg              loadgen.Config
		patterns         string
		systems, targets []string
		asJSON           bool
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
10x-stampede, or any fat-tree:hosts=N spec (see netloom serve --help).

A site of several fabrics, each watched by its own collector: give
--system and --target once per fabric, in pairs. Hosts are taken fabric
after fabric, so the job on the hosts where one fabric's list ends and the
next begins has ranks reporting to both collectors (docs/postgres.md).
The fabrics' host names must differ (sim specs' prefix= option).`,
		Example:           `  netloom loadgen --system stampede --target 127.0.0.1:8467 --duration 60s`,
		Args:              posArgs(),
		ValidArgsFunction: noFiles,
		RunE: func(c *cobra.Command, _ []string) error {
			if patterns != "" {
				cfg.Patterns = strings.Split(patterns, ",")
			}
			if len(systems) != len(targets) {
				return fmt.Errorf("--system given %d times, --target %d times: give one target per system, in pairs", len(systems), len(targets))
			}
			cfg.System, cfg.Target = systems[0], targets[0]
			for i := 1; i < len(systems); i++ {
				cfg.More = append(cfg.More, loadgen.System{Spec: systems[i], Target: targets[i]})
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
	f.StringArrayVar(&systems, "system", []string{"stampede"}, "simulated `system` (a sim spec); once per fabric of a site of several")
	f.StringArrayVar(&targets, "target", []string{"127.0.0.1:8467"}, "daemon agent `address` (UDP) of the system given in the same place")
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
