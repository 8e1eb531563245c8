package ingest

import (
	"encoding/binary"
	"errors"
	"sync"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/netloom/netloom/internal/ingest/agentpb"
	"github.com/netloom/netloom/internal/store"
)

// Field numbers of the node rows (agent.proto).
const (
	fieldNodes       protowire.Number = 14
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
// table; the message's own Nodes stay empty. proto.Unmarshal made three
// objects per row (row, name, traffic), and a 64-byte store row per row
// after it was still a fifth of the daemon's CPU at ten times Stampede's
// load, with its zeroing and garbage. Unknown fields inside node rows are
// dropped (nothing reads them).
type Datagram struct {
	*agentpb.Datagram
	rows nodeRows
}

// nodeRows are destination-node rows as the reader decoded them, one
// buffer for all: per row the node's name (a uvarint length, then the
// bytes) and its counters as store.AppendClasses packs them.
type nodeRows struct {
	b                []byte
	n                int
	minName, maxName int // the shortest and longest name, for validation
}

// add appends a row.
func (r *nodeRows) add(name []byte, c *store.Classes) {
	r.b = binary.AppendUvarint(r.b, uint64(len(name)))
	r.b = append(r.b, name...)
	r.b = store.AppendClasses(r.b, c)
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
// rows into the datagram's own.
func FromProto(m *agentpb.Datagram) *Datagram {
	d := &Datagram{Datagram: m}
	for _, n := range m.Nodes {
		c := store.Classes{P2P: traffic(n.P2P), Coll: traffic(n.Coll), RMA: traffic(n.Rma)}
		d.rows.add([]byte(n.Node), &c)
	}
	m.Nodes = nil
	return d
}

// unmarshal decodes a datagram (see Datagram): node rows as it meets
// them, the other fields by proto.Unmarshal.
func unmarshal(b []byte) (*Datagram, error) {
	d := &Datagram{Datagram: new(agentpb.Datagram)}
	// The other fields, in order, when there are node rows to take out
	// (in a pooled buffer: proto.Unmarshal copies what it keeps).
	var (
		rest    []byte
		scratch *[]byte
	)
	defer func() {
		if scratch != nil {
			*scratch = rest[:0]
			scratchPool.Put(scratch)
		}
	}()
	for off := 0; off < len(b); {
		num, typ, at := tagAt(b, off)
		if at < 0 {
			return nil, errMalformed
		}
		if num == fieldNodes && typ == protowire.BytesType {
			row, next := bytesAt(b, at)
			if next < 0 {
				return nil, errMalformed
			}
			if scratch == nil { // the first row (rest may be empty, and nil)
				scratch = scratchPool.Get().(*[]byte)
				rest = append((*scratch)[:0], b[:off]...)
				// A row packs to no more bytes than it takes on the wire.
				d.rows.b = rowsBuffer(len(b) - off)
			}
			if err := d.rows.decode(row); err != nil {
				return nil, err
			}
			off = next
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b[at:])
		if m < 0 {
			return nil, protowire.ParseError(m)
		}
		if scratch != nil {
			rest = append(rest, b[off:at+m]...)
		}
		off = at + m
	}
	if scratch == nil {
		rest = b
	}
	if err := proto.Unmarshal(rest, d.Datagram); err != nil {
		return nil, err
	}
	return d, nil
}

// Buffers for decoding, reused: made anew, the rows' buffer and the copy
// of the other fields were zeroed at every large datagram (120 KB for a
// 1,024-node all-to-all rank's), 8% of the daemon's CPU at ten times
// Stampede's load.
var (
	scratchPool = sync.Pool{New: func() any { return new([]byte) }}
	rowsPool    = sync.Pool{New: func() any { return new([]byte) }}
)

// pooledRows is the size from which rows' buffers come from rowsPool.
const pooledRows = 4 << 10

// rowsBuffer returns an empty buffer for rows that take n bytes on the wire.
func rowsBuffer(n int) []byte {
	if n < pooledRows {
		return make([]byte, 0, n)
	}
	b := *rowsPool.Get().(*[]byte)
	if cap(b) < n {
		b = make([]byte, 0, max(n, 64<<10))
	}
	return b[:0]
}

// release gives the rows' buffer back for reuse; the rows are empty after.
func (r *nodeRows) release() {
	if cap(r.b) >= pooledRows {
		b := r.b[:0]
		rowsPool.Put(&b)
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
			field := &c.P2P
			switch num {
			case fieldNodeP2P + 1:
				field = &c.Coll
			case fieldNodeRMA:
				field = &c.RMA
			}
			if err := decodeTraffic(v, field); err != nil {
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
// varintAt are inlined, where protowire's functions are calls, a third of
// the cost of decoding a 1,024-row datagram.
func tagAt(b []byte, off int) (protowire.Number, protowire.Type, int) {
	v, n := binary.Uvarint(b[off:])
	if n <= 0 || v>>3 == 0 || v>>3 > uint64(protowire.MaxValidNumber) {
		return 0, 0, -1
	}
	return protowire.Number(v >> 3), protowire.Type(v & 7), off + n
}

// bytesAt reads a length-delimited value at b[off:].
func bytesAt(b []byte, off int) ([]byte, int) {
	l, n := binary.Uvarint(b[off:])
	if n <= 0 || l > uint64(len(b)-off-n) {
		return nil, -1
	}
	off += n
	return b[off : off+int(l)], off + int(l)
}

// varintAt reads a varint at b[off:].
func varintAt(b []byte, off int) (uint64, int) {
	v, n := binary.Uvarint(b[off:])
	if n <= 0 {
		return 0, -1
	}
	return v, off + n
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
