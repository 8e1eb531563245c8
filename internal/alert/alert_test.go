package alert

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/fabric/sim"
)

func parse(t *testing.T, text string) (Config, error) {
	t.Helper()
	var doc struct {
		Alerting Config `yaml:"alerting"`
	}
	err := yaml.Unmarshal([]byte(text), &doc)
	return doc.Alerting.WithDefaults(), err
}

func rule(c Config, name string) *Rule {
	for i := range c.Rules {
		if c.Rules[i].Name == name {
			return &c.Rules[i]
		}
	}
	return nil
}

func TestConfigDefaults(t *testing.T) {
	c := Config{}.WithDefaults()
	if len(c.Enabled()) != len(DefaultRules())-1 || c.ResendInterval != time.Minute {
		t.Fatalf("defaults: %d rules, resend %s", len(c.Enabled()), c.ResendInterval)
	}
	for _, r := range c.Rules {
		if err := r.check(); err != nil {
			t.Errorf("default rule %s: %v", r.Name, err)
		}
	}
	// Every rule in force by default fires on change: none on a counter's
	// reading, which counts since it was last cleared (issue 28).
	for _, r := range c.Enabled() {
		if r.Kind == CounterTotal {
			t.Errorf("default rule %s fires on a counter's total", r.Name)
		}
	}
	if r := rule(c, "port_errors_total"); r == nil || !r.Disabled || r.Kind != CounterTotal {
		t.Errorf("port_errors_total: %+v, want known and off", r)
	}
}

func TestConfigRules(t *testing.T) {
	c, err := parse(t, `
alerting:
  alertmanagers: [http://127.0.0.1:9093/]
  rules:
    - name: port_errors
      threshold: 3
      window: 1m
    - name: link_utilization
      disabled: true
    - name: my_discards
      kind: counter_increase
      counters: [xmit_discards]
      threshold: 1000
      window: 10m
      severity: critical
`)
	if err != nil {
		t.Fatal(err)
	}
	if c.Alertmanagers[0] != "http://127.0.0.1:9093" {
		t.Errorf("alertmanagers %v", c.Alertmanagers)
	}
	if r := rule(c, "port_errors"); r.Threshold != 3 || r.Window != time.Minute || len(r.Counters) != 5 || r.Line != 5 {
		t.Errorf("port_errors %+v", r)
	}
	if !rule(c, "link_utilization").Disabled || rule(c, "fabric_changed") == nil {
		t.Error("defaults not kept or disabled")
	}
	if r := rule(c, "my_discards"); r == nil || r.Severity != "critical" || r.CounterNames()[0] != "xmit_discards" {
		t.Errorf("my_discards %+v", r)
	}
	// link_utilization and port_errors_total off, my_discards added.
	if len(c.Enabled()) != len(DefaultRules())-1 {
		t.Errorf("%d enabled", len(c.Enabled()))
	}
}

// TestConfigErrors: each bad rule is refused with the line it is on.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"alerting:\n  rules:\n    - name: port_errors\n      threshold: lots\n", `line 4: alerting: rule "port_errors".threshold: "lots"`},
		{"alerting:\n  rules:\n    - name: port_errors\n      threshold: 0\n", "line 4: alerting: rule \"port_errors\": threshold 0"},
		{"alerting:\n  rules:\n    - name: x\n      kind: counter_total\n      threshold: 5\n      counters: [symbol_errors, bogus_errors]\n",
			`line 6: alerting: rule "x": unknown counter "bogus_errors"`},
		{"alerting:\n  rules:\n    - name: x\n      kind: nope\n", `line 4: alerting: rule "x": kind "nope"`},
		{"alerting:\n  rules:\n    - name: x\n      threshold: 5\n", `line 3: alerting: rule "x": a new rule needs a kind`},
		{"alerting:\n  rules:\n    - name: port_congestion\n      treshold: 0.5\n", `line 4: alerting: rule "port_congestion": unknown field "treshold"`},
		{"alerting:\n  rules:\n    - name: port_congestion\n      threshold: 1.5\n", `line 4: alerting: rule "port_congestion": threshold 1.5`},
		{"alerting:\n  alertmanagers: [localhost:9093]\n", "line 2: alerting: alertmanagers[0]"},
		{"alerting:\n  rules:\n    - name: port_errors\n    - name: port_errors\n", `line 4: alerting: rules[1]: rule "port_errors" is already set on line 3`},
		{"alerting:\n  rules:\n    - threshold: 1\n", "line 3: alerting: rules[0]: every rule needs a name"},
		{"alerting:\n  rules:\n    - name: port_errors\n      window: soon\n", `line 4: alerting: rule "port_errors".window: "soon"`},
	} {
		_, err := parse(t, tc.text)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.text, err, tc.want)
		}
	}
}

