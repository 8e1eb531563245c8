package ingest

import "github.com/netloom/netloom/internal/store"

// Comparing and subtracting cumulative counters: what the tracker's
// checks (tracker_validate.go), its deltas (tracker_deltas.go) and the
// generated per-field code (record.gen.go) share. They call nothing.

// Measured times may wobble by a little between snapshots (a clock source
// recalibrated, a conversion rounded); a decrease within the tolerance is
// jitter, not a new run. Counts must never decrease.
const (
	timeTolerance    = 1e-3 // seconds
	timeToleranceRel = 1e-3
)

func timeBack(a, b float64) bool { return b < a-max(timeTolerance, timeToleranceRel*a) }

func nsBack(a, b uint64) bool { return b < a && timeBack(float64(a)/1e9, float64(b)/1e9) }

func lessTraffic(a, b store.Traffic) bool { return a.Bytes < b.Bytes || a.Msgs < b.Msgs }

func lessClasses(a, b store.Classes) bool {
	return lessTraffic(a.P2P, b.P2P) || lessTraffic(a.Coll, b.Coll) || lessTraffic(a.RMA, b.RMA)
}

func subTraffic(a, b store.Traffic) store.Traffic {
	return store.Traffic{Bytes: a.Bytes - b.Bytes, Msgs: a.Msgs - b.Msgs}
}
