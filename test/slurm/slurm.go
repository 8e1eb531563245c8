// Package slurm starts a real Slurm cluster on one host for tests: its own
// munged, slurmctld and one `slurmd -N nX` per fake node, all on loopback
// with a private configuration, state and logs in a scratch directory.
// Clients reach it with Env (SLURM_CONF). It needs root (slurmd runs jobs
// as their owners).
package slurm

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// markerVar is put into the environment of every daemon and client the
// harness starts, so Stop can find job steps and tasks that left the
// daemons' process groups (slurmstepd starts its own session).
const markerVar = "NETLOOM_SLURM_CLUSTER"

// Options tune Start. Zero values give three nodes of 4 CPUs.
type Options struct {
	Nodes int // fake nodes n1..nN; default 3
	CPUs  int // CPUs per node (more than the host has is fine); default 4
	// NodePrefix names the nodes; default "n" (n1, n2, ...), matching
	// the HCA names of the test fabrics.
	NodePrefix string
	// MinJobAge is how long squeue keeps finished jobs; default 300s.
	MinJobAge time.Duration
	// MPIDefault is slurm.conf's MpiDefault; default "none" (use
	// `srun --mpi=pmix`).
	MPIDefault string
	// Extra lines are appended to slurm.conf (later settings win), e.g.
	// "PrivateData=jobs".
	Extra []string
	// Timeout bounds start-up; default 60s.
	Timeout time.Duration
	// Dir is the scratch directory; default a new temporary directory,
	// removed by Stop unless Keep.
	Dir  string
	Keep bool
}

// Cluster is a running Slurm cluster.
type Cluster struct {
	Dir       string   // slurm.conf, logs, state, spool
	Conf      string   // path of slurm.conf
	Nodes     []string // node names, n1..nN
	Partition string   // the one (default) partition
	// Shared is a world-writable (sticky) directory for job scripts and
	// output of jobs of any user.
	Shared      string
	MungeSocket string

	daemons   []*daemon
	removeDir bool
}

type daemon struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

// Missing returns why a cluster cannot run here ("" when it can).
func Missing() string {
	var miss []string
	for _, b := range []string{"munged", "slurmctld", "slurmd", "slurmstepd", "squeue", "sinfo", "srun", "sbatch", "scontrol", "runuser"} {
		if _, err := exec.LookPath(b); err != nil {
			if _, err := os.Stat("/usr/sbin/" + b); err != nil {
				miss = append(miss, b)
			}
		}
	}
	var why []string
	if len(miss) > 0 {
		why = append(why, "missing "+strings.Join(miss, ", ")+" (install slurmctld, slurmd, slurm-client, munge: scripts/install-deps.sh)")
	}
	if os.Geteuid() != 0 {
		why = append(why, "not root (slurmd must run jobs as their owners)")
	}
	return strings.Join(why, "; ")
}

// Start writes a configuration, starts munged, slurmctld and the slurmds,
// and returns once every node is idle. The caller must Stop the cluster.
func Start(ctx context.Context, opt Options) (*Cluster, error) {
	if m := Missing(); m != "" {
		return nil, fmt.Errorf("slurm cluster: %s", m)
	}
	if opt.Nodes <= 0 {
		opt.Nodes = 3
	}
	if opt.CPUs <= 0 {
		opt.CPUs = 4
	}
	if opt.NodePrefix == "" {
		opt.NodePrefix = "n"
	}
	if opt.MinJobAge <= 0 {
		opt.MinJobAge = 300 * time.Second
	}
	if opt.MPIDefault == "" {
		opt.MPIDefault = "none"
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 60 * time.Second
	}
	// Free ports are picked and then released, so another process can
	// take one in between: retry with fresh ones when a daemon says so.
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var c *Cluster
		c, err = start(ctx, opt)
		if err == nil {
			return c, nil
		}
		if !strings.Contains(err.Error(), "Address already in use") || ctx.Err() != nil {
			break
		}
	}
	return nil, err
}

