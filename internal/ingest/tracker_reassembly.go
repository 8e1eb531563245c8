package ingest

import (
	"cmp"
	"slices"
	"time"

	"github.com/netloom/netloom/internal/store"
)

// Reassembly: a snapshot's chunks merged as they come, and the
// destination-node rows of a snapshot that carried peer rows only.

type pending struct {
	seq     uint64
	start   int64
	chunks  uint32
	final   bool
	got     []uint64 // bitset of chunks received
	n       uint32
	bytes   int
	first   time.Time
	proc    store.Process
	rows    nodeRows // proc's destination nodes until complete
	hasProc bool
	dupPeer int // a peer in two chunks, when hasDup
	hasDup  bool
	whole   bool // the tracker's own, for a snapshot of one datagram
}

// release forgets a pending snapshot without counting it.
func (t *Tracker) release(key rankKey, r *rankState) {
	if r.pend != nil {
		t.pendingBytes -= r.pend.bytes
		r.pend = nil
	}
	delete(t.pending, key)
}

// abandon drops a pending snapshot, counting its datagrams.
func (t *Tracker) abandon(key rankKey, r *rankState, reason string) {
	if r.pend != nil {
		t.m.drop(reason, int(r.pend.n))
	}
	t.release(key, r)
}

// mergeChunk adds a datagram to the snapshot being assembled; prev is the
// rank's last snapshot, if any, whose strings are usually the same
// (compared first, they are found without hashing them: interning was 4%
// of the daemon's CPU at ten times Stampede).
func (t *Tracker) mergeChunk(j *jobState, pend *pending, d *Datagram, prev *store.Process) {
	if prev == nil {
		prev = &noProcess
	}
	p := &pend.proc
	p.Seq, p.Final = d.Seq, d.Final
	p.Start, p.Time = time.Unix(0, d.StartUnixNs).UTC(), time.Unix(0, d.TimeUnixNs).UTC()
	p.PeersTruncated = p.PeersTruncated || d.PeersTruncated
	if pr := d.Process; pr != nil {
		if pr.TraceDir != "" && j.traceDir == "" {
			j.traceDir = pr.TraceDir
		}
		t.processOf(p, pr, prev)
	}
	// Rows are appended to exactly sized slices (one chunk is the usual
	// case, whose decoded peers are kept as they are).
	if p.Functions == nil {
		p.Functions = j.newFunctions(len(d.Functions))
	}
	p.Functions = slices.Grow(p.Functions, len(d.Functions))
	p.Regions = slices.Grow(p.Regions, len(d.Regions))
	for _, f := range d.Functions {
		name := ""
		if i := len(p.Functions); i < len(prev.Functions) {
			name = prev.Functions[i].Name
		}
		p.Functions = append(p.Functions, store.Function{Name: t.like(f.Name, name), Calls: f.Calls, TimeNS: f.TimeNs, WaitNS: f.WaitNs,
			BytesSent: f.BytesSent, BytesReceived: f.BytesReceived})
	}
	for _, r := range d.Regions {
		name := ""
		if i := len(p.Regions); i < len(prev.Regions) {
			name = prev.Regions[i].Name
		}
		p.Regions = append(p.Regions, store.Region{Name: t.like(r.Name, name), Entries: r.Entries, TimeNS: r.TimeNs, MPITimeNS: r.MpiTimeNs,
			WaitNS: r.WaitNs, Classes: store.Classes{P2P: traffic(r.P2P), Coll: traffic(r.Coll), RMA: traffic(r.Rma)}})
	}
	if d.Gpu != nil {
		p.GPU = gpuOf(d.Gpu)
	}
	if len(d.Reorders) > 0 {
		p.Reorders = reordersOf(d.Reorders)
	}
	// The decoder made the rows; a one-chunk snapshot keeps them.
	if pend.rows.n == 0 {
		pend.rows = d.rows
	} else {
		pend.rows.b = append(pend.rows.b, d.rows.b...)
		pend.rows.c = append(pend.rows.c, d.rows.c...)
		pend.rows.n += d.rows.n
		d.rows.release()
	}
	// Each datagram's peers come sorted and packed (a one-chunk snapshot
	// keeps them); the rare snapshot of several chunks merges them.
	if p.Peers.Len() == 0 {
		p.Peers = d.peers.rows
	} else if d.peers.rows.Len() > 0 {
		rows := append(p.Peers.Slice(), d.peers.rows.Slice()...)
		slices.SortStableFunc(rows, func(a, b store.PeerTraffic) int { return cmp.Compare(a.Peer, b.Peer) })
		for i := 1; i < len(rows) && !pend.hasDup; i++ {
			if rows[i].Peer == rows[i-1].Peer {
				pend.dupPeer, pend.hasDup = rows[i].Peer, true
			}
		}
		p.Peers = store.NewPeerRows(rows)
	}
}

type nodeSum struct {
	node string
	c    store.Classes
}

// KnowNode tells the tracker the node of a job's rank before that rank's
// snapshots are added, so that other ranks' traffic to it can be placed on
// its node (nodesFromPeers) whatever order snapshots come in.
func (t *Tracker) KnowNode(job string, rank int, node string) {
	if t.hints == nil {
		t.hints = map[rankKey]string{}
	}
	t.hints[rankKey{job, rank}] = node
}

// nodeOf is the node of rank in job j ("" while unknown): the one its
// current snapshot reports, else a hint.
func (t *Tracker) nodeOf(j *jobState, rank int) string {
	if r := j.ranks[rank]; r != nil && r.has {
		return r.cur.Node
	}
	return t.hints[rankKey{j.id, rank}]
}

// nodesFromPeers makes a snapshot's destination-node rows, and its intra-
// and inter-node totals, from its peer rows and the node each peer rank
// reports of itself. Agents send peer rows only: a rank learning the other
// ranks' nodes would take MPI traffic the application never asked for. A
// peer whose node is not known yet (every rank reports once at its start, so
// this is rare) is left out for now; counters are cumulative, so its traffic
// shows in the rank's next snapshot.
func (t *Tracker) nodesFromPeers(j *jobState, np *store.Process, rows *nodeRows) {
	sums := t.nodeSums[:0]
	for peer, c := range np.Peers.Traffic() {
		node := np.Node
		if peer != np.Rank {
			node = t.nodeOf(j, peer)
		}
		if node == "" {
			continue
		}
		k := slices.IndexFunc(sums, func(s nodeSum) bool { return s.node == node })
		if k < 0 {
			k = len(sums)
			sums = append(sums, nodeSum{node: node})
		}
		sums[k].c = sums[k].c.Add(c)
	}
	var intra, inter store.Traffic
	for i := range sums {
		rows.add([]byte(sums[i].node), &sums[i].c)
		if sums[i].node == np.Node {
			intra = sums[i].c.Total()
		} else {
			inter = inter.Add(sums[i].c.Total())
		}
	}
	if np.IntraNode == (store.Traffic{}) && np.InterNode == (store.Traffic{}) {
		np.IntraNode, np.InterNode = intra, inter
	}
	t.nodeSums = sums[:0]
}
