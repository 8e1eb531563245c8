package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netloom/netloom/internal/alert"
	"github.com/netloom/netloom/internal/auth"
	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
)

// alertTick tells the alert activity that a sweep or discovery published
// a new state, with the events recorded since.
type alertTick struct{ events []fabric.Event }

// alertQueueLen bounds the ticks waiting for the alert activity; a full
// queue drops the tick (counted), never blocks the fabric activity.
const alertQueueLen = 64

type alertMetrics struct {
	evaluations prometheus.Counter
	seconds     prometheus.Histogram
	dropped     prometheus.Counter
	fired       *prometheus.CounterVec
}

func newAlertMetrics(reg prometheus.Registerer) alertMetrics {
	m := alertMetrics{
		evaluations: prometheus.NewCounter(prometheus.CounterOpts{Name: "netloom_alert_evaluations_total",
			Help: "Evaluations of the alert rules."}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "netloom_alert_evaluation_seconds",
			Help: "Time to evaluate every alert rule once (without looking up jobs).", Buckets: prometheus.ExponentialBuckets(0.0001, 4, 9)}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "netloom_alert_ticks_dropped_total",
			Help: "Sweeps and discoveries the alert activity missed because it fell behind (their events are lost)."}),
		fired: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "netloom_alerts_fired_total",
			Help: "Alerts that started firing, by rule."}, []string{"alertname"}),
	}
	reg.MustRegister(m.evaluations, m.seconds, m.dropped, m.fired)
	return m
}

// tickAlerts hands the alert activity a new state without blocking.
func (d *Daemon) tickAlerts(events []fabric.Event) {
	select {
	case d.alertIn <- alertTick{events: events}:
	default:
		d.m.alert.dropped.Inc()
	}
}

// Alerts returns the alerts as last evaluated: active, then recently
// resolved.
func (d *Daemon) Alerts() []alert.Alert {
	return d.snap().alerts
}

// alertLoop evaluates the rules after every sweep and discovery (and at
// least every sweep interval, so windows end when no sweep comes), then
// hands changes to the notifier.
func (d *Daemon) alertLoop(ctx context.Context) error {
	eng := alert.NewEngine(d.cfg.Alerting, &jobFinder{d: d})
	empty := []alert.Alert{}
	d.publish(func(p *published) { p.alerts = empty })
	t := time.NewTicker(max(d.cfg.SweepInterval, time.Second))
	defer t.Stop()
	for {
		var events []fabric.Event
		select {
		case <-ctx.Done():
			return nil
		case tk := <-d.alertIn:
			events = tk.events
		drain:
			for {
				select {
				case tk := <-d.alertIn:
					events = append(events, tk.events...)
				default:
					break drain
				}
			}
		case <-t.C:
		}
		d.evaluateAlerts(eng, events, time.Now())
	}
}

// evaluateAlerts runs one evaluation and publishes its outcome.
func (d *Daemon) evaluateAlerts(eng *alert.Engine, events []fabric.Event, now time.Time) {
	in := alert.Input{Time: now, Events: events}
	s := d.snap()
	if st := s.state; st != nil {
		in.Topology, in.Readings, in.Samples, in.Unreachable, in.SweepTime = st.Topology, st.Readings, st.Samples, st.Unreachable, st.Sweep.Time
	}
	if b := s.behind; b != nil {
		in.Behind, in.BehindSince = b.Reasons, b.Since
	}
	start := time.Now()
	changed := eng.Evaluate(in)
	d.m.alert.evaluations.Inc()
	d.m.alert.seconds.Observe(time.Since(start).Seconds())
	all := eng.Alerts()
	d.publish(func(p *published) { p.alerts = all })
	for _, a := range changed {
		if a.State == alert.Firing {
			d.m.alert.fired.WithLabelValues(a.Rule).Inc()
			d.log.Warn("alert firing", "rule", a.Rule, "severity", a.Severity, "summary", a.Summary, "jobs", a.JobList())
		} else {
			d.log.Info("alert resolved", "rule", a.Rule, "summary", a.Summary)
		}
	}
	if len(changed) > 0 || d.notifier.Enabled() {
		d.notifier.Send(alert.Update{Changed: changed, Firing: eng.Firing()})
	}
}

