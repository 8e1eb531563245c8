package ingest

import (
	"cmp"
	"encoding/binary"
	"math/bits"
	"slices"
	"time"

	"github.com/netloom/netloom/internal/store"
)

// Validation: a complete snapshot checked against the rank's last one
// (duplicate rows, counters that went backwards), packed against the job's
// node table and made current.

// apply checks a complete snapshot against the rank's last one and makes
// it current.
func (t *Tracker) apply(j *jobState, r *rankState, p *pending, last *Datagram, now time.Time) error {
	np := &p.proc // checked here, then copied into the job's slab
	if !p.hasProc && r.has {
		// No process block: keep the identity and resource use known.
		keepProcess(np, r.cur)
	}
	if np.Reorders == nil && r.has {
		np.Reorders = r.cur.Reorders // cumulative: a snapshot without them keeps the last ones
	}
	if np.GPU == nil && r.has {
		// Cumulative like the rest: a snapshot without the section (sent
		// before CUDA was loaded, or by an agent that leaves it out when
		// nothing changed) keeps the last one.
		np.GPU = r.cur.GPU
	}
	if p.hasDup {
		t.m.drop(ReasonPeer, int(p.n)-1) // Add counts the last one
		return reject(ReasonPeer, "job %s rank %d snapshot %d: peer %d twice", j.id, np.Rank, np.Seq, p.dupPeer)
	}
	if p.rows.n == 0 && np.Peers.Len() > 0 && !np.PeersTruncated {
		t.nodesFromPeers(j, np, &p.rows)
	}
	// A hostile agent could invent node names forever: past a bound the
	// job starts a new table (rows packed earlier keep theirs).
	if j.nodes == nil || j.nodes.Len() > max(4*j.world, t.opt.Limits.MaxNodes) {
		j.nodes = &store.NodeTable{}
	}
	// Rows are ordered by their node's index in the job's table, the order
	// in which its agents first reported the nodes, so usually as they
	// come (sorting 1,024 rows by name at every snapshot was 16% of the
	// daemon's CPU at six times Stampede's load).
	rows := &p.rows
	order := t.order[:0]
	sorted := true
	next := uint32(0) // the index the next row likely has
	size := 0         // the rows packed: each index, then its counters
	for off := 0; off < len(rows.b); {
		name, cls, end := rows.row(off)
		k := j.nodes.IndexNear(name, next)
		sorted = sorted && (len(order) == 0 || k > order[len(order)-1].idx)
		order = append(order, rowRef{k, uint32(len(order)), uint32(off), uint32(cls), uint32(end)})
		size += uvarintLen(uint64(k)) + end - cls
		off, next = end, k+1
	}
	t.order = order
	if !sorted {
		slices.SortStableFunc(order, func(a, b rowRef) int { return cmp.Compare(a.idx, b.idx) })
	}
	var what string // the first counter that went backwards
	if r.has {
		what = backwards(r.cur, np)
	}
	// One pass over the rows: duplicates, totals, decreases since the last
	// snapshot (whose rows are in the same order when packed against the
	// same table), and packing: each row's index, then its counters as the
	// decoder packed them.
	var sent store.Classes
	var before store.NodeRows
	if r.has {
		before = r.cur.ToNodes
	}
	sameTable := r.has && before.Table() == j.nodes
	var (
		c    store.NodeCursor
		k    int
		more bool
	)
	if sameTable {
		c = before.Cursor()
		k, more = c.NextRow()
	}
	// Packed straight into the rows' own array (packed into a scratch
	// buffer and then copied, they were 3% of the daemon's CPU at ten
	// times Stampede).
	b := j.newBytes(size)
	for i, o := range order {
		if i > 0 && o.idx == order[i-1].idx {
			t.m.drop(ReasonPeer, int(p.n)-1) // Add counts the last one
			return reject(ReasonPeer, "job %s rank %d snapshot %d: destination node %q twice", j.id, np.Rank, np.Seq, o.name(rows))
		}
		cl := &rows.c[o.row]
		addClasses(&sent, cl)
		for more && uint32(k) < o.idx {
			k, more = c.NextRow()
		}
		if what == "" && more && uint32(k) == o.idx && c.Less(cl) {
			what = "traffic to node " + o.name(rows)
		}
		b = binary.AppendUvarint(b, uint64(o.idx))
		b = append(b, rows.b[o.cls:o.end]...)
	}
	if what == "" && r.has && !sameTable {
		what = nodesBackwardsByName(before, order, rows)
	}
	if r.has {
		if what != "" {
			t.m.drop(ReasonBackwards, int(p.n)-1) // Add counts the last one
			return reject(ReasonBackwards, "job %s rank %d snapshot %d: %s decreased since snapshot %d", j.id, np.Rank, np.Seq, what, r.cur.Seq)
		}
		s := delta(j.id, r.cur, np, r.sent, sent)
		t.samples = append(t.samples, s)
		if s.Span > 0 {
			j.interval = time.Duration(float64(s.Span) / float64(np.Seq-r.cur.Seq))
		}
		if len(t.samples) >= maxSamples {
			t.flushSamples()
		}
	}
	if np.Final && !(r.has && r.cur.Final) {
		j.finals++
	}
	np.ToNodes = j.nodes.Packed(b, len(order))
	np.Peers = store.PackedPeers(j.keepBytes(np.Peers.Packed()), np.Peers.Len())
	first := !r.has // the rank's first snapshot (of its run)
	r.cur, r.sent, r.has = j.newProcess(np), sent, true
	// While the lists exist they hold exactly the ranks with a snapshot (a
	// restart empties them).
	if j.order != nil {
		if first { // ranks come about in order (the agents' phases)
			i, _ := slices.BinarySearch(j.order, np.Rank)
			j.order, j.procs, j.sums = slices.Insert(j.order, i, np.Rank), slices.Insert(j.procs, i, nil), slices.Insert(j.sums, i, rankSum{})
			for k := i; k < len(j.order); k++ {
				j.ranks[j.order[k]].pos = k
			}
			for c := i / viewChunk; c*viewChunk < len(j.order); c++ {
				j.change(c * viewChunk)
			}
		}
		node := j.nodeIndex(r.cur.Node)
		if old := j.sums[r.pos].node; first {
			j.countNode(node, 1)
		} else if old != node {
			j.countNode(old, -1)
			j.countNode(node, 1)
		}
		j.procs[r.pos], j.sums[r.pos] = r.cur, sumOf(r.cur, sent, node)
		j.change(r.pos)
	}
	if j.start.IsZero() || np.Start.Before(j.start) {
		j.start = np.Start
	}
	j.dirty = true
	if r.gen != j.gen {
		r.gen = j.gen
		j.unsaved++
	}
	if t.m != nil {
		j.waiting = append(j.waiting, arrival{now, np.Time})
	}
	t.m.accept(int(p.n))
	if j.finals >= j.world && len(j.ranks) >= j.world {
		t.finish(j, store.EndFinal, now)
	}
	return nil
}

