package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/netloom/netloom/internal/analysis"
	"github.com/netloom/netloom/internal/daemon"
	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/ingest"
	"github.com/netloom/netloom/internal/model"
	"github.com/netloom/netloom/internal/place"
	"github.com/netloom/netloom/internal/store"
)

func placeCmd() *cobra.Command {
	var (
		nodes, format, out, nodeMap string
		cores                       int
		seed                        uint64
	)
	c := &cobra.Command{
		Use:   "place JOB|PROFILE_DIR",
		Short: "advise a rank placement that lowers a job's traffic on the fabric",
		Long: `Computes a mapping of a job's ranks to nodes, and to cores within them,
that lowers its communication cost on the real fabric: the bytes its ranks
exchanged, weighted by the hops of the routes the switches' forwarding
tables give, and the load of the heaviest link direction. The mapping is
Scotch's, onto a tree built from the routes' hop distances; see docs/place.md.

The job is an offline profile directory (netloom run --output DIR), or a
job id that a daemon stored (with --db). The fabric is the one --db names
(the topology and forwarding tables the daemon stored last), else the one
reached through --fabric (and --load-cache).

Nodes default to the job's own (Slurm's node list, else the nodes the
agents reported); cores per node to Slurm's CPUs per node, else the most
ranks the job ran with on one node.

The placement file (--format): openmpi, a rankfile for mpirun --rankfile;
mpich, a Hydra machine file for mpiexec -f; slurm, a host file for
SLURM_HOSTFILE with srun --distribution=arbitrary. With -o it is written to
FILE and the summary printed; without, the file goes to standard output and
the summary to standard error. --json prints the summary as JSON: the cost
(inter-node bytes, bytes x hops, heaviest link) of the job as it ran, the
advice, round-robin, block and random placements, the gains and the mapping.`,
		Example: `  netloom place prof --fabric sim:fat-tree:hosts=16,radix=8 --nodes n[1-2] -o rankfile
  netloom place 4711 --db /var/lib/netloom/netloom.db --format slurm -o hostfile`,
		Args: posArgs("JOB|PROFILE_DIR"),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return nil, cobra.ShellCompDirectiveFilterDirs
		},
	}
	spec, asJSON := sourceFlags(c)
	f := c.Flags()
	loadCache := f.String("load-cache", "", "read the topology from an ibnetdiscover cache `file` (forwarding tables are still read from the fabric)")
	db := f.String("db", "", "read the job (unless a profile directory is given), topology and forwarding tables a netloom daemon stored in `db`")
	f.StringVar(&nodes, "nodes", "", "the nodes to place on, a Slurm `hostlist` (default: the job's own)")
	f.IntVar(&cores, "cores-per-node", 0, "cores per node (default: Slurm's, else the most ranks the job ran with on one node)")
	enumFlag(c, &format, "format", "openmpi", "placement file `format`: openmpi, mpich or slurm", place.Formats...)
	f.StringVarP(&out, "output", "o", "", "write the placement file to `FILE` (default: standard output)")
	f.StringVar(&nodeMap, "node-map", "", "node names to host adapters, as netloom serve's --node-map `file`")
	f.Uint64Var(&seed, "seed", 1, "seed of the random placement compared with")
	c.RunE = func(c *cobra.Command, args []string) error {
		if *loadCache != "" && *db != "" {
			return usagef("--load-cache and --db: choose one")
		}
		if cores < 0 {
			return usagef("--cores-per-node %d: want a positive number", cores)
		}
		ctx := c.Context()
		job, warnings, err := placeJob(ctx, args[0], *db)
		if err != nil {
			return err
		}
		for _, w := range warnings {
			c.PrintErrf("netloom place: warning: %v\n", w)
		}
		routes, nm, err := routesAndNodeMap(ctx, *spec, *loadCache, *db, nodeMap)
		if err != nil {
			return err
		}
		req, err := place.JobRequest(job, place.Options{Hostlist: nodes, CoresPerNode: cores, Seed: seed})
		if err != nil {
			return err
		}
		adv, err := place.Advise(place.NewFabric(routes, nm), req)
		if err != nil {
			return fmt.Errorf("job %s: %w", job.ID, err)
		}
		adv.Job = job.ID
		summary, file := c.OutOrStdout(), c.OutOrStdout()
		if out == "" {
			summary = c.ErrOrStderr()
		} else {
			fh, err := os.Create(out)
			if err != nil {
				return err
			}
			if err := place.Write(fh, format, adv.Mapping); err != nil {
				fh.Close()
				return fmt.Errorf("%s: %w", out, err)
			}
			if err := fh.Close(); err != nil {
				return err
			}
		}
		predicted, err := placePrediction(ctx, args[0], routes, nm, adv)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(c.OutOrStdout(), struct {
				*place.Advice
				Format    string          `json:"format"`
				File      string          `json:"file,omitempty"`
				Predicted *placePredicted `json:"predicted,omitempty"`
			}{adv, format, out, predicted})
		}
		if err := writeAdvice(summary, adv); err != nil {
			return err
		}
		if predicted != nil {
			fmt.Fprintf(summary, "predicted elapsed (the trace replayed by SimGrid on the fabric, docs/model.md): as ran %.4f s, advice %.4f s (%+.1f%%); measured %.4f s\n",
				predicted.AsRan, predicted.Advice, 100*(predicted.Advice-predicted.AsRan)/predicted.AsRan, predicted.Measured)
		}
		if out == "" {
			return place.Write(file, format, adv.Mapping)
		}
		fmt.Fprintf(summary, "wrote %s (%s) to %s\n", place.FileName(format), format, out)
		return nil
	}
	return c
}

