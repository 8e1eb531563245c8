package sqlstore

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/netloom/netloom/internal/store/codec"
)

// ProcessRows is an engine's access to process rows inside one write
// transaction: raw samples of a rank (level 0, key: time) or rollup rows
// of a level's width (key: bucket start).
type ProcessRows interface {
	// OldestJob returns the job of the oldest row of level l below before.
	OldestJob(ctx context.Context, l int, before int64) (job string, ok bool, err error)
	// NextRank returns the smallest rank of job above after with rows of level l.
	NextRank(ctx context.Context, l int, job string, after int64) (rank int64, ok bool, err error)
	// Rows calls fn with up to limit of the rank's rows of level l with
	// keys below before, by key; data is valid only during the call.
	Rows(ctx context.Context, l int, job string, rank, before int64, limit int, fn func(key, t int64, data []byte) error) error
	// Delete deletes the rank's rows of level l with keys up to last.
	Delete(ctx context.Context, l int, job string, rank, last int64) error
	// Rollups calls fn with the rank's rollup rows of level l with
	// buckets in [lo, hi].
	Rollups(ctx context.Context, l int, job string, rank, lo, hi int64, fn func(bucket, t int64, data []byte) error) error
	// PutRollup inserts or replaces the rank's rollup row of level l and bucket.
	PutRollup(ctx context.Context, l int, job string, rank, bucket, t int64, data []byte) error
}

// FoldProcesses does one step of folding level l's expired process rows
// into coarser levels, job by job and rank by rank (a rank's rows are
// stored side by side), at most budget rows. It reports whether there
// was any to fold.
func (f *Folder) FoldProcesses(ctx context.Context, rows ProcessRows, c Cutoffs, l, budget int) (bool, error) {
	if c[l] == KeepAll {
		return false, nil
	}
	cur := &f.process[l]
	oldest := func() (bool, error) {
		job, ok, err := rows.OldestJob(ctx, l, c[l])
		if err != nil || !ok {
			cur.open = false
			return false, err
		}
		*cur = foldCursor{job: job, rank: math.MinInt64, open: true}
		return true, nil
	}
	if !cur.open {
		if ok, err := oldest(); err != nil || !ok {
			return false, err
		}
	}
	for budget > 0 {
		rank, ok, err := rows.NextRank(ctx, l, cur.job, cur.rank)
		if err != nil {
			return true, err
		}
		if !ok {
			budget--
			if ok, err := oldest(); err != nil || !ok {
				return true, err
			}
			continue
		}
		n, err := f.foldProcessRank(ctx, rows, c, l, cur.job, rank, budget)
		if err != nil {
			return true, fmt.Errorf("job %s rank %d: %w", cur.job, rank, err)
		}
		if n == budget {
			cur.rank = rank - 1 // it may have more
			return true, nil
		}
		cur.rank = rank
		budget -= max(n, 1)
	}
	return true, nil
}

// foldProcessRank folds at most limit expired rows of one rank and
// returns how many it folded.
func (f *Folder) foldProcessRank(ctx context.Context, rows ProcessRows, c Cutoffs, l int, job string, rank int64, limit int) (int, error) {
	targets := map[rollupKey]*codec.ProcessRollup{}
	n := 0
	var lastKey int64
	err := rows.Rows(ctx, l, job, rank, c[l], limit, func(key, t int64, data []byte) error {
		n, lastKey = n+1, key
		tl, tb, ok := c.Target(l, key)
		if !ok {
			return nil
		}
		a := targets[rollupKey{tl, tb}]
		if a == nil {
			a = &codec.ProcessRollup{}
			targets[rollupKey{tl, tb}] = a
		}
		if l == LevelRaw {
			x, err := codec.DecodeProcessSample(data)
			if err != nil {
				return fmt.Errorf("sample at %s: %w", codec.FromNS(t).Format(time.RFC3339Nano), err)
			}
			a.AddRaw(t, &x)
			return nil
		}
		b, err := codec.DecodeProcessRollup(data, t)
		if err != nil {
			return fmt.Errorf("rollup at %s: %w", codec.FromNS(key).Format(time.RFC3339), err)
		}
		a.Add(&b)
		return nil
	})
	if err != nil || n == 0 {
		return 0, err
	}
	if err := rows.Delete(ctx, l, job, rank, lastKey); err != nil {
		return 0, fmt.Errorf("delete folded rows: %w", err)
	}
	// Merge with what the target buckets already hold: one range query
	// per level.
	for level := Level5m; level < NumLevels; level++ {
		lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
		for k := range targets {
			if k.level == level {
				lo, hi = min(lo, k.bucket), max(hi, k.bucket)
			}
		}
		if lo > hi {
			continue
		}
		err := rows.Rollups(ctx, level, job, rank, lo, hi, func(b, t int64, data []byte) error {
			a := targets[rollupKey{level, b}]
			if a == nil {
				return nil
			}
			old, err := codec.DecodeProcessRollup(data, t)
			if err != nil {
				return fmt.Errorf("rollup at %s: %w", codec.FromNS(b).Format(time.RFC3339), err)
			}
			a.Add(&old)
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	var buf []byte
	for k, a := range targets {
		buf = codec.EncodeProcessRollup(buf[:0], a)
		if err := rows.PutRollup(ctx, k.level, job, rank, k.bucket, a.Time, buf); err != nil {
			return 0, fmt.Errorf("rollup at %s: %w", codec.FromNS(k.bucket).Format(time.RFC3339), err)
		}
	}
	return n, nil
}
