package sqlstore

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/codec"
)

// AddPortSamples implements store.Store: one row per switch, all in one
// transaction.
func (s *Store) AddPortSamples(ctx context.Context, in []fabric.PortSample) error {
	if len(in) == 0 {
		return nil
	}
	sorted, err := CheckSweep(in)
	if err != nil {
		return fmt.Errorf("add port samples: %w", err)
	}
	t := codec.NS(sorted[0].Time)
	what := fmt.Sprintf("add %d port samples at %s", len(sorted), sorted[0].Time.Format(time.RFC3339Nano))
	var guids []fabric.GUID
	_ = Switches(sorted, func(g fabric.GUID, _ []fabric.PortSample) error {
		guids = append(guids, g)
		return nil
	})
	need := []Need{{"port_samples", []int64{t}}}
	return s.WriteNodes(ctx, what, need, func(tx Tx, learnt map[fabric.GUID]int64) error {
		ids, err := s.NodeIDs(ctx, tx, guids, learnt)
		if err != nil {
			return err
		}
		// One buffer for all blobs; each row holds a slice of it.
		var buf []byte
		var ends []int
		err = Switches(sorted, func(g fabric.GUID, sw []fabric.PortSample) error {
			if buf, err = s.enc.EncodeSwitch(buf, sw); err != nil {
				return fmt.Errorf("node %s: %w", g, err)
			}
			ends = append(ends, len(buf))
			return nil
		})
		if err != nil {
			return err
		}
		rows := make([][]any, 0, len(guids))
		start := 0
		_ = Switches(sorted, func(g fabric.GUID, sw []fabric.PortSample) error {
			end := ends[len(rows)]
			rows = append(rows, []any{t, ids[g], len(sw), buf[start:end]})
			start = end
			return nil
		})
		if err := tx.Insert(ctx, "port_samples", []string{"time_ns", "node_id", "ports", "data"}, rows); err != nil {
			if s.Dialect.Unique(err) {
				return fmt.Errorf("samples at this time are already stored: %w", err)
			}
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE totals SET value = value + ? WHERE name = 'port_samples'`, len(sorted))
		return err
	})
}

// nodeIDs is the dictionary of switch GUIDs to the ids that port rows
// name switches by, as far as this process knows it.
type nodeIDs struct {
	mu  sync.Mutex
	ids map[fabric.GUID]int64
}

// WriteNodes is Engine.Write for rows that name switches by id: the ids
// fn learns (NodeIDs) are kept once it commits.
func (s *Store) WriteNodes(ctx context.Context, what string, need []Need, fn func(tx Tx, learnt map[fabric.GUID]int64) error) error {
	var learnt map[fabric.GUID]int64
	err := s.Engine.Write(ctx, what, need, func(tx Tx) error {
		learnt = map[fabric.GUID]int64{} // afresh when the engine tries again
		return fn(tx, learnt)
	})
	if err != nil {
		return err
	}
	s.nodes.mu.Lock()
	for g, id := range learnt {
		s.nodes.ids[g] = id // only after commit: a rolled-back id is no id
	}
	s.nodes.mu.Unlock()
	return nil
}

// ForgetNodes forgets every id known, as when the nodes table was emptied.
func (s *Store) ForgetNodes() {
	s.nodes.mu.Lock()
	clear(s.nodes.ids)
	s.nodes.mu.Unlock()
}

// NodeIDs returns the dictionary ids of guids in tx, adding those that
// are new; the ids it looked up go into learnt.
func (s *Store) NodeIDs(ctx context.Context, tx Tx, guids []fabric.GUID, learnt map[fabric.GUID]int64) (map[fabric.GUID]int64, error) {
	out := make(map[fabric.GUID]int64, len(guids))
	var missing []int64
	s.nodes.mu.Lock()
	for _, g := range guids {
		if id, ok := s.nodes.ids[g]; ok {
			out[g] = id
		} else if id, ok := learnt[g]; ok {
			out[g] = id
		} else if _, ok := out[g]; !ok {
			out[g] = 0
			missing = append(missing, int64(g))
		}
	}
	s.nodes.mu.Unlock()
	for len(missing) > 0 {
		chunk := missing[:min(len(missing), 500)]
		missing = missing[len(chunk):]
		args := make([]any, len(chunk))
		for i, g := range chunk {
			args[i] = g
		}
		values := "(?)" + repeat(", (?)", len(chunk)-1)
		if _, err := tx.Exec(ctx, `INSERT INTO nodes(guid) VALUES `+values+` ON CONFLICT (guid) DO NOTHING`, args...); err != nil {
			return nil, fmt.Errorf("add nodes: %w", err)
		}
		cond, args := In(s.Dialect, "guid", chunk)
		rows, err := tx.Query(ctx, `SELECT guid, id FROM nodes WHERE `+cond, args...)
		if err != nil {
			return nil, fmt.Errorf("look up nodes: %w", err)
		}
		for rows.Next() {
			var g, id int64
			if err := rows.Scan(&g, &id); err != nil {
				rows.Close()
				return nil, fmt.Errorf("look up nodes: %w", err)
			}
			out[fabric.GUID(g)], learnt[fabric.GUID(g)] = id, id
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("look up nodes: %w", err)
		}
	}
	return out, nil
}

// PortSamples implements store.Store. Ports without samples in the range
// are absent from the map. Zero from or to leave that end open.
func (s *Store) PortSamples(ctx context.Context, ports []fabric.PortRef, from, to time.Time) (map[fabric.PortRef][]fabric.PortSample, error) {
	return PortSamples(ctx, s.readPorts, ports, from, to)
}

// PortSeries implements store.Store.
func (s *Store) PortSeries(ctx context.Context, ports []fabric.PortRef, from, to time.Time) (map[fabric.PortRef][]store.PortPoint, error) {
	return PortSeries(ctx, s.readPorts, ports, from, to)
}

// readPorts is the ReadPorts of PortSamples and PortSeries, in one read
// transaction: per group of switches (all at once where the dialect
// takes arrays, else each alone) three queries by switch and time:
// 1-hour rollups, 5-minute rollups, raw rows.
func (s *Store) readPorts(ctx context.Context, ports []fabric.PortRef, from, to time.Time,
	raw func([]fabric.PortSample), rolled func([]store.PortPoint)) error {
	guids, byNode := GroupPorts(ports)
	if len(guids) == 0 {
		return nil
	}
	gs := make([]int64, len(guids))
	for i, g := range guids {
		gs[i] = int64(g)
	}
	groups := [][]int64{gs}
	if !s.Dialect.Arrays {
		groups = groups[:0]
		for i := range gs {
			groups = append(groups, gs[i:i+1])
		}
	}
	lo, hi := codec.LowerBound(from), codec.UpperBound(to)
	d := s.decoders.Get().(*codec.Decoder)
	defer s.decoders.Put(d)
	var buf []fabric.PortSample
	var pts []store.PortPoint
	return s.Engine.Read(ctx, func(tx Tx) error {
		for _, group := range groups {
			cond, args := In(s.Dialect, "n.guid", group)
			for _, l := range []int{Level1h, Level5m} {
				w := LevelWidth[l]
				bucketLo := lo
				if lo != math.MinInt64 {
					bucketLo = lo - w
				}
				err := eachBlob(ctx, tx, `SELECT n.guid, r.time_ns, r.data FROM nodes n JOIN port_rollups r ON r.node_id = n.id
					WHERE `+cond+` AND r.width_s = ? AND r.bucket_ns >= ? AND r.bucket_ns <= ? AND r.time_ns >= ? AND r.time_ns <= ?
					ORDER BY n.guid, r.bucket_ns`, append(args[:len(args):len(args)], WidthS(l), bucketLo, hi, lo, hi),
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
			err := eachBlob(ctx, tx, `SELECT n.guid, s.time_ns, s.data FROM nodes n JOIN port_samples s ON s.node_id = n.id
				WHERE `+cond+` AND s.time_ns >= ? AND s.time_ns <= ? ORDER BY n.guid, s.time_ns`, append(args[:len(args):len(args)], lo, hi),
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
		}
		return nil
	})
}

// eachBlob runs a query of (guid, time_ns, data) rows and calls f with
// each; data is valid only during the call.
func eachBlob(ctx context.Context, tx Tx, q string, args []any, f func(g fabric.GUID, t int64, data []byte) error) error {
	return eachKeyed(ctx, tx, q, args, func(g, t int64, data []byte) error { return f(fabric.GUID(g), t, data) })
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
	latest := NewLatest(d)
	err := s.Engine.Read(ctx, func(tx Tx) error {
		q, args := s.Dialect.LatestRaw, []any{codec.NS(at)}
		if window > 0 {
			q, args = `SELECT n.guid, s.time_ns, s.data FROM port_samples s JOIN nodes n ON n.id = s.node_id
				WHERE s.time_ns >= ? AND s.time_ns <= ? ORDER BY s.time_ns DESC`, []any{codec.NS(at.Add(-window)), codec.NS(at)}
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
		for _, l := range []int{Level5m, Level1h} {
			w := LevelWidth[l]
			err := eachBlob(ctx, tx, `SELECT n.guid, r.time_ns, r.data FROM port_rollups r JOIN nodes n ON n.id = r.node_id
				WHERE r.width_s = ? AND r.bucket_ns > ? AND r.bucket_ns <= ? ORDER BY r.bucket_ns DESC`,
				[]any{WidthS(l), codec.NS(at.Add(-window)) - w, codec.NS(at)},
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
