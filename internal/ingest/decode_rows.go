package ingest

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"slices"
	"sync"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/netloom/netloom/internal/store"
)

// Field numbers of the node rows (agent.proto).
const (
	fieldNodes       protowire.Number = 14
	fieldPeers       protowire.Number = 15
	fieldNodeName    protowire.Number = 1
	fieldNodeP2P     protowire.Number = 2 // then coll 3, rma 4
	fieldNodeRMA     protowire.Number = 4
	fieldTrafficByte protowire.Number = 1
	fieldTrafficMsgs protowire.Number = 2
)

var errInvalidUTF8 = errors.New("node name is not valid UTF-8")

// nodeRows are destination-node rows as the reader decoded them, one
// buffer for all: per row the node's name (a uvarint length, then the
// bytes) and its counters as store.AppendClasses packs them; and the
// counters again, unpacked, in c (the tracker sums and checks them, and
// reading them back from the packed rows was 6% of the daemon's CPU at
// ten times Stampede).
type nodeRows struct {
	b                []byte
	c                []store.Classes
	n                int
	minName, maxName int // the shortest and longest name, for validation
}

// add appends a row.
func (r *nodeRows) add(name []byte, c *store.Classes) {
	r.b = binary.AppendUvarint(r.b, uint64(len(name)))
	r.b = append(r.b, name...)
	r.b = store.AppendClasses(r.b, c)
	if r.c == nil {
		r.c = (*classesPool.Get().(*[]store.Classes))[:0]
	}
	r.c = append(r.c, *c)
	if r.n == 0 || len(name) < r.minName {
		r.minName = len(name)
	}
	r.maxName = max(r.maxName, len(name))
	r.n++
}

// row reads the row at off: its name, where its counters are packed
// (b[cls:end]), and where it ends.
func (r *nodeRows) row(off int) (name []byte, cls, end int) {
	l, n := binary.Uvarint(r.b[off:])
	cls = off + n + int(l)
	return r.b[off+n : cls], cls, cls + store.ClassesLen(r.b[cls:])
}

// slice returns the rows unpacked.
func (r *nodeRows) slice() []store.NodeTraffic {
	out := make([]store.NodeTraffic, 0, r.n)
	for off := 0; off < len(r.b); {
		name, cls, end := r.row(off)
		c, _ := store.ReadClasses(r.b[cls:end])
		out = append(out, store.NodeTraffic{Node: string(name), Classes: c})
		off = end
	}
	return out
}

// Buffers for decoding, reused: made anew, the rows' buffer and the copy
// of the other fields were zeroed at every large datagram (120 KB for a
// 1,024-node all-to-all rank's), 8% of the daemon's CPU at ten times
// Stampede's load.
var (
	rowsPool    = sync.Pool{New: func() any { return new([]byte) }}
	classesPool = sync.Pool{New: func() any { return new([]store.Classes) }}
)

// pooledRows is the size from which decoded rows keep their buffer from
// rowsPool (until the tracker has packed them); fewer are copied out.
const pooledRows = 4 << 10

// rowsBuffer returns an empty buffer for rows that take n bytes on the wire.
func rowsBuffer(n int) []byte {
	b := *rowsPool.Get().(*[]byte)
	if cap(b) < n {
		b = make([]byte, 0, max(n, 64<<10))
	}
	return b[:0]
}

// fit copies small rows out of their pooled buffer, which goes back to
// the pool. (Made for each datagram at the size of the rest of it, their
// buffers were a third of what the daemon allocated per datagram of a
// halo job: a few rows, and the peers after them.)
func (r *nodeRows) fit() {
	if r.b == nil || len(r.b) >= pooledRows {
		return
	}
	b := r.b
	r.b = bytes.Clone(b)
	b = b[:0]
	rowsPool.Put(&b)
}

// release gives the rows' buffer back for reuse; the rows are empty after.
func (r *nodeRows) release() {
	if cap(r.b) >= pooledRows {
		b := r.b[:0]
		rowsPool.Put(&b)
	}
	if r.c != nil {
		c := r.c[:0]
		classesPool.Put(&c)
	}
	*r = nodeRows{}
}

// decode appends one encoded NodeTraffic.
func (r *nodeRows) decode(row []byte) error {
	var (
		name []byte
		c    store.Classes
	)
	for off := 0; off < len(row); {
		num, typ, at := tagAt(row, off)
		if at < 0 {
			return errMalformed
		}
		switch {
		case num == fieldNodeName && typ == protowire.BytesType:
			v, next := bytesAt(row, at)
			if next < 0 {
				return errMalformed
			}
			if !ascii(v) && !utf8.Valid(v) {
				return errInvalidUTF8
			}
			name, off = v, next
		case num >= fieldNodeP2P && num <= fieldNodeRMA && typ == protowire.BytesType:
			v, next := bytesAt(row, at)
			if next < 0 {
				return errMalformed
			}
			off = next
			if err := decodeClass(v, &c, num-fieldNodeP2P); err != nil {
				return err
			}
		default:
			m := protowire.ConsumeFieldValue(num, typ, row[at:])
			if m < 0 {
				return protowire.ParseError(m)
			}
			off = at + m
		}
	}
	r.add(name, &c)
	return nil
}

