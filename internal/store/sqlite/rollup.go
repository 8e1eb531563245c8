package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/netloom/netloom/internal/store/codec"
	"github.com/netloom/netloom/internal/store/sqlstore"
)

// Rollups: see sqlstore's fold. Here are the statements it runs on
// SQLite's tables.

// portStmts are a level's statements for port rows, prepared once per
// step: the oldest expired key, the next switch, one switch's rows in a
// key range and their deletion, and a stored rollup row and its upsert.
// They implement sqlstore.PortRows for one level.
type portStmts struct {
	oldest, nextNode, rows, del, target, put *sql.Stmt
}

func (s *Store) preparePorts(ctx context.Context, tx *sql.Tx, l int) (*portStmts, func(), error) {
	var q [6]string
	if l == sqlstore.LevelRaw {
		q[0] = `SELECT time_ns FROM port_samples WHERE time_ns < ? ORDER BY time_ns LIMIT 1`
		q[2] = `SELECT time_ns, time_ns, ports, data FROM port_samples WHERE node_id = ? AND time_ns >= ? AND time_ns < ? ORDER BY time_ns LIMIT ?`
		q[3] = `DELETE FROM port_samples WHERE node_id = ? AND time_ns >= ? AND time_ns <= ?`
	} else {
		w := sqlstore.WidthS(l)
		q[0] = fmt.Sprintf(`SELECT bucket_ns FROM port_rollups WHERE width_s = %d AND bucket_ns < ? ORDER BY bucket_ns LIMIT 1`, w)
		q[2] = fmt.Sprintf(`SELECT bucket_ns, time_ns, ports, data FROM port_rollups WHERE node_id = ? AND width_s = %d AND bucket_ns >= ? AND bucket_ns < ? ORDER BY bucket_ns LIMIT ?`, w)
		q[3] = fmt.Sprintf(`DELETE FROM port_rollups WHERE node_id = ? AND width_s = %d AND bucket_ns >= ? AND bucket_ns <= ?`, w)
	}
	q[1] = `SELECT id FROM nodes WHERE id > ? ORDER BY id LIMIT 1`
	q[4] = `SELECT time_ns, ports, data FROM port_rollups WHERE node_id = ? AND width_s = ? AND bucket_ns = ?`
	q[5] = `INSERT INTO port_rollups(node_id, width_s, bucket_ns, time_ns, ports, data) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT(node_id, width_s, bucket_ns) DO UPDATE SET time_ns = excluded.time_ns, ports = excluded.ports, data = excluded.data`
	st, closeAll, err := prepareAll(ctx, tx, q[:])
	if err != nil {
		return nil, nil, err
	}
	return &portStmts{oldest: st[0], nextNode: st[1], rows: st[2], del: st[3], target: st[4], put: st[5]}, closeAll, nil
}

// prepareAll prepares queries in tx; closeAll closes them.
func prepareAll(ctx context.Context, tx *sql.Tx, queries []string) (st []*sql.Stmt, closeAll func(), err error) {
	st = make([]*sql.Stmt, len(queries))
	closeAll = func() {
		for _, x := range st {
			if x != nil {
				x.Close()
			}
		}
	}
	for i, q := range queries {
		if st[i], err = tx.PrepareContext(ctx, q); err != nil {
			closeAll()
			return nil, nil, err
		}
	}
	return st, closeAll, nil
}

// scanOne runs a one-row, one-column query; ok is false without a row.
func scanOne[T any](ctx context.Context, st *sql.Stmt, args ...any) (v T, ok bool, err error) {
	err = st.QueryRowContext(ctx, args...).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return v, false, nil
	}
	return v, err == nil, err
}

// eachRow runs st and calls scan with each row; RawBytes scanned are
// valid only during the call.
func eachRow(ctx context.Context, st *sql.Stmt, scan func(rows *sql.Rows) error, args ...any) error {
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

func (st *portStmts) Oldest(ctx context.Context, _ int, before int64) (int64, bool, error) {
	return scanOne[int64](ctx, st.oldest, before)
}

func (st *portStmts) NextNode(ctx context.Context, after int64) (int64, bool, error) {
	return scanOne[int64](ctx, st.nextNode, after)
}

func (st *portStmts) Rows(ctx context.Context, _ int, node, from, to int64, limit int, fn func(key, t int64, ports int, data []byte) error) error {
	return eachRow(ctx, st.rows, func(rows *sql.Rows) error {
		var key, t int64
		var np int
		var data sql.RawBytes
		if err := rows.Scan(&key, &t, &np, &data); err != nil {
			return err
		}
		return fn(key, t, np, data)
	}, node, from, to, limit)
}

func (st *portStmts) Delete(ctx context.Context, _ int, node, from, last int64) error {
	_, err := st.del.ExecContext(ctx, node, from, last)
	return err
}

func (st *portStmts) Rollup(ctx context.Context, l int, node, bucket int64) (t int64, ports int, data []byte, ok bool, err error) {
	err = st.target.QueryRowContext(ctx, node, sqlstore.WidthS(l), bucket).Scan(&t, &ports, &data)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, nil, false, nil
	}
	return t, ports, data, err == nil, err
}

func (st *portStmts) PutRollup(ctx context.Context, l int, node, bucket, t int64, ports int, data []byte) error {
	_, err := st.put.ExecContext(ctx, node, sqlstore.WidthS(l), bucket, t, ports, data)
	return err
}

// foldPortsStep does one transaction of folding level l's expired port
// rows into coarser levels. It reports whether there was any to fold.
func (s *Store) foldPortsStep(ctx context.Context, c sqlstore.Cutoffs, l int) (bool, error) {
	if c[l] == sqlstore.KeepAll {
		return false, nil
	}
	what := fmt.Sprintf("roll up port samples (%s) before %s", sqlstore.LevelName(l), codec.FromNS(c[l]).Format(time.RFC3339))
	found := false
	err := s.writeTx(ctx, what, func(tx *sql.Tx) error {
		st, done, err := s.preparePorts(ctx, tx, l)
		if err != nil {
			return err
		}
		defer done()
		var counts sqlstore.PortCounts
		found, counts, err = s.fold.FoldPorts(ctx, st, c, l, s.opt.RollupPortRows)
		if err != nil || !found {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE totals SET value = value + CASE name WHEN 'port_samples' THEN ? ELSE ? END
			WHERE name IN ('port_samples', 'port_rollups')`, counts.Samples, counts.Rollups)
		return err
	})
	return found, err
}
