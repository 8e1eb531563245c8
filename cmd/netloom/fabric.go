package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/netloom/netloom/internal/daemon"
	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/fabric/ib"
	"github.com/netloom/netloom/internal/store"
)

func fabricCmd() *cobra.Command {
	return group("fabric", "one-shot fabric commands: discover, sweep, route",
		fabricDiscoverCmd(), fabricSweepCmd(), fabricRouteCmd())
}

const sourceHelp = `The fabric is reached like the infiniband-diags tools reach it: through the
local umad device (so under ibsim, run with the umad2sim LD_PRELOAD and
IBSIM_SOCKNAME set), or a simulated fabric with --fabric sim:SPEC, or an
Ethernet fabric read over SNMP and LLDP with --fabric eth:FILE (FILE lists
the switches: docs/ethernet.md).

A known topology skips discovery, as the diags' --load-cache does:
--load-cache FILE reads an ibnetdiscover cache (ibnetdiscover --cache FILE,
or --cache FILE here), --db DB the topology a netloom daemon stored last.
--cache FILE discovers with libibnetdisc and writes the cache for later runs.

Without InfiniBand on this machine, a command that needs the fabric fails
and names what it can use instead (--fabric sim:SPEC, and for discover and
route --db DB, which gives route the daemon's stored forwarding tables too).`

// sourceFlags declares the options that say which fabric a command reaches
// and how it prints.
func sourceFlags(c *cobra.Command) (src *string, asJSON *bool) {
	src, asJSON = new(string), new(bool)
	c.Flags().StringVar(src, "fabric", daemon.DefaultFabric, "fabric `source`: ib, ib:CA:PORT, sim:SPEC or eth:FILE")
	c.Flags().BoolVar(asJSON, "json", false, "print JSON (documented in docs/cli.md)")
	completeFlag(c, "fabric", fabricSpecs...)
	return src, asJSON
}

// topoFlags say where a command's topology comes from.
type topoFlags struct {
	loadCache, cache, db *string
}

func topologyFlags(c *cobra.Command) topoFlags {
	tf := topoFlags{new(string), new(string), new(string)}
	f := c.Flags()
	f.StringVar(tf.loadCache, "load-cache", "", "read the topology from an ibnetdiscover cache `file` instead of discovering")
	f.StringVar(tf.cache, "cache", "", "discover, and write the topology to `file` as an ibnetdiscover cache")
	f.StringVar(tf.db, "db", "", "read the topology a netloom daemon stored last in `db` instead of discovering")
	return tf
}

// check reports conflicting topology flags as a usage error.
func (tf topoFlags) check(spec string) error {
	var set []string
	for _, f := range []struct {
		name string
		v    *string
	}{{"--load-cache", tf.loadCache}, {"--db", tf.db}, {"--cache", tf.cache}} {
		if *f.v != "" {
			set = append(set, f.name)
		}
	}
	if len(set) > 1 {
		return usagef("%s: choose one", strings.Join(set, " and "))
	}
	if *tf.cache != "" && !strings.HasPrefix(spec, "ib") {
		return usagef("--cache writes what libibnetdisc discovers; it needs --fabric ib, not %q", spec)
	}
	return nil
}

// known returns the topology the flags name without touching the fabric,
// with what it came from, or nil when the fabric must be discovered.
func (tf topoFlags) known(ctx context.Context) (t *fabric.Topology, from string, err error) {
	switch {
	case *tf.loadCache != "":
		t, err := ib.LoadCache(*tf.loadCache)
		return t, "cache " + *tf.loadCache, err
	case *tf.db != "":
		t, err := storedTopology(ctx, *tf.db)
		return t, "db " + *tf.db, err
	}
	return nil, "", nil
}

// storedTopology reads the newest topology a daemon stored in db.
func storedTopology(ctx context.Context, db string) (*fabric.Topology, error) {
	path := strings.TrimPrefix(strings.TrimPrefix(db, "sqlite://"), "sqlite:")
	if !strings.Contains(db, "://") || strings.HasPrefix(db, "sqlite:") {
		// Opening a store creates it; a mistyped path would give an empty one.
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("db %s: %w", db, err)
		}
	}
	st, err := daemon.OpenStore(ctx, db, "")
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
	return t, nil
}

