// Package health turns the swept error counters of each link direction into
// its health over time: error rates, link recoveries and downs, an estimated
// bit error rate (BER) and its trend, and, for a link whose errors rise, when
// its BER is expected to cross the limit (docs/health.md).
//
// It is pure: callers hand it port samples (from the store or the sweeps)
// and a topology. Samples that span a counter reset or a saturated 32-bit
// counter are left out of every figure: their deltas count from zero or
// stop at the counter's maximum, so they say nothing about the link's
// health (a reset or a saturated counter never reads as a change).
package health

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/netloom/netloom/internal/fabric"
)

// Defaults.
const (
	// DefaultBERLimit is the bit error rate a link must stay below: the
	// InfiniBand specification's requirement for a link (1e-12), the
	// figure ibdiagnet's BER checks use too.
	DefaultBERLimit = 1e-12
	// DefaultWindow is how much history the CLI and API look at.
	DefaultWindow = time.Hour
	// DefaultHorizon is how far ahead a rising link's fit is extended to
	// rank it by risk.
	DefaultHorizon = 24 * time.Hour
)

// Fitting parameters.
const (
	// maxBins bounds the points a fit looks at: longer series are summed
	// into this many bins of adjacent samples (less noise, bounded cost).
	maxBins = 64
	// minSegment is the fewest points a rising segment has.
	minSegment = 6
	// minR2 and minT are how well a rising segment must fit a line (R²)
	// and how far its slope must stand above its standard error.
	minR2 = 0.6
	minT  = 4
	// minSegmentErrors is the fewest symbol errors a rising segment holds:
	// a handful of single errors is no trend.
	minSegmentErrors = 10
	// recentPoints is how many of the last points give a flat link's BER now.
	recentPoints = 8
	// maxRisk caps the risk a fit extended to the horizon gives.
	maxRisk = 1000
)

// Trends.
const (
	TrendNone    = "none"    // no errors in the window
	TrendUnknown = "unknown" // errors, but too few samples to tell
	TrendFlat    = "flat"
	TrendRising  = "rising"
	TrendFalling = "falling"
)

// Statuses, in the order of concern.
const (
	StatusRising    = "rising"     // errors rise; see Prediction
	StatusOverLimit = "over_limit" // BER at or above the limit, not rising
	StatusRetrained = "retrained"  // link recoveries or downs in the window
	StatusErrors    = "errors"     // errors below the limit, flat or falling
	StatusNoHistory = "no_history" // no usable sample in the window
	StatusClean     = "clean"
)

// Statuses lists every status in the order of concern.
var Statuses = []string{StatusRising, StatusOverLimit, StatusRetrained, StatusErrors, StatusNoHistory, StatusClean}

// Options tune an analysis.
type Options struct {
	// BERLimit is the threshold a prediction is about (DefaultBERLimit).
	BERLimit float64
	// Horizon is how far ahead a rising fit is extended for the risk
	// (DefaultHorizon).
	Horizon time.Duration
	// Now is the time of the analysis (the newest sample's when zero).
	Now time.Time
	// Series keeps each direction's points in the result.
	Series bool
}

func (o Options) withDefaults() Options {
	if o.BERLimit <= 0 {
		o.BERLimit = DefaultBERLimit
	}
	if o.Horizon <= 0 {
		o.Horizon = DefaultHorizon
	}
	return o
}

// Point is one sample of one receiving port: what its counters rose by in
// the interval that ended at Time.
type Point struct {
	Time                                     time.Time
	Span                                     time.Duration
	Symbol, Integrity, Rcv, Recovers, Downed uint64
	// Reset and Saturated: the sample spans a counter reset or a 32-bit
	// counter at its maximum; it is left out.
	Reset, Saturated bool
}

// PointOf takes the health counters of a port sample.
func PointOf(s *fabric.PortSample) Point {
	return Point{Time: s.Time, Span: s.Span, Symbol: s.Delta[fabric.SymbolErrors], Integrity: s.Delta[fabric.LinkIntegrityErrors],
		Rcv: s.Delta[fabric.RcvErrors], Recovers: s.Delta[fabric.LinkRecovers], Downed: s.Delta[fabric.LinkDowned],
		Reset: s.Reset, Saturated: s.Saturated}
}

func (p *Point) usable() bool { return !p.Reset && !p.Saturated && p.Span > 0 }

