package store

import (
	"slices"
	"time"
)

// Reorder is one netloom_reorder call a rank took part in (docs/reorder.md):
// when, on how many ranks and nodes, how (Scotch's new order or the order
// kept), the rank's rank before and after, and the predicted inter-node
// bytes of the matrix before and after.
type Reorder struct {
	Index           int       `json:"index"`
	Time            time.Time `json:"time"`
	Ranks           int       `json:"ranks"`
	CommWorld       bool      `json:"comm_world"`
	Nodes           int       `json:"nodes"`
	Method          string    `json:"method"`
	Moved           int       `json:"moved"`
	OldRank         int       `json:"old_rank"`
	NewRank         int       `json:"new_rank"`
	InterNodeBefore uint64    `json:"inter_node_before"`
	InterNodeAfter  uint64    `json:"inter_node_after"`
	TotalBytes      uint64    `json:"total_bytes"`
	Since           string    `json:"since,omitempty"`
	Seconds         float64   `json:"seconds"`
	MapSeconds      float64   `json:"map_seconds"`
}

// JobReorder is one reordering as the job saw it: the ranks' records of the
// same call joined (the same prediction on every rank; its time the latest
// rank's return), with the mapping each rank reported.
type JobReorder struct {
	Reorder
	Reported int        `json:"ranks_reported"` // ranks whose profile has it
	Mapping  []RankMove `json:"mapping,omitempty"`
}

// RankMove is one world rank's ranks in the communicator before and after.
type RankMove struct {
	Rank    int `json:"rank"`
	OldRank int `json:"old_rank"`
	NewRank int `json:"new_rank"`
}

// Reorders joins the job's ranks' reorderings by their index on each rank
// (every rank of a communicator calls netloom_reorder the same number of
// times when the application reorders one communicator at a time).
func (j *Job) Reorders() []JobReorder {
	var out []JobReorder
	for i := range j.Processes {
		p := &j.Processes[i]
		for _, r := range p.Reorders {
			k := slices.IndexFunc(out, func(o JobReorder) bool {
				return o.Index == r.Index && o.Ranks == r.Ranks && o.InterNodeBefore == r.InterNodeBefore
			})
			if k < 0 {
				out = append(out, JobReorder{Reorder: r})
				k = len(out) - 1
			}
			o := &out[k]
			o.Reported++
			if r.Time.After(o.Time) {
				o.Time = r.Time
			}
			o.Seconds = max(o.Seconds, r.Seconds)
			o.MapSeconds = max(o.MapSeconds, r.MapSeconds)
			o.Mapping = append(o.Mapping, RankMove{Rank: p.Rank, OldRank: r.OldRank, NewRank: r.NewRank})
		}
	}
	for i := range out {
		out[i].OldRank, out[i].NewRank = 0, 0 // per rank: in Mapping
	}
	slices.SortStableFunc(out, func(a, b JobReorder) int { return a.Time.Compare(b.Time) })
	return out
}