func start(ctx context.Context, opt Options) (_ *Cluster, err error) {
	c := &Cluster{Dir: opt.Dir, Partition: "debug"}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "netloom-slurm-"); err != nil {
			return nil, fmt.Errorf("slurm cluster: scratch dir: %w", err)
		}
		c.removeDir = !opt.Keep
	} else if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("slurm cluster: scratch dir: %w", err)
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	// Other users' clients reach munge's socket and slurm.conf through
	// Dir; munged insists that nobody else may write there.
	if err := os.Chmod(c.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("slurm cluster: %w", err)
	}
	for i := 1; i <= opt.Nodes; i++ {
		c.Nodes = append(c.Nodes, opt.NodePrefix+strconv.Itoa(i))
	}
	c.Shared = filepath.Join(c.Dir, "shared")
	for _, d := range append([]string{"state", "shared"}, prefixed("tmp-", c.Nodes)...) {
		if err := os.MkdirAll(filepath.Join(c.Dir, d), 0o755); err != nil {
			return nil, fmt.Errorf("slurm cluster: %w", err)
		}
	}
	if err := os.Chmod(c.Shared, 0o1777); err != nil {
		return nil, fmt.Errorf("slurm cluster: %w", err)
	}

	// munged with its own key and socket: nothing shared with a system
	// munge that may or may not run.
	key := make([]byte, 1024)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("slurm cluster: munge key: %w", err)
	}
	keyPath := filepath.Join(c.Dir, "munge.key")
	if err := os.WriteFile(keyPath, key, 0o400); err != nil {
		return nil, fmt.Errorf("slurm cluster: munge key: %w", err)
	}
	c.MungeSocket = filepath.Join(c.Dir, "munge.sock")
	if err := c.spawn("munged", "munged.log", "munged", "--foreground", "--force",
		"--socket="+c.MungeSocket, "--key-file="+keyPath,
		"--pid-file="+filepath.Join(c.Dir, "munged.pid"),
		"--seed-file="+filepath.Join(c.Dir, "munged.seed"),
		"--log-file="+filepath.Join(c.Dir, "munged.log")); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opt.Timeout)
	defer cancel()
	if err := c.waitFor(ctx, "munged socket", func() (bool, string) {
		_, err := os.Stat(c.MungeSocket)
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		return nil, err
	}

	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("slurm cluster: hostname: %w", err)
	}
	host, _, _ = strings.Cut(host, ".")
	ports, err := freePorts(1 + opt.Nodes)
	if err != nil {
		return nil, fmt.Errorf("slurm cluster: %w", err)
	}
	c.Conf = filepath.Join(c.Dir, "slurm.conf")
	if err := os.WriteFile(c.Conf, []byte(c.config(host, ports, opt)), 0o644); err != nil {
		return nil, fmt.Errorf("slurm cluster: %w", err)
	}
	if err := c.spawn("slurmctld", "slurmctld.out", "slurmctld", "-D", "-i", "-f", c.Conf); err != nil {
		return nil, err
	}
	for _, n := range c.Nodes {
		if err := c.spawn("slurmd "+n, "slurmd-"+n+".out", "slurmd", "-D", "-N", n, "-f", c.Conf); err != nil {
			return nil, err
		}
	}
	if err := c.waitFor(ctx, "all nodes idle in sinfo", c.allIdle); err != nil {
		return nil, err
	}
	return c, nil
}

func prefixed(p string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = p + n
	}
	return out
}

// config is slurm.conf: everything in Dir, every daemon on 127.0.0.1,
// nodes declared with made-up CPUs (config_overrides lets slurmd accept
// them), no cgroups, no accounting.
func (c *Cluster) config(host string, ports []int, opt Options) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	d := c.Dir
	p("# Written by netloom test/slurm for a throwaway cluster.")
	p("ClusterName=netloom")
	p("SlurmctldHost=%s(127.0.0.1)", host)
	p("SlurmctldPort=%d", ports[0])
	p("SlurmUser=root")
	p("SlurmdUser=root")
	p("AuthType=auth/munge")
	p("CredType=cred/munge")
	p("AuthInfo=socket=%s", c.MungeSocket)
	p("StateSaveLocation=%s/state", d)
	p("SlurmdSpoolDir=%s/spool-%%n", d)
	p("SlurmctldPidFile=%s/slurmctld.pid", d)
	p("SlurmdPidFile=%s/slurmd-%%n.pid", d)
	p("SlurmctldLogFile=%s/slurmctld.log", d)
	p("SlurmdLogFile=%s/slurmd-%%n.log", d)
	p("TmpFS=%s/tmp-%%n", d)
	p("PlugStackConfig=%s/plugstack.conf", d)
	p("MpiDefault=%s", opt.MPIDefault)
	p("ProctrackType=proctrack/linuxproc")
	p("TaskPlugin=task/none")
	p("JobAcctGatherType=jobacct_gather/none")
	p("AccountingStorageType=accounting_storage/none")
	p("JobCompType=jobcomp/none")
	p("SelectType=select/cons_tres")
	p("SelectTypeParameters=CR_CPU")
	p("SchedulerType=sched/builtin")
	p("SlurmdParameters=config_overrides")
	p("ReturnToService=2")
	p("MinJobAge=%d", int(opt.MinJobAge.Seconds()))
	p("InactiveLimit=0")
	p("KillWait=1")
	p("MailProg=/bin/true")
	p("SlurmctldDebug=info")
	p("SlurmdDebug=info")
	for i, n := range c.Nodes {
		p("NodeName=%s NodeHostname=%s NodeAddr=127.0.0.1 Port=%d CPUs=%d RealMemory=1000 State=UNKNOWN",
			n, host, ports[1+i], opt.CPUs)
	}
	p("PartitionName=%s Nodes=%s Default=YES MaxTime=INFINITE State=UP", c.Partition, strings.Join(c.Nodes, ","))
	for _, l := range opt.Extra {
		p("%s", l)
	}
	return b.String()
}

