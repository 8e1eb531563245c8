package store

import (
	"encoding/binary"
	"encoding/json"
	"iter"
	"math/bits"
)

// NodeRows is a rank's traffic to each destination node, packed: a row is
// the index of its node's name in a table that the rows of a whole job
// share, a byte saying which of the six counters are not zero, and those
// counters as varints. That is about 10 bytes a row where a NodeTraffic
// takes 64, and the ranks of a large all-to-all job report every node of
// it: at twice Stampede's load such rows were two thirds of the daemon's
// heap. NodeRows is immutable; its zero value has no rows. It encodes to
// JSON as a list of NodeTraffic.
type NodeRows struct {
	tab   *NodeTable
	names []string // the table's names as they were when the rows were packed
	b     []byte
	n     int
}

// NodeTable packs node rows against a name table that grows as new names
// appear; rows packed earlier keep working (the table only appends).
// Owned by one goroutine.
type NodeTable struct {
	index map[string]uint32
	names []string
	buf   []byte
}

// Len is the number of names in the table.
func (t *NodeTable) Len() int { return len(t.names) }

// Pack packs rows, in their order.
func (t *NodeTable) Pack(rows []NodeTraffic) NodeRows {
	if len(rows) == 0 {
		return NodeRows{}
	}
	b := t.buf[:0]
	for i := range rows {
		b = binary.AppendUvarint(b, uint64(indexOf(t, rows[i].Node)))
		b = AppendClasses(b, &rows[i].Classes)
	}
	t.buf = b
	return t.Packed(append([]byte(nil), b...), len(rows))
}

// IndexNear returns the table index of a node's name, adding the name
// when the table does not have it yet. The name is likely the one at
// index hint (a rank's rows usually come in table order): comparing it
// there costs much less than hashing it.
func (t *NodeTable) IndexNear(name []byte, hint uint32) uint32 {
	if int(hint) < len(t.names) && t.names[hint] == string(name) {
		return hint
	}
	return indexOf(t, name)
}

func indexOf[S string | []byte](t *NodeTable, name S) uint32 {
	if k, ok := t.index[string(name)]; ok {
		return k
	}
	if t.index == nil {
		t.index = map[string]uint32{}
	}
	k := uint32(len(t.names))
	s := string(name)
	t.index[s] = k
	t.names = append(t.names, s)
	return k
}

// Packed wraps n rows already packed, as Pack packs them (each row its
// node's index, from IndexNear, then its classes as AppendClasses packs
// them); b is kept.
func (t *NodeTable) Packed(b []byte, n int) NodeRows {
	if n == 0 {
		return NodeRows{}
	}
	return NodeRows{tab: t, names: t.names, b: b, n: n}
}

// NewNodeRows packs rows against a table of their own (which keeps only
// the names: nothing else is packed against it).
func NewNodeRows(rows []NodeTraffic) NodeRows {
	t := &NodeTable{}
	r := t.Pack(rows)
	t.index, t.buf = nil, nil
	return r
}

// AppendClasses appends c packed as node rows hold it: a byte whose bits
// say which of the six counters (p2p, coll, rma bytes and msgs) are not
// zero, then those as varints (most rows have traffic of one class).
func AppendClasses(dst []byte, c *Classes) []byte {
	// Written out, not a loop over the six: this is done for every node
	// row of every snapshot.
	at := len(dst)
	dst = append(dst, 0)
	var mask byte
	if c.P2P.Bytes != 0 {
		mask |= 1
		dst = binary.AppendUvarint(dst, c.P2P.Bytes)
	}
	if c.P2P.Msgs != 0 {
		mask |= 2
		dst = binary.AppendUvarint(dst, c.P2P.Msgs)
	}
	if c.Coll.Bytes != 0 {
		mask |= 4
		dst = binary.AppendUvarint(dst, c.Coll.Bytes)
	}
	if c.Coll.Msgs != 0 {
		mask |= 8
		dst = binary.AppendUvarint(dst, c.Coll.Msgs)
	}
	if c.RMA.Bytes != 0 {
		mask |= 16
		dst = binary.AppendUvarint(dst, c.RMA.Bytes)
	}
	if c.RMA.Msgs != 0 {
		mask |= 32
		dst = binary.AppendUvarint(dst, c.RMA.Msgs)
	}
	dst[at] = mask
	return dst
}

// Len is the number of rows.
func (r NodeRows) Len() int { return r.n }

// NodeCursor reads rows one at a time.
type NodeCursor struct {
	r   NodeRows
	off int
	cls int // the counters of the row NextRow moved to
}

