package analysis

import (
	"cmp"
	"slices"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
)

// JobCounter turns a job's cumulative per-node traffic, as the agents
// report it (each rank's bytes to every node; what its MPI library really
// sent to each peer where known: store.Process.Physical), into the node-to-node bytes
// of each interval. It keeps the previous cumulative matrix: 8 bytes per
// pair of the job's nodes. Owned by one goroutine.
type JobCounter struct {
	index map[string]int32
	names []string
	prev  []uint64 // cumulative, destination-major, len(names)^2
	// tables maps, per table the ranks' node rows are packed against,
	// each name index of the table to the counter's (store.NodeRows): a
	// slice index per row instead of a name per row. Tables not used by
	// the job's latest state are forgotten.
	tables map[*store.NodeTable][]int32
}

// Interval is one job's inter-node traffic over one interval, ready to
// attribute: Matrix covers the nodes that map to a fabric endpoint.
type Interval struct {
	Matrix Matrix
	// Names are the node names of Matrix.LIDs, in the same order.
	Names []string
	// Bytes is the inter-node traffic among mapped nodes; UnmappedBytes
	// the traffic from or to the nodes in Unmapped (sorted).
	Bytes, UnmappedBytes uint64
	Unmapped             []string
}

// NewJobCounter returns an empty counter.
func NewJobCounter() *JobCounter {
	return &JobCounter{index: map[string]int32{}, tables: map[*store.NodeTable][]int32{}}
}

func (c *JobCounter) node(name string) int32 {
	if i, ok := c.index[name]; ok {
		return i
	}
	i := int32(len(c.names))
	c.index[name] = i
	c.names = append(c.names, name)
	return i
}

// grow re-lays prev out for n nodes.
func (c *JobCounter) grow(old int) {
	n := len(c.names)
	if n == old {
		return
	}
	next := make([]uint64, n*n)
	for d := range old {
		copy(next[d*n:d*n+old], c.prev[d*old:(d+1)*old])
	}
	c.prev = next
}

// Next computes the interval since the previous call from the job's
// cumulative state. scratch is reused between calls and jobs (it is
// returned, possibly grown); lid maps node names to endpoints (ok false:
// unmapped). Intra-node traffic never reaches a link and is left out.
func (c *JobCounter) Next(j *store.Job, lid func(name string) (fabric.LID, bool), scratch []uint64) (Interval, []uint64) {
	j = j.Full()
	old := len(c.names)
	srcs := make([]int32, len(j.Processes))
	maps := make([][]int32, len(j.Processes))
	tables := make(map[*store.NodeTable][]int32, len(c.tables))
	for i := range j.Processes {
		p := &j.Processes[i]
		srcs[i] = c.node(p.Node)
		tab, names := p.ToNodes.Table(), p.ToNodes.Names()
		m, ok := tables[tab]
		if !ok {
			m = c.tables[tab]
		}
		for k := len(m); k < len(names); k++ {
			m = append(m, c.node(names[k]))
		}
		tables[tab], maps[i] = m, m
	}
	c.tables = tables
	c.grow(old)
	n := len(c.names)
	if cap(scratch) < n*n {
		scratch = make([]uint64, n*n)
	}
	cur := scratch[:n*n]
	clear(cur)
	var nodeOfRank []int32 // for physical rows, made when one is met
	for i := range j.Processes {
		p := &j.Processes[i]
		src, m := int(srcs[i]), maps[i]
		if p.Physical() {
			if nodeOfRank == nil {
				nodeOfRank = ranksToNodes(j, srcs)
			}
			for peer, t := range p.Peers.Physical() {
				if peer < 0 || peer >= len(nodeOfRank) || nodeOfRank[peer] < 0 {
					continue // a peer not heard from yet: its bytes show once it is
				}
				if dst := int(nodeOfRank[peer]); dst != src {
					cur[dst*n+src] += t.Total().Bytes
					cur[src*n+dst] += t.Fetched.Bytes // a get: the peer's adapter sent it
				}
			}
			continue
		}
		rows := p.ToNodes.Cursor()
		for k, t, ok := rows.NextIndex(); ok; k, t, ok = rows.NextIndex() {
			if dst := int(m[k]); dst != src {
				cur[dst*n+src] += t.P2P.Bytes + t.Coll.Bytes + t.RMA.Bytes
			}
		}
	}
	// cur becomes the delta; prev the new cumulative. A counter that went
	// back (a rank restarted) starts over from zero.
	for k, v := range cur {
		p := c.prev[k]
		c.prev[k] = v
		if v >= p {
			cur[k] = v - p
		} else {
			cur[k] = v
		}
	}
	var iv Interval
	lids := make([]fabric.LID, n)
	mapped := make([]int, 0, n)
	unmapped := make([]bool, n)
	for i, name := range c.names {
		if l, ok := lid(name); ok {
			lids[i] = l
			mapped = append(mapped, i)
		} else {
			unmapped[i] = true
			iv.Unmapped = append(iv.Unmapped, name)
		}
	}
	slices.SortFunc(iv.Unmapped, cmp.Compare)
	for d := range n {
		for s, b := range cur[d*n : (d+1)*n] {
			if b == 0 {
				continue
			}
			if unmapped[s] || unmapped[d] {
				iv.UnmappedBytes += b
			} else {
				iv.Bytes += b
			}
		}
	}
	if len(mapped) == n {
		iv.Matrix = Matrix{LIDs: lids, Bytes: cur}
		iv.Names = c.names
		return iv, scratch
	}
	// Compact to the mapped nodes (in place: each row moves down).
	m := len(mapped)
	out := make([]fabric.LID, m)
	iv.Names = make([]string, m)
	for a, i := range mapped {
		out[a] = lids[i]
		iv.Names[a] = c.names[i]
	}
	for a, d := range mapped {
		for b, s := range mapped {
			cur[a*m+b] = cur[d*n+s]
		}
	}
	iv.Matrix = Matrix{LIDs: out, Bytes: cur[:m*m]}
	return iv, scratch
}

// ranksToNodes maps each world rank of j to the counter's index of its
// node (srcs, per process), -1 for ranks not heard from.
func ranksToNodes(j *store.Job, srcs []int32) []int32 {
	size := j.Ranks
	for i := range j.Processes {
		size = max(size, j.Processes[i].Rank+1)
	}
	out := make([]int32, size)
	for i := range out {
		out[i] = -1
	}
	for i := range j.Processes {
		if r := j.Processes[i].Rank; r >= 0 {
			out[r] = srcs[i]
		}
	}
	return out
}

// Nodes is the number of nodes the counter has seen.
func (c *JobCounter) Nodes() int { return len(c.names) }
