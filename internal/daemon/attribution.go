package daemon

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netloom/netloom/internal/analysis"
	"github.com/netloom/netloom/internal/api"
	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/ingest"
	"github.com/netloom/netloom/internal/store"
)

// AttributionView is what the attribution activity published last: the
// node map in force and, per job, what was routed over the links and what
// the host links of agent-less jobs counted. Immutable.
type AttributionView struct {
	Time      time.Time
	Routes    *fabric.Routes
	Nodes     *analysis.NodeMap
	Jobs      map[string]*store.Attribution
	HostLinks map[string]*store.HostLinkTraffic
	// Seconds is how long the last interval's attribution took.
	Seconds float64
}

// attributionMetrics are the attribution activity's Prometheus metrics.
type attributionMetrics struct {
	intervals     prometheus.Counter
	seconds       prometheus.Histogram
	unmappedNodes prometheus.Gauge
	unmappedBytes prometheus.Counter
	bytes         prometheus.Counter
	errors        prometheus.Counter
	jobs          prometheus.Gauge
}

func newAttributionMetrics(reg prometheus.Registerer) attributionMetrics {
	m := attributionMetrics{
		intervals: prometheus.NewCounter(prometheus.CounterOpts{Name: "netloom_attribution_intervals_total",
			Help: "Intervals of job traffic attributed to links."}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "netloom_attribution_seconds",
			Help: "Time to attribute one interval of all jobs' traffic to links.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 9)}),
		unmappedNodes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "netloom_attribution_unmapped_nodes",
			Help: "Node names of live jobs that map to no host adapter (their traffic is not attributed)."}),
		unmappedBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "netloom_attribution_unmapped_bytes_total",
			Help: "Inter-node bytes from or to unmapped nodes, not attributed to links."}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "netloom_attribution_bytes_total",
			Help: "Inter-node bytes of monitored jobs routed over the fabric's links."}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "netloom_attribution_errors_total",
			Help: "Job intervals with traffic that could not be routed (no route, link down)."}),
		jobs: prometheus.NewGauge(prometheus.GaugeOpts{Name: "netloom_attribution_jobs",
			Help: "Jobs whose traffic was attributed in the last interval."}),
	}
	reg.MustRegister(m.intervals, m.seconds, m.unmappedNodes, m.unmappedBytes, m.bytes, m.errors, m.jobs)
	return m
}

// Attribution returns the last published attribution (nil before the
// first interval with routes).
func (d *Daemon) Attribution() *AttributionView { return d.snap().attrib }

// loadNodeOverrides reads the --node-map file, if any.
func loadNodeOverrides(path string) (map[string]string, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("node map: %w", err)
	}
	defer f.Close()
	return analysis.ParseMapping(f, path)
}

// attributor is the attribution goroutine's own state.
type attributor struct {
	routes  *fabric.Routes
	attr    *analysis.Attributor
	nodes   *analysis.NodeMap
	jobs    map[string]*jobAttribution
	hosts   map[string]*store.HostLinkTraffic
	scratch []uint64
	load    []uint64
	last    time.Time
	sweep   time.Time // the sweep whose samples host links last counted
}

type jobAttribution struct {
	counter *analysis.JobCounter
	sum     store.Attribution
	saved   store.Attribution
	// stored is set once the job's attribution was saved: the first is
	// saved even when empty (a job on one node), so that the stored job
	// says what the live one says, to API daemons too.
	stored bool
}

// attributionLoop attributes every live job's inter-node traffic of each
// interval (the sweep interval) to the link directions its routes cross,
// stores it per link, job and interval, and keeps per-job totals.
func (d *Daemon) attributionLoop(ctx context.Context) error {
	a := &attributor{jobs: map[string]*jobAttribution{}, hosts: map[string]*store.HostLinkTraffic{}, last: time.Now()}
	t := time.NewTicker(d.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			d.attributeOnce(a, time.Now()) // what the last ranks sent
			return nil
		case now := <-t.C:
			d.attributeOnce(a, now)
		}
	}
}

