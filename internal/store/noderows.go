package store

import (
	"encoding/binary"
	"encoding/json"
	"iter"
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
	return t.PackIndexed(rows, t.Indexes(nil, rows))
}

// Indexes appends to dst the table index of each row's node, adding the
// names the table does not have yet.
func (t *NodeTable) Indexes(dst []uint32, rows []NodeTraffic) []uint32 {
	if t.index == nil {
		t.index = map[string]uint32{}
	}
	for i := range rows {
		k, ok := t.index[rows[i].Node]
		if !ok {
			k = uint32(len(t.names))
			t.index[rows[i].Node] = k
			t.names = append(t.names, rows[i].Node)
		}
		dst = append(dst, k)
	}
	return dst
}

// PackIndexed packs rows, in their order, whose nodes have the table
// indexes idx (from Indexes).
func (t *NodeTable) PackIndexed(rows []NodeTraffic, idx []uint32) NodeRows {
	if len(rows) == 0 {
		return NodeRows{}
	}
	b := t.buf[:0]
	for i := range rows {
		b = binary.AppendUvarint(b, uint64(idx[i]))
		b = AppendClasses(b, &rows[i].Classes)
	}
	t.buf = b
	return NodeRows{tab: t, names: t.names, b: append([]byte(nil), b...), n: len(rows)}
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
	at := len(dst)
	dst = append(dst, 0)
	var mask byte
	for i, v := range [6]uint64{c.P2P.Bytes, c.P2P.Msgs, c.Coll.Bytes, c.Coll.Msgs, c.RMA.Bytes, c.RMA.Msgs} {
		if v != 0 {
			mask |= 1 << i
			dst = binary.AppendUvarint(dst, v)
		}
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
	mask := b[n]
	b = b[n+1:]
	var v [6]uint64
	for i := 0; mask != 0; i, mask = i+1, mask>>1 {
		if mask&1 != 0 {
			v[i], n = binary.Uvarint(b)
			b = b[n:]
		}
	}
	c.off = len(c.r.b) - len(b)
	return int(u), Classes{P2P: Traffic{v[0], v[1]}, Coll: Traffic{v[2], v[3]}, RMA: Traffic{v[4], v[5]}}, true
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
