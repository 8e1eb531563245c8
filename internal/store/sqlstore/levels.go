// Package sqlstore is the logic of store.Store that Netloom's SQL engines
// (sqlite, postgres) share, written once: Store runs every method against
// an engine's transactions (Engine, Tx), in statements both engines read
// (? placeholders, which PostgreSQL's adapter numbers), and a Dialect for
// what their SQL says differently (lists, locks, the newest row per
// switch, unlimited LIMITs). Here too are the checks of what goes in,
// rollup levels and cutoffs, and the fold that turns expired rows into
// rollups. An engine keeps its connections, schema and migrations, its
// batches (COPY or prepared statements behind Tx.Insert) and what only
// it does (Pruner: PostgreSQL's partitions, SQLite's checkpoints and
// vacuum).
package sqlstore

import (
	"math"
	"time"

	"github.com/netloom/netloom/internal/store"
)

// Rollups are made lazily, when samples pass their raw retention: one
// transaction reads a bounded run of expired rows, adds them into the
// rollup rows of their buckets (merging with what a bucket already holds)
// and deletes them. Each step is therefore atomic and idempotent: a crash
// or a stop between steps leaves every sample counted exactly once, in a
// raw row or in a rollup, and the next step carries on. Rows that arrive
// late for a bucket already rolled up are merged into it the same way.
//
// Levels: 0 raw, 1 5-minute rollups, 2 1-hour rollups. A row's key is
// its time (raw) or its bucket start (rollups).
const (
	LevelRaw = iota
	Level5m
	Level1h
	NumLevels
)

// LevelWidth is each level's bucket width in nanoseconds (0 for raw).
var LevelWidth = [NumLevels]int64{0, int64(store.Rollup5m), int64(store.Rollup1h)}

// WidthS is level l's bucket width in seconds, as the tables keep it.
func WidthS(l int) int64 { return LevelWidth[l] / int64(time.Second) }

// KeepAll is the cutoff of a level that keeps everything.
const KeepAll = math.MinInt64

// Cutoffs are per level the aligned time before which that level's rows
// have expired: raw cutoffs are rounded down to 5 minutes and rollup
// cutoffs to 1 hour, so that an expired row never shares its target
// bucket with a row that has not expired.
type Cutoffs [NumLevels]int64

// NewCutoffs aligns a kind's retention times.
func NewCutoffs(raw, r5m, r1h time.Time) Cutoffs {
	return Cutoffs{align(raw, store.Rollup5m), align(r5m, store.Rollup1h), align(r1h, store.Rollup1h)}
}

func align(t time.Time, w time.Duration) int64 {
	if t.IsZero() {
		return KeepAll
	}
	return FloorTo(t.UnixNano(), int64(w))
}

// FloorTo rounds v down to a multiple of w (also for negative v).
func FloorTo(v, w int64) int64 {
	q := v / w
	if v%w != 0 && v < 0 {
		q--
	}
	return q * w
}

// Target returns the level and bucket that an expired row of level l
// with key k is folded into: the finest coarser level that still keeps
// the bucket. ok is false when none does (the row is only deleted).
func (c Cutoffs) Target(l int, k int64) (level int, bucket int64, ok bool) {
	for t := l + 1; t < NumLevels; t++ {
		b := FloorTo(k, LevelWidth[t])
		if b >= c[t] {
			return t, b, true
		}
	}
	return 0, 0, false
}

// LevelName names level l in messages.
func LevelName(l int) string {
	switch l {
	case Level5m:
		return "5-minute rollups"
	case Level1h:
		return "1-hour rollups"
	}
	return "raw"
}

// rollupKey names a target row.
type rollupKey struct {
	level  int
	bucket int64
}

// foldCursor remembers where a fold phase stopped, so the next step goes
// on from there instead of revisiting entities without expired rows. It
// is only a hint: any position gives correct results. For ports, rank
// holds the start of the slice being folded.
type foldCursor struct {
	node int64
	job  string
	rank int64
	open bool
}
