// Package launch runs an MPI job with the Netloom agent preloaded: it
// finds which MPI the launcher belongs to, picks the matching agent
// library, and passes the library and the agent's settings to every rank
// the way that launcher forwards environment.
package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// MPI flavours, named as the agent libraries are (libnetloom-<mpi>.so);
// NCCL: a job whose ranks use NCCL without MPI (torchrun), profiled by the
// NCCL profiler plugin libnetloom-nccl.so alone.
const (
	OpenMPI = "ompi"
	MPICH   = "mpich"
	NCCL    = "nccl"
)

// Options say how to run a job.
type Options struct {
	Daemon   string        // NETLOOM_DAEMON host:port ("" lets the agent read the address file)
	Output   string        // NETLOOM_OUTPUT: offline profile directory
	Interval time.Duration // NETLOOM_INTERVAL (0: the agent's default)
	MPI      string        // ompi, mpich or auto/""
	Lib      string        // the agent library (default: found by FindLibrary)
	JobID    string        // NETLOOM_JOB_ID (default: generated unless the scheduler has one)
	Waits    bool          // NETLOOM_WAITS=1: the wait before each blocking collective, timed apart
	Trace    bool          // NETLOOM_TRACE=1: the replay trace netloom model needs, beside the profile (Output)
	// Physical turns Open MPI's monitoring on (unless the user set it):
	// the agent then also counts the messages the library sent, which the
	// daemon puts on the links (TrafficModel physical). Off by default: it
	// costs small messages a fifth to a third of their rate
	// (bench/agent/small.sh).
	Physical bool
	// NCCL also loads the NCCL profiler plugin (libnetloom-nccl.so, found
	// beside the MPI agent) into the ranks of an MPI job that uses NCCL:
	// NCCL_PROFILER_PLUGIN. A torchrun job gets it anyway.
	NCCL bool
	Env  []string // the environment (default os.Environ())
}

// Plan is the command to run and what was decided.
type Plan struct {
	MPI   string
	Lib   string
	JobID string
	Argv  []string
	Env   []string
	// Daemon is where the ranks' agents will send their reports, as the
	// agent finds it (agent/README.md, "Environment"), "" when nowhere;
	// DaemonFrom says how it was found (the flag, the environment, a
	// file) or why there is none.
	Daemon, DaemonFrom string
	Output             string // NETLOOM_OUTPUT, absolute ("" when none)
}

// Destination says where the ranks' reports go and why, as one line.
func (p *Plan) Destination() string {
	if p.Daemon == "" {
		return "reports to no daemon: " + p.DaemonFrom
	}
	return fmt.Sprintf("reports to %s (%s)", p.Daemon, p.DaemonFrom)
}

// daemonAddress finds the daemon's address as the agent does: NETLOOM_DAEMON,
// else the first line of NETLOOM_DAEMON_FILE, $XDG_RUNTIME_DIR/netloom/agent-address
// or /run/netloom/agent-address. The ranks read them where they run: on
// other nodes the file may differ.
func daemonAddress(env []string, flag bool) (addr, from string) {
	if v := getenv(env, "NETLOOM_DAEMON"); v != "" {
		if flag {
			return v, "--daemon"
		}
		return v, "NETLOOM_DAEMON in the environment"
	}
	var tried []string
	files := []string{getenv(env, "NETLOOM_DAEMON_FILE"), "", "/run/netloom/agent-address"}
	if x := getenv(env, "XDG_RUNTIME_DIR"); x != "" {
		files[1] = filepath.Join(x, "netloom", "agent-address")
	}
	for _, f := range files {
		if f == "" {
			continue
		}
		tried = append(tried, f)
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		line, _, _ := strings.Cut(string(b), "\n")
		if line = strings.TrimSpace(line); line != "" {
			return line, "the address file " + f + ", which the daemon writes; ranks on other nodes read their own"
		}
	}
	return "", "no --daemon, no NETLOOM_DAEMON, and no address in " + strings.Join(tried, ", ") + " (netloom serve writes it)"
}

