// Package codec holds the byte formats Netloom's SQL engines store, the
// same in each: port samples and their rollups, process rows, samples and
// rollups, topology and forwarding tables, and times as nanoseconds.
package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"sort"
	"time"

	"github.com/netloom/netloom/internal/fabric"
)

// One row of port_samples holds one switch's samples of one sweep as a
// blob. The layout is columnar so the many all-zero error counters cost a
// few bits per switch, not per port:
//
//	byte      format: formatRaw (deflating the blob was measured: it saved
//	          under 1% on realistic traffic and cost 4x the insert time)
//	uvarint   length L of the port bitmap, then L bytes: bit p set = port p present
//	uvarint   base span in nanoseconds
//	3 bytes   2-bit modes of span, Reset and Saturated (and 18 spare bits)
//	11 bytes  4-bit mode of each of the 21 counters, in storage order
//	then the span column, the two flag columns, the 21 counter columns.
//
// Column modes: colZero (nothing stored), colDense (one uvarint per port),
// colSparse (a bitmap of one bit per port, then one uvarint per set bit).
// Counter modes may add colDiv4: the values are stored divided by 4 (data
// counters are 4-octet words on the wire, so this saves two bits a value).
// Unicast packet counters are stored as the zig-zag difference from
// pkts - multicast pkts, which is nearly always zero. Spans are the zig-zag
// difference from the base span. Flag columns use colZero (all false),
// colDense (all true) or colSparse (bitmap only).
const (
	formatRaw = 0x01

	colZero   = 0
	colDense  = 1
	colSparse = 2
	colDiv4   = 4

	MaxPort = 254
)

var errTruncated = errors.New("truncated")

// Encoder keeps reusable buffers; it is not safe for concurrent use.
type Encoder struct {
	body []byte
	col  []byte
	best []byte
	vals []uint64
}

// EncodeSwitch appends the blob for samples, which must be one switch's
// samples of one sweep (same GUID), to dst. It sorts samples by port.
func (e *Encoder) EncodeSwitch(dst []byte, samples []fabric.PortSample) ([]byte, error) {
	n := len(samples)
	if n == 0 || n > MaxPort+1 {
		return nil, fmt.Errorf("encode: %d samples for one switch, want 1..%d", n, MaxPort+1)
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i].Port.Port < samples[j].Port.Port })
	maxP := samples[n-1].Port.Port
	var bitmap [32]byte
	for i := range samples {
		p := samples[i].Port.Port
		if p < 0 || p > MaxPort {
			return nil, fmt.Errorf("encode: port number %d out of range 0..%d", p, MaxPort)
		}
		if i > 0 && samples[i-1].Port.Port == p {
			return nil, fmt.Errorf("encode: port %d appears twice", p)
		}
		bitmap[p/8] |= 1 << (p % 8)
	}
	b := e.body[:0]
	b = binary.AppendUvarint(b, uint64(maxP/8+1))
	b = append(b, bitmap[:maxP/8+1]...)
	base := samples[0].Span
	b = binary.AppendUvarint(b, uint64(base))
	modesAt := len(b)
	b = append(b, make([]byte, 3+11)...)

	setMode := func(field int, bitsPer int, m byte) {
		bit := field * bitsPer
		off := modesAt
		if bitsPer == 4 {
			off += 3
		}
		b[off+bit/8] |= m << (bit % 8)
	}
	if cap(e.vals) < n {
		e.vals = make([]uint64, n)
	}
	vals := e.vals[:n]

	// Span column.
	for i := range samples {
		if samples[i].Span < 0 {
			return nil, fmt.Errorf("encode: port %d: negative span %v", samples[i].Port.Port, samples[i].Span)
		}
		vals[i] = zigzag(int64(samples[i].Span - base))
	}
	m, col := e.column(vals, false)
	setMode(0, 2, m&3)
	b = append(b, col...)
	// Flag columns.
	for f := 0; f < 2; f++ {
		for i := range samples {
			v := samples[i].Reset
			if f == 1 {
				v = samples[i].Saturated
			}
			vals[i] = 0
			if v {
				vals[i] = 1
			}
		}
		m, col := e.flagColumn(vals)
		setMode(1+f, 2, m)
		b = append(b, col...)
	}
	// Counter columns.
	for c := fabric.Counter(0); c < fabric.NumCounters; c++ {
		for i := range samples {
			vals[i] = storedValue(&samples[i].Delta, c)
		}
		m, col := e.column(vals, true)
		setMode(int(c), 4, m)
		b = append(b, col...)
	}
	e.body = b

	out := append(dst, formatRaw)
	return append(out, b...), nil
}

// storedValue is what the blob keeps for counter c.
func storedValue(d *[fabric.NumCounters]uint64, c fabric.Counter) uint64 {
	switch c {
	case fabric.UnicastXmitPkts:
		return zigzag(int64(d[fabric.XmitPkts] - d[fabric.MulticastXmitPkts] - d[fabric.UnicastXmitPkts]))
	case fabric.UnicastRcvPkts:
		return zigzag(int64(d[fabric.RcvPkts] - d[fabric.MulticastRcvPkts] - d[fabric.UnicastRcvPkts]))
	}
	return d[c]
}

