package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/codec"
	"github.com/netloom/netloom/internal/store/sqlstore"
)

// SaveJob implements store.Store.
func (s *Store) SaveJob(ctx context.Context, j *store.Job) error {
	if err := sqlstore.CheckJob(j); err != nil {
		return fmt.Errorf("save job: %w", err)
	}
	summary, err := json.Marshal(&j.JobSummary)
	if err != nil {
		return fmt.Errorf("save job %s: %w", j.ID, err)
	}
	// One buffer for all rows; each row is a slice of it.
	var buf []byte
	ends := make([]int, len(j.Processes))
	for i := range j.Processes {
		buf = codec.EncodeProcess(buf, &j.Processes[i])
		ends[i] = len(buf)
	}
	cols := append([]string{"id", "state", "start_ns", "end_ns", "updated_ns"}, sqlstore.JobMetricColumns...)
	cols = append(cols, "summary", "fabric")
	values := `(?` + strings.Repeat(", ?", len(cols)-1) + `)`
	// The job's own row, unless another collector saved it too.
	upsert := `INSERT INTO jobs(` + strings.Join(cols, ", ") + `) VALUES ` + values +
		` ON CONFLICT (id) DO UPDATE SET ` + sqlstore.Excluded(cols[1:]...) + ` WHERE jobs.fabric = excluded.fabric`
	replace := `INSERT OR REPLACE INTO jobs(` + strings.Join(cols, ", ") + `) VALUES ` + values
	row := func(js *store.JobSummary, data []byte, fabric string) []any {
		args := []any{js.ID, js.State, codec.NSOrZero(js.Start), nullNS(js.End), codec.NSOrZero(js.Updated)}
		for _, c := range sqlstore.JobMetricColumns {
			args = append(args, store.JobSortValue(js, c))
		}
		return append(args, data, fabric)
	}
	return s.writeTx(ctx, "save job "+j.ID, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, upsert, row(&j.JobSummary, summary, s.opt.Fabric)...)
		if err != nil {
			return fmt.Errorf("summary: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("summary: %w", err)
		} else if n == 0 {
			js, data, err := s.joinParts(ctx, tx, &j.JobSummary, summary)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, replace, row(js, data, "")...); err != nil {
				return fmt.Errorf("joined summary: %w", err)
			}
		}
		if len(ends) == 0 {
			return nil
		}
		st, err := tx.PrepareContext(ctx, `INSERT OR REPLACE INTO job_processes(job, rank, data) VALUES (?, ?, ?)`)
		if err != nil {
			return err
		}
		defer st.Close()
		start := 0
		for i, end := range ends {
			b := buf[start:end]
			start = end
			if _, err := st.ExecContext(ctx, j.ID, j.Processes[i].Rank, b); err != nil {
				return fmt.Errorf("rank %d: %w", j.Processes[i].Rank, err)
			}
		}
		return nil
	})
}

