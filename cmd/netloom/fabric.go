package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/netloom/netloom/internal/daemon"
	"github.com/netloom/netloom/internal/fabric"
)

func runFabric(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return subcommands(ctx, "fabric", []command{
		{"discover", "discover the fabric once and print nodes and links", fabricDiscover},
		{"sweep", "read all switch port counters once and print how long it took", fabricSweep},
		{"route", "print the route between two nodes, like ibtracert", fabricRoute},
	}, args, stdout, stderr)
}

const sourceHelp = `The fabric is reached like the infiniband-diags tools reach it: through the
local umad device (so under ibsim, run with the umad2sim LD_PRELOAD and
IBSIM_SOCKNAME set), or a simulated fabric with --fabric sim:SPEC.`

func sourceFlags(fs *flag.FlagSet) (src *string, asJSON *bool) {
	return fs.String("fabric", daemon.DefaultFabric, "fabric `source`: ib, ib:CA:PORT or sim:SPEC"),
		fs.Bool("json", false, "print JSON (documented in docs/cli.md)")
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// discoverWith opens a source and discovers the fabric.
func discoverWith(ctx context.Context, spec string) (fabric.Source, *fabric.Topology, time.Duration, error) {
	src, err := daemon.OpenSource(ctx, spec)
	if err != nil {
		return nil, nil, 0, err
	}
	start := time.Now()
	t, err := src.Discover(ctx)
	if err != nil {
		src.Close()
		return nil, nil, 0, fmt.Errorf("discover: %w", err)
	}
	return src, t, time.Since(start), nil
}

func fabricDiscover(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("fabric discover", "[--json] [--fabric SOURCE]", `
Discovers the fabric once and prints every node (GUID, LID, type, ports,
description) and every link (both ends, width, speed, state).

`+sourceHelp, stderr)
	spec, asJSON := sourceFlags(fs)
	if err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	src, t, took, err := discoverWith(ctx, *spec)
	if err != nil {
		return err
	}
	defer src.Close()
	if *asJSON {
		return writeJSON(stdout, map[string]any{"nodes": t.Nodes, "links": t.Links, "seconds": took.Seconds()})
	}
	c := t.Counts()
	fmt.Fprintf(stdout, "# %d switches, %d channel adapters, %d links; discovered in %.3fs\n", c.Switches, c.CAs, c.Links, took.Seconds())
	for _, n := range t.Nodes {
		fmt.Fprintf(stdout, "%-6s %s lid %-5d ports %-3d %q\n", n.Type, n.GUID, n.LID, n.Ports, n.Description)
	}
	for _, l := range t.Links {
		fmt.Fprintf(stdout, "link %s[%d] - %s[%d] %s %s %s\n", l.A.GUID, l.A.Port, l.B.GUID, l.B.Port, l.Width, l.Speed, l.State)
	}
	return nil
}

func fabricSweep(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("fabric sweep", "[--json] [--counters] [--fabric SOURCE]", `
Discovers the fabric, then reads the counters of every switch port once
(PortCountersExtended where supported, PortCounters for errors and XmitWait)
and prints how many ports were read, how many failed, and how long the sweep
took. With --counters, every port's raw values are printed too (data
counters in bytes).

`+sourceHelp, stderr)
	spec, asJSON := sourceFlags(fs)
	withCounters := fs.Bool("counters", false, "print each port's counters")
	caPorts := fs.Bool("ca-ports", false, "also read host adapter ports")
	timeout := fs.Duration("timeout", 0, "per-query `timeout` (default 200ms)")
	parallel := fs.Int("parallel", 0, "queries in flight (default 64)")
	if err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	src, t, _, err := discoverWith(ctx, *spec)
	if err != nil {
		return err
	}
	defer src.Close()
	ports := t.SwitchPorts(*caPorts)
	start := time.Now()
	readings, err := src.Sweep(ctx, t, ports, fabric.SweepOptions{Timeout: *timeout, Parallel: *parallel}.WithDefaults())
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
		} else if *withCounters {
			p.Counters = make(map[string]uint64, fabric.NumCounters)
			for c := fabric.Counter(0); c < fabric.NumCounters; c++ {
				p.Counters[fabric.CounterNames[c]] = r.V[c]
			}
		}
		if *withCounters {
			all = append(all, p)
		}
	}
	if *asJSON {
		out := map[string]any{"ports": len(readings), "errors": len(failed), "seconds": took.Seconds(), "failed": failed}
		if *withCounters {
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

func fabricRoute(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("fabric route", "[--json] [--fabric SOURCE] SRC DST", `
Reads the switches' linear forwarding tables and prints the path from SRC to
DST hop by hop, like ibtracert. SRC and DST are nodes by name ("n17", or the
whole node description), GUID (0x…), or LID (decimal).

`+sourceHelp, stderr)
	spec, asJSON := sourceFlags(fs)
	if err := parse(fs, args, 2, 2); err != nil {
		return err
	}
	src, t, _, err := discoverWith(ctx, *spec)
	if err != nil {
		return err
	}
	defer src.Close()
	var lids [2]fabric.LID
	for i, key := range fs.Args() {
		if lids[i], err = t.EndpointLID(key); err != nil {
			return err
		}
	}
	ft, err := src.ForwardingTables(ctx, t)
	if err != nil {
		return fmt.Errorf("reading forwarding tables: %w", err)
	}
	rt, err := fabric.NewRoutes(t, ft).Path(lids[0], lids[1])
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(stdout, rt)
	}
	return fabric.FormatRoute(stdout, rt)
}
