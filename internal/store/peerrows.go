package store

import (
	"encoding/binary"
	"encoding/json"
	"iter"
)

// PeerRows is a rank's traffic to each peer rank, packed in one byte
// slice: per row the peer's rank as a varint difference from the row
// before's, its counters as AppendClasses packs them, the number of
// histogram bins as a uvarint and the bins as uvarints, then a byte, 1
// when monitored counters follow (packed as the others), else 0. A
// PeerTraffic takes 88 bytes and holds pointers: at ten times Stampede's
// load the ranks' peer rows were a gigabyte of the daemon's heap, and
// most of what each garbage collection had to scan. The process codec
// stores these bytes as they are. The byte after the bins is 2 when the
// monitored counters carry fetched one-sided data too (its bytes and
// messages follow them as uvarints). PeerRows is immutable; its zero value
// has no rows. It encodes to JSON as a list of PeerTraffic.
type PeerRows struct {
	b []byte
	n int
}

// AppendPeer appends x packed as a row after one for peer last (0 for the
// first row).
func AppendPeer(dst []byte, last int, x *PeerTraffic) []byte {
	dst = binary.AppendVarint(dst, int64(x.Peer)-int64(last))
	dst = AppendClasses(dst, &x.Classes)
	dst = binary.AppendUvarint(dst, uint64(len(x.Histogram)))
	for _, v := range x.Histogram {
		dst = binary.AppendUvarint(dst, v)
	}
	m := x.Monitored
	switch {
	case m == nil:
		return append(dst, 0)
	case m.Fetched == (Traffic{}):
		return AppendClasses(append(dst, 1), &m.Classes)
	}
	dst = AppendClasses(append(dst, 2), &m.Classes)
	return binary.AppendUvarint(binary.AppendUvarint(dst, m.Fetched.Bytes), m.Fetched.Msgs)
}

// NewPeerRows packs rows, in their order.
func NewPeerRows(rows []PeerTraffic) PeerRows {
	if len(rows) == 0 {
		return PeerRows{}
	}
	var b []byte
	last := 0
	for i := range rows {
		b = AppendPeer(b, last, &rows[i])
		last = rows[i].Peer
	}
	return PeerRows{b: b, n: len(rows)}
}

// PackedPeers makes rows of n rows that AppendPeer wrote to b (which the
// rows then own).
func PackedPeers(b []byte, n int) PeerRows {
	if n == 0 {
		return PeerRows{}
	}
	return PeerRows{b: b, n: n}
}

// Len is the number of rows.
func (r PeerRows) Len() int { return r.n }

// Packed is the rows' bytes, as AppendPeer wrote them (not to be changed).
func (r PeerRows) Packed() []byte { return r.b }

// PeerCursor reads rows one at a time.
type PeerCursor struct {
	b    []byte
	last int
}

// Cursor returns a cursor at the first row.
func (r PeerRows) Cursor() PeerCursor { return PeerCursor{b: r.b} }

// Next returns the next row's peer and counters; ok is false after the
// last. hist receives the row's histogram bins (appended to hist[:0]), and
// monitored its monitored counters (nil: none, or not wanted; has says
// whether the row has them). The bytes were written by AppendPeer, so
// they are trusted.
func (c *PeerCursor) Next(hist []uint64, monitored *Physical) (peer int, cl Classes, bins []uint64, has bool, ok bool) {
	if len(c.b) == 0 {
		return 0, cl, hist[:0], false, false
	}
	cl, count, off := c.head()
	bins = hist[:0]
	for range count {
		v, n := binary.Uvarint(c.b[off:])
		bins = append(bins, v)
		off += n
	}
	flag := c.b[off]
	off++
	if has = flag != 0; has {
		var m Physical
		var n int
		m.Classes, n = ReadClasses(c.b[off:])
		off += n
		if flag == 2 {
			m.Fetched.Bytes, n = binary.Uvarint(c.b[off:])
			off += n
			m.Fetched.Msgs, n = binary.Uvarint(c.b[off:])
			off += n
		}
		if monitored != nil {
			*monitored = m
		}
	}
	c.b = c.b[off:]
	return c.last, cl, bins, has, true
}

// head reads the next row's peer (into c.last), its counters and its
// number of bins, and returns where its bins start.
func (c *PeerCursor) head() (cl Classes, count uint64, off int) {
	d, n := binary.Varint(c.b)
	c.last += int(d)
	cl, m := ReadClasses(c.b[n:])
	count, k := binary.Uvarint(c.b[n+m:])
	return cl, count, n + m + k
}

// NextTraffic is Next for the peer and counters alone.
func (c *PeerCursor) NextTraffic() (peer int, cl Classes, ok bool) {
	if len(c.b) == 0 {
		return 0, cl, false
	}
	cl, count, off := c.head()
	for range count {
		for c.b[off] >= 0x80 {
			off++
		}
		off++
	}
	flag := c.b[off]
	off++
	if flag != 0 {
		off += ClassesLen(c.b[off:])
	}
	if flag == 2 {
		for range 2 {
			for c.b[off] >= 0x80 {
				off++
			}
			off++
		}
	}
	c.b = c.b[off:]
	return c.last, cl, true
}

// Traffic yields each row's peer and counters, in order.
func (r PeerRows) Traffic() iter.Seq2[int, Classes] {
	return func(yield func(int, Classes) bool) {
		c := r.Cursor()
		for {
			peer, cl, ok := c.NextTraffic()
			if !ok || !yield(peer, cl) {
				return
			}
		}
	}
}

// Physical yields the peer and monitored counters of each row that has
// them, in order.
func (r PeerRows) Physical() iter.Seq2[int, Physical] {
	return func(yield func(int, Physical) bool) {
		c := r.Cursor()
		var bins []uint64
		for {
			var mon Physical
			peer, _, b, has, ok := c.Next(bins, &mon)
			if !ok {
				return
			}
			bins = b
			if has && !yield(peer, mon) {
				return
			}
		}
	}
}

// All yields the rows unpacked, in order, each with its own histogram.
func (r PeerRows) All() iter.Seq[PeerTraffic] {
	return func(yield func(PeerTraffic) bool) {
		c := r.Cursor()
		for {
			var mon Physical
			peer, cl, bins, has, ok := c.Next(nil, &mon)
			if !ok {
				return
			}
			t := PeerTraffic{Peer: peer, Classes: cl, Histogram: bins}
			if len(bins) == 0 {
				t.Histogram = nil
			}
			if has {
				t.Monitored = &mon
			}
			if !yield(t) {
				return
			}
		}
	}
}

// Slice returns the rows unpacked (never nil).
func (r PeerRows) Slice() []PeerTraffic {
	out := make([]PeerTraffic, 0, r.n)
	for t := range r.All() {
		out = append(out, t)
	}
	return out
}

// MarshalJSON encodes the rows as a list of PeerTraffic.
func (r PeerRows) MarshalJSON() ([]byte, error) { return json.Marshal(r.Slice()) }

// UnmarshalJSON decodes a list of PeerTraffic.
func (r *PeerRows) UnmarshalJSON(b []byte) error {
	var rows []PeerTraffic
	if err := json.Unmarshal(b, &rows); err != nil {
		return err
	}
	*r = NewPeerRows(rows)
	return nil
}
