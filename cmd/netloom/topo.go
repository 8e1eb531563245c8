package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/netloom/netloom/internal/fabric/sim"
)

func topoCmd() *cobra.Command {
	return group("topo", "topology tools: gen fat-tree (ibsim net files)",
		group("gen", "generate topologies: gen fat-tree", topoGenFatTreeCmd()))
}

func topoGenFatTreeCmd() *cobra.Command {
	var hosts, radix, levels int
	var out string
	c := &cobra.Command{
		Use:   "fat-tree --hosts N",
		Short: "write an ibsim net file of a 2- or 3-level fat tree",
		Long: `Writes an ibsim / ibnetdiscover-format net file describing a fat tree of N
single-port hosts built from K-port switches: 2 levels (leaves and spines) or
3 (leaves, aggregation, core). Hosts are named so that a node name maps to
its adapter: host 17's adapter is "n17 HCA-1". The first entry is a host, so
ibsim attaches OpenSM and the diagnostic tools there.

Run it with:  ibsim -s FILE   and, under the umad2sim LD_PRELOAD,  opensm -s 0`,
		Example:           `  netloom topo gen fat-tree --hosts 648 -o fabric.net`,
		Args:              posArgs(),
		ValidArgsFunction: noFiles,
		RunE: func(c *cobra.Command, _ []string) error {
			if hosts <= 0 {
				return usagef("--hosts is required and must be positive")
			}
			if levels != 0 && levels != 2 && levels != 3 {
				return usagef("--levels %d: want 2 or 3", levels)
			}
			t, err := sim.GenerateFatTree(hosts, radix, levels)
			if err != nil {
				return err
			}
			if out == "-" {
				return sim.WriteNetfile(c.OutOrStdout(), t)
			}
			f, err := os.Create(out)
			if err != nil {
				return err
			}
			err = sim.WriteNetfile(f, t)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("writing %s: %w", out, err)
			}
			cnt := t.Counts()
			c.PrintErrf("wrote %s: %d hosts, %d switches, %d links\n", out, cnt.CAs, cnt.Switches, cnt.Links)
			return nil
		},
	}
	f := c.Flags()
	f.IntVar(&hosts, "hosts", 0, "number of `hosts` (required)")
	f.IntVar(&radix, "radix", 36, "switch `ports`")
	f.IntVar(&levels, "levels", 0, "switch `levels`: 2 or 3 (default: the fewest that fit)")
	f.StringVarP(&out, "output", "o", "-", "output `file` (- for stdout)")
	_ = c.RegisterFlagCompletionFunc("levels", cobra.FixedCompletions([]string{"2", "3"}, cobra.ShellCompDirectiveNoFileComp))
	return c
}