// attributeOnce runs one interval ending at now.
func (d *Daemon) attributeOnce(a *attributor, now time.Time) {
	s := d.snap()
	st := s.state
	if st == nil || st.Routes == nil {
		a.last = now
		return
	}
	start := time.Now()
	if st.Routes != a.routes {
		nm, err := analysis.NewNodeMap(st.Topology, d.nodeOverrides)
		if err != nil {
			d.log.Error("node map does not fit the fabric; mapping by adapter description only", "err", err)
			nm, _ = analysis.NewNodeMap(st.Topology, nil)
		}
		a.routes, a.attr, a.nodes = st.Routes, analysis.NewAttributor(st.Routes), nm
		a.load = make([]uint64, a.attr.Directions())
	}
	lid := func(name string) (fabric.LID, bool) {
		l, err := a.nodes.LID(name)
		return l, err == nil
	}
	span := now.Sub(a.last)
	a.last = now
	live := s.live
	var jobs map[string]*store.Job
	if live != nil {
		jobs = live.Jobs
	}
	for id := range a.jobs {
		if _, ok := jobs[id]; !ok {
			delete(a.jobs, id)
		}
	}
	var samples []store.LinkJobSample
	unmapped := map[string]struct{}{}
	changed := map[string]bool{}
	busy := time.Now()
	for _, id := range slices.Sorted(maps.Keys(jobs)) {
		// Paced at half duty: a pass over every job's node rows is seconds
		// of CPU at 8x Stampede, and done at once it took a core from the
		// socket's decoders and the aggregator, which fell seconds behind
		// at every sweep.
		if w := time.Since(busy); w > 20*time.Millisecond {
			time.Sleep(w)
			busy = time.Now()
		}
		j := jobs[id]
		ja := a.jobs[id]
		if ja == nil {
			ja = &jobAttribution{counter: analysis.NewJobCounter(), sum: store.Attribution{UnmappedNodes: []string{}}}
			a.jobs[id] = ja
		}
		var iv analysis.Interval
		iv, a.scratch = ja.counter.Next(j, lid, a.scratch)
		for _, n := range iv.Unmapped {
			unmapped[n] = struct{}{}
		}
		ja.sum.UnmappedNodes = mergeNames(ja.sum.UnmappedNodes, iv.Unmapped)
		ja.sum.UnmappedBytes += iv.UnmappedBytes
		d.m.attr.unmappedBytes.Add(float64(iv.UnmappedBytes))
		if iv.Bytes == 0 {
			continue
		}
		clear(a.load)
		if errs := a.attr.AttributeMatrix(iv.Matrix, a.load); len(errs) > 0 {
			d.m.attr.errors.Inc()
			for _, e := range errs {
				if len(ja.sum.Errors) < 5 && !slices.Contains(ja.sum.Errors, e.Error()) {
					ja.sum.Errors = append(ja.sum.Errors, e.Error())
				}
			}
		}
		for i, b := range a.load {
			if b > 0 {
				samples = append(samples, store.LinkJobSample{Time: now, Span: span, Job: id, Port: a.attr.Direction(i), Bytes: b})
			}
		}
		ja.sum.Bytes += iv.Bytes
		ja.sum.Intervals++
		ja.sum.Updated = now
		d.m.attr.bytes.Add(float64(iv.Bytes))
	}
	for id, ja := range a.jobs {
		if !ja.stored || !attributionEqual(&ja.sum, &ja.saved) {
			changed[id] = true
		}
	}
	d.countHostLinks(a, s, now)

	view := &AttributionView{Time: now, Routes: a.routes, Nodes: a.nodes, Jobs: make(map[string]*store.Attribution, len(a.jobs)),
		HostLinks: make(map[string]*store.HostLinkTraffic, len(a.hosts)), Seconds: time.Since(start).Seconds()}
	for id, ja := range a.jobs {
		s := ja.sum
		s.UnmappedNodes = slices.Clone(s.UnmappedNodes)
		s.Errors = slices.Clone(s.Errors)
		view.Jobs[id] = &s
	}
	for id, h := range a.hosts {
		c := *h
		view.HostLinks[id] = &c
	}
	d.publish(func(p *published) { p.attrib = view })
	d.m.attr.intervals.Inc()
	d.m.attr.seconds.Observe(view.Seconds)
	d.m.attr.unmappedNodes.Set(float64(len(unmapped)))
	d.m.attr.jobs.Set(float64(len(a.jobs)))
	if len(samples) > 0 {
		d.enqueue(writeOp{kind: "link_attribution", bytes: linkJobSamplesBytes(samples), apply: func(ctx context.Context, st store.Store) error { return st.AddLinkJobSamples(ctx, samples) }})
	}
	// Save the summaries whose attribution moved, so the stored job ends
	// with its last interval's numbers: one write for all (at 8x Stampede
	// every sweep moved 3,200 jobs, and one queued write each overflowed
	// the store's queue).
	//
	// Only finished jobs are saved here. A running job's attribution reaches
	// the store with the aggregator's saves of it (mergeSummary); saved here
	// from this interval's view, which can be older than the aggregator's,
	// it could follow the job's final save and put it back "running" (two
	// one-node jobs stayed running in TestStoreCopy's store so).
	var save []*store.Job
	for id := range changed {
		j, ok := jobs[id]
		if !ok || j.State != store.JobFinished {
			continue
		}
		ja := a.jobs[id]
		ja.saved, ja.stored = ja.sum, true
		ja.saved.UnmappedNodes = slices.Clone(ja.sum.UnmappedNodes)
		ja.saved.Errors = slices.Clone(ja.sum.Errors)
		save = append(save, &store.Job{JobSummary: d.mergeSummary(j.JobSummary)})
	}
	if len(save) > 0 {
		d.enqueue(saveJobs(save))
	}
}

