package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/netloom/netloom/internal/store"
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
