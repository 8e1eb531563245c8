package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/netloom/netloom/internal/store/sqlstore"
)

// portRows implements sqlstore.PortRows in one transaction: raw rows in
// port_samples (key time_ns), rollups in port_rollups (key bucket_ns).
type portRows struct{ tx pgx.Tx }

func (r portRows) Oldest(ctx context.Context, l int, before int64) (key int64, ok bool, err error) {
	if l == sqlstore.LevelRaw {
		ok, err = queryRow(ctx, r.tx, `SELECT time_ns FROM port_samples WHERE time_ns < $1 ORDER BY time_ns LIMIT 1`, []any{before}, &key)
	} else {
		ok, err = queryRow(ctx, r.tx, `SELECT bucket_ns FROM port_rollups WHERE width_s = $1 AND bucket_ns < $2 ORDER BY bucket_ns LIMIT 1`,
			[]any{sqlstore.WidthS(l), before}, &key)
	}
	return key, ok, err
}

func (r portRows) NextNode(ctx context.Context, after int64) (node int64, ok bool, err error) {
	ok, err = queryRow(ctx, r.tx, `SELECT id FROM nodes WHERE id > $1::bigint ORDER BY id LIMIT 1`, []any{after}, &node)
	return node, ok, err
}

func (r portRows) Rows(ctx context.Context, l int, node, from, to int64, limit int, fn func(key, t int64, ports int, data []byte) error) error {
	q, args := `SELECT time_ns, time_ns, ports, data FROM port_samples WHERE node_id = $1 AND time_ns >= $2 AND time_ns < $3 ORDER BY time_ns LIMIT $4`,
		[]any{node, from, to, limit}
	if l != sqlstore.LevelRaw {
		q, args = `SELECT bucket_ns, time_ns, ports, data FROM port_rollups WHERE node_id = $1 AND width_s = $5 AND bucket_ns >= $2 AND bucket_ns < $3
			ORDER BY bucket_ns LIMIT $4`, append(args, sqlstore.WidthS(l))
	}
	rows, err := r.tx.Query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var key, t int64
		var ports int16
		if err := rows.Scan(&key, &t, &ports, nil); err != nil {
			return err
		}
		if err := fn(key, t, int(ports), rows.RawValues()[3]); err != nil {
			return err
		}
	}
	return rows.Err()
}

func (r portRows) Delete(ctx context.Context, l int, node, from, last int64) error {
	var err error
	if l == sqlstore.LevelRaw {
		_, err = r.tx.Exec(ctx, `DELETE FROM port_samples WHERE node_id = $1 AND time_ns >= $2 AND time_ns <= $3`, node, from, last)
	} else {
		_, err = r.tx.Exec(ctx, `DELETE FROM port_rollups WHERE node_id = $1 AND width_s = $2 AND bucket_ns >= $3 AND bucket_ns <= $4`,
			node, sqlstore.WidthS(l), from, last)
	}
	return err
}

func (r portRows) Rollup(ctx context.Context, l int, node, bucket int64) (t int64, ports int, data []byte, ok bool, err error) {
	var p int16
	ok, err = queryRow(ctx, r.tx, `SELECT time_ns, ports, data FROM port_rollups WHERE node_id = $1 AND width_s = $2 AND bucket_ns = $3`,
		[]any{node, sqlstore.WidthS(l), bucket}, &t, &p, &data)
	return t, int(p), data, ok, err
}

func (r portRows) PutRollup(ctx context.Context, l int, node, bucket, t int64, ports int, data []byte) error {
	_, err := r.tx.Exec(ctx, `INSERT INTO port_rollups(node_id, width_s, bucket_ns, time_ns, ports, data) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (node_id, width_s, bucket_ns) DO UPDATE SET time_ns = excluded.time_ns, ports = excluded.ports, data = excluded.data`,
		node, sqlstore.WidthS(l), bucket, t, int16(ports), data)
	return err
}

