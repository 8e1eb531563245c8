package daemon

import (
	"context"
	"time"

	"github.com/netloom/netloom/internal/store"
)

// RetentionConfig is how long each kind of data is kept (0: forever).
type RetentionConfig struct {
	Samples  time.Duration `yaml:"samples"`
	Events   time.Duration `yaml:"events"`
	Topology time.Duration `yaml:"topology"`
	Jobs     time.Duration `yaml:"jobs"` // finished jobs
	// Every is how often old data is pruned.
	Every time.Duration `yaml:"every"`
}

func (d *Daemon) pruner(ctx context.Context) {
	t := time.NewTicker(d.cfg.Retention.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			r := store.Retention{
				Samples:  now.Add(-d.cfg.Retention.Samples),
				Events:   now.Add(-d.cfg.Retention.Events),
				Topology: now.Add(-d.cfg.Retention.Topology),
				Jobs:     now.Add(-d.cfg.Retention.Jobs),
			}
			d.enqueue(writeOp{kind: "prune", apply: func(ctx context.Context, st store.Store) error { return st.Prune(ctx, r) }})
		}
	}
}