func attributionEqual(a, b *store.Attribution) bool {
	return a.Bytes == b.Bytes && a.UnmappedBytes == b.UnmappedBytes && a.Intervals == b.Intervals &&
		slices.Equal(a.UnmappedNodes, b.UnmappedNodes) && slices.Equal(a.Errors, b.Errors)
}

// mergeNames adds names (sorted) to a sorted list.
func mergeNames(list, names []string) []string {
	for _, n := range names {
		if i, found := slices.BinarySearch(list, n); !found {
			list = slices.Insert(list, i, n)
		}
	}
	return list
}

// countHostLinks adds the newest sweep's host-link counters to every
// active scheduler job that no agent reports: the only traffic source such
// a job has. Each sweep is counted once.
func (d *Daemon) countHostLinks(a *attributor, s *published, now time.Time) {
	st, sv := s.state, s.sched
	if sv == nil {
		return
	}
	fresh := st.Sweep.Time.After(a.sweep)
	if fresh {
		a.sweep = st.Sweep.Time
	}
	live := s.live
	for id := range a.hosts {
		if _, ok := sv.Jobs[id]; !ok {
			delete(a.hosts, id)
		}
	}
	for id, si := range sv.Jobs {
		if !schedActive(si.State) {
			continue
		}
		if live != nil {
			if _, ok := live.Jobs[id]; ok {
				delete(a.hosts, id)
				continue
			}
		}
		h := a.hosts[id]
		if h == nil {
			h = &store.HostLinkTraffic{UnmappedNodes: []string{}}
			a.hosts[id] = h
		}
		h.Nodes = 0
		var unm []string
		for _, name := range si.Nodes {
			l, err := a.nodes.LID(name)
			if err != nil {
				unm = append(unm, name)
				continue
			}
			h.Nodes++
			if !fresh {
				continue
			}
			sent, recv := hostLinkBytes(st, l)
			h.Sent += sent
			h.Received += recv
		}
		slices.Sort(unm)
		h.UnmappedNodes = mergeNames(h.UnmappedNodes, unm)
		if fresh {
			h.Intervals++
			h.Updated = now
		}
	}
}

// hostLinkBytes is what the host link of the adapter port with LID l
// carried in the last sweep: sent by the host and received by it. The
// switch end is swept by default; the adapter end when it was swept.
func hostLinkBytes(st *api.FabricState, l fabric.LID) (sent, recv uint64) {
	ca, ok := st.Topology.PortByLID(l)
	if !ok {
		return 0, 0
	}
	if x, ok := st.Samples[ca]; ok {
		return x.Delta[fabric.XmitData], x.Delta[fabric.RcvData]
	}
	sw, ok := st.Topology.Peer(ca)
	if !ok {
		return 0, 0
	}
	if x, ok := st.Samples[sw]; ok {
		return x.Delta[fabric.RcvData], x.Delta[fabric.XmitData]
	}
	return 0, 0
}