// Prepare decides the MPI flavour, the library, the environment and the
// launcher's extra arguments for argv (launcher first).
func Prepare(ctx context.Context, opt Options, argv []string) (*Plan, error) {
	if len(argv) == 0 {
		return nil, errors.New("no launcher given (netloom run [options] -- mpirun -np 4 ./app)")
	}
	env := opt.Env
	if env == nil {
		env = os.Environ()
	}
	launcher := filepath.Base(argv[0])
	mpi := opt.MPI
	if mpi == "" || mpi == "auto" {
		var err error
		if mpi, err = Detect(ctx, argv, env); err != nil {
			return nil, err
		}
	}
	if mpi != OpenMPI && mpi != MPICH && mpi != NCCL {
		return nil, fmt.Errorf("--mpi %q: want ompi, mpich, nccl or auto", mpi)
	}
	lib := opt.Lib
	if lib == "" {
		var err error
		if lib, err = FindLibrary(mpi, env); err != nil {
			return nil, err
		}
	}
	abs, err := filepath.Abs(lib)
	if err != nil {
		return nil, fmt.Errorf("agent library %s: %w", lib, err)
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("agent library: %w", err)
	}
	p := &Plan{MPI: mpi, Lib: abs, JobID: opt.JobID}
	set := map[string]string{}
	// NCCL loads its profiler plugin from NCCL_PROFILER_PLUGIN (a path),
	// in every process that makes a communicator (docs/nccl.md).
	if mpi == NCCL {
		set["NCCL_PROFILER_PLUGIN"] = abs
	} else if opt.NCCL {
		plugin, err := FindLibrary(NCCL, append([]string{"NETLOOM_LIB_DIR=" + filepath.Dir(abs)}, env...))
		if err != nil {
			return nil, fmt.Errorf("--nccl: %w", err)
		}
		set["NCCL_PROFILER_PLUGIN"] = plugin
	}
	if opt.Daemon != "" {
		set["NETLOOM_DAEMON"] = opt.Daemon
	}
	if opt.Output != "" {
		out, err := filepath.Abs(opt.Output)
		if err != nil {
			return nil, fmt.Errorf("--output %s: %w", opt.Output, err)
		}
		set["NETLOOM_OUTPUT"] = out
		p.Output = out
	}
	if opt.Waits {
		set["NETLOOM_WAITS"] = "1"
	}
	if opt.Trace {
		if opt.Output == "" {
			return nil, errors.New("--trace writes the replay trace beside the profile: give --output DIR too")
		}
		set["NETLOOM_TRACE"] = "1"
	}
	// Under Open MPI the agent learns what the library really sends
	// (collectives as decomposed) from Open MPI's monitoring: with
	// --physical, turn it on, without its output, unless the user set it
	// (agent/README.md, "Physical traffic"). MPICH has no equivalent.
	if mpi == OpenMPI && opt.Physical && getenv(env, "OMPI_MCA_pml_monitoring_enable") == "" {
		set["OMPI_MCA_pml_monitoring_enable"] = "1"
	}
	if opt.Interval > 0 {
		set["NETLOOM_INTERVAL"] = strconv.FormatFloat(opt.Interval.Seconds(), 'f', -1, 64)
	}
	if p.JobID == "" && getenv(env, "SLURM_JOB_ID") == "" && getenv(env, "PBS_JOBID") == "" {
		p.JobID = getenv(env, "NETLOOM_JOB_ID")
		if p.JobID == "" {
			host, _ := os.Hostname()
			host, _, _ = strings.Cut(host, ".")
			p.JobID = fmt.Sprintf("%s-%d-%d", host, time.Now().Unix(), os.Getpid())
		}
	}
	if p.JobID != "" {
		set["NETLOOM_JOB_ID"] = p.JobID
	}
	p.Env = setenv(env, set)
	p.Daemon, p.DaemonFrom = daemonAddress(p.Env, opt.Daemon != "")
	if mpi == NCCL {
		// torchrun and its like start the ranks with their own
		// environment: NCCL_PROFILER_PLUGIN and NETLOOM_* reach them as
		// they are; nothing is preloaded.
		p.Argv = slices.Clone(argv)
		return p, nil
	}
	preload := abs
	if old := getenv(env, "LD_PRELOAD"); old != "" {
		preload += ":" + old
	}
	// The launcher itself is not preloaded: only the ranks get the agent.
	var extra []string
	switch {
	case launcher == "srun":
		if strings.Contains(preload, ",") {
			return nil, fmt.Errorf("LD_PRELOAD %q has a comma, which srun --export cannot pass", preload)
		}
		extra = []string{"--export=ALL,LD_PRELOAD=" + preload}
	case mpi == OpenMPI:
		extra = []string{"-x", "LD_PRELOAD=" + preload}
		for _, kv := range p.Env {
			if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "NETLOOM_") || k == "NCCL_PROFILER_PLUGIN" {
				extra = append(extra, "-x", k)
			}
		}
	default: // MPICH's Hydra passes the whole environment (-genvall is its default)
		extra = []string{"-genv", "LD_PRELOAD", preload}
	}
	p.Argv = append(append([]string{argv[0]}, extra...), argv[1:]...)
	return p, nil
}

