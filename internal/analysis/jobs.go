package analysis

import (
	"cmp"
	"slices"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
)

// JobCounter turns a job's cumulative per-node traffic, as the agents
// report it (each rank's bytes to every node), into the node-to-node bytes
// of each interval. It keeps the previous cumulative matrix: 8 bytes per
// pair of the job's nodes. Owned by one goroutine.
type JobCounter struct {
	index map[string]int32
	names []string
	prev  []uint64 // cumulative, destination-major, len(names)^2
	// rows caches, per rank, the node index of each of its ToNodes
	// entries: agents send them in a stable order, so a name compare
	// replaces a map lookup per pair.
	rows map[int][]int32
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
	return &JobCounter{index: map[string]int32{}, rows: map[int][]int32{}}
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
	old := len(c.names)
	srcs := make([]int32, len(j.Processes))
	for i := range j.Processes {
		p := &j.Processes[i]
		srcs[i] = c.node(p.Node)
		row := c.rows[p.Rank]
		if len(row) != p.ToNodes.Len() {
			row = make([]int32, p.ToNodes.Len())
			for k := range row {
				row[k] = -1
			}
		}
		cur := p.ToNodes.Cursor()
		for k := range row {
			t, _ := cur.Next()
			if r := row[k]; r < 0 || c.names[r] != t.Node {
				row[k] = c.node(t.Node)
			}
		}
		c.rows[p.Rank] = row
	}
	c.grow(old)
	n := len(c.names)
	if cap(scratch) < n*n {
		scratch = make([]uint64, n*n)
	}
	cur := scratch[:n*n]
	clear(cur)
	for i := range j.Processes {
		p := &j.Processes[i]
		src := int(srcs[i])
		row := c.rows[p.Rank]
		rows := p.ToNodes.Cursor()
		for _, dst := range row {
			t, _ := rows.Next()
			if int(dst) != src {
				cur[int(dst)*n+src] += t.P2P.Bytes + t.Coll.Bytes + t.RMA.Bytes
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

// Nodes is the number of nodes the counter has seen.
func (c *JobCounter) Nodes() int { return len(c.names) }