// liveJobs is the agents' live view merged with the scheduler's jobs and
// the attribution: what the jobs API serves as "live". Finished jobs that
// other collectors reported parts of are left to the database, whose
// summary joins the parts (fabrics.go).
func (d *Daemon) liveJobs() *ingest.Live { return d.liveJobsOf(d.snap()) }

// liveJobsOf is liveJobs of one snapshot.
func (d *Daemon) liveJobsOf(s *published) *ingest.Live {
	l, sh := d.mergedJobs(s), s.shared
	if l == nil || sh == nil {
		return l
	}
	if c := d.sharedView.Load(); c != nil && c.in == l && c.shared == sh {
		return c.out
	}
	out := &ingest.Live{Time: l.Time, Jobs: make(map[string]*store.Job, len(l.Jobs))}
	for id, j := range l.Jobs {
		if j.State == store.JobFinished && sh.ids[id] {
			continue
		}
		out.Jobs[id] = j
	}
	d.sharedView.Store(&sharedLive{in: l, shared: sh, out: out})
	return out
}

// sharedLive caches liveJobs' view for one live view and shared set.
type sharedLive struct {
	in     *ingest.Live
	shared *sharedJobs
	out    *ingest.Live
}

// mergedJobs is liveJobsOf(s) before jobs shared with other collectors
// are left out.
func (d *Daemon) mergedJobs(s *published) *ingest.Live {
	agent, sv, av := s.live, s.sched, s.attrib
	if sv == nil && av == nil {
		return agent
	}
	if c := d.merged.Load(); c != nil && c.agent == agent && c.sched == sv && c.attrib == av {
		return c.out
	}
	out := &ingest.Live{Jobs: map[string]*store.Job{}}
	if agent != nil {
		out.Time = agent.Time
		for id, j := range agent.Jobs {
			c := *j
			c.JobSummary = d.mergeWith(j.JobSummary, sv, av)
			out.Jobs[id] = &c
		}
	}
	if sv != nil {
		for id, si := range sv.Jobs {
			if _, ok := out.Jobs[id]; ok || !schedActive(si.State) {
				continue
			}
			js := schedSummary(si, sv.At)
			js = d.mergeWith(js, sv, av)
			out.Jobs[id] = &store.Job{JobSummary: js, Processes: []store.Process{}}
		}
	}
	d.merged.Store(&mergedJobs{agent: agent, sched: sv, attrib: av, out: out})
	return out
}

type mergedJobs struct {
	agent  *ingest.Live
	sched  *schedView
	attrib *AttributionView
	out    *ingest.Live
}

// mergeSummary attaches what the scheduler and the attribution know to a
// job summary.
func (d *Daemon) mergeSummary(js store.JobSummary) store.JobSummary {
	s := d.snap()
	return d.mergeWith(js, s.sched, s.attrib)
}

func (d *Daemon) mergeWith(js store.JobSummary, sv *schedView, av *AttributionView) store.JobSummary {
	if js.Reporting > 0 {
		js.Agent, js.TrafficSource = true, store.SourceAgent
	}
	if sv != nil {
		if si, ok := sv.Jobs[js.ID]; ok {
			c := si
			c.Nodes = slices.Clone(si.Nodes)
			js.Scheduler = &c
			if js.User == "" {
				js.User = si.User
			}
			if !js.Agent {
				js.Nodes = len(si.Nodes)
			}
		}
	}
	if av != nil {
		if a, ok := av.Jobs[js.ID]; ok && js.Agent {
			js.Attribution = a
		}
		if h, ok := av.HostLinks[js.ID]; ok && !js.Agent {
			js.HostLinks, js.TrafficSource = h, store.SourceFabricCounters
			js.Total = store.Traffic{Bytes: h.Sent}
		}
	}
	if !js.Agent && js.Scheduler != nil && js.TrafficSource == "" {
		js.TrafficSource = store.SourceFabricCounters
	}
	return js
}
