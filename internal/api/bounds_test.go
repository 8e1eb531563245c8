package api

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestParseTimeRange(t *testing.T) {
	now := time.Now()
	for _, v := range []string{"99999999999", "9e9", "1e300", "NaN", "Inf", "-Inf", "-1", "0001-01-01T00:00:00Z", "1969-12-31T23:59:59Z",
		"9999-01-01T00:00:00Z", now.Add(25 * time.Hour).Format(time.RFC3339), "2562047h", "--1000h"} {
		_, err := parseTime("at", v, now)
		var he *httpError
		if !errors.As(err, &he) || he.status != 400 || !strings.HasPrefix(he.msg, "parameter at: ") {
			t.Errorf("parseTime(at, %q): %v; want a 400 naming at", v, err)
		}
	}
	for v, want := range map[string]time.Time{
		"0":                    time.Unix(0, 0),
		"1763781600.5":         time.Unix(1763781600, 5e8),
		"2025-11-22T03:20:00Z": time.Unix(1763781600, 0),
		"-1h":                  now.Add(-time.Hour),
		"90m":                  now.Add(-90 * time.Minute),
		"now":                  now,
		"":                     now,
	} {
		got, err := parseTime("from", v, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseTime(from, %q) = %v, %v; want %v", v, got, err, want)
		}
	}
	// A little ahead of the clock is fine (a client's clock, to=+1m).
	if _, err := parseTime("to", now.Add(time.Hour).Format(time.RFC3339), now); err != nil {
		t.Errorf("an hour ahead: %v", err)
	}
}

func TestCapMessage(t *testing.T) {
	if got := capMessage("short"); got != "short" {
		t.Errorf("capMessage(short) = %q", got)
	}
	long := strings.Repeat("x", maxErrorBytes-1) + "é" + strings.Repeat("y", 100000)
	got := capMessage(long)
	if len(got) > maxErrorBytes+64 || !utf8.ValidString(got) || !strings.HasSuffix(got, "x... (100002 more bytes)") {
		t.Errorf("capMessage of %d bytes: %d bytes, ends %q", len(long), len(got), got[max(0, len(got)-40):])
	}
}

func TestRoundBytes(t *testing.T) {
	for in, want := range map[uint64]uint64{
		0: 0, 7: 7, 99: 99, 100: 100, 104: 100, 105: 110, 149: 150, 994: 990, 995: 1000,
		123456789: 120000000, 125000000: 130000000, 1<<40 + 12345: 1100000000000,
		math.MaxUint64: 18000000000000000000,
	} {
		if got := roundBytes(in); got != want {
			t.Errorf("roundBytes(%d) = %d; want %d", in, got, want)
		}
	}
}

// TestCoarsenDirection: anonymized jobs' bytes are rounded, and the
// direction's monitored figures sum the jobs as shown, so that the total
// less the user's own job does not give the others' exact bytes.
func TestCoarsenDirection(t *testing.T) {
	const capacity, seconds = 1e9, 10.0
	link := linkEnds{Capacity: capacity}
	d := directionJSON{Measured: measured{Bytes: 1_000_000_000, Measured: true}, Jobs: []dirJob{
		{Job: "other-1", Link: link, Bytes: 123_456_789, Anonymized: true},
		{Job: "mine", Link: link, Bytes: 45_678_901},
		{Job: "other-2", Link: link, Bytes: 987, Anonymized: true},
	}}
	d.total(capacity, seconds)
	if d.Monitored != 123_456_789+45_678_901+987 {
		t.Fatalf("exact total %d", d.Monitored)
	}
	coarsenDirection(&d, capacity, seconds)
	if d.Jobs[0].Bytes != 120_000_000 || d.Jobs[2].Bytes != 990 || d.Jobs[1].Bytes != 45_678_901 ||
		!d.Jobs[0].BytesRounded || d.Jobs[1].BytesRounded {
		t.Errorf("jobs after coarsening: %+v", d.Jobs)
	}
	if want := uint64(120_000_000 + 45_678_901 + 990); d.Monitored != want || !d.MonitoredRounded || d.Unmonitored != 1_000_000_000-want {
		t.Errorf("monitored %d unmonitored %d rounded %v; want %d", d.Monitored, d.Unmonitored, d.MonitoredRounded, want)
	}
	if got := d.Jobs[0].Utilization; got != utilization(120_000_000, capacity, seconds) {
		t.Errorf("other-1's utilization %v is not that of its rounded bytes", got)
	}
	if d.Explained == nil || *d.Explained != 100*float64(d.Monitored)/1e9 {
		t.Errorf("explained %v", d.Explained)
	}

	// An administrator's answer (nothing anonymized) stays exact.
	a := directionJSON{Jobs: []dirJob{{Job: "j1", Link: link, Bytes: 123_456_789}}}
	a.total(capacity, seconds)
	coarsenDirection(&a, capacity, seconds)
	if a.Monitored != 123_456_789 || a.MonitoredRounded || a.Jobs[0].Bytes != 123_456_789 {
		t.Errorf("admin's direction changed: %+v", a)
	}
}
