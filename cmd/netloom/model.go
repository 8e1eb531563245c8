package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/netloom/netloom/internal/model"
)

func modelCmd() *cobra.Command {
	var (
		networks                   []string
		placement, platform, calib string
		latency, hopLatency, loLat time.Duration
		bandwidth, loBW, workDir   string
		nodeMap                    string
	)
	c := &cobra.Command{
		Use:   "model PROFILE_DIR",
		Short: "predict a traced job's time on another network or placement (SimGrid replay)",
		Long: `Replays a job's MPI events with SimGrid's SMPI (Debian's simgrid) on a
platform built from the fabric, and predicts its elapsed time and MPI time
per function as it ran and under what-ifs: a perfect network (no latency,
no bandwidth limit: the bound MPInside defines), N times the bandwidth, a
given bandwidth and latency, another placement of ranks on nodes.

The job is an offline profile directory of a run traced by the agent:
netloom run --trace --output DIR -- mpirun ... (NETLOOM_TRACE=1). What the
trace holds, its size and its limits: agent/README.md, "Replay trace".

The platform (--platform):
  fabric      the job's nodes on the fabric --db names (the topology and
              forwarding tables a daemon stored), else the one --fabric
              reaches: every link on the routes between them at its width
              and speed, --hop-latency per link (the default when --db or
              --fabric is given)
  flat        every node on a non-blocking switch: --bandwidth and
              --latency between nodes (the default otherwise)
  calibrated  flat, at the latency and bandwidth --calibration FILE holds
              (netloom model calibrate) between nodes; within a node, its
              loopback as calibrated on the node
Ranks on one node talk through its loopback, which its messages in flight
at once share: by default never slower than the network (10 GB/s and
300 ns, or the fastest link's bandwidth and the quickest route's latency
where faster); when calibrated, the node's aggregate bandwidth (a window
of 64 messages in flight), each message at most one pair's ping-pong
bandwidth, after one pair's latency; --loopback-bandwidth and
--loopback-latency set it as given.

Without --network the what-ifs are a perfect network and twice the
bandwidth. Warnings say what the prediction is worth: a host that ran
more ranks than it has CPUs (nproc on this host, else Slurm's count), a
replay as ran far from the measured time, an implausible calibration, a
job that sent nothing between nodes, a rank's trace cut short. See
docs/model.md, "What a prediction is worth".`,
		Example: `  netloom model prof --db /var/lib/netloom/netloom.db
  netloom model prof --network perfect --network x4 --placement machinefile
  netloom model calibrate -o calib.json && netloom model prof --platform calibrated --calibration calib.json`,
		Args: posArgs("PROFILE_DIR"),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return nil, cobra.ShellCompDirectiveFilterDirs
		},
	}
	spec, asJSON := sourceFlags(c)
	f := c.Flags()
	loadCache := f.String("load-cache", "", "read the topology from an ibnetdiscover cache `file` (forwarding tables are still read from the fabric)")
	db := f.String("db", "", "the topology and forwarding tables a netloom daemon stored in `db`")
	f.StringArrayVar(&networks, "network", nil, "a what-if `network`: perfect, xN (N times the bandwidth) or bandwidth=RATE,latency=DURATION (repeatable)")
	f.StringVar(&placement, "placement", "", "predict also another placement: an Open MPI rankfile or a Hydra/Slurm machine `file` (netloom place writes them)")
	enumFlag(c, &platform, "platform", "", "`platform`: fabric, flat or calibrated (default: fabric with --db or --fabric, else flat)", "fabric", "flat", "calibrated")
	f.StringVar(&calib, "calibration", "", "the latency and bandwidth `file` netloom model calibrate wrote")
	f.StringVar(&bandwidth, "bandwidth", "12.5GB/s", "flat platform: bandwidth between nodes, a `rate`")
	f.DurationVar(&latency, "latency", time.Microsecond, "flat platform: latency between nodes")
	f.DurationVar(&hopLatency, "hop-latency", seconds(model.DefaultHopLatency), "fabric platform: latency of each link on a route")
	f.StringVar(&loBW, "loopback-bandwidth", "", fmt.Sprintf("bandwidth between ranks on one node, a `rate` (default: %s, or the fastest link's when faster)", model.Rate(model.DefaultLoopback.Bandwidth)))
	f.DurationVar(&loLat, "loopback-latency", 0, fmt.Sprintf("latency between ranks on one node (default: %s, or the quickest route's when quicker)", model.Duration(model.DefaultLoopback.Latency)))
	f.StringVar(&nodeMap, "node-map", "", "node names to host adapters, as netloom serve's --node-map `file`")
	f.StringVar(&workDir, "work-dir", "", "`folder` for the replay's temporary files (default: the system's)")
	elapsedOnly := f.Bool("elapsed-only", false, "predict the elapsed time alone, not the MPI time per function: about twice as fast for large traces")
	fullReplay := f.Bool("full-replay", false, "replay every action of a long trace that repeats, not a window of its iterations (slow: minutes per 100 million actions)")
	windowActions := f.Int("window-actions", model.DefaultWindowActions, "replay a trace that repeats in part when it holds more than `N` actions (see docs/model.md, \"Replay speed\")")
	c.RunE = func(c *cobra.Command, args []string) error {
		ctx := c.Context()
		fabricGiven := c.Flags().Changed("fabric") || *db != ""
		if platform == "" {
			platform = "flat"
			if fabricGiven {
				platform = "fabric"
			}
		}
		if platform != "fabric" && (fabricGiven || *loadCache != "") {
			return usagef("--platform %s takes no --db, --fabric or --load-cache", platform)
		}
		if (platform == "calibrated") != (calib != "") {
			return usagef("--platform calibrated and --calibration FILE go together")
		}
		var whatIfs []model.Network
		if len(networks) == 0 {
			networks = []string{"perfect", "x2"}
		}
		for _, s := range networks {
			n, err := model.ParseNetwork(s)
			if err != nil {
				return usagef("--network: %v", err)
			}
			whatIfs = append(whatIfs, n)
		}
		job, warnings, err := model.Load(args[0])
		if err != nil {
			return err
		}
		if *windowActions < 1 {
			return usagef("--window-actions %d: want a positive number of actions (--full-replay replays all)", *windowActions)
		}
		req := model.Request{HostOf: job.Nodes, Networks: whatIfs, Work: workDir, ElapsedOnly: *elapsedOnly,
			WindowActions: *windowActions, FullReplay: *fullReplay}
		if placement != "" {
			b, err := os.ReadFile(placement)
			if err != nil {
				return fmt.Errorf("--placement: %w", err)
			}
			if req.Placement, err = model.HostsOf(string(b), job.Ranks); err != nil {
				return fmt.Errorf("--placement %s: %w", placement, err)
			}
		}
		loop := model.DefaultLoopback
		loopGiven := c.Flags().Changed("loopback-bandwidth") || c.Flags().Changed("loopback-latency")
		if loopGiven {
			if platform == "calibrated" {
				return usagef("--platform calibrated takes the loopback's bandwidth and latency from the calibration, not --loopback-*")
			}
			loop.NoSlowerThanNetwork = false
			loop.From = "given (--loopback-bandwidth, --loopback-latency)"
			if c.Flags().Changed("loopback-bandwidth") {
				lo, err := model.ParseRate(loBW)
				if err != nil {
					return usagef("--loopback-bandwidth: %v", err)
				}
				loop.Bandwidth = lo
			}
			if c.Flags().Changed("loopback-latency") {
				if loLat < 0 {
					return usagef("--loopback-latency %s: want a duration >= 0", loLat)
				}
				loop.Latency = loLat.Seconds()
			}
		}
		hosts := model.Hosts(req.HostOf, req.Placement)
		cores := model.Cores(req.HostOf, req.Placement)
		switch platform {
		case "flat":
			bw, err := model.ParseRate(bandwidth)
			if err != nil {
				return usagef("--bandwidth: %v", err)
			}
			req.Platform = model.Flat(fmt.Sprintf("flat, %s and %s between nodes", bandwidth, latency), hosts, cores, latency.Seconds(), bw, loop)
		case "calibrated":
			cal, err := model.ReadCalibration(calib)
			if err != nil {
				return fmt.Errorf("--calibration: %w", err)
			}
			loop = model.Link{ID: "loopback", Bandwidth: cal.Bandwidth, Latency: cal.Latency,
				From: "the calibration's ping-pong (" + calib + " holds no measurement of the node)"}
			if cal.Node != nil {
				loop = cal.Node.Loopback()
			} else {
				warnings = append(warnings, fmt.Sprintf("the calibration %s holds no measurement of the node's loopback (written before netloom model calibrate measured it): ranks on one node talk at its ping-pong's %s and %s, and a node's messages in flight at once share that; run netloom model calibrate again to measure the node",
					calib, model.Rate(cal.Bandwidth), model.Duration(cal.Latency)))
			}
			warnings = append(warnings, cal.Check(calib)...)
			req.Platform = model.Flat(fmt.Sprintf("calibrated (%s): %.3g GB/s, %.3g us", calib, cal.Bandwidth/1e9, cal.Latency*1e6),
				hosts, cores, cal.Latency, cal.Bandwidth, loop)
		case "fabric":
			routes, nm, err := routesAndNodeMap(ctx, *spec, *loadCache, *db, nodeMap)
			if err != nil {
				return err
			}
			name := "fabric (" + *spec + ")"
			if *db != "" {
				name = "fabric (" + *db + ")"
			}
			if req.Platform, err = model.FromRoutes(name, routes, hosts, cores, nm.LID, hopLatency.Seconds(), loop); err != nil {
				return err
			}
		}
		if why := req.Platform.LoopbackSlower(); loopGiven && why != "" {
			warnings = append(warnings, fmt.Sprintf("the loopback given (--loopback-*) is slower than the network: %s; a placement on fewer nodes may be predicted slower than one on more", why))
		}
		if job.Events > progressEvents {
			req.Progress = func(format string, args ...any) { c.PrintErrf("netloom model: "+format+"\n", args...) }
		}
		res, err := model.Predict(ctx, job, req)
		if err != nil {
			return fmt.Errorf("job %s: %w", job.ID, err)
		}
		res.Warnings = append(append([]string{}, warnings...), res.Warnings...)
		if *asJSON {
			return writeJSON(c.OutOrStdout(), res)
		}
		for _, w := range res.Warnings {
			c.PrintErrf("netloom model: warning: %s\n", w)
		}
		return writePrediction(c.OutOrStdout(), res)
	}
	c.AddCommand(calibrateCmd())
	return c
}

