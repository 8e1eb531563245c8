package slurm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/sched"
)

// script writes an executable shell script into dir.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// Accounting cannot be configured without slurmdbd and a database, so the
// sacct plumbing runs against scripts that print recorded output.
func TestJobsMergesSacct(t *testing.T) {
	dir := t.TempDir()
	sq, _ := filepath.Abs("testdata/squeue-23.11-shape.json")
	sa, _ := filepath.Abs("testdata/sacct-22.05-shape.json")
	args := filepath.Join(dir, "args")
	s, err := New(Config{
		Squeue:     script(t, dir, "squeue", `echo "$SLURM_CONF $*" >> `+args+`; cat `+sq),
		Sacct:      script(t, dir, "sacct", `echo "$SLURM_CONF $*" >> `+args+`; cat `+sa),
		Accounting: AccountingOn,
		Conf:       "/etc/x/slurm.conf",
		Users:      fakeUsers{},
	})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := s.Jobs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.ID+"/"+j.Source)
	}
	if got := strings.Join(ids, " "); got != "42/squeue 43/squeue 44/squeue 101/sacct 102/sacct" {
		t.Errorf("jobs %s", got)
	}
	b, _ := os.ReadFile(args)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || lines[0] != "/etc/x/slurm.conf --all --states=all --json" ||
		!strings.HasPrefix(lines[1], "/etc/x/slurm.conf --allusers --starttime=") || !strings.HasSuffix(lines[1], " --endtime=now --json") {
		t.Errorf("commands run:\n%s", b)
	}
	if !s.AccountingUsed() {
		t.Error("AccountingUsed false after sacct answered")
	}
}

func TestAccountingDisabled(t *testing.T) {
	dir := t.TempDir()
	sq, _ := filepath.Abs("testdata/squeue-22.05.json")
	calls := filepath.Join(dir, "calls")
	sacct := script(t, dir, "sacct", `echo x >> `+calls+`; echo "Slurm accounting storage is disabled"`)
	squeue := script(t, dir, "squeue", `cat `+sq)
	auto, err := New(Config{Squeue: squeue, Sacct: sacct})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if jobs, err := auto.Jobs(context.Background()); err != nil || len(jobs) != 11 {
			t.Fatalf("auto: %d jobs, %v", len(jobs), err)
		}
	}
	if b, _ := os.ReadFile(calls); strings.Count(string(b), "x") != 1 {
		t.Errorf("auto mode asked a disabled sacct %d times in a row, want once", strings.Count(string(b), "x"))
	}
	on, _ := New(Config{Squeue: squeue, Sacct: sacct, Accounting: AccountingOn})
	if _, err := on.Jobs(context.Background()); err == nil || !strings.Contains(err.Error(), "accounting is disabled") {
		t.Errorf("accounting=on with disabled accounting: %v", err)
	}
	off, _ := New(Config{Squeue: squeue, Sacct: filepath.Join(dir, "nonexistent"), Accounting: AccountingOff})
	if _, err := off.Jobs(context.Background()); err != nil {
		t.Errorf("accounting=off ran sacct: %v", err)
	}
}

func TestCommandErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, body string
		timeout    time.Duration
		want       string
	}{
		{"fails", `echo "slurm_load_jobs error: Unable to contact slurm controller" >&2; exit 1`, 0,
			"fails --all --states=all --json: exit status 1: slurm_load_jobs error: Unable to contact slurm controller"},
		{"hangs", `sleep 10`, 200 * time.Millisecond, "context deadline exceeded after 200ms"},
		{"garbage", `echo '<html>'`, 0, `squeue --json: not the expected JSON object`},
		{"stderr-only", `echo "squeue: error: Invalid Trackable RESource (TRES) specification" >&2`, 0, `output starts "squeue: error: Invalid`},
	} {
		s, err := New(Config{Squeue: script(t, dir, c.name, c.body), Accounting: AccountingOff, Timeout: c.timeout})
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		_, err = s.Jobs(context.Background())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
		if time.Since(t0) > 5*time.Second {
			t.Errorf("%s: took %s", c.name, time.Since(t0))
		}
	}
	if _, err := New(Config{Accounting: "maybe"}); err == nil {
		t.Error("accounting=maybe accepted")
	}
}

func TestFactory(t *testing.T) {
	r := sched.NewRegistry()
	if err := r.Register("slurm", Factory); err != nil {
		t.Fatal(err)
	}
	s, err := r.New("slurm:accounting=off,timeout=5s,window=2h,conf=/x/slurm.conf")
	if err != nil {
		t.Fatal(err)
	}
	sl := s.(*Slurm)
	if sl.cfg.Accounting != AccountingOff || sl.cfg.Timeout != 5*time.Second || sl.cfg.Window != 2*time.Hour || sl.cfg.Conf != "/x/slurm.conf" {
		t.Errorf("config %+v", sl.cfg)
	}
	for spec, want := range map[string]string{
		"slurm:acct=off":      `unknown option "acct"`,
		"slurm:timeout=soon":  `option timeout="soon"`,
		"slurm:accounting=no": `accounting "no": want auto, on or off`,
	} {
		if _, err := r.New(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", spec, err, want)
		}
	}
}
