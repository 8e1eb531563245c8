package daemon

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/sqlite"
	"github.com/netloom/netloom/internal/store/storetest"
)

func TestRetentionConfig(t *testing.T) {
	// The keys of earlier versions keep working beside the new ones.
	c, err := ParseConfig([]byte(`retention:
  samples: 72h
  samples_5m: 1440h
  samples_1h: -1s
  process_samples: 12h
  process_samples_5m: 48h
  process_samples_1h: 720h
  link_job_samples: 24h
  events: 100h
  topology: 200h
  jobs: 300h
  every: 10m
`), "retention.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := RetentionConfig{Samples: 72 * time.Hour, Samples5m: 1440 * time.Hour, Samples1h: -time.Second,
		ProcessSamples: 12 * time.Hour, ProcessSamples5m: 48 * time.Hour, ProcessSamples1h: 720 * time.Hour,
		LinkJobSamples: 24 * time.Hour, Events: 100 * time.Hour, Topology: 200 * time.Hour, Jobs: 300 * time.Hour, Every: 10 * time.Minute}
	if c.Retention != want {
		t.Errorf("parsed %+v\nwant %+v", c.Retention, want)
	}
	now := storetest.T0
	r := c.WithDefaults().Retention.retention(now)
	if !r.Samples.Equal(now.Add(-72*time.Hour)) || !r.PortRollups1h.IsZero() || !r.ProcessSamples.Equal(now.Add(-12*time.Hour)) ||
		!r.LinkJobSamples.Equal(now.Add(-24*time.Hour)) || !r.Jobs.Equal(now.Add(-300*time.Hour)) {
		t.Errorf("retention at %s: %+v", now, r)
	}

	d := Config{}.WithDefaults().Retention
	if d.Samples != DefaultRetentionSamples || d.Samples5m != 30*24*time.Hour || d.Samples1h != 365*24*time.Hour ||
		d.ProcessSamples != DefaultRetentionProcessSamples || d.LinkJobSamples != DefaultRetentionLinkJobSamples ||
		d.Events != 365*24*time.Hour || d.Every != time.Hour {
		t.Errorf("defaults: %+v", d)
	}
	// Only the keys set change.
	c, err = ParseConfig([]byte("retention:\n  samples: 24h\n"), "one.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.WithDefaults().Retention; got.Samples != 24*time.Hour || got.Samples5m != DefaultRetentionSamples5m {
		t.Errorf("one key set: %+v", got)
	}

	for text, wantErr := range map[string]string{
		"retention:\n  every: 10ms\n":         "retention.every",
		"retention:\n  every: -1h\n":          "retention.every",
		"retention:\n  samples_10m: 1h\n":     "samples_10m",
		"retention:\n  process_samples: x\n":  "line 2",
		"retention:\n  samples: [1h]\n":       "line 2",
		"retention:\n  link_job_samples: 3\n": "line 2", // a bare number has no unit
		"retention:\n  jobs: -1s\n":           "",       // forever
	} {
		_, err := ParseConfig([]byte(text), "bad.yaml")
		if wantErr == "" {
			if err != nil {
				t.Errorf("config %q: %v", text, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), wantErr) || !strings.Contains(err.Error(), "bad.yaml") {
			t.Errorf("config %q: error %v, want it to name the file and %q", text, err, wantErr)
		}
	}
}

// TestPrunePassInterleaves runs a pass that rolls up thousands of rows,
// one tiny step at a time, and checks that a write queued while it runs
// is done long before the pass ends, and that the pass rolled up what
// expired and kept the rest.
func TestPrunePassInterleaves(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "netloom.db"), sqlite.Options{RollupPortRows: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const switches, ports, sweeps = 10, 4, 160 // 80 minutes every 30 s
	for i := range sweeps {
		if err := st.AddPortSamples(ctx, storetest.Sweep(switches, ports, i, storetest.T0.Add(time.Duration(i)*30*time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	d := New(Config{}, nil, st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go d.writer(wctx)
	// Raw samples kept from T0+1h: the first hour is rolled up.
	rc := Config{}.WithDefaults().Retention
	rc.Samples = time.Hour
	r := rc.retention(storetest.T0.Add(2 * time.Hour))

	var passDone atomic.Bool
	done := make(chan struct{})
	go func() { d.prunePass(ctx, r); passDone.Store(true); close(done) }()
	for {
		s, err := st.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s.PortRollups > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	wrote := make(chan bool, 1)
	d.enqueue(writeOp{kind: "test", apply: func(ctx context.Context, st store.Store) error {
		wrote <- passDone.Load()
		return nil
	}})
	if <-wrote {
		t.Error("a write queued during the pass waited for the whole pass")
	}
	<-done
	got, err := st.PortSeries(ctx, []fabric.PortRef{{GUID: 0x1000, Port: 1}}, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	points := got[fabric.PortRef{GUID: 0x1000, Port: 1}]
	rolled, raw := 0, 0
	for _, p := range points {
		if p.Resolution == store.Rollup5m {
			rolled++
			if p.Samples != 10 {
				t.Errorf("rollup point at %s sums %d samples, want 10", p.Time, p.Samples)
			}
		} else {
			raw++
		}
	}
	if rolled != 12 || raw != sweeps-120 {
		t.Errorf("after the pass: %d rollup points and %d raw samples, want 12 and %d", rolled, raw, sweeps-120)
	}
}
