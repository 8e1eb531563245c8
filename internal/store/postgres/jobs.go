package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

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
	cols := append([]string{"id", "state", "owner", "start_ns", "end_ns", "updated_ns"}, sqlstore.JobMetricColumns...)
	cols = append(cols, "summary", "fabric")
	ph := make([]string, len(cols))
	for i := range ph {
		ph[i] = fmt.Sprintf("$%d", i+1)
	}
	// The job's own row, unless another collector saved it too; then the
	// join of the parts (the lock held).
	insert := `INSERT INTO jobs(` + strings.Join(cols, ", ") + `) VALUES (` + strings.Join(ph, ", ") + `) ON CONFLICT (id) DO UPDATE SET ` + sqlstore.Excluded(cols[1:]...)
	upsert := insert + ` WHERE jobs.fabric = excluded.fabric`
	row := func(js *store.JobSummary, data []byte, fabric string) []any {
		var end *int64
		if !js.End.IsZero() {
			e := js.End.UnixNano()
			end = &e
		}
		args := []any{js.ID, js.State, js.Owner(), codec.NSOrZero(js.Start), end, codec.NSOrZero(js.Updated)}
		for _, c := range sqlstore.JobMetricColumns {
			args = append(args, store.JobSortValue(js, c))
		}
		return append(args, data, fabric)
	}
	// Each rank once, the last one given winning.
	byRank := map[int]int{}
	for i := range j.Processes {
		byRank[j.Processes[i].Rank] = i
	}
	rows := make([][]any, 0, len(byRank))
	for rank, i := range byRank {
		rows = append(rows, []any{j.ID, int32(rank), codec.EncodeProcess(nil, &j.Processes[i])})
	}
	return s.writeTx(ctx, "save job "+j.ID, nil, func(tx pgx.Tx) error {
		h := fnv.New32a()
		h.Write([]byte(j.ID))
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, $2)`, int32(jobLockSpace), int32(h.Sum32())); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		tag, err := tx.Exec(ctx, upsert, row(&j.JobSummary, summary, s.opt.Fabric)...)
		if err != nil {
			return fmt.Errorf("summary: %w", err)
		}
		if tag.RowsAffected() == 0 {
			js, data, err := s.joinParts(ctx, tx, &j.JobSummary, summary)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, insert, row(js, data, "")...); err != nil {
				return fmt.Errorf("joined summary: %w", err)
			}
		}
		if len(rows) == 0 {
			return nil
		}
		return copyUpsert(ctx, tx, "job_processes", []string{"job", "rank", "data"}, []string{"job", "rank"}, sqlstore.Excluded("data"), rows)
	})
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
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "$?", fmt.Sprintf("$%d", len(args))))
	}
	switch q.State {
	case "":
	case store.JobRunning, store.JobFinished:
		add("state = $?", q.State)
	default:
		return nil, 0, fmt.Errorf("jobs: unknown state %q", q.State)
	}
	if q.Owner != "" {
		add("owner = $?", q.Owner)
	}
	if !q.To.IsZero() {
		add("start_ns <= $?", q.To.UnixNano())
	}
	if !q.From.IsZero() {
		add("(end_ns IS NULL OR end_ns >= $?)", q.From.UnixNano())
	}
	if len(q.Exclude) > 0 {
		add("id <> ALL($?)", q.Exclude)
	}
	cond := ""
	if len(where) > 0 {
		cond = " WHERE " + strings.Join(where, " AND ")
	}
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM jobs`+cond, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("jobs: count: %w", err)
	}
	dir := "DESC"
	if q.Asc {
		dir = "ASC"
	}
	var limit any // NULL: no limit
	if q.Limit > 0 {
		limit = q.Limit
	}
	n := len(args)
	query := fmt.Sprintf(`SELECT summary FROM jobs%s ORDER BY %s %s NULLS LAST, id COLLATE "C" LIMIT $%d OFFSET $%d`, cond, col, dir, n+1, n+2)
	rows, err := s.pool.Query(ctx, query, append(args, limit, max(q.Offset, 0))...)
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

// JobSummary implements store.Store.
func (s *Store) JobSummary(ctx context.Context, id string) (*store.JobSummary, error) {
	var b []byte
	err := s.pool.QueryRow(ctx, `SELECT summary FROM jobs WHERE id = $1`, id).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("job %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("job %q: %w", id, err)
	}
	var js store.JobSummary
	if err := json.Unmarshal(b, &js); err != nil {
		return nil, fmt.Errorf("job %q: decoding its summary: %w", id, err)
	}
	return &js, nil
}