// freePorts asks the kernel for n distinct free loopback TCP ports.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// spawn starts a daemon in its own process group with output to Dir/out.
func (c *Cluster) spawn(name, out, prog string, args ...string) error {
	logPath := filepath.Join(c.Dir, out)
	f, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("slurm cluster: %s log: %w", name, err)
	}
	defer f.Close() // the child holds its own copy
	cmd := exec.Command(prog, args...)
	cmd.Dir = c.Dir
	cmd.Env = c.env()
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("slurm cluster: start %s: %w", name, err)
	}
	d := &daemon{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(d.done) }()
	c.daemons = append(c.daemons, d)
	return nil
}

// Env is what a client needs on top of the usual environment: SLURM_CONF,
// and a marker by which Stop finds the client's job processes.
func (c *Cluster) Env() []string {
	return []string{"SLURM_CONF=" + c.Conf, markerVar + "=" + c.Dir}
}

// env is this process's environment without Slurm job variables (a test
// run inside a Slurm job must not leak its own job into this cluster),
// plus Env.
func (c *Cluster) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "SLURM_") || strings.HasPrefix(kv, markerVar+"=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, c.Env()...)
}

// Run runs a client command (squeue, srun, ...) as the calling user with
// Env, in Shared, and returns its combined output. A failure carries the
// output.
func (c *Cluster) Run(ctx context.Context, args ...string) ([]byte, error) {
	return c.RunAs(ctx, "", args...)
}

// RunAs runs a client command as another local user (through runuser);
// "" is the calling user.
func (c *Cluster) RunAs(ctx context.Context, user string, args ...string) ([]byte, error) {
	if len(args) == 0 {
		return nil, errors.New("slurm cluster: run: no command")
	}
	name, argv := args[0], args[1:]
	if user != "" {
		// runuser resets the environment: pass ours through env(1).
		argv = append(append([]string{"-u", user, "--", "env"}, c.Env()...), args...)
		name = "runuser"
	}
	cmd := exec.CommandContext(ctx, name, argv...)
	cmd.Dir = c.Shared
	cmd.Env = c.env()
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		who := ""
		if user != "" {
			who = " as " + user
		}
		return out, fmt.Errorf("%s%s: %w\n%s", strings.Join(args, " "), who, err, lastLines(string(out), 20))
	}
	return out, nil
}

// Sbatch submits a batch job as user ("" for the caller) and returns its
// id. args are sbatch options and the script or --wrap.
func (c *Cluster) Sbatch(ctx context.Context, user string, args ...string) (string, error) {
	out, err := c.RunAs(ctx, user, append([]string{"sbatch", "--parsable"}, args...)...)
	if err != nil {
		return "", err
	}
	id, _, _ := strings.Cut(strings.TrimSpace(lastLines(string(out), 1)), ";")
	if _, err := strconv.ParseUint(id, 10, 64); err != nil {
		return "", fmt.Errorf("sbatch %s: no job id in output %q", strings.Join(args, " "), out)
	}
	return id, nil
}

