package sqlstore

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/codec"
)

// Pruner is what an engine adds to PruneStep.
type Pruner interface {
	// DropExpired does one step of deleting table's rows that expired
	// before c's raw cutoff wholesale (PostgreSQL drops a partition),
	// where no rollup keeps them or they were folded, in tx. It reports
	// whether it dropped any; an engine without partitions never does.
	DropExpired(ctx context.Context, tx Tx, table string, c Cutoffs) (bool, error)
	// AfterPruneStep runs after a transaction of PruneStep that did
	// something.
	AfterPruneStep(ctx context.Context)
	// LastPruneStep runs, outside a transaction, when every other step
	// is done; it reports whether it did anything.
	LastPruneStep(ctx context.Context) (bool, error)
}

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

// pruneStep is one phase of pruning: do runs one transaction of it and
// reports whether there was anything to do; skip says there is nothing
// (its retention keeps all) without a transaction.
type pruneStep struct {
	what string
	skip bool
	do   func(tx Tx) (bool, error)
}

// PruneStep implements store.Store. Each call runs one transaction of the
// first phase that has work: finished jobs; port samples (expired rows
// dropped wholesale where the engine can, then raw rows folded into
// 5-minute rollups into 1-hour rollups, see fold_ports.go); the same for
// process samples; link attribution; events; topology; last what the
// engine adds (Pruner.LastPruneStep). Each transaction touches at most
// PruneChunk, RollupPortRows or RollupProcessRows rows, so the writer is
// never held for long; the dialect's PruneLock makes daemons sharing a
// database take turns.
func (s *Store) PruneStep(ctx context.Context, r store.Retention) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("prune: %w", err)
	}
	ports := NewCutoffs(r.Samples, r.PortRollups5m, r.PortRollups1h)
	procs := NewCutoffs(r.ProcessSamples, r.ProcessRollups5m, r.ProcessRollups1h)
	pruner := s.Engine
	steps := []pruneStep{
		{"prune jobs ended before " + r.Jobs.Format(time.RFC3339), r.Jobs.IsZero(), func(tx Tx) (bool, error) { return s.pruneJobs(ctx, tx, r.Jobs) }},
	}
	for _, k := range []struct {
		table, what string
		c           Cutoffs
		fold        func(tx Tx, c Cutoffs, l int) (bool, error)
	}{
		{"port_samples", "port samples", ports, func(tx Tx, c Cutoffs, l int) (bool, error) { return s.FoldPortsStep(ctx, tx, c, l) }},
		{"job_samples", "process samples", procs, func(tx Tx, c Cutoffs, l int) (bool, error) { return s.FoldProcessesStep(ctx, tx, c, l) }},
	} {
		steps = append(steps, pruneStep{"drop expired " + k.what, k.c[LevelRaw] == KeepAll || !s.Dialect.Partitioned, func(tx Tx) (bool, error) {
			return pruner.DropExpired(ctx, tx, k.table, k.c)
		}})
		for l := LevelRaw; l < NumLevels; l++ {
			steps = append(steps, pruneStep{FoldWhat(k.what, k.c, l), k.c[l] == KeepAll, func(tx Tx) (bool, error) { return k.fold(tx, k.c, l) }})
		}
	}
	steps = append(steps,
		pruneStep{"prune link attribution before " + r.LinkJobSamples.Format(time.RFC3339), r.LinkJobSamples.IsZero(), func(tx Tx) (bool, error) {
			return s.pruneLinkJobSamples(ctx, tx, pruner, r.LinkJobSamples)
		}},
		pruneStep{"prune events before " + r.Events.Format(time.RFC3339), r.Events.IsZero(), func(tx Tx) (bool, error) {
			return s.pruneEvents(ctx, tx, r.Events)
		}},
		pruneStep{"prune topology before " + r.Topology.Format(time.RFC3339), r.Topology.IsZero(), func(tx Tx) (bool, error) {
			return s.pruneTopology(ctx, tx, r.Topology)
		}},
	)
	for _, st := range steps {
		if st.skip {
			continue
		}
		did := false
		err := s.Engine.Write(ctx, st.what, nil, func(tx Tx) error {
			if s.Dialect.PruneLock != "" {
				if _, err := tx.Exec(ctx, s.Dialect.PruneLock); err != nil {
					return err
				}
			}
			var err error
			did, err = st.do(tx)
			return err
		})
		if err != nil {
			return false, err
		}
		if did {
			pruner.AfterPruneStep(ctx)
			return true, nil
		}
	}
	return pruner.LastPruneStep(ctx)
}