// finder names the jobs on fixed ports.
type finder struct {
	jobs  map[fabric.PortRef][]Job
	calls int
}

func (f *finder) JobsCrossing(ports []fabric.PortRef, since time.Time) []Job {
	f.calls++
	var out []Job
	for _, p := range ports {
		for _, j := range f.jobs[p] {
			if !slices.ContainsFunc(out, func(x Job) bool { return x.ID == j.ID }) {
				out = append(out, j)
			}
		}
	}
	return out
}

func tree(t *testing.T) *fabric.Topology {
	t.Helper()
	topo, err := sim.GenerateFatTree(8, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// sweepAt is an input with one sample per port given.
func sweepAt(topo *fabric.Topology, at time.Time, deltas map[fabric.PortRef]map[fabric.Counter]uint64) Input {
	in := Input{Time: at, Topology: topo, SweepTime: at, Samples: map[fabric.PortRef]*fabric.PortSample{},
		Readings: map[fabric.PortRef]*fabric.PortReading{}}
	for p, d := range deltas {
		s := &fabric.PortSample{Port: p, Time: at, Span: 10 * time.Second}
		r := &fabric.PortReading{Port: p, Time: at}
		for c, v := range d {
			s.Delta[c] = v
			r.V[c] = v
		}
		in.Samples[p], in.Readings[p] = s, r
	}
	return in
}

func only(c Config, names ...string) Config {
	for i := range c.Rules {
		c.Rules[i].Disabled = !slices.Contains(names, c.Rules[i].Name)
	}
	return c
}

func TestCounterIncreaseNamesJobsAndResolves(t *testing.T) {
	topo := tree(t)
	l := topo.Links[len(topo.Links)-1]
	f := &finder{jobs: map[fabric.PortRef][]Job{l.B: {{ID: "42", User: "alice", Bytes: 10}, {ID: "43", User: "bob", Bytes: 99}}}}
	e := NewEngine(only(Config{}.WithDefaults(), "port_errors"), f)
	t0 := time.Unix(1_700_000_000, 0)
	if ch := e.Evaluate(sweepAt(topo, t0, map[fabric.PortRef]map[fabric.Counter]uint64{l.A: {fabric.SymbolErrors: 4}})); len(ch) != 0 {
		t.Fatalf("4 errors fired: %+v", ch)
	}
	ch := e.Evaluate(sweepAt(topo, t0.Add(10*time.Second), map[fabric.PortRef]map[fabric.Counter]uint64{l.A: {fabric.SymbolErrors: 6}}))
	if len(ch) != 1 {
		t.Fatalf("10 errors in 5m: %d changes", len(ch))
	}
	a := ch[0]
	if a.State != Firing || a.Value != 10 || a.Counter != "symbol_errors" || *a.Subject.Port != l.A || *a.Subject.Remote != l.B {
		t.Errorf("alert %+v", a)
	}
	if a.JobList() != "43 (bob), 42 (alice)" || !slices.Equal(a.Users(), []string{"alice", "bob"}) {
		t.Errorf("jobs %q users %v", a.JobList(), a.Users())
	}
	lab, ann := a.Labels(), a.Annotations()
	if lab["alertname"] != "port_errors" || lab["severity"] != "warning" || lab["link"] != l.ID() || lab["counter"] != "symbol_errors" {
		t.Errorf("labels %v", lab)
	}
	if !strings.Contains(ann["description"], "43 (bob), 42 (alice)") || ann["users"] != "alice,bob" || ann["value"] != "10" {
		t.Errorf("annotations %v", ann)
	}
	// No new errors: still firing until the window passes.
	for i := 2; i < 30; i++ {
		at := t0.Add(time.Duration(i) * 10 * time.Second)
		if ch := e.Evaluate(sweepAt(topo, at, nil)); len(ch) != 0 {
			t.Fatalf("changed at %s: %+v", at.Sub(t0), ch)
		}
	}
	ch = e.Evaluate(sweepAt(topo, t0.Add(5*time.Minute+20*time.Second), nil))
	if len(ch) != 1 || ch[0].State != Resolved || ch[0].EndsAt.IsZero() {
		t.Fatalf("after the window: %+v", ch)
	}
	all := e.Alerts()
	if len(all) != 1 || all[0].State != Resolved || len(all[0].Jobs) != 2 {
		t.Errorf("alerts after resolution: %+v", all)
	}
}

func TestCounterTotal(t *testing.T) {
	topo := tree(t)
	p := topo.Links[0].A
	e := NewEngine(only(Config{}.WithDefaults(), "port_errors_total"), nil)
	now := time.Unix(1_700_000_000, 0)
	ch := e.Evaluate(sweepAt(topo, now, map[fabric.PortRef]map[fabric.Counter]uint64{p: {fabric.LinkDowned: 9999, fabric.XmitDiscards: 10000}}))
	if len(ch) != 1 || ch[0].Counter != "xmit_discards" || ch[0].Value != 10000 {
		t.Fatalf("%+v", ch)
	}
}

func TestLinkFlapAndFabricChanged(t *testing.T) {
	topo := tree(t)
	l := topo.Links[3]
	f := &finder{jobs: map[fabric.PortRef][]Job{l.A: {{ID: "7", User: "carol"}}}}
	c := Config{}.WithDefaults()
	rule(c, "link_flapping").Threshold = 2
	e := NewEngine(only(c, "link_flapping", "fabric_changed"), f)
	t0 := time.Unix(1_700_000_000, 0)
	e.Evaluate(Input{Time: t0, Topology: topo})
	down := fabric.Event{Time: t0.Add(time.Second), Kind: fabric.EventLinkDown, Node: l.A.GUID, Port: l.A.Port, Detail: "link " + l.ID() + " down"}
	ch := e.Evaluate(Input{Time: t0.Add(time.Second), Events: []fabric.Event{down}})
	if len(ch) != 1 || ch[0].Rule != "fabric_changed" || ch[0].Event != "link_down" || ch[0].Subject.Link != l.ID() || ch[0].JobList() != "7 (carol)" {
		t.Fatalf("link down: %+v", ch)
	}
	up := down
	up.Time, up.Kind = t0.Add(2*time.Second), fabric.EventLinkUp
	ch = e.Evaluate(Input{Time: t0.Add(2 * time.Second), Topology: topo, Events: []fabric.Event{up}})
	var rules []string
	for _, a := range ch {
		rules = append(rules, a.Rule+":"+a.Event)
	}
	slices.Sort(rules)
	if !slices.Equal(rules, []string{"fabric_changed:link_up", "link_flapping:"}) {
		t.Fatalf("link up: %v", rules)
	}
	ch = e.Evaluate(Input{Time: t0.Add(16 * time.Minute), Topology: topo})
	if len(ch) != 3 {
		t.Fatalf("after 16m: %d resolved, want 3", len(ch))
	}
}

func TestLinkDegraded(t *testing.T) {
	topo := tree(t)
	links := slices.Clone(topo.Links)
	links[2].Width = "1X"
	slow, err := fabric.NewTopology(topo.Nodes, links)
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(only(Config{}.WithDefaults(), "link_degraded"), nil)
	ch := e.Evaluate(Input{Time: time.Now(), Topology: slow})
	if len(ch) != 1 || ch[0].Subject.Link != links[2].ID() || !strings.Contains(ch[0].Summary, "below 4X EDR") {
		t.Fatalf("%+v", ch)
	}
	if ch := e.Evaluate(Input{Time: time.Now(), Topology: topo}); len(ch) != 1 || ch[0].State != Resolved {
		t.Fatalf("repaired: %+v", ch)
	}
	c := Config{}.WithDefaults()
	rule(c, "link_degraded").Width, rule(c, "link_degraded").Speed = "4X", "HDR"
	if ch := NewEngine(only(c, "link_degraded"), nil).Evaluate(Input{Time: time.Now(), Topology: topo}); len(ch) != len(topo.Links) {
		t.Fatalf("every EDR link is below HDR: %d alerts", len(ch))
	}

	// What both ends support and have enabled (PortInfo, from discovery)
	// decides when the topology says: one link could do HDR, another is
	// at its best although the other links are faster.
	links = slices.Clone(topo.Links)
	for i := range links {
		links[i].MaxWidth, links[i].MaxSpeed = links[i].Width, links[i].Speed
	}
	links[1].MaxSpeed = "HDR"
	links[3].Width, links[3].MaxWidth = "1X", "1X"
	capable, err := fabric.NewTopology(topo.Nodes, links)
	if err != nil {
		t.Fatal(err)
	}
	ch = NewEngine(only(Config{}.WithDefaults(), "link_degraded"), nil).Evaluate(Input{Time: time.Now(), Topology: capable})
	if len(ch) != 1 || ch[0].Subject.Link != links[1].ID() || !strings.Contains(ch[0].Summary, "below 4X HDR") {
		t.Fatalf("against the ports' capabilities: %+v", ch)
	}

	// Ethernet: one lane of the whole rate (what the Ethernet source
	// reads from ifHighSpeed). A 10GbE link among 100GbE ones is degraded,
	// named in Ethernet's terms; every link at 100GbE is not.
	links = slices.Clone(topo.Links)
	for i := range links {
		links[i].Width, links[i].Speed = "1X", "100GbE"
	}
	eth, err := fabric.NewTopology(topo.Nodes, links)
	if err != nil {
		t.Fatal(err)
	}
	if ch := NewEngine(only(Config{}.WithDefaults(), "link_degraded"), nil).Evaluate(Input{Time: time.Now(), Topology: eth}); len(ch) != 0 {
		t.Fatalf("healthy Ethernet fabric: %+v", ch)
	}
	links[4].Speed = "10GbE"
	if eth, err = fabric.NewTopology(topo.Nodes, links); err != nil {
		t.Fatal(err)
	}
	ch = NewEngine(only(Config{}.WithDefaults(), "link_degraded"), nil).Evaluate(Input{Time: time.Now(), Topology: eth})
	if len(ch) != 1 || ch[0].Subject.Link != links[4].ID() || !strings.Contains(ch[0].Summary, "up at 1X 10GbE, below 1X 100GbE") {
		t.Fatalf("a 10GbE link among 100GbE ones: %+v", ch)
	}
	c = Config{}.WithDefaults()
	rule(c, "link_degraded").Width, rule(c, "link_degraded").Speed = "1X", "400GbE"
	if ch := NewEngine(only(c, "link_degraded"), nil).Evaluate(Input{Time: time.Now(), Topology: eth}); len(ch) != len(links) {
		t.Fatalf("every link is below the rule's 400GbE: %d alerts", len(ch))
	}
}

func TestCongestionAndUtilizationHold(t *testing.T) {
	topo := tree(t)
	l := topo.Links[5]
	capacity := l.Capacity()
	e := NewEngine(only(Config{}.WithDefaults(), "port_congestion", "link_utilization"), nil)
	t0 := time.Unix(1_700_000_000, 0)
	load := map[fabric.PortRef]map[fabric.Counter]uint64{l.A: {
		fabric.XmitWait: uint64(0.5 * capacity * 10 / 4), fabric.XmitData: uint64(0.95 * capacity * 10)}}
	var fired []string
	for i := range 40 { // 400 s of sweeps: congestion holds 1m, utilization 5m
		for _, a := range e.Evaluate(sweepAt(topo, t0.Add(time.Duration(i)*10*time.Second), load)) {
			fired = append(fired, a.Rule+"@"+(time.Duration(i)*10*time.Second).String())
			if *a.Subject.Port != l.A || a.Subject.Kind != "direction" {
				t.Errorf("%s: subject %+v", a.Rule, a.Subject)
			}
		}
	}
	if !slices.Equal(fired, []string{"port_congestion@1m0s", "link_utilization@5m0s"}) {
		t.Errorf("fired %v", fired)
	}
	all := e.Alerts()
	if len(all) != 2 || all[0].Value < 0.49 || all[0].Value > 0.51 && all[0].Value < 0.94 {
		t.Errorf("values %+v", all)
	}
}

func TestUnreachableAndBehind(t *testing.T) {
	topo := tree(t)
	p := topo.Links[0].B
	e := NewEngine(only(Config{}.WithDefaults(), "port_unreachable", "daemon_behind"), nil)
	t0 := time.Unix(1_700_000_000, 0)
	in := Input{Time: t0, Topology: topo, Unreachable: map[fabric.PortRef]time.Time{p: t0}, Behind: []string{"3 store writes dropped"}, BehindSince: t0}
	if ch := e.Evaluate(in); len(ch) != 0 {
		t.Fatalf("fired before 1m: %+v", ch)
	}
	in.Time = t0.Add(61 * time.Second)
	ch := e.Evaluate(in)
	if len(ch) != 2 || ch[0].StartsAt != in.Time || ch[0].ActiveAt != t0 {
		t.Fatalf("%+v", ch)
	}
	in.Time, in.Unreachable, in.Behind = t0.Add(70*time.Second), nil, nil
	if ch := e.Evaluate(in); len(ch) != 2 || ch[0].State != Resolved {
		t.Fatalf("%+v", ch)
	}
}

// TestNotifier posts to a stand-in HTTP server the way Alertmanager's v2
// API and a webhook receive alerts (the real Alertmanager is in
// test/e2e/alerts_test.go).
func TestNotifier(t *testing.T) {
	var mu sync.Mutex
	got := map[string][][]byte{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got[r.URL.Path] = append(got[r.URL.Path], b)
		mu.Unlock()
	}))
	defer srv.Close()
	n := NewNotifier(Config{Alertmanagers: []string{srv.URL}, Webhooks: []string{srv.URL + "/hook"}, ResendInterval: time.Second,
		ExternalURL: "https://netloom.example"}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.Run(ctx)
	p := fabric.PortRef{GUID: 0x10, Port: 3}
	a := Alert{ID: "abc", Rule: "port_errors", Severity: "warning", State: Firing, Subject: Subject{Kind: "port", Port: &p, Node: "sw1"},
		Counter: "symbol_errors", Value: 12, Threshold: 10, Summary: "symbol_errors rose", StartsAt: time.Now(), Jobs: []Job{{ID: "1", User: "u"}}}
	n.Send(Update{Changed: []Alert{a}, Firing: []Alert{a}})
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		done := len(got["/api/v2/alerts"]) >= 2 && len(got["/hook"]) >= 1 // sent, then resent
		mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("got %d posts", len(got))
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	var am []postable
	if err := json.Unmarshal(got["/api/v2/alerts"][1], &am); err != nil {
		t.Fatal(err)
	}
	if len(am) != 1 || am[0].Labels["node"] != "sw1" || am[0].Annotations["jobs"] != "1 (u)" ||
		am[0].GeneratorURL != "https://netloom.example/alerts?alert=abc" || !am[0].EndsAt.After(time.Now()) {
		t.Errorf("alertmanager body %+v", am)
	}
	var wh WebhookPayload
	if err := json.Unmarshal(got["/hook"][0], &wh); err != nil || len(wh.Alerts) != 1 || wh.Alerts[0].Labels["alertname"] != "port_errors" {
		t.Errorf("webhook body %s: %v", got["/hook"][0], err)
	}
}

// TestDefaultsFireOnChange: a fabric whose counters were never cleared
// (symbol errors at their 16-bit maximum, link integrity errors at 15 on
// many ports) fires nothing at the first sweeps under the defaults, nor
// while they do not move or trickle; an increase fires port_errors at
// once. A config that turns port_errors_total on (the old default) fires
// on the readings.
func TestDefaultsFireOnChange(t *testing.T) {
	topo := tree(t)
	t0 := time.Unix(1_700_000_000, 0)
	read := func(at time.Time, bump map[fabric.PortRef]uint64) Input {
		in := Input{Time: at, Topology: topo, SweepTime: at, Readings: map[fabric.PortRef]*fabric.PortReading{}, Samples: map[fabric.PortRef]*fabric.PortSample{}}
		for _, l := range topo.Links {
			for _, p := range []fabric.PortRef{l.A, l.B} {
				r := &fabric.PortReading{Port: p, Time: at}
				r.V[fabric.SymbolErrors], r.V[fabric.LinkIntegrityErrors], r.V[fabric.XmitDiscards] = 65535-bump[p], 15, 20000
				in.Readings[p] = r
				if !at.Equal(t0) { // no sample at the first sweep
					s := &fabric.PortSample{Port: p, Time: at, Span: 10 * time.Second}
					s.Delta[fabric.SymbolErrors] = bump[p]
					in.Samples[p] = s
				}
			}
		}
		return in
	}
	e := NewEngine(Config{}.WithDefaults(), nil)
	trickle := topo.Links[1].A
	for i := range 30 {
		at := t0.Add(time.Duration(i) * 10 * time.Second)
		var bump map[fabric.PortRef]uint64
		if i%20 == 5 { // one error every 200 s on one port
			bump = map[fabric.PortRef]uint64{trickle: 1}
		}
		for _, a := range e.Evaluate(read(at, bump)) {
			t.Errorf("at %s: %s fired: %s", at.Sub(t0), a.Rule, a.Summary)
		}
	}
	bad := topo.Links[2].B
	ch := e.Evaluate(read(t0.Add(300*time.Second), map[fabric.PortRef]uint64{bad: 12}))
	if len(ch) != 1 || ch[0].Rule != "port_errors" || *ch[0].Subject.Port != bad || ch[0].Value != 12 {
		t.Fatalf("12 errors in a sweep: %+v", ch)
	}

	c, err := parse(t, "alerting:\n  rules:\n    - {name: port_errors_total, disabled: false}\n")
	if err != nil {
		t.Fatal(err)
	}
	old := NewEngine(only(c, "port_errors_total"), nil)
	if ch := old.Evaluate(read(t0, nil)); len(ch) != 2*2*len(topo.Links) {
		t.Errorf("port_errors_total turned on: %d alerts at the first sweep, want 2 per port (symbol errors, discards)", len(ch))
	}
}

// TestSlowErrorsCompact: port_errors_slow counts a day of errors that
// come one per sweep, too slowly for port_errors, while the port keeps
// about a hundred entries, not one per sweep.
func TestSlowErrorsCompact(t *testing.T) {
	topo := tree(t)
	p := topo.Links[0].A
	e := NewEngine(only(Config{}.WithDefaults(), "port_errors", "port_errors_slow"), nil)
	t0 := time.Unix(1_700_000_000, 0)
	var fired []string
	const step = 40 * time.Second
	n := int(25 * time.Hour / step)
	for i := 1; i <= n; i++ {
		at := t0.Add(time.Duration(i) * step)
		for _, a := range e.Evaluate(sweepAt(topo, at, map[fabric.PortRef]map[fabric.Counter]uint64{p: {fabric.RcvErrors: 1}})) {
			fired = append(fired, fmt.Sprintf("%s %s @%s", a.Rule, a.State, at.Sub(t0)))
		}
	}
	// 100 errors after 100 sweeps; port_errors (10 in 5m) never.
	if !slices.Equal(fired, []string{"port_errors_slow firing @1h6m40s"}) {
		t.Errorf("fired %v", fired)
	}
	if h := len(e.hist[p]); h > 150 {
		t.Errorf("%d entries kept for one port after a day of errors", h)
	}
	a := e.Firing()
	// A day holds 2160 sweeps; the far edge is counted in 15-minute steps.
	if len(a) != 1 || a[0].Value < 2160 || a[0].Value > 2160+23 {
		t.Errorf("firing %+v", a)
	}
}

// TestJobsInWindow: an alert names the jobs its finder found since the
// window before it became active, running ones first, then finished
// ones latest first, marked in the job list Alertmanager gets.
func TestJobsInWindow(t *testing.T) {
	topo := tree(t)
	l := topo.Links[4]
	t0 := time.Unix(1_700_000_000, 0)
	f := &finder{jobs: map[fabric.PortRef][]Job{l.A: {
		{ID: "old", User: "ann", Bytes: 500, State: JobFinished, Start: t0.Add(-4 * time.Minute), End: t0.Add(-3 * time.Minute)},
		{ID: "late", User: "bob", Bytes: 10, State: JobFinished, Start: t0.Add(-time.Minute), End: t0.Add(-10 * time.Second)},
		{ID: "now", User: "cat", State: JobRunning, Start: t0.Add(-time.Hour)},
	}}}
	e := NewEngine(only(Config{}.WithDefaults(), "port_errors"), f)
	ch := e.Evaluate(sweepAt(topo, t0, map[fabric.PortRef]map[fabric.Counter]uint64{l.A: {fabric.SymbolErrors: 30}}))
	if len(ch) != 1 {
		t.Fatalf("%+v", ch)
	}
	a := ch[0]
	if !a.JobsSince.Equal(t0.Add(-5 * time.Minute)) {
		t.Errorf("jobs since %s, want the 5m window before %s", a.JobsSince, t0)
	}
	if got := a.JobList(); got != "now (cat), late (bob, finished), old (ann, finished)" {
		t.Errorf("job list %q", got)
	}
	if d := a.Annotations()["description"]; !strings.Contains(d, "Jobs that crossed it since 2023-11-14T22:08:20Z: now (cat), late (bob, finished)") {
		t.Errorf("description %q", d)
	}
	b, _ := json.Marshal(a)
	if !strings.Contains(string(b), `"jobs_since":"2023-11-14T22:08:20Z"`) || !strings.Contains(string(b), `"state":"finished","start":`) {
		t.Errorf("JSON %s", b)
	}
}