// storedRouting reads the newest topology and forwarding tables a daemon
// stored in db.
func storedRouting(ctx context.Context, db string) (*fabric.Topology, fabric.ForwardingTables, error) {
	t, err := storedTopology(ctx, db)
	if err != nil {
		return nil, nil, err
	}
	st, err := daemon.OpenStore(ctx, db, "")
	if err != nil {
		return nil, nil, err
	}
	defer st.Close()
	ft, _, err := st.ForwardingTablesAt(ctx, time.Now())
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, fmt.Errorf("db %s: no forwarding tables stored (a daemon reads them after each discovery)", db)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("db %s: %w", db, err)
	}
	return t, ft, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// openTopology opens the fabric source and gets the topology the flags
// name, discovering it when they name none. It returns how long getting
// the topology took and where it came from.
func openTopology(ctx context.Context, spec string, tf topoFlags) (fabric.Source, *fabric.Topology, time.Duration, string, error) {
	start := time.Now()
	t, from, err := tf.known(ctx)
	if err != nil {
		return nil, nil, 0, "", err
	}
	took := time.Since(start)
	src, err := daemon.OpenSource(ctx, spec)
	if err != nil {
		// What every caller can use instead (netloom place and model too);
		// the fabric commands name their own.
		return nil, nil, 0, "", fabric.WithAlternatives(err, fabric.AltDB, fabric.AltSim)
	}
	if t != nil {
		return src, t, took, from, nil
	}
	start = time.Now()
	if *tf.cache != "" {
		ibSrc, ok := src.(*ib.Source)
		if !ok {
			src.Close()
			return nil, nil, 0, "", fmt.Errorf("--cache: fabric %q is no InfiniBand source", spec)
		}
		t, err = ibSrc.DiscoverCache(ctx, *tf.cache)
	} else {
		t, err = src.Discover(ctx)
	}
	if err != nil {
		src.Close()
		return nil, nil, 0, "", fmt.Errorf("discover: %w", err)
	}
	return src, t, time.Since(start), "discovery", nil
}

func fabricDiscoverCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "discover",
		Short: "discover the fabric once and print nodes and links",
		Long: `Discovers the fabric once and prints every node (GUID, LID, type, ports,
description) and every link (both ends, width, speed, state). With
--load-cache or --db it prints that topology and does not touch the fabric.

` + sourceHelp,
		Args:              posArgs(),
		ValidArgsFunction: noFiles,
	}
	spec, asJSON := sourceFlags(c)
	tf := topologyFlags(c)
	c.RunE = func(c *cobra.Command, _ []string) error {
		if err := tf.check(*spec); err != nil {
			return err
		}
		return fabricDiscover(c.Context(), c.OutOrStdout(), *spec, *asJSON, tf)
	}
	return c
}

func fabricDiscover(ctx context.Context, stdout io.Writer, spec string, asJSON bool, tf topoFlags) error {
	start := time.Now()
	t, from, err := tf.known(ctx)
	if err != nil {
		return err
	}
	took := time.Since(start)
	// An Ethernet source names its ports (ifName, the hosts' LLDP port IDs).
	var names map[fabric.PortRef]string
	if t == nil {
		var src fabric.Source
		if src, t, took, from, err = openTopology(ctx, spec, tf); err != nil {
			return fabric.WithAlternatives(err, fabric.AltLoadCache, fabric.AltDBTopo, fabric.AltSim)
		}
		if pn, ok := src.(interface {
			PortNames() map[fabric.PortRef]string
		}); ok {
			names = pn.PortNames()
		}
		src.Close()
	}
	if asJSON {
		out := map[string]any{"nodes": t.Nodes, "links": t.Links, "seconds": took.Seconds(), "from": from}
		if names != nil {
			byKey := make(map[string]string, len(names))
			for p, n := range names {
				byKey[p.String()] = n
			}
			out["port_names"] = byKey
		}
		return writeJSON(stdout, out)
	}
	c := t.Counts()
	verb := "discovered"
	if from != "discovery" {
		verb = "read from " + from
	}
	fmt.Fprintf(stdout, "# %d switches, %d channel adapters, %d links; %s in %.3fs\n", c.Switches, c.CAs, c.Links, verb, took.Seconds())
	for _, n := range t.Nodes {
		fmt.Fprintf(stdout, "%-6s %s lid %-5d ports %-3d %q\n", n.Type, n.GUID, n.LID, n.Ports, n.Description)
	}
	for _, l := range t.Links {
		fmt.Fprintf(stdout, "link %s[%d] - %s[%d] %s %s %s", l.A.GUID, l.A.Port, l.B.GUID, l.B.Port, l.Width, l.Speed, l.State)
		if names != nil {
			end := func(p fabric.PortRef) string {
				n, _ := t.Node(p.GUID)
				return n.Name() + ":" + names[p]
			}
			fmt.Fprintf(stdout, " (%s - %s)", end(l.A), end(l.B))
		}
		fmt.Fprintln(stdout)
	}
	return nil
}