// joinParts keeps own (encoded as data) as this store's collector's part
// of a job that another collector saved too, and returns the join of all
// parts: on the first such save, the other collector's summary, the row
// until then, becomes its part. The caller holds the job's lock.
func (s *Store) joinParts(ctx context.Context, tx pgx.Tx, own *store.JobSummary, data []byte) (*store.JobSummary, []byte, error) {
	if _, err := tx.Exec(ctx, `INSERT INTO job_parts(job, fabric, summary) SELECT id, fabric, summary FROM jobs WHERE id = $1 AND fabric <> ''
		ON CONFLICT (job, fabric) DO NOTHING`, own.ID); err != nil {
		return nil, nil, fmt.Errorf("the other collector's part: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO job_parts(job, fabric, summary) VALUES ($1, $2, $3)
		ON CONFLICT (job, fabric) DO UPDATE SET summary = excluded.summary`, own.ID, s.opt.Fabric, data); err != nil {
		return nil, nil, fmt.Errorf("part: %w", err)
	}
	parts, err := tx.Query(ctx, `SELECT summary FROM job_parts WHERE job = $1 ORDER BY fabric`, own.ID)
	if err != nil {
		return nil, nil, fmt.Errorf("parts: %w", err)
	}
	raw, err := pgx.CollectRows(parts, pgx.RowTo[[]byte])
	if err != nil {
		return nil, nil, fmt.Errorf("parts: %w", err)
	}
	return sqlstore.JoinParts(own, data, raw)
}

// JobPart implements store.Store.
func (s *Store) JobPart(ctx context.Context, id string) (*store.JobSummary, error) {
	var b []byte
	err := s.pool.QueryRow(ctx, `SELECT summary FROM jobs WHERE id = $1 AND fabric = $2
		UNION ALL SELECT summary FROM job_parts WHERE job = $1 AND fabric = $2`,
		id, s.opt.Fabric).Scan(&b)
	return sqlstore.DecodePart(id, s.opt.Fabric, b, err, errors.Is(err, pgx.ErrNoRows))
}

// SharedJobs implements store.Store.
func (s *Store) SharedJobs(ctx context.Context, since time.Time) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT p.job FROM jobs j JOIN job_parts p ON p.job = j.id
		WHERE j.end_ns >= $1 AND j.fabric = '' AND p.fabric = $2 ORDER BY p.job`, codec.LowerBound(since), s.opt.Fabric)
	if err != nil {
		return nil, fmt.Errorf("jobs shared with other collectors: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("jobs shared with other collectors: %w", err)
	}
	return out, nil
}

// Job implements store.Store.
func (s *Store) Job(ctx context.Context, id string) (*store.Job, error) {
	var j *store.Job
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		var b []byte
		err := tx.QueryRow(ctx, `SELECT summary FROM jobs WHERE id = $1`, id).Scan(&b)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		j = &store.Job{Processes: []store.Process{}}
		if err := json.Unmarshal(b, &j.JobSummary); err != nil {
			return fmt.Errorf("decoding its summary: %w", err)
		}
		rows, err := tx.Query(ctx, `SELECT rank, data FROM job_processes WHERE job = $1 ORDER BY rank`, id)
		if err != nil {
			return fmt.Errorf("processes: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var rank int32
			var z []byte
			if err := rows.Scan(&rank, &z); err != nil {
				return fmt.Errorf("processes: %w", err)
			}
			p, err := codec.DecodeProcess(z)
			if err != nil {
				return fmt.Errorf("rank %d: %w", rank, err)
			}
			j.Processes = append(j.Processes, p)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("job %q: %w", id, err)
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
	type key struct {
		job  string
		rank int
		t    int64
	}
	last := map[key]int{}
	times := make([]int64, 0, len(samples))
	for i := range samples {
		t := codec.NS(samples[i].Time)
		last[key{samples[i].Job, samples[i].Rank, t}] = i
		times = append(times, t)
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	rows := make([][]any, 0, len(last))
	for k, i := range last {
		rows = append(rows, []any{k.job, int32(k.rank), k.t, codec.EncodeProcessSample(nil, &samples[i])})
	}
	need := []partNeed{{tableJobSamples, times}}
	return s.writeTx(ctx, fmt.Sprintf("add %d process samples", len(samples)), need, func(tx pgx.Tx) error {
		return copyUpsert(ctx, tx, tableJobSamples, []string{"job", "rank", "time_ns", "data"}, []string{"job", "rank", "time_ns"}, sqlstore.Excluded("data"), rows)
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
	args := []any{job, codec.LowerBound(from), codec.UpperBound(to)}
	if ranks != nil {
		rs := make([]int32, len(ranks))
		for i, r := range ranks {
			rs[i] = int32(r)
		}
		rankCond = ` AND rank = ANY($4)`
		args = append(args, rs)
	}
	rolled := map[int]bool{}
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT rank, width_s, time_ns, data FROM job_rollups WHERE job = $1 AND time_ns BETWEEN $2 AND $3`+rankCond+
			` ORDER BY rank, width_s DESC, bucket_ns`, args...)
		if err != nil {
			return fmt.Errorf("rollups: %w", err)
		}
		for rows.Next() {
			var rank, w int32
			var t int64
			var b []byte
			if err := rows.Scan(&rank, &w, &t, &b); err != nil {
				rows.Close()
				return fmt.Errorf("rollups: %w", err)
			}
			a, err := codec.DecodeProcessRollup(b, t)
			if err != nil {
				rows.Close()
				return fmt.Errorf("rollup of rank %d at %d: %w", rank, t, err)
			}
			out[int(rank)] = append(out[int(rank)], a.Sample(job, int(rank), time.Duration(w)*time.Second))
			rolled[int(rank)] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("rollups: %w", err)
		}
		rows, err = tx.Query(ctx, `SELECT rank, time_ns, data FROM job_samples WHERE job = $1 AND time_ns BETWEEN $2 AND $3`+rankCond+
			` ORDER BY rank, time_ns`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var rank int32
			var t int64
			var b []byte
			if err := rows.Scan(&rank, &t, &b); err != nil {
				return err
			}
			x, err := codec.DecodeProcessSample(b)
			if err != nil {
				return fmt.Errorf("sample of rank %d at %d: %w", rank, t, err)
			}
			x.Job, x.Rank, x.Time = job, int(rank), codec.FromNS(t)
			out[int(rank)] = append(out[int(rank)], x)
		}
		return rows.Err()
	})
	if err != nil {
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
// number of rows at a time, then the job.
func (s *Store) pruneJobsStep(ctx context.Context, tx pgx.Tx, before time.Time) (bool, error) {
	if before.IsZero() {
		return false, nil
	}
	rows, err := tx.Query(ctx, `SELECT id FROM jobs WHERE state = $1 AND end_ns < $2 ORDER BY id LIMIT $3`, store.JobFinished, codec.NS(before), s.opt.PruneChunk)
	if err != nil {
		return false, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(ids) == 0 {
		return false, err
	}
	budget := int64(s.opt.PruneChunk)
	for _, id := range ids {
		for _, q := range []string{
			`DELETE FROM job_samples WHERE (job, rank, time_ns) IN (SELECT job, rank, time_ns FROM job_samples WHERE job = $1 LIMIT $2)`,
			`DELETE FROM job_rollups WHERE (job, rank, width_s, bucket_ns) IN (SELECT job, rank, width_s, bucket_ns FROM job_rollups WHERE job = $1 LIMIT $2)`,
			`DELETE FROM job_processes WHERE (job, rank) IN (SELECT job, rank FROM job_processes WHERE job = $1 LIMIT $2)`,
			`DELETE FROM job_link_totals WHERE (job, guid, port) IN (SELECT job, guid, port FROM job_link_totals WHERE job = $1 LIMIT $2)`,
		} {
			tag, err := tx.Exec(ctx, q, id, budget)
			if err != nil {
				return false, fmt.Errorf("job %s: %w", id, err)
			}
			if budget -= tag.RowsAffected(); budget <= 0 {
				return true, nil // the job's rows go on in the next step
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM job_parts WHERE job = $1`, id); err != nil {
			return false, fmt.Errorf("job %s: %w", id, err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM jobs WHERE id = $1`, id); err != nil {
			return false, fmt.Errorf("job %s: %w", id, err)
		}
		budget--
	}
	return true, nil
}
