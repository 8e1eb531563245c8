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
	"github.com/netloom/netloom/internal/store/codec"
	"github.com/netloom/netloom/internal/store/sqlstore"
)

// Prune implements store.Store: it repeats PruneStep until nothing is
// left to do.
func (s *Store) Prune(ctx context.Context, r store.Retention) error {
	for {
		more, err := s.PruneStep(ctx, r)
		if err != nil || !more {
			return err
		}
	}
}

// PruneStep implements store.Store. Each call runs one transaction of the
// first phase that has work: finished jobs, then port samples and process
// samples level by level (raw into 5-minute rollups into 1-hour rollups,
// see rollup.go), link attribution, events, topology, and last handing
// free pages back to the file system. Each transaction touches at most
// PruneChunk, RollupPortRows or RollupProcessRows rows, so the writer is
// never held for long.
func (s *Store) PruneStep(ctx context.Context, r store.Retention) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("prune: %w", err)
	}
	ports := sqlstore.NewCutoffs(r.Samples, r.PortRollups5m, r.PortRollups1h)
	procs := sqlstore.NewCutoffs(r.ProcessSamples, r.ProcessRollups5m, r.ProcessRollups1h)
	steps := []func() (bool, error){
		func() (bool, error) { return s.pruneJobsStep(ctx, r.Jobs) },
	}
	for l := sqlstore.LevelRaw; l < sqlstore.NumLevels; l++ {
		steps = append(steps, func() (bool, error) {
			return s.foldStep(ctx, sqlstore.FoldWhat("port samples", ports, l), ports[l], func(tx sqlstore.Tx) (bool, error) {
				return s.FoldPortsStep(ctx, tx, ports, l)
			})
		})
	}
	for l := sqlstore.LevelRaw; l < sqlstore.NumLevels; l++ {
		steps = append(steps, func() (bool, error) {
			return s.foldStep(ctx, sqlstore.FoldWhat("process samples", procs, l), procs[l], func(tx sqlstore.Tx) (bool, error) {
				return s.FoldProcessesStep(ctx, tx, procs, l)
			})
		})
	}
	steps = append(steps,
		func() (bool, error) { return s.pruneLinkJobSamplesStep(ctx, r.LinkJobSamples) },
		func() (bool, error) { return s.pruneEventsStep(ctx, r.Events) },
		func() (bool, error) { return s.pruneTopologyStep(ctx, r.Topology) },
		func() (bool, error) { return s.vacuumStep(ctx) },
	)
	for i, step := range steps {
		did, err := step()
		if err != nil || !did {
			if err != nil {
				return false, err
			}
			continue
		}
		if i < len(steps)-1 {
			// The step's pages go from the log into the file now, while
			// they are few. Left in the log, a sweep's commit would
			// copy them later, when SQLite's auto-checkpoint fires,
			// together with hundreds of others scattered over the file:
			// measured, that made single commits take up to two seconds.
			s.checkpoint(ctx)
		}
		return true, nil
	}
	return false, nil
}

// checkpoint copies what the log holds into the database file, without
// waiting for readers. A failure is left to the next checkpoint.
func (s *Store) checkpoint(ctx context.Context) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	var busy, frames, copied int
	_ = s.w.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied)
}

// foldStep runs one fold step in a write transaction, unless its
// cutoff keeps everything.
func (s *Store) foldStep(ctx context.Context, what string, cutoff int64, step func(tx sqlstore.Tx) (bool, error)) (bool, error) {
	if cutoff == sqlstore.KeepAll {
		return false, nil
	}
	found := false
	err := s.Write(ctx, what, nil, func(tx sqlstore.Tx) error {
		var err error
		found, err = step(tx)
		return err
	})
	return found, err
}

// deleteStep runs one chunked delete in a write transaction and reports
// whether it deleted anything.
func (s *Store) deleteStep(ctx context.Context, what string, step func(tx *sql.Tx) (int64, error)) (bool, error) {
	var n int64
	err := s.writeTx(ctx, what, func(tx *sql.Tx) error {
		var err error
		n, err = step(tx)
		return err
	})
	return n > 0, err
}

func (s *Store) pruneEventsStep(ctx context.Context, before time.Time) (bool, error) {
	if before.IsZero() {
		return false, nil
	}
	return s.deleteStep(ctx, "prune events before "+before.Format(time.RFC3339), func(tx *sql.Tx) (int64, error) {
		res, err := tx.ExecContext(ctx, `DELETE FROM events WHERE id IN (SELECT id FROM events WHERE time_ns < ? LIMIT ?)`,
			codec.NS(before), s.opt.PruneChunk)
		if err != nil {
			return 0, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, err
		}
		_, err = tx.ExecContext(ctx, `UPDATE totals SET value = value - ? WHERE name = 'events'`, n)
		return n, err
	})
}

// pruneTopologyStep deletes the versions that ended before the limit; the
// one in force at the limit stays, so TopologyAt(limit) still answers.
func (s *Store) pruneTopologyStep(ctx context.Context, before time.Time) (bool, error) {
	if before.IsZero() {
		return false, nil
	}
	at := codec.NS(before)
	return s.deleteStep(ctx, "prune topology before "+before.Format(time.RFC3339), func(tx *sql.Tx) (int64, error) {
		res, err := tx.ExecContext(ctx, `DELETE FROM topology_versions WHERE until_ns IS NOT NULL AND until_ns <= ?`, at)
		if err != nil {
			return 0, fmt.Errorf("versions: %w", err)
		}
		a, err := res.RowsAffected()
		if err != nil {
			return 0, err
		}
		res, err = tx.ExecContext(ctx, `DELETE FROM forwarding_tables WHERE from_ns <
			(SELECT MAX(g.from_ns) FROM forwarding_tables g WHERE g.fabric = forwarding_tables.fabric AND g.from_ns <= ?)`, at)
		if err != nil {
			return 0, fmt.Errorf("forwarding tables: %w", err)
		}
		b, err := res.RowsAffected()
		return a + b, err
	})
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
