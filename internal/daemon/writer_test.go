package daemon

import (
	"context"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
)

// flakyStore is a store whose writes fail as if the database refused
// connections while down is set. It records the sweeps the daemon asked
// it to store.
type flakyStore struct {
	store.Store
	down atomic.Bool

	mu   sync.Mutex
	sent []time.Time // sweep times, in the order first asked
	seen map[int64]bool
	port fabric.PortRef // a port every sweep has
}

var errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}

func (f *flakyStore) AddPortSamples(ctx context.Context, s []fabric.PortSample) error {
	f.mu.Lock()
	if t := s[0].Time.Round(0); !f.seen[t.UnixNano()] {
		f.seen[t.UnixNano()] = true
		f.sent = append(f.sent, t)
		if f.port == (fabric.PortRef{}) {
			f.port = s[0].Port
		}
	}
	f.mu.Unlock()
	if f.down.Load() {
		return errRefused
	}
	return f.Store.AddPortSamples(ctx, s)
}

func (f *flakyStore) AddEvents(ctx context.Context, ev []fabric.Event) error {
	if f.down.Load() {
		return errRefused
	}
	return f.Store.AddEvents(ctx, ev)
}

func (f *flakyStore) SaveTopology(ctx context.Context, t *fabric.Topology, at time.Time) (int64, bool, error) {
	if f.down.Load() {
		return 0, false, errRefused
	}
	return f.Store.SaveTopology(ctx, t, at)
}

func (f *flakyStore) PruneStep(ctx context.Context, r store.Retention) (bool, error) {
	if f.down.Load() {
		return false, errRefused
	}
	return f.Store.PruneStep(ctx, r)
}

// Close leaves the store open for the test to read after the daemon
// stopped; startFlaky closes it.
func (f *flakyStore) Close() error { return nil }

func (f *flakyStore) sentSweeps() ([]time.Time, fabric.PortRef) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sent), f.port
}

// stored returns the sweep times the store holds for port.
func (f *flakyStore) stored(t *testing.T, port fabric.PortRef) map[int64]bool {
	t.Helper()
	got, err := f.Store.PortSamples(context.Background(), []fabric.PortRef{port}, time.Unix(0, 0), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]bool{}
	for _, s := range got[port] {
		out[s.Time.UnixNano()] = true
	}
	return out
}

func startFlaky(t *testing.T, setup func(*Config)) (*simDaemon, *flakyStore) {
	t.Helper()
	var f *flakyStore
	s := startWrapped(t, filepath.Join(t.TempDir(), "netloom.db"), "fat-tree:hosts=32,radix=8", func(c *Config) {
		c.SweepInterval, c.AgentListen, c.AgentAddressFile = 50*time.Millisecond, "off", "-"
		setup(c)
	}, func(st store.Store) store.Store {
		f = &flakyStore{Store: st, seen: map[int64]bool{}}
		t.Cleanup(func() { st.Close() })
		return f
	})
	return s, f
}

func (s *simDaemon) backlog() backlogInfo {
	if b := s.d.snap().backlog; b != nil {
		return *b
	}
	return backlogInfo{}
}

