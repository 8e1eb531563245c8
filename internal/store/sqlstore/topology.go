package sqlstore

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/codec"
)

// SaveTopology implements store.Store.
func (s *Store) SaveTopology(ctx context.Context, t *fabric.Topology, at time.Time) (int64, bool, error) {
	if t == nil {
		return 0, false, errors.New("save topology: nil topology")
	}
	if err := codec.CheckTime("time", at); err != nil {
		return 0, false, fmt.Errorf("save topology: %w", err)
	}
	enc, c, err := codec.CanonicalTopology(t)
	if err != nil {
		return 0, false, fmt.Errorf("save topology at %s: %w", at.Format(time.RFC3339), err)
	}
	sum := sha256.Sum256(enc)
	var id int64
	changed := false
	err = s.Engine.Write(ctx, "save topology at "+at.Format(time.RFC3339), nil, func(tx Tx) error {
		if err := s.lock(ctx, tx, "topology_versions"); err != nil {
			return err
		}
		var lastID, lastFrom int64
		var lastHash []byte
		ok, err := tx.QueryRow(ctx, `SELECT id, from_ns, hash FROM topology_versions WHERE fabric = ? ORDER BY from_ns DESC, id DESC LIMIT 1`,
			[]any{s.Fabric}, &lastID, &lastFrom, &lastHash)
		switch {
		case err != nil:
			return fmt.Errorf("read latest version: %w", err)
		case !ok:
		case bytes.Equal(lastHash, sum[:]):
			id = lastID
			return nil
		case codec.NS(at) < lastFrom:
			return fmt.Errorf("time is before the latest version %d (from %s); versions must be saved in time order", lastID, codec.FromNS(lastFrom).Format(time.RFC3339))
		default:
			if _, err := tx.Exec(ctx, `UPDATE topology_versions SET until_ns = ? WHERE id = ?`, codec.NS(at), lastID); err != nil {
				return fmt.Errorf("close version %d: %w", lastID, err)
			}
		}
		z, err := codec.Deflate(enc, flate.BestSpeed)
		if err != nil {
			return fmt.Errorf("compress: %w", err)
		}
		if _, err := tx.QueryRow(ctx, `INSERT INTO topology_versions(from_ns, nodes, links, hash, data, fabric) VALUES (?, ?, ?, ?, ?, ?) RETURNING id`,
			[]any{codec.NS(at), len(c.Nodes), len(c.Links), sum[:], z, s.Fabric}, &id); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		changed = true
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	return id, changed, nil
}

// TopologyAt implements store.Store.
func (s *Store) TopologyAt(ctx context.Context, at time.Time) (*fabric.Topology, store.Version, error) {
	t, v, err := s.topologyAt(ctx, "", at)
	if err != nil {
		return nil, store.Version{}, fmt.Errorf("topology at %s: %w", at.Format(time.RFC3339), err)
	}
	return t, v, nil
}

// FabricTopologyAt implements store.Store.
func (s *Store) FabricTopologyAt(ctx context.Context, name string, at time.Time) (*fabric.Topology, store.Version, error) {
	if name == "" {
		return nil, store.Version{}, errors.New("topology of a fabric: no fabric name given")
	}
	t, v, err := s.topologyAt(ctx, name, at)
	if err != nil {
		return nil, store.Version{}, fmt.Errorf("topology of fabric %q at %s: %w", name, at.Format(time.RFC3339), err)
	}
	return t, v, nil
}

// topologyAt reads the version of each fabric (or of fabric name) in
// force at at, and merges them.
func (s *Store) topologyAt(ctx context.Context, name string, at time.Time) (*fabric.Topology, store.Version, error) {
	rows, err := s.Engine.Reader().Query(ctx, `SELECT id, from_ns, until_ns, nodes, links, fabric, data FROM topology_versions
		WHERE id IN (SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY fabric ORDER BY from_ns DESC, id DESC) AS n
			FROM topology_versions WHERE from_ns <= ? AND (? = '' OR fabric = ?)) AS latest WHERE n = 1)
		ORDER BY fabric`, codec.UpperBound(at), name, name)
	if err != nil {
		return nil, store.Version{}, err
	}
	defer rows.Close()
	return MergeFabricVersions(rows)
}

// Versions implements store.Store. Zero from or to leave that end open.
func (s *Store) Versions(ctx context.Context, from, to time.Time) ([]store.Version, error) {
	rows, err := s.Engine.Reader().Query(ctx, `SELECT id, from_ns, until_ns, nodes, links, fabric FROM topology_versions
		WHERE from_ns <= ? AND (until_ns IS NULL OR until_ns > ?) ORDER BY from_ns, id`, codec.UpperBound(to), codec.LowerBound(from))
	if err != nil {
		return nil, fmt.Errorf("topology versions: %w", err)
	}
	defer rows.Close()
	var out []store.Version
	for rows.Next() {
		v, err := ScanVersion(rows)
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

// SaveForwardingTables implements store.Store; tables equal to the latest
// stored ones are not written again.
func (s *Store) SaveForwardingTables(ctx context.Context, ft fabric.ForwardingTables, at time.Time) error {
	if err := codec.CheckTime("time", at); err != nil {
		return fmt.Errorf("save forwarding tables: %w", err)
	}
	data, hash := codec.EncodeTables(ft)
	return s.Engine.Write(ctx, "save forwarding tables at "+at.Format(time.RFC3339), nil, func(tx Tx) error {
		if err := s.lock(ctx, tx, "forwarding_tables"); err != nil {
			return err
		}
		var lastFrom int64
		var lastHash []byte
		ok, err := tx.QueryRow(ctx, `SELECT from_ns, hash FROM forwarding_tables WHERE fabric = ? ORDER BY from_ns DESC, id DESC LIMIT 1`,
			[]any{s.Fabric}, &lastFrom, &lastHash)
		switch {
		case err != nil:
			return fmt.Errorf("read latest: %w", err)
		case !ok:
		case bytes.Equal(lastHash, hash):
			return nil
		case codec.NS(at) < lastFrom:
			return fmt.Errorf("time is before the latest tables (from %s); save in time order", codec.FromNS(lastFrom).Format(time.RFC3339))
		}
		z, err := codec.Deflate(data, flate.BestSpeed)
		if err != nil {
			return fmt.Errorf("compress: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO forwarding_tables(from_ns, hash, data, fabric) VALUES (?, ?, ?, ?)`, codec.NS(at), hash, z, s.Fabric); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		return nil
	})
}

// ForwardingTablesAt implements store.Store.
func (s *Store) ForwardingTablesAt(ctx context.Context, at time.Time) (fabric.ForwardingTables, time.Time, error) {
	rows, err := s.Engine.Reader().Query(ctx, `SELECT from_ns, data FROM forwarding_tables
		WHERE id IN (SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY fabric ORDER BY from_ns DESC, id DESC) AS n
			FROM forwarding_tables WHERE from_ns <= ?) AS latest WHERE n = 1)
		ORDER BY fabric`, codec.UpperBound(at))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("forwarding tables at %s: %w", at.Format(time.RFC3339), err)
	}
	defer rows.Close()
	return MergeFabricTables(rows, at)
}
