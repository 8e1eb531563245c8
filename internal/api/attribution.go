package api

import (
	"cmp"
	"context"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/netloom/netloom/internal/analysis"
	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/ingest"
	"github.com/netloom/netloom/internal/store"
)

// NodeMapper maps node names (as agents and the scheduler use them) to
// host adapter LIDs; analysis.NodeMap is one.
type NodeMapper interface {
	LID(name string) (fabric.LID, error)
}

// AttributionOptions feed the attribution endpoints: the jobs held live
// (merged with the scheduler's) and the node map in force. Either may
// return nil.
type AttributionOptions struct {
	Jobs  func() *ingest.Live
	Nodes func() NodeMapper
	// Model bounds the what-if predictions (GET /jobs/{job}/model).
	Model ModelOptions
	// Observed: sFlow's flows, for attribution by observed shares (ecmp.go).
	Observed ObservedOptions
}

// ServeAttribution adds the endpoints that join jobs and links
// (docs/api.md, "Jobs on links").
func (s *Server) ServeAttribution(opt AttributionOptions) {
	a := &attribAPI{s: s, opt: opt}
	s.userRoute("GET /api/v1/links/{link}/jobs", a.linkJobs)
	s.userRoute("GET /api/v1/links/{link}/jobs/{job}/pairs", a.linkPairs)
	s.userRoute("GET /api/v1/jobs/{job}/links", a.jobLinks)
	s.userRoute("GET /api/v1/jobs/{job}/why", a.why)
	s.route("GET /api/v1/hotspots", a.hotspots)
	a.servePlacement()
	a.serveModel()
}

type attribAPI struct {
	s     *Server
	opt   AttributionOptions
	model *modelRunner
}

// linkEnds names a link by both ends.
type linkEnds struct {
	ID       string         `json:"id"`
	A        fabric.PortRef `json:"a"`
	B        fabric.PortRef `json:"b"`
	AName    string         `json:"a_name,omitempty"` // the ends' port names (fabric.Link)
	BName    string         `json:"b_name,omitempty"`
	Capacity float64        `json:"capacity_bytes_per_second"`
}

// dirJob is one job's traffic over one link direction: the link by both
// ends, the direction by its sending end.
type dirJob struct {
	Job         string         `json:"job"`
	User        string         `json:"user,omitempty"`
	Link        linkEnds       `json:"link"`
	Direction   fabric.GUID    `json:"direction"` // the sending end's GUID
	From        fabric.PortRef `json:"from"`
	To          fabric.PortRef `json:"to"`
	FromName    string         `json:"from_description"`
	ToName      string         `json:"to_description"`
	Bytes       uint64         `json:"bytes"`
	Utilization float64        `json:"utilization_pct"` // of capacity over the range
	// Anonymized: another user's job, shown to a user only as "other-N",
	// with its bytes rounded (BytesRounded, see coarsen).
	Anonymized   bool `json:"anonymized,omitempty"`
	BytesRounded bool `json:"bytes_rounded,omitempty"`
	// Start and End: when the job ran (End zero while it runs), so that a
	// reader can tell the jobs that ran at the same time from those whose
	// traffic merely lies in the same range. Left out for other users' jobs.
	Start time.Time `json:"start,omitzero"`
	End   time.Time `json:"end,omitzero"`
	// OverlapSeconds (why's others): how long the job ran at the same
	// time as the job asked about.
	OverlapSeconds *float64 `json:"overlap_seconds,omitempty"`
	// Ran and InRangeSeconds (why's not_overlapping): whether the job ran
	// "before" or "after" the job asked about, and for how long it ran
	// inside the range (0 when only its bytes, attributed at the sweep
	// after its end, lie there).
	Ran            string   `json:"ran,omitempty"`
	InRangeSeconds *float64 `json:"in_range_seconds,omitempty"`
	// logical: the job's bytes are the application's calls, collectives
	// among them (the consistency check names it as a likely cause).
	logical    bool
	splitModel // how its bytes were split over equal-cost paths (ecmp.go)
}

// roundBytes rounds b to two significant digits, half up (123,456 is
// 120,000; below 100 it is exact). Other users' jobs are numbered
// "other-N" afresh in every answer, but an exact byte count is a
// fingerprint that would tell the same job apart across answers, links and
// ranges; two digits still say how much of a link it takes.
func roundBytes(b uint64) uint64 {
	if b < 100 {
		return b
	}
	p := uint64(1)
	for b/p >= 100 {
		p *= 10
	}
	q := b / p
	if b%p >= p/2 {
		q++
	}
	if q > math.MaxUint64/p { // only within 5% of 2^64: round down instead
		q--
	}
	return q * p
}

// coarsen rounds an anonymized job's bytes, and its utilization with
// them, which would otherwise give the exact bytes back.
func coarsen(d *dirJob, seconds float64) {
	if !d.Anonymized {
		return
	}
	d.Bytes = roundBytes(d.Bytes)
	d.Utilization = utilization(d.Bytes, d.Link.Capacity, seconds)
	d.BytesRounded = true
	d.Start, d.End = time.Time{}, time.Time{}
}

func coarsenAll(ds []dirJob, seconds float64) {
	for i := range ds {
		coarsen(&ds[i], seconds)
	}
}

func ends(l *fabric.Link) linkEnds {
	return linkEnds{ID: l.ID(), A: l.A, B: l.B, AName: l.AName, BName: l.BName, Capacity: l.Capacity()}
}

func describe(t *fabric.Topology, p fabric.PortRef) string {
	if n, ok := t.Node(p.GUID); ok {
		return n.Description
	}
	return ""
}

