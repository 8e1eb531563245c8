package storetest

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
)

// Reopener closes s and opens the same database again, as a restarted
// daemon would.
type Reopener func(t *testing.T, s store.Store) store.Store

// rollupSweeps writes sweeps of switches × ports every 30 s from T0 for
// the given duration and returns every sample written. Port 1 of the
// first switch is built from counter readings through fabric.Diff with a
// counter reset and a saturated 32-bit reading in the first hour, so the
// rollups see what the sweeper really stores.
func rollupSweeps(t *testing.T, s store.Store, switches, ports int, d time.Duration) []fabric.PortSample {
	t.Helper()
	ctx := context.Background()
	diffPort := fabric.PortRef{GUID: 0x1000, Port: 1}
	prev := &fabric.PortReading{Port: diffPort, Time: T0.Add(-30 * time.Second), Counters: fabric.Counters{Extended: true}}
	var all []fabric.PortSample
	for i := 0; time.Duration(i)*30*time.Second < d; i++ {
		at := T0.Add(time.Duration(i) * 30 * time.Second)
		sw := Sweep(switches, ports, i, at)
		for j := range sw {
			// Spans vary, so that the peak rate is not simply the largest delta.
			sw[j].Span = 30*time.Second + time.Duration((i*7+j)%5)*time.Second
		}
		cur := &fabric.PortReading{Port: diffPort, Time: at, Counters: prev.Counters}
		cur.V[fabric.XmitData] += uint64(1+i%7) * 1 << 30
		cur.V[fabric.RcvData] += uint64(1+i%3) * 1 << 20
		cur.V[fabric.XmitWait] += uint64(i % 11)
		switch i {
		case 37: // the switch rebooted: every counter starts again from zero
			cur.V = [fabric.NumCounters]uint64{fabric.XmitData: 4096, fabric.RcvData: 64}
		case 61: // a 32-bit counter stuck at its maximum
			cur.Extended = false
			cur.V[fabric.SymbolErrors] = 1<<16 - 1
		case 62:
			cur.Extended = true
		}
		smp := fabric.Diff(prev, cur)
		prev = cur
		for j := range sw {
			if sw[j].Port == diffPort {
				sw[j] = smp
			}
		}
		if err := s.AddPortSamples(ctx, sw); err != nil {
			t.Fatalf("sweep %d: %v", i, err)
		}
		all = append(all, sw...)
	}
	return all
}

// expectPorts rolls samples with times before until into points of the
// given width, the reference the stores are held to.
func expectPorts(samples []fabric.PortSample, width time.Duration, until time.Time) map[fabric.PortRef][]store.PortPoint {
	type key struct {
		p fabric.PortRef
		b int64
	}
	acc := map[key]*store.PortPoint{}
	maxRate := map[key]*[store.NumPeaks]float64{}
	for _, x := range samples {
		if !x.Time.Before(until) {
			continue
		}
		k := key{x.Port, floorTo(x.Time.UnixNano(), int64(width))}
		p := acc[k]
		if p == nil {
			p = &store.PortPoint{PortSample: fabric.PortSample{Port: x.Port}, Resolution: width}
			acc[k], maxRate[k] = p, new([store.NumPeaks]float64)
		}
		if x.Time.After(p.Time) {
			p.Time = x.Time
		}
		p.Span += x.Span
		for c := range x.Delta {
			if p.Delta[c]+x.Delta[c] < p.Delta[c] {
				p.Delta[c] = math.MaxUint64
			} else {
				p.Delta[c] += x.Delta[c]
			}
		}
		p.Reset = p.Reset || x.Reset
		p.Saturated = p.Saturated || x.Saturated
		p.Samples++
		for i, c := range store.PeakCounters {
			maxRate[k][i] = max(maxRate[k][i], x.Rate(c))
		}
	}
	out := map[fabric.PortRef][]store.PortPoint{}
	for k, p := range acc {
		for i := range p.Peak {
			p.Peak[i] = math.Round(maxRate[k][i])
		}
		out[k.p] = append(out[k.p], *p)
	}
	for _, l := range out {
		sort.Slice(l, func(i, j int) bool { return l[i].Time.Before(l[j].Time) })
	}
	return out
}

