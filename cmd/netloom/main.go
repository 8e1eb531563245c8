// Command netloom monitors an HPC cluster's network fabric and the MPI jobs
// on it. This package only declares the command line (one cobra command
// tree, which also gives --help, shell completion and man pages); the work
// is in internal/.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/netloom/netloom/internal/fabric/ib"
)

// Exit statuses: a command line the commands cannot run is a usage error;
// anything that fails while running is a runtime error. `netloom run`
// exits with its job's status instead.
const (
	exitRuntime = 1
	exitUsage   = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Exit through the C library so the InfiniBand stack's exit handlers
	// run (under ibsim they give the fabric its client slot back).
	ib.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run runs the command line args and returns the process's exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), err)
	var ue *usageError
	if !errors.As(err, &ue) {
		return exitRuntime
	}
	if cmd.HasAvailableSubCommands() {
		fmt.Fprintf(stderr, "\n%s", cmd.UsageString())
	} else {
		fmt.Fprintf(stderr, "Usage: %s\nRun '%s --help' for the options.\n", cmd.UseLine(), cmd.CommandPath())
	}
	return exitUsage
}

// newRoot declares the whole command tree, reading and writing the streams given.
func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "netloom",
		Short: "InfiniBand fabric and MPI job monitoring",
		Long: `netloom — InfiniBand fabric and MPI job monitoring.

Netloom watches an HPC cluster's InfiniBand fabric and the MPI jobs running
on it together: topology, port traffic and errors, routes, per-job and
per-rank MPI communication, and which jobs load which links.

Options may come before or after arguments. Exit status: 0 on success, 1
when a command fails, 2 for a command line that cannot run (unknown
command or option, wrong arguments, bad option value); netloom run exits
with its job's status.`,
		Args:          groupArgs,
		RunE:          groupRun,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(flagError)
	// A group runs only to say a command is missing: show its commands,
	// not a usage line of its own.
	root.SetUsageTemplate(strings.Replace(root.UsageTemplate(), "{{if .Runnable}}", "{{if and .Runnable (not .HasAvailableSubCommands)}}", 1))
	root.AddCommand(
		serveCmd(),
		fabricCmd(),
		topoCmd(),
		loadgenCmd(),
		runCmd(),
		reportCmd(),
		placeCmd(),
		modelCmd(),
		storeCmd(),
		healthCmd(),
		userCmd(),
		tokenCmd(),
		manCmd(),
	)
	root.SetHelpCommand(helpCmd())
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Short = "print a shell completion script: bash, zsh, fish or powershell"
		}
	}
	usageErrors(root)
	return root
}

// usageErrors makes every command's argument errors usage errors, and
// groups (cobra's completion among them) refuse to run without a command.
func usageErrors(c *cobra.Command) {
	switch {
	case c.HasSubCommands() && !c.Runnable():
		c.Args, c.RunE = groupArgs, groupRun
	case c.Args != nil:
		check := c.Args
		c.Args = func(c *cobra.Command, args []string) error {
			err := check(c, args)
			var ue *usageError
			if err != nil && !errors.As(err, &ue) {
				return &usageError{err}
			}
			return err
		}
	}
	for _, s := range c.Commands() {
		usageErrors(s)
	}
}

// helpCmd is "netloom help COMMAND...": the command's --help, and a usage
// error for a command there is not.
func helpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "help about any command",
		Long:  "Prints the help of any command: netloom help fabric route is netloom fabric route --help.",
		ValidArgsFunction: func(c *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || len(rest) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []string
			for _, s := range cmd.Commands() {
				if s.IsAvailableCommand() {
					names = append(names, s.Name()+"\t"+s.Short)
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || len(rest) > 0 {
				return usagef("no command %q", strings.Join(append([]string{"netloom"}, args...), " "))
			}
			cmd.InitDefaultHelpFlag()
			return cmd.Help()
		},
	}
}

// group makes a command that only holds subcommands.
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, Args: groupArgs, RunE: groupRun}
	c.AddCommand(subs...)
	return c
}

// groupArgs refuses anything but a known subcommand after a group.
func groupArgs(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q", args[0])
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, " or "))
	}
	return &usageError{errors.New(msg)}
}

// groupRun is a group called without a subcommand.
func groupRun(c *cobra.Command, _ []string) error {
	return usagef("a command is required")
}

// usageError is a command line the commands cannot run.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return &usageError{fmt.Errorf(format, a...)} }

// exitError carries a job's exit status out of a command.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("job exited with status %d", e.code) }

var singleDash = regexp.MustCompile(`in -([a-z][a-z0-9-]+)$`)

// flagError makes an option the parser refused a usage error. Go's flag
// package took long options with one dash; say so to those who type them.
func flagError(c *cobra.Command, err error) error {
	if m := singleDash.FindStringSubmatch(err.Error()); m != nil && c.Flags().Lookup(m[1]) != nil {
		err = fmt.Errorf("%w (long options take two dashes: --%s)", err, m[1])
	}
	return &usageError{err}
}

// posArgs accepts exactly the positional arguments named.
func posArgs(names ...string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		switch {
		case len(args) < len(names):
			return usagef("missing %s", strings.Join(names[len(args):], " and "))
		case len(args) > len(names):
			return usagef("unexpected argument %q", args[len(names)])
		}
		return nil
	}
}

// enumValue is a string option with a fixed set of values, refused by the
// parser (a usage error naming the option) and offered by completion.
type enumValue struct {
	v       *string
	allowed []string
}

func (e enumValue) String() string { return *e.v }
func (e enumValue) Type() string   { return "string" }
func (e enumValue) Set(s string) error {
	for _, a := range e.allowed {
		if s == a {
			*e.v = s
			return nil
		}
	}
	return fmt.Errorf("want %s", orList(e.allowed))
}

// enumFlag declares an enumValue option and its completion.
func enumFlag(c *cobra.Command, p *string, name, value, usage string, allowed ...string) {
	*p = value
	c.Flags().Var(enumValue{p, allowed}, name, usage)
	_ = c.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(allowed, cobra.ShellCompDirectiveNoFileComp))
}

func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// completeFlag offers fixed values for an option that also takes others.
func completeFlag(c *cobra.Command, name string, values ...string) {
	_ = c.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp|cobra.ShellCompDirectiveNoSpace))
}

// noFiles makes completion offer nothing for a command's arguments.
var noFiles = cobra.NoFileCompletions

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return prefix + strings.Join(lines, "\n"+prefix) + "\n"
}