// Prediction is a rising link's fit and when its BER crosses the limit.
type Prediction struct {
	BERLimit float64 `json:"ber_limit"`
	// CrossesAt is when the fitted BER reaches the limit; in the past when
	// it already has (Crossed).
	CrossesAt time.Time `json:"crosses_at"`
	// InSeconds is CrossesAt less the analysis time (negative: crossed).
	InSeconds float64 `json:"in_seconds"`
	Crossed   bool    `json:"crossed"`
	// Confidence is the fit's R² (0..1) over the rising segment.
	Confidence float64 `json:"confidence"`
	// TStat is the slope over its standard error.
	TStat float64 `json:"t_stat"`
	// RisingSince is the start of the rising segment.
	RisingSince time.Time `json:"rising_since"`
	// SlopePerHour is the BER's rise per hour (errors/s per hour when the
	// link's rate is unknown), Points the samples fitted.
	SlopePerHour float64 `json:"ber_slope_per_hour"`
	Points       int     `json:"points"`
}

// SeriesPoint is one sample of a direction's history.
type SeriesPoint struct {
	Time         time.Time `json:"time"`
	Seconds      float64   `json:"seconds"`
	SymbolErrors uint64    `json:"symbol_errors"`
	Integrity    uint64    `json:"link_integrity_errors"`
	RcvErrors    uint64    `json:"rcv_errors"`
	Recovers     uint64    `json:"link_recovers"`
	Downed       uint64    `json:"link_downed"`
	BER          float64   `json:"ber"`
	// Skipped says why the sample is left out: "reset" or "saturated".
	Skipped string `json:"skipped,omitempty"`
}

// Direction is the health of one link direction: From sends, To receives
// and counts the errors.
type Direction struct {
	Link          string         `json:"link"`
	From          fabric.PortRef `json:"from"`
	To            fabric.PortRef `json:"to"`
	FromNode      string         `json:"from_node,omitempty"`
	ToNode        string         `json:"to_node,omitempty"`
	FromName      string         `json:"from_name,omitempty"` // the port's name where the fabric gives one (Ethernet: the interface)
	ToName        string         `json:"to_name,omitempty"`
	Width         string         `json:"width,omitempty"`
	Speed         string         `json:"speed,omitempty"`
	BitsPerSecond float64        `json:"bits_per_second"`

	Status string  `json:"status"`
	Risk   float64 `json:"risk"`
	Trend  string  `json:"trend"`

	// Samples used, and those left out because they span a counter reset
	// or a saturated counter; Seconds is the time the used ones measured.
	Samples   int       `json:"samples"`
	Resets    int       `json:"resets"`
	Saturated int       `json:"saturated"`
	Seconds   float64   `json:"seconds"`
	First     time.Time `json:"first,omitzero"`
	Last      time.Time `json:"last,omitzero"`

	SymbolErrors        uint64  `json:"symbol_errors"`
	LinkIntegrityErrors uint64  `json:"link_integrity_errors"`
	RcvErrors           uint64  `json:"rcv_errors"`
	LinkRecovers        uint64  `json:"link_recovers"`
	LinkDowned          uint64  `json:"link_downed"`
	SymbolRate          float64 `json:"symbol_errors_per_second"`
	IntegrityRate       float64 `json:"link_integrity_errors_per_second"`
	RcvRate             float64 `json:"rcv_errors_per_second"`
	// BER is the mean over the window, BERNow the current estimate (the
	// fit at now for a rising link, else the last few samples' mean); 0
	// when the link's width or speed is unknown.
	BER        float64     `json:"ber"`
	BERNow     float64     `json:"ber_now"`
	Prediction *Prediction `json:"prediction,omitempty"`

	Series []SeriesPoint `json:"series,omitempty"`
}

