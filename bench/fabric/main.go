// Command fabric benchmarks Netloom's fabric side against the
// infiniband-diags baselines on the same ibsim fabric, in one run:
//
//   - sweep: `netloom fabric sweep` (all switch ports, data and error
//     counters) versus `perfquery -x -l LID 255` run once per switch, which is
//     what infiniband_exporter does;
//   - discovery: `netloom fabric discover` versus `ibnetdiscover`.
//
// It prints the times and their ratios. Usage:
//
//	go run ./bench/fabric --sizes small,stampede,large --netloom bin/netloom
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/fabric/sim"
	"github.com/netloom/netloom/test/ibsim"
)

type size struct {
	name string
	spec string
	opt  ibsim.Options
}

var sizes = map[string]size{
	"small":    {"small (~650 hosts)", "fat-tree:hosts=648,radix=36", ibsim.Options{}},
	"stampede": {"Stampede (6,541 hosts, 764 switches)", "stampede", ibsim.Options{Nodes: 16384, Switches: 2048, Ports: 80000}},
	"large":    {"large (11,664 hosts)", "fat-tree:hosts=11664,radix=36,levels=3", ibsim.Options{Nodes: 16384, Switches: 2048, Ports: 80000}},
}

func main() {
	which := flag.String("sizes", "small,stampede", "comma-separated fabric sizes: small, stampede, large")
	bin := flag.String("netloom", "bin/netloom", "netloom binary")
	runs := flag.Int("runs", 3, "sweeps to time per fabric (best is reported)")
	flag.Parse()
	abs, err := filepath.Abs(*bin)
	if err != nil {
		fail(err)
	}
	fmt.Printf("%-38s %10s %10s %8s   %10s %10s %8s\n", "fabric", "sweep", "baseline", "ratio", "discover", "ibnetdisc", "ratio")
	for _, name := range strings.Split(*which, ",") {
		sz, ok := sizes[name]
		if !ok {
			fail(fmt.Errorf("unknown size %q", name))
		}
		if err := benchOne(sz, abs, *runs); err != nil {
			fail(fmt.Errorf("%s: %w", name, err))
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench/fabric:", err)
	os.Exit(1)
}

func benchOne(sz size, bin string, runs int) error {
	sp, err := sim.ParseSpec(sz.spec)
	if err != nil {
		return err
	}
	ctx := context.Background()
	topo, _, err := sim.Generate(ctx, sp)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "netloom-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var buf bytes.Buffer
	if err := sim.WriteNetfile(&buf, topo); err != nil {
		return err
	}
	net := filepath.Join(dir, "fabric.net")
	if err := os.WriteFile(net, buf.Bytes(), 0o644); err != nil {
		return err
	}
	sz.opt.Timeout = 5 * time.Minute
	fmt.Fprintf(os.Stderr, "starting ibsim + OpenSM for %s ...\n", sz.name)
	f, err := ibsim.Start(ctx, net, sz.opt)
	if err != nil {
		return err
	}
	defer f.Stop()

	// Discovery, ours then the tool's; ours also gives the live LIDs
	// (ibsim and OpenSM assign their own GUIDs and LIDs).
	start := time.Now()
	out, err := f.Run(ctx, bin, "fabric", "discover", "--json")
	if err != nil {
		return err
	}
	disc := time.Since(start)
	var live struct{ Nodes []fabric.Node }
	if err := json.Unmarshal(out, &live); err != nil {
		return fmt.Errorf("discover output: %w", err)
	}
	start = time.Now()
	if _, err := f.Run(ctx, "ibnetdiscover"); err != nil {
		return err
	}
	ibnd := time.Since(start)

	// Our sweep: best of runs, as reported by the command (sweep only).
	best := time.Duration(1 << 62)
	var ports int
	for i := 0; i < runs; i++ {
		out, err := f.Run(ctx, bin, "fabric", "sweep", "--json")
		if err != nil {
			return err
		}
		var r struct {
			Ports, Errors int
			Seconds       float64
		}
		if err := json.Unmarshal(out, &r); err != nil {
			return fmt.Errorf("sweep output: %w", err)
		}
		if r.Errors > 0 {
			return fmt.Errorf("sweep: %d of %d ports failed", r.Errors, r.Ports)
		}
		ports = r.Ports
		best = min(best, time.Duration(r.Seconds*float64(time.Second)))
	}

	// Baseline: perfquery per switch, sequentially.
	start = time.Now()
	for _, n := range live.Nodes {
		if n.Type != fabric.Switch {
			continue
		}
		if _, err := f.Run(ctx, "perfquery", "-x", "-l", strconv.Itoa(int(n.LID)), "255"); err != nil {
			return err
		}
	}
	baseline := time.Since(start)
	fmt.Printf("%-38s %9.3fs %9.3fs %7.1fx   %9.3fs %9.3fs %7.2fx   (%d ports)\n", sz.name,
		best.Seconds(), baseline.Seconds(), baseline.Seconds()/best.Seconds(),
		disc.Seconds(), ibnd.Seconds(), ibnd.Seconds()/disc.Seconds(), ports)
	return nil
}
