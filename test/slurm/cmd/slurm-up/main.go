// Command slurm-up keeps a test Slurm cluster up for manual work: it
// prints the export line for clients and stops the cluster on Ctrl-C or
// SIGTERM.
//
//	go run ./test/slurm/cmd/slurm-up -nodes 3
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/netloom/netloom/test/slurm"
)

func main() {
	nodes := flag.Int("nodes", 3, "fake nodes n1..nN")
	cpus := flag.Int("cpus", 4, "CPUs per node")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := slurm.Start(ctx, slurm.Options{Nodes: *nodes, CPUs: *cpus})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer c.Stop()
	fmt.Printf("export SLURM_CONF=%s\n# nodes %v, logs in %s; Ctrl-C stops\n", c.Conf, c.Nodes, c.Dir)
	<-ctx.Done()
}
