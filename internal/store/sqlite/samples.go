package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/codec"
	"github.com/netloom/netloom/internal/store/sqlstore"
)

// AddPortSamples implements store.Store: one row per switch, all in one
// transaction.
func (s *Store) AddPortSamples(ctx context.Context, in []fabric.PortSample) error {
	if len(in) == 0 {
		return nil
	}
	sorted, err := sqlstore.CheckSweep(in)
	if err != nil {
		return fmt.Errorf("add port samples: %w", err)
	}
	t := sorted[0].Time
	what := fmt.Sprintf("add %d port samples at %s", len(sorted), t.Format(time.RFC3339Nano))
	newIDs := map[fabric.GUID]int64{}
	err = s.writeTx(ctx, what, func(tx *sql.Tx) error {
		ins, err := tx.PrepareContext(ctx, `INSERT INTO port_samples(time_ns, node_id, ports, data) VALUES (?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer ins.Close()
		var blob []byte
		err = sqlstore.Switches(sorted, func(g fabric.GUID, sw []fabric.PortSample) error {
			id, err := s.nodeID(ctx, tx, g, newIDs)
			if err != nil {
				return err
			}
			blob, err = s.enc.EncodeSwitch(blob[:0], sw)
			if err != nil {
				return fmt.Errorf("node %s: %w", g, err)
			}
			if _, err := ins.ExecContext(ctx, codec.NS(t), id, len(sw), blob); err != nil {
				var se sqlite3.Error
				if errors.As(err, &se) && se.ExtendedCode == sqlite3.ErrConstraintUnique {
					return fmt.Errorf("node %s: samples at this time are already stored", g)
				}
				return fmt.Errorf("node %s: %w", g, err)
			}
			return nil
		})
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE totals SET value = value + ? WHERE name = 'port_samples'`, len(sorted))
		return err
	})
	if err != nil {
		return err
	}
	for g, id := range newIDs {
		s.nodeIDs[g] = id // only after commit: a rolled-back id is no id
	}
	return nil
}

// nodeID returns the dictionary id of a GUID, adding it when new. Called
// with wmu held.
func (s *Store) nodeID(ctx context.Context, tx *sql.Tx, g fabric.GUID, pending map[fabric.GUID]int64) (int64, error) {
	if id, ok := s.nodeIDs[g]; ok {
		return id, nil
	}
	if id, ok := pending[g]; ok {
		return id, nil
	}
	var id int64
	err := tx.QueryRowContext(ctx, `SELECT id FROM nodes WHERE guid = ?`, guidInt(g)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		res, ierr := tx.ExecContext(ctx, `INSERT INTO nodes(guid) VALUES (?)`, guidInt(g))
		if ierr != nil {
			return 0, fmt.Errorf("add node %s: %w", g, ierr)
		}
		id, err = res.LastInsertId()
	}
	if err != nil {
		return 0, fmt.Errorf("look up node %s: %w", g, err)
	}
	pending[g] = id
	return id, nil
}

// PortSamples implements store.Store. Ports without samples in the range
// are absent from the map. Zero from or to leave that end open.
func (s *Store) PortSamples(ctx context.Context, ports []fabric.PortRef, from, to time.Time) (map[fabric.PortRef][]fabric.PortSample, error) {
	return sqlstore.PortSamples(ctx, s.readPorts, ports, from, to)
}

// PortSeries implements store.Store.
func (s *Store) PortSeries(ctx context.Context, ports []fabric.PortRef, from, to time.Time) (map[fabric.PortRef][]store.PortPoint, error) {
	return sqlstore.PortSeries(ctx, s.readPorts, ports, from, to)
}

