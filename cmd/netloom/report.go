package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/netloom/netloom/internal/ingest"
	"github.com/netloom/netloom/internal/model"
)

func reportCmd() *cobra.Command {
	var (
		asJSON bool
		csvDir string
	)
	c := &cobra.Command{
		Use:   "report DIR",
		Short: "print an offline job profile (MPInside-style tables, CSV, JSON)",
		Long: `Reads a job's offline profile (the rank-N.pb files the agent writes under
NETLOOM_OUTPUT/JOB/ at MPI_Finalize, e.g. with netloom run --output DIR) and
prints MPInside-style tables: time per MPI function per rank; requests and
bytes sent and received per function; the rank-to-rank SIZE (bytes) and
REQUEST (messages) matrices of point-to-point, collective and one-sided
traffic; regions; for GPU jobs, the MPI buffers' paths between host and
device memory (H->H, H->D, D->H, D->D, inside and across nodes) and kinds
per function, and the NCCL operations (docs/gpu.md); when the job reordered
its own ranks (netloom_reorder, docs/reorder.md), when and how, with the
predicted inter-node bytes before and after. DIR is the job's
directory, or the output directory when it holds one job.

A rank file that cannot be read in full (cut short, not a Netloom profile,
another rank's) is a warning naming the file and what is wrong, on standard
error and in the report; the other ranks are reported. When no rank's file
can be read, netloom report exits 1 with each file's error.

--json prints one document instead (docs/cli.md): "ranks", "matrix" with
p2p, coll and rma, each with "bytes" and "msgs" as rank-by-rank arrays
(row = sender), "processes", "nodes", "profile", "histogram", "regions",
"gpu" (as GET /api/v1/jobs/{job}/gpu gives it), "reorders" (each
netloom_reorder call, the ranks' records joined; [] when none), "warnings"
([] when none).
A traced run (netloom run --trace) whose trace was cut says so among the
warnings, with when and why, as netloom model does.

--csv also writes ranks.csv, functions.csv and matrix-CLASS-METRIC.csv.`,
		Example: `  netloom report /tmp/prof --json`,
		Args:    posArgs("DIR"),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return nil, cobra.ShellCompDirectiveFilterDirs
		},
		RunE: func(c *cobra.Command, args []string) error {
			job, warnings, err := ingest.ReadProfile(args[0])
			if err != nil {
				return err // it names each bad file and what is wrong with it
			}
			// Also on standard error: a bad rank file is not to be missed
			// when the report goes to a file.
			for _, w := range warnings {
				c.PrintErrf("netloom report: warning: %v\n", w)
			}
			rep, err := ingest.BuildReport(job, warnings)
			if err != nil {
				return err
			}
			// A traced run says when and why a rank's trace was cut, as
			// netloom model does: the replay covers the run only up to there.
			cuts, err := model.TraceCuts(args[0])
			if err != nil {
				cuts = []string{fmt.Sprintf("the replay traces' descriptions: %v", err)}
			}
			for _, w := range cuts {
				c.PrintErrf("netloom report: warning: %s\n", w)
			}
			rep.Warnings = append(rep.Warnings, cuts...)
			if csvDir != "" {
				files, err := ingest.WriteCSV(csvDir, rep)
				if err != nil {
					return err
				}
				c.PrintErrf("netloom report: wrote %d CSV files to %s\n", len(files), csvDir)
			}
			if asJSON {
				return writeJSON(c.OutOrStdout(), rep)
			}
			return ingest.WriteText(c.OutOrStdout(), rep)
		},
	}
	f := c.Flags()
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.StringVar(&csvDir, "csv", "", "also write CSV files to `OUTDIR`")
	_ = c.MarkFlagDirname("csv")
	return c
}
