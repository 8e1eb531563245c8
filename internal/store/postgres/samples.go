package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/codec"
	"github.com/netloom/netloom/internal/store/sqlstore"
)

// AddPortSamples implements store.Store: one row per switch, written with
// COPY in one transaction.
func (s *Store) AddPortSamples(ctx context.Context, in []fabric.PortSample) error {
	if len(in) == 0 {
		return nil
	}
	sorted, err := sqlstore.CheckSweep(in)
	if err != nil {
		return fmt.Errorf("add port samples: %w", err)
	}
	t := codec.NS(sorted[0].Time)
	what := fmt.Sprintf("add %d port samples at %s", len(sorted), sorted[0].Time.Format(time.RFC3339Nano))
	need := []partNeed{{tablePortSamples, []int64{t}}}
	return s.writeTx(ctx, what, need, func(tx pgx.Tx) error {
		var guids []fabric.GUID
		_ = sqlstore.Switches(sorted, func(g fabric.GUID, _ []fabric.PortSample) error {
			guids = append(guids, g)
			return nil
		})
		ids, err := s.lookupNodes(ctx, tx, guids)
		if err != nil {
			return err
		}
		var rows [][]any
		err = sqlstore.Switches(sorted, func(g fabric.GUID, sw []fabric.PortSample) error {
			blob, err := s.enc.EncodeSwitch(nil, sw)
			if err != nil {
				return fmt.Errorf("node %s: %w", g, err)
			}
			rows = append(rows, []any{t, int32(ids[g]), int16(len(sw)), blob})
			return nil
		})
		if err != nil {
			return err
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{tablePortSamples}, []string{"time_ns", "node_id", "ports", "data"}, pgx.CopyFromRows(rows)); err != nil {
			if isUniqueViolation(err) {
				return fmt.Errorf("samples at this time are already stored: %w", err)
			}
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE totals SET value = value + $1 WHERE name = 'port_samples'`, len(sorted))
		return err
	})
}

// lookupNodes returns the dictionary ids of GUIDs, adding those that are new.
// Called with wmu held; the ids learnt are kept once the transaction
// commits (writeTx).
func (s *Store) lookupNodes(ctx context.Context, tx pgx.Tx, guids []fabric.GUID) (map[fabric.GUID]int64, error) {
	out := make(map[fabric.GUID]int64, len(guids))
	var missing []int64
	for _, g := range guids {
		if id, ok := s.nodeIDs[g]; ok {
			out[g] = id
		} else {
			missing = append(missing, guidInt(g))
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	if _, err := tx.Exec(ctx, `INSERT INTO nodes(guid) SELECT unnest($1::bigint[]) ON CONFLICT (guid) DO NOTHING`, missing); err != nil {
		return nil, fmt.Errorf("add nodes: %w", err)
	}
	rows, err := tx.Query(ctx, `SELECT guid, id FROM nodes WHERE guid = ANY($1)`, missing)
	if err != nil {
		return nil, fmt.Errorf("look up nodes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var g, id int64
		if err := rows.Scan(&g, &id); err != nil {
			return nil, fmt.Errorf("look up nodes: %w", err)
		}
		out[fabric.GUID(g)] = id
		s.pending[fabric.GUID(g)] = id
	}
	return out, rows.Err()
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

// readTx runs fn in a read-only transaction that sees one snapshot.
func (s *Store) readTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	return fn(tx)
}

// readPorts is the engine's sqlstore.ReadPorts: three queries for every
// switch at once (1-hour rollups, 5-minute rollups, raw rows), each by
// switch and time.
func (s *Store) readPorts(ctx context.Context, ports []fabric.PortRef, from, to time.Time,
	raw func([]fabric.PortSample), rolled func([]store.PortPoint)) error {
	guids, byNode := sqlstore.GroupPorts(ports)
	if len(guids) == 0 {
		return nil
	}
	gs := make([]int64, len(guids))
	for i, g := range guids {
		gs[i] = guidInt(g)
	}
	lo, hi := codec.LowerBound(from), codec.UpperBound(to)
	d := s.decoders.Get().(*codec.Decoder)
	defer s.decoders.Put(d)
	return s.readTx(ctx, func(tx pgx.Tx) error {
		var pts []store.PortPoint
		for _, l := range []int{sqlstore.Level1h, sqlstore.Level5m} {
			w := sqlstore.LevelWidth[l]
			bucketLo := lo
			if lo != codec.LowerBound(time.Time{}) {
				bucketLo = lo - w
			}
			err := eachBlob(ctx, tx, `SELECT n.guid, r.time_ns, r.data FROM nodes n JOIN port_rollups r ON r.node_id = n.id
				WHERE n.guid = ANY($1) AND r.width_s = $2 AND r.bucket_ns >= $3 AND r.bucket_ns <= $4 AND r.time_ns >= $5 AND r.time_ns <= $6
				ORDER BY n.guid, r.bucket_ns`, []any{gs, sqlstore.WidthS(l), bucketLo, hi, lo, hi},
				func(g fabric.GUID, t int64, data []byte) (err error) {
					want := byNode[g]
					if pts, err = d.DecodeRollup(pts[:0], data, g, codec.FromNS(t), time.Duration(w), func(p int) bool { return want[p] }); err == nil {
						rolled(pts)
					}
					return err
				})
			if err != nil {
				return fmt.Errorf("port rollups: %w", err)
			}
		}
		var buf []fabric.PortSample
		err := eachBlob(ctx, tx, `SELECT n.guid, s.time_ns, s.data FROM nodes n JOIN port_samples s ON s.node_id = n.id
			WHERE n.guid = ANY($1) AND s.time_ns >= $2 AND s.time_ns <= $3 ORDER BY n.guid, s.time_ns`, []any{gs, lo, hi},
			func(g fabric.GUID, t int64, data []byte) (err error) {
				want := byNode[g]
				if buf, err = d.DecodeSwitch(buf[:0], data, g, codec.FromNS(t), func(p int) bool { return want[p] }); err == nil {
					raw(buf)
				}
				return err
			})
		if err != nil {
			return fmt.Errorf("port samples: %w", err)
		}
		return nil
	})
}

// eachBlob runs a query of (guid, time_ns, data) rows and calls f with
// each; data is valid only during the call.
func eachBlob(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, sql string, args []any, f func(g fabric.GUID, t int64, data []byte) error) error {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		vals := rows.RawValues()
		var g, t int64
		if err := rows.Scan(&g, &t, nil); err != nil {
			return err
		}
		if err := f(fabric.GUID(g), t, vals[2]); err != nil {
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
	d := s.decoders.Get().(*codec.Decoder)
	defer s.decoders.Put(d)
	latest := sqlstore.NewLatest(d)
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		q, args := `SELECT n.guid, s.time_ns, s.data FROM nodes n CROSS JOIN LATERAL
			(SELECT time_ns, data FROM port_samples WHERE node_id = n.id AND time_ns <= $1 ORDER BY time_ns DESC LIMIT 1) s`, []any{codec.NS(at)}
		if window > 0 {
			q, args = `SELECT n.guid, s.time_ns, s.data FROM port_samples s JOIN nodes n ON n.id = s.node_id
				WHERE s.time_ns >= $1 AND s.time_ns <= $2 ORDER BY s.time_ns DESC`, []any{codec.NS(at.Add(-window)), codec.NS(at)}
		}
		if err := eachBlob(ctx, tx, q, args, latest.AddRaw); err != nil {
			return err
		}
		if window <= 0 {
			return nil
		}
		// Where the raw samples are gone, the rollup point of the bucket
		// that holds at (or ended within the window) stands in: 5-minute
		// rollups first, then 1-hour ones.
		for _, l := range []int{sqlstore.Level5m, sqlstore.Level1h} {
			w := sqlstore.LevelWidth[l]
			err := eachBlob(ctx, tx, `SELECT n.guid, r.time_ns, r.data FROM port_rollups r JOIN nodes n ON n.id = r.node_id
				WHERE r.width_s = $1 AND r.bucket_ns > $2 AND r.bucket_ns <= $3 ORDER BY r.bucket_ns DESC`,
				[]any{sqlstore.WidthS(l), codec.NS(at.Add(-window)) - w, codec.NS(at)},
				func(g fabric.GUID, t int64, data []byte) error { return latest.AddRollup(g, t, time.Duration(w), data) })
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("latest samples at %s: %w", at.Format(time.RFC3339), err)
	}
	return latest.Samples(), nil
}
