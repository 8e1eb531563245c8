package postgres

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/codec"
	"github.com/netloom/netloom/internal/store/sqlstore"
)

// AddLinkJobSamples implements store.Store: the samples replace those of
// the same interval, the per-job totals add up.
func (s *Store) AddLinkJobSamples(ctx context.Context, samples []store.LinkJobSample) error {
	if len(samples) == 0 {
		return nil
	}
	if err := sqlstore.CheckLinkJobSamples(samples); err != nil {
		return err
	}
	type key struct {
		port fabric.PortRef
		t    int64
		job  string
	}
	type total struct {
		job  string
		port fabric.PortRef
	}
	last := map[key]int{}
	totals := map[total]int64{}
	times := make([]int64, 0, len(samples))
	for i := range samples {
		x := &samples[i]
		t := codec.NS(x.Time)
		last[key{x.Port, t, x.Job}] = i
		totals[total{x.Job, x.Port}] += int64(x.Bytes)
		times = append(times, t)
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	rows := make([][]any, 0, len(last))
	for k, i := range last {
		x := &samples[i]
		rows = append(rows, []any{guidInt(k.port.GUID), int16(k.port.Port), k.t, k.job, int64(max(x.Span, 0)), int64(x.Bytes)})
	}
	trows := make([][]any, 0, len(totals))
	for k, b := range totals {
		trows = append(trows, []any{k.job, guidInt(k.port.GUID), int16(k.port.Port), b})
	}
	need := []partNeed{{tableLinkJobSamples, times}}
	return s.writeTx(ctx, fmt.Sprintf("add %d link attribution samples", len(samples)), need, func(tx pgx.Tx) error {
		if err := copyUpsert(ctx, tx, tableLinkJobSamples, []string{"guid", "port", "time_ns", "job", "span_ns", "bytes"},
			[]string{"guid", "port", "time_ns", "job"}, sqlstore.Excluded("span_ns", "bytes"), rows); err != nil {
			return err
		}
		return copyUpsert(ctx, tx, "job_link_totals", []string{"job", "guid", "port", "bytes"},
			[]string{"job", "guid", "port"}, "bytes = job_link_totals.bytes + excluded.bytes", trows)
	})
}

// LinkJobs implements store.Store.
func (s *Store) LinkJobs(ctx context.Context, ports []fabric.PortRef, from, to time.Time) ([]store.LinkJobBytes, error) {
	q, args := `SELECT guid, port, job, sum(bytes)::bigint FROM link_job_samples
		WHERE time_ns BETWEEN $1 AND $2 GROUP BY guid, port, job`, []any{codec.LowerBound(from), codec.UpperBound(to)}
	if ports != nil {
		gs, ps := make([]int64, len(ports)), make([]int16, len(ports))
		for i, p := range ports {
			gs[i], ps[i] = guidInt(p.GUID), int16(p.Port)
		}
		q = `SELECT l.guid, l.port, l.job, sum(l.bytes)::bigint FROM link_job_samples l
			JOIN unnest($3::bigint[], $4::smallint[]) AS p(guid, port) ON p.guid = l.guid AND p.port = l.port
			WHERE l.time_ns BETWEEN $1 AND $2 GROUP BY l.guid, l.port, l.job`
		args = append(args, gs, ps)
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("link attribution: %w", err)
	}
	defer rows.Close()
	out := []store.LinkJobBytes{}
	for rows.Next() {
		var g, b int64
		var port int16
		var x store.LinkJobBytes
		if err := rows.Scan(&g, &port, &x.Job, &b); err != nil {
			return nil, fmt.Errorf("link attribution: %w", err)
		}
		x.Port, x.Bytes = fabric.PortRef{GUID: fabric.GUID(g), Port: int(port)}, uint64(b)
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("link attribution: %w", err)
	}
	return out, nil
}

// JobLinks implements store.Store.
func (s *Store) JobLinks(ctx context.Context, job string, from, to time.Time, limit int) ([]store.LinkJobBytes, error) {
	var lim any // NULL: no limit
	if limit > 0 {
		lim = limit
	}
	q, args := `SELECT guid, port, bytes FROM job_link_totals WHERE job = $1
		ORDER BY bytes DESC, guid, port LIMIT $2`, []any{job, lim}
	if !from.IsZero() || !to.IsZero() {
		q, args = `SELECT guid, port, sum(bytes)::bigint AS b FROM link_job_samples
			WHERE job = $1 AND time_ns BETWEEN $2 AND $3 GROUP BY guid, port ORDER BY b DESC, guid, port LIMIT $4`,
			[]any{job, codec.LowerBound(from), codec.UpperBound(to), lim}
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("links of job %q: %w", job, err)
	}
	defer rows.Close()
	out := []store.LinkJobBytes{}
	for rows.Next() {
		var g, b int64
		var port int16
		if err := rows.Scan(&g, &port, &b); err != nil {
			return nil, fmt.Errorf("links of job %q: %w", job, err)
		}
		out = append(out, store.LinkJobBytes{Job: job, Port: fabric.PortRef{GUID: fabric.GUID(g), Port: int(port)}, Bytes: uint64(b)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("links of job %q: %w", job, err)
	}
	return out, nil
}
