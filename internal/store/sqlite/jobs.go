package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/netloom/netloom/internal/store"
)

// jobSortColumn maps store.JobSortKeys to columns of the jobs table.
func jobSortColumn(key string) (string, bool) {
	switch key {
	case "start":
		return "start_ns", true
	case "end":
		return "end_ns", true
	case "updated":
		return "updated_ns", true
	case "id":
		return "id", true
	}
	if store.ValidJobSort(key) {
		return key, true
	}
	return "", false
}

// jobMetricColumns are the REAL columns filled from store.JobSortValue.
var jobMetricColumns = []string{"duration", "ranks", "nodes", "cpu", "cpu_seconds", "mpi", "mpi_seconds", "memory", "memory_peak",
	"io", "bytes", "msgs", "inter_node_bytes", "intra_node_bytes", "p2p_bytes", "coll_bytes", "rma_bytes", "p2p_msgs", "coll_msgs", "rma_msgs"}

func checkJob(j *store.Job) error {
	if j == nil || j.ID == "" {
		return errors.New("job without an id")
	}
	if err := checkTime("start", j.Start); err != nil && !j.Start.IsZero() {
		return err
	}
	if !j.End.IsZero() {
		if err := checkTime("end", j.End); err != nil {
			return err
		}
	}
	return nil
}

// SaveJob implements store.Store.
func (s *Store) SaveJob(ctx context.Context, j *store.Job) error {
	if err := checkJob(j); err != nil {
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
		buf = encodeProcess(buf, &j.Processes[i])
		ends[i] = len(buf)
	}
	cols := append([]string{"id", "state", "start_ns", "end_ns", "updated_ns"}, jobMetricColumns...)
	cols = append(cols, "summary")
	args := []any{j.ID, j.State, nsOrZero(j.Start), nullNS(j.End), nsOrZero(j.Updated)}
	for _, c := range jobMetricColumns {
		args = append(args, store.JobSortValue(&j.JobSummary, c))
	}
	args = append(args, summary)
	q := `INSERT OR REPLACE INTO jobs(` + strings.Join(cols, ", ") + `) VALUES (?` + strings.Repeat(", ?", len(cols)-1) + `)`
	return s.writeTx(ctx, "save job "+j.ID, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("summary: %w", err)
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

func nsOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
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
	col, ok := jobSortColumn(sortKey)
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
		p, err := decodeProcess(z)
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
	for i := range samples {
		if samples[i].Job == "" {
			return fmt.Errorf("add process samples: sample %d has no job", i)
		}
		if err := checkTime("sample time", samples[i].Time); err != nil {
			return fmt.Errorf("add process samples: job %s rank %d: %w", samples[i].Job, samples[i].Rank, err)
		}
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
			buf = encodeProcessSample(buf[:0], x)
			if _, err := st.ExecContext(ctx, x.Job, x.Rank, ns(x.Time), buf); err != nil {
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
	rows, err := tx.QueryContext(ctx, q, append([]any{job, lowerBound(from), upperBound(to)}, rankArgs...)...)
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
		a, err := decodeProcessRollup(b, t)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("process rollup of job %q rank %d at %d: %w", job, rank, t, err)
		}
		out[rank] = append(out[rank], a.sample(job, rank, time.Duration(w)*time.Second))
		rolled[rank] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("process rollups of job %q: %w", job, err)
	}
	q = `SELECT rank, time_ns, data FROM job_samples WHERE job = ? AND time_ns BETWEEN ? AND ?` + rankCond + ` ORDER BY rank, time_ns`
	rows, err = tx.QueryContext(ctx, q, append([]any{job, lowerBound(from), upperBound(to)}, rankArgs...)...)
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
		x, err := decodeProcessSample(b)
		if err != nil {
			return nil, fmt.Errorf("process sample of job %q rank %d at %d: %w", job, rank, t, err)
		}
		x.Job, x.Rank, x.Time = job, rank, fromNS(t)
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

// A process sample is a format byte, then uvarints: span in nanoseconds,
// the three float64 seconds as their bits, then the byte and message
// counters in the order of sampleUints.
const formatSample = 0x01

func sampleUints(x *store.ProcessSample) []*uint64 {
	return []*uint64{&x.VmRSS, &x.VmSize, &x.IORead, &x.IOWrite, &x.MPIIORead, &x.MPIIOWrite,
		&x.Traffic.P2P.Bytes, &x.Traffic.P2P.Msgs, &x.Traffic.Coll.Bytes, &x.Traffic.Coll.Msgs, &x.Traffic.RMA.Bytes, &x.Traffic.RMA.Msgs,
		&x.IntraNode.Bytes, &x.IntraNode.Msgs, &x.InterNode.Bytes, &x.InterNode.Msgs}
}

func encodeProcessSample(dst []byte, x *store.ProcessSample) []byte {
	dst = append(dst, formatSample)
	dst = binary.AppendUvarint(dst, uint64(max(x.Span, 0)))
	for _, f := range []float64{x.CPUUser, x.CPUSystem, x.MPI} {
		dst = binary.AppendUvarint(dst, math.Float64bits(f))
	}
	for _, v := range sampleUints(x) {
		dst = binary.AppendUvarint(dst, *v)
	}
	return dst
}

func decodeProcessSample(b []byte) (store.ProcessSample, error) {
	var x store.ProcessSample
	if len(b) == 0 || b[0] != formatSample {
		return x, errors.New("unknown sample format")
	}
	b = b[1:]
	next := func() (uint64, error) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, errTruncated
		}
		b = b[n:]
		return v, nil
	}
	span, err := next()
	if err != nil {
		return x, err
	}
	x.Span = time.Duration(span)
	for _, f := range []*float64{&x.CPUUser, &x.CPUSystem, &x.MPI} {
		v, err := next()
		if err != nil {
			return x, err
		}
		*f = math.Float64frombits(v)
	}
	for _, p := range sampleUints(&x) {
		if *p, err = next(); err != nil {
			return x, err
		}
	}
	return x, nil
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
		rows, err := tx.QueryContext(ctx, `SELECT id FROM jobs WHERE state = ? AND end_ns < ? LIMIT ?`, store.JobFinished, ns(before), s.opt.PruneChunk)
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
			if _, err := tx.ExecContext(ctx, `DELETE FROM jobs WHERE id = ?`, id); err != nil {
				return 0, fmt.Errorf("job %s: %w", id, err)
			}
			done++
			budget--
		}
		return done, nil
	})
}