// joinParts keeps own (encoded as data) as this store's collector's part
// of a job that another collector saved too, and returns the join of all
// parts: on the first such save, the other collector's summary, the row
// until then, becomes its part.
func (s *Store) joinParts(ctx context.Context, tx *sql.Tx, own *store.JobSummary, data []byte) (*store.JobSummary, []byte, error) {
	if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO job_parts(job, fabric, summary) SELECT id, fabric, summary FROM jobs WHERE id = ? AND fabric <> ''`, own.ID); err != nil {
		return nil, nil, fmt.Errorf("the other collector's part: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO job_parts(job, fabric, summary) VALUES (?, ?, ?)`, own.ID, s.opt.Fabric, data); err != nil {
		return nil, nil, fmt.Errorf("part: %w", err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT summary FROM job_parts WHERE job = ? ORDER BY fabric`, own.ID)
	if err != nil {
		return nil, nil, fmt.Errorf("parts: %w", err)
	}
	defer rows.Close()
	var raw [][]byte
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, nil, fmt.Errorf("parts: %w", err)
		}
		raw = append(raw, b)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("parts: %w", err)
	}
	return sqlstore.JoinParts(own, data, raw)
}

// JobPart implements store.Store.
func (s *Store) JobPart(ctx context.Context, id string) (*store.JobSummary, error) {
	var b []byte
	err := s.r.QueryRowContext(ctx, `SELECT summary FROM jobs WHERE id = ? AND fabric = ?
		UNION ALL SELECT summary FROM job_parts WHERE job = ? AND fabric = ?`,
		id, s.opt.Fabric, id, s.opt.Fabric).Scan(&b)
	return sqlstore.DecodePart(id, s.opt.Fabric, b, err, errors.Is(err, sql.ErrNoRows))
}

// SharedJobs implements store.Store.
func (s *Store) SharedJobs(ctx context.Context, since time.Time) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT p.job FROM jobs j JOIN job_parts p ON p.job = j.id
		WHERE j.end_ns >= ? AND j.fabric = '' AND p.fabric = ? ORDER BY p.job`, codec.LowerBound(since), s.opt.Fabric)
	if err != nil {
		return nil, fmt.Errorf("jobs shared with other collectors: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("jobs shared with other collectors: %w", err)
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

func nullNS(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

// Jobs implements store.Store.
func (s *Store) Jobs(ctx context.Context, q store.JobQuery) ([]store.JobSummary, int, error) {
	sortKey := q.Sort
	if sortKey == "" {
		sortKey = "start"
	}
	col, ok := sqlstore.JobSortColumn(sortKey)
	if !ok {
		return nil, 0, fmt.Errorf("jobs: unknown sort key %q (known: %s)", q.Sort, strings.Join(store.JobSortKeys, ", "))
	}
	var where []string
	var args []any
	switch q.State {
	case "":
	case store.JobRunning, store.JobFinished:
		where = append(where, "state = ?")
		args = append(args, q.State)
	default:
		return nil, 0, fmt.Errorf("jobs: unknown state %q", q.State)
	}
	if q.Owner != "" {
		where = append(where, "owner = ?")
		args = append(args, q.Owner)
	}
	if !q.To.IsZero() {
		where = append(where, "start_ns <= ?")
		args = append(args, q.To.UnixNano())
	}
	if !q.From.IsZero() {
		where = append(where, "(end_ns IS NULL OR end_ns >= ?)")
		args = append(args, q.From.UnixNano())
	}
	if len(q.Exclude) > 0 {
		where = append(where, "id NOT IN (?"+strings.Repeat(", ?", len(q.Exclude)-1)+")")
		for _, id := range q.Exclude {
			args = append(args, id)
		}
	}
	cond := ""
	if len(where) > 0 {
		cond = " WHERE " + strings.Join(where, " AND ")
	}
	var total int
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM jobs`+cond, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("jobs: count: %w", err)
	}
	dir := "DESC"
	if q.Asc {
		dir = "ASC"
	}
	limit := int64(q.Limit)
	if limit <= 0 {
		limit = -1
	}
	query := fmt.Sprintf(`SELECT summary FROM jobs%s ORDER BY %s %s NULLS LAST, id LIMIT ? OFFSET ?`, cond, col, dir)
	rows, err := s.r.QueryContext(ctx, query, append(args, limit, max(q.Offset, 0))...)
	if err != nil {
		return nil, 0, fmt.Errorf("jobs: %w", err)
	}
	defer rows.Close()
	out := []store.JobSummary{}
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, 0, fmt.Errorf("jobs: %w", err)
		}
		var js store.JobSummary
		if err := json.Unmarshal(b, &js); err != nil {
			return nil, 0, fmt.Errorf("jobs: decoding a summary: %w", err)
		}
		out = append(out, js)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("jobs: %w", err)
	}
	return out, total, nil
}

// Job implements store.Store.
func (s *Store) Job(ctx context.Context, id string) (*store.Job, error) {
	var b []byte
	err := s.r.QueryRowContext(ctx, `SELECT summary FROM jobs WHERE id = ?`, id).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("job %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("job %q: %w", id, err)
	}
	j := &store.Job{Processes: []store.Process{}}
	if err := json.Unmarshal(b, &j.JobSummary); err != nil {
		return nil, fmt.Errorf("job %q: decoding its summary: %w", id, err)
	}
	rows, err := s.r.QueryContext(ctx, `SELECT rank, data FROM job_processes WHERE job = ? ORDER BY rank`, id)
	if err != nil {
		return nil, fmt.Errorf("job %q processes: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var rank int
		var z []byte
		if err := rows.Scan(&rank, &z); err != nil {
			return nil, fmt.Errorf("job %q processes: %w", id, err)
		}
		p, err := codec.DecodeProcess(z)
		if err != nil {
			return nil, fmt.Errorf("job %q rank %d: %w", id, rank, err)
		}
		j.Processes = append(j.Processes, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("job %q processes: %w", id, err)
	}
	return j, nil
}

// AddProcessSamples implements store.Store.
func (s *Store) AddProcessSamples(ctx context.Context, samples []store.ProcessSample) error {
	if len(samples) == 0 {
		return nil
	}
	if err := sqlstore.CheckProcessSamples(samples); err != nil {
		return err
	}
	return s.writeTx(ctx, fmt.Sprintf("add %d process samples", len(samples)), func(tx *sql.Tx) error {
		st, err := tx.PrepareContext(ctx, `INSERT OR REPLACE INTO job_samples(job, rank, time_ns, data) VALUES (?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer st.Close()
		var buf []byte
		for i := range samples {
			x := &samples[i]
			buf = codec.EncodeProcessSample(buf[:0], x)
			if _, err := st.ExecContext(ctx, x.Job, x.Rank, codec.NS(x.Time), buf); err != nil {
				return fmt.Errorf("job %s rank %d: %w", x.Job, x.Rank, err)
			}
		}
		return nil
	})
}

// ProcessSamples implements store.Store: per rank, the rollup points
// (1-hour, then 5-minute) and then the raw samples in the range.
func (s *Store) ProcessSamples(ctx context.Context, job string, ranks []int, from, to time.Time) (map[int][]store.ProcessSample, error) {
	out := map[int][]store.ProcessSample{}
	if ranks != nil && len(ranks) == 0 {
		return out, nil
	}
	rankCond := ""
	var rankArgs []any
	if ranks != nil {
		rankCond = ` AND rank IN (?` + strings.Repeat(", ?", len(ranks)-1) + `)`
		for _, r := range ranks {
			rankArgs = append(rankArgs, r)
		}
	}
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("process samples of job %q: %w", job, err)
	}
	defer tx.Rollback()
	rolled := map[int]bool{}
	q := `SELECT rank, width_s, time_ns, data FROM job_rollups WHERE job = ? AND time_ns BETWEEN ? AND ?` + rankCond +
		` ORDER BY rank, width_s DESC, bucket_ns`
	rows, err := tx.QueryContext(ctx, q, append([]any{job, codec.LowerBound(from), codec.UpperBound(to)}, rankArgs...)...)
	if err != nil {
		return nil, fmt.Errorf("process rollups of job %q: %w", job, err)
	}
	for rows.Next() {
		var rank int
		var w, t int64
		var b []byte
		if err := rows.Scan(&rank, &w, &t, &b); err != nil {
			rows.Close()
			return nil, fmt.Errorf("process rollups of job %q: %w", job, err)
		}
		a, err := codec.DecodeProcessRollup(b, t)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("process rollup of job %q rank %d at %d: %w", job, rank, t, err)
		}
		out[rank] = append(out[rank], a.Sample(job, rank, time.Duration(w)*time.Second))
		rolled[rank] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("process rollups of job %q: %w", job, err)
	}
	q = `SELECT rank, time_ns, data FROM job_samples WHERE job = ? AND time_ns BETWEEN ? AND ?` + rankCond + ` ORDER BY rank, time_ns`
	rows, err = tx.QueryContext(ctx, q, append([]any{job, codec.LowerBound(from), codec.UpperBound(to)}, rankArgs...)...)
	if err != nil {
		return nil, fmt.Errorf("process samples of job %q: %w", job, err)
	}
	defer rows.Close()
	for rows.Next() {
		var rank int
		var t int64
		var b []byte
		if err := rows.Scan(&rank, &t, &b); err != nil {
			return nil, fmt.Errorf("process samples of job %q: %w", job, err)
		}
		x, err := codec.DecodeProcessSample(b)
		if err != nil {
			return nil, fmt.Errorf("process sample of job %q rank %d at %d: %w", job, rank, t, err)
		}
		x.Job, x.Rank, x.Time = job, rank, codec.FromNS(t)
		out[rank] = append(out[rank], x)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("process samples of job %q: %w", job, err)
	}
	for rank := range rolled {
		l := out[rank]
		if !sort.SliceIsSorted(l, func(i, j int) bool { return l[i].Time.Before(l[j].Time) }) {
			sort.SliceStable(l, func(i, j int) bool { return l[i].Time.Before(l[j].Time) })
		}
	}
	return out, nil
}

// pruneJobsStep deletes a chunk of what finished jobs that ended before
// t hold: their samples, rollups, processes and link totals, a bounded
// number of rows at a time (a large job has millions), then the job.
func (s *Store) pruneJobsStep(ctx context.Context, before time.Time) (bool, error) {
	if before.IsZero() {
		return false, nil
	}
	what := "prune jobs ended before " + before.Format(time.RFC3339)
	return s.deleteStep(ctx, what, func(tx *sql.Tx) (int64, error) {
		rows, err := tx.QueryContext(ctx, `SELECT id FROM jobs WHERE state = ? AND end_ns < ? LIMIT ?`, store.JobFinished, codec.NS(before), s.opt.PruneChunk)
		if err != nil {
			return 0, err
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return 0, err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, err
		}
		budget := int64(s.opt.PruneChunk)
		var done int64
		for _, id := range ids {
			for _, q := range []string{
				`DELETE FROM job_samples WHERE (job, rank, time_ns) IN (SELECT job, rank, time_ns FROM job_samples WHERE job = ? LIMIT ?)`,
				`DELETE FROM job_rollups WHERE (job, rank, width_s, bucket_ns) IN (SELECT job, rank, width_s, bucket_ns FROM job_rollups WHERE job = ? LIMIT ?)`,
				`DELETE FROM job_processes WHERE (job, rank) IN (SELECT job, rank FROM job_processes WHERE job = ? LIMIT ?)`,
				`DELETE FROM job_link_totals WHERE (job, guid, port) IN (SELECT job, guid, port FROM job_link_totals WHERE job = ? LIMIT ?)`,
			} {
				res, err := tx.ExecContext(ctx, q, id, budget)
				if err != nil {
					return 0, fmt.Errorf("job %s: %w", id, err)
				}
				n, err := res.RowsAffected()
				if err != nil {
					return 0, err
				}
				done += n
				if budget -= n; budget <= 0 {
					return done, nil // the job's rows go on in the next step
				}
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM job_parts WHERE job = ?`, id); err != nil {
				return 0, fmt.Errorf("job %s: %w", id, err)
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM jobs WHERE id = ?`, id); err != nil {
				return 0, fmt.Errorf("job %s: %w", id, err)
			}
			done++
			budget--
		}
		return done, nil
	})
}
