// Package ibsim starts a real simulated InfiniBand fabric for tests and
// benchmarks: ibsim serves the fabric described by an ibnetdiscover-format
// net file, OpenSM (under umad2sim) assigns LIDs and routes, and any client
// run with Env talks to it as if it were local hardware.
package ibsim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Umad2sim is the preload library that redirects libibumad to ibsim.
const Umad2sim = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"

// Options tune Start. Zero values are fine for small fabrics.
type Options struct {
	// Nodes, Switches and Ports raise ibsim's table sizes (-N, -S, -P) for
	// big fabrics; 0 keeps ibsim's defaults (2048 nodes, 256 switches, 13312 ports).
	Nodes, Switches, Ports int
	// Timeout bounds each start-up step (ibsim ready, OpenSM master, routes
	// ready); default 60s.
	Timeout time.Duration
	// Dir is the scratch directory for sockets, logs and OpenSM's files;
	// default a new temporary directory, removed by Stop.
	Dir string
	// Keep leaves the scratch directory in place after Stop.
	Keep bool
}

// Fabric is a running simulated fabric. Methods are safe to call from
// several goroutines except Stop.
type Fabric struct {
	// Dir holds ibsim.log, opensm.out, opensm.log and OpenSM's cache.
	Dir string
	// SockName is this fabric's IBSIM_SOCKNAME.
	SockName string
	// FIFO is ibsim's console input.
	FIFO string

	ibsim, opensm *exec.Cmd
	console       *os.File // keeps ibsim's stdin open; nil when attached
	removeDir     bool
}

// Missing returns why a simulated fabric cannot run here ("" when it can):
// a missing binary or preload library.
func Missing() string {
	var miss []string
	for _, b := range []string{"ibsim", "opensm", "ibnetdiscover", "perfquery", "ibtracert"} {
		if _, err := exec.LookPath(b); err != nil {
			miss = append(miss, b)
		}
	}
	if _, err := os.Stat(Umad2sim); err != nil {
		miss = append(miss, Umad2sim)
	}
	if len(miss) == 0 {
		return ""
	}
	return "missing " + strings.Join(miss, ", ") + " (install ibsim-utils, opensm, infiniband-diags)"
}

// Start runs ibsim on netfile and OpenSM against it, and returns once
// routes are programmed. The caller must Stop the fabric.
func Start(ctx context.Context, netfile string, opt Options) (_ *Fabric, err error) {
	if m := Missing(); m != "" {
		return nil, fmt.Errorf("ibsim start %s: %s", netfile, m)
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 60 * time.Second
	}
	net, err := filepath.Abs(netfile)
	if err != nil {
		return nil, fmt.Errorf("ibsim start %s: %w", netfile, err)
	}
	if _, err := os.Stat(net); err != nil {
		return nil, fmt.Errorf("ibsim start: net file: %w", err)
	}
	f := &Fabric{Dir: opt.Dir}
	if f.Dir == "" {
		if f.Dir, err = os.MkdirTemp("", "netloom-ibsim-"); err != nil {
			return nil, fmt.Errorf("ibsim start %s: scratch dir: %w", netfile, err)
		}
		f.removeDir = !opt.Keep
	} else if err := os.MkdirAll(f.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("ibsim start %s: scratch dir: %w", netfile, err)
	}
	defer func() {
		if err != nil {
			f.Stop()
		}
	}()
	// Socket names are global to the machine; the temp dir's random
	// suffix makes ours unique without any shared counter.
	f.SockName = fmt.Sprintf("nl-%d-%s", os.Getpid(), strings.TrimPrefix(filepath.Base(f.Dir), "netloom-ibsim-"))
	f.FIFO = filepath.Join(f.Dir, "console")
	if err := syscall.Mkfifo(f.FIFO, 0o600); err != nil {
		return nil, fmt.Errorf("ibsim start %s: console fifo %s: %w", netfile, f.FIFO, err)
	}
	// O_RDWR opens without waiting for a reader and keeps a writer alive:
	// ibsim spins a core on a closed stdin.
	if f.console, err = os.OpenFile(f.FIFO, os.O_RDWR, 0); err != nil {
		return nil, fmt.Errorf("ibsim start %s: open console fifo: %w", netfile, err)
	}

	args := []string{"-s"}
	for _, s := range []struct {
		flag string
		v    int
	}{{"-N", opt.Nodes}, {"-S", opt.Switches}, {"-P", opt.Ports}} {
		if s.v > 0 {
			args = append(args, s.flag, strconv.Itoa(s.v))
		}
	}
	args = append(args, net)
	simLog := filepath.Join(f.Dir, "ibsim.log")
	if f.ibsim, err = f.spawn("ibsim", args, simLog, f.console, baseEnv("IBSIM_SOCKNAME="+f.SockName)); err != nil {
		return nil, fmt.Errorf("ibsim start %s: %w", netfile, err)
	}
	if err := waitLog(ctx, opt.Timeout, simLog, "Network simulator ready", f.ibsim); err != nil {
		return nil, fmt.Errorf("ibsim start %s: ibsim not ready: %w", netfile, err)
	}

	osmDir := filepath.Join(f.Dir, "opensm")
	if err := os.MkdirAll(osmDir, 0o755); err != nil {
		return nil, fmt.Errorf("ibsim start %s: %w", netfile, err)
	}
	osmOut := filepath.Join(f.Dir, "opensm.out")
	env := baseEnv(append(f.Env(), "OSM_TMP_DIR="+osmDir, "OSM_CACHE_DIR="+osmDir)...)
	if f.opensm, err = f.spawn("opensm", []string{"-s", "0", "-f", filepath.Join(f.Dir, "opensm.log")}, osmOut, nil, env); err != nil {
		return nil, fmt.Errorf("ibsim start %s: %w", netfile, err)
	}
	if err := waitLog(ctx, opt.Timeout, osmOut, "Entering MASTER state", f.opensm); err != nil {
		return nil, fmt.Errorf("ibsim start %s: OpenSM did not become master: %w\nibsim.log:\n%s", netfile, err, tail(simLog, 10))
	}
	if err := f.waitRoutes(ctx, opt.Timeout); err != nil {
		return nil, fmt.Errorf("ibsim start %s: routes not ready: %w\nopensm.out:\n%s", netfile, err, tail(osmOut, 10))
	}
	return f, nil
}

