package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// netloom runs the command line in this process.
func netloom(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), code
}

// simFabric is a small simulated fabric: no InfiniBand needed.
const simFabric = "sim:fat-tree:hosts=8,radix=8"

// commandPaths lists every command of the tree, hidden ones too, as argument lists.
func commandPaths() [][]string {
	root := newRoot(nil, nil, nil)
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, s := range c.Commands() {
			walk(s, append(append([]string{}, path...), s.Name()))
		}
	}
	walk(root, nil)
	return paths
}

func TestHelpAtEveryLevel(t *testing.T) {
	paths := commandPaths()
	if len(paths) < 25 {
		t.Fatalf("%d commands in the tree: %v", len(paths), paths)
	}
	for _, p := range paths {
		name := strings.Join(append([]string{"netloom"}, p...), " ")
		for _, how := range [][]string{append(append([]string{}, p...), "--help"), append(append([]string{}, p...), "-h"), append([]string{"help"}, p...)} {
			out, errOut, code := netloom(t, how...)
			if code != 0 || !strings.Contains(out, "Usage:") || !strings.Contains(out, name) || errOut != "" {
				t.Errorf("netloom %s: exit status %d, stderr %q; want 0 and usage of %q on stdout:\n%s", strings.Join(how, " "), code, errOut, name, out)
			}
		}
	}
}