func calibrateCmd() *cobra.Command {
	var mpi, out, mpicc string
	c := &cobra.Command{
		Use:   "calibrate [flags] [-- LAUNCHER ARGS...]",
		Short: "measure latency and bandwidth between two MPI ranks and within a node (for --platform calibrated)",
		Long: `Compiles a ping-pong with mpicc, runs it on two ranks (by default on this
machine: mpirun -np 2, or mpiexec.mpich -n 2 with --mpi mpich; after "--",
any launcher command line that starts two ranks), and prints or writes
the one-way latency (1-byte messages) and bandwidth (4 MiB messages) as
JSON, for netloom model --platform calibrated --calibration FILE.

It measures the node's loopback too ("node" in the file): one pair's
latency and bandwidth, and the aggregate bandwidth of 64 messages of
1 MiB in flight at once (osu_bw's window), with two ranks on one node:
the same run when its ranks shared one, else a second run with
--node-launcher (default: this machine's mpirun/mpiexec.mpich).`,
		Example: `  netloom model calibrate -o calib.json
  netloom model calibrate --mpi mpich -- mpiexec.mpich -n 2 -hosts n1,n2`,
	}
	var nodeLauncher string
	f := c.Flags()
	enumFlag(c, &mpi, "mpi", "ompi", "MPI `flavour`: ompi or mpich", "ompi", "mpich")
	f.StringVarP(&out, "output", "o", "", "write the calibration to `FILE` (default: standard output)")
	f.StringVar(&mpicc, "mpicc", "", "MPI C compiler (default: mpicc, or mpicc.mpich with --mpi mpich)")
	f.StringVar(&nodeLauncher, "node-launcher", "", "the launcher `line` that starts two ranks on one node, to measure its loopback when the ranks after -- ran on two (default: this machine's)")
	c.RunE = func(c *cobra.Command, args []string) error {
		here := []string{"mpirun", "--oversubscribe", "-np", "2"}
		if mpi == "mpich" {
			here = []string{"mpiexec.mpich", "-n", "2"}
		}
		launcher := args
		local := len(launcher) == 0
		if local {
			launcher = here
		}
		node := here
		if nodeLauncher != "" {
			node = strings.Fields(nodeLauncher)
		}
		if mpicc == "" {
			mpicc = map[string]string{"ompi": "mpicc", "mpich": "mpicc.mpich"}[mpi]
		}
		var cores int
		var load *float64
		if local {
			cores, load = model.LocalLoad()
		}
		cal, err := model.Calibrate(c.Context(), mpicc, launcher, node, "")
		if err != nil {
			return err
		}
		if local {
			cal.CPUs, cal.LoadAverage = cores, load
			if w := model.BusyWarning(cores, load); w != "" {
				cal.Warnings = append(cal.Warnings, w)
			}
		}
		for _, w := range cal.Check("") {
			c.PrintErrf("netloom model calibrate: warning: %s\n", w)
		}
		b, err := json.MarshalIndent(cal, "", "  ")
		if err != nil {
			return err
		}
		if out == "" {
			_, err = fmt.Fprintf(c.OutOrStdout(), "%s\n", b)
			return err
		}
		c.PrintErrf("latency %.3g us, bandwidth %.3g GB/s (%s)\n", cal.Latency*1e6, cal.Bandwidth/1e9, cal.Launcher)
		if n := cal.Node; n != nil {
			c.PrintErrf("node %s: latency %.3g us, bandwidth %.3g GB/s one pair, %.3g GB/s with %d messages of %d bytes in flight (%s)\n",
				n.Host, n.Latency*1e6, n.Bandwidth/1e9, n.AggregateBandwidth/1e9, n.Window, n.WindowBytes, n.Launcher)
		}
		return os.WriteFile(out, append(b, '\n'), 0o644)
	}
	return c
}

