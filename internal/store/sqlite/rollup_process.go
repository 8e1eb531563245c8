package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/netloom/netloom/internal/store/codec"
	"github.com/netloom/netloom/internal/store/sqlstore"
)

// processStmts are a level's statements for process rows, prepared once
// per step: the job of the oldest expired row, the next rank of a job, a
// rank's expired rows (key, time, data), their deletion up to a key, and
// the stored rollup rows of a rank and width in a bucket range. They
// implement sqlstore.ProcessRows for one level.
type processStmts struct {
	oldest, nextRank, rows, del, targets, put *sql.Stmt
}

func (s *Store) prepareProcess(ctx context.Context, tx *sql.Tx, l int) (*processStmts, func(), error) {
	var q [6]string
	if l == sqlstore.LevelRaw {
		q[0] = `SELECT job FROM job_samples WHERE time_ns < ? ORDER BY time_ns LIMIT 1`
		q[1] = `SELECT rank FROM job_samples WHERE job = ? AND rank > ? ORDER BY rank LIMIT 1`
		q[2] = `SELECT time_ns, time_ns, data FROM job_samples WHERE job = ? AND rank = ? AND time_ns < ? ORDER BY time_ns LIMIT ?`
		q[3] = `DELETE FROM job_samples WHERE job = ? AND rank = ? AND time_ns <= ?`
	} else {
		w := sqlstore.WidthS(l)
		q[0] = fmt.Sprintf(`SELECT job FROM job_rollups WHERE width_s = %d AND bucket_ns < ? ORDER BY bucket_ns LIMIT 1`, w)
		q[1] = `SELECT rank FROM job_rollups WHERE job = ? AND rank > ? ORDER BY rank LIMIT 1`
		q[2] = fmt.Sprintf(`SELECT bucket_ns, time_ns, data FROM job_rollups WHERE job = ? AND rank = ? AND width_s = %d AND bucket_ns < ? ORDER BY bucket_ns LIMIT ?`, w)
		q[3] = fmt.Sprintf(`DELETE FROM job_rollups WHERE job = ? AND rank = ? AND width_s = %d AND bucket_ns <= ?`, w)
	}
	q[4] = `SELECT bucket_ns, time_ns, data FROM job_rollups WHERE job = ? AND rank = ? AND width_s = ? AND bucket_ns BETWEEN ? AND ?`
	q[5] = `INSERT OR REPLACE INTO job_rollups(job, rank, width_s, bucket_ns, time_ns, data) VALUES (?, ?, ?, ?, ?, ?)`
	st, closeAll, err := prepareAll(ctx, tx, q[:])
	if err != nil {
		return nil, nil, err
	}
	return &processStmts{oldest: st[0], nextRank: st[1], rows: st[2], del: st[3], targets: st[4], put: st[5]}, closeAll, nil
}

func (st *processStmts) OldestJob(ctx context.Context, _ int, before int64) (string, bool, error) {
	return scanOne[string](ctx, st.oldest, before)
}

func (st *processStmts) NextRank(ctx context.Context, _ int, job string, after int64) (int64, bool, error) {
	return scanOne[int64](ctx, st.nextRank, job, after)
}

func (st *processStmts) Rows(ctx context.Context, _ int, job string, rank, before int64, limit int, fn func(key, t int64, data []byte) error) error {
	return eachRow(ctx, st.rows, func(rows *sql.Rows) error {
		var key, t int64
		var data sql.RawBytes
		if err := rows.Scan(&key, &t, &data); err != nil {
			return err
		}
		return fn(key, t, data)
	}, job, rank, before, limit)
}

func (st *processStmts) Delete(ctx context.Context, _ int, job string, rank, last int64) error {
	_, err := st.del.ExecContext(ctx, job, rank, last)
	return err
}

func (st *processStmts) Rollups(ctx context.Context, l int, job string, rank, lo, hi int64, fn func(bucket, t int64, data []byte) error) error {
	return eachRow(ctx, st.targets, func(rows *sql.Rows) error {
		var b, t int64
		var data sql.RawBytes
		if err := rows.Scan(&b, &t, &data); err != nil {
			return err
		}
		return fn(b, t, data)
	}, job, rank, sqlstore.WidthS(l), lo, hi)
}

func (st *processStmts) PutRollup(ctx context.Context, l int, job string, rank, bucket, t int64, data []byte) error {
	_, err := st.put.ExecContext(ctx, job, rank, sqlstore.WidthS(l), bucket, t, data)
	return err
}

// foldProcessesStep does one transaction of folding level l's expired
// process rows into coarser levels. It reports whether there was any to
// fold.
func (s *Store) foldProcessesStep(ctx context.Context, c sqlstore.Cutoffs, l int) (bool, error) {
	if c[l] == sqlstore.KeepAll {
		return false, nil
	}
	what := fmt.Sprintf("roll up process samples (%s) before %s", sqlstore.LevelName(l), codec.FromNS(c[l]).Format(time.RFC3339))
	found := false
	err := s.writeTx(ctx, what, func(tx *sql.Tx) error {
		st, done, err := s.prepareProcess(ctx, tx, l)
		if err != nil {
			return err
		}
		defer done()
		found, err = s.fold.FoldProcesses(ctx, st, c, l, s.opt.RollupProcessRows)
		return err
	})
	return found, err
}
