package ingest

import (
	"cmp"
	"slices"
	"time"

	"github.com/netloom/netloom/internal/ingest/agentpb"
	"github.com/netloom/netloom/internal/store"
)

// MaxReorders is the most netloom_reorder calls a snapshot may carry: the
// agent sends the first 16 (agent/src/agent.h, NL_MAX_REORDERS).
const MaxReorders = 16

// validateReorders checks the reorders section (field 23): chunk 0 only, at
// most MaxReorders, ranks within the world, strings within bounds.
func validateReorders(d *Datagram, lim Limits, where func() string) error {
	if d.Chunk != 0 {
		return reject(ReasonChunk, "%s: reorders outside chunk 0", where())
	}
	if len(d.Reorders) > MaxReorders {
		return reject(ReasonTooMany, "%s: %d reorders, limit %d", where(), len(d.Reorders), MaxReorders)
	}
	for i, r := range d.Reorders {
		if r.Ranks == 0 || r.Ranks > d.WorldSize || r.OldRank >= r.Ranks || r.NewRank >= r.Ranks || r.Moved > r.Ranks || r.Nodes > r.Ranks {
			return reject(ReasonValue, "%s: reorders[%d]: ranks %d, old %d, new %d, moved %d, nodes %d (world size %d)",
				where(), i, r.Ranks, r.OldRank, r.NewRank, r.Moved, r.Nodes, d.WorldSize)
		}
		if len(r.Method) > lim.MaxString || len(r.Since) > lim.MaxString {
			return reject(ReasonString, "%s: reorders[%d]: method or since over %d bytes", where(), i, lim.MaxString)
		}
		if r.TimeUnixNs <= 0 || !(r.Seconds >= 0 && r.Seconds < 1e9) || !(r.MapSeconds >= 0 && r.MapSeconds < 1e9) {
			return reject(ReasonValue, "%s: reorders[%d]: time %d, seconds %g, map seconds %g", where(), i, r.TimeUnixNs, r.Seconds, r.MapSeconds)
		}
	}
	return nil
}

// reordersOf converts the section, oldest first.
func reordersOf(rs []*agentpb.Reorder) []store.Reorder {
	out := make([]store.Reorder, len(rs))
	for i, r := range rs {
		out[i] = store.Reorder{Index: int(r.Index), Time: time.Unix(0, r.TimeUnixNs).UTC(), Ranks: int(r.Ranks), CommWorld: r.CommWorld,
			Nodes: int(r.Nodes), Method: r.Method, Moved: int(r.Moved), OldRank: int(r.OldRank), NewRank: int(r.NewRank),
			InterNodeBefore: r.InterNodeBefore, InterNodeAfter: r.InterNodeAfter, TotalBytes: r.TotalBytes, Since: r.Since,
			Seconds: r.Seconds, MapSeconds: r.MapSeconds}
	}
	slices.SortStableFunc(out, func(a, b store.Reorder) int { return cmp.Compare(a.Index, b.Index) })
	return out
}