// processRows implements sqlstore.ProcessRows in one transaction: raw
// rows in job_samples (key time_ns), rollups in job_rollups (key
// bucket_ns).
type processRows struct{ tx pgx.Tx }

func (r processRows) OldestJob(ctx context.Context, l int, before int64) (job string, ok bool, err error) {
	if l == sqlstore.LevelRaw {
		ok, err = queryRow(ctx, r.tx, `SELECT job FROM job_samples WHERE time_ns < $1 ORDER BY time_ns LIMIT 1`, []any{before}, &job)
	} else {
		ok, err = queryRow(ctx, r.tx, `SELECT job FROM job_rollups WHERE width_s = $1 AND bucket_ns < $2 ORDER BY bucket_ns LIMIT 1`,
			[]any{sqlstore.WidthS(l), before}, &job)
	}
	return job, ok, err
}

func (r processRows) NextRank(ctx context.Context, l int, job string, after int64) (rank int64, ok bool, err error) {
	table := "job_samples"
	if l != sqlstore.LevelRaw {
		table = "job_rollups"
	}
	ok, err = queryRow(ctx, r.tx, `SELECT rank FROM `+table+` WHERE job = $1 AND rank > $2::bigint ORDER BY rank LIMIT 1`, []any{job, after}, &rank)
	return rank, ok, err
}

func (r processRows) Rows(ctx context.Context, l int, job string, rank, before int64, limit int, fn func(key, t int64, data []byte) error) error {
	q, args := `SELECT time_ns, time_ns, data FROM job_samples WHERE job = $1 AND rank = $2 AND time_ns < $3 ORDER BY time_ns LIMIT $4`,
		[]any{job, rank, before, limit}
	if l != sqlstore.LevelRaw {
		q, args = `SELECT bucket_ns, time_ns, data FROM job_rollups WHERE job = $1 AND rank = $2 AND width_s = $5 AND bucket_ns < $3
			ORDER BY bucket_ns LIMIT $4`, append(args, sqlstore.WidthS(l))
	}
	return eachKeyed(ctx, r.tx, q, args, fn)
}

func (r processRows) Delete(ctx context.Context, l int, job string, rank, last int64) error {
	var err error
	if l == sqlstore.LevelRaw {
		_, err = r.tx.Exec(ctx, `DELETE FROM job_samples WHERE job = $1 AND rank = $2 AND time_ns <= $3`, job, rank, last)
	} else {
		_, err = r.tx.Exec(ctx, `DELETE FROM job_rollups WHERE job = $1 AND rank = $2 AND width_s = $3 AND bucket_ns <= $4`,
			job, rank, sqlstore.WidthS(l), last)
	}
	return err
}

func (r processRows) Rollups(ctx context.Context, l int, job string, rank, lo, hi int64, fn func(bucket, t int64, data []byte) error) error {
	return eachKeyed(ctx, r.tx, `SELECT bucket_ns, time_ns, data FROM job_rollups WHERE job = $1 AND rank = $2 AND width_s = $3 AND bucket_ns BETWEEN $4 AND $5`,
		[]any{job, rank, sqlstore.WidthS(l), lo, hi}, fn)
}

func (r processRows) PutRollup(ctx context.Context, l int, job string, rank, bucket, t int64, data []byte) error {
	_, err := r.tx.Exec(ctx, `INSERT INTO job_rollups(job, rank, width_s, bucket_ns, time_ns, data) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (job, rank, width_s, bucket_ns) DO UPDATE SET time_ns = excluded.time_ns, data = excluded.data`,
		job, rank, sqlstore.WidthS(l), bucket, t, data)
	return err
}

// eachKeyed runs a query of (key, time, data) rows and calls fn with each;
// data is valid only during the call.
func eachKeyed(ctx context.Context, tx pgx.Tx, q string, args []any, fn func(key, t int64, data []byte) error) error {
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var key, t int64
		if err := rows.Scan(&key, &t, nil); err != nil {
			return err
		}
		if err := fn(key, t, rows.RawValues()[2]); err != nil {
			return err
		}
	}
	return rows.Err()
}
