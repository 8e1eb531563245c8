package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netloom/netloom/internal/sched"
	"github.com/netloom/netloom/internal/sched/schedulers"
	"github.com/netloom/netloom/internal/store"
)

// schedView is the scheduler's jobs as of its last successful poll, by id.
// Immutable once published.
type schedView struct {
	At   time.Time
	Name string
	Jobs map[string]store.SchedInfo
}

type schedMetrics struct {
	polls, errors prometheus.Counter
	jobs          prometheus.Gauge
}

func newSchedMetrics(reg prometheus.Registerer) schedMetrics {
	m := schedMetrics{
		polls: prometheus.NewCounter(prometheus.CounterOpts{Name: "netloom_scheduler_polls_total", Help: "Successful scheduler polls."}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "netloom_scheduler_poll_errors_total",
			Help: "Scheduler polls that failed."}),
		jobs: prometheus.NewGauge(prometheus.GaugeOpts{Name: "netloom_scheduler_jobs", Help: "Jobs the scheduler reported in its last poll."}),
	}
	reg.MustRegister(m.polls, m.errors, m.jobs)
	return m
}

// openScheduler builds the configured scheduler adapter (nil for "none").
func openScheduler(spec string) (sched.Scheduler, error) {
	s, err := schedulers.New(spec)
	if err != nil {
		return nil, fmt.Errorf("scheduler %q: %w", spec, err)
	}
	if s.Name() == "none" {
		return nil, nil
	}
	return s, nil
}

// schedLoop polls the scheduler. Its OnUpdate only publishes the jobs
// atomically and queues store writes; it never blocks on the store.
func (d *Daemon) schedLoop(ctx context.Context) error {
	if d.scheduler == nil {
		return nil
	}
	errs := 0
	w := &sched.Watcher{Scheduler: d.scheduler, Interval: d.cfg.SchedulerInterval,
		OnUpdate: func(ctx context.Context, u sched.Update) {
			d.m.sched.polls.Inc()
			d.m.sched.jobs.Set(float64(len(u.Jobs)))
			v := &schedView{At: u.At, Name: d.scheduler.Name(), Jobs: make(map[string]store.SchedInfo, len(u.Jobs))}
			for _, j := range u.Jobs {
				v.Jobs[j.ID] = schedInfo(d.scheduler.Name(), j)
			}
			d.publish(func(p *published) { p.sched = v })
			for _, j := range u.Changed {
				if j.State == sched.StatePending || len(j.Nodes) == 0 {
					continue // no nodes, no traffic: not a job Netloom shows yet
				}
				d.saveSchedJob(v, j.ID)
			}
			errs = 0
		},
		OnError: func(ctx context.Context, err error) {
			d.m.sched.errors.Inc()
			if errs++; errs == 1 || errs%30 == 0 {
				d.log.Warn("scheduler poll failed; jobs are known from agents only until it works", "err", err, "failures", errs)
			}
		},
	}
	if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// saveSchedJob queues a save of a scheduler job merged with what is stored
// or live: an agent job keeps its own numbers and gains the scheduler's
// record; a job without an agent is the scheduler's record.
func (d *Daemon) saveSchedJob(v *schedView, id string) {
	si := v.Jobs[id]
	var live *store.Job
	if l := d.snap().live; l != nil {
		live = l.Jobs[id]
	}
	d.enqueue(writeOp{kind: "jobs", bytes: sizeJob + 512, apply: func(ctx context.Context, st store.Store) error {
		var js store.JobSummary
		switch prev, err := st.JobPart(ctx, id); { // this collector's part of it
		case live != nil:
			js = live.JobSummary
		case err == nil && prev.Reporting > 0:
			js = *prev
		case err == nil || errors.Is(err, store.ErrNotFound):
			js = schedSummary(si, v.At)
			if err == nil {
				js.HostLinks = prev.HostLinks
			}
		default:
			return err
		}
		js = d.mergeWith(js, v, d.snap().attrib)
		if !js.Agent && js.HostLinks == nil {
			js.HostLinks = &store.HostLinkTraffic{UnmappedNodes: []string{}}
		}
		return st.SaveJob(ctx, &store.Job{JobSummary: js})
	}})
}

func schedActive(state string) bool { return sched.State(state).Active() }

// schedSummary is the job summary of a job the scheduler alone knows.
func schedSummary(si store.SchedInfo, at time.Time) store.JobSummary {
	js := store.JobSummary{ID: si.ID, State: store.JobRunning, Start: si.Start, Updated: at, User: si.User,
		Program: si.Name, Nodes: len(si.Nodes)}
	if sched.State(si.State).Finished() {
		js.State, js.End, js.EndReason = store.JobFinished, si.End, "scheduler:"+si.State
		js.Updated = si.End
	}
	if js.Start.IsZero() {
		js.Start = at
	}
	end := js.End
	if end.IsZero() {
		end = at
	}
	if end.After(js.Start) {
		js.Duration = end.Sub(js.Start).Seconds()
	}
	return js
}

func schedInfo(name string, j sched.Job) store.SchedInfo {
	return store.SchedInfo{Scheduler: name, ID: j.ID, ArrayID: j.ArrayID, Name: j.Name, User: j.User, UID: j.UID,
		Partition: j.Partition, State: string(j.State), RawState: j.RawState, Nodes: j.Nodes, CPUs: j.CPUs,
		Submit: j.Submit, Start: j.Start, End: j.End, ExitCode: j.ExitCode, Source: j.Source}
}