// spawn starts a daemon in its own process group with output to logPath.
func (f *Fabric) spawn(name string, args []string, logPath string, stdin *os.File, env []string) (*exec.Cmd, error) {
	out, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s log: %w", name, err)
	}
	defer out.Close() // the child holds its own copy
	cmd := exec.Command(name, args...)
	cmd.Dir = f.Dir
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = out, out
	if stdin != nil {
		cmd.Stdin = stdin
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s %s: %w", name, strings.Join(args, " "), err)
	}
	go func() { _ = cmd.Wait() }()
	return cmd, nil
}

// baseEnv is this process's environment without any umad2sim settings,
// plus extra.
func baseEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "LD_PRELOAD=") || strings.HasPrefix(kv, "IBSIM_SOCKNAME=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// waitLog polls a log file for a line containing want.
func waitLog(ctx context.Context, timeout time.Duration, path, want string, cmd *exec.Cmd) error {
	deadline := time.Now().Add(timeout)
	for {
		b, _ := os.ReadFile(path)
		if bytes.Contains(b, []byte(want)) {
			return nil
		}
		if exited(cmd) {
			return fmt.Errorf("%s exited before %q; %s:\n%s", cmd.Path, want, filepath.Base(path), tail(path, 15))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %q after %s; %s:\n%s", want, timeout, filepath.Base(path), tail(path, 15))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %q: %w", want, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func exited(cmd *exec.Cmd) bool {
	if cmd == nil || cmd.Process == nil {
		return false
	}
	// Signal 0 fails once the child is reaped by the Wait goroutine.
	return cmd.Process.Signal(syscall.Signal(0)) != nil
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// waitRoutes waits until ibtracert finds a path between two CA LIDs.
func (f *Fabric) waitRoutes(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		cas, sws, err := f.LIDs()
		if err == nil {
			var src, dst int
			switch {
			case len(cas) >= 2:
				src, dst = cas[0], cas[len(cas)-1]
			case len(cas) == 1 && len(sws) >= 1:
				src, dst = cas[0], sws[len(sws)-1]
			default:
				err = fmt.Errorf("OpenSM assigned %d CA and %d switch LIDs so far", len(cas), len(sws))
			}
			if err == nil {
				tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err = f.Run(tctx, "ibtracert", strconv.Itoa(src), strconv.Itoa(dst))
				cancel()
				if err == nil {
					return nil
				}
			}
		}
		last = err
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %w", timeout, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for routes: %w (last: %v)", ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// subnetEntry matches one end of a link in OpenSM's opensm-subnet.lst:
// "{ CA Ports:01 ... {n1 HCA-1} LID:0001 PN:01 }".
var subnetEntry = regexp.MustCompile(`\{ (CA|CA-SM|SW|SW-SM|Rt|RT) Ports:[^{}]*\{[^{}]*\} LID:([0-9A-Fa-f]+) `)

// LIDs returns the CA port LIDs and switch LIDs OpenSM assigned, sorted,
// from its opensm-subnet.lst (written once the subnet is up).
func (f *Fabric) LIDs() (cas, switches []int, err error) {
	path := filepath.Join(f.Dir, "opensm", "opensm-subnet.lst")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("OpenSM subnet list: %w", err)
	}
	seen := map[int]bool{}
	for _, m := range subnetEntry.FindAllSubmatch(b, -1) {
		l, err := strconv.ParseUint(string(m[2]), 16, 16)
		if err != nil || l == 0 || seen[int(l)] {
			continue
		}
		seen[int(l)] = true
		if strings.HasPrefix(string(m[1]), "CA") {
			cas = append(cas, int(l))
		} else if strings.HasPrefix(string(m[1]), "SW") {
			switches = append(switches, int(l))
		}
	}
	sort.Ints(cas)
	sort.Ints(switches)
	return cas, switches, nil
}

// Env is what a client process needs in its environment to reach this
// fabric (add it to os.Environ()).
func (f *Fabric) Env() []string {
	return []string{"LD_PRELOAD=" + Umad2sim, "IBSIM_SOCKNAME=" + f.SockName}
}

// Console sends one command line to ibsim's console (e.g.
// `Unlink "S-0000000000200000"[3]`, `PerformanceSet "sw"[1]
// PortCounters.SymbolErrorCounter=5`) and waits until ibsim has read it and
// printed its next prompt.
func (f *Fabric) Console(cmd string) error {
	_, err := f.ConsoleReply(cmd)
	return err
}

// ConsoleReply is Console that also returns what ibsim printed in answer,
// trimmed. ibsim refuses a command with a line starting with "#" (`# nodeid
// "x" (x) not found`) and still prints its prompt, so that is no error here;
// callers that care look at the reply.
func (f *Fabric) ConsoleReply(cmd string) (string, error) {
	if strings.ContainsAny(cmd, "\n\r") {
		return "", fmt.Errorf("ibsim console %q: one line only", cmd)
	}
	logPath := filepath.Join(f.Dir, "ibsim.log")
	text, _ := os.ReadFile(logPath)
	before, off := bytes.Count(text, prompt), len(text)
	w := f.console
	if w == nil {
		var err error
		if w, err = os.OpenFile(f.FIFO, os.O_WRONLY, 0); err != nil {
			return "", fmt.Errorf("ibsim console %q: %w", cmd, err)
		}
		defer w.Close()
	}
	if _, err := w.WriteString(cmd + "\n"); err != nil {
		return "", fmt.Errorf("ibsim console %q: %w", cmd, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		text, _ = os.ReadFile(logPath)
		if bytes.Count(text, prompt) > before {
			break
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("ibsim console %q: no prompt after 5s; ibsim.log:\n%s", cmd, tail(logPath, 10))
		}
		time.Sleep(5 * time.Millisecond)
	}
	reply := text[min(off, len(text)):]
	if i := bytes.Index(reply, prompt); i >= 0 {
		reply = reply[:i]
	}
	return strings.TrimSpace(string(reply)), nil
}

// prompt is what ibsim prints when it waits for the next console line.
var prompt = []byte("sim> ")

// Run runs a client tool (ibnetdiscover, perfquery, ...) against the fabric
// and returns its standard output.
func (f *Fabric) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	// umad2sim makes a ./sys-PID tree; keep it out of the caller's cwd.
	cmd.Dir = f.Dir
	cmd.Env = baseEnv(f.Env()...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, lastLines(stderr.String(), 5))
	}
	return stdout.Bytes(), nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// Stop kills OpenSM and ibsim and removes the scratch directory (unless
// Options.Keep or Dir was given). It is safe to call more than once.
func (f *Fabric) Stop() {
	for _, c := range []*exec.Cmd{f.opensm, f.ibsim} {
		if c == nil || c.Process == nil {
			continue
		}
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
		for i := 0; i < 40 && !exited(c); i++ {
			time.Sleep(25 * time.Millisecond)
		}
		if !exited(c) {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		}
	}
	f.opensm, f.ibsim = nil, nil
	if f.console != nil {
		f.console.Close()
		f.console = nil
	}
	if f.removeDir {
		_ = os.RemoveAll(f.Dir)
		f.removeDir = false
	}
}

// errNotChild is returned by Attach outside a TestMain child.
var errNotChild = errors.New("not running under ibsim.TestMain")