// newDirJob names the direction leaving port from; ok is false when the
// port has no link in t.
func newDirJob(t *fabric.Topology, from fabric.PortRef, job string, bytes uint64, seconds float64) (dirJob, bool) {
	l, ok := t.LinkAt(from)
	if !ok {
		return dirJob{}, false
	}
	to, _ := t.Peer(from)
	d := dirJob{Job: job, Link: ends(l), Direction: from.GUID, From: from, To: to, FromName: describe(t, from),
		ToName: describe(t, to), Bytes: bytes}
	d.Utilization = utilization(bytes, l.Capacity(), seconds)
	return d, true
}

func utilization(bytes uint64, capacity, seconds float64) float64 {
	if capacity <= 0 || seconds <= 0 {
		return 0
	}
	return 100 * float64(bytes) / (capacity * seconds)
}

// routesAndNodes are what attributing traffic to links needs: the routes
// of view v and the node map in force (503 while there is none).
func (a *attribAPI) routesAndNodes(ctx context.Context, v *view) (*fabric.Routes, NodeMapper, error) {
	routes, err := a.s.routes(ctx, v)
	if err != nil {
		return nil, nil, err
	}
	var nodes NodeMapper
	if a.opt.Nodes != nil {
		nodes = a.opt.Nodes()
	}
	if nodes == nil {
		return nil, nil, &httpError{http.StatusServiceUnavailable, "no_node_map", "node names are not mapped to the fabric yet"}
	}
	return routes, nodes, nil
}

// summary finds a job's summary: live first, else stored.
func (a *attribAPI) summary(ctx context.Context, id string) (*store.JobSummary, error) {
	return a.s.jobSummary(ctx, id)
}

// jobInfo is what the link answers need of a job beside its bytes: its
// user, when it ran, and whether its bytes are the logical view of
// collectives.
type jobInfo struct {
	User    string
	Span    analysis.Span
	Logical bool
}

// jobInfos looks up the jobs of ids (unknown ones are left out).
func (a *attribAPI) jobInfos(ctx context.Context, ids map[string]bool) map[string]jobInfo {
	out := map[string]jobInfo{}
	for id := range ids {
		if js, err := a.summary(ctx, id); err == nil {
			out[id] = infoOf(js)
		}
	}
	return out
}

func infoOf(js *store.JobSummary) jobInfo {
	sp := analysis.Span{Start: js.Start}
	if js.State == store.JobFinished {
		sp.End = js.End
		if sp.End.IsZero() {
			sp.End = js.Updated
		}
	}
	return jobInfo{User: js.User, Span: sp, Logical: js.TrafficModel != store.TrafficPhysical && js.Traffic.Coll.Bytes > 0}
}

// measured is what the fabric's counters saw over one direction in a
// range: the sending port's transmit counter, else the receiving port's
// receive counter.
type measured struct {
	Bytes    uint64 `json:"bytes"`
	XmitWait uint64 `json:"xmit_wait"`
	Measured bool   `json:"measured"`
}

func measure(samples map[fabric.PortRef][]fabric.PortSample, from, to fabric.PortRef) measured {
	var m measured
	if xs, ok := samples[from]; ok && len(xs) > 0 {
		for i := range xs {
			m.Bytes += xs[i].Delta[fabric.XmitData]
			m.XmitWait += xs[i].Delta[fabric.XmitWait]
		}
		m.Measured = true
	} else if ys, ok := samples[to]; ok && len(ys) > 0 {
		for i := range ys {
			m.Bytes += ys[i].Delta[fabric.RcvData]
		}
		m.Measured = true
	}
	return m
}

// inRange is the samples of each port whose time lies in [from, to].
// sampleSpacing is the median time between a port's consecutive samples,
// over all the ports given (0 with fewer than two samples of a port).
func sampleSpacing(samples map[fabric.PortRef][]fabric.PortSample) time.Duration {
	var gaps []time.Duration
	for _, xs := range samples {
		for i := 1; i < len(xs); i++ {
			if d := xs[i].Time.Sub(xs[i-1].Time); d > 0 {
				gaps = append(gaps, d)
			}
		}
	}
	if len(gaps) == 0 {
		return 0
	}
	slices.Sort(gaps)
	return gaps[len(gaps)/2]
}

func inRange(samples map[fabric.PortRef][]fabric.PortSample, from, to time.Time) map[fabric.PortRef][]fabric.PortSample {
	out := make(map[fabric.PortRef][]fabric.PortSample, len(samples))
	for p, xs := range samples {
		var in []fabric.PortSample
		for _, x := range xs {
			if !x.Time.Before(from) && !x.Time.After(to) {
				in = append(in, x)
			}
		}
		if len(in) > 0 {
			out[p] = in
		}
	}
	return out
}

// counterWindow is what the counters of direction from -> to said over
// [from, to] as measure reads them (the sending port's transmit
// counter, else the receiving port's receive counter), with how much of
// the window their samples cover, up to now.
func counterWindow(samples map[fabric.PortRef][]fabric.PortSample, src, dst fabric.PortRef, from, to, now time.Time) analysis.CounterWindow {
	in := inRange(samples, from, to)
	xs, c := in[src], fabric.XmitData
	if len(xs) == 0 {
		xs, c = in[dst], fabric.RcvData
	}
	end := to
	if now.Before(end) {
		end = now
	}
	w := analysis.CounterWindow{Swept: len(xs) > 0, Samples: len(xs)}
	if end.After(from) {
		w.Length = end.Sub(from)
	}
	for i := range xs {
		x := &xs[i]
		w.Bytes += x.Delta[c]
		w.Saturated = w.Saturated || x.Saturated
		w.Reset = w.Reset || x.Reset
		lo, hi := x.Time.Add(-x.Span), x.Time
		if lo.Before(from) {
			lo = from
		}
		if hi.After(end) {
			hi = end
		}
		if hi.After(lo) {
			w.Covered += hi.Sub(lo)
		}
	}
	return w
}

