package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/netloom/netloom/internal/store/sqlstore"
)

// DropExpired implements sqlstore.Pruner: dropRawPartition.
func (s *Store) DropExpired(ctx context.Context, tx sqlstore.Tx, table string, c sqlstore.Cutoffs) (bool, error) {
	return s.dropRawPartition(ctx, tx.(pgTx).q.(pgx.Tx), table, c)
}

// AfterPruneStep implements sqlstore.Pruner.
func (s *Store) AfterPruneStep(context.Context) {}

// LastPruneStep implements sqlstore.Pruner: nothing is left.
func (s *Store) LastPruneStep(context.Context) (bool, error) { return false, nil }

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