// TestOutageHeldAndWritten makes the database unreachable for two
// seconds: the sweeps of that time are held (metrics and status say so),
// discovery and pruning fail at once instead of waiting, and once the
// database answers every sweep the daemon took is stored.
func TestOutageHeldAndWritten(t *testing.T) {
	s, f := startFlaky(t, func(c *Config) { c.DiscoverInterval = time.Second })
	f.down.Store(true)
	s.waitFor("writes held", func() bool { return s.backlog().writes >= 20 })
	type status struct {
		Behind *struct{ Reasons []string }
	}
	var st status
	s.waitFor("the status to name the outage", func() bool {
		st = status{}
		return s.get("/api/v1/status", &st) == 200 && st.Behind != nil && strings.Contains(strings.Join(st.Behind.Reasons, ";"), "database unreachable")
	})
	if v := testutil.ToFloat64(s.d.m.w.unreachable); v != 1 {
		t.Errorf("netloom_store_unreachable %g during the outage", v)
	}
	// A synchronous write (discovery's topology) fails at once.
	start := time.Now()
	if err := s.d.writeSync(context.Background(), "topology", func(ctx context.Context, st store.Store) error { return nil }); err == nil || time.Since(start) > time.Second {
		t.Errorf("synchronous write during the outage: %v after %s, want errUnreachable at once", err, time.Since(start))
	}
	time.Sleep(time.Second)
	f.down.Store(false)
	s.waitFor("the backlog written", func() bool { return s.backlog().writes == 0 })
	for _, r := range []string{dropQueueFull, dropBacklogFull, dropError} {
		if v := testutil.ToFloat64(s.d.m.writeDropped.WithLabelValues(r)); v != 0 {
			t.Errorf("dropped{reason=%q} = %g, want 0", r, v)
		}
	}
	if v := testutil.ToFloat64(s.d.m.w.unreachable); v != 0 {
		t.Errorf("netloom_store_unreachable %g after the outage", v)
	}
	if v := testutil.ToFloat64(s.d.m.w.outages); v != 1 {
		t.Errorf("netloom_store_outages_total %g, want 1", v)
	}
	s.stop()
	// Compared once the daemon stopped: a sweep asked for just before
	// the comparison may still be in flight (seen in CI: 1 of 83).
	sent, port := f.sentSweeps()
	stored := f.stored(t, port)
	var missing []time.Time
	for _, tm := range sent {
		if !stored[tm.UnixNano()] {
			missing = append(missing, tm)
		}
	}
	if len(missing) > 0 || len(sent) < 40 {
		t.Errorf("%d sweeps sent, %d missing from the store: %v", len(sent), len(missing), missing)
	}
	sweeps := testutil.ToFloat64(s.d.m.sweeps)
	if n := len(stored); float64(n) != sweeps-1 {
		t.Errorf("%d sweeps stored, want the %g with samples", n, sweeps-1)
	}
	t.Logf("%d sweeps sent, all stored; %g retries", len(sent), testutil.ToFloat64(s.d.m.w.retries))
}

// TestOutageBacklogBound holds writes past store_backlog_mib: the memory
// held never passes the bound, the oldest held sweeps are dropped and
// counted, and the newest are written when the database answers.
func TestOutageBacklogBound(t *testing.T) {
	s, f := startFlaky(t, func(c *Config) { c.StoreBacklogMiB, c.SweepInterval = 1, 20*time.Millisecond })
	limit := int64(1 << 20)
	outage := time.Now()
	f.down.Store(true)
	var peak int64
	dropped := func() float64 { return testutil.ToFloat64(s.d.m.writeDropped.WithLabelValues(dropBacklogFull)) }
	for deadline := time.Now().Add(20 * time.Second); dropped() < 10; time.Sleep(5 * time.Millisecond) {
		peak = max(peak, s.backlog().bytes)
		if time.Now().After(deadline) {
			t.Fatalf("no backlog_full drops; backlog %+v", s.backlog())
		}
	}
	peak = max(peak, s.backlog().bytes)
	if peak > limit || peak < limit/2 {
		t.Errorf("backlog peaked at %d bytes; bound %d", peak, limit)
	}
	f.down.Store(false)
	s.waitFor("the backlog written", func() bool { return s.backlog().writes == 0 })
	s.stop()
	// Every sweep but the first (which has no previous reading) made one
	// batch of samples: the dropped ones are missing, the rest stored.
	sweeps := testutil.ToFloat64(s.d.m.sweeps)
	_, port := f.sentSweeps()
	var times []time.Time
	for ns := range f.stored(t, port) {
		times = append(times, time.Unix(0, ns))
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	if got := float64(len(times)) + dropped(); got != sweeps-1 {
		t.Errorf("%d sweeps stored + %g dropped = %g, want the %g sweeps with samples", len(times), dropped(), got, sweeps-1)
	}
	// The dropped ones are one run, the oldest held: the longest gap
	// between stored sweeps, ending after the outage began.
	var gap time.Duration
	var end time.Time
	for i := 1; i < len(times); i++ {
		if g := times[i].Sub(times[i-1]); g > gap {
			gap, end = g, times[i]
		}
	}
	if want := time.Duration(dropped()) * 20 * time.Millisecond / 2; gap < want || end.Before(outage) {
		t.Errorf("longest gap between stored sweeps %s, up to %s (outage from %s); want at least %s, in the outage", gap, end, outage, want)
	}
	t.Logf("%g sweeps, %d stored, %g dropped (a %s gap), backlog peak %d of %d bytes", sweeps, len(times), dropped(), gap, peak, limit)
}
