package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
agents reported); cores per node to Slurm's CPUs per node, else the
node's own when it is this host (its CPU topology), else assumed: those
of a node the job ran on whose cores are known, else the most ranks the
job ran with on one node. The summary says where each count came from. A
node may hold as many ranks as the job ran with on it: beyond its cores
the advice says it oversubscribes the node (ranks share cores); a
rankfile's slots are always cores the node has.

The placement file (--format): openmpi, a rankfile for mpirun --rankfile;
mpich, a Hydra machine file for mpiexec -f; slurm, a host file for
SLURM_HOSTFILE with srun --distribution=arbitrary. With -o it is written to
FILE and the summary printed; without, the file goes to standard output and
the summary to standard error. --json prints the summary as JSON: the cost
(inter-node bytes, bytes x hops, heaviest link) of the job as it ran, the
advice, round-robin, block and random placements, the gains and the mapping.

On a traced profile (netloom run --trace) the summary adds the elapsed
times SimGrid predicts as it ran and as advised; when they cannot be
predicted (the nodes the job ran on are not on the fabric, the replay
fails) it says the prediction was skipped and why, and the advice stands.`,
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
	f.IntVar(&cores, "cores-per-node", 0, "cores per node (default: Slurm's, else the node's own if it is this host, else assumed from the job's nodes)")
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
		req, err := place.JobRequest(job, place.Options{Hostlist: nodes, CoresPerNode: cores, NodeCores: place.ThisHost(), Seed: seed})
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
		predicted, skipped, err := placePrediction(ctx, args[0], routes, nm, adv)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(c.OutOrStdout(), struct {
				*place.Advice
				Format            string          `json:"format"`
				File              string          `json:"file,omitempty"`
				Predicted         *placePredicted `json:"predicted,omitempty"`
				PredictionSkipped string          `json:"prediction_skipped,omitempty"`
			}{adv, format, out, predicted, skipped})
		}
		if err := writeAdvice(summary, adv); err != nil {
			return err
		}
		if predicted != nil {
			fmt.Fprintf(summary, "predicted elapsed (the trace replayed by SimGrid on the fabric, docs/model.md): as ran %.4f s, advice %.4f s (%+.1f%%); measured %.4f s\n",
				predicted.AsRan, predicted.Advice, 100*(predicted.Advice-predicted.AsRan)/predicted.AsRan, predicted.Measured)
			for _, w := range predicted.Warnings {
				fmt.Fprintf(summary, "predicted elapsed: warning: %s\n", w)
			}
		}
		if skipped != "" {
			fmt.Fprintf(summary, "predicted elapsed: skipped: %s\n", skipped)
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
	// Warnings is what makes the prediction less than it seems, as
	// netloom model says it (oversubscribed, far from the measured run,
	// cut traces): [] when nothing.
	Warnings []string `json:"warnings"`
}

// placePrediction replays a traced profile (netloom run --trace) as it
// ran and as advised. Neither a prediction nor a reason when the job is
// not a traced profile; when it is but cannot be replayed, the reason the
// prediction was skipped (the advice stands without it). The error is
// only the command's own (interrupted).
func placePrediction(ctx context.Context, arg string, routes *fabric.Routes, nm *analysis.NodeMap, adv *place.Advice) (*placePredicted, string, error) {
	if st, err := os.Stat(arg); err != nil || !st.IsDir() {
		return nil, "", nil
	}
	if !hasTraces(arg) {
		return nil, "", nil // no traces: the advice stands without a predicted time
	}
	job, loadWarnings, err := model.Load(arg)
	if err != nil {
		return nil, fmt.Sprintf("the traces cannot be read: %v", err), nil
	}
	if adv.AsRanUnknown != "" {
		return nil, "the replay needs the job as it ran on the fabric, and " + adv.AsRanUnknown, nil
	}
	advised, err := adv.NodesOf(job.Ranks)
	if err != nil {
		return nil, err.Error(), nil
	}
	hosts := model.Hosts(job.Nodes, advised)
	plat, err := model.FromRoutes("fabric", routes, hosts, model.Cores(job.Nodes, advised), nm.LID, model.DefaultHopLatency, model.DefaultLoopback)
	if err != nil {
		return nil, fmt.Sprintf("no SimGrid platform of the fabric for the job's nodes: %v", err), nil
	}
	res, err := model.Predict(ctx, job, model.Request{Platform: plat, HostOf: job.Nodes, Placement: advised, ElapsedOnly: true})
	if ctx.Err() != nil {
		return nil, "", ctx.Err()
	}
	if err != nil {
		return nil, fmt.Sprintf("the replay failed: %v", err), nil
	}
	if len(res.WhatIfs) == 0 {
		return nil, "the replay predicted no time for the advice", nil
	}
	warnings := slices.Concat([]string{}, loadWarnings, res.Warnings)
	return &placePredicted{Measured: res.Measured.Elapsed, AsRan: res.AsRan.Elapsed, Advice: res.WhatIfs[0].Elapsed, Warnings: warnings}, "", nil
}

// hasTraces says whether a profile directory (or the job directory in
// it) holds replay traces (netloom run --trace).
func hasTraces(dir string) bool {
	for _, pat := range []string{"rank-*.ti.gz", "*/rank-*.ti.gz"} {
		if m, _ := filepath.Glob(filepath.Join(dir, pat)); len(m) > 0 {
			return true
		}
	}
	return false
}

// routesAndNodeMap gets the routes (placeRoutes) and maps node names to
// host adapters on them, with a --node-map file's overrides when given.
func routesAndNodeMap(ctx context.Context, spec, loadCache, db, nodeMap string) (*fabric.Routes, *analysis.NodeMap, error) {
	routes, err := placeRoutes(ctx, spec, loadCache, db)
	if err != nil {
		return nil, nil, err
	}
	overrides, err := readNodeMap(nodeMap)
	if err != nil {
		return nil, nil, err
	}
	nm, err := analysis.NewNodeMap(routes.Topology(), overrides)
	return routes, nm, err
}

// readNodeMap reads a --node-map file's overrides ("": none).
func readNodeMap(path string) (map[string]string, error) {
	if path == "" {
		return nil, nil
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("node map: %w", err)
	}
	defer fh.Close()
	return analysis.ParseMapping(fh, path)
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
		coreText = fmt.Sprintf(" (%s each)", plural(a.Nodes[0].Cores, "core"))
	}
	fmt.Fprintf(w, "job %s: %s on %s%s; advice from %s in %.2f s\n", a.Job, plural(a.Ranks, "rank"), plural(len(a.Nodes), "node"), coreText, a.Method, a.Seconds)
	writeCoresFrom(w, a.Nodes)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "placement\tinter-node bytes\tbytes x hops\theaviest link bytes\tnodes used\t")
	row := func(name string, c *place.Cost) {
		if c == nil {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t\n", name)
			return
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t\n", name, c.InterNodeBytes, c.ByteHops, c.HeaviestBytes(), c.NodesUsed)
	}
	row("as ran", a.AsRan)
	row("advice", a.Advice)
	row("round-robin", a.RoundRobin)
	row("block", a.Block)
	row("random", a.Random)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "bytes x hops: every inter-node byte counted once for each link its route crosses (the load the placement puts on the fabric)")
	if a.AsRanUnknown != "" {
		fmt.Fprintf(w, "as ran: unknown: %s\n", a.AsRanUnknown)
	}
	for _, o := range a.AsRanOversubscribed {
		fmt.Fprintf(w, "as ran: oversubscribed: %s held %s on %s\n", o.Node, plural(o.Ranks, "rank"), plural(o.Cores, "core"))
	}
	for _, o := range a.Oversubscribed {
		fmt.Fprintf(w, "oversubscribed: %s holds %s on %s, as the job ran there (its ranks share cores; the rankfile names only cores it has)\n",
			o.Node, plural(o.Ranks, "rank"), plural(o.Cores, "core"))
	}
	if a.PeersTruncated {
		fmt.Fprintln(w, "note: some ranks reported only their top peers; the traffic is a lower bound")
	}
	if a.NothingToGain {
		fmt.Fprintf(w, "nothing to gain: %s\n", a.Reason)
		return nil
	}
	for _, than := range []struct {
		name string
		c    *place.Cost
	}{{"as ran", a.AsRan}, {"round-robin", a.RoundRobin}} {
		if a.Advice != nil && than.c != nil {
			fmt.Fprintf(w, "advice against %s: inter-node bytes %s, bytes x hops %s, heaviest link %s\n", than.name,
				change(than.c.InterNodeBytes, a.Advice.InterNodeBytes, analysis.FormatBytes),
				change(than.c.ByteHops, a.Advice.ByteHops, func(v uint64) string { return strconv.FormatUint(v, 10) }),
				change(than.c.HeaviestBytes(), a.Advice.HeaviestBytes(), analysis.FormatBytes))
		}
	}
	return nil
}

// change writes a figure going from before to after, and the sign of the
// change in words: "59.8 GB -> 120 GB (99.8% more)", "... (the same)".
func change(before, after uint64, text func(uint64) string) string {
	s := text(before) + " -> " + text(after)
	switch {
	case after == before:
		return s + " (the same)"
	case before == 0:
		return s + " (more)"
	case after > before:
		return s + fmt.Sprintf(" (%.1f%% more)", 100*float64(after-before)/float64(before))
	}
	return s + fmt.Sprintf(" (%.1f%% less)", 100*float64(before-after)/float64(before))
}

// plural writes n and the noun, in the plural unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// writeCoresFrom says where the nodes' cores came from: one line per
// count and source, naming at most five nodes.
func writeCoresFrom(w io.Writer, nodes []place.Node) {
	type key struct {
		cores int
		from  string
	}
	var order []key
	names := map[key][]string{}
	for _, n := range nodes {
		k := key{n.Cores, n.CoresFrom}
		if _, ok := names[k]; !ok {
			order = append(order, k)
		}
		names[k] = append(names[k], n.Name)
	}
	for _, k := range order {
		ns := names[k]
		list := strings.Join(ns[:min(len(ns), 5)], ", ")
		if len(ns) > 5 {
			list += fmt.Sprintf(" and %d more", len(ns)-5)
		}
		from := k.from
		if from == "" {
			from = "unknown"
		}
		fmt.Fprintf(w, "cores: %d on %s (%s)\n", k.cores, list, from)
	}
}
