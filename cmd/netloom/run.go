package main

import (
	"cmp"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/netloom/netloom/internal/launch"
)

func runCmd() *cobra.Command {
	var (
		o     launch.Options
		quiet bool
	)
	c := &cobra.Command{
		Use:   "run [flags] [--] LAUNCHER [LAUNCHER ARGS...] PROGRAM [ARGS...]",
		Short: "run an MPI or NCCL job with the Netloom agent preloaded",
		Long: `Runs an MPI job with the Netloom agent (libnetloom) preloaded into every
rank, and exits with the job's exit status.

netloom's options come before the launcher: everything from LAUNCHER on
(or after "--") is the job's command line, left as it is.

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

Traffic model. By default the agent counts the application's calls, a
collective as its root sending to every rank (traffic_model logical).
Under Open MPI, --physical turns Open MPI's monitoring on
(OMPI_MCA_pml_monitoring_enable=1, no output files; unless the environment
sets it): the agent then also counts what the library really sends to each
peer, collectives as decomposed, and the daemon puts those bytes on the
links (traffic_model physical). What each costs, messages of 0 to 64 bytes
on 2 ranks of an idle 16-core machine (bench/agent/small.sh 4000 7):
the agent alone 3.5 to 6% of the message rate (22% at 8 bytes), with
--physical 21 to 36% (Open MPI's monitoring alone: 17 to 37%).

A torchrun job (torchrun, or python -m torch.distributed.run) is an NCCL
job: netloom run sets NCCL_PROFILER_PLUGIN to libnetloom-nccl.so (found as
above) and the NETLOOM_* settings in the environment torchrun passes to
its workers; nothing is preloaded. Each worker reports as one rank
(RANK, WORLD_SIZE) of the job: its NCCL operations beside MPI's functions
(docs/nccl.md). --nccl loads the plugin into the ranks of an MPI job that
also uses NCCL.`,
		Example: `  netloom run --daemon mgmt:8467 -- mpirun -np 64 ./app
  netloom run --output /tmp/prof -- mpiexec.mpich -n 4 ./app && netloom report /tmp/prof
  netloom run --output /tmp/prof -- torchrun --nproc-per-node 8 train.py`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("missing LAUNCHER")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			plan, err := launch.Prepare(ctx, o, args)
			if err != nil {
				return err
			}
			if !quiet {
				c.PrintErrf("netloom: job %s, %s agent %s\n", plan.JobID, plan.MPI, plan.Lib)
				c.PrintErrf("netloom: %s\n", plan.Destination())
				if plan.Output != "" {
					c.PrintErrf("netloom: profiles to %s\n", filepath.Join(plan.Output, cmp.Or(plan.JobID, "JOB (the scheduler's job id)")))
				}
			}
			code, err := launch.Run(ctx, plan, c.InOrStdin(), c.OutOrStdout(), c.ErrOrStderr())
			if err != nil {
				return err
			}
			if code != 0 {
				return &exitError{code}
			}
			return nil
		},
	}
	// The job's own options are not netloom's.
	c.Flags().SetInterspersed(false)
	f := c.Flags()
	f.StringVar(&o.Daemon, "daemon", "", "daemon agent `address` HOST:PORT (default: the agent reads $NETLOOM_DAEMON_FILE, /run/netloom/agent-address)")
	f.StringVar(&o.Output, "output", "", "write an offline profile per rank to `DIR`/JOB/rank-N.pb at MPI_Finalize")
	f.DurationVar(&o.Interval, "interval", 0, "snapshot `interval` of the agent (default 5s)")
	f.BoolVar(&o.Waits, "waits", false, "time apart the wait for the last rank before each blocking collective (a barrier before it) and the wait for a late sender in each MPI_Recv (a probe before it): agent/README.md, \"Wait states\"")
	f.BoolVar(&o.Trace, "trace", false, "record the replay trace netloom model needs (with --output: DIR/JOB/rank-N.ti.gz; agent/README.md, \"Replay trace\")")
	f.BoolVar(&o.Physical, "physical", false, "under Open MPI, turn its monitoring on: the agent then also counts the messages the library sends (collectives as decomposed), which the daemon puts on the links; costs small messages 21 to 36% of their rate (agent/README.md, \"Physical traffic\")")
	var logical bool
	f.BoolVar(&logical, "logical", false, "count the application's calls only (the default; kept for scripts that name it)")
	c.MarkFlagsMutuallyExclusive("physical", "logical")
	f.BoolVar(&o.NCCL, "nccl", false, "also load the NCCL profiler plugin (libnetloom-nccl.so) into the ranks: their NCCL operations are reported beside MPI's (docs/nccl.md)")
	enumFlag(c, &o.MPI, "mpi", "auto", "MPI `flavour`: ompi, mpich, nccl (NCCL without MPI: torchrun) or auto", "ompi", "mpich", "nccl", "auto")
	f.StringVar(&o.Lib, "lib", "", "agent library `path` (default: found as above)")
	f.StringVar(&o.JobID, "job-id", "", "job `id` (default: the scheduler's, else one generated)")
	f.BoolVar(&quiet, "quiet", false, "do not print the job id and library")
	_ = c.MarkFlagDirname("output")
	_ = c.RegisterFlagCompletionFunc("lib", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"so"}, cobra.ShellCompDirectiveFilterFileExt
	})
	return c
}
