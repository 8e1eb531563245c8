package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/codec"
	"github.com/netloom/netloom/internal/store/sqlstore"
)

// AddLinkJobSamples implements store.Store.
func (s *Store) AddLinkJobSamples(ctx context.Context, samples []store.LinkJobSample) error {
	if len(samples) == 0 {
		return nil
	}
	if err := sqlstore.CheckLinkJobSamples(samples); err != nil {
		return err
	}
	return s.writeTx(ctx, fmt.Sprintf("add %d link attribution samples", len(samples)), func(tx *sql.Tx) error {
		ins, err := tx.PrepareContext(ctx, `INSERT INTO link_job_samples(guid, port, time_ns, job, span_ns, bytes) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT(guid, port, time_ns, job) DO UPDATE SET bytes = excluded.bytes, span_ns = excluded.span_ns`)
		if err != nil {
			return err
		}
		defer ins.Close()
		tot, err := tx.PrepareContext(ctx, `INSERT INTO job_link_totals(job, guid, port, bytes) VALUES (?, ?, ?, ?)
			ON CONFLICT(job, guid, port) DO UPDATE SET bytes = bytes + excluded.bytes`)
		if err != nil {
			return err
		}
		defer tot.Close()
		for i := range samples {
			x := &samples[i]
			g := guidInt(x.Port.GUID)
			if _, err := ins.ExecContext(ctx, g, x.Port.Port, codec.NS(x.Time), x.Job, int64(max(x.Span, 0)), int64(x.Bytes)); err != nil {
				return fmt.Errorf("job %s port %s: %w", x.Job, x.Port, err)
			}
			if _, err := tot.ExecContext(ctx, x.Job, g, x.Port.Port, int64(x.Bytes)); err != nil {
				return fmt.Errorf("job %s port %s totals: %w", x.Job, x.Port, err)
			}
		}
		return nil
	})
}

// LinkJobs implements store.Store.
func (s *Store) LinkJobs(ctx context.Context, ports []fabric.PortRef, from, to time.Time) ([]store.LinkJobBytes, error) {
	out := []store.LinkJobBytes{}
	if ports == nil {
		rows, err := s.r.QueryContext(ctx, `SELECT guid, port, job, SUM(bytes) FROM link_job_samples
			WHERE time_ns BETWEEN ? AND ? GROUP BY guid, port, job`, codec.LowerBound(from), codec.UpperBound(to))
		if err != nil {
			return nil, fmt.Errorf("link attribution: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var g, b int64
			var x store.LinkJobBytes
			if err := rows.Scan(&g, &x.Port.Port, &x.Job, &b); err != nil {
				return nil, fmt.Errorf("link attribution: %w", err)
			}
			x.Port.GUID, x.Bytes = fabric.GUID(g), uint64(b)
			out = append(out, x)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("link attribution: %w", err)
		}
		return out, nil
	}
	for _, p := range ports {
		rows, err := s.r.QueryContext(ctx, `SELECT job, SUM(bytes) FROM link_job_samples
			WHERE guid = ? AND port = ? AND time_ns BETWEEN ? AND ? GROUP BY job`,
			guidInt(p.GUID), p.Port, codec.LowerBound(from), codec.UpperBound(to))
		if err != nil {
			return nil, fmt.Errorf("link attribution of port %s: %w", p, err)
		}
		for rows.Next() {
			x := store.LinkJobBytes{Port: p}
			var b int64
			if err := rows.Scan(&x.Job, &b); err != nil {
				rows.Close()
				return nil, fmt.Errorf("link attribution of port %s: %w", p, err)
			}
			x.Bytes = uint64(b)
			out = append(out, x)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("link attribution of port %s: %w", p, err)
		}
	}
	return out, nil
}

// JobLinks implements store.Store.
func (s *Store) JobLinks(ctx context.Context, job string, from, to time.Time, limit int) ([]store.LinkJobBytes, error) {
	lim := int64(limit)
	if lim <= 0 {
		lim = -1
	}
	var rows *sql.Rows
	var err error
	if from.IsZero() && to.IsZero() {
		rows, err = s.r.QueryContext(ctx, `SELECT guid, port, bytes FROM job_link_totals WHERE job = ?
			ORDER BY bytes DESC, guid, port LIMIT ?`, job, lim)
	} else {
		rows, err = s.r.QueryContext(ctx, `SELECT guid, port, SUM(bytes) AS b FROM link_job_samples
			WHERE job = ? AND time_ns BETWEEN ? AND ? GROUP BY guid, port ORDER BY b DESC, guid, port LIMIT ?`,
			job, codec.LowerBound(from), codec.UpperBound(to), lim)
	}
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

// JobSummary implements store.Store.
func (s *Store) JobSummary(ctx context.Context, id string) (*store.JobSummary, error) {
	var b []byte
	err := s.r.QueryRowContext(ctx, `SELECT summary FROM jobs WHERE id = ?`, id).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
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

// pruneLinkJobSamplesStep deletes a chunk of attribution samples older
// than before.
func (s *Store) pruneLinkJobSamplesStep(ctx context.Context, before time.Time) (bool, error) {
	if before.IsZero() {
		return false, nil
	}
	what := "prune link attribution before " + before.Format(time.RFC3339)
	return s.deleteStep(ctx, what, func(tx *sql.Tx) (int64, error) {
		res, err := tx.ExecContext(ctx, `DELETE FROM link_job_samples WHERE (guid, port, time_ns, job) IN
			(SELECT guid, port, time_ns, job FROM link_job_samples WHERE time_ns < ? LIMIT ?)`, codec.NS(before), s.opt.PruneChunk)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	})
}