// mergePoints rolls points up into coarser points of width.
func mergePoints(in map[fabric.PortRef][]store.PortPoint, width time.Duration) map[fabric.PortRef][]store.PortPoint {
	out := map[fabric.PortRef][]store.PortPoint{}
	for p, l := range in {
		var cur *store.PortPoint
		var bucket int64
		for _, x := range l {
			b := floorTo(x.Time.UnixNano(), int64(width))
			if cur == nil || b != bucket {
				out[p] = append(out[p], store.PortPoint{PortSample: fabric.PortSample{Port: p}, Resolution: width})
				cur, bucket = &out[p][len(out[p])-1], b
			}
			cur.Time = x.Time
			cur.Span += x.Span
			for c := range x.Delta {
				cur.Delta[c] += x.Delta[c]
			}
			cur.Reset = cur.Reset || x.Reset
			cur.Saturated = cur.Saturated || x.Saturated
			cur.Samples += x.Samples
			for i := range cur.Peak {
				cur.Peak[i] = max(cur.Peak[i], x.Peak[i])
			}
		}
	}
	return out
}

func floorTo(v, w int64) int64 {
	q := v / w
	if v%w != 0 && v < 0 {
		q--
	}
	return q * w
}

func pointEqual(a, b store.PortPoint) bool {
	return sampleEqual(a.PortSample, b.PortSample) && a.Resolution == b.Resolution && a.Samples == b.Samples && a.Peak == b.Peak
}

// checkSeries compares a store's series of ports in [from, to] with the
// expected rollup points followed by the raw samples not rolled up.
func checkSeries(t *testing.T, s store.Store, what string, ports []fabric.PortRef, from, to time.Time,
	rolled map[fabric.PortRef][]store.PortPoint, raw []fabric.PortSample) {
	t.Helper()
	ctx := context.Background()
	got, err := s.PortSeries(ctx, ports, from, to)
	if err != nil {
		t.Fatalf("%s: PortSeries: %v", what, err)
	}
	plain, err := s.PortSamples(ctx, ports, from, to)
	if err != nil {
		t.Fatalf("%s: PortSamples: %v", what, err)
	}
	inRange := func(x time.Time) bool { return (from.IsZero() || !x.Before(from)) && (to.IsZero() || !x.After(to)) }
	for _, p := range ports {
		var want []store.PortPoint
		for _, x := range rolled[p] {
			if inRange(x.Time) {
				want = append(want, x)
			}
		}
		for _, x := range raw {
			if x.Port == p && inRange(x.Time) {
				want = append(want, store.RawPoint(x))
			}
		}
		if len(got[p]) != len(want) {
			t.Fatalf("%s: port %s: %d points, want %d", what, p, len(got[p]), len(want))
		}
		for i := range want {
			if !pointEqual(got[p][i], want[i]) {
				t.Fatalf("%s: port %s point %d:\n got %+v\nwant %+v", what, p, i, got[p][i], want[i])
			}
			if !sampleEqual(plain[p][i], want[i].PortSample) {
				t.Fatalf("%s: port %s: PortSamples %d differs from PortSeries:\n got %+v\nwant %+v", what, p, i, plain[p][i], want[i].PortSample)
			}
		}
	}
}

func allPorts(switches, ports int) []fabric.PortRef {
	var out []fabric.PortRef
	for sw := 0; sw < switches; sw++ {
		for p := 1; p <= ports; p++ {
			out = append(out, fabric.PortRef{GUID: fabric.GUID(0x1000 + sw), Port: p})
		}
	}
	return out
}

func rawAfter(samples []fabric.PortSample, t time.Time) []fabric.PortSample {
	var out []fabric.PortSample
	for _, x := range samples {
		if !x.Time.Before(t) {
			out = append(out, x)
		}
	}
	return out
}