// Analyze computes the health of one direction from its receiving port's
// points (oldest first); bps is the direction's bit rate (0: unknown).
// Identity fields (Link, From, To, ...) are the caller's.
func Analyze(pts []Point, bps float64, opt Options) Direction {
	opt = opt.withDefaults()
	d := Direction{BitsPerSecond: bps, Trend: TrendNone, Status: StatusClean}
	var usable []Point
	for i := range pts {
		p := &pts[i]
		if opt.Series {
			sp := SeriesPoint{Time: p.Time, Seconds: p.Span.Seconds(), SymbolErrors: p.Symbol, Integrity: p.Integrity, RcvErrors: p.Rcv,
				Recovers: p.Recovers, Downed: p.Downed}
			switch {
			case p.Reset:
				sp.Skipped = "reset"
			case p.Saturated:
				sp.Skipped = "saturated"
			case bps > 0 && p.Span > 0:
				sp.BER = float64(p.Symbol) / (bps * p.Span.Seconds())
			}
			d.Series = append(d.Series, sp)
		}
		if p.Reset {
			d.Resets++
		} else if p.Saturated {
			d.Saturated++
		}
		if !p.usable() {
			continue
		}
		usable = append(usable, *p)
		d.SymbolErrors += p.Symbol
		d.LinkIntegrityErrors += p.Integrity
		d.RcvErrors += p.Rcv
		d.LinkRecovers += p.Recovers
		d.LinkDowned += p.Downed
		d.Seconds += p.Span.Seconds()
	}
	d.Samples = len(usable)
	if len(usable) == 0 {
		d.Status = StatusNoHistory
		return d
	}
	d.First, d.Last = usable[0].Time.Add(-usable[0].Span), usable[len(usable)-1].Time
	now := opt.Now
	if now.IsZero() {
		now = d.Last
	}
	d.SymbolRate = float64(d.SymbolErrors) / d.Seconds
	d.IntegrityRate = float64(d.LinkIntegrityErrors) / d.Seconds
	d.RcvRate = float64(d.RcvErrors) / d.Seconds
	toBER := func(rate float64) float64 {
		if bps <= 0 {
			return 0
		}
		return rate / bps
	}
	d.BER = toBER(d.SymbolRate)
	retrains := float64(d.LinkRecovers + d.LinkDowned)
	if d.SymbolErrors == 0 {
		if retrains > 0 {
			d.Status, d.Risk = StatusRetrained, retrains
		}
		if d.LinkIntegrityErrors+d.RcvErrors > 0 {
			d.Trend = TrendFlat
			if d.Status == StatusClean {
				d.Status = StatusErrors
			}
		}
		return d
	}

	bins := binned(usable)
	// Recent rate: the last few bins.
	var rs, rt float64
	for _, b := range bins[max(0, len(bins)-recentPoints):] {
		rs += float64(b.Symbol)
		rt += b.Span.Seconds()
	}
	d.BERNow = toBER(rs / rt)
	limitRate := opt.BERLimit * bps // symbol errors per second at the limit
	d.Trend = TrendUnknown
	if len(bins) >= minSegment {
		f := fitTrend(bins)
		switch {
		case f.rising:
			d.Trend = TrendRising
		case f.falling:
			d.Trend = TrendFalling
		default:
			d.Trend = TrendFlat
		}
		if f.rising {
			x := now.Sub(f.origin).Seconds()
			rateNow := max(0, f.a+f.b*x)
			d.BERNow = toBER(rateNow)
			pr := &Prediction{BERLimit: opt.BERLimit, Confidence: f.r2, TStat: f.t, RisingSince: f.since, Points: f.n}
			if bps > 0 {
				pr.SlopePerHour = f.b * 3600 / bps
				// The fit reaches the limit at xc (seconds after origin).
				// (Bounded to a century, within time.Duration.)
				xc := max(x-100*365*24*3600, min((limitRate-f.a)/f.b, x+100*365*24*3600))
				pr.CrossesAt = f.origin.Add(time.Duration(xc * float64(time.Second)))
				pr.InSeconds = xc - x
				pr.Crossed = pr.InSeconds <= 0
			} else {
				pr.SlopePerHour = f.b * 3600
			}
			d.Prediction = pr
			if bps > 0 {
				ahead := max(0, f.a+f.b*(x+opt.Horizon.Seconds()))
				d.Risk = min(maxRisk, ahead/limitRate)
			}
		}
	}
	if bps > 0 {
		d.Risk = max(d.Risk, d.BERNow/opt.BERLimit)
	}
	d.Risk += retrains
	switch {
	case d.Trend == TrendRising:
		d.Status = StatusRising
	case bps > 0 && d.BERNow >= opt.BERLimit:
		d.Status = StatusOverLimit
	case retrains > 0:
		d.Status = StatusRetrained
	default:
		d.Status = StatusErrors
	}
	return d
}

// binned sums adjacent usable points into at most maxBins bins.
func binned(pts []Point) []Point {
	if len(pts) <= maxBins {
		return pts
	}
	per := (len(pts) + maxBins - 1) / maxBins
	out := make([]Point, 0, maxBins)
	for i := 0; i < len(pts); i += per {
		b := pts[i]
		for _, p := range pts[i+1 : min(i+per, len(pts))] {
			b.Time = p.Time
			b.Span += p.Span
			b.Symbol += p.Symbol
		}
		out = append(out, b)
	}
	return out
}

