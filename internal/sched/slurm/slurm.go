// Package slurm learns jobs from Slurm through its command-line clients:
// `squeue --json` for pending, running and recently finished jobs, and
// `sacct --json` for older finished jobs when accounting is configured.
// Running the clients (rather than talking slurmrestd or the RPC protocol)
// needs nothing but a working Slurm client setup on the daemon's host.
package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/netloom/netloom/internal/sched"
)

// Accounting modes: whether Jobs also asks sacct.
const (
	AccountingAuto = "auto" // ask sacct; if Slurm says accounting is disabled, stop asking for a while
	AccountingOn   = "on"   // always ask; a disabled accounting is an error
	AccountingOff  = "off"  // squeue only
)

// Config says how to reach Slurm. Zero values are the defaults.
type Config struct {
	Squeue string // squeue command; default "squeue" on PATH
	Sacct  string // sacct command; default "sacct" on PATH
	// Accounting is auto (default), on or off.
	Accounting string
	// Window is how far back sacct looks for finished jobs; default 1h.
	Window time.Duration
	// Timeout bounds each command; default 30s.
	Timeout time.Duration
	// Conf is SLURM_CONF for the commands; "" inherits the environment.
	Conf string
	// Users resolves uids and names; nil uses this host's user database
	// (os/user), cached.
	Users Users
}

// Defaults.
const (
	DefaultWindow  = time.Hour
	DefaultTimeout = 30 * time.Second
	// recheckDisabled is how long auto mode trusts "accounting disabled".
	recheckDisabled = 10 * time.Minute
)

// Slurm is the Slurm scheduler. Safe for concurrent use.
type Slurm struct {
	cfg Config

	mu             sync.Mutex
	disabledUntil  time.Time // auto mode: skip sacct until then
	accountingSeen bool      // sacct answered with JSON at least once
}

// New checks cfg and returns a Slurm scheduler. It runs nothing yet.
func New(cfg Config) (*Slurm, error) {
	if cfg.Squeue == "" {
		cfg.Squeue = "squeue"
	}
	if cfg.Sacct == "" {
		cfg.Sacct = "sacct"
	}
	switch cfg.Accounting {
	case "":
		cfg.Accounting = AccountingAuto
	case AccountingAuto, AccountingOn, AccountingOff:
	default:
		return nil, fmt.Errorf("slurm: accounting %q: want auto, on or off", cfg.Accounting)
	}
	if cfg.Window < 0 || cfg.Timeout < 0 {
		return nil, fmt.Errorf("slurm: window %s, timeout %s: must not be negative", cfg.Window, cfg.Timeout)
	}
	if cfg.Window == 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Users == nil {
		cfg.Users = &SystemUsers{}
	}
	return &Slurm{cfg: cfg}, nil
}

// Factory builds a Slurm scheduler from spec options; register it as
// "slurm". Options: squeue, sacct (commands), accounting (auto, on, off),
// window and timeout (durations) and conf (SLURM_CONF), e.g.
// "slurm:accounting=off,timeout=10s,conf=/etc/slurm/slurm.conf".
func Factory(opts sched.Options) (sched.Scheduler, error) {
	if err := opts.Check("squeue", "sacct", "accounting", "window", "timeout", "conf"); err != nil {
		return nil, err
	}
	cfg := Config{
		Squeue:     opts.String("squeue", ""),
		Sacct:      opts.String("sacct", ""),
		Accounting: opts.String("accounting", ""),
		Conf:       opts.String("conf", ""),
	}
	var err error
	if cfg.Window, err = opts.Duration("window", DefaultWindow); err != nil {
		return nil, err
	}
	if cfg.Timeout, err = opts.Duration("timeout", DefaultTimeout); err != nil {
		return nil, err
	}
	return New(cfg)
}

// Name returns "slurm".
func (s *Slurm) Name() string { return "slurm" }

// Jobs returns squeue's jobs, plus sacct's finished jobs that squeue no
// longer shows when accounting is used. squeue wins for jobs both report:
// it is the controller's live view.
func (s *Slurm) Jobs(ctx context.Context) ([]sched.Job, error) {
	out, err := s.run(ctx, s.cfg.Squeue, "--all", "--states=all", "--json")
	if err != nil {
		return nil, err
	}
	jobs, err := ParseSqueue(out, s.cfg.Users)
	if err != nil {
		return nil, err
	}
	acct, err := s.accounting(ctx)
	if err != nil {
		return nil, err
	}
	if len(acct) == 0 {
		return jobs, nil
	}
	seen := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		seen[j.ID] = true
	}
	for _, j := range acct {
		if !seen[j.ID] {
			jobs = append(jobs, j)
		}
	}
	return jobs, nil
}

