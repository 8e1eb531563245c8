package ingest

import (
	"bufio"
	"cmp"
	"fmt"
	"slices"
	"strconv"
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

// writeReorders prints when and how the job reordered its ranks.
func writeReorders(bw *bufio.Writer, rs []store.JobReorder) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(bw, "\nReordered ranks (netloom_reorder, docs/reorder.md)\n")
	for _, r := range rs {
		comm := "a communicator"
		if r.CommWorld {
			comm = "MPI_COMM_WORLD"
		}
		from := "MPI_Init"
		if r.Since != "" {
			from = "mark " + strconv.Quote(r.Since)
		}
		how := fmt.Sprintf("Scotch's order, %d of %d ranks moved", r.Moved, r.Ranks)
		if r.Method != "scotch" {
			how = "order kept (nothing to gain)"
		}
		pct := 0.0
		if r.InterNodeBefore > 0 {
			pct = 100 * (1 - float64(r.InterNodeAfter)/float64(r.InterNodeBefore))
		}
		fmt.Fprintf(bw, "%s: %s of %d ranks on %d nodes, from the matrix since %s: %s; predicted inter-node bytes %s -> %s (%.1f%% less) of %s; took %.3fs (mapping %.3fs); %d ranks reported it\n",
			r.Time.Format(time.RFC3339Nano), comm, r.Ranks, r.Nodes, from, how, bytesText(r.InterNodeBefore), bytesText(r.InterNodeAfter), pct,
			bytesText(r.TotalBytes), r.Seconds, r.MapSeconds, r.Reported)
		if r.Method == "scotch" && len(r.Mapping) > 0 {
			fmt.Fprintf(bw, "  world rank: old -> new rank:")
			for _, m := range r.Mapping {
				fmt.Fprintf(bw, " %d:%d->%d", m.Rank, m.OldRank, m.NewRank)
			}
			fmt.Fprintln(bw)
		}
	}
}