// trendFit is the outcome of fitTrend: the rate (errors/s) over the newest
// segment is a + b*x, x seconds after origin.
type trendFit struct {
	rising, falling bool
	a, b, r2, t     float64
	n               int
	origin, since   time.Time
}

// fitTrend looks for the point where the rate changed: it splits the
// series at every possible point into a flat part before and a line after,
// keeps the split with the least squared error, and judges the line after
// it. A series without a change is the split at 0 (one line).
func fitTrend(bins []Point) trendFit {
	n := len(bins)
	origin := bins[0].Time.Add(-bins[0].Span)
	x := make([]float64, n)
	y := make([]float64, n)
	for i, b := range bins {
		x[i] = b.Time.Add(-b.Span / 2).Sub(origin).Seconds()
		y[i] = float64(b.Symbol) / b.Span.Seconds()
	}
	// Prefix sums.
	var sx, sy, sxx, sxy, syy = make([]float64, n+1), make([]float64, n+1), make([]float64, n+1), make([]float64, n+1), make([]float64, n+1)
	for i := range n {
		sx[i+1], sy[i+1] = sx[i]+x[i], sy[i]+y[i]
		sxx[i+1], sxy[i+1], syy[i+1] = sxx[i]+x[i]*x[i], sxy[i]+x[i]*y[i], syy[i]+y[i]*y[i]
	}
	type line struct{ a, b, sse, sxx, syy float64 }
	fitLine := func(i, j int) line { // points [i, j)
		m := float64(j - i)
		mx, my := (sx[j]-sx[i])/m, (sy[j]-sy[i])/m
		cxx := (sxx[j] - sxx[i]) - m*mx*mx
		cxy := (sxy[j] - sxy[i]) - m*mx*my
		cyy := (syy[j] - syy[i]) - m*my*my
		l := line{sxx: cxx, syy: cyy}
		if cxx > 0 {
			l.b = cxy / cxx
		}
		l.a = my - l.b*mx
		l.sse = max(0, cyy-l.b*cxy)
		return l
	}
	best, bestSSE := 0, math.Inf(1)
	for s := 0; s <= n-minSegment; s++ {
		var pre float64
		if s > 0 {
			m := float64(s)
			pre = max(0, syy[s]-sy[s]*sy[s]/m)
		}
		if e := pre + fitLine(s, n).sse; e < bestSSE*(1-1e-9) {
			best, bestSSE = s, e
		}
	}
	l := fitLine(best, n)
	m := n - best
	f := trendFit{a: l.a, b: l.b, n: m, origin: origin, since: bins[best].Time.Add(-bins[best].Span)}
	if l.syy > 0 {
		f.r2 = 1 - l.sse/l.syy
	}
	if m > 2 && l.sxx > 0 {
		se := math.Sqrt(l.sse / float64(m-2) / l.sxx)
		// A perfect line has no error: its t is capped, not infinite
		// (JSON has no infinity).
		const maxT = 1e6
		if se > 0 {
			f.t = max(-maxT, min(maxT, l.b/se))
		} else if l.b != 0 {
			f.t = math.Copysign(maxT, l.b)
		}
	}
	var errs uint64
	for _, b := range bins[best:] {
		errs += b.Symbol
	}
	start, end := l.a+l.b*x[best], l.a+l.b*x[n-1]
	significant := f.r2 >= minR2 && math.Abs(f.t) >= minT && errs >= minSegmentErrors
	// The rate must at least double (or rise from nothing) over the
	// segment: a steady rate with a slight slope is flat.
	f.rising = significant && l.b > 0 && end >= 2*max(start, 0) && end > 0
	f.falling = significant && l.b < 0 && start >= 2*max(end, 0)
	return f
}

// Report is the health of every link direction of a fabric, riskiest first.
type Report struct {
	At         time.Time      `json:"at"`
	From       time.Time      `json:"from"`
	BERLimit   float64        `json:"ber_limit"`
	Horizon    float64        `json:"horizon_seconds"`
	Links      int            `json:"links"`
	Counts     map[string]int `json:"counts"`
	Directions []Direction    `json:"directions"`
}