// placePredicted is the elapsed time netloom model predicts for the job
// as it ran and placed as advised.
type placePredicted struct {
	Measured float64 `json:"measured_seconds"`
	AsRan    float64 `json:"as_ran_seconds"`
	Advice   float64 `json:"advice_seconds"`
}

// placePrediction replays a traced profile (netloom run --trace) as it
// ran and as advised; nil when the job is not a traced profile.
func placePrediction(ctx context.Context, arg string, routes *fabric.Routes, nm *analysis.NodeMap, adv *place.Advice) (*placePredicted, error) {
	if st, err := os.Stat(arg); err != nil || !st.IsDir() {
		return nil, nil
	}
	job, _, err := model.Load(arg)
	if err != nil {
		return nil, nil // no traces: the advice stands without a predicted time
	}
	advised := make([]string, job.Ranks)
	for _, m := range adv.Mapping {
		if m.Rank >= 0 && m.Rank < job.Ranks {
			advised[m.Rank] = m.Node
		}
	}
	if slices.Contains(advised, "") {
		return nil, nil
	}
	hosts := model.Hosts(job.Nodes, advised)
	plat, err := model.FromRoutes("fabric", routes, hosts, model.Cores(job.Nodes, advised), nm.LID, model.DefaultHopLatency, model.DefaultLoopback)
	if err != nil {
		return nil, fmt.Errorf("predicting the advice's time: %w", err)
	}
	res, err := model.Predict(ctx, job, model.Request{Platform: plat, HostOf: job.Nodes, Placement: advised, ElapsedOnly: true})
	if err != nil {
		return nil, fmt.Errorf("predicting the advice's time: %w", err)
	}
	return &placePredicted{Measured: res.Measured.Elapsed, AsRan: res.AsRan.Elapsed, Advice: res.WhatIfs[0].Elapsed}, nil
}

// routesAndNodeMap gets the routes (placeRoutes) and maps node names to
// host adapters on them, with a --node-map file's overrides when given.
func routesAndNodeMap(ctx context.Context, spec, loadCache, db, nodeMap string) (*fabric.Routes, *analysis.NodeMap, error) {
	routes, err := placeRoutes(ctx, spec, loadCache, db)
	if err != nil {
		return nil, nil, err
	}
	var overrides map[string]string
	if nodeMap != "" {
		fh, err := os.Open(nodeMap)
		if err != nil {
			return nil, nil, fmt.Errorf("node map: %w", err)
		}
		overrides, err = analysis.ParseMapping(fh, nodeMap)
		fh.Close()
		if err != nil {
			return nil, nil, err
		}
	}
	nm, err := analysis.NewNodeMap(routes.Topology(), overrides)
	return routes, nm, err
}

