// Command netloom monitors an HPC cluster's network fabric and the MPI jobs
// on it. This file only parses the command line; the work is in internal/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/netloom/netloom/internal/fabric/ib"
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"serve", "run the daemon: fabric monitoring, store, HTTP API and /metrics", runServe},
		{"fabric", "one-shot fabric commands: discover, sweep, route", runFabric},
		{"topo", "topology tools: gen fat-tree (ibsim net files)", runTopo},
		{"loadgen", "simulate a whole system's MPI jobs sending agent datagrams to a daemon", runLoadgen},
		{"run", "run an MPI job with the Netloom agent preloaded", runRun},
		{"report", "print an offline job profile (MPInside-style tables, CSV, JSON)", runReport},
		{"user", "manage local accounts: add, del, list", runUser},
		{"token", "manage API tokens for scripts: add, list, revoke", runToken},
	}
}

func usage(w io.Writer) {
	fmt.Fprintf(w, `netloom — InfiniBand fabric and MPI job monitoring

Usage: netloom COMMAND [options]

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'netloom COMMAND --help' for a command's options.\n")
}

// errUsage marks an error already explained by printed usage.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Exit through the C library so the InfiniBand stack's exit handlers
	// run (under ibsim they give the fabric its client slot back).
	ib.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			err := c.run(ctx, args[1:], stdout, stderr)
			switch {
			case err == nil:
				return 0
			case errors.Is(err, flag.ErrHelp):
				return 0
			case errors.Is(err, errUsage):
				return 2
			}
			if code, ok := exitCode(err); ok {
				return code
			}
			fmt.Fprintf(stderr, "netloom %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "netloom: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// newFlags makes a flag set whose --help prints a usage line, a
// description, and the options.
func newFlags(name, synopsis, about string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: netloom %s %s\n\n%s\n", name, synopsis, strings.TrimSpace(about))
		if hasFlags(fs) {
			fmt.Fprintf(stderr, "\nOptions:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// parse parses flags and checks the number of positional arguments.
func parse(fs *flag.FlagSet, args []string, minArgs, maxArgs int) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if n := fs.NArg(); n < minArgs || (maxArgs >= 0 && n > maxArgs) {
		fmt.Fprintf(fs.Output(), "netloom %s: wrong number of arguments\n", fs.Name())
		fs.Usage()
		return errUsage
	}
	return nil
}

// parseMixed is parse for commands whose options may also follow the
// positional arguments ("netloom user add NAME --admin"); "--" ends options.
func parseMixed(fs *flag.FlagSet, args []string, minArgs, maxArgs int) error {
	var pos []string
	for {
		if err := parse(fs, args, 0, -1); err != nil {
			return err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	return parse(fs, append([]string{"--"}, pos...), minArgs, maxArgs)
}

// subcommands dispatches "netloom GROUP SUB ...".
func subcommands(ctx context.Context, group string, subs []command, args []string, stdout, stderr io.Writer) error {
	list := func(w io.Writer) {
		fmt.Fprintf(w, "Usage: netloom %s SUBCOMMAND [options]\n\nSubcommands:\n", group)
		for _, c := range subs {
			fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
		}
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		list(stdout)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	for _, c := range subs {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "netloom %s: unknown subcommand %q\n", group, args[0])
	list(stderr)
	return errUsage
}
