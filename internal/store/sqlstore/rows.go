package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/netloom/netloom/internal/store/codec"
)

// The fold's rows (PortRows, ProcessRows) in one write transaction of
// either engine: raw rows in port_samples and job_samples (key time_ns),
// rollups in port_rollups and job_rollups (key bucket_ns). A level's
// width is written into its statements, so that each is planned for it.

// FoldPortsStep does one step of folding level l's expired port rows
// into coarser levels in tx, and keeps the running totals. It reports
// whether there was any to fold.
func (s *Store) FoldPortsStep(ctx context.Context, tx Tx, c Cutoffs, l int) (bool, error) {
	found, counts, err := s.fold.FoldPorts(ctx, portRows{tx}, c, l, s.RollupPortRows)
	if err != nil || !found {
		return found, err
	}
	_, err = tx.Exec(ctx, `UPDATE totals SET value = value + CASE name WHEN 'port_samples' THEN CAST(? AS BIGINT) ELSE CAST(? AS BIGINT) END
		WHERE name IN ('port_samples', 'port_rollups')`, counts.Samples, counts.Rollups)
	return true, err
}

// FoldProcessesStep does one step of folding level l's expired process
// rows into coarser levels in tx. It reports whether there was any to
// fold.
func (s *Store) FoldProcessesStep(ctx context.Context, tx Tx, c Cutoffs, l int) (bool, error) {
	return s.fold.FoldProcesses(ctx, processRows{tx}, c, l, s.RollupProcessRows)
}

// FoldWhat names a fold step of kind ("port samples", "process samples")
// and level in messages.
func FoldWhat(kind string, c Cutoffs, l int) string {
	return fmt.Sprintf("roll up %s (%s) before %s", kind, LevelName(l), codec.FromNS(c[l]).Format(time.RFC3339))
}

// portRows implements PortRows.
type portRows struct{ tx Tx }

func (r portRows) Oldest(ctx context.Context, l int, before int64) (key int64, ok bool, err error) {
	q := `SELECT time_ns FROM port_samples WHERE time_ns < ? ORDER BY time_ns LIMIT 1`
	if l != LevelRaw {
		q = fmt.Sprintf(`SELECT bucket_ns FROM port_rollups WHERE width_s = %d AND bucket_ns < ? ORDER BY bucket_ns LIMIT 1`, WidthS(l))
	}
	ok, err = r.tx.QueryRow(ctx, q, []any{before}, &key)
	return key, ok, err
}

func (r portRows) NextNode(ctx context.Context, after int64) (node int64, ok bool, err error) {
	ok, err = r.tx.QueryRow(ctx, `SELECT id FROM nodes WHERE id > CAST(? AS BIGINT) ORDER BY id LIMIT 1`, []any{after}, &node)
	return node, ok, err
}

func (r portRows) Rows(ctx context.Context, l int, node, from, to int64, limit int, fn func(key, t int64, ports int, data []byte) error) error {
	q := `SELECT time_ns, time_ns, ports, data FROM port_samples WHERE node_id = ? AND time_ns >= ? AND time_ns < ? ORDER BY time_ns LIMIT ?`
	if l != LevelRaw {
		q = fmt.Sprintf(`SELECT bucket_ns, time_ns, ports, data FROM port_rollups WHERE node_id = ? AND width_s = %d AND bucket_ns >= ? AND bucket_ns < ?
			ORDER BY bucket_ns LIMIT ?`, WidthS(l))
	}
	rows, err := r.tx.Query(ctx, q, node, from, to, limit)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var key, t int64
		var ports int
		var data RawBytes
		if err := rows.Scan(&key, &t, &ports, &data); err != nil {
			return err
		}
		if err := fn(key, t, ports, data); err != nil {
			return err
		}
	}
	return rows.Err()
}

func (r portRows) Delete(ctx context.Context, l int, node, from, last int64) error {
	q := `DELETE FROM port_samples WHERE node_id = ? AND time_ns >= ? AND time_ns <= ?`
	if l != LevelRaw {
		q = fmt.Sprintf(`DELETE FROM port_rollups WHERE node_id = ? AND width_s = %d AND bucket_ns >= ? AND bucket_ns <= ?`, WidthS(l))
	}
	_, err := r.tx.Exec(ctx, q, node, from, last)
	return err
}

