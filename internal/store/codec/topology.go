package codec

import (
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/netloom/netloom/internal/fabric"
)

// maxInflated bounds what a stored blob may inflate to (a corrupted or
// hostile blob must not exhaust memory).
const maxInflated = 1 << 30

// CanonicalTopology encodes t in its canonical form: nodes and links
// sorted and normalized, as JSON. Equal fabrics encode to equal bytes.
func CanonicalTopology(t *fabric.Topology) ([]byte, *fabric.Topology, error) {
	nodes := append([]fabric.Node(nil), t.Nodes...)
	links := append([]fabric.Link(nil), t.Links...)
	c, err := fabric.NewTopology(nodes, links)
	if err != nil {
		return nil, nil, fmt.Errorf("invalid topology: %w", err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, nil, fmt.Errorf("encode topology: %w", err)
	}
	return b, c, nil
}

// Deflate compresses b at the given flate level.
func Deflate(b []byte, level int) ([]byte, error) {
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, level)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Inflate decompresses what Deflate made, refusing more than 1 GiB.
func Inflate(b []byte) ([]byte, error) {
	r := flate.NewReader(bytes.NewReader(b))
	defer r.Close()
	out, err := io.ReadAll(io.LimitReader(r, maxInflated+1))
	if err != nil {
		return nil, fmt.Errorf("inflate: %w", err)
	}
	if len(out) > maxInflated {
		return nil, fmt.Errorf("inflate: over %d bytes", maxInflated)
	}
	return out, nil
}

// DecodeTopology reads a deflated canonical topology.
func DecodeTopology(data []byte) (*fabric.Topology, error) {
	raw, err := Inflate(data)
	if err != nil {
		return nil, err
	}
	var w struct {
		Nodes []fabric.Node `json:"nodes"`
		Links []fabric.Link `json:"links"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	t, err := fabric.NewTopology(w.Nodes, w.Links)
	if err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return t, nil
}

// EncodeTables writes forwarding tables as: count, then per switch in GUID
// order its GUID (8 bytes), table length and entries. The hash is taken
// over tables with trailing unset entries dropped, matching Equal.
func EncodeTables(ft fabric.ForwardingTables) (data, hash []byte) {
	guids := make([]fabric.GUID, 0, len(ft))
	size := 0
	for g, t := range ft {
		guids = append(guids, g)
		size += len(t) + 12
	}
	sort.Slice(guids, func(i, j int) bool { return guids[i] < guids[j] })
	b := make([]byte, 0, size+8)
	h := sha256.New()
	var hb []byte
	b = binary.AppendUvarint(b, uint64(len(guids)))
	for _, g := range guids {
		t := ft[g]
		b = binary.BigEndian.AppendUint64(b, uint64(g))
		b = binary.AppendUvarint(b, uint64(len(t)))
		b = append(b, t...)
		n := len(t)
		for n > 0 && t[n-1] == fabric.NoPort {
			n--
		}
		hb = binary.BigEndian.AppendUint64(hb[:0], uint64(g))
		hb = binary.AppendUvarint(hb, uint64(n))
		h.Write(hb)
		h.Write(t[:n])
	}
	return b, h.Sum(nil)
}

// DecodeTables reads what EncodeTables wrote.
func DecodeTables(b []byte) (fabric.ForwardingTables, error) {
	r := &reader{b: b}
	n, err := r.uvarint()
	if err != nil {
		return nil, fmt.Errorf("switch count: %w", err)
	}
	if n > uint64(len(b)) {
		return nil, fmt.Errorf("switch count %d exceeds data", n)
	}
	ft := make(fabric.ForwardingTables, n)
	for i := uint64(0); i < n; i++ {
		gb, err := r.bytes(8)
		if err != nil {
			return nil, fmt.Errorf("switch %d: %w", i, err)
		}
		l, err := r.uvarint()
		if err != nil || l > uint64(len(b)) {
			return nil, fmt.Errorf("switch %d: bad table length", i)
		}
		t, err := r.bytes(int(l))
		if err != nil {
			return nil, fmt.Errorf("switch %d: %w", i, err)
		}
		ft[fabric.GUID(binary.BigEndian.Uint64(gb))] = append([]uint8(nil), t...)
	}
	if r.off != len(b) {
		return nil, fmt.Errorf("%d trailing bytes", len(b)-r.off)
	}
	return ft, nil
}

// DecodeStoredTables reads tables as the engines store them: what
// EncodeTables wrote, deflated.
func DecodeStoredTables(z []byte) (fabric.ForwardingTables, error) {
	raw, err := Inflate(z)
	if err != nil {
		return nil, err
	}
	return DecodeTables(raw)
}