// Detect tells Open MPI from MPICH by the launcher: its name, else what
// `LAUNCHER --version` says; for srun, by the libraries the program links.
func Detect(ctx context.Context, argv []string, env []string) (string, error) {
	name := filepath.Base(argv[0])
	switch {
	case name == "torchrun" || len(argv) > 2 && strings.HasPrefix(name, "python") && argv[1] == "-m" && argv[2] == "torch.distributed.run":
		return NCCL, nil
	case strings.HasSuffix(name, ".openmpi") || name == "orterun" || name == "prterun":
		return OpenMPI, nil
	case strings.HasSuffix(name, ".mpich") || strings.Contains(name, "hydra"):
		return MPICH, nil
	case name == "srun":
		prog := srunProgram(argv[1:])
		if prog == "" {
			return "", errors.New("srun: cannot find the program in the arguments to check which MPI it uses; pass --mpi ompi|mpich")
		}
		return detectProgram(ctx, prog, env)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return "", fmt.Errorf("launcher %s: %w", argv[0], err)
	}
	// mpirun may be an alternatives link to a named flavour.
	if real, err := filepath.EvalSymlinks(path); err == nil {
		base := filepath.Base(real)
		switch {
		case strings.HasSuffix(base, ".openmpi") || base == "orterun" || base == "opal_wrapper":
			return OpenMPI, nil
		case strings.HasSuffix(base, ".mpich") || strings.Contains(base, "hydra"):
			return MPICH, nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Env = env
	out, _ := cmd.CombinedOutput()
	return classify(string(out), path+" --version")
}

func classify(text, what string) (string, error) {
	switch {
	case strings.Contains(text, "Open MPI") || strings.Contains(text, "Open RTE") || strings.Contains(text, "libmpi.so.40") ||
		strings.Contains(text, "open-rte") || strings.Contains(text, "OpenRTE"):
		return OpenMPI, nil
	case strings.Contains(text, "HYDRA") || strings.Contains(text, "MPICH") || strings.Contains(text, "libmpich") ||
		strings.Contains(text, "libmpi.so.12"):
		return MPICH, nil
	}
	first, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	return "", fmt.Errorf("cannot tell which MPI %s is (it says %q); pass --mpi ompi|mpich", what, first)
}

// detectProgram reads the program's shared libraries with ldd.
func detectProgram(ctx context.Context, prog string, env []string) (string, error) {
	path, err := exec.LookPath(prog)
	if err != nil {
		return "", fmt.Errorf("program %s: %w", prog, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ldd", path)
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("ldd %s: %w; pass --mpi ompi|mpich", path, err)
	}
	return classify(string(out), "ldd "+path)
}

// srunValueOpts are srun's short options that take a separate value.
var srunValueOpts = map[string]bool{"-n": true, "-N": true, "-c": true, "-p": true, "-t": true, "-J": true, "-w": true,
	"-x": true, "-A": true, "-o": true, "-e": true, "-i": true, "-D": true, "-m": true, "-r": true, "-d": true, "-q": true,
	"-G": true, "-C": true, "-L": true, "-B": true, "-S": true, "-T": true, "-W": true}

// srunProgram finds the program among srun's arguments: the first that is
// not an option or an option's value. Long options are taken as --opt=value.
func srunProgram(args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			if i+1 < len(args) {
				return args[i+1]
			}
			return ""
		case strings.HasPrefix(a, "--"):
		case strings.HasPrefix(a, "-"):
			if srunValueOpts[a] {
				i++
			}
		default:
			return a
		}
	}
	return ""
}

// FindLibrary looks for libnetloom-<mpi>.so in $NETLOOM_LIB_DIR, next to
// the netloom binary (lib/ beside it, ../lib), and the usual prefixes.
func FindLibrary(mpi string, env []string) (string, error) {
	name := "libnetloom-" + mpi + ".so"
	var dirs []string
	if d := getenv(env, "NETLOOM_LIB_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	if exe, err := os.Executable(); err == nil {
		dir := filepath.Dir(exe)
		dirs = append(dirs, filepath.Join(dir, "lib"), filepath.Join(dir, "..", "lib"), filepath.Join(dir, "..", "lib", "netloom"))
	}
	dirs = append(dirs, "/usr/local/lib/netloom", "/usr/lib/netloom", "/usr/local/lib", "/usr/lib")
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("agent library %s not found in %s; build it (make build) or pass --lib", name, strings.Join(dirs, ", "))
}

// Run starts the plan and waits; it returns the job's exit status. An
// interrupt is passed on to the launcher, which stops its ranks.
func Run(ctx context.Context, p *Plan, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	cmd := exec.Command(p.Argv[0], p.Argv[1:]...)
	cmd.Env = p.Env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	if err := cmd.Start(); err != nil {
		return 127, fmt.Errorf("start %s: %w", p.Argv[0], err)
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
			}
		case <-done:
		}
	}()
	err := cmd.Wait()
	close(done)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee):
		if st, ok := ee.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			return 128 + int(st.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	return 1, fmt.Errorf("%s: %w", p.Argv[0], err)
}

func getenv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// setenv returns env with the given variables set (replaced, not repeated).
func setenv(env []string, set map[string]string) []string {
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; !ok {
			out = append(out, kv)
		}
	}
	for k, v := range set {
		out = append(out, k+"="+v)
	}
	return out
}