// directionJSON is one direction of a link over a range: what the counters
// measured, what monitored jobs explain, and the jobs by bytes.
type directionJSON struct {
	From                   fabric.PortRef `json:"from"`
	To                     fabric.PortRef `json:"to"`
	Direction              fabric.GUID    `json:"direction"`
	FromName               string         `json:"from_description"`
	ToName                 string         `json:"to_description"`
	Measured               measured       `json:"measured"`
	MeasuredUtilization    float64        `json:"measured_utilization_pct"`
	Monitored              uint64         `json:"monitored_bytes"`
	MonitoredUtilization   float64        `json:"monitored_utilization_pct"`
	Unmonitored            uint64         `json:"unmonitored_bytes"`
	Explained              *float64       `json:"explained_pct"` // null when nothing was measured
	Jobs                   []dirJob       `json:"jobs"`
	UnmonitoredUtilization float64        `json:"unmonitored_utilization_pct"`
	// MonitoredRounded: monitored_bytes and what follows from it sum the
	// jobs as shown, some of them rounded (coarsenDirection).
	MonitoredRounded bool `json:"monitored_rounded,omitempty"`
	// Check is the consistency check of explained_pct: whether what the
	// jobs put on the direction fits in what its counters measured,
	// within counter granularity and timing, else the likely cause.
	Check analysis.ExplainedCheck `json:"check"`
	// What the check weighs beside the bytes (checkInput).
	check      analysis.ExplainedInput
	splitModel // how the jobs' bytes were split over equal-cost paths (ecmp.go)
}

// total sets the monitored bytes to the sum of d's jobs, and the figures
// that follow from them and the measured bytes.
func (d *directionJSON) total(capacity, seconds float64) {
	d.Monitored = 0
	for _, j := range d.Jobs {
		d.Monitored += j.Bytes
	}
	d.MonitoredUtilization = utilization(d.Monitored, capacity, seconds)
	d.Explained, d.Unmonitored = nil, 0
	if pct, ok := analysis.Explained(d.Monitored, d.Measured.Bytes); ok && d.Measured.Measured {
		d.Explained = &pct
		if d.Measured.Bytes > d.Monitored {
			d.Unmonitored = d.Measured.Bytes - d.Monitored
		}
	}
	d.UnmonitoredUtilization = utilization(d.Unmonitored, capacity, seconds)
	in := d.check
	in.Monitored, in.Rounded, in.Logical = d.Monitored, d.MonitoredRounded, nil
	for _, j := range d.Jobs {
		if j.logical {
			name := "job " + j.Job
			if j.Anonymized {
				name = "another user's job"
			}
			in.Logical = append(in.Logical, name)
		}
	}
	d.Check = analysis.CheckExplained(in)
}

// coarsenDirection rounds the anonymized jobs of d and sums its monitored
// bytes again from the jobs as shown: the exact total less the user's own
// job would give the others' exact bytes back.
// It sums the direction again in any case: the check names jobs as
// shown.
func coarsenDirection(d *directionJSON, capacity, seconds float64) {
	for i := range d.Jobs {
		if d.Jobs[i].Anonymized {
			d.MonitoredRounded = true
			coarsen(&d.Jobs[i], seconds)
		}
	}
	d.total(capacity, seconds)
}

// splitLink builds both directions of l over [from, to]; got is the
// jobs' bytes on the link over the range when already read (checkLink),
// else nil. info holds what is known of jobs (filled in as met); fab is
// what the check's rule for a fabric whose counters carry none of the
// jobs' traffic weighs (flatFabric).
func (a *attribAPI) splitLink(ctx context.Context, t *fabric.Topology, l *fabric.Link, from, to time.Time, got []store.LinkJobBytes, info map[string]jobInfo, fab *analysis.FlatFabric) ([2]directionJSON, []dirJob, error) {
	var out [2]directionJSON
	seconds := to.Sub(from).Seconds()
	if got == nil {
		var err error
		if got, err = a.s.opt.Store.LinkJobs(ctx, []fabric.PortRef{l.A, l.B}, from, to); err != nil {
			return out, nil, err
		}
	}
	obs, err := a.observe(ctx, t, from, to)
	if err != nil {
		return out, nil, err
	}
	got, models := obs.apply(ctx, got)
	// The counters over the range widened by the timing slack, for the
	// consistency check; the range's own are a part of them. The slack
	// follows the sweeps as the samples show them, not this daemon's
	// setting: an API-role daemon reads what collectors swept, and every
	// daemon must give the same answer.
	ports := []fabric.PortRef{l.A, l.B}
	sweep := a.s.opt.SweepInterval
	narrow, err := a.s.opt.Store.PortSamples(ctx, ports, from, to)
	if err != nil {
		return out, nil, err
	}
	if s := sampleSpacing(narrow); s > 0 {
		sweep = s
	}
	wideFrom, wideTo := from.Add(-analysis.WidenBefore(sweep)), to.Add(analysis.WidenAfter(sweep))
	wide, err := a.s.opt.Store.PortSamples(ctx, []fabric.PortRef{l.A, l.B}, wideFrom, wideTo)
	if err != nil {
		return out, nil, err
	}
	samples := inRange(wide, from, to)
	missing := map[string]bool{}
	for _, x := range got {
		if _, ok := info[x.Job]; !ok {
			missing[x.Job] = true
		}
	}
	for id, j := range a.jobInfos(ctx, missing) {
		info[id] = j
	}
	now := time.Now()
	all := []dirJob{}
	for i, e := range [2][2]fabric.PortRef{{l.A, l.B}, {l.B, l.A}} {
		d := directionJSON{From: e[0], To: e[1], Direction: e[0].GUID, FromName: describe(t, e[0]), ToName: describe(t, e[1]), Jobs: []dirJob{}}
		for _, x := range got {
			if x.Port != e[0] {
				continue
			}
			dj, _ := newDirJob(t, e[0], x.Job, x.Bytes, seconds)
			ji := info[x.Job]
			dj.User, dj.logical, dj.Start, dj.End = ji.User, ji.Logical, ji.Span.Start, ji.Span.End
			dj.splitModel = models[store.LinkJobBytes{Job: x.Job, Port: e[0]}]
			d.Jobs = append(d.Jobs, dj)
		}
		sortDirJobs(d.Jobs)
		all = append(all, d.Jobs...)
		d.splitModel = obs.dirModel(ctx, got, e[0])
		d.Measured = measure(samples, e[0], e[1])
		d.MeasuredUtilization = utilization(d.Measured.Bytes, l.Capacity(), seconds)
		d.check = analysis.ExplainedInput{Sweep: sweep,
			Range: counterWindow(wide, e[0], e[1], from, to, now), Wide: counterWindow(wide, e[0], e[1], wideFrom, wideTo, now), Fabric: fab}
		d.check.Host, d.check.HostNodes, d.check.HostNodesHidden = a.hostEnd(ctx, t, e)
		d.total(l.Capacity(), seconds)
		out[i] = d
	}
	sortDirJobs(all)
	return out, all, nil
}

