package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/netloom/netloom/internal/store/codec"
	"github.com/netloom/netloom/internal/store/sqlstore"
)

// The raw sample tables are partitioned by range of time_ns, one
// partition per Options.PartitionWidth (aligned to the Unix epoch). A
// partition is created when the first row for its range is written, with
// the next one ahead of time, and is dropped whole by retention once its
// range has expired. The partitions table lists them.
const (
	tablePortSamples    = "port_samples"
	tableJobSamples     = "job_samples"
	tableLinkJobSamples = "link_job_samples"
)

type partKey struct {
	parent string
	lo     int64
}

// partNeed says that rows of parent at these times are about to be written.
type partNeed struct {
	parent string
	times  []int64
}

func partitionName(parent string, lo int64) string {
	return parent + "_" + codec.FromNS(lo).Format("20060102t150405")
}

// ensurePartitions creates the partitions that need misses, in a short
// transaction of its own under the partition lock (creating a partition
// locks its parent table). Called with wmu held.
func (s *Store) ensurePartitions(ctx context.Context, need []partNeed) error {
	w := int64(s.opt.PartitionWidth)
	var missing []partKey
	for _, n := range need {
		for i, t := range n.times {
			k := partKey{n.parent, sqlstore.FloorTo(t, w)}
			if !s.parts[k] && !slices.Contains(missing, k) {
				missing = append(missing, k)
			}
			if i == len(n.times)-1 {
				// The next partition too, so that crossing into it
				// does not wait for its creation.
				ahead := partKey{n.parent, k.lo + w}
				if !s.parts[ahead] && !slices.Contains(missing, ahead) {
					missing = append(missing, ahead)
				}
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(partitionLock)); err != nil {
			return err
		}
		for _, k := range missing {
			var exists bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM partitions WHERE parent = $1 AND lo = $2)`, k.parent, k.lo).Scan(&exists); err != nil {
				return err
			}
			if exists {
				continue
			}
			name := partitionName(k.parent, k.lo)
			if _, err := tx.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s PARTITION OF %s FOR VALUES FROM (%d) TO (%d)`,
				pgx.Identifier{name}.Sanitize(), pgx.Identifier{k.parent}.Sanitize(), k.lo, k.lo+w)); err != nil {
				return fmt.Errorf("create partition %s: %w", name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO partitions(parent, lo, hi, name) VALUES ($1, $2, $3, $4)`, k.parent, k.lo, k.lo+w, name); err != nil {
				return fmt.Errorf("register partition %s: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("partitions: %w", err)
	}
	for _, k := range missing {
		s.parts[k] = true
	}
	return nil
}

// partition is one registered partition.
type partition struct {
	lo, hi int64
	name   string
}

// oldestPartition returns parent's oldest partition whose range ends at
// or before before.
func oldestPartition(ctx context.Context, tx pgx.Tx, parent string, before int64) (partition, bool, error) {
	var p partition
	ok, err := queryRow(ctx, tx, `SELECT lo, hi, name FROM partitions WHERE parent = $1 AND hi <= $2 ORDER BY lo LIMIT 1`,
		[]any{parent, before}, &p.lo, &p.hi, &p.name)
	return p, ok, err
}

// dropPartition drops a partition with everything in it.
func (s *Store) dropPartition(ctx context.Context, tx pgx.Tx, parent string, p partition) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(partitionLock)); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `DROP TABLE IF EXISTS `+pgx.Identifier{p.name}.Sanitize()); err != nil {
		return fmt.Errorf("drop partition %s: %w", p.name, err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM partitions WHERE parent = $1 AND lo = $2`, parent, p.lo); err != nil {
		return fmt.Errorf("drop partition %s: %w", p.name, err)
	}
	delete(s.parts, partKey{parent, p.lo})
	return nil
}
