package health

import (
	"math"
	"math/rand"
	"reflect"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// series makes n points of span step whose symbol errors follow rate(x)
// (errors/s at x seconds after t0), with the counts rounded as a counter
// does: each point gets the whole errors of its cumulative count.
func series(n int, step time.Duration, rate func(x float64) float64, jitter float64, seed int64) []Point {
	rnd := rand.New(rand.NewSource(seed))
	var out []Point
	cum, last := 0.0, uint64(0)
	t := t0
	for range n {
		span := step + time.Duration((rnd.Float64()*2-1)*jitter*float64(step))
		// integrate rate over the span in small steps
		x0 := t.Sub(t0).Seconds()
		const k = 20
		for j := range k {
			x := x0 + (float64(j)+0.5)*span.Seconds()/k
			cum += rate(x) * span.Seconds() / k
		}
		t = t.Add(span)
		c := uint64(cum)
		out = append(out, Point{Time: t, Span: span, Symbol: c - last})
		last = c
	}
	return out
}

const bps = 8e9 // 4X SDR

func TestRisingPredictsCrossing(t *testing.T) {
	limitRate := 200.0 // errors/s at the limit
	opt := Options{BERLimit: limitRate / bps}
	// Clean for 20 s, then the rate rises by 5/s per second: it crosses
	// 200/s 40 s after the rise began, at x = 60 s.
	rate := func(x float64) float64 { return max(0, 5*(x-20)) }
	for seed := int64(1); seed <= 20; seed++ {
		pts := series(40, time.Second, rate, 0.2, seed) // up to x ≈ 40: half way
		now := pts[len(pts)-1].Time
		opt.Now = now
		d := Analyze(pts, bps, opt)
		if d.Trend != TrendRising || d.Status != StatusRising || d.Prediction == nil {
			t.Fatalf("seed %d: rising series read as %s/%s", seed, d.Trend, d.Status)
		}
		want := t0.Add(60 * time.Second)
		errFrac := math.Abs(d.Prediction.CrossesAt.Sub(want).Seconds()) / 40
		if errFrac > 0.25 {
			t.Errorf("seed %d: predicted crossing %s, actual %s (%.0f%% of the rise)", seed, d.Prediction.CrossesAt, want, 100*errFrac)
		}
		if s := d.Prediction.RisingSince.Sub(t0).Seconds(); s < 15 || s > 25 {
			t.Errorf("seed %d: rising since %.1f s, began at 20 s", seed, s)
		}
		if d.Prediction.Confidence < minR2 {
			t.Errorf("seed %d: confidence %.2f", seed, d.Prediction.Confidence)
		}
	}
}

func TestFlatBadLinkIsNotRising(t *testing.T) {
	opt := Options{BERLimit: 200 / bps}
	for seed := int64(1); seed <= 50; seed++ {
		pts := series(60, time.Second, func(float64) float64 { return 100 }, 0.3, seed)
		d := Analyze(pts, bps, opt)
		if d.Trend != TrendFlat || d.Prediction != nil || d.Status != StatusErrors {
			t.Fatalf("seed %d: flat series read as %s/%s (%+v)", seed, d.Trend, d.Status, d.Prediction)
		}
		if math.Abs(d.BERNow*bps-100) > 20 || math.Abs(d.Risk-0.5) > 0.1 {
			t.Errorf("seed %d: BER now %g, risk %g", seed, d.BERNow, d.Risk)
		}
	}
	// Over the limit and flat.
	pts := series(60, time.Second, func(float64) float64 { return 400 }, 0.2, 1)
	if d := Analyze(pts, bps, opt); d.Status != StatusOverLimit || d.Trend != TrendFlat {
		t.Errorf("flat over the limit: %s/%s", d.Status, d.Trend)
	}
}

func TestResetAndSaturationChangeNothing(t *testing.T) {
	opt := Options{BERLimit: 200 / bps}
	rate := func(x float64) float64 { return max(0, 5*(x-20)) }
	pts := series(40, time.Second, rate, 0.1, 3)
	base := Analyze(pts, bps, opt)
	// A reset at point 30: its delta counts from zero (less than the truth).
	reset := append([]Point(nil), pts...)
	reset[30].Reset = true
	reset[30].Symbol /= 3
	got := Analyze(reset, bps, opt)
	if got.Trend != TrendRising || got.Resets != 1 || got.Samples != base.Samples-1 {
		t.Fatalf("with a reset: %s, %d resets, %d samples", got.Trend, got.Resets, got.Samples)
	}
	if d := math.Abs(got.Prediction.CrossesAt.Sub(base.Prediction.CrossesAt).Seconds()); d > 2 {
		t.Errorf("a reset moved the predicted crossing by %.1f s", d)
	}
	// A flat link whose counter saturates: the stuck samples (0 deltas)
	// are no fall.
	flat := series(60, time.Second, func(float64) float64 { return 100 }, 0.1, 4)
	for i := 40; i < 60; i++ {
		flat[i].Saturated, flat[i].Symbol = true, 0
	}
	if d := Analyze(flat, bps, opt); d.Trend != TrendFlat || d.Saturated != 20 {
		t.Errorf("saturated flat link: %s, %d saturated", d.Trend, d.Saturated)
	}
	// A big reading once (a lifetime total) is not in any delta: clean.
	clean := series(30, time.Second, func(float64) float64 { return 0 }, 0.1, 5)
	clean[10].Reset, clean[10].Symbol = true, 50000
	if d := Analyze(clean, bps, opt); d.Status != StatusClean || d.Risk != 0 {
		t.Errorf("reset carrying a total: %s risk %g", d.Status, d.Risk)
	}
}

func TestNoHistory(t *testing.T) {
	if d := Analyze(nil, bps, Options{}); d.Status != StatusNoHistory || d.Risk != 0 {
		t.Errorf("no points: %+v", d)
	}
	if d := Analyze(nil, 0, Options{}); d.Status != StatusNoHistory {
		t.Errorf("no points, no rate: %+v", d)
	}
	// Errors but too few samples.
	pts := series(3, time.Second, func(float64) float64 { return 50 }, 0, 1)
	if d := Analyze(pts, bps, Options{}); d.Trend != TrendUnknown || d.Prediction != nil {
		t.Errorf("3 points: %s", d.Trend)
	}
	// Unknown width/speed: rates, no BER, no crossing.
	rate := func(x float64) float64 { return 5 * x }
	if d := Analyze(series(30, time.Second, rate, 0, 1), 0, Options{}); d.BER != 0 || d.Trend != TrendRising || !d.Prediction.CrossesAt.IsZero() {
		t.Errorf("unknown rate: %+v", d)
	}
}

func TestQuietFastPathMatches(t *testing.T) {
	l := fabric.NewLink(fabric.PortRef{GUID: 1, Port: 1}, fabric.PortRef{GUID: 2, Port: 1}, "4X", "EDR", "Active")
	var ss []fabric.PortSample
	for i := 1; i <= 10; i++ {
		ss = append(ss, fabric.PortSample{Time: t0.Add(time.Duration(i) * time.Second), Span: time.Second})
	}
	fast := AnalyzeDirection(Direction{}, &l, ss, Options{})
	slow := AnalyzeDirection(Direction{}, &l, ss, Options{Series: true})
	slow.Series = nil
	if !reflect.DeepEqual(fast, slow) {
		t.Errorf("fast path %+v\nfull %+v", fast, slow)
	}
}