// hostEnd names the host adapter end of a direction (either end), with
// the node names mapped to it for an administrator; "" for a link
// between switches.
// A regular user is not told which names map where (hidden true).
func (a *attribAPI) hostEnd(ctx context.Context, t *fabric.Topology, e [2]fabric.PortRef) (host string, names []analysis.MappedName, hidden bool) {
	for _, p := range e {
		n, ok := t.Node(p.GUID)
		if !ok || n.Type == fabric.Switch {
			continue
		}
		if !isAdmin(ctx) {
			return n.Description, nil, true
		}
		if a.opt.Nodes != nil {
			if nm, ok := a.opt.Nodes().(interface {
				NamesOf(fabric.LID) []analysis.MappedName
			}); ok {
				names = nm.NamesOf(n.PortLID(p.Port))
			}
		}
		return n.Description, names, false
	}
	return "", nil, false
}

func sortDirJobs(l []dirJob) {
	slices.SortStableFunc(l, func(x, y dirJob) int {
		if c := cmp.Compare(y.Bytes, x.Bytes); c != 0 {
			return c
		}
		return cmp.Compare(x.Job, y.Job)
	})
}

func (a *attribAPI) linkJobs(r *http.Request) (any, error) {
	v, err := a.s.viewAt(r)
	if err != nil {
		return nil, err
	}
	from, to, err := timeRange(r)
	if err != nil {
		return nil, err
	}
	owners := a.s.owners(r.Context())
	// A user's check reads the link's jobs; the answer reuses them.
	l, got, err := a.s.visibleLink(r.Context(), v, r.PathValue("link"), from, to, owners)
	if err != nil {
		return nil, err
	}
	fab, err := a.flatFabric(r.Context(), v.topo, from, to)
	if err != nil {
		return nil, err
	}
	dirs, all, err := a.splitLink(r.Context(), v.topo, l, from, to, got, map[string]jobInfo{}, fab)
	if err != nil {
		return nil, err
	}
	anon := newAnonymizer(r.Context(), owners)
	anon.applyAll(all)
	seconds := to.Sub(from).Seconds()
	coarsenAll(all, seconds)
	for i := range dirs {
		anon.applyAll(dirs[i].Jobs)
		coarsenDirection(&dirs[i], l.Capacity(), seconds)
	}
	return withRouteModel(v.topo, map[string]any{"link": ends(l), "from": from, "to": to, "seconds": to.Sub(from).Seconds(),
		"directions": dirs, "jobs": all}), nil
}

// jobTimeRange is the range of a job's questions: from/to, defaulting to
// its start and end (or now).
func jobTimeRange(r *http.Request, js *store.JobSummary) (time.Time, time.Time, error) {
	return jobRange(r, &store.Job{JobSummary: *js})
}

// lifeRange is a job's life: its start to its end (now while it runs),
// or to its last attributed sweep where that came later (a job's last
// interval is attributed at the sweep after it ended), in whole seconds.
func lifeRange(js *store.JobSummary) (from, to time.Time) {
	from, to = js.Start, time.Now()
	if js.State == store.JobFinished {
		to = js.End
		if to.IsZero() {
			to = js.Updated
		}
		if js.Attribution != nil && js.Attribution.Updated.After(to) {
			to = js.Attribution.Updated
		}
	}
	return from.Truncate(time.Second), to.Truncate(time.Second).Add(time.Second)
}

// jobLinksQuery is what the job's link questions share: the job, the
// fabric view, the range (default the job's life) and its heaviest link
// directions, at most limit (default def, at most hi).
type jobLinksQuery struct {
	job      *store.JobSummary
	view     *view
	from, to time.Time
	links    []store.LinkJobBytes
	// total is how many directions the job crossed over the range, of
	// which links are the limit heaviest (cut: fewer than total).
	total, limit int
	// life: the range is the job's life (none was asked for), and links
	// its running totals.
	life bool
}

// listed says how a job's list of link directions was cut: every answer
// that holds one says its total and whether it is cut.
func (q *jobLinksQuery) listed(m map[string]any) map[string]any {
	return listed(m, q.total, q.limit)
}