// testPortRollups: raw samples past their retention become 5-minute points
// with exact sums, flags and peaks; queries span both; 5-minute points
// past theirs become 1-hour points; those past theirs go.
func testPortRollups(t *testing.T, s store.Store) {
	ctx := context.Background()
	const switches, ports = 2, 4
	all := rollupSweeps(t, s, switches, ports, 2*time.Hour)
	refs := allPorts(switches, ports)
	cut := T0.Add(time.Hour + 2*time.Minute) // rounded down to T0+1h
	if err := s.Prune(ctx, store.Retention{Samples: cut}); err != nil {
		t.Fatal(err)
	}
	rolled := expectPorts(all, store.Rollup5m, T0.Add(time.Hour))
	raw := rawAfter(all, T0.Add(time.Hour))
	checkSeries(t, s, "after raw expired", refs, time.Time{}, time.Time{}, rolled, raw)
	if n := len(rolled[refs[0]]); n != 12 {
		t.Fatalf("reference has %d points, want 12", n)
	}
	// The counter reset and the saturated reading show in their buckets.
	diffPoints := rolled[fabric.PortRef{GUID: 0x1000, Port: 1}]
	if !diffPoints[37*30/300].Reset || !diffPoints[61*30/300].Saturated || diffPoints[0].Reset || diffPoints[0].Saturated {
		t.Fatal("reference lost the reset or saturation flags")
	}
	// Looking back into the rolled-up past, the rollup point of the bucket
	// stands in for the latest sample; later, raw samples still answer.
	latest, err := s.LatestSamples(ctx, T0.Add(32*time.Minute+10*time.Second), time.Minute)
	if err != nil || len(latest) != len(refs) {
		t.Fatalf("LatestSamples in the rolled-up past: %d samples (%v), want %d", len(latest), err, len(refs))
	}
	for i, p := range refs {
		if want := rolled[p][6].PortSample; !sampleEqual(latest[i], want) {
			t.Fatalf("LatestSamples in the rolled-up past, port %s:\n got %+v\nwant %+v", p, latest[i], want)
		}
	}
	latest, err = s.LatestSamples(ctx, T0.Add(90*time.Minute), time.Minute)
	if err != nil || len(latest) != len(refs) {
		t.Fatalf("LatestSamples over raw samples: %d samples (%v), want %d", len(latest), err, len(refs))
	}
	for _, x := range latest {
		if !x.Time.Equal(T0.Add(90 * time.Minute)) {
			t.Fatalf("LatestSamples over raw samples: %s at %s, want the raw sample at %s", x.Port, x.Time, T0.Add(90*time.Minute))
		}
	}
	// A range across the boundary: the rollup points whose newest sample
	// is in it, then raw samples.
	from, to := T0.Add(32*time.Minute), T0.Add(70*time.Minute)
	checkSeries(t, s, "range over rollups and raw samples", refs[:3], from, to, rolled, raw)
	// Nothing is lost: every counter's total over the whole range is the
	// total of what was written.
	got, err := s.PortSamples(ctx, refs, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var sumGot, sumWant [fabric.NumCounters]uint64
	for _, l := range got {
		for _, x := range l {
			for c := range x.Delta {
				sumGot[c] += x.Delta[c]
			}
		}
	}
	for _, x := range all {
		for c := range x.Delta {
			sumWant[c] += x.Delta[c]
		}
	}
	if sumGot != sumWant {
		t.Errorf("totals after rollup:\n got %v\nwant %v", sumGot, sumWant)
	}
	st, err := s.Stats(ctx)
	if err != nil || st.PortSamples != int64(len(raw)) || st.PortRollups != int64(12*len(refs)) {
		t.Errorf("Stats = %+v (%v), want %d samples and %d rollup points", st, err, len(raw), 12*len(refs))
	}
	// Pruning again with the same retention changes nothing.
	if err := s.Prune(ctx, store.Retention{Samples: cut}); err != nil {
		t.Fatal(err)
	}
	checkSeries(t, s, "after a second prune", refs, time.Time{}, time.Time{}, rolled, raw)

	// 5-minute points past their retention become 1-hour points.
	if err := s.Prune(ctx, store.Retention{Samples: cut, PortRollups5m: T0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	hourly := mergePoints(rolled, store.Rollup1h)
	checkSeries(t, s, "after 5-minute rollups expired", refs, time.Time{}, time.Time{}, hourly, raw)
	if p := hourly[refs[0]]; len(p) != 1 || p[0].Samples != 120 {
		t.Fatalf("hourly reference: %+v", p)
	}
	// And those past theirs go.
	if err := s.Prune(ctx, store.Retention{Samples: cut, PortRollups5m: T0.Add(time.Hour), PortRollups1h: T0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	checkSeries(t, s, "after 1-hour rollups expired", refs, time.Time{}, time.Time{}, nil, raw)
	if st, _ := s.Stats(ctx); st.PortRollups != 0 || st.PortSamples != int64(len(raw)) {
		t.Errorf("Stats after every rollup expired: %+v", st)
	}
}

// testPortRollupTiers: samples whose 5-minute bucket has already expired
// go straight to the 1-hour rollup; with no rollup keeping them they go.
func testPortRollupTiers(t *testing.T, s store.Store) {
	ctx := context.Background()
	all := rollupSweeps(t, s, 1, 3, 3*time.Hour)
	refs := allPorts(1, 3)
	// Raw kept from T0+2h, 5-minute rollups from T0+1h, hourly forever.
	r := store.Retention{Samples: T0.Add(2 * time.Hour), PortRollups5m: T0.Add(time.Hour)}
	if err := s.Prune(ctx, r); err != nil {
		t.Fatal(err)
	}
	var first, second []fabric.PortSample
	for _, x := range all {
		if x.Time.Before(T0.Add(time.Hour)) {
			first = append(first, x)
		} else {
			second = append(second, x)
		}
	}
	want := mergePoints(expectPorts(first, store.Rollup5m, T0.Add(time.Hour)), store.Rollup1h)
	for p, l := range expectPorts(second, store.Rollup5m, T0.Add(2*time.Hour)) {
		want[p] = append(want[p], l...)
	}
	checkSeries(t, s, "tiers", refs, time.Time{}, time.Time{}, want, rawAfter(all, T0.Add(2*time.Hour)))
	// Rollups that keep nothing: expired raw samples are deleted.
	r = store.Retention{Samples: T0.Add(150 * time.Minute), PortRollups5m: T0.Add(3 * time.Hour), PortRollups1h: T0.Add(3 * time.Hour)}
	if err := s.Prune(ctx, r); err != nil {
		t.Fatal(err)
	}
	checkSeries(t, s, "no rollups kept", refs, time.Time{}, time.Time{}, nil, rawAfter(all, T0.Add(150*time.Minute)))
}

// testPortRollupResume stops a rollup after one step, reopens the store
// and finishes: the result is the same as in one go, and samples stored
// late for a bucket already rolled up are merged into it.
func testPortRollupResume(t *testing.T, s store.Store, reopen Reopener) store.Store {
	ctx := context.Background()
	const switches, ports = 3, 4
	all := rollupSweeps(t, s, switches, ports, time.Hour)
	refs := allPorts(switches, ports)
	r := store.Retention{Samples: T0.Add(40 * time.Minute)}
	more, err := s.PruneStep(ctx, r)
	if err != nil || !more {
		t.Fatalf("first step: more %v, %v", more, err)
	}
	// Between steps (as after a crash between transactions) every
	// sample is counted once: in a rollup point or a raw sample.
	got, err := s.PortSamples(ctx, refs, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var n, rolledN int
	var sum uint64
	for _, l := range got {
		for _, x := range l {
			n++
			sum += x.Delta[fabric.XmitPkts]
		}
	}
	var want uint64
	for _, x := range all {
		want += x.Delta[fabric.XmitPkts]
	}
	if sum != want {
		t.Fatalf("after one step: xmit_pkts total %d, want %d", sum, want)
	}
	series, _ := s.PortSeries(ctx, refs, time.Time{}, time.Time{})
	for _, l := range series {
		for _, x := range l {
			if x.Resolution > 0 {
				rolledN++
			}
		}
	}
	if rolledN == 0 || n == len(all) {
		t.Fatalf("one step rolled up nothing (%d points of %d samples); the engine's test chunk is too large for this test", n, len(all))
	}
	s = reopen(t, s)
	if err := s.Prune(ctx, r); err != nil {
		t.Fatal(err)
	}
	rolled := expectPorts(all, store.Rollup5m, T0.Add(40*time.Minute))
	checkSeries(t, s, "resumed after reopening", refs, time.Time{}, time.Time{}, rolled, rawAfter(all, T0.Add(40*time.Minute)))

	// A sweep stored late, inside a bucket already rolled up.
	late := Sweep(switches, ports, 1000, T0.Add(10*time.Minute+15*time.Second))
	if err := s.AddPortSamples(ctx, late); err != nil {
		t.Fatal(err)
	}
	if err := s.Prune(ctx, r); err != nil {
		t.Fatal(err)
	}
	all = append(all, late...)
	rolled = expectPorts(all, store.Rollup5m, T0.Add(40*time.Minute))
	checkSeries(t, s, "late samples merged", refs, time.Time{}, time.Time{}, rolled, rawAfter(all, T0.Add(40*time.Minute)))
	return s
}

// processSamples makes ranks' samples every 45 s from T0 for d. Seconds
// are multiples of 1/8, so sums are exact in any order of addition.
func processSamples(job string, ranks int, d time.Duration) []store.ProcessSample {
	var out []store.ProcessSample
	for i := 0; time.Duration(i)*45*time.Second < d; i++ {
		for r := range ranks {
			k := uint64(i*ranks + r + 1)
			span := 45*time.Second + time.Duration(i%3)*time.Second
			out = append(out, store.ProcessSample{Job: job, Rank: r, Time: T0.Add(time.Duration(i)*45*time.Second + time.Duration(r)*time.Second).UTC(), Span: span,
				CPUUser: float64(k%40) / 8, CPUSystem: float64(k%5) / 8, MPI: float64(k%17) / 8, Wait: float64(k%3) / 16,
				VmRSS: 1<<30 + k*4096, VmSize: 2<<30 + (k%9)*1<<20, IORead: k, IOWrite: 2 * k, MPIIORead: k % 3, MPIIOWrite: k % 4,
				Traffic:   store.Classes{P2P: store.Traffic{Bytes: k * 1000, Msgs: k}, Coll: store.Traffic{Bytes: k % 10 * 100, Msgs: k % 10}, RMA: store.Traffic{Bytes: 7, Msgs: 1}},
				IntraNode: store.Traffic{Bytes: k * 10, Msgs: 2}, InterNode: store.Traffic{Bytes: k * 990, Msgs: k - 1}})
		}
	}
	return out
}

// expectProcesses rolls samples before until into points of width.
func expectProcesses(in []store.ProcessSample, width time.Duration, until time.Time) map[int][]store.ProcessSample {
	type key struct {
		rank int
		b    int64
	}
	type acc struct {
		p        store.ProcessSample
		rss, vsz uint64
	}
	m := map[key]*acc{}
	for _, x := range in {
		if !x.Time.Before(until) {
			continue
		}
		k := key{x.Rank, floorTo(x.Time.UnixNano(), int64(width))}
		a := m[k]
		if a == nil {
			a = &acc{p: store.ProcessSample{Job: x.Job, Rank: x.Rank, Resolution: width}}
			m[k] = a
		}
		p := &a.p
		if x.Time.After(p.Time) {
			p.Time = x.Time
		}
		p.Span += x.Span
		p.Samples++
		p.AddUsage(&x)
		a.rss += x.VmRSS
		a.vsz += x.VmSize
		p.VmRSSMax = max(p.VmRSSMax, x.VmRSS)
		p.VmSizeMax = max(p.VmSizeMax, x.VmSize)
		p.CPUPeak = max(p.CPUPeak, (x.CPUUser+x.CPUSystem)/x.Span.Seconds())
		p.BytesPeak = max(p.BytesPeak, float64(x.Traffic.Total().Bytes)/x.Span.Seconds())
	}
	out := map[int][]store.ProcessSample{}
	for _, a := range m {
		a.p.VmRSS, a.p.VmSize = a.rss/uint64(a.p.Samples), a.vsz/uint64(a.p.Samples)
		a.p.CPUPeak, a.p.BytesPeak = math.Round(a.p.CPUPeak*1000)/1000, math.Round(a.p.BytesPeak)
		out[a.p.Rank] = append(out[a.p.Rank], a.p)
	}
	for _, l := range out {
		sort.Slice(l, func(i, j int) bool { return l[i].Time.Before(l[j].Time) })
	}
	return out
}

func checkProcesses(t *testing.T, s store.Store, what, job string, from, to time.Time, rolled map[int][]store.ProcessSample, raw []store.ProcessSample) {
	t.Helper()
	got, err := s.ProcessSamples(context.Background(), job, nil, from, to)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	in := func(x time.Time) bool { return (from.IsZero() || !x.Before(from)) && (to.IsZero() || !x.After(to)) }
	want := map[int][]store.ProcessSample{}
	for r, l := range rolled {
		for _, x := range l {
			if in(x.Time) {
				want[r] = append(want[r], x)
			}
		}
	}
	for _, x := range raw {
		if in(x.Time) {
			want[x.Rank] = append(want[x.Rank], x)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d ranks, want %d", what, len(got), len(want))
	}
	for r := range want {
		if len(got[r]) != len(want[r]) {
			t.Fatalf("%s: rank %d: %d points, want %d", what, r, len(got[r]), len(want[r]))
		}
		for i := range want[r] {
			if !reflect.DeepEqual(got[r][i], want[r][i]) {
				t.Fatalf("%s: rank %d point %d:\n got %+v\nwant %+v", what, r, i, got[r][i], want[r][i])
			}
		}
	}
}

func rawProcessesAfter(in []store.ProcessSample, t time.Time) []store.ProcessSample {
	var out []store.ProcessSample
	for _, x := range in {
		if !x.Time.Before(t) {
			out = append(out, x)
		}
	}
	return out
}

// testProcessRollups: per rank and bucket, traffic, I/O and CPU sums, mean
// and peak memory, peak CPU and send rate; a range over rollups and raw
// samples; 5-minute points into 1-hour points; the other job untouched
// until its own samples expire.
func testProcessRollups(t *testing.T, s store.Store) {
	ctx := context.Background()
	in := processSamples("41", 3, 2*time.Hour)
	other := processSamples("42", 1, 2*time.Hour)
	for i := range other {
		other[i].Time = other[i].Time.Add(3 * time.Hour)
	}
	for _, batch := range [][]store.ProcessSample{in, other} {
		if err := s.AddProcessSamples(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	r := store.Retention{ProcessSamples: T0.Add(time.Hour)}
	if err := s.Prune(ctx, r); err != nil {
		t.Fatal(err)
	}
	rolled := expectProcesses(in, store.Rollup5m, T0.Add(time.Hour))
	if len(rolled[0]) != 12 || rolled[0][0].Samples != 7 {
		t.Fatalf("reference: %d points, first of %d samples", len(rolled[0]), rolled[0][0].Samples)
	}
	checkProcesses(t, s, "after raw expired", "41", time.Time{}, time.Time{}, rolled, rawProcessesAfter(in, T0.Add(time.Hour)))
	checkProcesses(t, s, "other job", "42", time.Time{}, time.Time{}, nil, other)
	checkProcesses(t, s, "range over rollups and raw samples", "41", T0.Add(20*time.Minute), T0.Add(75*time.Minute),
		rolled, rawProcessesAfter(in, T0.Add(time.Hour)))
	got, err := s.ProcessSamples(ctx, "41", []int{2}, time.Time{}, T0.Add(30*time.Minute))
	if err != nil || len(got) != 1 || len(got[2]) != 6 {
		t.Errorf("rank 2 until T0+30m: %d points (%v), want 6", len(got[2]), err)
	}
	// 5-minute points into 1-hour points.
	r.ProcessRollups5m = T0.Add(time.Hour)
	if err := s.Prune(ctx, r); err != nil {
		t.Fatal(err)
	}
	hourly := expectProcesses(in, store.Rollup1h, T0.Add(time.Hour))
	checkProcesses(t, s, "after 5-minute rollups expired", "41", time.Time{}, time.Time{}, hourly, rawProcessesAfter(in, T0.Add(time.Hour)))
	// And then gone.
	r.ProcessRollups1h = T0.Add(time.Hour)
	if err := s.Prune(ctx, r); err != nil {
		t.Fatal(err)
	}
	checkProcesses(t, s, "after 1-hour rollups expired", "41", time.Time{}, time.Time{}, nil, rawProcessesAfter(in, T0.Add(time.Hour)))
	checkProcesses(t, s, "other job at the end", "42", time.Time{}, time.Time{}, nil, other)
}

// testProcessRollupResume: one step, reopen, finish: the same as in one go.
func testProcessRollupResume(t *testing.T, s store.Store, reopen Reopener) store.Store {
	ctx := context.Background()
	var all []store.ProcessSample
	for j := range 3 {
		in := processSamples(fmt.Sprintf("j%d", j), 4, time.Hour)
		if err := s.AddProcessSamples(ctx, in); err != nil {
			t.Fatal(err)
		}
		all = append(all, in...)
	}
	r := store.Retention{ProcessSamples: T0.Add(30 * time.Minute)}
	if more, err := s.PruneStep(ctx, r); err != nil || !more {
		t.Fatalf("first step: more %v, %v", more, err)
	}
	s = reopen(t, s)
	if err := s.Prune(ctx, r); err != nil {
		t.Fatal(err)
	}
	for j := range 3 {
		job := fmt.Sprintf("j%d", j)
		var in []store.ProcessSample
		for _, x := range all {
			if x.Job == job {
				in = append(in, x)
			}
		}
		checkProcesses(t, s, "resumed "+job, job, time.Time{}, time.Time{}, expectProcesses(in, store.Rollup5m, T0.Add(30*time.Minute)),
			rawProcessesAfter(in, T0.Add(30*time.Minute)))
	}
	return s
}

// testPruneKinds prunes one kind of data at a time and checks the others
// are left as they were.
func testPruneKinds(t *testing.T, s store.Store) {
	ctx := context.Background()
	const hours = 4
	for i := 0; i < hours; i++ {
		at := T0.Add(time.Duration(i) * time.Hour)
		if err := s.AddPortSamples(ctx, Sweep(2, 2, i, at)); err != nil {
			t.Fatal(err)
		}
		if err := s.AddEvents(ctx, []fabric.Event{{Time: at, Kind: fabric.EventLinkUp, Node: 0x1000, Detail: "x"}}); err != nil {
			t.Fatal(err)
		}
		speed := []string{"EDR", "HDR"}[i%2]
		if _, _, err := s.SaveTopology(ctx, Topo(2, 2, speed), at); err != nil {
			t.Fatal(err)
		}
		if err := s.AddProcessSamples(ctx, []store.ProcessSample{{Job: "run", Rank: 0, Time: at, Span: time.Minute, CPUUser: 1}}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddLinkJobSamples(ctx, []store.LinkJobSample{{Time: at, Span: time.Minute, Job: "run", Port: fabric.PortRef{GUID: 0x1000, Port: 1}, Bytes: 10}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, j := range []*store.Job{Job("run", 1, T0, store.JobRunning), Job("done", 1, T0, store.JobFinished)} {
		if err := s.SaveJob(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	type counts struct{ samples, rollups, events, versions, jobs, procs, links int }
	count := func() counts {
		var c counts
		st, err := s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c.samples, c.rollups, c.events, c.versions, c.jobs = int(st.PortSamples), int(st.PortRollups), int(st.Events), int(st.Versions), int(st.Jobs)
		ps, err := s.ProcessSamples(ctx, "run", nil, time.Time{}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		c.procs = len(ps[0])
		lj, err := s.LinkJobs(ctx, nil, time.Time{}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range lj {
			c.links += int(x.Bytes / 10)
		}
		return c
	}
	before := count()
	if before != (counts{samples: hours * 4, events: hours, versions: hours, jobs: 2, procs: hours, links: hours}) {
		t.Fatalf("before pruning: %+v", before)
	}
	limit := T0.Add(90 * time.Minute) // keeps the last 2 of 4 hourly writes
	gone := T0.Add(2 * time.Hour)     // rollups that keep nothing before it
	cases := []struct {
		name string
		r    store.Retention
		edit func(c *counts)
	}{
		{"samples", store.Retention{Samples: limit, PortRollups5m: gone, PortRollups1h: gone}, func(c *counts) { c.samples = 2 * 4 }},
		{"events", store.Retention{Events: limit}, func(c *counts) { c.events = 2 }},
		{"topology", store.Retention{Topology: limit}, func(c *counts) { c.versions = 3 }}, // and the one in force at the limit
		{"process samples", store.Retention{ProcessSamples: limit, ProcessRollups5m: gone, ProcessRollups1h: gone}, func(c *counts) { c.procs = 2 }},
		{"link attribution", store.Retention{LinkJobSamples: limit}, func(c *counts) { c.links = 2 }},
		{"jobs", store.Retention{Jobs: T0.Add(time.Hour)}, func(c *counts) { c.jobs = 1 }},
	}
	want := before
	for _, tc := range cases {
		if err := s.Prune(ctx, tc.r); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		tc.edit(&want)
		if got := count(); got != want {
			t.Errorf("after pruning %s: %+v, want %+v", tc.name, got, want)
		}
	}
	if _, err := s.Job(ctx, "run"); err != nil {
		t.Errorf("running job after pruning jobs: %v", err)
	}
}
