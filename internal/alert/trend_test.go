package alert

import (
	"strings"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
)

type fakeFinder struct{ asked [][]fabric.PortRef }

func (f *fakeFinder) JobsCrossing(ports []fabric.PortRef, since time.Time) []Job {
	f.asked = append(f.asked, ports)
	return []Job{{ID: "42", User: "ana", State: JobRunning}}
}

func TestErrorTrendConfig(t *testing.T) {
	c, err := parse(t, "alerting:\n  rules:\n    - {name: link_errors_rising, threshold: 1.25e-08, window: 2m}\n")
	if err != nil {
		t.Fatal(err)
	}
	if r := rule(c, "link_errors_rising"); r == nil || r.Kind != ErrorTrend || r.Threshold != 1.25e-8 || r.Window != 2*time.Minute {
		t.Fatalf("rule: %+v", r)
	}
	for _, bad := range []string{"threshold: 2", "threshold: 0", "window: 10s"} {
		_, err := parse(t, "alerting:\n  rules:\n    - {name: link_errors_rising, "+bad+"}\n")
		if err == nil || !strings.Contains(err.Error(), "error_trend") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func TestErrorTrendFiresOnRiseOnly(t *testing.T) {
	a, b := fabric.PortRef{GUID: 0x10, Port: 1}, fabric.PortRef{GUID: 0x20, Port: 1}
	c, d := fabric.PortRef{GUID: 0x10, Port: 2}, fabric.PortRef{GUID: 0x20, Port: 2}
	topo, err := fabric.NewTopology([]fabric.Node{{GUID: 0x10, Type: fabric.Switch, Description: "s1", Ports: 2, LID: 1},
		{GUID: 0x20, Type: fabric.Switch, Description: "s2", Ports: 2, LID: 2}},
		[]fabric.Link{fabric.NewLink(a, b, "4X", "SDR", "Active"), fabric.NewLink(c, d, "4X", "SDR", "Active")})
	if err != nil {
		t.Fatal(err)
	}
	bps := 8e9
	limit := 100 / bps // 100 errors/s
	cfg := Config{Rules: []Rule{{Name: "link_errors_rising", Kind: ErrorTrend, Threshold: limit, Window: 2 * time.Minute, Severity: "warning"}}}
	f := &fakeFinder{}
	eng := NewEngine(cfg, f)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var fired []Alert
	for i := 1; i <= 40; i++ {
		now := t0.Add(time.Duration(i) * time.Second)
		rise := &fabric.PortSample{Port: b, Time: now, Span: time.Second}
		rise.Delta[fabric.SymbolErrors] = uint64(3 * i) // into b: rising, crosses 100/s at 33 s
		flat := &fabric.PortSample{Port: d, Time: now, Span: time.Second}
		flat.Delta[fabric.SymbolErrors] = uint64(80 + 10*(i%2)) // into d: flat below the limit
		if i == 20 {
			rise.Reset, rise.Delta[fabric.SymbolErrors] = true, 5
		}
		in := Input{Time: now, Topology: topo, SweepTime: now, Samples: map[fabric.PortRef]*fabric.PortSample{b: rise, d: flat}}
		fired = append(fired, eng.Evaluate(in)...)
	}
	if len(fired) != 1 || fired[0].Subject.Kind != "direction" || *fired[0].Subject.Port != a || *fired[0].Subject.Remote != b {
		t.Fatalf("fired: %+v", fired)
	}
	x := fired[0]
	if x.Kind != ErrorTrend || !strings.Contains(x.Summary, "rising since") || len(x.Jobs) != 1 || x.Jobs[0].ID != "42" {
		t.Errorf("alert: %+v", x)
	}
	if len(f.asked) == 0 || len(f.asked[0]) != 2 {
		t.Errorf("jobs asked for %v, want both ends of the link", f.asked)
	}
	if x.ActiveAt.After(t0.Add(10 * time.Second)) {
		t.Errorf("active since %s, rising since the start", x.ActiveAt)
	}
}
