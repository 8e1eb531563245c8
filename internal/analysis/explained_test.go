package analysis

import (
	"strings"
	"testing"
	"time"
)

func swept(bytes uint64, samples int, covered, length time.Duration) CounterWindow {
	return CounterWindow{Bytes: bytes, Swept: true, Samples: samples, Covered: covered, Length: length}
}

// TestCheckExplained: what the jobs put on a direction is checked against
// what its counters measured, within counter granularity and timing; a
// disagreement beyond them names its likely cause; a figure over 100%
// within them says why; every sentence names the one measured figure
// shown beside it (the range's); a fabric whose counters carry none of the
// jobs' traffic says so instead of blaming a job.
func TestCheckExplained(t *testing.T) {
	const s = time.Second
	full := swept(1_000_000, 10, 10*s, 10*s)
	for _, tc := range []struct {
		name          string
		in            ExplainedInput
		status, cause string
		says          []string
	}{
		{name: "the jobs explain part of what was measured",
			in:     ExplainedInput{Monitored: 400_000, Range: full, Wide: swept(1_200_000, 14, 14*s, 14*s)},
			status: CheckConsistent},
		{name: "within 4-byte words per sample",
			in:     ExplainedInput{Monitored: 1_000_040, Range: full, Wide: full},
			status: CheckConsistent, cause: CauseGranularity, says: []string{"Over 100%", "1.00 MB over this range, 40 B more", "4-byte words)"}},
		{name: "other users' jobs rounded to two digits",
			in:     ExplainedInput{Monitored: 1_040_000, Rounded: true, Range: full, Wide: full},
			status: CheckConsistent, cause: CauseGranularity, says: []string{"40.0 KB more", "rounded to two digits"}},
		{name: "exactly what was measured", in: ExplainedInput{Monitored: 1_000_000, Range: full, Wide: full}, status: CheckConsistent},
		{name: "nothing attributed", in: ExplainedInput{Range: full, Wide: full}, status: CheckConsistent},
		{name: "the rest counted by the sweeps just after the range",
			in:     ExplainedInput{Monitored: 1_500_000, Range: full, Wide: swept(1_600_000, 14, 14*s, 14*s)},
			status: CheckTiming, cause: CauseTiming, says: []string{"1.50 MB", "its counters measured 1.00 MB over this range: the other 500 KB were counted by the sweeps just outside it", "lag"}},
		{name: "the demo: a host link measured 13 KB where the jobs put 310 GB",
			in: ExplainedInput{Monitored: 310e9, Range: swept(13_000, 10, 10*s, 10*s), Wide: swept(13_000, 14, 14*s, 14*s),
				Host: "n7 HCA-1", HostNodes: []MappedName{{"n3", ByMappingFile}, {"n7", ByDescription}}},
			status: CheckInconsistent, cause: CauseNodeMap,
			says: []string{"310 GB", "its counters measured 13.0 KB over this range (under 0.1% of it), and even the sweeps just around the range leave 310 GB of it uncounted", "the link of n7 HCA-1", "nodes n3 (by the node-map file) and n7 (by its adapter's description) are mapped to it", "--node-map", "another network"}},
		{name: "a link that measured nothing",
			in:     ExplainedInput{Monitored: 5e6, Range: swept(0, 10, 10*s, 10*s), Wide: swept(0, 14, 14*s, 14*s), Host: "n1 HCA-1", HostNodes: []MappedName{{"n1", ByDescription}}},
			status: CheckInconsistent, cause: CauseNodeMap, says: []string{"5.00 MB on this direction, but its counters measured nothing:", "node n1 (by its adapter's description) is mapped to it"}},
		{name: "a user is not told which names map to the adapter",
			in: ExplainedInput{Monitored: 310e9, Range: swept(13_000, 10, 10*s, 10*s), Wide: swept(13_000, 14, 14*s, 14*s),
				Host: "n7 HCA-1", HostNodesHidden: true},
			status: CheckInconsistent, cause: CauseNodeMap, says: []string{"a node of the jobs is mapped to it"}},
		{name: "a link between switches",
			in:     ExplainedInput{Monitored: 5e9, Range: swept(1e6, 10, 10*s, 10*s), Wide: swept(1e6, 14, 14*s, 14*s)},
			status: CheckInconsistent, cause: CauseRoutes, says: []string{"5.00 GB", "its counters measured 1.00 MB over this range (under 0.1% of it)", "routes changed"}},
		{name: "neither end swept",
			in:     ExplainedInput{Monitored: 5e9},
			status: CheckNotMeasured, cause: CauseNotSwept, says: []string{"neither of its ports was swept"}},
		{name: "32-bit counters saturated",
			in: ExplainedInput{Monitored: 5e10, Range: swept(17e9, 10, 10*s, 10*s),
				Wide: CounterWindow{Bytes: 17e9, Swept: true, Samples: 14, Covered: 14 * s, Length: 14 * s, Saturated: true}},
			status: CheckInconsistent, cause: CauseSaturated, says: []string{"saturated"}},
		{name: "counters reset",
			in: ExplainedInput{Monitored: 5e9, Range: swept(1e9, 10, 10*s, 10*s),
				Wide: CounterWindow{Bytes: 1e9, Swept: true, Samples: 14, Covered: 14 * s, Length: 14 * s, Reset: true}},
			status: CheckInconsistent, cause: CauseReset, says: []string{"reset"}},
		{name: "sweeps missing for most of the range",
			in:     ExplainedInput{Monitored: 5e9, Sweep: s, Range: swept(1e9, 3, 3*s, 60*s), Wide: swept(1e9, 3, 3*s, 100*s), Host: "n1 HCA-1"},
			status: CheckInconsistent, cause: CauseCountersMissed, says: []string{"only 3s of the 1m0s range"}},
		{name: "one sweep short at the end of the range is normal",
			in:     ExplainedInput{Monitored: 5e9, Sweep: 5 * s, Range: swept(1e6, 11, 55*s, 60*s), Wide: swept(1e6, 20, 100*s, 100*s), Host: "n1 HCA-1"},
			status: CheckInconsistent, cause: CauseNodeMap},
		{name: "logical collectives",
			in:     ExplainedInput{Monitored: 5e9, Range: swept(1e9, 10, 10*s, 10*s), Wide: swept(1e9, 14, 14*s, 14*s), Logical: []string{"job a", "job b"}, Host: "n1 HCA-1"},
			status: CheckInconsistent, cause: CauseLogical, says: []string{"job a and job b counted collectives", "--physical"}},
		{name: "logical jobs do not explain a link that saw nothing",
			in:     ExplainedInput{Monitored: 5e9, Range: swept(1e3, 10, 10*s, 10*s), Wide: swept(1e3, 14, 14*s, 14*s), Logical: []string{"job a"}, Host: "n1 HCA-1"},
			status: CheckInconsistent, cause: CauseNodeMap},
		{name: "ibsim: no direction of the fabric carried the jobs' bytes, collectives or not",
			in: ExplainedInput{Monitored: 14.9e9, Range: swept(864, 10, 10*s, 10*s), Wide: swept(864, 14, 14*s, 14*s), Logical: []string{"job a"}, Host: "n1 HCA-1",
				Fabric: &FlatFabric{Directions: 12, Monitored: 120e9, Measured: 10_000}},
			status: CheckNotCarried, cause: CauseCountersFlat, says: []string{"do not carry the jobs' traffic", "on the 12 directions where jobs put the most in this range (120 GB), they counted 10.0 KB, under 0.1% of it", "ibsim", "cannot be measured here"}},
		{name: "a fabric whose other directions carried the jobs' bytes: this one is the node map's",
			in: ExplainedInput{Monitored: 5e6, Range: swept(0, 10, 10*s, 10*s), Wide: swept(0, 14, 14*s, 14*s), Host: "n1 HCA-1",
				Fabric: &FlatFabric{Directions: 4, Monitored: 10e6, Measured: 5e6}},
			status: CheckInconsistent, cause: CauseNodeMap},
		{name: "too few bytes to call the counters flat",
			in: ExplainedInput{Monitored: 5e3, Range: swept(0, 10, 10*s, 10*s), Wide: swept(0, 14, 14*s, 14*s),
				Fabric: &FlatFabric{Directions: 2, Monitored: 10e3}},
			status: CheckInconsistent, cause: CauseRoutes},
		{name: "the job's own bytes outside its range: its nodes' clocks",
			in:     ExplainedInput{Monitored: 1e5, Range: full, Wide: full, Outside: 5e5},
			status: CheckInconsistent, cause: CauseClock, says: []string{"500 KB of the job's own traffic", "NTP"}},
	} {
		c := CheckExplained(tc.in)
		if c.Status != tc.status || c.Cause != tc.cause {
			t.Errorf("%s: %s/%s, want %s/%s (%s)", tc.name, c.Status, c.Cause, tc.status, tc.cause, c.Message)
		}
		if (c.Status == CheckConsistent && c.Cause == "") != (c.Message == "") {
			t.Errorf("%s: status %s with message %q", tc.name, c.Status, c.Message)
		}
		for _, w := range tc.says {
			if !strings.Contains(c.Message, w) {
				t.Errorf("%s: message %q does not say %q", tc.name, c.Message, w)
			}
		}
		if c.Status == CheckInconsistent && c.Cause != CauseClock && c.Excess != tc.in.Monitored-c.WideMeasured-c.Tolerance {
			t.Errorf("%s: excess %d", tc.name, c.Excess)
		}
	}
}