// jobFinder names the jobs that crossed link directions since an alert's
// window began, the way the attribution API does: the jobs' attributed
// traffic over the directions in the window (the store's link-job
// samples, as /api/v1/links/{link}/jobs reads them), running jobs or
// finished since; every running job with a pair of nodes whose route the
// forwarding tables send over them (Routes.PairsThrough), so that jobs
// without an agent or without traffic yet are named too; and, the same
// way, every job without an agent that finished in the window (its
// traffic is not known, its scheduler's nodes are). A finished job with
// an agent is named by its traffic alone: what it sent is known.
type jobFinder struct {
	d *Daemon

	mu     sync.Mutex
	routes *fabric.Routes
	pairs  map[fabric.PortRef][]fabric.Pair
	// ended caches the store's finished jobs that ran since a time, by
	// that time (Unix ns), for the alerts that look them up together
	// (those that became active at one sweep share it).
	ended map[int64]endedList
}

type endedList struct {
	at   time.Time
	jobs []store.JobSummary
}

// maxPairs bounds the route pairs looked at per direction (a spine port of
// a Stampede-size fabric carries millions).
const maxPairs = 1 << 20

// endedCache is how long the store's list of jobs that ran in a window
// is reused.
const endedCache = 5 * time.Second

func (f *jobFinder) pairsThrough(r *fabric.Routes, p fabric.PortRef) []fabric.Pair {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.routes != r {
		f.routes, f.pairs = r, map[fabric.PortRef][]fabric.Pair{}
	}
	if ps, ok := f.pairs[p]; ok {
		return ps
	}
	ps, _, err := r.PairsThrough(p, maxPairs)
	if err != nil {
		ps = nil
	}
	f.pairs[p] = ps
	return ps
}

// endedJobs lists the finished jobs the store has that ran at some time
// in [since, now].
func (f *jobFinder) endedJobs(ctx context.Context, since, now time.Time) []store.JobSummary {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, e := range f.ended {
		if now.Sub(e.at) >= endedCache || now.Before(e.at) {
			delete(f.ended, k)
		}
	}
	if e, ok := f.ended[since.UnixNano()]; ok {
		return e.jobs
	}
	jobs, _, err := f.d.st.Jobs(ctx, store.JobQuery{State: store.JobFinished, From: since, To: now})
	if err != nil {
		f.d.log.Warn("alert: listing the jobs that ran in an alert's window failed", "err", err)
		return nil
	}
	if f.ended == nil {
		f.ended = map[int64]endedList{}
	}
	f.ended[since.UnixNano()] = endedList{at: now, jobs: jobs}
	return jobs
}

func (f *jobFinder) JobsCrossing(ports []fabric.PortRef, since time.Time) []alert.Job {
	d := f.d
	now := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The jobs that ran in the window: the store's finished ones, then the
	// live view (newer) over them.
	known := map[string]*store.JobSummary{}
	for _, j := range f.endedJobs(ctx, since, now) {
		known[j.ID] = &j
	}
	running := map[string]bool{}
	var live map[string]*store.Job
	s := d.snap()
	if l := d.liveJobsOf(s); l != nil {
		live = l.Jobs
	}
	for id, j := range live {
		if j.State == store.JobRunning || j.Overlaps(since, now) {
			known[id] = &j.JobSummary
			running[id] = j.State == store.JobRunning
		}
	}
	found := map[string]uint64{}
	if got, err := d.st.LinkJobs(ctx, ports, since, now); err != nil {
		d.log.Warn("alert: reading the jobs on a link failed", "err", err)
	} else {
		for _, x := range got {
			if x.Bytes == 0 {
				continue
			}
			if _, ok := known[x.Job]; !ok {
				// Attributed in the window, ended just before it (its last
				// interval is attributed at the sweep after its end).
				j, err := d.st.JobSummary(ctx, x.Job)
				if err != nil {
					continue
				}
				known[x.Job] = j
			}
			found[x.Job] += x.Bytes
		}
	}
	st, av := s.state, s.attrib
	if st != nil && st.Routes != nil && av != nil && av.Nodes != nil {
		// The LIDs of the nodes of each job named by its routes: running
		// ones, and finished ones whose traffic is not known.
		byLID := map[fabric.LID][]string{}
		lids := map[string]map[fabric.LID]bool{}
		for id, j := range known {
			if _, ok := found[id]; ok || (!running[id] && j.Agent) {
				continue
			}
			var nodes []string
			if lj, ok := live[id]; ok {
				nodes = jobNodes(lj)
			} else if j.Scheduler != nil {
				nodes = j.Scheduler.Nodes
			}
			set := map[fabric.LID]bool{}
			for _, n := range nodes {
				if l, err := av.Nodes.LID(n); err == nil && !set[l] {
					set[l] = true
					byLID[l] = append(byLID[l], id)
				}
			}
			if len(set) > 1 {
				lids[id] = set
			}
		}
		for _, p := range ports {
			if _, linked := st.Topology.LinkAt(p); !linked || len(lids) == 0 {
				continue
			}
			for _, pr := range f.pairsThrough(st.Routes, p) {
				for _, id := range byLID[pr.Src] {
					if _, ok := found[id]; !ok && lids[id][pr.Dst] {
						found[id] = 0
					}
				}
			}
		}
	}
	out := make([]alert.Job, 0, len(found))
	for id, b := range found {
		j := known[id]
		aj := alert.Job{ID: id, User: j.Owner(), Bytes: b, State: alert.JobFinished, Start: j.Start, End: j.End}
		if running[id] {
			aj.State, aj.End = alert.JobRunning, time.Time{}
		}
		out = append(out, aj)
	}
	return out
}

