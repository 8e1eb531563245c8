package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/codec"
)

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
