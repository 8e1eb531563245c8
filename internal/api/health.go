package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/health"
	"github.com/netloom/netloom/internal/store"
)

// healthRoutes serves the link health views (docs/health.md), to
// administrators only, as the other fabric-wide views.
func (s *Server) healthRoutes() {
	s.route("GET /api/v1/health", s.health)
	s.route("GET /api/v1/health/links/{link}", s.healthLink)
	s.route("GET /api/v1/health/impact", s.healthImpact)
	s.route("GET /api/v1/health/degraded", s.healthDegraded)
	s.route("GET /api/v1/health/hurt", s.healthHurt)
}

// maxHealthWindow bounds the history one health request reads.
const maxHealthWindow = 7 * 24 * time.Hour

// healthParams reads window (a duration, default 1h), ber_limit and
// horizon.
func healthParams(r *http.Request) (window time.Duration, opt health.Options, err error) {
	q := r.URL.Query()
	window = health.DefaultWindow
	if v := q.Get("window"); v != "" {
		if window, err = time.ParseDuration(v); err != nil || window <= 0 || window > maxHealthWindow {
			return 0, opt, badParam("window", "%q: want a duration from 1s to 168h, such as 30m or 6h", clip(v))
		}
	}
	if opt.BERLimit, err = floatParam(r, "ber_limit", health.DefaultBERLimit, 1e-20, 1e-3); err != nil {
		return 0, opt, err
	}
	opt.Horizon = health.DefaultHorizon
	if v := q.Get("horizon"); v != "" {
		if opt.Horizon, err = time.ParseDuration(v); err != nil || opt.Horizon <= 0 || opt.Horizon > 365*24*time.Hour {
			return 0, opt, badParam("horizon", "%q: want a duration such as 24h", clip(v))
		}
	}
	return window, opt, nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// healthTopology is the live topology, else the newest stored one.
func (s *Server) healthTopology(r *http.Request) (*fabric.Topology, error) {
	if st := s.opt.State(); st != nil && st.Topology != nil {
		return st.Topology, nil
	}
	t, _, err := s.opt.Store.TopologyAt(r.Context(), time.Now())
	if errors.Is(err, store.ErrNotFound) {
		return nil, errNoFabric
	}
	return t, err
}

// health serves GET /api/v1/health?window=&ber_limit=&horizon=&limit=:
// every link direction, riskiest first, with its figures and prediction.
func (s *Server) health(r *http.Request) (any, error) {
	window, opt, err := healthParams(r)
	if err != nil {
		return nil, err
	}
	limit, err := intParam(r, "limit", 1000, 1, 1000000)
	if err != nil {
		return nil, err
	}
	t, err := s.healthTopology(r)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	rep, err := health.Query(r.Context(), s.opt.Store, t, now.Add(-window), now, opt)
	if err != nil {
		return nil, err
	}
	total := len(rep.Directions)
	if len(rep.Directions) > limit {
		rep.Directions = rep.Directions[:limit]
	}
	deg, err := s.degraded(r, t, window)
	if err != nil {
		return nil, err
	}
	return listed(map[string]any{"at": rep.At, "from": rep.From, "window_seconds": window.Seconds(), "ber_limit": rep.BERLimit,
		"horizon_seconds": rep.Horizon, "links": rep.Links, "counts": rep.Counts, "directions": rep.Directions,
		"degraded": deg.Links}, total, limit), nil
}

// healthLink serves GET /api/v1/health/links/{link}: both directions of
// one link with their series.
func (s *Server) healthLink(r *http.Request) (any, error) {
	window, opt, err := healthParams(r)
	if err != nil {
		return nil, err
	}
	t, err := s.healthTopology(r)
	if err != nil {
		return nil, err
	}
	id := r.PathValue("link")
	l, err := t.FindLink(id)
	if err != nil {
		return nil, notFound("%v (a link is GUID:PORT-GUID:PORT, or GUID:PORT of either end)", err)
	}
	now := time.Now()
	dirs, err := health.QueryLink(r.Context(), s.opt.Store, t, l, now.Add(-window), now, opt)
	if err != nil {
		return nil, err
	}
	return map[string]any{"at": now, "from": now.Add(-window), "window_seconds": window.Seconds(), "ber_limit": opt.BERLimit,
		"link": newLinkJSON(*l), "directions": dirs}, nil
}