// Directions lists both directions of link l in t, From and To set.
func Directions(t *fabric.Topology, l *fabric.Link) [2]Direction {
	var out [2]Direction
	for i, e := range [2][2]fabric.PortRef{{l.A, l.B}, {l.B, l.A}} {
		d := Direction{Link: l.ID(), From: e[0], To: e[1], Width: l.Width, Speed: l.Speed}
		if n, ok := t.Node(e[0].GUID); ok {
			d.FromNode = n.Description
		}
		if n, ok := t.Node(e[1].GUID); ok {
			d.ToNode = n.Description
		}
		d.FromName, d.ToName = t.PortName(e[0]), t.PortName(e[1])
		out[i] = d
	}
	return out
}

// LinkBits is a link's bit rate in one direction: its data rate at its
// active width and speed (after line encoding), as the port is taken to
// receive it for the whole interval (a link signals all the time, idle or
// not); 0 when width or speed is unknown.
func LinkBits(l *fabric.Link) float64 { return l.Capacity() * 8 }

// AnalyzeDirection fills d (from Directions) from its receiving port's samples.
func AnalyzeDirection(d Direction, l *fabric.Link, samples []fabric.PortSample, opt Options) Direction {
	if !opt.Series && len(samples) > 0 && quiet(samples) {
		// The common case, a clean port: no point to fit.
		d.Status, d.Trend, d.BitsPerSecond, d.Samples = StatusClean, TrendNone, LinkBits(l), len(samples)
		for i := range samples {
			d.Seconds += samples[i].Span.Seconds()
		}
		d.First, d.Last = samples[0].Time.Add(-samples[0].Span), samples[len(samples)-1].Time
		return d
	}
	pts := make([]Point, len(samples))
	for i := range samples {
		pts[i] = PointOf(&samples[i])
	}
	h := Analyze(pts, LinkBits(l), opt)
	h.Link, h.From, h.To, h.FromNode, h.ToNode, h.Width, h.Speed = d.Link, d.From, d.To, d.FromNode, d.ToNode, d.Width, d.Speed
	return h
}

// quiet reports whether no sample counted a health error or was left out.
func quiet(samples []fabric.PortSample) bool {
	for i := range samples {
		s := &samples[i]
		if s.Reset || s.Saturated || s.Span <= 0 || s.Delta[fabric.SymbolErrors]|s.Delta[fabric.LinkIntegrityErrors]|s.Delta[fabric.RcvErrors]|
			s.Delta[fabric.LinkRecovers]|s.Delta[fabric.LinkDowned] != 0 {
			return false
		}
	}
	return true
}

// Fabric analyzes every link direction of t from samples (per receiving
// port, oldest first) and returns them riskiest first. A direction whose
// receiving port has no sample is listed with status no_history.
func Fabric(t *fabric.Topology, samples map[fabric.PortRef][]fabric.PortSample, from time.Time, opt Options) *Report {
	opt = opt.withDefaults()
	r := &Report{At: opt.Now, From: from, BERLimit: opt.BERLimit, Horizon: opt.Horizon.Seconds(), Links: len(t.Links),
		Counts: map[string]int{}, Directions: make([]Direction, 0, 2*len(t.Links))}
	// Every status is counted, 0 included, so that a page can say each.
	for _, st := range Statuses {
		r.Counts[st] = 0
	}
	for i := range t.Links {
		l := &t.Links[i]
		for _, d := range Directions(t, l) {
			h := AnalyzeDirection(d, l, samples[d.To], opt)
			r.Counts[h.Status]++
			r.Directions = append(r.Directions, h)
		}
	}
	Rank(r.Directions)
	return r
}

// Rank sorts directions riskiest first: by risk, then BER now, then
// errors, then link.
func Rank(ds []Direction) {
	slices.SortStableFunc(ds, func(x, y Direction) int {
		if c := cmp.Compare(y.Risk, x.Risk); c != 0 {
			return c
		}
		if c := cmp.Compare(y.BERNow, x.BERNow); c != 0 {
			return c
		}
		if c := cmp.Compare(y.SymbolErrors+y.LinkIntegrityErrors+y.RcvErrors, x.SymbolErrors+x.LinkIntegrityErrors+x.RcvErrors); c != 0 {
			return c
		}
		if c := cmp.Compare(x.Link, y.Link); c != 0 {
			return c
		}
		switch {
		case x.To.Less(y.To):
			return -1
		case y.To.Less(x.To):
			return 1
		}
		return 0
	})
}