func (r portRows) Rollup(ctx context.Context, l int, node, bucket int64) (t int64, ports int, data []byte, ok bool, err error) {
	ok, err = r.tx.QueryRow(ctx, `SELECT time_ns, ports, data FROM port_rollups WHERE node_id = ? AND width_s = ? AND bucket_ns = ?`,
		[]any{node, WidthS(l), bucket}, &t, &ports, &data)
	return t, ports, data, ok, err
}

func (r portRows) PutRollup(ctx context.Context, l int, node, bucket, t int64, ports int, data []byte) error {
	_, err := r.tx.Exec(ctx, `INSERT INTO port_rollups(node_id, width_s, bucket_ns, time_ns, ports, data) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (node_id, width_s, bucket_ns) DO UPDATE SET `+Excluded("time_ns", "ports", "data"),
		node, WidthS(l), bucket, t, ports, data)
	return err
}

// processRows implements ProcessRows.
type processRows struct{ tx Tx }

func (r processRows) OldestJob(ctx context.Context, l int, before int64) (job string, ok bool, err error) {
	q := `SELECT job FROM job_samples WHERE time_ns < ? ORDER BY time_ns LIMIT 1`
	if l != LevelRaw {
		q = fmt.Sprintf(`SELECT job FROM job_rollups WHERE width_s = %d AND bucket_ns < ? ORDER BY bucket_ns LIMIT 1`, WidthS(l))
	}
	ok, err = r.tx.QueryRow(ctx, q, []any{before}, &job)
	return job, ok, err
}

func (r processRows) NextRank(ctx context.Context, l int, job string, after int64) (rank int64, ok bool, err error) {
	table := "job_samples"
	if l != LevelRaw {
		table = "job_rollups"
	}
	ok, err = r.tx.QueryRow(ctx, `SELECT rank FROM `+table+` WHERE job = ? AND rank > CAST(? AS BIGINT) ORDER BY rank LIMIT 1`, []any{job, after}, &rank)
	return rank, ok, err
}

func (r processRows) Rows(ctx context.Context, l int, job string, rank, before int64, limit int, fn func(key, t int64, data []byte) error) error {
	q := `SELECT time_ns, time_ns, data FROM job_samples WHERE job = ? AND rank = ? AND time_ns < ? ORDER BY time_ns LIMIT ?`
	if l != LevelRaw {
		q = fmt.Sprintf(`SELECT bucket_ns, time_ns, data FROM job_rollups WHERE job = ? AND rank = ? AND width_s = %d AND bucket_ns < ?
			ORDER BY bucket_ns LIMIT ?`, WidthS(l))
	}
	return eachKeyed(ctx, r.tx, q, []any{job, rank, before, limit}, fn)
}

func (r processRows) Delete(ctx context.Context, l int, job string, rank, last int64) error {
	q := `DELETE FROM job_samples WHERE job = ? AND rank = ? AND time_ns <= ?`
	if l != LevelRaw {
		q = fmt.Sprintf(`DELETE FROM job_rollups WHERE job = ? AND rank = ? AND width_s = %d AND bucket_ns <= ?`, WidthS(l))
	}
	_, err := r.tx.Exec(ctx, q, job, rank, last)
	return err
}

func (r processRows) Rollups(ctx context.Context, l int, job string, rank, lo, hi int64, fn func(bucket, t int64, data []byte) error) error {
	return eachKeyed(ctx, r.tx, `SELECT bucket_ns, time_ns, data FROM job_rollups WHERE job = ? AND rank = ? AND width_s = ? AND bucket_ns BETWEEN ? AND ?`,
		[]any{job, rank, WidthS(l), lo, hi}, fn)
}

func (r processRows) PutRollup(ctx context.Context, l int, job string, rank, bucket, t int64, data []byte) error {
	_, err := r.tx.Exec(ctx, `INSERT INTO job_rollups(job, rank, width_s, bucket_ns, time_ns, data) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (job, rank, width_s, bucket_ns) DO UPDATE SET `+Excluded("time_ns", "data"),
		job, rank, WidthS(l), bucket, t, data)
	return err
}

// eachKeyed runs a query of (key, time, data) rows and calls fn with each;
// data is valid only during the call.
func eachKeyed(ctx context.Context, tx Tx, q string, args []any, fn func(key, t int64, data []byte) error) error {
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var key, t int64
		var data RawBytes
		if err := rows.Scan(&key, &t, &data); err != nil {
			return err
		}
		if err := fn(key, t, data); err != nil {
			return err
		}
	}
	return rows.Err()
}
