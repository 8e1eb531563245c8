package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/netloom/netloom/internal/alert"
	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/fabric/sim"
	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/sqlite"
	"github.com/netloom/netloom/internal/store/storetest"
)

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig([]byte("listen: \":9000\"\nsweep_interval: 500ms\nretention:\n  samples: 48h\n"), "ok.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != ":9000" || c.SweepInterval != 500*time.Millisecond || c.Retention.Samples != 48*time.Hour {
		t.Errorf("parsed %+v", c)
	}
	if d := c.WithDefaults(); d.DiscoverInterval != DefaultDiscoverInterval || d.Fabric != "ib" || d.AgentReadBuffer != 256 {
		t.Errorf("defaults not filled: %+v", d)
	}
	for text, want := range map[string]string{
		"listen: a\nsweep_interval: soon\n": "line 2",
		"sweep_intervall: 1s\n":             "sweep_intervall",
		"sweep_interval: 1ms\n":             "sweep_interval 1ms",
		"reset_threshold: 1.5\n":            "reset_threshold",
		"sweep_retries: 99\n":               "sweep_retries",
		"agent_read_buffer_mib: -1\n":       "agent_read_buffer_mib -1",
		"role: both\n":                      "role \"both\"",
		"store_backlog_mib: -5\n":           "store_backlog_mib -5",
		"poll_interval: 1ms\n":              "poll_interval 1ms",
		"fabric_name: east/1\n":             "fabric_name \"east/1\": '/'",
		"[1, 2\n":                           "line",
	} {
		_, err := ParseConfig([]byte(text), "bad.yaml")
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "bad.yaml") {
			t.Errorf("config %q: error %v, want it to name the file and %q", text, err, want)
		}
	}
}

// simDaemon runs a daemon on a small simulated fat tree and its store.
type simDaemon struct {
	t      *testing.T
	d      *Daemon
	src    *sim.Source
	base   string
	cancel context.CancelFunc
	done   chan error
}

func startSim(t *testing.T, db string) *simDaemon {
	t.Helper()
	return startDaemon(t, db, "fat-tree:hosts=32,radix=8", func(c *Config) {
		c.SweepInterval, c.AgentListen, c.AgentAddressFile = 50*time.Millisecond, "off", "-"
	})
}

// startDaemon runs a daemon on a simulated fabric and its store, with the
// defaults of these tests changed by setup, and waits for three sweeps.
func startDaemon(t *testing.T, db, spec string, setup func(*Config)) *simDaemon {
	t.Helper()
	return startWrapped(t, db, spec, setup, nil)
}

// startWrapped is startDaemon with the store wrapped by wrap (when not
// nil), e.g. to make it fail.
func startWrapped(t *testing.T, db, spec string, setup func(*Config), wrap func(store.Store) store.Store) *simDaemon {
	t.Helper()
	sp, err := sim.ParseSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	src, err := sim.NewSource(context.Background(), sp, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(context.Background(), db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Listen: "127.0.0.1:0", DB: db, Fabric: "sim", SweepInterval: 100 * time.Millisecond, DiscoverInterval: time.Second}
	cfg.Auth.Anonymous = "admin"
	setup(&cfg)
	var ds store.Store = st
	if wrap != nil {
		ds = wrap(st)
	}
	s := &simDaemon{t: t, src: src, d: New(cfg, src, ds, slog.New(slog.NewTextHandler(io.Discard, nil))), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	addr := make(chan net.Addr, 1)
	go func() { s.done <- s.d.Run(ctx, func(a net.Addr) { addr <- a }); ds.Close() }()
	select {
	case a := <-addr:
		s.base = "http://" + a.String()
	case err := <-s.done:
		t.Fatalf("daemon exited: %v", err)
	}
	t.Cleanup(s.stop)
	s.waitFor("three sweeps", func() bool {
		var st struct{ Sweep struct{ Count int } }
		return s.get("/api/v1/status", &st) == 200 && st.Sweep.Count >= 3
	})
	return s
}

func (s *simDaemon) stop() {
	if s.cancel != nil {
		s.cancel()
		if err := <-s.done; err != nil {
			s.t.Errorf("daemon: %v", err)
		}
		s.cancel = nil
	}
}

func (s *simDaemon) get(path string, v any) int {
	s.t.Helper()
	code, b := s.fetch(path)
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			s.t.Fatalf("GET %s: %v: %s", path, err, b)
		}
	}
	return code
}

