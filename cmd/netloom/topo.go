package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/netloom/netloom/internal/fabric/sim"
)

func runTopo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return subcommands(ctx, "topo", []command{
		{"gen", "generate topologies: gen fat-tree", topoGen},
	}, args, stdout, stderr)
}

func topoGen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return subcommands(ctx, "topo gen", []command{
		{"fat-tree", "write an ibsim net file of a 2- or 3-level fat tree", topoGenFatTree},
	}, args, stdout, stderr)
}

func topoGenFatTree(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("topo gen fat-tree", "--hosts N [--radix K] [--levels 2|3] [-o FILE]", `
Writes an ibsim / ibnetdiscover-format net file describing a fat tree of N
single-port hosts built from K-port switches: 2 levels (leaves and spines) or
3 (leaves, aggregation, core). Hosts are named so that a node name maps to
its adapter: host 17's adapter is "n17 HCA-1". The first entry is a host, so
ibsim attaches OpenSM and the diagnostic tools there.

Run it with:  ibsim -s FILE   and, under the umad2sim LD_PRELOAD,  opensm -s 0`, stderr)
	hosts := fs.Int("hosts", 0, "number of `hosts` (required)")
	radix := fs.Int("radix", 36, "switch `ports`")
	levels := fs.Int("levels", 0, "switch `levels`: 2 or 3 (default: the fewest that fit)")
	out := fs.String("o", "-", "output `file` (- for stdout)")
	if err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	if *hosts <= 0 {
		fmt.Fprintln(stderr, "netloom topo gen fat-tree: --hosts is required and must be positive")
		return errUsage
	}
	t, err := sim.GenerateFatTree(*hosts, *radix, *levels)
	if err != nil {
		return err
	}
	if *out == "-" {
		return sim.WriteNetfile(stdout, t)
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	err = sim.WriteNetfile(f, t)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", *out, err)
	}
	c := t.Counts()
	fmt.Fprintf(stderr, "wrote %s: %d hosts, %d switches, %d links\n", *out, c.CAs, c.Switches, c.Links)
	return nil
}
