package main

import (
	"context"
	"fmt"
	"io"

	"github.com/netloom/netloom/internal/ingest"
)

func runReport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("report", "[--json] [--csv OUTDIR] DIR", `
Reads a job's offline profile (the rank-N.pb files the agent writes under
NETLOOM_OUTPUT/JOB/ at MPI_Finalize, e.g. with netloom run --output DIR) and
prints MPInside-style tables: time per MPI function per rank; requests and
bytes sent and received per function; the rank-to-rank SIZE (bytes) and
REQUEST (messages) matrices of point-to-point, collective and one-sided
traffic; regions. DIR is the job's directory, or the output directory when
it holds one job.

--json prints one document instead (docs/cli.md): "ranks", "matrix" with
p2p, coll and rma, each with "bytes" and "msgs" as rank-by-rank arrays
(row = sender), "processes", "nodes", "profile", "histogram", "regions".
--csv also writes ranks.csv, functions.csv and matrix-CLASS-METRIC.csv.`, stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	csvDir := fs.String("csv", "", "also write CSV files to `OUTDIR`")
	if err := parse(fs, args, 1, 1); err != nil {
		return err
	}
	job, warnings, err := ingest.ReadProfile(fs.Arg(0))
	if err != nil {
		return err
	}
	rep, err := ingest.BuildReport(job, warnings)
	if err != nil {
		return err
	}
	if *csvDir != "" {
		files, err := ingest.WriteCSV(*csvDir, rep)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "netloom report: wrote %d CSV files to %s\n", len(files), *csvDir)
	}
	if *asJSON {
		return writeJSON(stdout, rep)
	}
	return ingest.WriteText(stdout, rep)
}