// progressEvents is the trace size above which netloom model says what it
// is doing on standard error: a replay of this many actions takes seconds.
const progressEvents = 1_000_000

// seconds is a duration of s seconds.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// writePrediction prints the predictions beside the measurement.
func writePrediction(w io.Writer, r *model.Result) error {
	pair := ""
	if r.Loopback.PairBandwidth > 0 {
		pair = fmt.Sprintf(" shared, %s a message", model.Rate(r.Loopback.PairBandwidth))
	}
	fmt.Fprintf(w, "Job %s: %d ranks on %d nodes, %d trace events; platform: %s; ranks on one node: loopback %s%s, %s (%s)\n",
		r.Job, r.Ranks, r.Hosts, r.Events, r.Platform, model.Rate(r.Loopback.Bandwidth), pair, model.Duration(r.Loopback.Latency), r.Loopback.From)
	if x := r.Window; x != nil {
		fmt.Fprintf(w, "Replayed in part: every rank repeats %d times a period of up to %d events; replayed every %d-th of them (%d) and the run without them, and extrapolated (--full-replay replays all)\n",
			x.Periods, x.PeriodEvents, x.Stride, x.Kept)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	// What-ifs are gains against the replay as it ran: the replay's own
	// distance from the measured run is the model's calibration, given
	// apart (issue 28: a gain against the measured run mixes the two).
	fmt.Fprintf(tw, "\telapsed (s)\tMPI (s, all ranks)\tvs as ran\tinter-node p2p bytes\tintra-node p2p bytes\t\n")
	fmt.Fprintf(tw, "measured\t%.4f\t%.4f\t\t\t\t\n", r.Measured.Elapsed, r.Measured.MPISeconds)
	preds := append([]*model.Prediction{r.AsRan}, r.WhatIfs...)
	for _, p := range preds {
		mpi := "–"
		if p.PerFunction {
			mpi = fmt.Sprintf("%.4f", p.MPISeconds)
		}
		vs := ""
		if p != r.AsRan {
			vs = fmt.Sprintf("%+.1f%%", r.Gain(p))
		}
		fmt.Fprintf(tw, "%s\t%.4f\t%s\t%s\t%d\t%d\t\n", p.Scenario, p.Elapsed, mpi, vs, p.InterNodeBytes, p.IntraNodeBytes)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Measured.Elapsed > 0 {
		fmt.Fprintf(w, "calibration: the replay as it ran takes %.1f%% of the measured elapsed time (%.4f s against %.4f s); the what-ifs are changes from the replay as it ran\n",
			100*r.AsRan.Elapsed/r.Measured.Elapsed, r.AsRan.Elapsed, r.Measured.Elapsed)
	}
	if !r.AsRan.PerFunction {
		return nil
	}
	fmt.Fprintf(w, "\nMPI time per function (s, all ranks; %s: every point-to-point call together, as the replay keeps messages, not the calls that posted and completed them):\n", model.PointToPoint)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"function", "measured"}
	for _, p := range preds {
		head = append(head, p.Scenario)
	}
	fmt.Fprintf(tw, "%s\t\n", strings.Join(head, "\t"))
	times := []map[string]float64{r.Measured.Groups}
	for _, p := range preds {
		times = append(times, p.Groups)
	}
	for _, fn := range model.Functions(times...) {
		row := []string{fn, fmt.Sprintf("%.4f", r.Measured.Groups[fn])}
		for _, p := range preds {
			row = append(row, fmt.Sprintf("%.4f", p.Groups[fn]))
		}
		fmt.Fprintf(tw, "%s\t\n", strings.Join(row, "\t"))
	}
	return tw.Flush()
}