// pruneJobs deletes a chunk of what finished jobs that ended before
// before hold: their samples, rollups, processes and link totals, a
// bounded number of rows at a time (a large job has millions), then the
// job.
func (s *Store) pruneJobs(ctx context.Context, tx Tx, before time.Time) (bool, error) {
	rows, err := tx.Query(ctx, `SELECT id FROM jobs WHERE state = ? AND end_ns < ? ORDER BY id LIMIT ?`, store.JobFinished, codec.NS(before), s.PruneChunk)
	if err != nil {
		return false, err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return false, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(ids) == 0 {
		return false, err
	}
	budget := int64(s.PruneChunk)
	for _, id := range ids {
		for _, q := range []string{
			`DELETE FROM job_samples WHERE (job, rank, time_ns) IN (SELECT job, rank, time_ns FROM job_samples WHERE job = ? LIMIT ?)`,
			`DELETE FROM job_rollups WHERE (job, rank, width_s, bucket_ns) IN (SELECT job, rank, width_s, bucket_ns FROM job_rollups WHERE job = ? LIMIT ?)`,
			`DELETE FROM job_processes WHERE (job, rank) IN (SELECT job, rank FROM job_processes WHERE job = ? LIMIT ?)`,
			`DELETE FROM job_link_totals WHERE (job, guid, port) IN (SELECT job, guid, port FROM job_link_totals WHERE job = ? LIMIT ?)`,
		} {
			n, err := tx.Exec(ctx, q, id, budget)
			if err != nil {
				return false, fmt.Errorf("job %s: %w", id, err)
			}
			if budget -= n; budget <= 0 {
				return true, nil // the job's rows go on in the next step
			}
		}
		for _, q := range []string{`DELETE FROM job_parts WHERE job = ?`, `DELETE FROM jobs WHERE id = ?`} {
			if _, err := tx.Exec(ctx, q, id); err != nil {
				return false, fmt.Errorf("job %s: %w", id, err)
			}
		}
		budget--
	}
	return true, nil
}

// pruneLinkJobSamples drops attribution samples that expired wholesale
// where the engine can, else deletes a chunk of expired rows.
func (s *Store) pruneLinkJobSamples(ctx context.Context, tx Tx, p Pruner, before time.Time) (bool, error) {
	if s.Dialect.Partitioned {
		// No rollups keep attribution samples.
		if did, err := p.DropExpired(ctx, tx, "link_job_samples", Cutoffs{codec.NS(before), math.MaxInt64, math.MaxInt64}); did || err != nil {
			return did, err
		}
	}
	n, err := tx.Exec(ctx, `DELETE FROM link_job_samples WHERE (guid, port, time_ns, job) IN
		(SELECT guid, port, time_ns, job FROM link_job_samples WHERE time_ns < ? LIMIT ?)`, codec.NS(before), s.PruneChunk)
	return n > 0, err
}

func (s *Store) pruneEvents(ctx context.Context, tx Tx, before time.Time) (bool, error) {
	n, err := tx.Exec(ctx, `DELETE FROM events WHERE id IN (SELECT id FROM events WHERE time_ns < ? LIMIT ?)`, codec.NS(before), s.PruneChunk)
	if err != nil || n == 0 {
		return false, err
	}
	_, err = tx.Exec(ctx, `UPDATE totals SET value = value - ? WHERE name = 'events'`, n)
	return true, err
}

// pruneTopology deletes the versions that ended before the limit; the
// one in force at the limit stays, so TopologyAt(limit) still answers.
func (s *Store) pruneTopology(ctx context.Context, tx Tx, before time.Time) (bool, error) {
	at := codec.NS(before)
	a, err := tx.Exec(ctx, `DELETE FROM topology_versions WHERE until_ns IS NOT NULL AND until_ns <= ?`, at)
	if err != nil {
		return false, fmt.Errorf("versions: %w", err)
	}
	b, err := tx.Exec(ctx, `DELETE FROM forwarding_tables WHERE from_ns <
		(SELECT max(g.from_ns) FROM forwarding_tables g WHERE g.fabric = forwarding_tables.fabric AND g.from_ns <= ?)`, at)
	if err != nil {
		return false, fmt.Errorf("forwarding tables: %w", err)
	}
	return a+b > 0, nil
}