// scrape returns the body of a GET.
func (s *simDaemon) scrape(path string) string {
	s.t.Helper()
	_, b := s.fetch(path)
	return string(b)
}

func (s *simDaemon) fetch(path string) (int, []byte) {
	s.t.Helper()
	resp, err := http.Get(s.base + path)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (s *simDaemon) waitFor(what string, cond func() bool) {
	s.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			s.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

type topEntry struct {
	Link struct {
		ID string
	}
	From        fabric.PortRef
	Utilization float64 `json:"utilization_pct"`
	Errors      uint64
}

func TestDaemonOnSimulatedFabric(t *testing.T) {
	db := filepath.Join(t.TempDir(), "netloom.db")
	s := startSim(t, db)

	var top struct{ Links []topEntry }
	if code := s.get("/api/v1/links/top?by=utilization&n=8", &top); code != 200 || len(top.Links) != 8 {
		t.Fatalf("top links: %d %+v", code, top)
	}
	for i, e := range top.Links {
		if e.Utilization < 0 || e.Utilization > 100 || (i > 0 && e.Utilization > top.Links[i-1].Utilization) {
			t.Errorf("top links not sorted or out of range at %d: %+v", i, top.Links)
		}
	}

	// Errors injected on one port make its link the top one by errors.
	topo := s.src.Topology()
	victim := topo.Links[len(topo.Links)-1]
	recv := victim.B // errors are counted at the receiving end
	if err := s.src.AddErrors(recv, fabric.SymbolErrors, 42); err != nil {
		t.Fatal(err)
	}
	s.waitFor("the link with errors on top", func() bool {
		s.get("/api/v1/links/top?by=errors&n=1", &top)
		return len(top.Links) == 1 && top.Links[0].Errors == 42 && top.Links[0].Link.ID == victim.ID()
	})
	// The port counters are at /metrics/ports, in the text format
	// Prometheus parses: every swept port, the injected errors where they are.
	families := portMetrics(t, s.base+"/metrics/ports")
	if len(families) != 1+int(fabric.NumCounters) {
		t.Errorf("/metrics/ports: %d families", len(families))
	}
	// Every swept port has a series; the one with injected errors has them.
	sym := families["netloom_port_symbol_error_total"]
	swept := regexp.MustCompile(`(?m)^netloom_fabric_sweep_ports (\d+)$`).FindStringSubmatch(s.scrape("/metrics"))
	if sym == nil || swept == nil || strconv.Itoa(len(sym.Metric)) != swept[1] {
		t.Fatalf("/metrics/ports: %d symbol error series, /metrics says %v ports swept", len(sym.GetMetric()), swept)
	}
	found := false
	for _, m := range sym.Metric {
		l := map[string]string{}
		for _, p := range m.Label {
			l[p.GetName()] = p.GetValue()
		}
		want := 0.0
		if l["guid"] == recv.GUID.String() && l["port"] == strconv.Itoa(recv.Port) {
			want, found = 42, true
		}
		if n, ok := topo.Node(recv.GUID); ok && l["guid"] == recv.GUID.String() && l["node"] != n.Description {
			t.Errorf("port %v: node label %q, want %q", l, l["node"], n.Description)
		}
		if got := m.GetCounter().GetValue(); got != want {
			t.Errorf("symbol errors %v = %g, want %g", l, got, want)
		}
	}
	if !found {
		t.Errorf("/metrics/ports: no series for %v", recv)
	}
	if f := portMetrics(t, s.base+"/metrics/ports?counters=symbol_errors"); len(f) != 2 || f["netloom_port_symbol_error_total"] == nil {
		t.Errorf("?counters=symbol_errors gave %d families", len(f))
	}
	if code := s.get("/metrics/ports?counters=nope", nil); code != http.StatusBadRequest {
		t.Errorf("an unknown counter: status %d", code)
	}

	// A counter reset is an event and never a huge delta.
	if err := s.src.ResetCounters(context.Background(), topo, []fabric.PortRef{victim.A}); err != nil {
		t.Fatal(err)
	}
	s.waitFor("a counter_reset event", func() bool {
		var ev struct{ Events []fabric.Event }
		s.get("/api/v1/events?kind=counter_reset&from=-1m", &ev)
		return len(ev.Events) > 0 && ev.Events[0].Node == victim.A.GUID && ev.Events[0].Port == victim.A.Port
	})
	var ser struct {
		Series struct {
			Rate map[string][]float64
		}
	}
	s.get("/api/v1/ports/"+victim.A.String()+"/counters?from=-1m&counters=xmit_data_bytes", &ser)
	for _, r := range ser.Series.Rate["xmit_data_bytes"] {
		if r > 1.01*victim.Capacity() {
			t.Errorf("rate %g above link capacity %g after a reset", r, victim.Capacity())
		}
	}

	// Taking a link down changes the topology; the past stays as it was.
	var before struct{ Links []fabric.Link }
	s.get("/api/v1/fabric/links", &before)
	beforeT := time.Now()
	if err := s.src.SetLinkDown(victim.A, true); err != nil {
		t.Fatal(err)
	}
	s.waitFor("a link_down event", func() bool {
		var ev struct{ Events []fabric.Event }
		s.get("/api/v1/events?kind=link_down&from=-1m", &ev)
		return len(ev.Events) == 1
	})
	var now, past struct{ Links []fabric.Link }
	s.get("/api/v1/fabric/links", &now)
	s.get("/api/v1/fabric/links?at="+url.QueryEscape(beforeT.Format(time.RFC3339Nano)), &past)
	if len(now.Links) != len(before.Links)-1 || len(past.Links) != len(before.Links) {
		t.Errorf("links now %d, at %s %d; before %d", len(now.Links), beforeT, len(past.Links), len(before.Links))
	}

	// /metrics carries the fabric's size and events, and no per-port series.
	metrics := s.scrape("/metrics")
	for _, want := range []string{
		fmt.Sprintf("netloom_fabric_links %d", len(now.Links)),
		`netloom_fabric_events_total{kind="link_down"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(metrics, "netloom_port_") {
		t.Errorf("/metrics has per-port series")
	}

	// A restart on the same store does not report the fabric as new.
	var evBefore struct{ Events []fabric.Event }
	s.get("/api/v1/events?from=-1h", &evBefore)
	s.stop()
	s2 := startSim(t, db)
	var evAfter struct{ Events []fabric.Event }
	s2.get("/api/v1/events?from=-1h", &evAfter)
	for _, e := range evAfter.Events[:len(evAfter.Events)-len(evBefore.Events)] {
		// The new source has the link up again: that one change is expected.
		if e.Kind != fabric.EventLinkUp {
			t.Errorf("restart added event %+v", e)
		}
	}
}

// TestFallingBehind stalls the store writer: the status shows the daemon
// falling behind (queue filling, then writes dropped) and recovers once
// the writer runs again.
func TestFallingBehind(t *testing.T) {
	s := startSim(t, filepath.Join(t.TempDir(), "netloom.db"))
	release := make(chan struct{})
	stall := func(ctx context.Context, st store.Store) error { <-release; return nil }
	noop := func(ctx context.Context, st store.Store) error { return nil }
	s.d.enqueue(writeOp{kind: "test", apply: stall})
	for range writeQueueLen + 10 {
		s.d.enqueue(writeOp{kind: "test", apply: noop}) // the last ones are dropped
	}
	type status struct {
		Behind *struct {
			Since   time.Time
			Reasons []string
		}
	}
	var st status
	s.waitFor("the daemon to say it falls behind", func() bool {
		return s.get("/api/v1/status", &st) == 200 && st.Behind != nil && len(st.Behind.Reasons) >= 2
	})
	joined := strings.Join(st.Behind.Reasons, "; ")
	if !strings.Contains(joined, "store write queue") || !strings.Contains(joined, "store writes dropped") {
		t.Errorf("reasons %q: want the queue and the drops", joined)
	}
	close(release)
	s.waitFor("the daemon to catch up", func() bool {
		st = status{}
		return s.get("/api/v1/status", &st) == 200 && st.Behind == nil
	})
}

// portMetrics parses /metrics/ports with Prometheus' own text parser.
func portMetrics(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.LegacyValidation)
	f, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	return f
}

func TestAlertConfigErrorsNameTheLine(t *testing.T) {
	_, err := ParseConfig([]byte("listen: \":9000\"\nalerting:\n  rules:\n    - name: port_errors\n      counters: [symbol_errors, sybmol_errors]\n"), "alerts.yaml")
	if err == nil || !strings.Contains(err.Error(), "alerts.yaml") || !strings.Contains(err.Error(), "line 5") || !strings.Contains(err.Error(), `"sybmol_errors"`) {
		t.Errorf("error %v: want the file, line 5 and the counter", err)
	}
	c, err := ParseConfig([]byte("alerting:\n  alertmanagers: [\"http://127.0.0.1:9093\"]\n"), "ok.yaml")
	if err != nil || len(c.WithDefaults().Alerting.Enabled()) < 10 {
		t.Errorf("defaults stay on when only delivery is set: %v", err)
	}
}

// TestAlertsOnSimulatedFabric injects errors and a link failure into the
// simulated fabric and follows the alerts through the API, /metrics and a
// webhook, until they resolve.
func TestAlertsOnSimulatedFabric(t *testing.T) {
	hook := make(chan []byte, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		hook <- b
	}))
	defer srv.Close()
	cfgText := fmt.Sprintf(`alerting:
  webhooks: [%q]
  rules:
    - {name: port_errors, threshold: 5, window: 2s}
    - {name: fabric_changed, window: 10s}
    - {name: port_congestion, disabled: true}
    - {name: link_utilization, disabled: true}
    - {name: link_flapping, threshold: 2, window: 1m}
`, srv.URL)
	parsed, err := ParseConfig([]byte(cfgText), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := startDaemon(t, filepath.Join(t.TempDir(), "netloom.db"), "fat-tree:hosts=32,radix=8", func(c *Config) {
		c.SweepInterval, c.AgentListen, c.AgentAddressFile, c.DiscoverInterval = 100*time.Millisecond, "off", "-", time.Second
		c.Alerting = parsed.Alerting
	})
	type alertsJSON struct {
		Alerts []struct {
			Rule, State, Counter, Event, Summary string
			Value                                float64
			Subject                              struct{ Link string }
		}
		Firing int
	}
	var got alertsJSON
	if code := s.get("/api/v1/alerts", &got); code != 200 || got.Firing != 0 {
		t.Fatalf("before any fault: %d %+v", code, got)
	}
	topo := s.src.Topology()
	victim := topo.Links[len(topo.Links)-1]
	if err := s.src.AddErrors(victim.B, fabric.SymbolErrors, 7); err != nil {
		t.Fatal(err)
	}
	s.waitFor("port_errors firing", func() bool {
		s.get("/api/v1/alerts?state=firing", &got)
		return len(got.Alerts) == 1 && got.Alerts[0].Rule == "port_errors" && got.Alerts[0].Value == 7 && got.Alerts[0].Subject.Link == victim.ID()
	})
	if m := s.scrape("/metrics"); !strings.Contains(m, `netloom_alerts{alertname="port_errors",severity="warning",state="firing"} 1`) {
		t.Errorf("/metrics has no firing port_errors")
	}
	var wh alertWebhook
	select {
	case b := <-hook:
		if err := json.Unmarshal(b, &wh); err != nil || len(wh.Alerts) != 1 || wh.Alerts[0].Labels["alertname"] != "port_errors" || wh.Alerts[0].State != "firing" {
			t.Fatalf("webhook %s: %v", b, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no webhook")
	}
	s.waitFor("port_errors resolved after its window", func() bool {
		s.get("/api/v1/alerts?state=resolved", &got)
		return len(got.Alerts) == 1 && got.Alerts[0].Rule == "port_errors"
	})

	// A link going down and up twice: fabric changes, then a flap. Each
	// change fires for 10 s: long enough to be seen when a loaded machine
	// slows discovery and evaluation (with 3 s, one run missed a link_down).
	sw := victim.A
	for _, down := range []bool{true, false, true, false} {
		if err := s.src.SetLinkDown(sw, down); err != nil {
			t.Fatal(err)
		}
		want := "link_down"
		if !down {
			want = "link_up"
		}
		s.waitFor("fabric_changed "+want, func() bool {
			s.get("/api/v1/alerts?state=firing", &got)
			for _, a := range got.Alerts {
				if a.Rule == "fabric_changed" && a.Event == want && a.Subject.Link == victim.ID() {
					return true
				}
			}
			return false
		})
	}
	s.waitFor("link_flapping", func() bool {
		s.get("/api/v1/alerts?state=firing", &got)
		for _, a := range got.Alerts {
			if a.Rule == "link_flapping" && a.Value >= 2 {
				return true
			}
		}
		return false
	})
}

type alertWebhook struct {
	Alerts []struct {
		State  string
		Labels map[string]string
	}
}

func TestVisibleAlert(t *testing.T) {
	a := alert.Alert{Jobs: []alert.Job{{ID: "1", User: "bob"}, {ID: "2", User: "alice"}, {ID: "3", User: "carol"}}}
	if !visibleAlert(&a, "alice") || a.Jobs[0].ID != "other-1" || a.Jobs[0].User != "" || a.Jobs[1].ID != "2" || a.Jobs[2].ID != "other-2" {
		t.Errorf("alice sees %+v", a.Jobs)
	}
	b := alert.Alert{Jobs: []alert.Job{{ID: "1", User: "bob"}}}
	if visibleAlert(&b, "alice") {
		t.Error("alice sees an alert naming only bob's job")
	}
}

// TestAlertsDocExample parses the config example of docs/alerts.md as it is.
func TestAlertsDocExample(t *testing.T) {
	b, err := os.ReadFile("../../docs/alerts.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(b, -1)
	if len(blocks) != 1 {
		t.Fatalf("%d yaml blocks", len(blocks))
	}
	c, err := ParseConfig(blocks[0][1], "docs/alerts.md")
	if err != nil {
		t.Fatal(err)
	}
	a := c.WithDefaults().Alerting
	var names []string
	for _, r := range a.Enabled() {
		names = append(names, r.Name)
	}
	if len(a.Alertmanagers) != 1 || a.ResendInterval != time.Minute || !strings.Contains(strings.Join(names, " "), "discards_critical") ||
		strings.Contains(strings.Join(names, " "), "link_utilization") {
		t.Errorf("parsed %+v", a)
	}
}

// TestOtherFabricsShown writes a second fabric into a collector's
// database, as another collector would: the collector's API shows both,
// the other one's nodes named with their fabric and its ports measured.
func TestOtherFabricsShown(t *testing.T) {
	db := filepath.Join(t.TempDir(), "netloom.db")
	s := startDaemon(t, db, "fat-tree:hosts=8,radix=4", func(c *Config) {
		c.SweepInterval, c.AgentListen, c.AgentAddressFile, c.PollInterval = 50*time.Millisecond, "off", "-", 100*time.Millisecond
	})
	var own struct{ Nodes []fabric.Node }
	s.get("/api/v1/fabric/nodes", &own)
	west, err := sqlite.Open(context.Background(), db, sqlite.Options{Fabric: "west"})
	if err != nil {
		t.Fatal(err)
	}
	defer west.Close()
	ctx := context.Background()
	topo := storetest.Topo(2, 2, "EDR")
	if _, _, err := west.SaveTopology(ctx, topo, time.Now()); err != nil {
		t.Fatal(err)
	}
	sweep := storetest.Sweep(2, 3, 1, time.Now())
	for i := range sweep {
		sweep[i].Port.GUID = fabric.GUID(0x1000 + i/3) // the west switches'
	}
	if err := west.AddPortSamples(ctx, sweep); err != nil {
		t.Fatal(err)
	}
	s.waitFor("the west fabric's nodes", func() bool {
		var l struct{ Nodes []fabric.Node }
		return s.get("/api/v1/fabric/nodes", &l) == 200 && len(l.Nodes) == len(own.Nodes)+len(topo.Nodes)
	})
	var l struct{ Nodes []fabric.Node }
	s.get("/api/v1/fabric/nodes", &l)
	by := map[string]int{}
	for _, n := range l.Nodes {
		by[n.Fabric]++
	}
	if by["west"] != len(topo.Nodes) || by[store.DefaultFabric] != len(own.Nodes) {
		t.Errorf("nodes by fabric: %v", by)
	}
	var n struct {
		Node  fabric.Node
		Ports []struct{ Rates map[string]float64 }
	}
	if code := s.get("/api/v1/nodes/sw0", &n); code != 200 || n.Node.Fabric != "west" || n.Ports[0].Rates == nil {
		t.Errorf("west's switch sw0: %d %+v, want it measured", code, n)
	}
	// Its own fabric's discoveries still compare with its own version.
	var vs struct{ Versions []store.Version }
	s.get("/api/v1/fabric/versions", &vs)
	if len(vs.Versions) != 2 {
		t.Errorf("versions: %+v, want one per fabric", vs.Versions)
	}
}
