package ethlab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// RunSpec is an MPI job across a lab's hosts.
type RunSpec struct {
	// Impl is "openmpi" (mpirun, rsh agent) or "mpich" (mpiexec.hydra,
	// launcher-exec).
	Impl string
	// Hosts are host names from the description; default every host.
	Hosts []string
	// RanksPerHost is the number of ranks on each host; default 1.
	RanksPerHost int
	// Argv is the program and its arguments (a path every namespace sees:
	// the namespaces share the file system).
	Argv []string
	// Env are "NAME=value" settings for the ranks only (LD_PRELOAD of an
	// agent library, NETLOOM_*), passed with -x (Open MPI) or -genv (MPICH).
	Env []string
	// Dir is the ranks' working directory; default the caller's.
	Dir string
	// LauncherArgs are extra arguments for mpirun / mpiexec, before Argv.
	LauncherArgs []string
}

// AgentScript is the remote-shell agent both launchers use (Open MPI's
// plm_rsh_agent, Hydra's -launcher-exec): "AGENT HOST CMD..." runs CMD in
// the namespace of HOST (a host's name, management or data address) under
// its own hostname.
func (l *Lab) AgentScript() string { return filepath.Join(l.Dir, "rsh-agent") }

// agentScript writes the remote-shell agent both launchers use: it
// skips ssh-style options, maps the host (management address or name) to
// its namespace and runs the command there under the host's own hostname.
func (l *Lab) agentScript() (string, error) {
	path := filepath.Join(l.Dir, "rsh-agent")
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# ethlab " + l.ID + ": run a launcher's remote command in a host namespace.\n")
	b.WriteString("while [ $# -gt 0 ]; do case \"$1\" in -l|-p|-o|-i) shift 2;; -*) shift;; *) break;; esac; done\n")
	b.WriteString("h=\"$1\"; shift\ncase \"$h\" in\n")
	for _, name := range l.order {
		n := l.nodes[name]
		if n.Kind != "host" {
			continue
		}
		fmt.Fprintf(&b, "  %s|%s|%s) ns=%s; name=%s;;\n", n.Name, n.MgmtIP, n.DataIP, n.NS, n.Name)
	}
	b.WriteString("  *) echo \"ethlab rsh-agent: unknown host $h\" >&2; exit 255;;\nesac\n")
	b.WriteString("exec ip netns exec \"$ns\" unshare --uts sh -c \"hostname $name; $*\"\n")
	// Written apart and renamed into place: launchers started at once
	// (two jobs of a test) each write it, and none may see it half
	// written or lose its temporary file to the other's rename.
	f, err := os.CreateTemp(l.Dir, "rsh-agent.*.tmp")
	if err != nil {
		return "", err
	}
	_, err = f.WriteString(b.String())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o700)
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return path, os.Rename(f.Name(), path)
}

// MPICommand returns the launcher command for spec without running it (for
// callers that want to stream or time it). The launcher runs in the root
// namespace; its out-of-band traffic uses the management network and the
// ranks' traffic the data fabric.
func (l *Lab) MPICommand(ctx context.Context, spec RunSpec) (*exec.Cmd, error) {
	if len(spec.Argv) == 0 {
		return nil, errors.New("ethlab: MPIRun: no program")
	}
	hosts := spec.Hosts
	if len(hosts) == 0 {
		for _, name := range l.order {
			if l.nodes[name].Kind == "host" {
				hosts = append(hosts, name)
			}
		}
	}
	rph := spec.RanksPerHost
	if rph <= 0 {
		rph = 1
	}
	var hl []string
	var dataIfs []string
	for _, h := range hosts {
		n, ok := l.HostOf(h)
		if !ok {
			return nil, fmt.Errorf("ethlab: MPIRun: no host %q", h)
		}
		if len(n.Ports) == 0 {
			return nil, fmt.Errorf("ethlab: MPIRun: host %s has no data link", h)
		}
		// Hosts by name: the launcher's node names then equal the ranks'
		// hostnames (the agent checks that the PMIx node map agrees).
		hl = append(hl, fmt.Sprintf("%s:%d", n.Name, rph))
		dataIfs = append(dataIfs, n.Ports[0])
	}
	agent, err := l.agentScript()
	if err != nil {
		return nil, err
	}
	np := strconv.Itoa(rph * len(hosts))
	var args []string
	var name string
	switch spec.Impl {
	case "openmpi", "ompi", "":
		name = "mpirun"
		args = []string{"--allow-run-as-root", "--oversubscribe",
			"--mca", "plm_rsh_agent", agent, "--mca", "plm_rsh_no_tree_spawn", "1",
			"--mca", "pml", "ob1", "--mca", "btl", "tcp,vader,self",
			"--mca", "btl_tcp_if_include", l.DataCIDR(), "--mca", "oob_tcp_if_include", l.MgmtCIDR(),
			"--host", strings.Join(hl, ","), "-np", np}
		if spec.Dir != "" {
			args = append(args, "--wdir", spec.Dir)
		}
		for _, e := range spec.Env {
			args = append(args, "-x", e)
		}
	case "mpich":
		name = "mpiexec.hydra"
		args = []string{"-launcher", "ssh", "-launcher-exec", agent, "-iface", l.MgmtBridge(),
			"-hosts", strings.Join(hl, ","), "-n", np,
			// UCX over TCP on the data interface only: never shared memory
			// between namespaces, never the management network.
			"-genv", "UCX_TLS", "tcp,self", "-genv", "UCX_NET_DEVICES", strings.Join(uniq(dataIfs), ",")}
		if spec.Dir != "" {
			args = append(args, "-wdir", spec.Dir)
		}
		for _, e := range spec.Env {
			k, v, _ := strings.Cut(e, "=")
			args = append(args, "-genv", k, v)
		}
	default:
		return nil, fmt.Errorf("ethlab: MPIRun: impl %q: want openmpi or mpich", spec.Impl)
	}
	args = append(args, spec.LauncherArgs...)
	args = append(args, spec.Argv...)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd, nil
}

func uniq(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// MPIRun runs an MPI job across the lab's hosts and returns its combined
// output. Give ctx a deadline: Debian's MPICH 4.0 over UCX 1.13's TCP
// transport (the only one that keeps ranks on different hosts off shared
// memory) sometimes hangs in MPI_Finalize after the job's work is done
// (openucx/ucx#8738, more often with several hosts or ranks per host); the
// deadline kills the launcher and its processes. The launcher is recorded in the lab's state so that Close and
// Sweep kill it if the caller dies.
func (l *Lab) MPIRun(ctx context.Context, spec RunSpec) ([]byte, error) {
	cmd, err := l.MPICommand(ctx, spec)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	mark := filepath.Join(l.Dir, "launch", strconv.Itoa(cmd.Process.Pid))
	if os.MkdirAll(filepath.Dir(mark), 0o700) == nil {
		_ = os.WriteFile(mark, nil, 0o600)
		defer os.Remove(mark)
	}
	err = cmd.Wait()
	if err != nil {
		return out.Bytes(), fmt.Errorf("ethlab: %s: %w\n%s", spec.Impl, err, out.Bytes())
	}
	return out.Bytes(), nil
}
