package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/codec"
)

// AddLinkJobSamples implements store.Store: the samples replace those of
// the same interval, the per-job totals add up.
func (s *Store) AddLinkJobSamples(ctx context.Context, samples []store.LinkJobSample) error {
	if len(samples) == 0 {
		return nil
	}
	if err := CheckLinkJobSamples(samples); err != nil {
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
	slices.Sort(times)
	rows := make([][]any, 0, len(last))
	for k, i := range last {
		x := &samples[i]
		rows = append(rows, []any{int64(k.port.GUID), k.port.Port, k.t, k.job, int64(max(x.Span, 0)), int64(x.Bytes)})
	}
	trows := make([][]any, 0, len(totals))
	for k, b := range totals {
		trows = append(trows, []any{k.job, int64(k.port.GUID), k.port.Port, b})
	}
	need := []Need{{"link_job_samples", times}}
	return s.Engine.Write(ctx, fmt.Sprintf("add %d link attribution samples", len(samples)), need, func(tx Tx) error {
		if err := tx.Upsert(ctx, "link_job_samples", []string{"guid", "port", "time_ns", "job", "span_ns", "bytes"},
			[]string{"guid", "port", "time_ns", "job"}, Excluded("span_ns", "bytes"), rows); err != nil {
			return err
		}
		return tx.Upsert(ctx, "job_link_totals", []string{"job", "guid", "port", "bytes"},
			[]string{"job", "guid", "port"}, "bytes = job_link_totals.bytes + excluded.bytes", trows)
	})
}

// LinkJobs implements store.Store.
func (s *Store) LinkJobs(ctx context.Context, ports []fabric.PortRef, from, to time.Time) ([]store.LinkJobBytes, error) {
	out := []store.LinkJobBytes{}
	lo, hi := codec.LowerBound(from), codec.UpperBound(to)
	add := func(what string, q string, args ...any) error {
		rows, err := s.Engine.Reader().Query(ctx, q, args...)
		if err != nil {
			return fmt.Errorf("link attribution%s: %w", what, err)
		}
		defer rows.Close()
		for rows.Next() {
			var g, b int64
			var x store.LinkJobBytes
			if err := rows.Scan(&g, &x.Port.Port, &x.Job, &b); err != nil {
				return fmt.Errorf("link attribution%s: %w", what, err)
			}
			x.Port.GUID, x.Bytes = fabric.GUID(g), uint64(b)
			out = append(out, x)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("link attribution%s: %w", what, err)
		}
		return nil
	}
	var err error
	switch {
	case ports == nil:
		err = add("", `SELECT guid, port, job, CAST(sum(bytes) AS BIGINT) FROM link_job_samples
			WHERE time_ns BETWEEN ? AND ? GROUP BY guid, port, job`, lo, hi)
	case s.Dialect.LinkJobsOfPorts != "":
		gs, ps := make([]int64, len(ports)), make([]int64, len(ports))
		for i, p := range ports {
			gs[i], ps[i] = int64(p.GUID), int64(p.Port)
		}
		err = add("", s.Dialect.LinkJobsOfPorts, gs, ps, lo, hi)
	default:
		for _, p := range ports {
			if err = add(" of port "+p.String(), `SELECT guid, port, job, CAST(sum(bytes) AS BIGINT) FROM link_job_samples
				WHERE guid = ? AND port = ? AND time_ns BETWEEN ? AND ? GROUP BY guid, port, job`, int64(p.GUID), p.Port, lo, hi); err != nil {
				break
			}
		}
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// JobLinkCount implements store.Store.
func (s *Store) JobLinkCount(ctx context.Context, job string, from, to time.Time) (int, error) {
	q, args := `SELECT count(*) FROM job_link_totals WHERE job = ?`, []any{job}
	if !from.IsZero() || !to.IsZero() {
		q, args = `SELECT count(*) FROM (SELECT DISTINCT guid, port FROM link_job_samples WHERE job = ? AND time_ns BETWEEN ? AND ?) d`,
			[]any{job, codec.LowerBound(from), codec.UpperBound(to)}
	}
	var n int64
	if _, err := s.Engine.Reader().QueryRow(ctx, q, args, &n); err != nil {
		return 0, fmt.Errorf("links of job %q: %w", job, err)
	}
	return int(n), nil
}

// JobLinks implements store.Store.
func (s *Store) JobLinks(ctx context.Context, job string, from, to time.Time, limit int) ([]store.LinkJobBytes, error) {
	lim := s.Dialect.NoLimit
	if limit > 0 {
		lim = limit
	}
	q, args := `SELECT guid, port, bytes FROM job_link_totals WHERE job = ?
		ORDER BY bytes DESC, guid, port LIMIT ?`, []any{job, lim}
	if !from.IsZero() || !to.IsZero() {
		q, args = `SELECT guid, port, CAST(sum(bytes) AS BIGINT) AS b FROM link_job_samples
			WHERE job = ? AND time_ns BETWEEN ? AND ? GROUP BY guid, port ORDER BY b DESC, guid, port LIMIT ?`,
			[]any{job, codec.LowerBound(from), codec.UpperBound(to), lim}
	}
	rows, err := s.Engine.Reader().Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("links of job %q: %w", job, err)
	}
	defer rows.Close()
	out := []store.LinkJobBytes{}
	for rows.Next() {
		var g, b int64
		x := store.LinkJobBytes{Job: job}
		if err := rows.Scan(&g, &x.Port.Port, &b); err != nil {
			return nil, fmt.Errorf("links of job %q: %w", job, err)
		}
		x.Port.GUID, x.Bytes = fabric.GUID(g), uint64(b)
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("links of job %q: %w", job, err)
	}
	return out, nil
}
