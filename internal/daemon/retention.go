package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/netloom/netloom/internal/store"
)

// RetentionConfig is how long each kind of data is kept. Zero means the
// default below; a negative duration keeps that kind forever.
//
// Samples past their raw retention are rolled up, not lost: into 5-minute
// rollups while those keep them, else into 1-hour rollups while those
// do (a rollup kept no longer than the resolution below it keeps
// nothing). Reading a series returns the rollup points where the raw
// samples are gone.
type RetentionConfig struct {
	// Samples: raw fabric port samples, one per port and sweep.
	Samples time.Duration `yaml:"samples"`
	// Samples5m and Samples1h: rollups of port samples (per port and
	// bucket: summed deltas, peak rates).
	Samples5m time.Duration `yaml:"samples_5m"`
	Samples1h time.Duration `yaml:"samples_1h"`
	// ProcessSamples: raw per-interval samples of MPI ranks;
	// ProcessSamples5m and ProcessSamples1h their rollups.
	ProcessSamples   time.Duration `yaml:"process_samples"`
	ProcessSamples5m time.Duration `yaml:"process_samples_5m"`
	ProcessSamples1h time.Duration `yaml:"process_samples_1h"`
	// LinkJobSamples: link attribution per direction, job and interval.
	LinkJobSamples time.Duration `yaml:"link_job_samples"`
	Events         time.Duration `yaml:"events"`
	Topology       time.Duration `yaml:"topology"` // versions and forwarding tables
	Jobs           time.Duration `yaml:"jobs"`     // finished jobs, with everything they hold
	// Every is how often old data is rolled up and pruned.
	Every time.Duration `yaml:"every"`
}

// Retention defaults (docs/operations.md#retention has the reasons and
// the disk they take). Raw fabric samples cover every range the UI offers
// (up to 24 hours) and all of yesterday at full resolution; older ranges
// read 5-minute rollups for a month and 1-hour rollups for a year. Process
// samples, twenty times the volume of the fabric's at Stampede size, are
// kept raw for a day, at 5 minutes for a week and hourly for a month (a
// job's summary stays for a year). Link attribution has no rollups yet and
// can reach 12 GB a day (a whole-machine all-to-all), so it keeps the
// 24 hours the UI's ranges reach.
const (
	DefaultRetentionSamples          = 48 * time.Hour
	DefaultRetentionSamples5m        = 30 * 24 * time.Hour
	DefaultRetentionSamples1h        = 365 * 24 * time.Hour
	DefaultRetentionProcessSamples   = 24 * time.Hour
	DefaultRetentionProcessSamples5m = 7 * 24 * time.Hour
	DefaultRetentionProcessSamples1h = 30 * 24 * time.Hour
	DefaultRetentionLinkJobSamples   = 24 * time.Hour
	DefaultRetentionEvents           = 365 * 24 * time.Hour
	DefaultRetentionTopology         = 365 * 24 * time.Hour
	DefaultRetentionJobs             = 365 * 24 * time.Hour
	DefaultRetentionEvery            = time.Hour
)

// withDefaults fills every zero field with its default.
func (r RetentionConfig) withDefaults() RetentionConfig {
	for _, f := range []struct {
		v *time.Duration
		d time.Duration
	}{
		{&r.Samples, DefaultRetentionSamples}, {&r.Samples5m, DefaultRetentionSamples5m}, {&r.Samples1h, DefaultRetentionSamples1h},
		{&r.ProcessSamples, DefaultRetentionProcessSamples}, {&r.ProcessSamples5m, DefaultRetentionProcessSamples5m},
		{&r.ProcessSamples1h, DefaultRetentionProcessSamples1h}, {&r.LinkJobSamples, DefaultRetentionLinkJobSamples},
		{&r.Events, DefaultRetentionEvents}, {&r.Topology, DefaultRetentionTopology}, {&r.Jobs, DefaultRetentionJobs},
		{&r.Every, DefaultRetentionEvery},
	} {
		if *f.v == 0 {
			*f.v = f.d
		}
	}
	return r
}

// validate reports the first impossible value.
func (r RetentionConfig) validate() error {
	if r.Every < 0 || (r.Every > 0 && r.Every < time.Second) {
		return fmt.Errorf("retention.every %s: must be at least 1s", r.Every)
	}
	return nil
}

// retention is the store's view of the config at time now.
func (r RetentionConfig) retention(now time.Time) store.Retention {
	before := func(d time.Duration) time.Time {
		if d < 0 {
			return time.Time{} // forever
		}
		return now.Add(-d)
	}
	return store.Retention{
		Samples: before(r.Samples), PortRollups5m: before(r.Samples5m), PortRollups1h: before(r.Samples1h),
		ProcessSamples: before(r.ProcessSamples), ProcessRollups5m: before(r.ProcessSamples5m), ProcessRollups1h: before(r.ProcessSamples1h),
		LinkJobSamples: before(r.LinkJobSamples), Events: before(r.Events), Topology: before(r.Topology), Jobs: before(r.Jobs),
	}
}

// pruner rolls up and prunes old data at start and then every
// Retention.Every. Each step is one short store transaction queued to
// the writer like any other write, and the next is queued only when it is
// done: sweeps and agent data queued meanwhile are written between steps,
// so a pass over a day of samples never holds them up for longer than
// one step.
func (d *Daemon) pruner(ctx context.Context) {
	rc := d.cfg.Retention.withDefaults()
	if rc.Every <= 0 {
		rc.Every = DefaultRetentionEvery
	}
	t := time.NewTicker(rc.Every)
	defer t.Stop()
	now := time.Now()
	for {
		d.prunePass(ctx, rc.retention(now))
		select {
		case <-ctx.Done():
			return
		case now = <-t.C:
		}
	}
}

// prunePass runs prune steps until none is left or one fails.
func (d *Daemon) prunePass(ctx context.Context, r store.Retention) {
	start := time.Now()
	steps := 0
	var longest time.Duration
	for {
		var more bool
		var took time.Duration
		err := d.writeSync(ctx, "prune", func(ctx context.Context, st store.Store) error {
			t0 := time.Now()
			var err error
			more, err = st.PruneStep(ctx, r)
			took = time.Since(t0)
			return err
		})
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				d.log.Error("prune stopped; it goes on at the next pass", "steps", steps, "err", err)
			}
			return
		}
		steps++
		longest = max(longest, took)
		if !more {
			break
		}
	}
	if steps > 1 {
		d.log.Info("pruned and rolled up old data", "steps", steps-1, "took", time.Since(start).Round(time.Millisecond),
			"longest_step", longest.Round(time.Microsecond))
	}
}
