package api

import (
	"strings"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/analysis"
	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
)

// TestCounterWindow: a direction is measured by its sending port's
// transmit counter, else its receiving port's receive counter, over the
// samples in the window, which cover it as far as their spans reach.
func TestCounterWindow(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	src, dst := fabric.PortRef{GUID: 1, Port: 1}, fabric.PortRef{GUID: 2, Port: 3}
	sample := func(p fabric.PortRef, end float64, xmit, rcv uint64) fabric.PortSample {
		var d [fabric.NumCounters]uint64
		d[fabric.XmitData], d[fabric.RcvData] = xmit, rcv
		return fabric.PortSample{Port: p, Time: at(end), Span: 2 * time.Second, Delta: d}
	}
	// Only the receiving end swept (a host adapter's link: its switch end).
	samples := map[fabric.PortRef][]fabric.PortSample{dst: {
		sample(dst, 1, 5, 100), sample(dst, 3, 5, 200), sample(dst, 5, 5, 400), sample(dst, 9, 5, 800),
	}}
	w := counterWindow(samples, src, dst, at(0), at(6), at(100))
	// Samples ending at 1, 3 and 5 s cover 0..5 (the first one's span from
	// -1 s clipped at 0); 5..6 s is not covered yet.
	if w.Bytes != 700 || w.Samples != 3 || !w.Swept || w.Covered != 5*time.Second || w.Length != 6*time.Second {
		t.Errorf("receive side: %+v", w)
	}
	samples[src] = []fabric.PortSample{sample(src, 4, 1000, 7)}
	samples[src][0].Saturated = true
	if w := counterWindow(samples, src, dst, at(0), at(6), at(100)); w.Bytes != 1000 || !w.Saturated || w.Samples != 1 {
		t.Errorf("sending side: %+v", w)
	}
	// A window reaching past now is as long as up to now.
	if w := counterWindow(samples, src, dst, at(0), at(60), at(10)); w.Length != 10*time.Second {
		t.Errorf("window into the future: %+v", w)
	}
	if w := counterWindow(samples, src, dst, at(20), at(30), at(100)); w.Swept || w.Bytes != 0 {
		t.Errorf("window with no sample: %+v", w)
	}
}

// TestDirectionCheck: the explained figure is the ratio as measured, over
// 100% too, and its check says when the jobs put far more on the direction than was measured; an
// anonymized job is never named in it.
func TestDirectionCheck(t *testing.T) {
	const capacity, seconds = 25e9, 10.0
	link := linkEnds{Capacity: capacity}
	d := directionJSON{Measured: measured{Bytes: 13_000, Measured: true}, Jobs: []dirJob{
		{Job: "mine", Link: link, Bytes: 300e9},
		{Job: "theirs", Link: link, Bytes: 10e9, logical: true},
	}}
	win := analysis.CounterWindow{Bytes: 13_000, Swept: true, Samples: 5, Covered: 10 * time.Second, Length: 10 * time.Second}
	d.check = analysis.ExplainedInput{Range: win, Wide: win, Host: "n7 HCA-1", HostNodes: []analysis.MappedName{{Name: "n3", By: analysis.ByMappingFile}}}
	d.total(capacity, seconds)
	if want := 100 * 310e9 / 13_000; d.Explained == nil || *d.Explained != want {
		t.Fatalf("explained %v, want %v (as measured)", d.Explained, want)
	}
	if d.Check.Status != analysis.CheckInconsistent || d.Check.Cause != analysis.CauseNodeMap ||
		!strings.Contains(d.Check.Message, "310 GB") || !strings.Contains(d.Check.Message, "n3 (by the node-map file)") {
		t.Errorf("check: %+v", d.Check)
	}
	// The logical job, seen by another user: anonymized in the check too.
	d.Jobs[1].Job, d.Jobs[1].Anonymized = "other-1", true
	d.Measured.Bytes, d.check.Range.Bytes, d.check.Wide.Bytes = 200e9, 200e9, 200e9
	coarsenDirection(&d, capacity, seconds)
	if d.Check.Cause != analysis.CauseLogical || !strings.Contains(d.Check.Message, ": another user's job counted") || strings.Contains(d.Check.Message, "other-1") || strings.Contains(d.Check.Message, "theirs") {
		t.Errorf("logical check: %+v", d.Check)
	}
	if !d.MonitoredRounded || d.Check.Tolerance < d.Monitored/20 {
		t.Errorf("rounded monitored bytes get the rounding's tolerance: %+v", d.Check)
	}
}

// TestInfoOf: a job's span ends at its end, or its last update when it
// finished without one; a running job's is open.
func TestInfoOf(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	run := infoOf(&store.JobSummary{State: store.JobRunning, Start: t0, End: t0.Add(time.Hour)})
	if !run.Span.End.IsZero() || !run.Span.Start.Equal(t0) {
		t.Errorf("running: %+v", run.Span)
	}
	done := infoOf(&store.JobSummary{State: store.JobFinished, Start: t0, Updated: t0.Add(time.Minute)})
	if !done.Span.End.Equal(t0.Add(time.Minute)) {
		t.Errorf("finished without an end: %+v", done.Span)
	}
	logical := infoOf(&store.JobSummary{TrafficModel: "logical", Traffic: store.Classes{Coll: store.Traffic{Bytes: 1}}})
	physical := infoOf(&store.JobSummary{TrafficModel: store.TrafficPhysical, Traffic: store.Classes{Coll: store.Traffic{Bytes: 1}}})
	if !logical.Logical || physical.Logical {
		t.Errorf("logical %v, physical %v", logical.Logical, physical.Logical)
	}
}