// sweepFlags are fabric sweep's own options.
type sweepFlags struct {
	asJSON, counters, caPorts, allPorts, portCountersOnly bool
	timeout                                               time.Duration
	parallel                                              int
}

func fabricSweepCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "sweep",
		Short: "read all switch port counters once and print how long it took",
		Long: `Gets the topology (discovers the fabric, unless --load-cache or --db names
it), then reads the counters of every linked switch port once
(PortCountersExtended where supported, PortCounters for errors and XmitWait)
and prints how many ports were read, how many failed, and how long the sweep
took. With --counters, every port's raw values are printed too (data
counters in bytes). --port-counters-only reads PortCounters alone, as
ibqueryerrors does: the error counters and the 32-bit data and packet
counters, half the queries (no ClassPortInfo, no PortCountersExtended).

` + sourceHelp,
		Args:              posArgs(),
		ValidArgsFunction: noFiles,
	}
	spec, asJSON := sourceFlags(c)
	tf := topologyFlags(c)
	var o sweepFlags
	f := c.Flags()
	f.BoolVar(&o.counters, "counters", false, "print each port's counters")
	f.BoolVar(&o.caPorts, "ca-ports", false, "also read host adapter ports")
	f.BoolVar(&o.allPorts, "all-ports", false, "read every port of every switch, linked or not, as ibqueryerrors does (with --ca-ports: and every CA port with a LID)")
	f.BoolVar(&o.portCountersOnly, "port-counters-only", false, "read PortCounters alone (errors, 32-bit data counters), as ibqueryerrors does")
	f.DurationVar(&o.timeout, "timeout", 0, "per-query `timeout` (default 200ms)")
	f.IntVar(&o.parallel, "parallel", 0, "queries in flight (default 64)")
	c.RunE = func(c *cobra.Command, _ []string) error {
		if err := tf.check(*spec); err != nil {
			return err
		}
		o.asJSON = *asJSON
		return fabricSweep(c.Context(), c.OutOrStdout(), *spec, tf, o)
	}
	return c
}