// JobState returns a job's state word as squeue prints it (RUNNING,
// COMPLETED...), "" once squeue has forgotten it.
func (c *Cluster) JobState(ctx context.Context, id string) (string, error) {
	out, err := c.Run(ctx, "squeue", "-h", "--states=all", "-j", id, "-o", "%T")
	if err != nil {
		if bytes.Contains(out, []byte("Invalid job id")) {
			return "", nil
		}
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// WaitState waits until job id is in one of states.
func (c *Cluster) WaitState(ctx context.Context, id string, states ...string) error {
	last := ""
	err := c.waitFor(ctx, fmt.Sprintf("job %s in state %s", id, strings.Join(states, "|")), func() (bool, string) {
		s, err := c.JobState(ctx, id)
		if err != nil {
			last = err.Error()
			return false, last
		}
		last = "state " + s
		for _, w := range states {
			if s == w {
				return true, last
			}
		}
		return false, last
	})
	return err
}

// allIdle reports whether sinfo shows every node idle.
func (c *Cluster) allIdle() (bool, string) {
	// Short: sinfo retries a controller that is not up yet for as long as
	// it is allowed to, and a dead daemon should be noticed soon.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out, err := c.Run(ctx, "sinfo", "-h", "-N", "-o", "%N %T")
	if err != nil {
		return false, err.Error()
	}
	idle := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[1] == "idle" {
			idle[f[0]] = true
		}
	}
	for _, n := range c.Nodes {
		if !idle[n] {
			return false, "sinfo:\n" + string(out)
		}
	}
	return true, ""
}

// waitFor polls cond until it holds, a daemon dies or ctx ends; errors
// carry cond's last word and the daemons' log tails.
func (c *Cluster) waitFor(ctx context.Context, what string, cond func() (bool, string)) error {
	delay := 20 * time.Millisecond
	for {
		for _, d := range c.daemons {
			select {
			case <-d.done:
				return fmt.Errorf("slurm cluster: waiting for %s: %s exited (%v)\n%s", what, d.name, d.cmd.ProcessState, c.Logs())
			default:
			}
		}
		ok, last := cond()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("slurm cluster: waiting for %s: %w; last: %s\n%s", what, ctx.Err(), last, c.Logs())
		case <-time.After(delay):
		}
		delay = min(2*delay, 250*time.Millisecond)
	}
}

// Logs returns the last lines of every daemon's logs.
func (c *Cluster) Logs() string {
	var b strings.Builder
	files, _ := filepath.Glob(filepath.Join(c.Dir, "*.log"))
	outs, _ := filepath.Glob(filepath.Join(c.Dir, "*.out"))
	for _, f := range append(files, outs...) {
		data, err := os.ReadFile(f)
		if err != nil || len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		fmt.Fprintf(&b, "--- %s:\n%s\n", f, lastLines(string(data), 12))
	}
	return b.String()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Stop kills every daemon, job step and task of the cluster and removes
// the scratch directory (unless kept). Safe on a partly started cluster.
func (c *Cluster) Stop() {
	for _, d := range c.daemons {
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
	}
	// Job steps (slurmstepd) and tasks run in sessions of their own;
	// they carry the marker in their environment.
	for i := 0; i < 20 && killMarked(c.Dir) > 0; i++ {
		time.Sleep(50 * time.Millisecond)
	}
	for _, d := range c.daemons {
		select {
		case <-d.done:
		case <-time.After(5 * time.Second):
		}
	}

	if c.removeDir {
		_ = os.RemoveAll(c.Dir)
	}
}

// killMarked SIGKILLs every process whose environment names dir as its
// cluster and returns how many it found.
func killMarked(dir string) int {
	want := []byte(markerVar + "=" + dir + "\x00")
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(append(env, 0), want) {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

// EnsureUser creates a local user for tests when it does not exist
// (useradd, no home directory) and returns its uid. Idempotent, also when
// several test processes race to create the same user.
func EnsureUser(ctx context.Context, name string) (uint32, error) {
	lookup := func() (uint32, error) {
		u, err := user.Lookup(name)
		if err != nil {
			return 0, err
		}
		uid, err := strconv.ParseUint(u.Uid, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("user %s: uid %q: %w", name, u.Uid, err)
		}
		return uint32(uid), nil
	}
	if uid, err := lookup(); err == nil {
		return uid, nil
	}
	out, err := exec.CommandContext(ctx, "useradd", "--no-create-home", "--shell", "/bin/sh", "--comment", "netloom test user", name).CombinedOutput()
	uid, lerr := lookup()
	if lerr != nil {
		return 0, fmt.Errorf("create test user %s: useradd: %v: %s", name, err, bytes.TrimSpace(out))
	}
	return uid, nil
}
