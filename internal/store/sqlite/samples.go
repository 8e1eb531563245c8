package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
)

// checkSweep validates one AddPortSamples call and returns a copy sorted
// by GUID then port; the caller's slice is left as it was.
func checkSweep(in []fabric.PortSample) ([]fabric.PortSample, error) {
	t := in[0].Time
	if err := checkTime("Time", t); err != nil {
		return nil, fmt.Errorf("port sample 0 (%s): %w", in[0].Port, err)
	}
	for i := range in {
		s := &in[i]
		switch {
		case !s.Time.Equal(t):
			return nil, fmt.Errorf("port sample %d (%s): Time %s differs from the sweep's time %s (one call stores one sweep)",
				i, s.Port, s.Time.Format(time.RFC3339Nano), t.Format(time.RFC3339Nano))
		case s.Port.GUID == 0:
			return nil, fmt.Errorf("port sample %d: Port.GUID is zero", i)
		case s.Port.Port < 0 || s.Port.Port > maxPort:
			return nil, fmt.Errorf("port sample %d (%s): Port.Port %d out of range 0..%d", i, s.Port.GUID, s.Port.Port, maxPort)
		case s.Span < 0:
			return nil, fmt.Errorf("port sample %d (%s): Span %v is negative", i, s.Port, s.Span)
		}
	}
	out := append([]fabric.PortSample(nil), in...)
	sort.Slice(out, func(i, j int) bool { return out[i].Port.Less(out[j].Port) })
	for i := 1; i < len(out); i++ {
		if out[i].Port == out[i-1].Port {
			return nil, fmt.Errorf("port sample for %s: Port appears twice in one sweep", out[i].Port)
		}
	}
	return out, nil
}