func (a *attribAPI) jobLinksQuery(r *http.Request, def, hi int) (*jobLinksQuery, error) {
	js, err := a.s.visibleSummary(r.Context(), r.PathValue("job"))
	if err != nil {
		return nil, err
	}
	v, err := a.s.viewAt(r)
	if err != nil {
		return nil, err
	}
	limit, err := intParam(r, "limit", def, 1, hi)
	if err != nil {
		return nil, err
	}
	from, to, err := jobTimeRange(r, js)
	if err != nil {
		return nil, err
	}
	// Without a range asked for, the job's own links are its running
	// totals: traffic is attributed at the sweep after it was reported, so a
	// finished job's last interval (all of a job shorter than a sweep
	// interval) lies after its end. The range reaches that sweep, for the
	// links' load and the other jobs on them.
	//
	// The range is in whole seconds, so that a page can open a link over
	// exactly the same range (and show the same figures for it).
	lf, lt := from, to
	life := false
	if q := r.URL.Query(); q.Get("from") == "" && q.Get("to") == "" {
		life, lf, lt = true, time.Time{}, time.Time{}
		if !js.End.IsZero() && js.Attribution != nil && js.Attribution.Intervals > 0 && js.Attribution.Updated.After(to) {
			to = js.Attribution.Updated
		}
		from = from.Truncate(time.Second)
		if t := to.Truncate(time.Second); t.Before(to) {
			to = t.Add(time.Second)
		}
	}
	// One more than asked for tells whether the list is cut; only then
	// are they all counted.
	got, err := a.s.opt.Store.JobLinks(r.Context(), js.ID, lf, lt, limit+1)
	if err != nil {
		return nil, err
	}
	total := len(got)
	if len(got) > limit {
		if total, err = a.s.opt.Store.JobLinkCount(r.Context(), js.ID, lf, lt); err != nil {
			return nil, err
		}
		got = got[:limit]
	}
	return &jobLinksQuery{job: js, view: v, from: from, to: to, links: got, total: total, limit: limit, life: life}, nil
}

func (a *attribAPI) jobLinks(r *http.Request) (any, error) {
	q, err := a.jobLinksQuery(r, 20, 100000)
	if err != nil {
		return nil, err
	}
	js, v, from, to, got := q.job, q.view, q.from, q.to, q.links
	obs, err := a.observe(r.Context(), v.topo, from, to)
	if err != nil {
		return nil, err
	}
	got, models := obs.apply(r.Context(), got)
	links := []dirJob{}
	for _, x := range got {
		if dj, ok := newDirJob(v.topo, x.Port, js.ID, x.Bytes, to.Sub(from).Seconds()); ok {
			dj.User = js.User
			dj.splitModel = models[store.LinkJobBytes{Job: x.Job, Port: x.Port}]
			links = append(links, dj)
		}
	}
	return withRouteModel(v.topo, q.listed(map[string]any{"job": js.ID, "from": from, "to": to, "seconds": to.Sub(from).Seconds(),
		"attribution": js.Attribution, "traffic_source": js.TrafficSource, "traffic_model": js.TrafficModel, "links": links})), nil
}

// pairJSON is one rank (or node) pair whose traffic crosses a direction.
type pairJSON struct {
	Src     int    `json:"src_rank"`
	Dst     int    `json:"dst_rank"`
	SrcNode string `json:"src_node"`
	DstNode string `json:"dst_node"`
	Bytes   uint64 `json:"bytes"`
}