// column encodes one column and returns its mode and bytes (valid until
// the next call).
func (e *Encoder) column(vals []uint64, allowDiv4 bool) (byte, []byte) {
	nonzero := 0
	div4 := allowDiv4
	for _, v := range vals {
		if v != 0 {
			nonzero++
			if v%4 != 0 {
				div4 = false
			}
		}
	}
	if nonzero == 0 {
		return colZero, nil
	}
	shift := 0
	var flag byte
	if div4 {
		shift, flag = 2, colDiv4
	}
	dense := e.col[:0]
	for _, v := range vals {
		dense = binary.AppendUvarint(dense, v>>shift)
	}
	e.col = dense
	nb := (len(vals) + 7) / 8
	if len(vals)-nonzero <= nb {
		return colDense | flag, dense
	}
	sparse := e.best[:0]
	sparse = append(sparse, make([]byte, nb)...)
	for i, v := range vals {
		if v != 0 {
			sparse[i/8] |= 1 << (i % 8)
			sparse = binary.AppendUvarint(sparse, v>>shift)
		}
	}
	e.best = sparse
	if len(sparse) < len(dense) {
		return colSparse | flag, sparse
	}
	return colDense | flag, dense
}

func (e *Encoder) flagColumn(vals []uint64) (byte, []byte) {
	set := 0
	for _, v := range vals {
		if v != 0 {
			set++
		}
	}
	switch set {
	case 0:
		return colZero, nil
	case len(vals):
		return colDense, nil
	}
	bm := e.col[:0]
	bm = append(bm, make([]byte, (len(vals)+7)/8)...)
	for i, v := range vals {
		if v != 0 {
			bm[i/8] |= 1 << (i % 8)
		}
	}
	e.col = bm
	return colSparse, bm
}

func zigzag(v int64) uint64   { return uint64(v<<1) ^ uint64(v>>63) }
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// Decoder keeps reusable buffers; it is not safe for concurrent use.
type Decoder struct {
	ports []int
	idx   []int
	vals  []uint64
}

func (d *Decoder) body(blob []byte) ([]byte, error) {
	if len(blob) == 0 {
		return nil, errTruncated
	}
	if blob[0] != formatRaw {
		return nil, fmt.Errorf("unknown format byte 0x%02x", blob[0])
	}
	return blob[1:], nil
}

type reader struct {
	b   []byte
	off int
}

func (r *reader) uvarint() (uint64, error) {
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		if n == 0 {
			return 0, errTruncated
		}
		return 0, errors.New("uvarint overflows 64 bits")
	}
	r.off += n
	return v, nil
}

