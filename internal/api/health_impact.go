package api

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/health"
	"github.com/netloom/netloom/internal/store"
)

// maxImpactNodes bounds the node list of one impact question.
const maxImpactNodes = 10000

// impactWindow reads window (default 1h, 1s..168h).
func impactWindow(r *http.Request, def time.Duration) (time.Duration, error) {
	w := def
	if v := r.URL.Query().Get("window"); v != "" {
		var err error
		if w, err = time.ParseDuration(v); err != nil || w <= 0 || w > maxHealthWindow {
			return 0, badParam("window", "%q: want a duration from 1s to 168h, such as 30m or 6h", clip(v))
		}
	}
	return w, nil
}

// healthRoutesNow is the live topology and its routes (nil when no
// forwarding tables were read), else the newest stored ones.
func (s *Server) healthRoutesNow(r *http.Request) (*fabric.Topology, *fabric.Routes, error) {
	if st := s.opt.State(); st != nil && st.Topology != nil {
		return st.Topology, st.Routes, nil
	}
	t, err := s.healthTopology(r)
	if err != nil {
		return nil, nil, err
	}
	ft, _, err := s.opt.Store.ForwardingTablesAt(r.Context(), time.Now())
	if errors.Is(err, store.ErrNotFound) {
		return t, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return t, fabric.NewRoutes(t, ft), nil
}

// runningJobs are the running jobs with their ranks: the daemon's live
// ones, else (an API-role daemon) the store's.
func (s *Server) runningJobs(r *http.Request) ([]*store.Job, error) {
	var out []*store.Job
	if s.liveJobs != nil {
		for _, j := range s.live() {
			if j.State == store.JobRunning {
				out = append(out, j)
			}
		}
		if s.opt.Role != "api" {
			return out, nil
		}
	}
	have := map[string]bool{}
	for _, j := range out {
		have[j.ID] = true
	}
	list, _, err := s.opt.Store.Jobs(r.Context(), store.JobQuery{State: store.JobRunning, Limit: 10000})
	if err != nil {
		return nil, err
	}
	for _, js := range list {
		if have[js.ID] {
			continue
		}
		j, err := s.opt.Store.Job(r.Context(), js.ID)
		if err != nil {
			continue
		}
		out = append(out, j)
	}
	return out, nil
}

// healthError turns the health package's errors into answers.
func healthError(err error) error {
	var pe *health.ParamError
	var nf *health.NotFoundError
	switch {
	case errors.As(err, &pe):
		return badParam(pe.Param, "%s", pe.Msg)
	case errors.As(err, &nf):
		return notFound("parameter %s: %s", nf.Param, nf.Msg)
	case errors.Is(err, health.ErrNoRoutes):
		return &httpError{http.StatusServiceUnavailable, "no_routes", err.Error()}
	}
	return err
}

// healthImpact serves GET /api/v1/health/impact?link=|switch=|nodes=
// &window=&limit=: the running jobs whose routes cross the element and
// the load before and after it is taken out (docs/health.md, "Repair
// impact").
func (s *Server) healthImpact(r *http.Request) (any, error) {
	q := r.URL.Query()
	window, err := impactWindow(r, health.DefaultImpactWindow)
	if err != nil {
		return nil, err
	}
	limit, err := intParam(r, "limit", 200, 1, 100000)
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"link", "switch", "nodes"} {
		if len(q[k]) > 1 {
			return nil, badParam(k, "given %d times: give it once", len(q[k]))
		}
	}
	var nodes []string
	if v := q.Get("nodes"); v != "" {
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				nodes = append(nodes, n)
			}
		}
		if len(nodes) == 0 {
			return nil, badParam("nodes", "%q: want a comma-separated list of node names", clip(v))
		}
		if len(nodes) > maxImpactNodes {
			return nil, badParam("nodes", "%d nodes: at most %d", len(nodes), maxImpactNodes)
		}
	}
	if q.Has("nodes") && len(nodes) == 0 {
		return nil, badParam("nodes", "empty: want a comma-separated list of node names")
	}
	if q.Get("link") == "" && q.Get("switch") == "" && len(nodes) == 0 {
		return nil, badParam("link", "give one of link (GUID:PORT-GUID:PORT), switch (GUID or description) or nodes (names, comma-separated)")
	}
	t, routes, err := s.healthRoutesNow(r)
	if err != nil {
		return nil, err
	}
	jobs, err := s.runningJobs(r)
	if err != nil {
		return nil, err
	}
	im, err := health.QueryImpact(r.Context(), s.opt.Store, health.ImpactRequest{Link: q.Get("link"), Switch: q.Get("switch"), Nodes: nodes,
		Window: window, Now: time.Now(), Topo: t, Routes: routes, Jobs: jobs, MaxPairs: limit, NodeOverrides: s.opt.NodeOverrides})
	if err != nil {
		return nil, healthError(err)
	}
	return im, nil
}

// degraded lists the degraded links of t with the running jobs they slow.
func (s *Server) degraded(r *http.Request, t *fabric.Topology, window time.Duration) (*health.DegradedReport, error) {
	var routes *fabric.Routes
	if st := s.opt.State(); st != nil && st.Topology == t {
		routes = st.Routes
	}
	req := health.ImpactRequest{Window: window, Now: time.Now(), Topo: t, Routes: routes, NodeOverrides: s.opt.NodeOverrides}
	if len(health.FindDegraded(t)) > 0 {
		jobs, err := s.runningJobs(r)
		if err != nil {
			return nil, err
		}
		req.Jobs = jobs
	}
	return health.QueryDegraded(r.Context(), s.opt.Store, req)
}

// healthDegraded serves GET /api/v1/health/degraded?window=: the links up
// narrower or slower than their peers, with the running jobs whose routes
// cross them and their bytes on them in the window.
func (s *Server) healthDegraded(r *http.Request) (any, error) {
	window, err := impactWindow(r, health.DefaultImpactWindow)
	if err != nil {
		return nil, err
	}
	t, err := s.healthTopology(r)
	if err != nil {
		return nil, err
	}
	rep, err := s.degraded(r, t, window)
	if err != nil {
		return nil, err
	}
	return map[string]any{"from": rep.From, "to": rep.To, "window_seconds": window.Seconds(), "links": rep.Links}, nil
}

// healthHurt serves GET /api/v1/health/hurt?link=&window=168h: the jobs
// whose traffic crossed the link while it counted errors.
func (s *Server) healthHurt(r *http.Request) (any, error) {
	window, err := impactWindow(r, 7*24*time.Hour)
	if err != nil {
		return nil, err
	}
	id := r.URL.Query().Get("link")
	if id == "" {
		return nil, badParam("link", "missing: want GUID:PORT-GUID:PORT, or GUID:PORT of either end")
	}
	t, err := s.healthTopology(r)
	if err != nil {
		return nil, err
	}
	l, err := t.FindLink(id)
	if err != nil {
		return nil, notFound("parameter link: %v (a link is GUID:PORT-GUID:PORT, or GUID:PORT of either end)", err)
	}
	now := time.Now()
	h, err := health.QueryHurt(r.Context(), s.opt.Store, t, l, now.Add(-window), now)
	if err != nil {
		return nil, err
	}
	for i := range h.Jobs {
		if js, err := s.jobSummary(r.Context(), h.Jobs[i].Job); err == nil {
			h.Jobs[i].User, h.Jobs[i].State = js.User, js.State
		}
	}
	return h, nil
}