// uvarintLen is the length of v as a uvarint.
func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// rowRef is a snapshot's node row: its index in the job's node table and
// where it is in the decoded rows (the row-th, its name at off, its
// counters packed in cls:end).
type rowRef struct {
	idx, row, off, cls, end uint32
}

func (a rowRef) name(rows *nodeRows) string {
	name, _, _ := rows.row(int(a.off))
	return string(name)
}

// backwards names the first cumulative counter that decreased from a to
// b, but for destination nodes (apply compares those as it packs them).
func backwards(a, b *store.Process) string {
	// The process block's counters, in field order (record.gen.go).
	if what := usageBackwards(&a.ProcessUsage, &b.ProcessUsage); what != "" {
		return what
	}
	if b.Time.Before(a.Time) {
		return "snapshot time"
	}
	// Functions usually come in the same order every snapshot.
	var fa map[string]store.Function
	for i, f := range b.Functions {
		o, ok := store.Function{}, false
		if i < len(a.Functions) && a.Functions[i].Name == f.Name {
			o, ok = a.Functions[i], true
		} else {
			if fa == nil {
				fa = make(map[string]store.Function, len(a.Functions))
				for _, f := range a.Functions {
					fa[f.Name] = f
				}
			}
			o, ok = fa[f.Name]
		}
		if ok && (f.Calls < o.Calls || nsBack(o.TimeNS, f.TimeNS) || nsBack(o.WaitNS, f.WaitNS) || f.BytesSent < o.BytesSent || f.BytesReceived < o.BytesReceived) {
			return "function " + f.Name
		}
	}
	// Both peer lists are sorted by peer; a peer that left a top-K list is
	// not a decrease.
	ca, cb := a.Peers.Cursor(), b.Peers.Cursor()
	pa, ta, more := ca.NextTraffic()
	for {
		pb, tb, ok := cb.NextTraffic()
		if !ok {
			return ""
		}
		for more && pa < pb {
			pa, ta, more = ca.NextTraffic()
		}
		if more && pa == pb && lessClasses(tb, ta) {
			return "traffic to a peer rank"
		}
	}
}

// nodesBackwardsByName names the first destination node whose traffic
// decreased from the rows before, packed against a node table since
// replaced, to the rows now (rare: apply compares rows of one table by
// index).
func nodesBackwardsByName(before store.NodeRows, now []rowRef, rows *nodeRows) string {
	if before.Len() == 0 {
		return ""
	}
	old := make(map[string]store.Classes, before.Len())
	for o := range before.All() {
		old[o.Node] = o.Classes
	}
	for _, n := range now {
		name := n.name(rows)
		if o, ok := old[name]; ok {
			if lessClasses(rows.c[n.row], o) {
				return "traffic to node " + name
			}
		}
	}
	return ""
}
