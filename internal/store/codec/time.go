package codec

import (
	"fmt"
	"math"
	"time"
)

// Times are stored as nanoseconds since 1970 (UTC); zero bounds of a
// range mean unbounded.

// NS is t in nanoseconds since 1970.
func NS(t time.Time) int64 { return t.UnixNano() }

// FromNS is the UTC time of v nanoseconds since 1970.
func FromNS(v int64) time.Time { return time.Unix(0, v).UTC() }

// NSOrZero is t in nanoseconds, or 0 for the zero time.
func NSOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// LowerBound is the lower end of a range starting at t (open when zero).
func LowerBound(t time.Time) int64 {
	if t.IsZero() {
		return math.MinInt64
	}
	return t.UnixNano()
}

// UpperBound is the upper end of a range ending at t (open when zero).
func UpperBound(t time.Time) int64 {
	if t.IsZero() {
		return math.MaxInt64
	}
	return t.UnixNano()
}

// CheckTime refuses times that nanoseconds since 1970 cannot hold.
func CheckTime(field string, t time.Time) error {
	if t.IsZero() {
		return fmt.Errorf("%s is zero", field)
	}
	if t.Year() < 1678 || t.Year() > 2261 {
		return fmt.Errorf("%s %s is out of range (years 1678..2261)", field, t.Format(time.RFC3339))
	}
	return nil
}
