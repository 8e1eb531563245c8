package sqlite

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/sqlstore"
)

// DropExpired implements sqlstore.Pruner: SQLite has no partitions.
func (s *Store) DropExpired(context.Context, sqlstore.Tx, string, sqlstore.Cutoffs) (bool, error) {
	return false, nil
}

// AfterPruneStep implements sqlstore.Pruner: the step's pages go from the
// log into the file now, while they are few. Left in the log, a sweep's
// commit would copy them later, when SQLite's auto-checkpoint fires,
// together with hundreds of others scattered over the file: measured,
// that made single commits take up to two seconds.
func (s *Store) AfterPruneStep(ctx context.Context) { s.checkpoint(ctx) }

// LastPruneStep implements sqlstore.Pruner: it hands free pages back to
// the file system (vacuumStep).
func (s *Store) LastPruneStep(ctx context.Context) (bool, error) { return s.vacuumStep(ctx) }

// checkpoint copies what the log holds into the database file, without
// waiting for readers. A failure is left to the next checkpoint.
func (s *Store) checkpoint(ctx context.Context) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	var busy, frames, copied int
	_ = s.w.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied)
}

// vacuumStep hands up to vacuumPages free pages back to the file system
// (the file only shrinks when auto_vacuum is incremental, as for
// databases this code created). It reports whether it freed any.
func (s *Store) vacuumStep(ctx context.Context) (bool, error) {
	var mode int
	if err := s.w.QueryRowContext(ctx, `PRAGMA auto_vacuum`).Scan(&mode); err != nil {
		return false, fmt.Errorf("prune: read auto_vacuum: %w", err)
	}
	if mode != 2 {
		return false, nil
	}
	before, err := s.freePages(ctx)
	if err != nil || before == 0 {
		return false, err
	}
	if err := s.incrementalVacuum(ctx, vacuumPages); err != nil {
		return false, fmt.Errorf("prune: incremental vacuum: %w", err)
	}
	after, err := s.freePages(ctx)
	return after < before, err
}

// vacuumPages bounds one vacuum step: 4 MiB of 16 KiB pages.
const vacuumPages = 256

func (s *Store) freePages(ctx context.Context) (int64, error) {
	var free int64
	if err := s.w.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&free); err != nil {
		return 0, fmt.Errorf("prune: read free pages: %w", err)
	}
	return free, nil
}

// incrementalVacuum frees up to pages pages. The pragma frees one page per
// step, so its rows are drained rather than executed once.
func (s *Store) incrementalVacuum(ctx context.Context, pages int) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	rows, err := s.w.QueryContext(ctx, fmt.Sprintf(`PRAGMA incremental_vacuum(%d)`, pages))
	if err != nil {
		return err
	}
	for rows.Next() {
	}
	rows.Close()
	return rows.Err()
}

// Stats implements store.Store. Bytes counts the database file and its
// write-ahead log.
func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	var st store.Stats
	for _, p := range []string{s.path, s.path + "-wal"} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return st, fmt.Errorf("stats: %w", err)
		}
		st.Bytes += fi.Size()
	}
	err := s.r.QueryRowContext(ctx, `SELECT
		(SELECT value FROM totals WHERE name = 'port_samples'),
		(SELECT value FROM totals WHERE name = 'port_rollups'),
		(SELECT value FROM totals WHERE name = 'events'),
		(SELECT COUNT(*) FROM topology_versions),
		(SELECT COUNT(*) FROM jobs)`).Scan(&st.PortSamples, &st.PortRollups, &st.Events, &st.Versions, &st.Jobs)
	if err != nil {
		return st, fmt.Errorf("stats of %s: %w", s.path, err)
	}
	return st, nil
}
