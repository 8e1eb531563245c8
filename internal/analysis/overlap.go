package analysis

import "time"

// Span is the time a job ran: End is zero while it runs. Jobs "share" a
// link only when their spans overlap and both put traffic on it: a job
// that ended before another started never competed with it, even when the
// first one's last attribution interval (stamped at the sweep after it
// ended) lies inside the second one's range.
type Span struct {
	Start, End time.Time
}

// end is s's end, now for a job still running.
func (s Span) end(now time.Time) time.Time {
	if s.End.IsZero() {
		return now
	}
	return s.End
}

// Known reports whether the span has a start.
func (s Span) Known() bool { return !s.Start.IsZero() }

// Overlap is the time a and b ran together, [from, to], and whether there
// was any (a start exactly at the other's end is none). Spans without a
// start never overlap.
func Overlap(a, b Span, now time.Time) (from, to time.Time, ok bool) {
	if !a.Known() || !b.Known() {
		return time.Time{}, time.Time{}, false
	}
	from, to = a.Start, a.end(now)
	if b.Start.After(from) {
		from = b.Start
	}
	if e := b.end(now); e.Before(to) {
		to = e
	}
	return from, to, to.After(from)
}

// Within reports whether s ran at some time in [from, to].
func (s Span) Within(from, to, now time.Time) bool {
	_, _, ok := Overlap(s, Span{Start: from, End: to}, now)
	return ok
}