func TestOptionsAfterArguments(t *testing.T) {
	for _, args := range [][]string{
		{"fabric", "route", "n1", "n8", "--json", "--fabric", simFabric},
		{"fabric", "route", "--json", "n1", "--fabric", simFabric, "n8"},
		{"fabric", "route", "--fabric=" + simFabric, "--json", "n1", "n8"},
	} {
		out, errOut, code := netloom(t, args...)
		if code != 0 {
			t.Fatalf("netloom %s: exit status %d: %s", strings.Join(args, " "), code, errOut)
		}
		var rt struct {
			Hops []struct{ Description string }
			To   struct{ Description string }
		}
		if err := json.Unmarshal([]byte(out), &rt); err != nil || len(rt.Hops) < 2 || rt.Hops[0].Description != "n1 HCA-1" || rt.To.Description != "n8 HCA-1" {
			t.Errorf("netloom %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// "--" ends the options: what follows is an argument, even with a dash.
	_, errOut, code := netloom(t, "fabric", "route", "--fabric", simFabric, "--", "n1", "-n8")
	if code != 1 || !strings.Contains(errOut, `"-n8"`) {
		t.Errorf("route after --: exit status %d: %s; want 1 naming the node -n8", code, errOut)
	}
	// Options after arguments: user add NAME --admin --users FILE.
	users := filepath.Join(t.TempDir(), "users")
	out, errOut, code := netloom(t, "user", "add", "ops", "--admin", "--users", users, "--groups", users+".groups")
	if code != 0 || !strings.Contains(out, "ops: admin") {
		t.Errorf("user add ops --admin: exit status %d: %s%s", code, out, errOut)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // in the message
	}{
		{nil, "a command is required"},
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"fabric"}, "a command is required"},
		{[]string{"fabric", "rout"}, `unknown command "rout" (did you mean route?)`},
		{[]string{"topo", "gen"}, "a command is required"},
		{[]string{"completion"}, "a command is required"},
		{[]string{"completion", "tcsh"}, `unknown command "tcsh"`},
		{[]string{"help", "bogus"}, `no command "netloom bogus"`},
		{[]string{"fabric", "route", "n1"}, "missing DST"},
		{[]string{"fabric", "route"}, "missing SRC and DST"},
		{[]string{"fabric", "route", "n1", "n2", "n3"}, `unexpected argument "n3"`},
		{[]string{"fabric", "discover", "extra"}, `unexpected argument "extra"`},
		{[]string{"fabric", "discover", "--nosuch"}, "unknown flag: --nosuch"},
		{[]string{"fabric", "route", "-json", "n1", "n2"}, "long options take two dashes: --json"},
		{[]string{"fabric", "sweep", "--timeout", "abc"}, `invalid argument "abc" for "--timeout" flag`},
		{[]string{"fabric", "sweep", "--parallel", "many"}, `"--parallel"`},
		{[]string{"fabric", "sweep", "--load-cache", "a", "--db", "b"}, "--load-cache and --db: choose one"},
		{[]string{"fabric", "discover", "--fabric", simFabric, "--cache", "x"}, "needs --fabric ib"},
		{[]string{"serve", "--log-level", "loud"}, `invalid argument "loud" for "--log-level" flag: want debug, info, warn or error`},
		{[]string{"serve", "--anonymous", "user"}, `"--anonymous"`},
		{[]string{"serve", "--listen"}, "flag needs an argument: --listen"},
		{[]string{"run"}, "missing LAUNCHER"},
		{[]string{"run", "--mpi", "lam", "--", "mpirun"}, `invalid argument "lam" for "--mpi" flag: want ompi, mpich, nccl or auto`},
		{[]string{"run", "--interval", "soon", "--", "mpirun"}, `"--interval"`},
		{[]string{"report"}, "missing DIR"},
		{[]string{"report", "a", "b"}, `unexpected argument "b"`},
		{[]string{"topo", "gen", "fat-tree"}, "--hosts is required"},
		{[]string{"topo", "gen", "fat-tree", "--hosts", "8", "--levels", "4"}, "--levels 4: want 2 or 3"},
		{[]string{"loadgen", "--duration", "long"}, `"--duration"`},
		{[]string{"loadgen", "--seed", "-1"}, `"--seed"`},
		{[]string{"user", "add"}, "missing NAME"},
		{[]string{"token", "revoke"}, "missing ID"},
		{[]string{"user", "list", "extra"}, `unexpected argument "extra"`},
		{[]string{"man"}, "missing DIR"},
		{[]string{"completion", "bash", "extra"}, `"extra"`},
	} {
		out, errOut, code := netloom(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, "Usage") {
			t.Errorf("netloom %s: exit status %d, stderr:\n%s\nwant 2, %q and the usage", strings.Join(c.args, " "), code, errOut, c.want)
		}
		if out != "" {
			t.Errorf("netloom %s: usage error printed on stdout: %q", strings.Join(c.args, " "), out)
		}
	}
}

func TestRuntimeErrorsExit1(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("listne: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"fabric", "route", "n1", "nosuch", "--fabric", simFabric}, `"nosuch"`},
		{[]string{"fabric", "discover", "--load-cache", filepath.Join(dir, "nosuch.cache")}, "nosuch.cache"},
		{[]string{"fabric", "discover", "--fabric", "sim:bogus"}, "bogus"},
		{[]string{"report", filepath.Join(dir, "noprofile")}, "noprofile"},
		{[]string{"serve", "--config", bad}, "listne"},
		{[]string{"user", "list", "--config", bad}, "listne"},
		{[]string{"token", "revoke", "nosuch", "--tokens", filepath.Join(dir, "tokens")}, "nosuch"},
		{[]string{"man", filepath.Join(bad, "sub")}, "bad.yaml"},
	} {
		_, errOut, code := netloom(t, c.args...)
		if code != 1 || !strings.Contains(errOut, c.want) || !strings.HasPrefix(errOut, "netloom ") || strings.Contains(errOut, "Usage") {
			t.Errorf("netloom %s: exit status %d, stderr %q; want 1 and a message naming %q, no usage", strings.Join(c.args, " "), code, errOut, c.want)
		}
	}
}

func TestCompletion(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		out, errOut, code := netloom(t, "completion", sh)
		if code != 0 || !strings.Contains(out, "netloom") || len(out) < 1000 {
			t.Errorf("completion %s: exit status %d, %d bytes: %s", sh, code, len(out), errOut)
		}
	}
	// The completions themselves, as the shell asks for them.
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", "fab"}, []string{"fabric"}},
		{[]string{"__complete", "fabric", ""}, []string{"discover", "route", "sweep"}},
		{[]string{"__complete", "fabric", "route", "--"}, []string{"--json", "--load-cache", "--fabric"}},
		{[]string{"__complete", "run", "--mpi", ""}, []string{"ompi", "mpich", "auto"}},
		{[]string{"__complete", "serve", "--log-level", ""}, []string{"debug", "warn"}},
		{[]string{"__complete", "serve", "--fabric", ""}, []string{"ib", "sim:stampede"}},
		{[]string{"__complete", "help", "fabric", ""}, []string{"route"}},
	} {
		out, _, code := netloom(t, c.args...)
		for _, w := range c.want {
			if code != 0 || !strings.Contains(out, w) {
				t.Errorf("netloom %s: exit status %d, want %q in:\n%s", strings.Join(c.args, " "), code, w, out)
			}
		}
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	script := filepath.Join(t.TempDir(), "netloom.bash")
	out, _, _ := netloom(t, "completion", "bash")
	if err := os.WriteFile(script, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := exec.Command(bash, "-c", "source "+script+" && complete -p netloom").CombinedOutput()
	if err != nil || !strings.Contains(string(got), "__start_netloom") {
		t.Errorf("bash could not load the completion: %v\n%s", err, got)
	}
}

func TestManPages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "man1")
	_, errOut, code := netloom(t, "man", dir)
	if code != 0 {
		t.Fatalf("man: exit status %d: %s", code, errOut)
	}
	// One page per command that is not hidden (help is cobra's, and has none).
	for _, p := range commandPaths() {
		if len(p) > 0 && (p[0] == "help" || strings.HasPrefix(p[len(p)-1], "__")) {
			continue
		}
		name := strings.Join(append([]string{"netloom"}, p...), "-")
		b, err := os.ReadFile(filepath.Join(dir, name+".1"))
		if err != nil {
			t.Errorf("no man page for %s: %v", name, err)
			continue
		}
		title := strings.ToUpper(name)
		if !strings.Contains(string(b), `.TH "`+title+`" "1"`) || !strings.Contains(string(b), "Netloom Manual") {
			t.Errorf("%s.1: no .TH header for %s:\n%.300s", name, title, b)
		}
	}
	page := filepath.Join(dir, "netloom-serve.1")
	b, _ := os.ReadFile(page)
	for _, want := range []string{"--sweep-interval", "fat-tree:hosts=N", "ib:CA:PORT"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("netloom-serve.1 lacks %q", want)
		}
	}
	groff, err := exec.LookPath("groff")
	if err != nil {
		t.Skip("no groff to render the pages with")
	}
	cmd := exec.Command(groff, "-man", "-Tutf8", "-ww", page)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil || errb.Len() > 0 {
		t.Fatalf("groff -man %s: %v\n%s", page, err, errb.String())
	}
	text := out.String()
	for _, want := range []string{"NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "--sweep-interval", "ib:CA:PORT    a given adapter"} {
		if !strings.Contains(stripOverstrike(text), want) {
			t.Errorf("rendered netloom-serve(1) lacks %q:\n%s", want, text)
		}
	}
}

// stripOverstrike removes the backspace bold and underline of nroff output.
func stripOverstrike(s string) string {
	var b strings.Builder
	r := []rune(s)
	for i := 0; i < len(r); i++ {
		if i+1 < len(r) && r[i+1] == '\b' {
			i++
			continue
		}
		b.WriteRune(r[i])
	}
	return strings.NewReplacer("\u2010", "-", "\u2212", "-").Replace(b.String())
}
