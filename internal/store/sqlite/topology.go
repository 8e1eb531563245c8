package sqlite

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
)

// maxInflated bounds what a stored blob may inflate to (a corrupted or
// hostile blob must not exhaust memory).
const maxInflated = 1 << 30

// canonicalTopology encodes t in its canonical form: nodes and links
// sorted and normalized, as JSON. Equal fabrics encode to equal bytes.
func canonicalTopology(t *fabric.Topology) ([]byte, *fabric.Topology, error) {
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

func deflate(b []byte, level int) ([]byte, error) {
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

func inflate(b []byte) ([]byte, error) {
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

// SaveTopology implements store.Store.
func (s *Store) SaveTopology(ctx context.Context, t *fabric.Topology, at time.Time) (int64, bool, error) {
	if t == nil {
		return 0, false, errors.New("save topology: nil topology")
	}
	if err := checkTime("time", at); err != nil {
		return 0, false, fmt.Errorf("save topology: %w", err)
	}
	enc, c, err := canonicalTopology(t)
	if err != nil {
		return 0, false, fmt.Errorf("save topology at %s: %w", at.Format(time.RFC3339), err)
	}
	sum := sha256.Sum256(enc)
	var id int64
	changed := false
	err = s.writeTx(ctx, "save topology at "+at.Format(time.RFC3339), func(tx *sql.Tx) error {
		var lastID, lastFrom int64
		var lastHash []byte
		err := tx.QueryRowContext(ctx, `SELECT id, from_ns, hash FROM topology_versions ORDER BY from_ns DESC, id DESC LIMIT 1`).Scan(&lastID, &lastFrom, &lastHash)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return fmt.Errorf("read latest version: %w", err)
		case bytes.Equal(lastHash, sum[:]):
			id = lastID
			return nil
		case ns(at) < lastFrom:
			return fmt.Errorf("time is before the latest version %d (from %s); versions must be saved in time order", lastID, fromNS(lastFrom).Format(time.RFC3339))
		default:
			if _, err := tx.ExecContext(ctx, `UPDATE topology_versions SET until_ns = ? WHERE id = ?`, ns(at), lastID); err != nil {
				return fmt.Errorf("close version %d: %w", lastID, err)
			}
		}
		z, err := deflate(enc, flate.BestSpeed)
		if err != nil {
			return fmt.Errorf("compress: %w", err)
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO topology_versions(from_ns, nodes, links, hash, data) VALUES (?, ?, ?, ?, ?)`,
			ns(at), len(c.Nodes), len(c.Links), sum[:], z)
		if err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		id, err = res.LastInsertId()
		changed = true
		return err
	})
	if err != nil {
		return 0, false, err
	}
	return id, changed, nil
}

func scanVersion(sc interface{ Scan(...any) error }, extra ...any) (store.Version, error) {
	var v store.Version
	var from int64
	var until sql.NullInt64
	dst := append([]any{&v.ID, &from, &until, &v.Nodes, &v.Links}, extra...)
	if err := sc.Scan(dst...); err != nil {
		return v, err
	}
	v.From = fromNS(from)
	if until.Valid {
		v.Until = fromNS(until.Int64)
	}
	return v, nil
}

// TopologyAt implements store.Store.
func (s *Store) TopologyAt(ctx context.Context, at time.Time) (*fabric.Topology, store.Version, error) {
	var data []byte
	row := s.r.QueryRowContext(ctx, `SELECT id, from_ns, until_ns, nodes, links, data FROM topology_versions
		WHERE from_ns <= ? ORDER BY from_ns DESC, id DESC LIMIT 1`, upperBound(at))
	v, err := scanVersion(row, &data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.Version{}, fmt.Errorf("topology at %s: %w", at.Format(time.RFC3339), store.ErrNotFound)
	}
	if err != nil {
		return nil, store.Version{}, fmt.Errorf("topology at %s: %w", at.Format(time.RFC3339), err)
	}
	t, err := decodeTopology(data)
	if err != nil {
		return nil, store.Version{}, fmt.Errorf("topology version %d: %w", v.ID, err)
	}
	return t, v, nil
}

func decodeTopology(data []byte) (*fabric.Topology, error) {
	raw, err := inflate(data)
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

// Versions implements store.Store. Zero from or to leave that end open.
func (s *Store) Versions(ctx context.Context, from, to time.Time) ([]store.Version, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, from_ns, until_ns, nodes, links FROM topology_versions
		WHERE from_ns <= ? AND (until_ns IS NULL OR until_ns > ?) ORDER BY from_ns, id`, upperBound(to), lowerBound(from))
	if err != nil {
		return nil, fmt.Errorf("topology versions: %w", err)
	}
	defer rows.Close()
	var out []store.Version
	for rows.Next() {
		v, err := scanVersion(rows)
		if err != nil {
			return nil, fmt.Errorf("topology versions: %w", err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("topology versions: %w", err)
	}
	return out, nil
}

// encodeTables writes forwarding tables as: count, then per switch in GUID
// order its GUID (8 bytes), table length and entries. The hash is taken
// over tables with trailing unset entries dropped, matching Equal.
func encodeTables(ft fabric.ForwardingTables) (data, hash []byte) {
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

func decodeTables(b []byte) (fabric.ForwardingTables, error) {
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

// SaveForwardingTables implements store.Store; tables equal to the latest
// stored ones are not written again.
func (s *Store) SaveForwardingTables(ctx context.Context, ft fabric.ForwardingTables, at time.Time) error {
	if err := checkTime("time", at); err != nil {
		return fmt.Errorf("save forwarding tables: %w", err)
	}
	data, hash := encodeTables(ft)
	return s.writeTx(ctx, "save forwarding tables at "+at.Format(time.RFC3339), func(tx *sql.Tx) error {
		var lastFrom int64
		var lastHash []byte
		err := tx.QueryRowContext(ctx, `SELECT from_ns, hash FROM forwarding_tables ORDER BY from_ns DESC, id DESC LIMIT 1`).Scan(&lastFrom, &lastHash)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return fmt.Errorf("read latest: %w", err)
		case bytes.Equal(lastHash, hash):
			return nil
		case ns(at) < lastFrom:
			return fmt.Errorf("time is before the latest tables (from %s); save in time order", fromNS(lastFrom).Format(time.RFC3339))
		}
		z, err := deflate(data, flate.BestSpeed)
		if err != nil {
			return fmt.Errorf("compress: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO forwarding_tables(from_ns, hash, data) VALUES (?, ?, ?)`, ns(at), hash, z); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		return nil
	})
}

// ForwardingTablesAt implements store.Store.
func (s *Store) ForwardingTablesAt(ctx context.Context, at time.Time) (fabric.ForwardingTables, time.Time, error) {
	var from int64
	var data []byte
	err := s.r.QueryRowContext(ctx, `SELECT from_ns, data FROM forwarding_tables WHERE from_ns <= ?
		ORDER BY from_ns DESC, id DESC LIMIT 1`, upperBound(at)).Scan(&from, &data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, time.Time{}, fmt.Errorf("forwarding tables at %s: %w", at.Format(time.RFC3339), store.ErrNotFound)
	}
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("forwarding tables at %s: %w", at.Format(time.RFC3339), err)
	}
	raw, err := inflate(data)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("forwarding tables from %s: %w", fromNS(from).Format(time.RFC3339), err)
	}
	ft, err := decodeTables(raw)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("forwarding tables from %s: %w", fromNS(from).Format(time.RFC3339), err)
	}
	return ft, fromNS(from), nil
}