// Cursor returns a cursor at the first row.
func (r NodeRows) Cursor() NodeCursor { return NodeCursor{r: r} }

// Next returns the next row; ok is false after the last.
func (c *NodeCursor) Next() (t NodeTraffic, ok bool) {
	k, cl, ok := c.NextIndex()
	if !ok {
		return t, false
	}
	return NodeTraffic{Node: c.r.names[k], Classes: cl}, true
}

// NextIndex returns the next row with its node as an index into Names;
// ok is false after the last. The bytes were written by Pack, so they are
// trusted.
func (c *NodeCursor) NextIndex() (k int, cl Classes, ok bool) {
	b := c.r.b[c.off:]
	if len(b) == 0 {
		return 0, cl, false
	}
	u, n := binary.Uvarint(b)
	cl, m := ReadClasses(b[n:])
	c.off += n + m
	return int(u), cl, true
}

// NextRow moves to the next row and returns its node's index; ok is false
// after the last. Less then compares the row's counters, which it does
// not decode otherwise (a tracker compares each of a rank's rows with its
// last snapshot's: decoding every counter of both was 7% of the daemon's
// CPU at ten times Stampede).
func (c *NodeCursor) NextRow() (k int, ok bool) {
	b := c.r.b[c.off:]
	if len(b) == 0 {
		return 0, false
	}
	u, n := binary.Uvarint(b)
	c.cls = c.off + n
	c.off = c.cls + ClassesLen(c.r.b[c.cls:])
	return int(u), true
}

// Less says whether any of cl's counters is below the same counter of the
// row NextRow moved to.
func (c *NodeCursor) Less(cl *Classes) bool {
	b := c.r.b[c.cls:]
	off := 1
	for mask := b[0]; mask != 0; mask &= mask - 1 {
		u, n := binary.Uvarint(b[off:])
		off += n
		var v uint64
		switch bits.TrailingZeros8(mask) {
		case 0:
			v = cl.P2P.Bytes
		case 1:
			v = cl.P2P.Msgs
		case 2:
			v = cl.Coll.Bytes
		case 3:
			v = cl.Coll.Msgs
		case 4:
			v = cl.RMA.Bytes
		default:
			v = cl.RMA.Msgs
		}
		if v < u {
			return true
		}
	}
	return false
}

// ClassesLen is the length of the classes that AppendClasses packed at
// the start of b. b is trusted.
func ClassesLen(b []byte) int {
	off := 1
	for mask := b[0]; mask != 0; mask &= mask - 1 {
		for b[off] >= 0x80 {
			off++
		}
		off++
	}
	return off
}

// ReadClasses reads classes that AppendClasses packed at the start of b,
// and how many bytes they take. b is trusted.
func ReadClasses(b []byte) (Classes, int) {
	off := 1
	var v [6]uint64
	for mask := b[0]; mask != 0; mask &= mask - 1 {
		u, n := binary.Uvarint(b[off:])
		v[bits.TrailingZeros8(mask)] = u
		off += n
	}
	return Classes{P2P: Traffic{v[0], v[1]}, Coll: Traffic{v[2], v[3]}, RMA: Traffic{v[4], v[5]}}, off
}

// Table is the table the rows were packed against: rows with the same
// table share the meaning of their indexes (NodeCursor.NextIndex).
func (r NodeRows) Table() *NodeTable { return r.tab }

// Names are the names the rows' indexes refer to (at least).
func (r NodeRows) Names() []string { return r.names }

// All yields the rows in order.
func (r NodeRows) All() iter.Seq[NodeTraffic] {
	return func(yield func(NodeTraffic) bool) {
		c := r.Cursor()
		for t, ok := c.Next(); ok; t, ok = c.Next() {
			if !yield(t) {
				return
			}
		}
	}
}

// Slice returns the rows unpacked (never nil).
func (r NodeRows) Slice() []NodeTraffic {
	out := make([]NodeTraffic, 0, r.n)
	for t := range r.All() {
		out = append(out, t)
	}
	return out
}

// MarshalJSON encodes the rows as a list of NodeTraffic.
func (r NodeRows) MarshalJSON() ([]byte, error) { return json.Marshal(r.Slice()) }

// UnmarshalJSON decodes a list of NodeTraffic.
func (r *NodeRows) UnmarshalJSON(b []byte) error {
	var rows []NodeTraffic
	if err := json.Unmarshal(b, &rows); err != nil {
		return err
	}
	*r = NewNodeRows(rows)
	return nil
}
