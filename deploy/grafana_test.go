package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/daemon"
	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/fabric/sim"
	"github.com/netloom/netloom/internal/store/sqlite"
	"github.com/netloom/netloom/test/prom"
)

// dashboard is the part of a Grafana dashboard the test runs.
type dashboard struct {
	Title      string
	Templating struct {
		List []struct {
			Name, Type string
			Query      json.RawMessage
			Current    struct{ Value any }
		}
	}
	Panels []struct {
		Title   string
		Targets []struct{ Expr string }
	}
}

// simDaemon runs `netloom serve` in-process on a simulated fat tree with
// symbol errors on the switch port of n1's host link, so that an alert
// fires; it returns the daemon's base URL.
func simDaemon(t *testing.T) string {
	t.Helper()
	sp, err := sim.ParseSpec("fat-tree:hosts=16,radix=8")
	if err != nil {
		t.Fatal(err)
	}
	src, err := sim.NewSource(context.Background(), sp, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "netloom.db")
	st, err := sqlite.Open(context.Background(), db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := daemon.ParseConfig([]byte("alerting:\n  rules:\n    - {name: port_errors, threshold: 1}\n"), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen, cfg.DB, cfg.Fabric, cfg.SweepInterval, cfg.AgentListen, cfg.AgentAddressFile = "127.0.0.1:0", db, "sim", 200*time.Millisecond, "off", "-"
	cfg.Auth.Anonymous = "admin"
	d := daemon.New(cfg, src, st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, func(a net.Addr) { addr <- a }); st.Close() }()
	t.Cleanup(func() { cancel(); <-done })
	var base string
	select {
	case a := <-addr:
		base = "http://" + a.String()
	case err := <-done:
		t.Fatal(err)
	}
	// Errors after the first sweeps, so that a sweep counts them.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if st := d.State(); st != nil && st.Sweep.Count >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no sweep in 30s")
		}
	}
	topo := src.Topology()
	n1, err := topo.FindNode("n1")
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := topo.Peer(fabric.PortRef{GUID: n1.GUID, Port: 1})
	if err := src.AddErrors(leaf, fabric.SymbolErrors, 5); err != nil {
		t.Fatal(err)
	}
	return base
}

var labelValues = regexp.MustCompile(`^label_values\((.*),\s*(\w+)\)$`)

// TestGrafanaDashboards runs every query of every shipped dashboard, and
// every template variable's, against a real Prometheus scraping a real
// daemon (on a simulated fabric) with the shipped rules loaded: each must
// be valid PromQL and answer data.
func TestGrafanaDashboards(t *testing.T) {
	if m := prom.Missing(prom.PrometheusBin); m != "" {
		t.Skip(m)
	}
	base := simDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rules, _ := filepath.Abs("prometheus/netloom.rules.yml")
	p, err := prom.StartPrometheus(ctx, t.TempDir(), time.Second, []string{base + "/metrics", base + "/metrics/ports"}, rules)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	// Enough scrapes for rates over 10s, and the alert's series.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		r, err := p.Query(ctx, `count(rate(netloom_port_transmit_data_bytes_total[10s])) and on() count(netloom_alert{state="firing"})`)
		if err == nil && len(r) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus has no rates or alert after 60s (%v); log:\n%s", err, p.Log())
		}
	}
	files, _ := filepath.Glob("grafana/*.json")
	if len(files) != 3 {
		t.Fatalf("dashboards: %v", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		vars := map[string]string{"__rate_interval": "10s", "__interval": "1s"}
		subst := func(s string) string {
			for k, v := range vars {
				s = strings.ReplaceAll(s, "$"+k, v)
			}
			return s
		}
		for _, v := range d.Templating.List {
			switch v.Type {
			case "datasource":
			case "textbox":
				vars[v.Name] = fmt.Sprint(v.Current.Value)
			case "query":
				var q struct{ Query string }
				if err := json.Unmarshal(v.Query, &q); err != nil {
					t.Fatalf("%s: variable %s: %v", f, v.Name, err)
				}
				m := labelValues.FindStringSubmatch(q.Query)
				if m == nil {
					t.Fatalf("%s: variable %s: %q is not label_values(SERIES, LABEL)", f, v.Name, q.Query)
				}
				r, err := p.Query(ctx, fmt.Sprintf("count by (%s) (%s)", m[2], subst(m[1])))
				if err != nil || len(r) == 0 {
					t.Fatalf("%s: variable %s: %q: %d values, %v", f, v.Name, q.Query, len(r), err)
				}
				vars[v.Name] = r[0].Metric[m[2]]
			default:
				t.Fatalf("%s: variable %s of type %s", f, v.Name, v.Type)
			}
		}
		n := 0
		for _, panel := range d.Panels {
			for _, tg := range panel.Targets {
				n++
				q := subst(tg.Expr)
				if strings.Contains(q, "$") {
					t.Errorf("%s: %s: unknown variable in %q", f, panel.Title, tg.Expr)
					continue
				}
				r, err := p.Query(ctx, q)
				if err != nil || len(r) == 0 {
					t.Errorf("%s: panel %q: %s: %d series, %v", f, panel.Title, q, len(r), err)
				}
			}
		}
		t.Logf("%s (%s): %d queries answered, variables %v", f, d.Title, n, vars)
	}
}
