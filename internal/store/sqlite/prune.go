package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/netloom/netloom/internal/store"
)

// Prune implements store.Store. It deletes in transactions of at most
// PruneChunk rows and lets other writes in between, so a large prune never
// stalls the sweep writer for long; then it returns free pages to the file
// system the same way.
func (s *Store) Prune(ctx context.Context, r store.Retention) error {
	if !r.Samples.IsZero() {
		if err := s.pruneSamples(ctx, ns(r.Samples)); err != nil {
			return err
		}
	}
	if !r.Samples.IsZero() {
		if err := s.pruneJobSamples(ctx, r.Samples); err != nil {
			return err
		}
		if err := s.pruneLinkJobSamples(ctx, r.Samples); err != nil {
			return err
		}
	}
	if !r.Jobs.IsZero() {
		if err := s.pruneJobs(ctx, r.Jobs); err != nil {
			return err
		}
	}
	if !r.Events.IsZero() {
		if err := s.pruneChunks(ctx, "prune events before "+r.Events.Format(time.RFC3339), func(tx *sql.Tx) (int64, error) {
			res, err := tx.ExecContext(ctx, `DELETE FROM events WHERE id IN (SELECT id FROM events WHERE time_ns < ? LIMIT ?)`,
				ns(r.Events), s.opt.PruneChunk)
			if err != nil {
				return 0, err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return 0, err
			}
			_, err = tx.ExecContext(ctx, `UPDATE totals SET value = value - ? WHERE name = 'events'`, n)
			return n, err
		}); err != nil {
			return err
		}
	}
	if !r.Topology.IsZero() {
		// Versions that ended before the limit go; the one in force at the
		// limit stays, so TopologyAt(limit) still answers.
		at := ns(r.Topology)
		if err := s.writeTx(ctx, "prune topology before "+r.Topology.Format(time.RFC3339), func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `DELETE FROM topology_versions WHERE until_ns IS NOT NULL AND until_ns <= ?`, at); err != nil {
				return fmt.Errorf("versions: %w", err)
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM forwarding_tables WHERE from_ns <
				(SELECT MAX(from_ns) FROM forwarding_tables WHERE from_ns <= ?)`, at); err != nil {
				return fmt.Errorf("forwarding tables: %w", err)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return s.vacuum(ctx)
}

func (s *Store) pruneSamples(ctx context.Context, before int64) error {
	what := "prune port samples before " + fromNS(before).Format(time.RFC3339)
	return s.pruneChunks(ctx, what, func(tx *sql.Tx) (int64, error) {
		rows, err := tx.QueryContext(ctx, `SELECT id, ports FROM port_samples WHERE time_ns < ? ORDER BY time_ns LIMIT ?`, before, s.opt.PruneChunk)
		if err != nil {
			return 0, err
		}
		var ids []int64
		var samples int64
		for rows.Next() {
			var id, n int64
			if err := rows.Scan(&id, &n); err != nil {
				rows.Close()
				return 0, err
			}
			ids = append(ids, id)
			samples += n
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, err
		}
		del, err := tx.PrepareContext(ctx, `DELETE FROM port_samples WHERE id = ?`)
		if err != nil {
			return 0, err
		}
		defer del.Close()
		for _, id := range ids {
			if _, err := del.ExecContext(ctx, id); err != nil {
				return 0, fmt.Errorf("row %d: %w", id, err)
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE totals SET value = value - ? WHERE name = 'port_samples'`, samples)
		return int64(len(ids)), err
	})
}

// pruneChunks repeats step, each in its own write transaction, until it
// deletes fewer rows than a chunk.
func (s *Store) pruneChunks(ctx context.Context, what string, step func(tx *sql.Tx) (int64, error)) error {
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		var n int64
		if err := s.writeTx(ctx, what, func(tx *sql.Tx) error {
			var err error
			n, err = step(tx)
			return err
		}); err != nil {
			return err
		}
		if n < int64(s.opt.PruneChunk) {
			return nil
		}
	}
}

// vacuum hands free pages back in bounded steps (the file only shrinks
// when auto_vacuum is incremental, as for databases this code created).
func (s *Store) vacuum(ctx context.Context) error {
	var mode int
	if err := s.w.QueryRowContext(ctx, `PRAGMA auto_vacuum`).Scan(&mode); err != nil {
		return fmt.Errorf("prune: read auto_vacuum: %w", err)
	}
	if mode != 2 {
		return nil
	}
	prev := int64(-1)
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("prune: vacuum: %w", err)
		}
		var free int64
		if err := s.w.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&free); err != nil {
			return fmt.Errorf("prune: read free pages: %w", err)
		}
		if free == 0 || (prev >= 0 && free >= prev) {
			return nil
		}
		prev = free
		if err := s.incrementalVacuum(ctx, 1024); err != nil {
			return fmt.Errorf("prune: incremental vacuum: %w", err)
		}
	}
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
		(SELECT value FROM totals WHERE name = 'events'),
		(SELECT COUNT(*) FROM topology_versions),
		(SELECT COUNT(*) FROM jobs)`).Scan(&st.PortSamples, &st.Events, &st.Versions, &st.Jobs)
	if err != nil {
		return st, fmt.Errorf("stats of %s: %w", s.path, err)
	}
	return st, nil
}
