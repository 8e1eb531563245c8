package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDemo runs scripts/demo.sh (what `make demo` runs after building) on
// a small fabric, reads the banner it prints, waits for its traced job to
// end and runs every command the banner offers for it (report, model,
// place, health, the what-ifs through the API), each checked for what it
// claims to answer; then stops the demo as a person does, with Ctrl-C,
// and checks it ends cleanly (status 0) with its daemon gone.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a fabric, a daemon and MPI jobs")
	}
	for _, tool := range []string{"ibsim", "opensm", "mpicc", "mpirun", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not on PATH", tool)
		}
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// The script runs bin/netloom and the agent library, as make builds them.
	for _, c := range [][]string{{"go", "build", "-o", "bin/netloom", "./cmd/netloom"}, {"make", "-s", "-C", "agent"}} {
		cmd := exec.Command(c[0], c[1:]...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	free := func(network string) string {
		if network == "udp" {
			c, err := net.ListenPacket("udp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			return c.LocalAddr().String()
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	listen, agent, dir := free("tcp"), free("udp"), t.TempDir()

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "scripts/demo.sh")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "DEMO_HOSTS=16", "DEMO_LISTEN="+listen, "DEMO_AGENT="+agent, "DEMO_DIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		}
	}()

	// The banner: "  name:   command" lines, up to "Press Ctrl-C to stop.".
	var banner []string
	r := bufio.NewReader(stdout)
	for {
		line, err := r.ReadString('\n')
		banner = append(banner, strings.TrimRight(line, "\n"))
		if strings.Contains(line, "Press Ctrl-C to stop.") {
			break
		}
		if err != nil {
			t.Fatalf("the demo ended before its banner: %v\n%s\nstderr:\n%s", err, strings.Join(banner, "\n"), stderr.String())
		}
	}
	go func() { _, _ = io.Copy(io.Discard, r) }()
	t.Logf("banner:\n%s", strings.Join(banner, "\n"))
	offers := map[string]string{}
	var token string
	item := regexp.MustCompile(`^  ([a-zA-Z -]+):\s+(.+)$`)
	for _, l := range banner {
		if m := item.FindStringSubmatch(l); m != nil {
			offers[m[1]] = m[2]
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "API token:"); ok {
			token = strings.TrimPrefix(strings.TrimSpace(v), "T=")
		}
	}
	for _, k := range []string{"report", "model", "place", "health", "what-ifs", "job page"} {
		if offers[k] == "" {
			t.Fatalf("the banner offers no %q command", k)
		}
	}
	if token == "" {
		t.Fatal("the banner gives no API token")
	}

	// The traced job ends after its 2,000 iterations; the daemon has it as ended
	// once its final reports are in.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		b, _ := os.ReadFile(filepath.Join(dir, "mpi.log"))
		if strings.Contains(string(b), "the traced job demo-traced has ended") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the traced job did not end in 3 minutes; mpi.log:\n%s", b)
		}
		time.Sleep(time.Second)
	}
	// run runs the banner's command; its standard output, and its
	// standard error (where a command that writes a file to standard
	// output says what it did).
	run := func(name string) (string, string) {
		t.Helper()
		c := exec.CommandContext(ctx, "bash", "-c", offers[name])
		c.Dir = root
		c.Env = append(os.Environ(), "T="+token)
		var stderr strings.Builder
		c.Stderr = &stderr
		out, err := c.Output()
		if err != nil {
			t.Errorf("the banner's %s command %q: %v\n%s%s", name, offers[name], err, out, stderr.String())
		}
		return string(out), stderr.String()
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		var detail struct {
			Job struct {
				State    string `json:"state"`
				TraceDir string `json:"trace_dir"`
			} `json:"job"`
		}
		c := exec.CommandContext(ctx, "curl", "-sf", "-H", "Authorization: Bearer "+token, "http://"+listen+"/api/v1/jobs/demo-traced")
		out, err := c.Output()
		if job := &detail.Job; err == nil && json.Unmarshal(out, &detail) == nil && job.State != "" && job.State != "running" && job.TraceDir != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon has no ended, traced job demo-traced a minute after it ended: %v %s", err, out)
		}
	}

	// Each command answers the question it is offered for.
	if out, _ := run("report"); !strings.Contains(out, "8 ranks") {
		t.Errorf("report: no 8 ranks in\n%s", out)
	}
	if out, _ := run("model"); !strings.Contains(out, "perfect") || !strings.Contains(out, "as ran") {
		t.Errorf("model: no perfect-network what-if against the replay as ran in\n%s", out)
	}
	if out, said := run("place"); !regexp.MustCompile(`(?m)^job demo-traced: 8 ranks on 8 nodes \(2 cores each\); advice from \S+`).MatchString(said) ||
		!regexp.MustCompile(`(?m)^rank 7=n[1-8] slot=[01]$`).MatchString(out) {
		t.Errorf("place: no advice for the 8 ranks on n1..n8 in\n%s\n%s", said, out)
	}
	if out, _ := run("health"); !regexp.MustCompile(`(?m)^link health over the last 10m0s: \d+ links`).MatchString(out) || !strings.Contains(out, "DIRECTION") {
		t.Errorf("health: no link directions in\n%s", out)
	}
	var whatIfs struct {
		AsRan *struct {
			Elapsed float64 `json:"elapsed_seconds"`
		} `json:"as_ran"`
		WhatIfs []struct {
			Scenario string  `json:"scenario"`
			Elapsed  float64 `json:"elapsed_seconds"`
		} `json:"what_ifs"`
	}
	if out, _ := run("what-ifs"); json.Unmarshal([]byte(out), &whatIfs) != nil || whatIfs.AsRan == nil || whatIfs.AsRan.Elapsed <= 0 || len(whatIfs.WhatIfs) == 0 {
		t.Errorf("what-ifs: no replay as ran and what-ifs in\n%s", out)
	}
	page := strings.TrimSpace(offers["job page"])
	if c := exec.CommandContext(ctx, "curl", "-sf", "-o", "/dev/null", page); c.Run() != nil {
		t.Errorf("job page %s: not served", page)
	}

	// Ctrl-C: the demo stops cleanly, its daemon with it.
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		stopped = true
		var ee *exec.ExitError
		if errors.As(err, &ee) || err != nil {
			t.Errorf("the demo ended on Ctrl-C with %v, want status 0\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("the demo did not stop within a minute of Ctrl-C")
	}
	if c, err := net.DialTimeout("tcp", listen, time.Second); err == nil {
		c.Close()
		t.Errorf("the demo's daemon still listens on %s after Ctrl-C", listen)
	}
}
