package ingest

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/netloom/netloom/internal/ingest/agentpb"
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

// Datagram is one decoded agent datagram: the protobuf message, but for
// its destination-node rows (field 14: every destination node of the rank,
// a thousand and more for an all-to-all job), which are decoded straight
// into one buffer (nodeRows) that the tracker packs against the job's node
// table, and its peer rows (field 15), decoded by hand, sorted and packed
// as the store keeps them (store.PeerRows); the message's own Nodes and
// Peers stay empty. proto.Unmarshal made three objects per node row
// (row, name, traffic), and a 64-byte store row per row after it was still
// a fifth of the daemon's CPU at ten times Stampede's load, with its
// zeroing and garbage; for peers it made five objects each (row, three
// Traffic, histogram), a quarter of all the daemon allocated at that load,
// and the tracker copied them once more. Unknown fields inside node and
// peer rows are dropped (nothing reads them).
type Datagram struct {
	*agentpb.Datagram
	rows  nodeRows
	peers packedPeers
	own   storage // where unmarshal puts the message
	// from is the address it came from (invalid when not read from a
	// socket); it travels with the datagram while its credential is
	// decoded, for the limits on new jobs per source (AdmitOptions).
	from netip.Addr
}

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

// FromProto wraps a message decoded by proto.Unmarshal, moving its node
// and peer rows into the datagram's own.
func FromProto(m *agentpb.Datagram) *Datagram {
	d := &Datagram{Datagram: m}
	for _, n := range m.Nodes {
		c := store.Classes{P2P: traffic(n.P2P), Coll: traffic(n.Coll), RMA: traffic(n.Rma)}
		d.rows.add([]byte(n.Node), &c)
	}
	if len(m.Peers) > 0 {
		var p peerRows
		for _, x := range m.Peers {
			p.hist = append(p.hist, x.SizeHistogram...)
			var mon *store.Physical
			if x.MonitoredP2P != nil || x.MonitoredColl != nil || x.MonitoredRma != nil || x.MonitoredFetched != nil {
				mon = &store.Physical{Classes: store.Classes{P2P: traffic(x.MonitoredP2P), Coll: traffic(x.MonitoredColl), RMA: traffic(x.MonitoredRma)},
					Fetched: traffic(x.MonitoredFetched)}
			}
			p.end(store.PeerTraffic{Peer: int(x.Peer), Classes: store.Classes{P2P: traffic(x.P2P), Coll: traffic(x.Coll), RMA: traffic(x.Rma)}}, mon)
		}
		d.peers = p.pack()
	}
	m.Nodes, m.Peers = nil, nil
	return d
}

// unmarshal decodes a datagram (see Datagram and decode_msg.go).
func unmarshal(b []byte) (*Datagram, error) {
	d := new(Datagram)
	d.Datagram = &d.own.msg
	var peers *peerRows
	defer func() {
		if peers != nil {
			peers.reset()
			peersPool.Put(peers)
		}
	}()
	err := fields(b, func(num protowire.Number, typ protowire.Type, at int) (int, error) {
		switch {
		case num == fieldNodes && typ == protowire.BytesType:
			row, next := bytesAt(b, at)
			if next < 0 {
				return 0, errMalformed
			}
			if d.rows.b == nil {
				// A row packs to no more bytes than it takes on the wire.
				d.rows.b = rowsBuffer(len(b) - at)
			}
			return next, d.rows.decode(row)
		case num == fieldPeers && typ == protowire.BytesType:
			row, next := bytesAt(b, at)
			if next < 0 {
				return 0, errMalformed
			}
			if peers == nil {
				peers = peersPool.Get().(*peerRows)
			}
			return next, peers.decode(row)
		}
		return d.field(b, num, typ, at)
	})
	if err != nil {
		return nil, err
	}
	d.rows.fit()
	if peers != nil {
		d.peers = peers.pack()
	}
	return d, nil
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

var errMalformed = errors.New("malformed field")

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

// ascii says whether b is ASCII, inline (node names nearly always are,
// and a call to utf8.Valid for ten bytes cost more than its check).
func ascii(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// tagAt reads the field tag at b[off:] as protowire.ConsumeTag does, and
// returns the offset after it (negative if malformed). tagAt, bytesAt and
// varintAt read one-byte values, the usual case, without binary.Uvarint's
// loop: with it they were a third of the cost of decoding a 1,024-row
// datagram. (They are too large for the compiler to inline.)
func tagAt(b []byte, off int) (protowire.Number, protowire.Type, int) {
	if off < len(b) && b[off] < 0x80 { // one byte: fields 1 to 15
		v := b[off]
		if v>>3 == 0 {
			return 0, 0, -1
		}
		return protowire.Number(v >> 3), protowire.Type(v & 7), off + 1
	}
	v, n := binary.Uvarint(b[off:])
	if n <= 0 || v>>3 == 0 || v>>3 > uint64(protowire.MaxValidNumber) {
		return 0, 0, -1
	}
	return protowire.Number(v >> 3), protowire.Type(v & 7), off + n
}

// bytesAt reads a length-delimited value at b[off:].
func bytesAt(b []byte, off int) ([]byte, int) {
	l, next := varintAt(b, off)
	if next < 0 || l > uint64(len(b)-next) {
		return nil, -1
	}
	return b[next : next+int(l)], next + int(l)
}

// varintAt reads a varint at b[off:].
func varintAt(b []byte, off int) (uint64, int) {
	if off < len(b) && b[off] < 0x80 {
		return uint64(b[off]), off + 1
	}
	v, n := binary.Uvarint(b[off:])
	if n <= 0 {
		return 0, -1
	}
	return v, off + n
}

// decodeClass merges one encoded Traffic into c's class-th class (0
// point-to-point, 1 collective, 2 one-sided), as rows list them.
func decodeClass(b []byte, c *store.Classes, class protowire.Number) error {
	t := &c.P2P
	switch class {
	case 1:
		t = &c.Coll
	case 2:
		t = &c.RMA
	}
	return decodeTraffic(b, t)
}

// decodeTraffic merges one encoded Traffic into t.
func decodeTraffic(b []byte, t *store.Traffic) error {
	for off := 0; off < len(b); {
		num, typ, at := tagAt(b, off)
		if at < 0 {
			return errMalformed
		}
		if (num == fieldTrafficByte || num == fieldTrafficMsgs) && typ == protowire.VarintType {
			v, next := varintAt(b, at)
			if next < 0 {
				return errMalformed
			}
			if num == fieldTrafficByte {
				t.Bytes = v
			} else {
				t.Msgs = v
			}
			off = next
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b[at:])
		if m < 0 {
			return protowire.ParseError(m)
		}
		off = at + m
	}
	return nil
}
