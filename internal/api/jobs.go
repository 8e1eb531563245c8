package api

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/netloom/netloom/internal/gpupath"
	"github.com/netloom/netloom/internal/ingest"
	"github.com/netloom/netloom/internal/store"
)

// ServeJobs adds the MPI job endpoints (docs/api.md, "Jobs"). live returns
// the jobs the daemon holds in memory (running and just finished); it may
// return nil. Older jobs come from the store.
func (s *Server) ServeJobs(live func() *ingest.Live) {
	j := &jobsAPI{s: s, live: live}
	s.liveJobs = j.liveJobs
	s.userRoute("GET /api/v1/jobs", j.list)
	s.userRoute("GET /api/v1/jobs/{job}", j.detail)
	s.userRoute("GET /api/v1/jobs/{job}/processes", j.processes)
	s.userRoute("GET /api/v1/jobs/{job}/processes/{rank}", j.process)
	s.userRoute("GET /api/v1/jobs/{job}/processes/{rank}/series", j.processSeries)
	s.userRoute("GET /api/v1/jobs/{job}/nodes", j.nodes)
	s.userRoute("GET /api/v1/jobs/{job}/nodes/{node}/series", j.nodeSeries)
	s.userRoute("GET /api/v1/jobs/{job}/series", j.manySeries)
	s.userRoute("GET /api/v1/jobs/{job}/matrix", j.matrix)
	s.userRoute("GET /api/v1/jobs/{job}/histogram", j.histogram)
	s.userRoute("GET /api/v1/jobs/{job}/profile", j.profile)
	s.userRoute("GET /api/v1/jobs/{job}/regions", j.regions)
	s.userRoute("GET /api/v1/jobs/{job}/gpu", j.gpu)
}

type jobsAPI struct {
	s    *Server
	live func() *ingest.Live
}

func (a *jobsAPI) liveJobs() map[string]*store.Job {
	if a.live == nil {
		return nil
	}
	if l := a.live(); l != nil {
		return l.Jobs
	}
	return nil
}

// job finds {job} (see visibleJob).
func (a *jobsAPI) job(r *http.Request) (*store.Job, error) {
	return a.s.visibleJob(r.Context(), r.PathValue("job"))
}

// visibleJob finds job id with all its ranks, among the live jobs first,
// else in the store, once visibleSummary said the caller may see it: a
// job the caller may not see is not found, and nothing more of it is
// read.
func (s *Server) visibleJob(ctx context.Context, id string) (*store.Job, error) {
	if _, err := s.visibleSummary(ctx, id); err != nil {
		return nil, err
	}
	j, ok := s.live()[id]
	if !ok {
		var err error
		if j, err = s.opt.Store.Job(ctx, id); errors.Is(err, store.ErrNotFound) {
			return nil, errJobHidden // gone since
		} else if err != nil {
			return nil, err
		}
	}
	if !canSeeJob(ctx, &j.JobSummary) { // changed hands since: never shown
		return nil, errJobHidden
	}
	return j.Full(), nil
}