// linkPairs splits a link's traffic of one job by rank pair: the pairs
// whose route crosses each direction, from the job's rank matrix when its
// ranks sent per-peer rows, else by node pair.
func (a *attribAPI) linkPairs(r *http.Request) (any, error) {
	v, err := a.s.viewAt(r)
	if err != nil {
		return nil, err
	}
	j, err := a.s.visibleJob(r.Context(), r.PathValue("job"))
	if err != nil {
		return nil, err
	}
	limit, err := intParam(r, "limit", 1000, 1, 1_000_000)
	if err != nil {
		return nil, err
	}
	// A user sees the pairs on a link their jobs crossed while this one ran
	// (to its last attributed sweep), as the link's other answers do.
	from, to := lifeRange(&j.JobSummary)
	l, _, err := a.s.visibleLink(r.Context(), v, r.PathValue("link"), from, to, a.s.owners(r.Context()))
	if err != nil {
		return nil, err
	}
	routes, nodes, err := a.routesAndNodes(r.Context(), v)
	if err != nil {
		return nil, err
	}
	// crosses[src node][dst node]: bit 0 the route crosses A->B, bit 1 B->A.
	type key struct{ s, d string }
	cache := map[key]uint8{}
	unmapped := map[string]bool{}
	var routeErrs []string
	crosses := func(s, d string) uint8 {
		k := key{s, d}
		if m, ok := cache[k]; ok {
			return m
		}
		var m uint8
		sl, err1 := nodes.LID(s)
		dl, err2 := nodes.LID(d)
		if err1 != nil {
			unmapped[s] = true
		}
		if err2 != nil {
			unmapped[d] = true
		}
		if err1 == nil && err2 == nil {
			rt, err := routes.Path(sl, dl)
			if err != nil {
				if len(routeErrs) < 5 {
					routeErrs = append(routeErrs, err.Error())
				}
			} else {
				for _, h := range rt.Hops {
					p := fabric.PortRef{GUID: h.GUID, Port: h.Port}
					if p == l.A {
						m |= 1
					} else if p == l.B {
						m |= 2
					}
				}
			}
		}
		cache[k] = m
		return m
	}
	nodeOf := make(map[int]string, len(j.Processes))
	perPeer := false
	for i := range j.Processes {
		nodeOf[j.Processes[i].Rank] = j.Processes[i].Node
		perPeer = perPeer || j.Processes[i].Peers.Len() > 0
	}
	var dirs [2][]pairJSON
	var totals [2]uint64
	add := func(m uint8, p pairJSON) {
		for i := range 2 {
			if m&(1<<i) != 0 {
				dirs[i] = append(dirs[i], p)
				totals[i] += p.Bytes
			}
		}
	}
	level := "rank"
	truncated := false
	if perPeer {
		for i := range j.Processes {
			p := &j.Processes[i]
			truncated = truncated || p.PeersTruncated
			for peer, cl := range p.Peers.Traffic() {
				dn, ok := nodeOf[peer]
				b := cl.Total().Bytes
				if !ok || dn == p.Node || b == 0 {
					continue
				}
				add(crosses(p.Node, dn), pairJSON{Src: p.Rank, Dst: peer, SrcNode: p.Node, DstNode: dn, Bytes: b})
			}
		}
	} else {
		level = "node"
		sum := map[key]uint64{}
		for i := range j.Processes {
			p := &j.Processes[i]
			for t := range p.ToNodes.All() {
				if t.Node != p.Node {
					sum[key{p.Node, t.Node}] += t.Classes.Total().Bytes
				}
			}
		}
		for k, b := range sum {
			if b > 0 {
				add(crosses(k.s, k.d), pairJSON{Src: -1, Dst: -1, SrcNode: k.s, DstNode: k.d, Bytes: b})
			}
		}
	}
	type dirOut struct {
		From      fabric.PortRef `json:"from"`
		To        fabric.PortRef `json:"to"`
		Direction fabric.GUID    `json:"direction"`
		Bytes     uint64         `json:"bytes"`
		Total     int            `json:"total_pairs"`
		Pairs     []pairJSON     `json:"pairs"`
	}
	var out []dirOut
	for i, e := range [2][2]fabric.PortRef{{l.A, l.B}, {l.B, l.A}} {
		ps := dirs[i]
		slices.SortFunc(ps, func(x, y pairJSON) int {
			if c := cmp.Compare(y.Bytes, x.Bytes); c != 0 {
				return c
			}
			if c := cmp.Compare(x.Src, y.Src); c != 0 {
				return c
			}
			if c := cmp.Compare(x.Dst, y.Dst); c != 0 {
				return c
			}
			return cmp.Compare(x.SrcNode+" "+x.DstNode, y.SrcNode+" "+y.DstNode)
		})
		n := len(ps)
		if len(ps) > limit {
			ps = ps[:limit]
		}
		if ps == nil {
			ps = []pairJSON{}
		}
		out = append(out, dirOut{From: e[0], To: e[1], Direction: e[0].GUID, Bytes: totals[i], Total: n, Pairs: ps})
	}
	um := slices.Sorted(func(yield func(string) bool) {
		for n := range unmapped {
			if !yield(n) {
				return
			}
		}
	})
	if um == nil {
		um = []string{}
	}
	return withRouteModel(v.topo, map[string]any{"job": j.ID, "link": ends(l), "level": level, "peers_truncated": truncated,
		"cumulative": true, "unmapped_nodes": um, "route_errors": routeErrs, "directions": out}), nil
}

func floatParam(r *http.Request, name string, def, lo, hi float64) (float64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f >= lo && f <= hi) { // NaN fails both comparisons
		return 0, badParam(name, "%q: want a number in %g..%g", v, lo, hi)
	}
	return f, nil
}