// Field numbers of the peer rows (agent.proto).
const (
	fieldPeer          protowire.Number = 1
	fieldPeerP2P       protowire.Number = 2 // then coll 3, rma 4
	fieldPeerHistogram protowire.Number = 5
	fieldPeerMonitored protowire.Number = 6 // then coll 7, rma 8
	fieldPeerFetched   protowire.Number = 9
)

// peerRows collects a datagram's peer rows while it is decoded, with
// their histograms' bins in one array (row i's end at ends[i]) and
// their monitored counters in another (mons[i], or -1); pack sorts and
// packs them.
type peerRows struct {
	peers []store.PeerTraffic // without their histograms and monitored counters
	mon   []store.Physical
	hist  []uint64
	ends  []int
	mons  []int
	order []int
	buf   []byte
}

var peersPool = sync.Pool{New: func() any { return new(peerRows) }}

func (p *peerRows) reset() {
	p.peers, p.mon, p.hist, p.ends, p.mons = p.peers[:0], p.mon[:0], p.hist[:0], p.ends[:0], p.mons[:0]
}

// packedPeers are a datagram's peer rows sorted by peer and packed, with
// what Validate checks.
type packedPeers struct {
	rows    store.PeerRows
	maxPeer int // the largest peer, when there are rows
	maxBins int // the longest histogram
	dup     int // a peer with two rows, when hasDup
	hasDup  bool
}

// pack sorts the rows by peer (keeping the order of rows of one peer) and
// packs them into an exactly sized array.
func (p *peerRows) pack() packedPeers {
	var out packedPeers
	p.order = p.order[:0]
	for i := range p.peers {
		p.order = append(p.order, i)
	}
	slices.SortStableFunc(p.order, func(a, b int) int { return cmp.Compare(p.peers[a].Peer, p.peers[b].Peer) })
	b, last := p.buf[:0], 0
	for k, i := range p.order {
		x := p.peers[i]
		start := 0
		if i > 0 {
			start = p.ends[i-1]
		}
		x.Histogram = p.hist[start:p.ends[i]]
		if m := p.mons[i]; m >= 0 {
			x.Monitored = &p.mon[m]
		}
		if k > 0 && x.Peer == last && !out.hasDup {
			out.dup, out.hasDup = x.Peer, true
		}
		out.maxBins = max(out.maxBins, len(x.Histogram))
		b = store.AppendPeer(b, last, &x)
		last = x.Peer
	}
	p.buf = b
	if len(p.order) > 0 {
		out.maxPeer = last
		out.rows = store.PackedPeers(bytes.Clone(b), len(p.order))
	}
	return out
}

// decode appends one encoded PeerTraffic, merging repeated fields as
// proto.Unmarshal does (a histogram's bins packed or not).
func (p *peerRows) decode(row []byte) error {
	var (
		pt        store.PeerTraffic
		mon       store.Physical
		monitored bool
	)
	for off := 0; off < len(row); {
		num, typ, at := tagAt(row, off)
		if at < 0 {
			return errMalformed
		}
		switch {
		case num == fieldPeer && typ == protowire.VarintType:
			v, next := varintAt(row, at)
			if next < 0 {
				return errMalformed
			}
			pt.Peer, off = int(uint32(v)), next
		case num >= fieldPeerP2P && num < fieldPeerHistogram && typ == protowire.BytesType,
			num >= fieldPeerMonitored && num < fieldPeerMonitored+3 && typ == protowire.BytesType:
			v, next := bytesAt(row, at)
			if next < 0 {
				return errMalformed
			}
			off = next
			c, class := &pt.Classes, num-fieldPeerP2P
			if num >= fieldPeerMonitored {
				c, class, monitored = &mon.Classes, num-fieldPeerMonitored, true
			}
			if err := decodeClass(v, c, class); err != nil {
				return err
			}
		case num == fieldPeerFetched && typ == protowire.BytesType:
			v, next := bytesAt(row, at)
			if next < 0 {
				return errMalformed
			}
			off, monitored = next, true
			if err := decodeTraffic(v, &mon.Fetched); err != nil {
				return err
			}
		case num == fieldPeerHistogram && typ == protowire.VarintType:
			v, next := varintAt(row, at)
			if next < 0 {
				return errMalformed
			}
			p.hist, off = append(p.hist, v), next
		case num == fieldPeerHistogram && typ == protowire.BytesType:
			v, next := bytesAt(row, at)
			if next < 0 {
				return errMalformed
			}
			for i := 0; i < len(v); {
				x, n := varintAt(v, i)
				if n < 0 {
					return errMalformed
				}
				p.hist, i = append(p.hist, x), n
			}
			off = next
		default:
			m := protowire.ConsumeFieldValue(num, typ, row[at:])
			if m < 0 {
				return protowire.ParseError(m)
			}
			off = at + m
		}
	}
	if monitored {
		p.end(pt, &mon)
	} else {
		p.end(pt, nil)
	}
	return nil
}

// end adds a row whose histogram's bins were appended to p.hist since the
// last row, with its monitored counters if any.
func (p *peerRows) end(pt store.PeerTraffic, mon *store.Physical) {
	m := -1
	if mon != nil {
		m = len(p.mon)
		p.mon = append(p.mon, *mon)
	}
	p.peers = append(p.peers, pt)
	p.ends = append(p.ends, len(p.hist))
	p.mons = append(p.mons, m)
}