// placeJob reads the job: a profile directory, else a job id in the store.
func placeJob(ctx context.Context, arg, db string) (*store.Job, []error, error) {
	if st, err := os.Stat(arg); err == nil && st.IsDir() {
		return ingest.ReadProfile(arg)
	}
	if db == "" {
		return nil, nil, fmt.Errorf("%s: no such profile directory; to place a job a daemon stored, give --db DB", arg)
	}
	st, err := openStoreFile(ctx, db)
	if err != nil {
		return nil, nil, err
	}
	defer st.Close()
	j, err := st.Job(ctx, arg)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, fmt.Errorf("job %q: no such job in db %s", arg, db)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("db %s: job %s: %w", db, arg, err)
	}
	return j, nil, nil
}

// openStoreFile opens a daemon's store, refusing a SQLite file that does
// not exist (opening one would create it empty).
func openStoreFile(ctx context.Context, db string) (store.Store, error) {
	path := strings.TrimPrefix(strings.TrimPrefix(db, "sqlite://"), "sqlite:")
	if !strings.Contains(db, "://") || strings.HasPrefix(db, "sqlite:") {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("db %s: %w", db, err)
		}
	}
	return daemon.OpenStore(ctx, db, "")
}

// placeRoutes gets the routes: the store's newest topology and forwarding
// tables, else the fabric's.
func placeRoutes(ctx context.Context, spec, loadCache, db string) (*fabric.Routes, error) {
	if db != "" {
		st, err := openStoreFile(ctx, db)
		if err != nil {
			return nil, err
		}
		defer st.Close()
		t, _, err := st.TopologyAt(ctx, time.Now())
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("db %s: no fabric topology stored (a daemon writes one once it has discovered the fabric)", db)
		}
		if err != nil {
			return nil, fmt.Errorf("db %s: %w", db, err)
		}
		ft, _, err := st.ForwardingTablesAt(ctx, time.Now())
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("db %s: no forwarding tables stored (a daemon reads them after discovery)", db)
		}
		if err != nil {
			return nil, fmt.Errorf("db %s: %w", db, err)
		}
		return fabric.NewRoutes(t, ft), nil
	}
	empty := ""
	src, t, _, _, err := openTopology(ctx, spec, topoFlags{loadCache: &loadCache, cache: &empty, db: &empty})
	if err != nil {
		return nil, err
	}
	defer src.Close()
	ft, err := src.ForwardingTables(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("forwarding tables: %w", err)
	}
	return fabric.NewRoutes(t, ft), nil
}

// writeAdvice prints the summary table.
func writeAdvice(w io.Writer, a *place.Advice) error {
	cores := map[int]int{}
	for _, n := range a.Nodes {
		cores[n.Cores]++
	}
	coreText := ""
	if len(cores) == 1 {
		coreText = fmt.Sprintf(" (%d cores each)", a.Nodes[0].Cores)
	}
	fmt.Fprintf(w, "job %s: %d ranks on %d nodes%s; advice from %s in %.2f s\n", a.Job, a.Ranks, len(a.Nodes), coreText, a.Method, a.Seconds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "placement\tinter-node bytes\tbytes x hops\theaviest link bytes\tnodes used\t")
	row := func(name string, c *place.Cost) {
		if c == nil {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t\n", name)
			return
		}
		var hl uint64
		if c.HeaviestLink != nil {
			hl = c.HeaviestLink.Bytes
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t\n", name, c.InterNodeBytes, c.ByteHops, hl, c.NodesUsed)
	}
	row("as ran", a.AsRan)
	row("advice", a.Advice)
	row("round-robin", a.RoundRobin)
	row("block", a.Block)
	row("random", a.Random)
	if err := tw.Flush(); err != nil {
		return err
	}
	if a.AsRanUnknown != "" {
		fmt.Fprintf(w, "as ran: unknown: %s\n", a.AsRanUnknown)
	}
	if a.PeersTruncated {
		fmt.Fprintln(w, "note: some ranks reported only their top peers; the traffic is a lower bound")
	}
	if a.NothingToGain {
		fmt.Fprintf(w, "nothing to gain: %s\n", a.Reason)
		return nil
	}
	for _, k := range []string{"as_ran", "round_robin"} {
		if g := a.Gain[k]; g != nil {
			fmt.Fprintf(w, "gain over %s: inter-node bytes %.1f%%, bytes x hops %.1f%%, heaviest link %.1f%%\n",
				strings.ReplaceAll(k, "_", " "), g.InterNodeBytes, g.ByteHops, g.HeaviestLink)
		}
	}
	return nil
}
