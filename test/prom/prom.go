// Package prom starts a real Prometheus and a real Alertmanager (Debian's
// prometheus and prometheus-alertmanager) for tests: each on a private
// port with its data in a temporary directory.
package prom

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Binaries as Debian installs them.
const (
	PrometheusBin   = "prometheus"
	PromtoolBin     = "promtool"
	AlertmanagerBin = "prometheus-alertmanager"
)

// Missing returns why the named binaries cannot run here ("" when they can).
func Missing(bins ...string) string {
	var miss []string
	for _, b := range bins {
		if _, err := exec.LookPath(b); err != nil {
			miss = append(miss, b)
		}
	}
	if len(miss) == 0 {
		return ""
	}
	return "missing " + strings.Join(miss, ", ") + " (install prometheus, prometheus-alertmanager)"
}

// Server is a running Prometheus or Alertmanager.
type Server struct {
	// URL is its base URL, e.g. http://127.0.0.1:PORT.
	URL string
	// Dir holds its config, data and log.
	Dir string
	cmd *exec.Cmd
	log string
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs bin with args (where {PORT} is replaced by a free port) in
// dir and waits until /-/ready answers 200.
func start(ctx context.Context, dir, bin string, args ...string) (*Server, error) {
	if m := Missing(bin); m != "" {
		return nil, fmt.Errorf("start %s: %s", bin, m)
	}
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	for i := range args {
		args[i] = strings.ReplaceAll(args[i], "{PORT}", fmt.Sprint(port))
	}
	s := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Dir: dir, log: filepath.Join(dir, bin+".log")}
	out, err := os.Create(s.log)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	defer out.Close()
	s.cmd = exec.Command(bin, args...)
	s.cmd.Dir = dir
	s.cmd.Stdout, s.cmd.Stderr = out, out
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(s.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s, nil
			}
		}
		select {
		case <-exited:
			return nil, fmt.Errorf("start %s: exited:\n%s", bin, s.Log())
		case <-ctx.Done():
			s.Stop()
			return nil, fmt.Errorf("start %s: %w", bin, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("start %s: not ready after 60s:\n%s", bin, s.Log())
		}
	}
}

// Log returns the server's output so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.log)
	return string(b)
}

// Stop kills the server.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// StartAlertmanager runs Alertmanager in dir (which must exist) with one
// receiver: a webhook to hook (sent for every alert alone, at once, and
// again when it resolves).
func StartAlertmanager(ctx context.Context, dir, hook string) (*Server, error) {
	cfg := fmt.Sprintf(`route:
  receiver: hook
  group_by: ['...']
  group_wait: 0s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: hook
    webhook_configs:
      - url: %q
        send_resolved: true
`, hook)
	path := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	return start(ctx, dir, AlertmanagerBin, "--config.file="+path, "--storage.path="+filepath.Join(dir, "am-data"),
		"--web.listen-address=127.0.0.1:{PORT}", "--cluster.listen-address=")
}

// StartPrometheus runs Prometheus in dir scraping targets (full URLs of
// metrics endpoints, e.g. http://127.0.0.1:8466/metrics/ports, whose job
// is netloom-ports; /metrics is job netloom) every interval, with rule
// files loaded.
func StartPrometheus(ctx context.Context, dir string, interval time.Duration, targets []string, rules ...string) (*Server, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  evaluation_interval: %s\n", interval, interval)
	if len(rules) > 0 {
		b.WriteString("rule_files:\n")
		for _, r := range rules {
			fmt.Fprintf(&b, "  - %q\n", r)
		}
	}
	b.WriteString("scrape_configs:\n")
	for i, t := range targets {
		u, err := url.Parse(t)
		if err != nil {
			return nil, fmt.Errorf("target %q: %w", t, err)
		}
		// Jobs as deploy/prometheus/netloom.rules.yml expects them.
		job := fmt.Sprintf("netloom-%d", i)
		switch u.Path {
		case "/metrics":
			job = "netloom"
		case "/metrics/ports":
			job = "netloom-ports"
		}
		fmt.Fprintf(&b, "  - job_name: %s\n    scheme: %s\n    metrics_path: %q\n    static_configs:\n      - targets: [%q]\n",
			job, u.Scheme, u.Path, u.Host)
	}
	path := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	return start(ctx, dir, PrometheusBin, "--config.file="+path, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address=127.0.0.1:{PORT}")
}

// Sample is one series of a Prometheus instant query's result.
type Sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// Query runs an instant PromQL query and returns its vector (a scalar
// becomes one sample without labels).
func (s *Server) Query(ctx context.Context, q string) ([]Sample, error) {
	var res struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := s.getJSON(ctx, "/api/v1/query?query="+url.QueryEscape(q), &res); err != nil {
		return nil, err
	}
	if res.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", q, res.Error)
	}
	switch res.Data.ResultType {
	case "vector":
		var v []Sample
		err := json.Unmarshal(res.Data.Result, &v)
		return v, err
	case "scalar":
		var v [2]any
		err := json.Unmarshal(res.Data.Result, &v)
		return []Sample{{Value: v}}, err
	}
	return nil, fmt.Errorf("query %q: result type %s", q, res.Data.ResultType)
}

// Rules returns Prometheus' rule groups as /api/v1/rules answers them.
func (s *Server) Rules(ctx context.Context, v any) error { return s.getJSON(ctx, "/api/v1/rules", v) }

// Targets returns Prometheus' targets as /api/v1/targets answers them.
func (s *Server) Targets(ctx context.Context, v any) error {
	return s.getJSON(ctx, "/api/v1/targets", v)
}

// Alerts returns Alertmanager's alerts (GET /api/v2/alerts).
func (s *Server) Alerts(ctx context.Context) ([]AMAlert, error) {
	var out []AMAlert
	err := s.getJSON(ctx, "/api/v2/alerts", &out)
	return out, err
}

// AMAlert is an alert as Alertmanager's API and webhooks show it.
type AMAlert struct {
	Status       any               `json:"status"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
}

// Notification is the body Alertmanager posts to a webhook.
type Notification struct {
	Status string    `json:"status"`
	Alerts []AMAlert `json:"alerts"`
}

func (s *Server) getJSON(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 && !bytes.Contains(b, []byte(`"status"`)) {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, b)
	}
	return json.Unmarshal(b, v)
}