// TestExplainedAsMeasured: the figure is the ratio, above 100% too
// (never clamped).
func TestExplainedAsMeasured(t *testing.T) {
	for x, want := range map[[2]uint64]float64{{1046, 1000}: 104.6, {1, 1}: 100, {0, 5}: 0, {5, 10}: 50, {310e9, 13_000}: 100 * 310e9 / 13_000} {
		pct, ok := Explained(x[0], x[1])
		if !ok || pct != want {
			t.Errorf("Explained(%d, %d) = %v, %v; want %v", x[0], x[1], pct, ok, want)
		}
	}
	if _, ok := Explained(5, 0); ok {
		t.Error("Explained with nothing measured")
	}
}

func TestFormatBytes(t *testing.T) {
	for b, want := range map[uint64]string{0: "0 B", 999: "999 B", 1000: "1.00 KB", 13_000: "13.0 KB", 310e9: "310 GB", 1_234_567: "1.23 MB"} {
		if got := FormatBytes(b); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", b, got, want)
		}
	}
}

// TestOverlap: jobs run one after the other never overlap, even when one
// starts at the other's end; a running job runs until now.
func TestOverlap(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	a := Span{Start: at(0), End: at(10)}
	for _, tc := range []struct {
		b    Span
		want time.Duration
	}{
		{Span{Start: at(10), End: at(20)}, 0},
		{Span{Start: at(11), End: at(20)}, 0},
		{Span{Start: at(-10), End: at(0)}, 0},
		{Span{Start: at(5), End: at(20)}, 5 * time.Second},
		{Span{Start: at(2), End: at(3)}, time.Second},
		{Span{Start: at(8)}, 2 * time.Second}, // running
		{Span{}, 0},
	} {
		from, to, ok := Overlap(a, tc.b, at(100))
		if got := to.Sub(from); ok != (tc.want > 0) || (ok && got != tc.want) {
			t.Errorf("Overlap(%v, %v) = %v, %v; want %v", a, tc.b, got, ok, tc.want)
		}
	}
	if (Span{Start: at(0)}).Within(at(50), at(60), at(55)) != true || a.Within(at(10), at(20), at(100)) {
		t.Error("Within")
	}
}