func (r *reader) bytes(n int) ([]byte, error) {
	if n < 0 || len(r.b)-r.off < n {
		return nil, errTruncated
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s, nil
}

// DecodeSwitch decodes a blob into samples of node g at time t. When want
// is non-nil only ports it accepts are returned. The samples are appended
// to dst, in port order.
func (d *Decoder) DecodeSwitch(dst []fabric.PortSample, blob []byte, g fabric.GUID, t time.Time, want func(port int) bool) ([]fabric.PortSample, error) {
	body, err := d.body(blob)
	if err != nil {
		return dst, fmt.Errorf("decode samples of %s at %s: %w", g, t.Format(time.RFC3339Nano), err)
	}
	out, err := d.decodeBody(dst, body, g, t, want)
	if err != nil {
		return dst, fmt.Errorf("decode samples of %s at %s: %w", g, t.Format(time.RFC3339Nano), err)
	}
	return out, nil
}

func (d *Decoder) decodeBody(dst []fabric.PortSample, body []byte, g fabric.GUID, t time.Time, want func(port int) bool) ([]fabric.PortSample, error) {
	r := &reader{b: body}
	l, err := r.uvarint()
	if err != nil {
		return nil, fmt.Errorf("port bitmap length: %w", err)
	}
	if l == 0 || l > 32 {
		return nil, fmt.Errorf("port bitmap length %d, want 1..32", l)
	}
	bm, err := r.bytes(int(l))
	if err != nil {
		return nil, fmt.Errorf("port bitmap: %w", err)
	}
	ports := d.ports[:0]
	for i, x := range bm {
		for x != 0 {
			bit := bits.TrailingZeros8(x)
			ports = append(ports, i*8+bit)
			x &^= 1 << bit
		}
	}
	d.ports = ports
	n := len(ports)
	if n == 0 || ports[n-1] > MaxPort || bm[len(bm)-1] == 0 {
		return nil, errors.New("port bitmap: empty, port 255 or trailing zero byte")
	}
	baseU, err := r.uvarint()
	if err != nil {
		return nil, fmt.Errorf("base span: %w", err)
	}
	if baseU > 1<<63-1 {
		return nil, fmt.Errorf("base span %d out of range", baseU)
	}
	base := time.Duration(baseU)
	modes, err := r.bytes(3 + 11)
	if err != nil {
		return nil, fmt.Errorf("column modes: %w", err)
	}
	// Only wanted ports become samples; the columns are still walked
	// whole, which for varints is cheap.
	start := len(dst)
	idx := d.idx[:0]
	for i, p := range ports {
		if want == nil || want(p) {
			idx = append(idx, i)
			dst = append(dst, fabric.PortSample{Port: fabric.PortRef{GUID: g, Port: p}, Time: t, Span: base})
		}
	}
	d.idx = idx
	samples := dst[start:]
	if cap(d.vals) < n {
		d.vals = make([]uint64, n)
	}
	vals := d.vals[:n]

	mode2 := func(f int) byte { return modes[f/4] >> (f % 4 * 2) & 3 }
	mode4 := func(f int) byte { return modes[3+f/2] >> (f % 2 * 4) & 15 }
	if modes[2]&^0x3f != 0 || modes[3+10]&0xf0 != 0 {
		return nil, errors.New("column modes: spare bits set")
	}
	// Span.
	if err := d.column(r, mode2(0), vals); err != nil {
		return nil, fmt.Errorf("span column: %w", err)
	}
	for i := range vals {
		s := int64(base) + unzigzag(vals[i])
		if s < 0 {
			return nil, fmt.Errorf("span column: negative span at port %d", ports[i])
		}
	}
	for j, i := range idx {
		samples[j].Span = time.Duration(int64(base) + unzigzag(vals[i]))
	}
	for f := 0; f < 2; f++ {
		m := mode2(1 + f)
		switch m {
		case colZero:
			continue
		case colDense:
			for j := range samples {
				setFlag(&samples[j], f)
			}
		case colSparse:
			bm, err := r.bytes((n + 7) / 8)
			if err != nil {
				return nil, fmt.Errorf("flag column %d: %w", f, err)
			}
			for j, i := range idx {
				if bm[i/8]&(1<<(i%8)) != 0 {
					setFlag(&samples[j], f)
				}
			}
		default:
			return nil, fmt.Errorf("flag column %d: mode %d", f, m)
		}
	}
	for c := fabric.Counter(0); c < fabric.NumCounters; c++ {
		m := mode4(int(c))
		if err := d.column(r, m&^colDiv4, vals); err != nil {
			return nil, fmt.Errorf("column %s: %w", fabric.CounterNames[c], err)
		}
		shift := 0
		if m&colDiv4 != 0 {
			shift = 2
		}
		for i, v := range vals {
			if shift > 0 {
				if v > (1<<64-1)>>2 {
					return nil, fmt.Errorf("column %s: value too large for 4-octet units", fabric.CounterNames[c])
				}
				vals[i] = v << shift
			}
		}
		for j, i := range idx {
			samples[j].Delta[c] = vals[i]
		}
	}
	if r.off != len(r.b) {
		return nil, fmt.Errorf("%d trailing bytes", len(r.b)-r.off)
	}
	for i := range samples {
		dl := &samples[i].Delta
		dl[fabric.UnicastXmitPkts] = dl[fabric.XmitPkts] - dl[fabric.MulticastXmitPkts] - uint64(unzigzag(dl[fabric.UnicastXmitPkts]))
		dl[fabric.UnicastRcvPkts] = dl[fabric.RcvPkts] - dl[fabric.MulticastRcvPkts] - uint64(unzigzag(dl[fabric.UnicastRcvPkts]))
	}
	return dst, nil
}

func setFlag(s *fabric.PortSample, f int) {
	if f == 0 {
		s.Reset = true
	} else {
		s.Saturated = true
	}
}

func (d *Decoder) column(r *reader, m byte, vals []uint64) error {
	n := len(vals)
	switch m {
	case colZero:
		clear(vals)
	case colDense:
		for i := range vals {
			v, err := r.uvarint()
			if err != nil {
				return err
			}
			vals[i] = v
		}
	case colSparse:
		bm, err := r.bytes((n + 7) / 8)
		if err != nil {
			return err
		}
		for i := range vals {
			vals[i] = 0
			if bm[i/8]&(1<<(i%8)) != 0 {
				v, err := r.uvarint()
				if err != nil {
					return err
				}
				vals[i] = v
			}
		}
	default:
		return fmt.Errorf("mode %d", m)
	}
	return nil
}

// BlobPorts returns the port numbers in a blob without decoding values;
// ok is false when the blob is malformed (decode it to learn why).
func BlobPorts(blob []byte, ports []int) ([]int, bool) {
	if len(blob) < 2 || blob[0] != formatRaw {
		return ports, false
	}
	r := &reader{b: blob[1:]}
	l, err := r.uvarint()
	if err != nil || l == 0 || l > 32 {
		return ports, false
	}
	bm, err := r.bytes(int(l))
	if err != nil {
		return ports, false
	}
	for i, x := range bm {
		for x != 0 {
			bit := bits.TrailingZeros8(x)
			ports = append(ports, i*8+bit)
			x &^= 1 << bit
		}
	}
	return ports, true
}
