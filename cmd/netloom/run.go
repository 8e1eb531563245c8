package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/netloom/netloom/internal/launch"
)

// exitError carries a job's exit status out of a command.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("job exited with status %d", e.code) }

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", "[options] -- LAUNCHER [LAUNCHER ARGS...] PROGRAM [ARGS...]", `
Runs an MPI job with the Netloom agent (libnetloom) preloaded into every
rank, and exits with the job's exit status.

The MPI flavour is found from the launcher: mpirun/mpiexec are asked
--version (Open MPI or MPICH/Hydra); for srun, the program's libraries are
read with ldd. The agent library libnetloom-ompi.so or libnetloom-mpich.so
is looked for in $NETLOOM_LIB_DIR, in lib/ next to the netloom binary, and
in /usr/local/lib/netloom and /usr/lib/netloom.

The ranks get LD_PRELOAD and the agent's NETLOOM_* settings: with Open MPI
through "-x LD_PRELOAD=... -x NETLOOM_...", with MPICH through
"-genv LD_PRELOAD ..." (Hydra passes the rest of the environment), with
srun through --export=ALL,LD_PRELOAD=.... The launcher itself is not
preloaded.

Examples:
  netloom run --daemon mgmt:8467 -- mpirun -np 64 ./app
  netloom run --output /tmp/prof -- mpiexec.mpich -n 4 ./app && netloom report /tmp/prof`, stderr)
	var (
		daemon   = fs.String("daemon", "", "daemon agent `address` HOST:PORT (default: the agent reads $NETLOOM_DAEMON_FILE, /run/netloom/agent-address)")
		output   = fs.String("output", "", "write an offline profile per rank to `DIR`/JOB/rank-N.pb at MPI_Finalize")
		interval = fs.Duration("interval", 0, "snapshot `interval` of the agent (default 5s)")
		mpi      = fs.String("mpi", "auto", "MPI `flavour`: ompi, mpich or auto")
		lib      = fs.String("lib", "", "agent library `path` (default: found as above)")
		jobID    = fs.String("job-id", "", "job `id` (default: the scheduler's, else one generated)")
		quiet    = fs.Bool("quiet", false, "do not print the job id and library")
	)
	if err := parse(fs, args, 1, -1); err != nil {
		return err
	}
	plan, err := launch.Prepare(ctx, launch.Options{Daemon: *daemon, Output: *output, Interval: *interval, MPI: *mpi, Lib: *lib, JobID: *jobID},
		fs.Args())
	if err != nil {
		return err
	}
	if !*quiet {
		fmt.Fprintf(stderr, "netloom: job %s, %s agent %s\n", plan.JobID, plan.MPI, plan.Lib)
	}
	code, err := launch.Run(ctx, plan, os.Stdin, stdout, stderr)
	if err != nil {
		return err
	}
	if code != 0 {
		return &exitError{code}
	}
	return nil
}

// exitCode maps an error from a command to the process status.
func exitCode(err error) (int, bool) {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code, true
	}
	return 0, false
}