// jobNodes lists a job's node names: the scheduler's and its ranks'.
func jobNodes(j *store.Job) []string {
	var out []string
	if j.Scheduler != nil {
		out = append(out, j.Scheduler.Nodes...)
	}
	if j.Agent {
		for _, p := range j.Full().Processes {
			out = append(out, p.Node)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// serveAlerts answers GET /api/v1/alerts (docs/api.md): administrators see
// every alert; a user only those naming one of their jobs, with other
// users' jobs anonymized.
func (d *Daemon) serveAlerts(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, reason, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": msg, "reason": reason})
	}
	p := auth.FromContext(r.Context())
	if p == nil {
		fail(http.StatusUnauthorized, "unauthenticated", "sign in first")
		return
	}
	if d.cfg.Role == RoleAPI {
		fail(http.StatusNotImplemented, "not_on_api_daemon", "alerts are evaluated and delivered by the collector daemons; this daemon (role api) serves what the database holds and keeps no alerts")
		return
	}
	q := r.URL.Query()
	state := q.Get("state")
	if !slices.Contains([]string{"", "active", alert.Firing, alert.Pending, alert.Resolved}, state) {
		fail(http.StatusBadRequest, "bad_parameter", fmt.Sprintf("parameter state: %q: want active, firing, pending or resolved", state))
		return
	}
	limit := 500
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100000 {
			fail(http.StatusBadRequest, "bad_parameter", fmt.Sprintf("parameter limit: %q: want a number in 1..100000", v))
			return
		}
		limit = n
	}
	out := []alert.Alert{}
	counts := map[string]int{alert.Firing: 0, alert.Pending: 0, alert.Resolved: 0}
	for _, a := range d.Alerts() {
		if !p.Admin && !visibleAlert(&a, p.Name) {
			continue
		}
		counts[a.State]++
		if state != "" && a.State != state && !(state == "active" && a.State != alert.Resolved) {
			continue
		}
		if len(out) < limit {
			out = append(out, a)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"alerts": out, "firing": counts[alert.Firing], "pending": counts[alert.Pending],
		"resolved": counts[alert.Resolved], "rules": d.alertRules()})
}

// visibleAlert keeps an alert for user when it names one of their jobs,
// renaming the other users' jobs "other-N" (as the links API does).
func visibleAlert(a *alert.Alert, user string) bool {
	mine := false
	jobs := make([]alert.Job, len(a.Jobs))
	n := 0
	for i, j := range a.Jobs {
		if j.User == user {
			mine = true
			jobs[i] = j
			continue
		}
		n++
		jobs[i] = alert.Job{ID: fmt.Sprintf("other-%d", n), Bytes: j.Bytes, State: j.State}
	}
	a.Jobs = jobs
	return mine
}

// alertRules lists the rules in force, for the UI.
func (d *Daemon) alertRules() []map[string]any {
	var out []map[string]any
	for _, r := range d.cfg.Alerting.WithDefaults().Enabled() {
		out = append(out, map[string]any{"name": r.Name, "kind": r.Kind, "severity": r.Severity, "threshold": r.Threshold,
			"window_seconds": r.Window.Seconds(), "counters": r.CounterNames()})
	}
	return out
}