func (a *jobsAPI) list(r *http.Request) (any, error) {
	q := r.URL.Query()
	state := q.Get("state")
	switch state {
	case "", "all":
		state = ""
	case store.JobRunning, store.JobFinished:
	default:
		return nil, badParam("state", "%q: want running, finished or all", state)
	}
	sortKey := q.Get("sort")
	if sortKey == "" {
		sortKey = "start"
	}
	if !store.ValidJobSort(sortKey) {
		return nil, badParam("sort", "%q: want one of %s", sortKey, strings.Join(store.JobSortKeys, ", "))
	}
	asc := false
	switch q.Get("order") {
	case "", "desc":
	case "asc":
		asc = true
	default:
		return nil, badParam("order", "%q: want asc or desc", q.Get("order"))
	}
	limit, err := intParam(r, "limit", 100, 1, 10000)
	if err != nil {
		return nil, err
	}
	offset, err := intParam(r, "offset", 0, 0, 1<<30)
	if err != nil {
		return nil, err
	}
	// Only a range asked for filters: the list is of all jobs by default.
	var from, to time.Time
	if q.Get("from") != "" || q.Get("to") != "" {
		if from, to, err = timeRange(r); err != nil {
			return nil, err
		}
	}
	owner := ""
	if !isAdmin(r.Context()) {
		owner = principal(r.Context()).Name
	}
	// Live jobs (fresh numbers) plus stored ones not live, merged in order.
	var live []store.JobSummary
	var ids []string
	for id, j := range a.liveJobs() {
		ids = append(ids, id)
		if (state == "" || j.State == state) && (owner == "" || j.Owner() == owner) && j.Overlaps(from, to) {
			live = append(live, j.JobSummary)
		}
	}
	stored, total, err := a.s.opt.Store.Jobs(r.Context(), store.JobQuery{State: state, Sort: sortKey, Asc: asc,
		Limit: offset + limit, Exclude: ids, Owner: owner, From: from, To: to})
	if err != nil {
		return nil, err
	}
	all := append(live, stored...)
	slices.SortStableFunc(all, func(x, y store.JobSummary) int {
		c := cmp.Compare(store.JobSortValue(&x, sortKey), store.JobSortValue(&y, sortKey))
		if sortKey == "id" {
			c = cmp.Compare(x.ID, y.ID)
		}
		if !asc {
			c = -c
		}
		if c == 0 {
			c = cmp.Compare(x.ID, y.ID)
		}
		return c
	})
	if offset >= len(all) {
		all = nil
	} else {
		all = all[offset:min(len(all), offset+limit)]
	}
	if all == nil {
		all = []store.JobSummary{}
	}
	return map[string]any{"total": total + len(live), "offset": offset, "limit": limit, "sort": sortKey,
		"order": map[bool]string{true: "asc", false: "desc"}[asc], "jobs": all}, nil
}

func processViews(j *store.Job) []ingest.ProcessView {
	out := make([]ingest.ProcessView, len(j.Processes))
	for i := range j.Processes {
		out[i] = ingest.ViewProcess(&j.Processes[i])
	}
	return out
}

func (a *jobsAPI) detail(r *http.Request) (any, error) {
	j, err := a.job(r)
	if err != nil {
		return nil, err
	}
	nodes := ingest.Nodes(j)
	if nodes == nil {
		nodes = []ingest.NodeView{}
	}
	return map[string]any{"job": j.JobSummary, "nodes": nodes, "processes": processViews(j)}, nil
}

func (a *jobsAPI) processes(r *http.Request) (any, error) {
	j, err := a.job(r)
	if err != nil {
		return nil, err
	}
	return map[string]any{"job": j.ID, "processes": processViews(j)}, nil
}

// rank resolves {rank} within the job.
func rankOf(r *http.Request, j *store.Job) (*store.Process, error) {
	return findRank(j, "rank", r.PathValue("rank"))
}

// findRank finds the process of rank v (a parameter named param).
func findRank(j *store.Job, param, v string) (*store.Process, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return nil, badParam(param, "%q is not a rank", v)
	}
	i, ok := slices.BinarySearchFunc(j.Processes, n, func(p store.Process, n int) int { return cmp.Compare(p.Rank, n) })
	if !ok {
		return nil, notFound("job %q has no rank %d reporting (world size %d)", j.ID, n, j.Ranks)
	}
	return &j.Processes[i], nil
}

// nodeRanks lists the ranks of a job on one node.
func nodeRanks(j *store.Job, node string) ([]int, error) {
	var ranks []int
	for i := range j.Processes {
		if j.Processes[i].Node == node {
			ranks = append(ranks, j.Processes[i].Rank)
		}
	}
	if ranks == nil {
		return nil, notFound("job %q has no ranks on node %q", j.ID, node)
	}
	return ranks, nil
}