func fabricSweep(ctx context.Context, stdout io.Writer, spec string, tf topoFlags, o sweepFlags) error {
	src, t, _, _, err := openTopology(ctx, spec, tf)
	if err != nil {
		// Counters come from the fabric whatever gives the topology.
		return fabric.WithAlternatives(err, fabric.AltSim)
	}
	defer src.Close()
	ports := t.SwitchPorts(o.caPorts)
	if o.allPorts {
		ports = t.AllPorts(o.caPorts)
	}
	start := time.Now()
	readings, err := src.Sweep(ctx, t, ports, fabric.SweepOptions{Timeout: o.timeout, Parallel: o.parallel, PortCountersOnly: o.portCountersOnly}.WithDefaults())
	took := time.Since(start)
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	type portJSON struct {
		GUID     fabric.GUID       `json:"guid"`
		Port     int               `json:"port"`
		Extended bool              `json:"extended"`
		Error    string            `json:"error,omitempty"`
		Counters map[string]uint64 `json:"counters,omitempty"`
	}
	failed := []portJSON{}
	var all []portJSON
	for _, r := range readings {
		p := portJSON{GUID: r.Port.GUID, Port: r.Port.Port, Extended: r.Extended}
		if r.Err != nil {
			p.Error = r.Err.Error()
			failed = append(failed, p)
		} else if o.counters {
			p.Counters = make(map[string]uint64, fabric.NumCounters)
			for c := fabric.Counter(0); c < fabric.NumCounters; c++ {
				p.Counters[fabric.CounterNames[c]] = r.V[c]
			}
		}
		if o.counters {
			all = append(all, p)
		}
	}
	if o.asJSON {
		out := map[string]any{"ports": len(readings), "errors": len(failed), "seconds": took.Seconds(), "failed": failed}
		if o.counters {
			out["counters"] = all
		}
		return writeJSON(stdout, out)
	}
	fmt.Fprintf(stdout, "swept %d ports (%d failed) in %.3fs\n", len(readings), len(failed), took.Seconds())
	for _, p := range failed {
		fmt.Fprintf(stdout, "failed %s:%d: %s\n", p.GUID, p.Port, p.Error)
	}
	for _, p := range all {
		if p.Error == "" {
			fmt.Fprintf(stdout, "%s:%d", p.GUID, p.Port)
			for c := fabric.Counter(0); c < fabric.NumCounters; c++ {
				fmt.Fprintf(stdout, " %s=%d", fabric.CounterNames[c], p.Counters[fabric.CounterNames[c]])
			}
			fmt.Fprintln(stdout)
		}
	}
	return nil
}

func fabricRouteCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "route SRC DST",
		Short: "print the route between two nodes, like ibtracert",
		Long: `Prints the path from SRC to DST hop by hop, like ibtracert: from SRC, it
reads the linear forwarding table entry for DST of each switch on the way
(one SMP per switch). SRC and DST are nodes by name ("n17", or the whole
node description), GUID (0x…), or LID (decimal). With --db it reads
nothing from the fabric: the topology and forwarding tables are those the
daemon stored last.

` + sourceHelp,
		Example:           `  netloom fabric route n1 n8 --json`,
		Args:              posArgs("SRC", "DST"),
		ValidArgsFunction: noFiles,
	}
	spec, asJSON := sourceFlags(c)
	tf := topologyFlags(c)
	c.RunE = func(c *cobra.Command, args []string) error {
		if err := tf.check(*spec); err != nil {
			return err
		}
		return fabricRoute(c.Context(), c.OutOrStdout(), *spec, *asJSON, tf, args[0], args[1])
	}
	return c
}

func fabricRoute(ctx context.Context, stdout io.Writer, spec string, asJSON bool, tf topoFlags, from, to string) error {
	var (
		t   *fabric.Topology
		ft  fabric.ForwardingTables
		err error
	)
	endpoints := func() (lids [2]fabric.LID, err error) {
		for i, key := range []string{from, to} {
			if lids[i], err = t.EndpointLID(key); err != nil {
				return lids, err
			}
		}
		return lids, nil
	}
	var lids [2]fabric.LID
	if *tf.db != "" {
		// The topology and forwarding tables the daemon stored: the fabric
		// is not touched.
		if t, ft, err = storedRouting(ctx, *tf.db); err != nil {
			return err
		}
		if lids, err = endpoints(); err != nil {
			return err
		}
	} else {
		src, topo, _, _, err := openTopology(ctx, spec, tf)
		if err != nil {
			// A cache holds no forwarding tables: only --db replaces the fabric.
			return fabric.WithAlternatives(err, fabric.AltDB, fabric.AltSim)
		}
		defer src.Close()
		t = topo
		if lids, err = endpoints(); err != nil {
			return err
		}
		if ibSrc, ok := src.(*ib.Source); ok {
			ft, err = ibSrc.RouteTables(ctx, t, lids[0], lids[1])
		} else {
			ft, err = src.ForwardingTables(ctx, t)
		}
		if err != nil {
			return fmt.Errorf("reading forwarding tables: %w", err)
		}
	}
	rt, err := fabric.NewRoutes(t, ft).Path(lids[0], lids[1])
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(stdout, rt)
	}
	return fabric.FormatRoute(stdout, rt)
}
