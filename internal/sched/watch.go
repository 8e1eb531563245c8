package sched

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// Update is what one successful poll found.
type Update struct {
	At time.Time
	// Jobs is every job the scheduler reported, sorted by ID.
	Jobs []Job
	// Changed are the jobs that are new or differ from the previous poll
	// (state, nodes, times...), sorted by ID. The first poll reports all.
	Changed []Job
	// Gone are the IDs reported by the previous poll and not by this one:
	// the scheduler forgot them (Slurm: MinJobAge passed). A job that goes
	// while still active ended unseen; its last report stands.
	Gone []string
}

// Watcher polls one scheduler from one goroutine. The zero Interval is 10s.
type Watcher struct {
	Scheduler Scheduler
	Interval  time.Duration
	// OnUpdate receives every successful poll; it runs on the watcher's
	// goroutine, so a slow consumer delays the next poll, never piles
	// polls up.
	OnUpdate func(ctx context.Context, u Update)
	// OnError receives every failed poll (nil: ignored). The watcher keeps
	// polling; the previous jobs stay the reference for Changed.
	OnError func(ctx context.Context, err error)

	prev map[string]Job
}

// DefaultInterval is the polling interval when Watcher.Interval is 0.
const DefaultInterval = 10 * time.Second

// Run polls at once and then every Interval until ctx ends; it returns
// nil when ctx ends. Run is not safe to call twice at the same time.
func (w *Watcher) Run(ctx context.Context) error {
	if w.Scheduler == nil {
		return fmt.Errorf("sched watcher: no scheduler")
	}
	iv := w.Interval
	if iv <= 0 {
		iv = DefaultInterval
	}
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		w.Poll(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Poll runs one poll and delivers its update or error. Run calls it; it is
// exported for callers that drive polling themselves.
func (w *Watcher) Poll(ctx context.Context) {
	jobs, err := w.Scheduler.Jobs(ctx)
	if err != nil {
		if ctx.Err() == nil && w.OnError != nil {
			w.OnError(ctx, fmt.Errorf("%s: %w", w.Scheduler.Name(), err))
		}
		return
	}
	u := w.diff(jobs)
	if w.OnUpdate != nil {
		w.OnUpdate(ctx, u)
	}
}

// diff records jobs as the new reference and says what changed.
func (w *Watcher) diff(jobs []Job) Update {
	sorted := make([]Job, len(jobs))
	copy(sorted, jobs)
	sort.SliceStable(sorted, func(i, j int) bool { return lessID(sorted[i].ID, sorted[j].ID) })
	u := Update{At: time.Now(), Jobs: sorted}
	cur := make(map[string]Job, len(sorted))
	for _, j := range sorted {
		cur[j.ID] = j
		if old, ok := w.prev[j.ID]; !ok || !old.Equal(j) {
			u.Changed = append(u.Changed, j)
		}
	}
	for id := range w.prev {
		if _, ok := cur[id]; !ok {
			u.Gone = append(u.Gone, id)
		}
	}
	sort.Slice(u.Gone, func(i, j int) bool { return lessID(u.Gone[i], u.Gone[j]) })
	w.prev = cur
	return u
}

// lessID orders numeric ids numerically, then others as strings.
func lessID(a, b string) bool {
	if len(a) != len(b) && isDigits(a) && isDigits(b) {
		return len(a) < len(b)
	}
	return a < b
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