// hotspots lists link directions whose utilization (by the counters, or by
// the monitored jobs' attributed traffic, whichever is higher) or XmitWait
// passes a threshold over a recent window, with the jobs responsible.
func (a *attribAPI) hotspots(r *http.Request) (any, error) {
	v, err := a.s.viewAt(r)
	if err != nil {
		return nil, err
	}
	minUtil, err := floatParam(r, "min_utilization", 50, 0, 1000)
	if err != nil {
		return nil, err
	}
	minWait, err := floatParam(r, "min_xmit_wait", 0, 0, 1e18)
	if err != nil {
		return nil, err
	}
	limit, err := intParam(r, "limit", 50, 1, 100000)
	if err != nil {
		return nil, err
	}
	window := 3 * a.s.opt.SweepInterval
	if w := r.URL.Query().Get("window"); w != "" {
		if window, err = time.ParseDuration(w); err != nil || window <= 0 {
			return nil, badParam("window", "%q: want a positive duration", w)
		}
	}
	to := v.at
	from := to.Add(-window)
	latest, err := a.s.latest(r.Context(), v)
	if err != nil {
		return nil, err
	}
	got, err := a.s.opt.Store.LinkJobs(r.Context(), nil, from, to)
	if err != nil {
		return nil, err
	}
	obs, err := a.observe(r.Context(), v.topo, from, to)
	if err != nil {
		return nil, err
	}
	got, models := obs.apply(r.Context(), got)
	ids := map[string]bool{}
	for _, x := range got {
		ids[x.Job] = true
	}
	info := a.jobInfos(r.Context(), ids)
	// Only the jobs that ran in the window: a job's last interval is
	// attributed at the sweep after it ended, which may fall in a window
	// that starts after it.
	now := time.Now()
	byPort := map[fabric.PortRef][]store.LinkJobBytes{}
	for _, x := range got {
		if j, ok := info[x.Job]; ok && !j.Span.Within(from, to, now) {
			continue
		}
		byPort[x.Port] = append(byPort[x.Port], x)
	}
	type hot struct {
		Link                 linkEnds       `json:"link"`
		Direction            fabric.GUID    `json:"direction"`
		From                 fabric.PortRef `json:"from"`
		To                   fabric.PortRef `json:"to"`
		FromName             string         `json:"from_description"`
		ToName               string         `json:"to_description"`
		MeasuredUtilization  float64        `json:"measured_utilization_pct"`
		MonitoredUtilization float64        `json:"monitored_utilization_pct"`
		Utilization          float64        `json:"utilization_pct"`
		XmitWait             uint64         `json:"xmit_wait"`
		Monitored            uint64         `json:"monitored_bytes"`
		Jobs                 []dirJob       `json:"jobs"`
		splitModel
	}
	seconds := window.Seconds()
	out := []hot{}
	for i := range v.topo.Links {
		l := &v.topo.Links[i]
		for k, d := range linkDirections(v.topo, l, latest) {
			from := [2]fabric.PortRef{l.A, l.B}[k]
			h := hot{Link: ends(l), Direction: from.GUID, From: d.From, To: d.To, FromName: d.FromName, ToName: d.ToName,
				MeasuredUtilization: d.Utilization, XmitWait: d.XmitWait, Jobs: []dirJob{}}
			for _, x := range byPort[from] {
				dj, _ := newDirJob(v.topo, from, x.Job, x.Bytes, seconds)
				ji := info[x.Job]
				dj.User, dj.Start, dj.End = ji.User, ji.Span.Start, ji.Span.End
				dj.splitModel = models[store.LinkJobBytes{Job: x.Job, Port: from}]
				h.Jobs = append(h.Jobs, dj)
				h.Monitored += x.Bytes
			}
			h.MonitoredUtilization = utilization(h.Monitored, l.Capacity(), seconds)
			h.Utilization = max(h.MeasuredUtilization, h.MonitoredUtilization)
			overUtil := h.Utilization >= minUtil && (minUtil > 0 || h.Utilization > 0)
			overWait := minWait > 0 && float64(h.XmitWait) >= minWait
			if !overUtil && !overWait {
				continue
			}
			sortDirJobs(h.Jobs)
			h.splitModel = obs.dirModel(r.Context(), got, from)
			out = append(out, h)
		}
	}
	slices.SortStableFunc(out, func(x, y hot) int {
		if c := cmp.Compare(y.Utilization, x.Utilization); c != 0 {
			return c
		}
		return cmp.Compare(y.XmitWait, x.XmitWait)
	})
	total := len(out)
	if len(out) > limit {
		out = out[:limit]
	}
	collisions, err := obs.collisions(r.Context(), "")
	if err != nil {
		return nil, err
	}
	return withRouteModel(v.topo, listed(map[string]any{"at": v.at, "from": from, "to": to, "min_utilization": minUtil, "min_xmit_wait": minWait,
		"hotspots": out, "collisions": collisions}, total, limit)), nil
}

