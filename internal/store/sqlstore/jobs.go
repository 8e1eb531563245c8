package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/codec"
)

// SaveJob implements store.Store.
func (s *Store) SaveJob(ctx context.Context, j *store.Job) error {
	if err := CheckJob(j); err != nil {
		return fmt.Errorf("save job: %w", err)
	}
	summary, err := json.Marshal(&j.JobSummary)
	if err != nil {
		return fmt.Errorf("save job %s: %w", j.ID, err)
	}
	cols := []string{"id", "state", "owner", "start_ns", "end_ns", "updated_ns"}
	if s.Dialect.Generated {
		cols = append(cols[:2], cols[3:]...) // jobs.owner computed by the engine
	}
	cols = append(append(cols, JobMetricColumns...), "summary", "fabric")
	// The job's own row, unless another collector saved it too; then the
	// join of the parts.
	insert := `INSERT INTO jobs(` + strings.Join(cols, ", ") + `) VALUES (?` + repeat(", ?", len(cols)-1) + `) ON CONFLICT (id) DO UPDATE SET ` + Excluded(cols[1:]...)
	upsert := insert + ` WHERE jobs.fabric = excluded.fabric`
	row := func(js *store.JobSummary, data []byte, fabric string) []any {
		var end any // NULL while running
		if !js.End.IsZero() {
			end = js.End.UnixNano()
		}
		args := []any{js.ID, js.State, js.Owner(), codec.NSOrZero(js.Start), end, codec.NSOrZero(js.Updated)}
		if s.Dialect.Generated {
			args = append(args[:2], args[3:]...)
		}
		for _, c := range JobMetricColumns {
			args = append(args, store.JobSortValue(js, c))
		}
		return append(args, data, fabric)
	}
	// Each rank once, the last one given winning; one buffer for all
	// rows, each a slice of it.
	byRank := map[int]int{}
	var ranks []int
	for i := range j.Processes {
		if _, ok := byRank[j.Processes[i].Rank]; !ok {
			ranks = append(ranks, j.Processes[i].Rank)
		}
		byRank[j.Processes[i].Rank] = i
	}
	var buf []byte
	ends := make([]int, len(ranks))
	for k, r := range ranks {
		buf = codec.EncodeProcess(buf, &j.Processes[byRank[r]])
		ends[k] = len(buf)
	}
	rows := make([][]any, len(ranks))
	start := 0
	for k, r := range ranks {
		rows[k] = []any{j.ID, r, buf[start:ends[k]]}
		start = ends[k]
	}
	return s.Engine.Write(ctx, "save job "+j.ID, nil, func(tx Tx) error {
		if s.Dialect.JobLock != nil {
			q, args := s.Dialect.JobLock(j.ID)
			if _, err := tx.Exec(ctx, q, args...); err != nil {
				return fmt.Errorf("lock: %w", err)
			}
		}
		n, err := tx.Exec(ctx, upsert, row(&j.JobSummary, summary, s.Fabric)...)
		if err != nil {
			return fmt.Errorf("summary: %w", err)
		}
		if n == 0 {
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
		return tx.Upsert(ctx, "job_processes", []string{"job", "rank", "data"}, []string{"job", "rank"}, Excluded("data"), rows)
	})
}

// joinParts keeps own (encoded as data) as this store's collector's part
// of a job that another collector saved too, and returns the join of all
// parts: on the first such save, the other collector's summary, the row
// until then, becomes its part. The caller holds the job's lock.
func (s *Store) joinParts(ctx context.Context, tx Tx, own *store.JobSummary, data []byte) (*store.JobSummary, []byte, error) {
	if _, err := tx.Exec(ctx, `INSERT INTO job_parts(job, fabric, summary) SELECT id, fabric, summary FROM jobs WHERE id = ? AND fabric <> ''
		ON CONFLICT (job, fabric) DO NOTHING`, own.ID); err != nil {
		return nil, nil, fmt.Errorf("the other collector's part: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO job_parts(job, fabric, summary) VALUES (?, ?, ?)
		ON CONFLICT (job, fabric) DO UPDATE SET summary = excluded.summary`, own.ID, s.Fabric, data); err != nil {
		return nil, nil, fmt.Errorf("part: %w", err)
	}
	raw, err := column[[]byte](ctx, tx, `SELECT summary FROM job_parts WHERE job = ? ORDER BY fabric`, own.ID)
	if err != nil {
		return nil, nil, fmt.Errorf("parts: %w", err)
	}
	return JoinParts(own, data, raw)
}

// column runs a query of one column and returns its values.
func column[T any](ctx context.Context, tx Tx, q string, args ...any) ([]T, error) {
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// JobPart implements store.Store.
func (s *Store) JobPart(ctx context.Context, id string) (*store.JobSummary, error) {
	var b []byte
	ok, err := s.Engine.Reader().QueryRow(ctx, `SELECT summary FROM jobs WHERE id = ? AND fabric = ?
		UNION ALL SELECT summary FROM job_parts WHERE job = ? AND fabric = ?`,
		[]any{id, s.Fabric, id, s.Fabric}, &b)
	return DecodePart(id, s.Fabric, b, err, err == nil && !ok)
}

// SharedJobs implements store.Store.
func (s *Store) SharedJobs(ctx context.Context, since time.Time) ([]string, error) {
	out, err := column[string](ctx, s.Engine.Reader(), `SELECT p.job FROM jobs j JOIN job_parts p ON p.job = j.id
		WHERE j.end_ns >= ? AND j.fabric = '' AND p.fabric = ? ORDER BY p.job`, codec.LowerBound(since), s.Fabric)
	if err != nil {
		return nil, fmt.Errorf("jobs shared with other collectors: %w", err)
	}
	return out, nil
}

// Jobs implements store.Store.
func (s *Store) Jobs(ctx context.Context, q store.JobQuery) ([]store.JobSummary, int, error) {
	sortKey := q.Sort
	if sortKey == "" {
		sortKey = "start"
	}
	col, ok := JobSortColumn(sortKey)
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
		cond, ex := In(s.Dialect, "id", q.Exclude)
		where = append(where, "NOT ("+cond+")")
		args = append(args, ex...)
	}
	cond := ""
	if len(where) > 0 {
		cond = " WHERE " + strings.Join(where, " AND ")
	}
	var total int
	if _, err := s.Engine.Reader().QueryRow(ctx, `SELECT count(*) FROM jobs`+cond, args, &total); err != nil {
		return nil, 0, fmt.Errorf("jobs: count: %w", err)
	}
	dir := "DESC"
	if q.Asc {
		dir = "ASC"
	}
	limit := s.Dialect.NoLimit
	if q.Limit > 0 {
		limit = q.Limit
	}
	query := fmt.Sprintf(`SELECT summary FROM jobs%s ORDER BY %s %s NULLS LAST, id%s LIMIT ? OFFSET ?`, cond, col, dir, s.Dialect.Bytewise)
	raw, err := column[[]byte](ctx, s.Engine.Reader(), query, append(args, limit, max(q.Offset, 0))...)
	if err != nil {
		return nil, 0, fmt.Errorf("jobs: %w", err)
	}
	out := make([]store.JobSummary, len(raw))
	for i, b := range raw {
		if err := json.Unmarshal(b, &out[i]); err != nil {
			return nil, 0, fmt.Errorf("jobs: decoding a summary: %w", err)
		}
	}
	return out, total, nil
}

// JobSummary implements store.Store.
func (s *Store) JobSummary(ctx context.Context, id string) (*store.JobSummary, error) {
	var js store.JobSummary
	if err := s.jobSummary(ctx, s.Engine.Reader(), id, &js); err != nil {
		return nil, fmt.Errorf("job %q: %w", id, err)
	}
	return &js, nil
}

// jobSummary reads job id's summary into js.
func (s *Store) jobSummary(ctx context.Context, tx Tx, id string, js *store.JobSummary) error {
	var b []byte
	ok, err := tx.QueryRow(ctx, `SELECT summary FROM jobs WHERE id = ?`, []any{id}, &b)
	switch {
	case err != nil:
		return err
	case !ok:
		return store.ErrNotFound
	}
	if err := json.Unmarshal(b, js); err != nil {
		return fmt.Errorf("decoding its summary: %w", err)
	}
	return nil
}

// Job implements store.Store.
func (s *Store) Job(ctx context.Context, id string) (*store.Job, error) {
	j := &store.Job{Processes: []store.Process{}}
	err := s.Engine.Read(ctx, func(tx Tx) error {
		if err := s.jobSummary(ctx, tx, id, &j.JobSummary); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT rank, data FROM job_processes WHERE job = ? ORDER BY rank`, id)
		if err != nil {
			return fmt.Errorf("processes: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var rank int
			var z RawBytes
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
	if err := CheckProcessSamples(samples); err != nil {
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
		rows = append(rows, []any{k.job, k.rank, k.t, codec.EncodeProcessSample(nil, &samples[i])})
	}
	need := []Need{{"job_samples", times}}
	return s.Engine.Write(ctx, fmt.Sprintf("add %d process samples", len(samples)), need, func(tx Tx) error {
		return tx.Upsert(ctx, "job_samples", []string{"job", "rank", "time_ns", "data"}, []string{"job", "rank", "time_ns"}, Excluded("data"), rows)
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
		cond, rs := In(s.Dialect, "rank", ranks)
		rankCond = " AND " + cond
		args = append(args, rs...)
	}
	rolled := map[int]bool{}
	err := s.Engine.Read(ctx, func(tx Tx) error {
		err := eachRank(ctx, tx, `SELECT rank, width_s, time_ns, data FROM job_rollups WHERE job = ? AND time_ns BETWEEN ? AND ?`+rankCond+
			` ORDER BY rank, width_s DESC, bucket_ns`, args, func(rank int, w, t int64, b []byte) error {
			a, err := codec.DecodeProcessRollup(b, t)
			if err != nil {
				return fmt.Errorf("rollup of rank %d at %d: %w", rank, t, err)
			}
			out[rank] = append(out[rank], a.Sample(job, rank, time.Duration(w)*time.Second))
			rolled[rank] = true
			return nil
		})
		if err != nil {
			return fmt.Errorf("rollups: %w", err)
		}
		return eachRank(ctx, tx, `SELECT rank, 0, time_ns, data FROM job_samples WHERE job = ? AND time_ns BETWEEN ? AND ?`+rankCond+
			` ORDER BY rank, time_ns`, args, func(rank int, _, t int64, b []byte) error {
			x, err := codec.DecodeProcessSample(b)
			if err != nil {
				return fmt.Errorf("sample of rank %d at %d: %w", rank, t, err)
			}
			x.Job, x.Rank, x.Time = job, rank, codec.FromNS(t)
			out[rank] = append(out[rank], x)
			return nil
		})
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

// eachRank runs a query of (rank, width, time, data) rows and calls fn
// with each; data is valid only during the call.
func eachRank(ctx context.Context, tx Tx, q string, args []any, fn func(rank int, w, t int64, data []byte) error) error {
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var rank int
		var w, t int64
		var data RawBytes
		if err := rows.Scan(&rank, &w, &t, &data); err != nil {
			return err
		}
		if err := fn(rank, w, t, data); err != nil {
			return err
		}
	}
	return rows.Err()
}
