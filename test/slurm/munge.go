package slurm

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Munge is a munged of its own (own key, socket, state) for tests that
// need MUNGE without a Slurm cluster. Clients reach it through Socket
// (libmunge's MUNGE_OPT_SOCKET, `munge --socket`).
type Munge struct {
	Dir    string
	Socket string
	cmd    *exec.Cmd
	done   chan struct{}
}

// MungeMissing returns why a munged cannot be started here ("" when it
// can).
func MungeMissing() string {
	if _, err := exec.LookPath("munged"); err != nil {
		if _, err := os.Stat("/usr/sbin/munged"); err != nil {
			return "munged not installed (Debian munge: scripts/install-deps.sh)"
		}
	}
	return ""
}

// StartMunge starts munged with a fresh random key in a new directory
// under dir ("" for the system's temporary directory) and returns once
// its socket exists. Other local users can reach the socket. The caller
// must Stop it.
func StartMunge(ctx context.Context, dir string) (*Munge, error) {
	if m := MungeMissing(); m != "" {
		return nil, fmt.Errorf("munged: %s", m)
	}
	d, err := os.MkdirTemp(dir, "netloom-munge-")
	if err != nil {
		return nil, fmt.Errorf("munged: scratch dir: %w", err)
	}
	// munged insists that nobody else may write to its socket's directory.
	if err := os.Chmod(d, 0o755); err != nil {
		return nil, fmt.Errorf("munged: %w", err)
	}
	key := make([]byte, 1024)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("munged: key: %w", err)
	}
	keyPath := filepath.Join(d, "munge.key")
	if err := os.WriteFile(keyPath, key, 0o400); err != nil {
		return nil, fmt.Errorf("munged: key: %w", err)
	}
	m := &Munge{Dir: d, Socket: filepath.Join(d, "munge.sock"), done: make(chan struct{})}
	logPath := filepath.Join(d, "munged.log")
	m.cmd = exec.Command("munged", "--foreground", "--force",
		"--socket="+m.Socket, "--key-file="+keyPath,
		"--pid-file="+filepath.Join(d, "munged.pid"),
		"--seed-file="+filepath.Join(d, "munged.seed"),
		"--log-file="+logPath)
	m.cmd.Dir = d
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := os.Create(filepath.Join(d, "munged.out"))
	if err != nil {
		return nil, fmt.Errorf("munged: %w", err)
	}
	defer out.Close()
	m.cmd.Stdout, m.cmd.Stderr = out, out
	if err := m.cmd.Start(); err != nil {
		os.RemoveAll(d)
		return nil, fmt.Errorf("munged: start: %w", err)
	}
	go func() { _ = m.cmd.Wait(); close(m.done) }()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		if _, err := os.Stat(m.Socket); err == nil {
			return m, nil
		}
		select {
		case <-m.done:
			log, _ := os.ReadFile(logPath)
			o, _ := os.ReadFile(filepath.Join(d, "munged.out"))
			m.Stop()
			return nil, fmt.Errorf("munged exited (%v):\n%s%s", m.cmd.ProcessState, lastLines(string(log), 12), lastLines(string(o), 12))
		case <-ctx.Done():
			m.Stop()
			return nil, fmt.Errorf("munged: no socket %s: %w", m.Socket, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop kills munged and removes its directory.
func (m *Munge) Stop() {
	if m.cmd != nil && m.cmd.Process != nil {
		_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-m.done:
		case <-time.After(5 * time.Second):
		}
	}
	_ = os.RemoveAll(m.Dir)
}