// accounting asks sacct for the jobs of the last Window, per the mode.
func (s *Slurm) accounting(ctx context.Context) ([]sched.Job, error) {
	if s.cfg.Accounting == AccountingOff {
		return nil, nil
	}
	s.mu.Lock()
	skip := s.cfg.Accounting == AccountingAuto && time.Now().Before(s.disabledUntil)
	s.mu.Unlock()
	if skip {
		return nil, nil
	}
	since := time.Now().Add(-s.cfg.Window).Format("2006-01-02T15:04:05")
	out, err := s.run(ctx, s.cfg.Sacct, "--allusers", "--starttime="+since, "--endtime=now", "--json")
	if disabled(out, err) {
		if s.cfg.Accounting == AccountingOn {
			return nil, fmt.Errorf("%s: accounting is disabled in slurm.conf (AccountingStorageType), but accounting=on", s.cfg.Sacct)
		}
		s.mu.Lock()
		s.disabledUntil = time.Now().Add(recheckDisabled)
		s.mu.Unlock()
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	jobs, err := ParseSacct(out, s.cfg.Users)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.accountingSeen = true
	s.mu.Unlock()
	return jobs, nil
}

// AccountingUsed reports whether sacct has answered with jobs data.
func (s *Slurm) AccountingUsed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accountingSeen
}

// disabled recognizes sacct's answer on a cluster without slurmdbd; 22.05
// prints it and exits 0.
func disabled(out []byte, err error) bool {
	const msg = "accounting storage is disabled"
	var ce *cmdError
	return bytes.Contains(out, []byte(msg)) || (errors.As(err, &ce) && strings.Contains(ce.stderr, msg))
}

// cmdError is a failed Slurm command with its stderr.
type cmdError struct {
	cmd    string
	err    error
	stderr string
}

func (e *cmdError) Error() string {
	if e.stderr == "" {
		return fmt.Sprintf("%s: %v", e.cmd, e.err)
	}
	return fmt.Sprintf("%s: %v: %s", e.cmd, e.err, e.stderr)
}

func (e *cmdError) Unwrap() error { return e.err }

// run runs a Slurm client with the configured SLURM_CONF and timeout, and
// returns its stdout. stderr lands in the error, and also in the output
// check for messages 22.05 prints there while exiting 0.
func (s *Slurm) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if s.cfg.Conf != "" {
		cmd.Env = append(os.Environ(), "SLURM_CONF="+s.cfg.Conf)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 2 * time.Second
	line := name + " " + strings.Join(args, " ")
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("%w after %s", ctx.Err(), s.cfg.Timeout)
		}
		return stdout.Bytes(), &cmdError{cmd: line, err: err, stderr: strings.TrimSpace(string(tailBytes(stderr.Bytes(), 500)))}
	}
	if stdout.Len() == 0 && stderr.Len() > 0 {
		// Not JSON at all: hand the message on to the caller's checks.
		return stderr.Bytes(), nil
	}
	return stdout.Bytes(), nil
}

func tailBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// SystemUsers resolves users through os/user, remembering answers
// (including misses) for an hour so that a poll does not hit NSS per job.
type SystemUsers struct {
	mu    sync.Mutex
	names map[uint32]cached
	uids  map[string]cachedUID
}

type cached struct {
	name string
	ok   bool
	at   time.Time
}

type cachedUID struct {
	uid uint32
	ok  bool
	at  time.Time
}

const userCacheTTL = time.Hour

// Name returns uid's login name.
func (u *SystemUsers) Name(uid uint32) (string, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if c, ok := u.names[uid]; ok && time.Since(c.at) < userCacheTTL {
		return c.name, c.ok
	}
	var c cached
	if usr, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		c = cached{name: usr.Username, ok: true}
	}
	c.at = time.Now()
	if u.names == nil {
		u.names = map[uint32]cached{}
	}
	u.names[uid] = c
	return c.name, c.ok
}

// UID returns name's uid.
func (u *SystemUsers) UID(name string) (uint32, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if c, ok := u.uids[name]; ok && time.Since(c.at) < userCacheTTL {
		return c.uid, c.ok
	}
	var c cachedUID
	if usr, err := user.Lookup(name); err == nil {
		if n, err := strconv.ParseUint(usr.Uid, 10, 32); err == nil {
			c = cachedUID{uid: uint32(n), ok: true}
		}
	}
	c.at = time.Now()
	if u.uids == nil {
		u.uids = map[string]cachedUID{}
	}
	u.uids[name] = c
	return c.uid, c.ok
}
