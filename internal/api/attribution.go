package api

import (
	"cmp"
	"context"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

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
}

func coarsenAll(ds []dirJob, seconds float64) {
	for i := range ds {
		coarsen(&ds[i], seconds)
	}
}

func ends(l *fabric.Link) linkEnds {
	return linkEnds{ID: l.ID(), A: l.A, B: l.B, Capacity: l.Capacity()}
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

func (a *attribAPI) liveJobs() map[string]*store.Job {
	if a.opt.Jobs == nil {
		return nil
	}
	if l := a.opt.Jobs(); l != nil {
		return l.Jobs
	}
	return nil
}

// summary finds a job's summary: live first, else stored.
func (a *attribAPI) summary(ctx context.Context, id string) (*store.JobSummary, error) {
	return a.s.jobSummary(ctx, id)
}

// visibleSummary is summary for a job the principal may see, else 404.
func (a *attribAPI) visibleSummary(ctx context.Context, id string) (*store.JobSummary, error) {
	js, err := a.summary(ctx, id)
	if err == nil && !canSeeJob(ctx, js) {
		return nil, jobHidden(id)
	}
	return js, err
}

// users names the user of each job id (for ranking entries).
func (a *attribAPI) users(ctx context.Context, ids map[string]bool) map[string]string {
	out := map[string]string{}
	for id := range ids {
		if js, err := a.summary(ctx, id); err == nil {
			out[id] = js.User
		}
	}
	return out
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
	if d.Measured.Measured && d.Measured.Bytes > 0 {
		pct := min(100, 100*float64(d.Monitored)/float64(d.Measured.Bytes))
		d.Explained = &pct
		if d.Measured.Bytes > d.Monitored {
			d.Unmonitored = d.Measured.Bytes - d.Monitored
		}
	}
	d.UnmonitoredUtilization = utilization(d.Unmonitored, capacity, seconds)
}

// coarsenDirection rounds the anonymized jobs of d and sums its monitored
// bytes again from the jobs as shown: the exact total less the user's own
// job would give the others' exact bytes back.
func coarsenDirection(d *directionJSON, capacity, seconds float64) {
	for i := range d.Jobs {
		if d.Jobs[i].Anonymized {
			d.MonitoredRounded = true
			coarsen(&d.Jobs[i], seconds)
		}
	}
	if d.MonitoredRounded {
		d.total(capacity, seconds)
	}
}

// splitLink builds both directions of l over [from, to]; got is the
// jobs' bytes on the link over the range when already read (checkLink),
// else nil.
func (a *attribAPI) splitLink(ctx context.Context, t *fabric.Topology, l *fabric.Link, from, to time.Time, got []store.LinkJobBytes) ([2]directionJSON, []dirJob, error) {
	var out [2]directionJSON
	seconds := to.Sub(from).Seconds()
	if got == nil {
		var err error
		if got, err = a.s.opt.Store.LinkJobs(ctx, []fabric.PortRef{l.A, l.B}, from, to); err != nil {
			return out, nil, err
		}
	}
	samples, err := a.s.opt.Store.PortSamples(ctx, []fabric.PortRef{l.A, l.B}, from, to)
	if err != nil {
		return out, nil, err
	}
	ids := map[string]bool{}
	for _, x := range got {
		ids[x.Job] = true
	}
	users := a.users(ctx, ids)
	all := []dirJob{}
	for i, e := range [2][2]fabric.PortRef{{l.A, l.B}, {l.B, l.A}} {
		d := directionJSON{From: e[0], To: e[1], Direction: e[0].GUID, FromName: describe(t, e[0]), ToName: describe(t, e[1]), Jobs: []dirJob{}}
		for _, x := range got {
			if x.Port != e[0] {
				continue
			}
			dj, _ := newDirJob(t, e[0], x.Job, x.Bytes, seconds)
			dj.User = users[x.Job]
			d.Jobs = append(d.Jobs, dj)
		}
		sortDirJobs(d.Jobs)
		all = append(all, d.Jobs...)
		d.Measured = measure(samples, e[0], e[1])
		d.MeasuredUtilization = utilization(d.Measured.Bytes, l.Capacity(), seconds)
		d.total(l.Capacity(), seconds)
		out[i] = d
	}
	sortDirJobs(all)
	return out, all, nil
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
	v, l, err := a.s.linkView(r)
	if err != nil {
		return nil, err
	}
	from, to, err := timeRange(r)
	if err != nil {
		return nil, err
	}
	owners := a.s.owners(r.Context())
	// A user's check reads the link's jobs; the answer reuses them.
	got, err := a.s.checkLink(r.Context(), l, from, to, owners)
	if err != nil {
		return nil, err
	}
	dirs, all, err := a.splitLink(r.Context(), v.topo, l, from, to, got)
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
	return map[string]any{"link": ends(l), "from": from, "to": to, "seconds": to.Sub(from).Seconds(),
		"directions": dirs, "jobs": all}, nil
}

// jobTimeRange is the range of a job's questions: from/to, defaulting to
// its start and end (or now).
func jobTimeRange(r *http.Request, js *store.JobSummary) (time.Time, time.Time, error) {
	return jobRange(r, &store.Job{JobSummary: *js})
}

// jobLinksQuery is what the job's link questions share: the job, the
// fabric view, the range (default the job's life) and its heaviest link
// directions, at most limit (default def, at most hi).
type jobLinksQuery struct {
	job      *store.JobSummary
	view     *view
	from, to time.Time
	links    []store.LinkJobBytes
}

func (a *attribAPI) jobLinksQuery(r *http.Request, def, hi int) (*jobLinksQuery, error) {
	js, err := a.visibleSummary(r.Context(), r.PathValue("job"))
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
	lf, lt := from, to
	if q := r.URL.Query(); q.Get("from") == "" && q.Get("to") == "" {
		lf, lt = time.Time{}, time.Time{}
		if !js.End.IsZero() && js.Attribution != nil && js.Attribution.Intervals > 0 && js.Attribution.Updated.After(to) {
			to = js.Attribution.Updated
		}
	}
	got, err := a.s.opt.Store.JobLinks(r.Context(), js.ID, lf, lt, limit)
	if err != nil {
		return nil, err
	}
	return &jobLinksQuery{job: js, view: v, from: from, to: to, links: got}, nil
}

func (a *attribAPI) jobLinks(r *http.Request) (any, error) {
	q, err := a.jobLinksQuery(r, 20, 100000)
	if err != nil {
		return nil, err
	}
	js, v, from, to, got := q.job, q.view, q.from, q.to, q.links
	links := []dirJob{}
	for _, x := range got {
		if dj, ok := newDirJob(v.topo, x.Port, js.ID, x.Bytes, to.Sub(from).Seconds()); ok {
			dj.User = js.User
			links = append(links, dj)
		}
	}
	return map[string]any{"job": js.ID, "from": from, "to": to, "seconds": to.Sub(from).Seconds(),
		"attribution": js.Attribution, "traffic_source": js.TrafficSource, "traffic_model": js.TrafficModel, "links": links}, nil
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
	v, l, err := a.s.linkView(r)
	if err != nil {
		return nil, err
	}
	j, err := visibleJob(r.Context(), a.s.opt.Store, a.liveJobs(), r.PathValue("job"))
	if err != nil {
		return nil, err
	}
	limit, err := intParam(r, "limit", 1000, 1, 1_000_000)
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
	return map[string]any{"job": j.ID, "link": ends(l), "level": level, "peers_truncated": truncated,
		"cumulative": true, "unmapped_nodes": um, "route_errors": routeErrs, "directions": out}, nil
}

func floatParam(r *http.Request, name string, def, lo, hi float64) (float64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < lo || f > hi {
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
	byPort := map[fabric.PortRef][]store.LinkJobBytes{}
	ids := map[string]bool{}
	for _, x := range got {
		byPort[x.Port] = append(byPort[x.Port], x)
		ids[x.Job] = true
	}
	users := a.users(r.Context(), ids)
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
				dj.User = users[x.Job]
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
	return map[string]any{"at": v.at, "from": from, "to": to, "min_utilization": minUtil, "min_xmit_wait": minWait,
		"total": total, "hotspots": out}, nil
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
	type linkWhy struct {
		directionJSON
		Link        linkEnds `json:"link"`
		JobBytes    uint64   `json:"job_bytes"`
		JobShare    float64  `json:"job_share_pct"` // of the monitored bytes on it
		Utilization float64  `json:"utilization_pct"`
		Others      []dirJob `json:"others"`
	}
	out := []linkWhy{}
	seconds := to.Sub(from).Seconds()
	others := map[string]uint64{}
	anon := newAnonymizer(r.Context(), a.s.owners(r.Context()))
	for _, x := range got {
		l, ok := v.topo.LinkAt(x.Port)
		if !ok {
			continue
		}
		dirs, _, err := a.splitLink(r.Context(), v.topo, l, from, to, nil)
		if err != nil {
			return nil, err
		}
		d := dirs[0]
		if d.From != x.Port {
			d = dirs[1]
		}
		w := linkWhy{directionJSON: d, Link: ends(l), JobBytes: x.Bytes, Others: []dirJob{}}
		for _, o := range d.Jobs {
			if o.Job != js.ID {
				shown := o
				anon.apply(&shown)
				coarsen(&shown, seconds)
				w.Others = append(w.Others, shown)
				// The sum over links adds the figures shown, so that it
				// is no more exact than they are.
				others[o.Job] += shown.Bytes
			}
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
	ids := map[string]bool{}
	for id := range others {
		ids[id] = true
	}
	users := a.users(r.Context(), ids)
	for id, b := range others {
		d := dirJob{Job: id, User: users[id]}
		anon.apply(&d)
		sharing = append(sharing, other{Job: d.Job, User: d.User, Bytes: b, Anonymized: d.Anonymized, BytesRounded: d.Anonymized})
	}
	slices.SortFunc(sharing, func(x, y other) int {
		if c := cmp.Compare(y.Bytes, x.Bytes); c != 0 {
			return c
		}
		return cmp.Compare(x.Job, y.Job)
	})
	res := map[string]any{"job": js.ID, "from": from, "to": to, "traffic_source": js.TrafficSource, "traffic_model": js.TrafficModel,
		"attribution": js.Attribution, "links": out, "sharing_jobs": sharing}
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