// readPorts is the engine's sqlstore.ReadPorts.
func (s *Store) readPorts(ctx context.Context, ports []fabric.PortRef, from, to time.Time,
	raw func([]fabric.PortSample), rolled func([]store.PortPoint)) error {
	guids, byNode := sqlstore.GroupPorts(ports)
	if len(guids) == 0 {
		return nil
	}
	lo, hi := codec.LowerBound(from), codec.UpperBound(to)
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("port samples: %w", err)
	}
	defer tx.Rollback()
	st, err := tx.PrepareContext(ctx, `SELECT s.time_ns, s.data FROM nodes n JOIN port_samples s ON s.node_id = n.id
		WHERE n.guid = ? AND s.time_ns >= ? AND s.time_ns <= ? ORDER BY s.time_ns`)
	if err != nil {
		return fmt.Errorf("port samples: %w", err)
	}
	defer st.Close()
	rst, err := tx.PrepareContext(ctx, `SELECT r.time_ns, r.data FROM nodes n JOIN port_rollups r ON r.node_id = n.id
		WHERE n.guid = ? AND r.width_s = ? AND r.bucket_ns >= ? AND r.bucket_ns <= ? AND r.time_ns >= ? AND r.time_ns <= ?
		ORDER BY r.bucket_ns`)
	if err != nil {
		return fmt.Errorf("port rollups: %w", err)
	}
	defer rst.Close()
	d := s.decoders.Get().(*codec.Decoder)
	defer s.decoders.Put(d)
	var buf []fabric.PortSample
	var pts []store.PortPoint
	for _, g := range guids {
		want := byNode[g]
		keep := func(p int) bool { return want[p] }
		for _, l := range []int{sqlstore.Level1h, sqlstore.Level5m} {
			w := sqlstore.LevelWidth[l]
			bucketLo := lo
			if lo != math.MinInt64 {
				bucketLo = lo - w
			}
			err := eachBlob(ctx, rst, func(t int64, data []byte) (err error) {
				if pts, err = d.DecodeRollup(pts[:0], data, g, codec.FromNS(t), time.Duration(w), keep); err == nil {
					rolled(pts)
				}
				return err
			}, guidInt(g), sqlstore.WidthS(l), bucketLo, hi, lo, hi)
			if err != nil {
				return fmt.Errorf("port rollups of node %s: %w", g, err)
			}
		}
		err := eachBlob(ctx, st, func(t int64, data []byte) (err error) {
			if buf, err = d.DecodeSwitch(buf[:0], data, g, codec.FromNS(t), keep); err == nil {
				raw(buf)
			}
			return err
		}, guidInt(g), lo, hi)
		if err != nil {
			return fmt.Errorf("port samples of node %s: %w", g, err)
		}
	}
	return nil
}

// eachBlob runs st, a query of (time_ns, data) rows, and calls f with each
// row; data is valid only during the call.
func eachBlob(ctx context.Context, st *sql.Stmt, f func(t int64, data []byte) error, args ...any) error {
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var t int64
		var data sql.RawBytes
		if err := rows.Scan(&t, &data); err != nil {
			return err
		}
		if err := f(t, data); err != nil {
			return err
		}
	}
	return rows.Err()
}

// LatestSamples implements store.Store. A zero at means now; a window of
// zero or less means no age limit (the newest row of each switch then).
// The result is sorted by port.
func (s *Store) LatestSamples(ctx context.Context, at time.Time, window time.Duration) ([]fabric.PortSample, error) {
	if at.IsZero() {
		at = time.Now()
	}
	fail := func(err error) ([]fabric.PortSample, error) {
		return nil, fmt.Errorf("latest samples at %s: %w", at.Format(time.RFC3339), err)
	}
	var rows *sql.Rows
	var err error
	if window > 0 {
		rows, err = s.r.QueryContext(ctx, `SELECT n.guid, s.time_ns, s.data FROM port_samples s JOIN nodes n ON n.id = s.node_id
			WHERE s.time_ns >= ? AND s.time_ns <= ? ORDER BY s.time_ns DESC`, codec.NS(at.Add(-window)), codec.NS(at))
	} else {
		rows, err = s.r.QueryContext(ctx, `SELECT n.guid, s.time_ns, s.data FROM nodes n JOIN port_samples s ON s.id =
			(SELECT id FROM port_samples WHERE node_id = n.id AND time_ns <= ? ORDER BY time_ns DESC LIMIT 1)`, codec.NS(at))
	}
	if err != nil {
		return fail(err)
	}
	defer rows.Close()
	d := s.decoders.Get().(*codec.Decoder)
	defer s.decoders.Put(d)
	latest := sqlstore.NewLatest(d)
	for rows.Next() {
		var g, t int64
		var data sql.RawBytes
		if err := rows.Scan(&g, &t, &data); err != nil {
			return fail(err)
		}
		if err := latest.AddRaw(fabric.GUID(g), t, data); err != nil {
			return fail(err)
		}
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	rows.Close()
	if window > 0 {
		// Where the raw samples are gone, the rollup point of the bucket
		// that holds at (or ended within the window) stands in: 5-minute
		// rollups first, then 1-hour ones.
		for _, l := range []int{sqlstore.Level5m, sqlstore.Level1h} {
			w := sqlstore.LevelWidth[l]
			rows, err := s.r.QueryContext(ctx, `SELECT n.guid, r.time_ns, r.data FROM port_rollups r JOIN nodes n ON n.id = r.node_id
				WHERE r.width_s = ? AND r.bucket_ns > ? AND r.bucket_ns <= ? ORDER BY r.bucket_ns DESC`, sqlstore.WidthS(l), codec.NS(at.Add(-window))-w, codec.NS(at))
			if err != nil {
				return fail(err)
			}
			for rows.Next() {
				var g, t int64
				var data sql.RawBytes
				if err = rows.Scan(&g, &t, &data); err == nil {
					err = latest.AddRollup(fabric.GUID(g), t, time.Duration(w), data)
				}
				if err != nil {
					rows.Close()
					return fail(err)
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return fail(err)
			}
		}
	}
	return latest.Samples(), nil
}
