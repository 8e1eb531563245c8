package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
)

// healthDirection is one direction as /api/v1/health lists it.
type healthDirection struct {
	Link, Status, Trend string
	From, To            fabric.PortRef
	Risk                float64
	BERNow              float64 `json:"ber_now"`
	BitsPerSecond       float64 `json:"bits_per_second"`
	Samples, Resets     int
	SymbolErrors        uint64 `json:"symbol_errors"`
	Prediction          *struct {
		CrossesAt   time.Time `json:"crosses_at"`
		InSeconds   float64   `json:"in_seconds"`
		Confidence  float64
		RisingSince time.Time `json:"rising_since"`
	}
}

type healthReport struct {
	Directions []healthDirection
	Counts     map[string]int
}

func (r *healthReport) find(to fabric.PortRef) *healthDirection {
	for i := range r.Directions {
		if r.Directions[i].To == to {
			return &r.Directions[i]
		}
	}
	return nil
}

// TestHealthPredictsRisingLink (issue 31, items 1, 2, 4, 5): on a real
// ibsim fabric, symbol errors are raised step by step through ibsim's
// console on three host links' switch ports while the daemon sweeps: one
// whose error rate rises linearly (it crosses the test's limit RISE after
// it began), one with a constant rate at half the limit (a flat bad link),
// and one whose counter reads a high total that never moves. Half way
// through the rise both rising and flat ports are cleared (perfquery -R).
// The rising link must be ranked first with its predicted crossing within
// 25% of the rise's length of the actual crossing, the flat link must not
// be called rising, the still counter must read clean, the reset must
// change nothing, link_errors_rising must fire naming the rising link
// alone (in the API and at a webhook, delivered as every alert is), and
// `netloom health` must say the same as the API; bad input gets a 400 or
// 404 with a message, and a direction without history reads no_history.
func TestHealthPredictsRisingLink(t *testing.T) {
	f, _ := startFabric(t, 4, 4)
	topo := discoverWithTool(t, f)
	var ports [3]fabric.PortRef // rising, flat, still: switch ends of n1..n3's links
	var lids [3]int
	var bps float64
	for i := range ports {
		n, err := topo.FindNode(fmt.Sprintf("n%d", i+1))
		if err != nil {
			t.Fatal(err)
		}
		l, ok := topo.LinkAt(fabric.PortRef{GUID: n.GUID, Port: 1})
		if !ok {
			t.Fatalf("n%d has no link", i+1)
		}
		ports[i], _ = topo.Peer(fabric.PortRef{GUID: n.GUID, Port: 1})
		sw, _ := topo.Node(ports[i].GUID)
		lids[i] = int(sw.LID)
		bps = l.Capacity() * 8
	}
	if bps == 0 {
		t.Fatal("ibnetdiscover gives no width and speed for the host links")
	}
	const (
		limitRate = 100.0 // symbol errors per second at the test's limit
		rise      = 30 * time.Second
	)
	limit := limitRate / bps
	set := func(p fabric.PortRef, v uint64) error {
		return f.Console(fmt.Sprintf(`PerformanceSet "S-%016x"[%d] PortCounters.SymbolErrorCounter=%d`, uint64(p.GUID), p.Port, v))
	}
	if err := set(ports[2], 60000); err != nil { // a lifetime total, before the daemon
		t.Fatal(err)
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "netloom.db")
	cfg := filepath.Join(dir, "netloom.yaml")
	// A webhook receives the alerts as every rule's are delivered.
	var hookMu sync.Mutex
	var hooked []map[string]any
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p struct{ Alerts []map[string]any }
		if json.NewDecoder(r.Body).Decode(&p) == nil {
			hookMu.Lock()
			hooked = append(hooked, p.Alerts...)
			hookMu.Unlock()
		}
	}))
	t.Cleanup(hook.Close)
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`alerting:
  webhooks: [%q]
  rules:
    - {name: link_errors_rising, threshold: %s, window: 2m}
    - {name: port_errors, disabled: true}
    - {name: port_errors_slow, disabled: true}
`, hook.URL, strconv.FormatFloat(limit, 'g', -1, 64))), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, f, db, "--config", cfg, "--sweep-interval", "500ms")

	// The injection: the flat port from now on, the rising one from t0 on
	// (rate limitRate*(t-t0)/rise), each counter set to its series'
	// cumulative count every 100 ms; at t0+rise*0.4 both are cleared.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	start := time.Now()
	t0 := start.Add(10 * time.Second)
	var mu sync.Mutex
	var injectErr error
	resetAt := t0.Add(rise * 4 / 10)
	wg.Add(1)
	go func() {
		defer wg.Done()
		var off [2]float64
		reset := false
		cum := func(now time.Time) [2]float64 {
			x := now.Sub(t0).Seconds()
			r := 0.0
			if x > 0 {
				r = limitRate * x * x / 2 / rise.Seconds()
			}
			return [2]float64{r, limitRate / 2 * now.Sub(start).Seconds()}
		}
		for ctx.Err() == nil {
			now := time.Now()
			if !reset && now.After(resetAt) {
				for i := range 2 {
					if _, err := f.Run(ctx, "perfquery", "-R", strconv.Itoa(lids[i]), strconv.Itoa(ports[i].Port)); err != nil && ctx.Err() == nil {
						mu.Lock()
						injectErr = err
						mu.Unlock()
						return
					}
				}
				off, reset = cum(time.Now()), true
				continue
			}
			c := cum(now)
			for i := range 2 {
				if err := set(ports[i], uint64(c[i]-off[i])); err != nil && ctx.Err() == nil {
					mu.Lock()
					injectErr = err
					mu.Unlock()
					return
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	failed := func() {
		mu.Lock()
		defer mu.Unlock()
		if injectErr != nil {
			t.Fatalf("injecting errors: %v", injectErr)
		}
	}
	q := "/api/v1/health?window=2m&ber_limit=" + strconv.FormatFloat(limit, 'g', -1, 64)
	actual := t0.Add(rise)

	// Half way and later through the rise (past the reset): the ranking
	// and the prediction.
	for _, frac := range []float64{0.55, 0.75} {
		time.Sleep(time.Until(t0.Add(time.Duration(frac * float64(rise)))))
		failed()
		var rep healthReport
		if st := d.get(q, &rep); st != 200 {
			t.Fatalf("%s: %d", q, st)
		}
		if len(rep.Directions) == 0 {
			t.Fatal("no directions")
		}
		top := rep.Directions[0]
		if top.BitsPerSecond != bps {
			t.Errorf("rising link's rate: %g bit/s, ibnetdiscover's width and speed give %g", top.BitsPerSecond, bps)
		}
		if top.To != ports[0] || top.Trend != "rising" || top.Prediction == nil {
			t.Fatalf("at %.0f%% of the rise: first is %+v, want the rising link into %s", 100*frac, top, ports[0])
		}
		off := top.Prediction.CrossesAt.Sub(actual)
		t.Logf("at %.0f%% of the rise: predicted crossing %s from the actual (%.0f%% of the rise), R² %.2f, rising since %s after t0, %d resets left out",
			100*frac, off.Round(10*time.Millisecond), 100*off.Seconds()/rise.Seconds(), top.Prediction.Confidence,
			top.Prediction.RisingSince.Sub(t0).Round(10*time.Millisecond), top.Resets)
		if math.Abs(off.Seconds()) > 0.25*rise.Seconds() {
			t.Errorf("at %.0f%% of the rise: predicted crossing %s, actual %s: off by %s, more than 25%% of the rise (%s)",
				100*frac, top.Prediction.CrossesAt.Format(time.RFC3339Nano), actual.Format(time.RFC3339Nano), off, rise)
		}
		if s := top.Prediction.RisingSince.Sub(t0); s < -3*time.Second || s > rise/4 {
			t.Errorf("rising since %s after the rise began", s)
		}
		if top.Resets == 0 {
			t.Errorf("the rising port's reset is not counted as left out: %+v", top)
		}
		flat := rep.find(ports[1])
		if flat == nil || flat.Trend == "rising" || flat.Prediction != nil || flat.Status == "rising" || flat.SymbolErrors == 0 {
			t.Errorf("flat bad link: %+v", flat)
		} else if r := flat.BERNow * bps / limitRate; r < 0.3 || r > 0.7 {
			t.Errorf("flat bad link at %.2f of the limit, injected 0.5", r)
		}
		if still := rep.find(ports[2]); still == nil || still.Status != "clean" || still.SymbolErrors != 0 {
			t.Errorf("port whose counter reads 60000 and never moves: %+v", still)
		}
	}

	// The alert: on the rising link alone.
	var firing []trustAlert
	waitAPI(t, d, 20*time.Second, "link_errors_rising firing", func() bool {
		var got trustAlerts
		d.get("/api/v1/alerts", &got)
		firing = nil
		for _, a := range got.Alerts {
			if a.Rule == "link_errors_rising" && a.State == "firing" {
				firing = append(firing, a)
			}
		}
		return len(firing) > 0
	})
	l0, _ := topo.LinkAt(ports[0])
	for _, a := range firing {
		if a.Subject.Link != l0.ID() || a.Kind != "error_trend" {
			t.Errorf("link_errors_rising on %s (%s), want only %s", a.Subject.Link, a.Kind, l0.ID())
		}
	}

	waitAPI(t, d, 20*time.Second, "link_errors_rising at the webhook", func() bool {
		hookMu.Lock()
		defer hookMu.Unlock()
		for _, a := range hooked {
			if a["rule"] == "link_errors_rising" && a["state"] == "firing" {
				if sub, _ := a["subject"].(map[string]any); sub == nil || sub["link"] != l0.ID() {
					t.Errorf("webhook: link_errors_rising on %v", a["subject"])
				}
				if s, _ := a["summary"].(string); !strings.Contains(s, "rising since") || !strings.Contains(s, "bit error rate") {
					t.Errorf("webhook summary: %q", s)
				}
				return true
			}
		}
		return false
	})

	// The CLI, on the daemon's database.
	out, err := exec.Command(netloomBin, "health", "--db", db, "--window", "2m", "--ber-limit", strconv.FormatFloat(limit, 'g', -1, 64), "--json").Output()
	if err != nil {
		t.Fatalf("netloom health --json: %v", err)
	}
	var cli healthReport
	if err := json.Unmarshal(out, &cli); err != nil || len(cli.Directions) == 0 {
		t.Fatalf("netloom health --json: %v\n%s", err, tailString(string(out), 20))
	}
	if top := cli.Directions[0]; top.To != ports[0] || top.Trend != "rising" || top.Prediction == nil {
		t.Errorf("netloom health ranks first %+v", top)
	}
	text, err := exec.Command(netloomBin, "health", "--db", db, "--window", "2m", "--ber-limit", strconv.FormatFloat(limit, 'g', -1, 64)).Output()
	if err != nil {
		t.Fatalf("netloom health: %v", err)
	}
	lines := strings.Split(string(text), "\n")
	if len(lines) < 3 || !strings.Contains(lines[2], "rising") || !strings.Contains(lines[2], ports[0].String()) {
		t.Errorf("netloom health's first row is not the rising link:\n%s", text)
	}
	// The summary counts every status as the JSON does, clean and no
	// history included; a table cut by --limit says so, with the whole.
	for _, s := range []string{"clean", "no_history"} {
		if want := fmt.Sprintf(", %d %s", cli.Counts[s], strings.ReplaceAll(s, "_", " ")); !strings.Contains(lines[0], want) {
			t.Errorf("netloom health's summary lacks %q (the JSON's count):\n%s", want, lines[0])
		}
	}
	withErrors := 0
	for _, d := range cli.Directions {
		if d.Status != "clean" && d.Status != "no_history" {
			withErrors++
		}
	}
	cutOut, err := exec.Command(netloomBin, "health", "--db", db, "--window", "2m", "--ber-limit", strconv.FormatFloat(limit, 'g', -1, 64), "--limit", "1").Output()
	if err != nil {
		t.Fatalf("netloom health --limit 1: %v", err)
	}
	if want := fmt.Sprintf("showing the riskiest 1 of %d directions that counted errors", withErrors); withErrors > 1 && !strings.Contains(string(cutOut), want) {
		t.Errorf("netloom health --limit 1 does not say %q:\n%s", want, cutOut)
	} else if withErrors <= 1 {
		t.Errorf("the test's fabric has %d directions with errors: the cut is not exercised", withErrors)
	}
	if out, err := exec.Command(netloomBin, "health", "--db", db, "--window", "soon").CombinedOutput(); err == nil || !strings.Contains(string(out), "--window") {
		t.Errorf("netloom health --window soon: %v\n%s", err, out)
	} else if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Errorf("netloom health --window soon: %v, want exit status 2", err)
	}

	// Bad input and a link without history.
	for path, want := range map[string]int{
		"/api/v1/health?window=soon":                                     400,
		"/api/v1/health?window=-5m":                                      400,
		"/api/v1/health?ber_limit=2":                                     400,
		"/api/v1/health/links/0x0000000000000001:1-0x0000000000000002:1": 404,
		"/api/v1/health/links/nonsense":                                  404,
		"/api/v1/health/links/" + l0.ID() + "?window=0s":                 400,
	} {
		var e struct{ Error string }
		if st := d.get(path, &e); st != want || e.Error == "" {
			t.Errorf("%s: %d %q, want %d with a message", path, st, e.Error, want)
		}
	}
	// The host end of n4's link is not swept: that direction has no history.
	n4, _ := topo.FindNode("n4")
	l4, _ := topo.LinkAt(fabric.PortRef{GUID: n4.GUID, Port: 1})
	var one struct {
		Directions []struct {
			To     fabric.PortRef
			Status string
			Series []json.RawMessage
		}
	}
	if st := d.get("/api/v1/health/links/"+l4.ID(), &one); st != 200 || len(one.Directions) != 2 {
		t.Fatalf("/api/v1/health/links/%s: %d %+v", l4.ID(), st, one)
	}
	for _, dd := range one.Directions {
		want := "clean"
		if dd.To.GUID == n4.GUID {
			want = "no_history"
		}
		if dd.Status != want {
			t.Errorf("%s direction into %s: %s, want %s", l4.ID(), dd.To, dd.Status, want)
		}
	}
	// Every status counted, no_history and clean included: the counts add
	// up to both directions of every link the diags discovered
	// (ibnetdiscover), and the directions with no history are those into
	// the host adapters, whose ports are not swept. A list cut says its
	// total.
	var whole struct {
		Links, Total, Limit int
		Truncated           bool
		Counts              map[string]int
		Directions          []struct{ Status string }
	}
	if st := d.get("/api/v1/health?window=2m", &whole); st != 200 {
		t.Fatalf("/api/v1/health: %d", st)
	}
	hosts, sum := 0, 0
	for _, l := range topo.Links {
		for _, p := range []fabric.PortRef{l.A, l.B} {
			if n, _ := topo.Node(p.GUID); n.Type != fabric.Switch {
				hosts++
			}
		}
	}
	for st, c := range whole.Counts {
		sum += c
		listed := 0
		for _, dd := range whole.Directions {
			if dd.Status == st {
				listed++
			}
		}
		if listed != c {
			t.Errorf("health counts %d %s, lists %d", c, st, listed)
		}
	}
	if len(whole.Counts) != 6 || sum != 2*len(topo.Links) || whole.Total != sum || whole.Links != len(topo.Links) ||
		whole.Counts["no_history"] != hosts || whole.Truncated || whole.Limit != 1000 {
		t.Errorf("health: %d links, total %d, limit %d, truncated %v, counts %v; the diags: %d links, %d host ports",
			whole.Links, whole.Total, whole.Limit, whole.Truncated, whole.Counts, len(topo.Links), hosts)
	}
	var cut struct {
		Total, Limit int
		Truncated    bool
		Directions   []json.RawMessage
	}
	if d.get("/api/v1/health?window=2m&limit=5", &cut); cut.Total != whole.Total || cut.Limit != 5 || !cut.Truncated || len(cut.Directions) != 5 {
		t.Errorf("health cut to 5: %d listed of %d, limit %d, truncated %v; want 5 of %d", len(cut.Directions), cut.Total, cut.Limit, cut.Truncated, whole.Total)
	}
	var rising struct {
		Directions []struct {
			To     fabric.PortRef
			Series []struct{ Skipped string }
		}
	}
	d.get("/api/v1/health/links/"+l0.ID()+"?window=2m", &rising)
	skipped := 0
	for _, dd := range rising.Directions {
		for _, s := range dd.Series {
			if dd.To == ports[0] && s.Skipped == "reset" {
				skipped++
			}
		}
	}
	if skipped == 0 {
		t.Errorf("the rising link's series marks no sample as left out for the reset")
	}
	failed()
}
