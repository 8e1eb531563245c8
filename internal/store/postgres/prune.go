package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

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
// first phase that has work: finished jobs; port samples (dropping
// expired partitions, then folding raw rows into 5-minute rollups into
// 1-hour rollups, see sqlstore); the same for process samples; link
// attribution (partitions, then rows); events; topology. Daemons sharing
// the database take turns under an advisory lock.
func (s *Store) PruneStep(ctx context.Context, r store.Retention) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("prune: %w", err)
	}
	ports := sqlstore.NewCutoffs(r.Samples, r.PortRollups5m, r.PortRollups1h)
	procs := sqlstore.NewCutoffs(r.ProcessSamples, r.ProcessRollups5m, r.ProcessRollups1h)
	type step struct {
		what string
		do   func(tx pgx.Tx) (bool, error)
	}
	steps := []step{
		{"prune jobs ended before " + r.Jobs.Format(time.RFC3339), func(tx pgx.Tx) (bool, error) { return s.pruneJobsStep(ctx, tx, r.Jobs) }},
		{"drop expired port sample partitions", func(tx pgx.Tx) (bool, error) { return s.dropRawPartition(ctx, tx, tablePortSamples, ports) }},
	}
	for l := sqlstore.LevelRaw; l < sqlstore.NumLevels; l++ {
		steps = append(steps, step{fmt.Sprintf("roll up port samples (%s)", sqlstore.LevelName(l)), func(tx pgx.Tx) (bool, error) {
			return s.FoldPortsStep(ctx, pgTx{tx}, ports, l)
		}})
	}
	steps = append(steps, step{"drop expired process sample partitions", func(tx pgx.Tx) (bool, error) {
		return s.dropRawPartition(ctx, tx, tableJobSamples, procs)
	}})
	for l := sqlstore.LevelRaw; l < sqlstore.NumLevels; l++ {
		steps = append(steps, step{fmt.Sprintf("roll up process samples (%s)", sqlstore.LevelName(l)), func(tx pgx.Tx) (bool, error) {
			return s.FoldProcessesStep(ctx, pgTx{tx}, procs, l)
		}})
	}
	steps = append(steps,
		step{"prune link attribution", func(tx pgx.Tx) (bool, error) { return s.pruneLinkJobSamplesStep(ctx, tx, r.LinkJobSamples) }},
		step{"prune events", func(tx pgx.Tx) (bool, error) { return s.pruneEventsStep(ctx, tx, r.Events) }},
		step{"prune topology", func(tx pgx.Tx) (bool, error) { return s.pruneTopologyStep(ctx, tx, r.Topology) }},
	)
	for _, st := range steps {
		did := false
		err := s.writeTx(ctx, st.what, nil, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(pruneLock)); err != nil {
				return err
			}
			var err error
			did, err = st.do(tx)
			return err
		})
		if err != nil {
			return false, err
		}
		if did {
			return true, nil
		}
	}
	return false, nil
}

// dropRawPartition drops the oldest partition of a raw sample table whose
// whole range has expired, when that takes no folding: it is empty (its
// rows were folded into rollups), or no rollup keeps any of it. Otherwise
// the fold steps go first. It reports whether it dropped one.
func (s *Store) dropRawPartition(ctx context.Context, tx pgx.Tx, parent string, c sqlstore.Cutoffs) (bool, error) {
	if c[sqlstore.LevelRaw] == sqlstore.KeepAll {
		return false, nil
	}
	p, ok, err := oldestPartition(ctx, tx, parent, c[sqlstore.LevelRaw])
	if err != nil || !ok {
		return false, err
	}
	var full bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+pgx.Identifier{parent}.Sanitize()+` WHERE time_ns >= $1 AND time_ns < $2)`, p.lo, p.hi).Scan(&full); err != nil {
		return false, err
	}
	if full {
		if _, _, kept := c.Target(sqlstore.LevelRaw, p.hi-1); kept {
			return false, nil
		}
		if parent == tablePortSamples {
			var n int64
			if err := tx.QueryRow(ctx, `SELECT coalesce(sum(ports), 0)::bigint FROM `+pgx.Identifier{p.name}.Sanitize()).Scan(&n); err != nil {
				return false, err
			}
			if _, err := tx.Exec(ctx, `UPDATE totals SET value = value - $1 WHERE name = 'port_samples'`, n); err != nil {
				return false, err
			}
		}
	}
	return true, s.dropPartition(ctx, tx, parent, p)
}

// pruneLinkJobSamplesStep drops a partition of attribution samples that
// has expired whole, else deletes a chunk of expired rows.
func (s *Store) pruneLinkJobSamplesStep(ctx context.Context, tx pgx.Tx, before time.Time) (bool, error) {
	if before.IsZero() {
		return false, nil
	}
	p, ok, err := oldestPartition(ctx, tx, tableLinkJobSamples, codec.NS(before))
	if err != nil {
		return false, err
	}
	if ok {
		return true, s.dropPartition(ctx, tx, tableLinkJobSamples, p)
	}
	tag, err := tx.Exec(ctx, `DELETE FROM link_job_samples WHERE (guid, port, time_ns, job) IN
		(SELECT guid, port, time_ns, job FROM link_job_samples WHERE time_ns < $1 LIMIT $2)`, codec.NS(before), s.opt.PruneChunk)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() > 0, nil
}

func (s *Store) pruneEventsStep(ctx context.Context, tx pgx.Tx, before time.Time) (bool, error) {
	if before.IsZero() {
		return false, nil
	}
	tag, err := tx.Exec(ctx, `DELETE FROM events WHERE id IN (SELECT id FROM events WHERE time_ns < $1 LIMIT $2)`, codec.NS(before), s.opt.PruneChunk)
	if err != nil {
		return false, err
	}
	n := tag.RowsAffected()
	if n == 0 {
		return false, nil
	}
	_, err = tx.Exec(ctx, `UPDATE totals SET value = value - $1 WHERE name = 'events'`, n)
	return true, err
}

// pruneTopologyStep deletes the versions that ended before the limit; the
// one in force at the limit stays, so TopologyAt(limit) still answers.
func (s *Store) pruneTopologyStep(ctx context.Context, tx pgx.Tx, before time.Time) (bool, error) {
	if before.IsZero() {
		return false, nil
	}
	at := codec.NS(before)
	a, err := tx.Exec(ctx, `DELETE FROM topology_versions WHERE until_ns IS NOT NULL AND until_ns <= $1`, at)
	if err != nil {
		return false, fmt.Errorf("versions: %w", err)
	}
	b, err := tx.Exec(ctx, `DELETE FROM forwarding_tables f WHERE from_ns <
		(SELECT max(g.from_ns) FROM forwarding_tables g WHERE g.fabric = f.fabric AND g.from_ns <= $1)`, at)
	if err != nil {
		return false, fmt.Errorf("forwarding tables: %w", err)
	}
	return a.RowsAffected()+b.RowsAffected() > 0, nil
}