// why answers "why is my job slow": the links the job crosses (its heaviest
// first), how loaded they were by everyone over the job's range, and who
// else loaded them. A job without an agent gets its nodes' host links.
func (a *attribAPI) why(r *http.Request) (any, error) {
	q, err := a.jobLinksQuery(r, 10, 10000)
	if err != nil {
		return nil, err
	}
	js, v, from, to, got := q.job, q.view, q.from, q.to, q.links
	obs, err := a.observe(r.Context(), v.topo, from, to)
	if err != nil {
		return nil, err
	}
	got, _ = obs.apply(r.Context(), got)
	type linkWhy struct {
		directionJSON
		Link        linkEnds `json:"link"`
		JobBytes    uint64   `json:"job_bytes"`
		JobShare    float64  `json:"job_share_pct"` // of the monitored bytes on it
		Utilization float64  `json:"utilization_pct"`
		// Others are the other jobs on the direction that ran at the same
		// time as this one (overlap_seconds: for how long); NotOverlapping
		// those whose traffic lies in the range but that ran before or
		// after it (a job's last interval is attributed at the sweep after
		// it ended): in the direction's jobs and monitored bytes, since
		// the counters saw them, but never sharing it with this job.
		Others         []dirJob `json:"others"`
		NotOverlapping []dirJob `json:"not_overlapping"`
		// OthersBytes and NotOverlappingBytes sum each list as shown:
		// with the job's own bytes in the range, they are the monitored
		// bytes, so that the job's share leaves the rest to the jobs
		// named.
		OthersBytes         uint64 `json:"others_bytes"`
		NotOverlappingBytes uint64 `json:"not_overlapping_bytes"`
	}
	out := []linkWhy{}
	seconds := to.Sub(from).Seconds()
	others := map[string]uint64{}
	anon := newAnonymizer(r.Context(), a.s.owners(r.Context()))
	info := map[string]jobInfo{js.ID: infoOf(js)}
	now := time.Now()
	fab, err := a.flatFabric(r.Context(), v.topo, from, to)
	if err != nil {
		return nil, err
	}
	for _, x := range got {
		l, ok := v.topo.LinkAt(x.Port)
		if !ok {
			continue
		}
		dirs, _, err := a.splitLink(r.Context(), v.topo, l, from, to, nil, info, fab)
		if err != nil {
			return nil, err
		}
		d := dirs[0]
		if d.From != x.Port {
			d = dirs[1]
		}
		w := linkWhy{directionJSON: d, Link: ends(l), JobBytes: x.Bytes, Others: []dirJob{}, NotOverlapping: []dirJob{}}
		var mine uint64
		for _, o := range d.Jobs {
			if o.Job == js.ID {
				mine = o.Bytes
				continue
			}
			shown := o
			anon.apply(&shown)
			coarsen(&shown, seconds)
			oi, known := info[o.Job]
			ovFrom, ovTo, overlap := analysis.Overlap(info[js.ID].Span, oi.Span, now)
			if known && !overlap {
				// A job before or after this one: its bytes in the range
				// are its own, said with when it ran (another user's job
				// is not timed, as its start and end are left out).
				if !shown.Anonymized {
					shown.Ran = "after"
					if !oi.Span.Start.After(info[js.ID].Span.Start) {
						shown.Ran = "before"
					}
					sec := 0.0
					if f, t, ok := analysis.Overlap(oi.Span, analysis.Span{Start: from, End: to}, now); ok {
						sec = t.Sub(f).Round(100 * time.Millisecond).Seconds()
					}
					shown.InRangeSeconds = &sec
				}
				w.NotOverlapping = append(w.NotOverlapping, shown)
				w.NotOverlappingBytes += shown.Bytes
				continue
			}
			if overlap {
				sec := ovTo.Sub(ovFrom).Round(time.Second).Seconds()
				shown.OverlapSeconds = &sec
			}
			w.Others = append(w.Others, shown)
			w.OthersBytes += shown.Bytes
			// The sum over links adds the figures shown, so that it is no
			// more exact than they are.
			others[o.Job] += shown.Bytes
		}
		// Over the job's life, every byte of its running total on the
		// direction should lie in the range; what does not was attributed
		// outside the job's start and end (its nodes' clocks).
		if q.life && js.State == store.JobFinished && x.Bytes > mine {
			w.directionJSON.check.Outside = x.Bytes - mine
		}
		anon.applyAll(w.Jobs)
		coarsenDirection(&w.directionJSON, l.Capacity(), seconds)
		w.Utilization = max(w.MeasuredUtilization, w.MonitoredUtilization)
		if w.Monitored > 0 {
			w.JobShare = 100 * float64(x.Bytes) / float64(w.Monitored)
		}
		out = append(out, w)
	}
	type other struct {
		Job   string `json:"job"`
		User  string `json:"user,omitempty"`
		Bytes uint64 `json:"bytes"` // on the links this job crosses
		// Anonymized: another user's job, shown to a user as "other-N";
		// its bytes are the sum of its rounded bytes on each link.
		Anonymized   bool `json:"anonymized,omitempty"`
		BytesRounded bool `json:"bytes_rounded,omitempty"`
	}
	sharing := []other{}
	for id, b := range others {
		d := dirJob{Job: id, User: info[id].User}
		anon.apply(&d)
		sharing = append(sharing, other{Job: d.Job, User: d.User, Bytes: b, Anonymized: d.Anonymized, BytesRounded: d.Anonymized})
	}
	slices.SortFunc(sharing, func(x, y other) int {
		if c := cmp.Compare(y.Bytes, x.Bytes); c != 0 {
			return c
		}
		return cmp.Compare(x.Job, y.Job)
	})
	res := withRouteModel(v.topo, q.listed(map[string]any{"job": js.ID, "from": from, "to": to, "traffic_source": js.TrafficSource, "traffic_model": js.TrafficModel,
		"attribution": js.Attribution, "links": out, "sharing_jobs": sharing}))
	if res["collisions"], err = obs.collisions(r.Context(), js.ID); err != nil {
		return nil, err
	}
	if !js.Agent {
		res["host_links"], err = a.hostLinks(r.Context(), v, js, from, to)
		if err != nil {
			return nil, err
		}
	}
	return res, nil
}

// hostLinks is the host link of each of a job's scheduler nodes with what
// its counters measured over the range.
func (a *attribAPI) hostLinks(ctx context.Context, v *view, js *store.JobSummary, from, to time.Time) (any, error) {
	type host struct {
		Node     string   `json:"node"`
		Mapped   bool     `json:"mapped"`
		Link     linkEnds `json:"link,omitzero"`
		Sent     measured `json:"sent"`
		Received measured `json:"received"`
		SentUtil float64  `json:"sent_utilization_pct"`
		RecvUtil float64  `json:"received_utilization_pct"`
	}
	out := []host{}
	if js.Scheduler == nil {
		return out, nil
	}
	var nodes NodeMapper
	if a.opt.Nodes != nil {
		nodes = a.opt.Nodes()
	}
	seconds := to.Sub(from).Seconds()
	for _, name := range js.Scheduler.Nodes {
		h := host{Node: name}
		if nodes == nil {
			out = append(out, h)
			continue
		}
		lid, err := nodes.LID(name)
		if err != nil {
			out = append(out, h)
			continue
		}
		ca, ok := v.topo.PortByLID(lid)
		l, linked := v.topo.LinkAt(ca)
		if !ok || !linked {
			out = append(out, h)
			continue
		}
		sw, _ := v.topo.Peer(ca)
		samples, err := a.s.opt.Store.PortSamples(ctx, []fabric.PortRef{ca, sw}, from, to)
		if err != nil {
			return nil, err
		}
		h.Mapped, h.Link = true, ends(l)
		h.Sent, h.Received = measure(samples, ca, sw), measure(samples, sw, ca)
		h.SentUtil = utilization(h.Sent.Bytes, l.Capacity(), seconds)
		h.RecvUtil = utilization(h.Received.Bytes, l.Capacity(), seconds)
		out = append(out, h)
	}
	return out, nil
}

// withRouteModel adds to an answer resting on the fabric's routes how
// they were found, where they are a model rather than the switches'
// forwarding tables: "route_model": "lldp-shortest-path" on an Ethernet
// fabric, whose bytes are split evenly over equal-cost paths since the
// switches' hash is not known (docs/ethernet.md).
func withRouteModel(t *fabric.Topology, m map[string]any) map[string]any {
	if rm := t.RouteModel(); rm != "" {
		m["route_model"] = rm
	}
	return m
}