func (a *jobsAPI) process(r *http.Request) (any, error) {
	j, err := a.job(r)
	if err != nil {
		return nil, err
	}
	p, err := rankOf(r, j)
	if err != nil {
		return nil, err
	}
	return map[string]any{"job": j.ID, "summary": ingest.ViewProcess(p), "process": p}, nil
}

// jobRange is the series range: from defaults to the job's start, to to
// its end (or now).
func jobRange(r *http.Request, j *store.Job) (from, to time.Time, err error) {
	q := r.URL.Query()
	now := time.Now()
	to = now
	if !j.End.IsZero() {
		to = j.End.Add(time.Second)
	}
	if v := q.Get("to"); v != "" {
		if to, err = parseTime("to", v, now); err != nil {
			return
		}
	}
	from = j.Start.Add(-time.Second)
	if v := q.Get("from"); v != "" {
		if from, err = parseTime("from", v, to); err != nil {
			return
		}
	}
	if from.After(to) {
		err = badParam("from", "%s is after to (%s)", from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	return
}

// processSeriesJSON is columnar per-interval data of one rank or node.
type processSeriesJSON struct {
	Time   []float64            `json:"time"`
	Span   []float64            `json:"span_seconds"`
	Values map[string][]float64 `json:"values"`
}

// seriesMetrics are the columns of a process or node series.
var seriesMetrics = []struct {
	name string
	get  func(x *store.ProcessSample) float64
}{
	{"cpu_percent", func(x *store.ProcessSample) float64 { return pct(x.CPUUser+x.CPUSystem, x.Span) }},
	{"cpu_user_seconds", func(x *store.ProcessSample) float64 { return x.CPUUser }},
	{"cpu_system_seconds", func(x *store.ProcessSample) float64 { return x.CPUSystem }},
	{"mpi_percent", func(x *store.ProcessSample) float64 { return pct(x.MPI, x.Span) }},
	{"mpi_seconds", func(x *store.ProcessSample) float64 { return x.MPI }},
	{"wait_percent", func(x *store.ProcessSample) float64 { return pct(x.Wait, x.Span) }},
	{"wait_seconds", func(x *store.ProcessSample) float64 { return x.Wait }},
	{"vm_rss", func(x *store.ProcessSample) float64 { return float64(x.VmRSS) }},
	{"vm_size", func(x *store.ProcessSample) float64 { return float64(x.VmSize) }},
	{"io_read_bytes", func(x *store.ProcessSample) float64 { return float64(x.IORead) }},
	{"io_write_bytes", func(x *store.ProcessSample) float64 { return float64(x.IOWrite) }},
	{"mpiio_read_bytes", func(x *store.ProcessSample) float64 { return float64(x.MPIIORead) }},
	{"mpiio_write_bytes", func(x *store.ProcessSample) float64 { return float64(x.MPIIOWrite) }},
	{"p2p_bytes", func(x *store.ProcessSample) float64 { return float64(x.Traffic.P2P.Bytes) }},
	{"p2p_msgs", func(x *store.ProcessSample) float64 { return float64(x.Traffic.P2P.Msgs) }},
	{"coll_bytes", func(x *store.ProcessSample) float64 { return float64(x.Traffic.Coll.Bytes) }},
	{"coll_msgs", func(x *store.ProcessSample) float64 { return float64(x.Traffic.Coll.Msgs) }},
	{"rma_bytes", func(x *store.ProcessSample) float64 { return float64(x.Traffic.RMA.Bytes) }},
	{"rma_msgs", func(x *store.ProcessSample) float64 { return float64(x.Traffic.RMA.Msgs) }},
	{"intra_node_bytes", func(x *store.ProcessSample) float64 { return float64(x.IntraNode.Bytes) }},
	{"inter_node_bytes", func(x *store.ProcessSample) float64 { return float64(x.InterNode.Bytes) }},
	{"bytes_per_second", func(x *store.ProcessSample) float64 {
		if x.Span <= 0 {
			return 0
		}
		return float64(x.Traffic.Total().Bytes) / x.Span.Seconds()
	}},
}

func pct(secs float64, span time.Duration) float64 {
	if span <= 0 {
		return 0
	}
	return 100 * secs / span.Seconds()
}

func newProcessSeries(samples []store.ProcessSample) processSeriesJSON {
	out := processSeriesJSON{Time: make([]float64, len(samples)), Span: make([]float64, len(samples)), Values: map[string][]float64{}}
	for _, m := range seriesMetrics {
		col := make([]float64, len(samples))
		for i := range samples {
			col[i] = m.get(&samples[i])
		}
		out.Values[m.name] = col
	}
	for i := range samples {
		out.Time[i] = float64(samples[i].Time.UnixNano()) / 1e9
		out.Span[i] = samples[i].Span.Seconds()
	}
	return out
}

func (a *jobsAPI) processSeries(r *http.Request) (any, error) {
	j, err := a.job(r)
	if err != nil {
		return nil, err
	}
	p, err := rankOf(r, j)
	if err != nil {
		return nil, err
	}
	from, to, err := jobRange(r, j)
	if err != nil {
		return nil, err
	}
	got, err := a.s.opt.Store.ProcessSamples(r.Context(), j.ID, []int{p.Rank}, from, to)
	if err != nil {
		return nil, err
	}
	return map[string]any{"job": j.ID, "rank": p.Rank, "node": p.Node, "from": from, "to": to, "series": newProcessSeries(got[p.Rank])}, nil
}

func (a *jobsAPI) nodes(r *http.Request) (any, error) {
	j, err := a.job(r)
	if err != nil {
		return nil, err
	}
	nodes := ingest.Nodes(j)
	if nodes == nil {
		nodes = []ingest.NodeView{}
	}
	return map[string]any{"job": j.ID, "nodes": nodes}, nil
}

// nodeSeries sums the node's ranks' samples per interval. Ranks sample at
// their own moments, so samples are put in buckets of the step (default:
// the longest span seen) by their end time.
// maxSeries bounds the series one request may ask for.
const maxSeries = 256

// manySeries is several ranks' (ranks=0,5,9) or nodes' (nodes=a,b) series
// in one request and one store query, for the job page's charts.
func (a *jobsAPI) manySeries(r *http.Request) (any, error) {
	j, err := a.job(r)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	rankList, nodeList := q.Get("ranks"), q.Get("nodes")
	if (rankList == "") == (nodeList == "") {
		return nil, badParam("ranks", "give ranks=R,R,... or nodes=NAME,NAME,...")
	}
	from, to, err := jobRange(r, j)
	if err != nil {
		return nil, err
	}
	type one struct {
		Rank   *int              `json:"rank,omitempty"`
		Node   string            `json:"node"`
		Ranks  []int             `json:"ranks,omitempty"`
		Series processSeriesJSON `json:"series"`
	}
	out := []one{}
	// groups: per rank, or per node its ranks; ranks: all of them.
	var groups [][]int
	var ranks []int
	if rankList != "" {
		for _, v := range strings.Split(rankList, ",") {
			p, err := findRank(j, "ranks", v)
			if err != nil {
				return nil, err
			}
			out = append(out, one{Rank: &p.Rank, Node: p.Node})
			groups, ranks = append(groups, []int{p.Rank}), append(ranks, p.Rank)
		}
	} else {
		for _, node := range strings.Split(nodeList, ",") {
			rs, err := nodeRanks(j, node)
			if err != nil {
				return nil, err
			}
			out = append(out, one{Node: node, Ranks: rs})
			groups, ranks = append(groups, rs), append(ranks, rs...)
		}
	}
	if len(groups) > maxSeries {
		name := "nodes"
		if rankList != "" {
			name = "ranks"
		}
		return nil, badParam(name, "at most %d series per request", maxSeries)
	}
	got, err := a.s.opt.Store.ProcessSamples(r.Context(), j.ID, ranks, from, to)
	if err != nil {
		return nil, err
	}
	for k, g := range groups {
		if rankList != "" {
			out[k].Series = newProcessSeries(got[g[0]])
			continue
		}
		per := make(map[int][]store.ProcessSample, len(g))
		for _, rk := range g {
			per[rk] = got[rk]
		}
		out[k].Series = newProcessSeries(sumByBucket(per, 0))
	}
	return map[string]any{"job": j.ID, "from": from, "to": to, "series": out}, nil
}

func (a *jobsAPI) nodeSeries(r *http.Request) (any, error) {
	j, err := a.job(r)
	if err != nil {
		return nil, err
	}
	node := r.PathValue("node")
	ranks, err := nodeRanks(j, node)
	if err != nil {
		return nil, err
	}
	from, to, err := jobRange(r, j)
	if err != nil {
		return nil, err
	}
	var step time.Duration
	if v := r.URL.Query().Get("step"); v != "" {
		if step, err = time.ParseDuration(v); err != nil || step < time.Millisecond {
			return nil, badParam("step", "%q: want a duration of at least 1ms", v)
		}
	}
	got, err := a.s.opt.Store.ProcessSamples(r.Context(), j.ID, ranks, from, to)
	if err != nil {
		return nil, err
	}
	return map[string]any{"job": j.ID, "node": node, "ranks": ranks, "from": from, "to": to,
		"series": newProcessSeries(sumByBucket(got, step))}, nil
}

// sumByBucket adds up samples of several ranks that end in the same step.
// Memory (VmRSS, VmSize) adds up too: it is the node's total.
func sumByBucket(per map[int][]store.ProcessSample, step time.Duration) []store.ProcessSample {
	if step <= 0 {
		for _, l := range per {
			for _, x := range l {
				step = max(step, x.Span)
			}
		}
		if step <= 0 {
			step = time.Second
		}
	}
	buckets := map[int64]*store.ProcessSample{}
	for _, l := range per {
		for _, x := range l {
			k := x.Time.UnixNano() / int64(step)
			b := buckets[k]
			if b == nil {
				b = &store.ProcessSample{Job: x.Job, Rank: -1, Time: time.Unix(0, (k+1)*int64(step)).UTC(), Span: step}
				buckets[k] = b
			}
			b.AddUsage(&x)
			b.VmRSS += x.VmRSS
			b.VmSize += x.VmSize
		}
	}
	out := make([]store.ProcessSample, 0, len(buckets))
	for _, b := range buckets {
		out = append(out, *b)
	}
	slices.SortFunc(out, func(a, b store.ProcessSample) int { return a.Time.Compare(b.Time) })
	return out
}

func (a *jobsAPI) matrix(r *http.Request) (any, error) {
	j, err := a.job(r)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	level, class, metric := cmp.Or(q.Get("level"), "rank"), cmp.Or(q.Get("class"), "p2p"), cmp.Or(q.Get("metric"), "bytes")
	if class != "all" && !slices.Contains(ingest.Classes, class) {
		return nil, badParam("class", "%q: want p2p, coll, rma or all", class)
	}
	if metric != "bytes" && metric != "msgs" {
		return nil, badParam("metric", "%q: want bytes or msgs", metric)
	}
	format := cmp.Or(q.Get("format"), "dense")
	if format != "dense" && format != "sparse" {
		return nil, badParam("format", "%q: want dense or sparse", format)
	}
	if format == "sparse" && level == "rank" {
		return sparseRankMatrix(j, class, metric), nil
	}
	var m *ingest.Matrix
	switch level {
	case "rank":
		if j.Ranks > ingest.MaxDenseRanks {
			return nil, badParam("level", "rank: the job has %d ranks, more than the %d a dense matrix is sent for; use level=node", j.Ranks, ingest.MaxDenseRanks)
		}
		m, err = ingest.RankMatrix(j, class, metric)
	case "node":
		m, err = ingest.NodeMatrix(j, class, metric)
	default:
		return nil, badParam("level", "%q: want rank or node", level)
	}
	if err != nil {
		return nil, err
	}
	if format == "sparse" {
		sm := newSparse(j.ID, m.Level, m.Class, m.Metric, len(m.Labels))
		sm.Labels, sm.Truncated = m.Labels, m.Truncated
		for r, row := range m.Values {
			for c, v := range row {
				sm.add(r, c, v)
			}
		}
		return sm, nil
	}
	return map[string]any{"job": j.ID, "level": m.Level, "class": m.Class, "metric": m.Metric, "labels": m.Labels,
		"matrix": m.Values, "peers_truncated": m.Truncated}, nil
}

// sparseMatrix is a matrix as its non-zero cells (row = sender): what a
// large job's heatmap needs, at any number of ranks, without the n^2
// zeros of the dense form. Rank labels are the rank numbers 0..size-1.
type sparseMatrix struct {
	Job       string   `json:"job"`
	Level     string   `json:"level"`
	Class     string   `json:"class"`
	Metric    string   `json:"metric"`
	Format    string   `json:"format"`
	Size      int      `json:"size"`
	Labels    []string `json:"labels,omitempty"` // node names; none for ranks
	Src       []int    `json:"src"`
	Dst       []int    `json:"dst"`
	Values    []uint64 `json:"values"`
	Truncated bool     `json:"peers_truncated"`
}

func newSparse(job, level, class, metric string, size int) *sparseMatrix {
	return &sparseMatrix{Job: job, Level: level, Class: class, Metric: metric, Format: "sparse", Size: size,
		Src: []int{}, Dst: []int{}, Values: []uint64{}}
}

func (m *sparseMatrix) add(src, dst int, v uint64) {
	if v > 0 {
		m.Src, m.Dst, m.Values = append(m.Src, src), append(m.Dst, dst), append(m.Values, v)
	}
}

// sparseRankMatrix reads the ranks' peer rows directly, so it has no
// rank limit: its size is that of what the agents sent.
func sparseRankMatrix(j *store.Job, class, metric string) *sparseMatrix {
	m := newSparse(j.ID, "rank", class, metric, j.Ranks)
	for i := range j.Processes {
		p := &j.Processes[i]
		m.Truncated = m.Truncated || p.PeersTruncated
		for peer, cl := range p.Peers.Traffic() {
			if p.Rank < j.Ranks && peer < j.Ranks {
				t := cl.Class(class)
				v := t.Bytes
				if metric == "msgs" {
					v = t.Msgs
				}
				m.add(p.Rank, peer, v)
			}
		}
	}
	return m
}

func (a *jobsAPI) histogram(r *http.Request) (any, error) {
	j, err := a.job(r)
	if err != nil {
		return nil, err
	}
	rank := -1
	if v := r.URL.Query().Get("rank"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n >= max(j.Ranks, 1) {
			return nil, badParam("rank", "%q: want a rank below %d", v, j.Ranks)
		}
		rank = n
	}
	return map[string]any{"job": j.ID, "histogram": ingest.BuildHistogram(j, rank)}, nil
}

func (a *jobsAPI) profile(r *http.Request) (any, error) {
	j, err := a.job(r)
	if err != nil {
		return nil, err
	}
	return map[string]any{"job": j.ID, "profile": ingest.BuildProfile(j)}, nil
}

func (a *jobsAPI) regions(r *http.Request) (any, error) {
	j, err := a.job(r)
	if err != nil {
		return nil, err
	}
	return map[string]any{"job": j.ID, "regions": ingest.BuildRegions(j)}, nil
}

// gpu is the job's GPU side (docs/gpu.md): its MPI buffers' paths between
// host and device memory, per rank pair (at most pairs, the largest), and
// its NCCL operations summed over ranks.
func (a *jobsAPI) gpu(r *http.Request) (any, error) {
	pairs, err := intParam(r, "pairs", 100, 0, 10000)
	if err != nil {
		return nil, err
	}
	j, err := a.job(r)
	if err != nil {
		return nil, err
	}
	return map[string]any{"job": j.ID, "gpu": gpupath.Summarize(j, pairs)}, nil
}