// AddPortSamples implements store.Store: one row per switch, all in one
// transaction.
func (s *Store) AddPortSamples(ctx context.Context, in []fabric.PortSample) error {
	if len(in) == 0 {
		return nil
	}
	sorted, err := checkSweep(in)
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
		for start := 0; start < len(sorted); {
			g := sorted[start].Port.GUID
			end := start + 1
			for end < len(sorted) && sorted[end].Port.GUID == g {
				end++
			}
			id, err := s.nodeID(ctx, tx, g, newIDs)
			if err != nil {
				return err
			}
			blob, err = s.enc.encodeSwitch(blob[:0], sorted[start:end])
			if err != nil {
				return fmt.Errorf("node %s: %w", g, err)
			}
			if _, err := ins.ExecContext(ctx, ns(t), id, end-start, blob); err != nil {
				var se sqlite3.Error
				if errors.As(err, &se) && se.ExtendedCode == sqlite3.ErrConstraintUnique {
					return fmt.Errorf("node %s: samples at this time are already stored", g)
				}
				return fmt.Errorf("node %s: %w", g, err)
			}
			start = end
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
	out := map[fabric.PortRef][]fabric.PortSample{}
	rolled := map[fabric.PortRef]bool{}
	err := s.readPorts(ctx, ports, from, to,
		func(smp []fabric.PortSample) {
			for _, x := range smp {
				out[x.Port] = append(out[x.Port], x)
			}
		},
		func(pts []store.PortPoint) {
			for _, p := range pts {
				out[p.Port] = append(out[p.Port], p.PortSample)
				rolled[p.Port] = true
			}
		})
	if err != nil {
		return nil, err
	}
	for p := range rolled {
		l := out[p]
		if !sort.SliceIsSorted(l, func(i, j int) bool { return l[i].Time.Before(l[j].Time) }) {
			sort.SliceStable(l, func(i, j int) bool { return l[i].Time.Before(l[j].Time) })
		}
	}
	return out, nil
}

// PortSeries implements store.Store.
func (s *Store) PortSeries(ctx context.Context, ports []fabric.PortRef, from, to time.Time) (map[fabric.PortRef][]store.PortPoint, error) {
	out := map[fabric.PortRef][]store.PortPoint{}
	err := s.readPorts(ctx, ports, from, to,
		func(smp []fabric.PortSample) {
			for _, x := range smp {
				out[x.Port] = append(out[x.Port], store.RawPoint(x))
			}
		},
		func(pts []store.PortPoint) {
			for _, p := range pts {
				out[p.Port] = append(out[p.Port], p)
			}
		})
	if err != nil {
		return nil, err
	}
	for _, l := range out {
		if !sort.SliceIsSorted(l, func(i, j int) bool { return l[i].Time.Before(l[j].Time) }) {
			sort.SliceStable(l, func(i, j int) bool { return l[i].Time.Before(l[j].Time) })
		}
	}
	return out, nil
}

// readPorts hands the given ports' rollup points and raw samples in
// [from, to] to the callbacks, switch by switch: 1-hour rollups, then
// 5-minute ones, then raw samples, each oldest first. Normally their
// times do not overlap (rollups hold what raw rows no longer do); samples
// stored late for a bucket already rolled up can, until the next prune
// folds them in.
func (s *Store) readPorts(ctx context.Context, ports []fabric.PortRef, from, to time.Time,
	raw func([]fabric.PortSample), rolled func([]store.PortPoint)) error {
	byNode := map[fabric.GUID]map[int]bool{}
	var guids []fabric.GUID
	for _, p := range ports {
		if byNode[p.GUID] == nil {
			byNode[p.GUID] = map[int]bool{}
			guids = append(guids, p.GUID)
		}
		byNode[p.GUID][p.Port] = true
	}
	if len(guids) == 0 {
		return nil
	}
	lo, hi := lowerBound(from), upperBound(to)
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
	d := s.decoders.Get().(*decoder)
	defer s.decoders.Put(d)
	var buf []fabric.PortSample
	var pts []store.PortPoint
	for _, g := range guids {
		want := byNode[g]
		keep := func(p int) bool { return want[p] }
		for _, l := range []int{level1h, level5m} {
			w := levelWidth[l]
			bucketLo := lo
			if lo != math.MinInt64 {
				bucketLo = lo - w
			}
			err := eachBlob(ctx, rst, func(t int64, data []byte) (err error) {
				if pts, err = d.decodeRollup(pts[:0], data, g, fromNS(t), time.Duration(w), keep); err == nil {
					rolled(pts)
				}
				return err
			}, guidInt(g), widthS(l), bucketLo, hi, lo, hi)
			if err != nil {
				return fmt.Errorf("port rollups of node %s: %w", g, err)
			}
		}
		err := eachBlob(ctx, st, func(t int64, data []byte) (err error) {
			if buf, err = d.decodeSwitch(buf[:0], data, g, fromNS(t), keep); err == nil {
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
	var rows *sql.Rows
	var err error
	if window > 0 {
		rows, err = s.r.QueryContext(ctx, `SELECT n.guid, s.time_ns, s.data FROM port_samples s JOIN nodes n ON n.id = s.node_id
			WHERE s.time_ns >= ? AND s.time_ns <= ? ORDER BY s.time_ns DESC`, ns(at.Add(-window)), ns(at))
	} else {
		rows, err = s.r.QueryContext(ctx, `SELECT n.guid, s.time_ns, s.data FROM nodes n JOIN port_samples s ON s.id =
			(SELECT id FROM port_samples WHERE node_id = n.id AND time_ns <= ? ORDER BY time_ns DESC LIMIT 1)`, ns(at))
	}
	if err != nil {
		return nil, fmt.Errorf("latest samples at %s: %w", at.Format(time.RFC3339), err)
	}
	defer rows.Close()
	d := s.decoders.Get().(*decoder)
	defer s.decoders.Put(d)
	seen := map[fabric.PortRef]bool{}
	var out []fabric.PortSample
	var ports []int
	for rows.Next() {
		var g, t int64
		var data sql.RawBytes
		if err := rows.Scan(&g, &t, &data); err != nil {
			return nil, fmt.Errorf("latest samples at %s: %w", at.Format(time.RFC3339), err)
		}
		guid := fabric.GUID(g)
		var ok bool
		if ports, ok = blobPorts(data, ports[:0]); ok {
			fresh := false
			for _, p := range ports {
				if !seen[fabric.PortRef{GUID: guid, Port: p}] {
					fresh = true
					break
				}
			}
			if !fresh {
				continue
			}
		}
		n := len(out)
		out, err = d.decodeSwitch(out, data, guid, fromNS(t), func(p int) bool { return !seen[fabric.PortRef{GUID: guid, Port: p}] })
		if err != nil {
			return nil, fmt.Errorf("latest samples at %s: %w", at.Format(time.RFC3339), err)
		}
		for _, smp := range out[n:] {
			seen[smp.Port] = true
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("latest samples at %s: %w", at.Format(time.RFC3339), err)
	}
	rows.Close()
	if window > 0 {
		// Where the raw samples are gone, the rollup point of the bucket
		// that holds at (or ended within the window) stands in.
		if out, err = s.latestRollups(ctx, d, out, seen, at, window); err != nil {
			return nil, fmt.Errorf("latest samples at %s: %w", at.Format(time.RFC3339), err)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Port.Less(out[j].Port) })
	return out, nil
}

// latestRollups appends, for ports not seen, the newest rollup point
// whose bucket overlaps [at-window, at]: 5-minute rollups first, then
// 1-hour ones.
func (s *Store) latestRollups(ctx context.Context, d *decoder, out []fabric.PortSample, seen map[fabric.PortRef]bool, at time.Time, window time.Duration) ([]fabric.PortSample, error) {
	var pts []store.PortPoint
	for _, l := range []int{level5m, level1h} {
		w := levelWidth[l]
		rows, err := s.r.QueryContext(ctx, `SELECT n.guid, r.time_ns, r.data FROM port_rollups r JOIN nodes n ON n.id = r.node_id
			WHERE r.width_s = ? AND r.bucket_ns > ? AND r.bucket_ns <= ? ORDER BY r.bucket_ns DESC`, widthS(l), ns(at.Add(-window))-w, ns(at))
		if err != nil {
			return out, err
		}
		for rows.Next() {
			var g, t int64
			var data sql.RawBytes
			if err := rows.Scan(&g, &t, &data); err != nil {
				rows.Close()
				return out, err
			}
			guid := fabric.GUID(g)
			if pts, err = d.decodeRollup(pts[:0], data, guid, fromNS(t), time.Duration(w), func(p int) bool { return !seen[fabric.PortRef{GUID: guid, Port: p}] }); err != nil {
				rows.Close()
				return out, err
			}
			for _, p := range pts {
				seen[p.Port] = true
				out = append(out, p.PortSample)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return out, err
		}
	}
	return out, nil
}
