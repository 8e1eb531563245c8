package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/netloom/netloom/internal/echo"
	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
)

// Options configure the API server.
type Options struct {
	Store store.Store
	// State returns the live snapshot; nil before the first discovery.
	State func() *FabricState
	// Registry holds the daemon's metrics; the API adds its own and the
	// port counter collector to it and serves it at /metrics.
	Registry *prometheus.Registry
	// SweepInterval sizes the window in which a past sample counts as
	// "latest" at a past time.
	SweepInterval time.Duration
	Log           *slog.Logger
	// Behind, when set, says whether and why the daemon is falling behind
	// (nil: it keeps up); /api/v1/status shows it to everyone.
	Behind func() *Behind
	// Role is the daemon's role ("collector" or "api"), in /api/v1/status
	// for everyone: the UI leaves out what an API daemon does not serve.
	Role string
	// AgentAuth, when set, says which agent datagrams the daemon accepts
	// (nil: it has no agent socket); /api/v1/status shows administrators.
	AgentAuth func() *AgentAuth
	// NodeOverrides are the daemon's --node-map entries, which the health
	// answers map node names with as link attribution does.
	NodeOverrides map[string]string
}

// AgentAuth is the agent authentication in force (docs/security.md,
// "Agent data"): an administrator checks here that unverified datagrams
// are not believed by accident.
type AgentAuth struct {
	Mode     string   `json:"mode"` // munge, none or refusing
	Reason   string   `json:"reason"`
	Networks []string `json:"networks,omitempty"` // agent_networks
}

// Behind is the daemon falling behind its input: since when, and why.
type Behind struct {
	Since   time.Time `json:"since"`
	Reasons []string  `json:"reasons"`
}

// Server is the HTTP API.
type Server struct {
	opt         Options
	mux         *http.ServeMux
	badRequests *prometheus.CounterVec
	layouts     layoutCache
	decoy       decoy // visibleSummary's
	hub         streamHub
	// liveJobs returns the jobs held in memory (set by ServeJobs).
	liveJobs func() map[string]*store.Job
}

// New builds the API handler.
func New(opt Options) *Server {
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	if opt.SweepInterval <= 0 {
		opt.SweepInterval = 30 * time.Second
	}
	s := &Server{opt: opt, mux: http.NewServeMux()}
	s.badRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "netloom_api_requests_rejected_total",
		Help: "API requests answered with a 4xx error, by reason.",
	}, []string{"reason"})
	if opt.Registry != nil {
		opt.Registry.MustRegister(s.badRequests, &fabricCollector{state: opt.State})
		s.mux.Handle("GET /metrics", s.adminOnly(promhttp.HandlerFor(opt.Registry, promhttp.HandlerOpts{})))
		s.mux.Handle("GET /metrics/ports", s.adminOnly(&portMetrics{state: opt.State}))
	}
	s.userRoute("GET /api/v1/status", s.status)
	s.route("GET /api/v1/fabric", s.fabricSummary)
	s.route("GET /api/v1/fabric/versions", s.versions)
	s.route("GET /api/v1/fabric/nodes", s.nodes)
	s.route("GET /api/v1/fabric/links", s.links)
	s.route("GET /api/v1/nodes/{node}", s.node)
	s.route("GET /api/v1/nodes/{node}/counters", s.nodeCounters)
	s.userRoute("GET /api/v1/nodes/{node}/jobs", s.nodeJobs)
	s.route("GET /api/v1/ports/{port}/counters", s.portCounters)
	s.route("GET /api/v1/links/top", s.topLinks)
	s.userRoute("GET /api/v1/links/{link}", s.link)
	s.userRoute("GET /api/v1/links/{link}/counters", s.linkCounters)
	s.route("GET /api/v1/links/{link}/routes", s.linkRoutes)
	s.route("GET /api/v1/routes", s.routePath)
	s.route("GET /api/v1/events", s.events)
	s.route("GET /api/v1/fabric/errors", s.portErrors)
	s.route("GET /api/v1/fabric/utilization", s.utilization)
	s.healthRoutes()
	s.mux.Handle("GET /api/v1/fabric/layout", s.adminOnly(http.HandlerFunc(s.layout)))
	s.mux.Handle("GET /api/v1/fabric/stream", s.adminOnly(http.HandlerFunc(s.stream)))
	s.mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, &httpError{http.StatusNotFound, "not_found", fmt.Sprintf("no API endpoint %s %s", r.Method, r.URL.Path)})
	})
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Mux lets later parts (the UI, the agent API) add routes.
func (s *Server) Mux() *http.ServeMux { return s.mux }

type handler func(r *http.Request) (any, error)

// route serves an administrators-only endpoint; userRoute one that any
// signed-in principal may call, whose handler filters by user (authz.go).
func (s *Server) route(pattern string, h handler)     { s.handle(pattern, true, h) }
func (s *Server) userRoute(pattern string, h handler) { s.handle(pattern, false, h) }

// slowUserRoute is a userRoute whose work may take up to limit: its answer
// may be written until a minute after that, beyond the server's own write
// timeout, so that a slow answer (or the refusal that ends a long wait)
// reaches the client instead of a closed connection.
func (s *Server) slowUserRoute(pattern string, limit time.Duration, h handler) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(limit + time.Minute))
		s.serve(w, r, false, h)
	})
}

func (s *Server) handle(pattern string, adminOnly bool, h handler) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, adminOnly, h) })
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, adminOnly bool, h handler) {
	if err := allowed(r, adminOnly); err != nil {
		s.fail(w, err)
		return
	}
	v, err := h(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		// The encoder writes nothing until the whole answer is encoded: a
		// value JSON cannot hold (NaN) is a 500 said in the log, never a
		// 200 with an empty body.
		var unsupported *json.UnsupportedValueError
		var badType *json.UnsupportedTypeError
		var marshaler *json.MarshalerError
		if errors.As(err, &unsupported) || errors.As(err, &badType) || errors.As(err, &marshaler) {
			s.fail(w, fmt.Errorf("encoding the answer to %s: %w", r.URL.Path, err))
			return
		}
		s.opt.Log.Debug("api: writing response", "path", r.URL.Path, "err", err)
	}
}

// httpError is an error with a status and a short reason for metrics.
type httpError struct {
	status int
	reason string
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func badParam(name string, format string, a ...any) error {
	return &httpError{http.StatusBadRequest, "bad_parameter", fmt.Sprintf("parameter %s: %s", name, fmt.Sprintf(format, a...))}
}

func notFound(format string, a ...any) error {
	return &httpError{http.StatusNotFound, "not_found", fmt.Sprintf(format, a...)}
}

var errNoFabric = &httpError{http.StatusServiceUnavailable, "no_fabric", "the fabric has not been discovered yet"}

func (s *Server) fail(w http.ResponseWriter, err error) {
	var he *httpError
	if !errors.As(err, &he) {
		if errors.Is(err, store.ErrNotFound) {
			he = &httpError{http.StatusNotFound, "not_found", err.Error()}
		} else if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			he = &httpError{http.StatusServiceUnavailable, "timeout", err.Error()}
		} else {
			s.opt.Log.Error("api: request failed", "err", err)
			he = &httpError{http.StatusInternalServerError, "internal", "internal error; see the daemon log"}
		}
	}
	if he.status < 500 {
		s.badRequests.WithLabelValues(he.reason).Inc()
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(he.status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": capMessage(he.msg), "reason": he.reason})
}

// maxErrorBytes bounds an error message in an answer. Messages quote what
// the request held (names, values) and each handler bounds its quotes;
// this is the backstop, so that no request can have megabytes of itself
// echoed back (one placement request once got a 104 MB 400).
const maxErrorBytes = 1024

// capMessage cuts msg to maxErrorBytes (at a rune boundary) and says how
// much was left out.
func capMessage(msg string) string { return echo.Clip(msg, maxErrorBytes) }

// parseTime accepts RFC 3339, Unix seconds (with fraction), "now", or a
// duration before now ("-1h", "90m"). Times before 1970 or more than
// maxFuture ahead are refused: nothing was recorded then, and Unix seconds
// past the year 2262 would overflow time's int64 nanoseconds and wrap to
// 1677 (at=99999999999 once did).
func parseTime(name, v string, now time.Time) (time.Time, error) {
	var t time.Time
	switch {
	case v == "" || v == "now":
		return now, nil
	case strings.HasPrefix(v, "-") || strings.HasSuffix(v, "s") || strings.HasSuffix(v, "m") || strings.HasSuffix(v, "h"):
		if d, err := time.ParseDuration(strings.TrimPrefix(v, "-")); err == nil {
			return checkTime(name, v, now.Add(-d))
		}
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		// NaN fails both comparisons; the bound keeps f*1e9 in an int64.
		if !(f >= 0 && f <= maxUnixSeconds) {
			return time.Time{}, badParam(name, "%q is out of range (Unix seconds from 0 to now)", v)
		}
		t = time.Unix(0, int64(f*1e9))
	} else if t, err = time.Parse(time.RFC3339Nano, v); err != nil {
		return time.Time{}, badParam(name, "%q is not a time (RFC 3339, Unix seconds, now, or a duration ago like -1h)", v)
	}
	return checkTime(name, v, t)
}

// maxFuture is how far ahead of the clock a time may be asked for: a
// client's clock a little ahead, or "to" a little past now, is fine.
const maxFuture = 24 * time.Hour

// maxUnixSeconds (the year 2255) is past any time checkTime lets through
// and short of the end of int64 nanoseconds (9.22e9 s, the year 2262).
const maxUnixSeconds = 9e9

// checkTime refuses times nothing can have been recorded at.
func checkTime(name, v string, t time.Time) (time.Time, error) {
	switch {
	case t.Before(time.Unix(0, 0)):
		return time.Time{}, badParam(name, "%q is before 1970", v)
	case t.After(time.Now().Add(maxFuture)):
		return time.Time{}, badParam(name, "%q is more than a day in the future", v)
	}
	return t, nil
}

// timeRange reads from/to (default: the last hour) and checks order.
func timeRange(r *http.Request) (from, to time.Time, err error) {
	now := time.Now()
	q := r.URL.Query()
	if to, err = parseTime("to", q.Get("to"), now); err != nil {
		return
	}
	f := q.Get("from")
	if f == "" {
		f = "-1h"
	}
	if from, err = parseTime("from", f, to); err != nil {
		return
	}
	if from.After(to) {
		err = badParam("from", "%s is after to (%s)", from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	return
}

func intParam(r *http.Request, name string, def, lo, hi int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, badParam(name, "%q: want an integer in %d..%d", v, lo, hi)
	}
	return n, nil
}

// view is the fabric as of the request's "at" parameter: the live
// snapshot when at is absent or now, else the stored version then.
type view struct {
	topo    *fabric.Topology
	version int64
	at      time.Time
	live    *FabricState // nil for past views
}

func (s *Server) viewAt(r *http.Request) (*view, error) {
	st := s.opt.State()
	at := r.URL.Query().Get("at")
	if at == "" || at == "now" {
		if st == nil {
			return nil, errNoFabric
		}
		return &view{topo: st.Topology, version: st.Version, at: time.Now(), live: st}, nil
	}
	t, err := parseTime("at", at, time.Now())
	if err != nil {
		return nil, err
	}
	topo, ver, err := s.opt.Store.TopologyAt(r.Context(), t)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("no topology recorded at or before %s", t.Format(time.RFC3339))
	}
	if err != nil {
		return nil, err
	}
	// A past time whose fabric is still the live one's version: the live
	// topology (the same fabric), whose routes the sFlow observation (the
	// observed split, the collisions) rests on; a recorded copy of it is
	// not that topology.
	if st != nil && st.Version == ver.ID {
		topo = st.Topology
	}
	return &view{topo: topo, version: ver.ID, at: t}, nil
}

// routes returns the route oracle for a view.
func (s *Server) routes(ctx context.Context, v *view) (*fabric.Routes, error) {
	if v.live != nil {
		if v.live.Routes == nil {
			return nil, &httpError{http.StatusServiceUnavailable, "no_routes", "forwarding tables have not been read yet"}
		}
		return v.live.Routes, nil
	}
	ft, _, err := s.opt.Store.ForwardingTablesAt(ctx, v.at)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("no forwarding tables recorded at or before %s", v.at.Format(time.RFC3339))
	}
	if err != nil {
		return nil, err
	}
	return fabric.NewRoutes(v.topo, ft), nil
}

// latest returns the newest sample per port as of the view.
func (s *Server) latest(ctx context.Context, v *view) (map[fabric.PortRef]*fabric.PortSample, error) {
	if v.live != nil {
		return v.live.Samples, nil
	}
	list, err := s.opt.Store.LatestSamples(ctx, v.at, 2*s.opt.SweepInterval+time.Second)
	if err != nil {
		return nil, err
	}
	m := make(map[fabric.PortRef]*fabric.PortSample, len(list))
	for i := range list {
		m[list[i].Port] = &list[i]
	}
	return m, nil
}

func (s *Server) status(r *http.Request) (any, error) {
	out := map[string]any{"time": time.Now()}
	if s.opt.Role != "" {
		out["role"] = s.opt.Role
	}
	if s.opt.Behind != nil {
		if b := s.opt.Behind(); b != nil {
			out["behind"] = b
		}
	}
	if !isAdmin(r.Context()) {
		return out, nil
	}
	st := s.opt.State()
	if st != nil {
		c := st.Topology.Counts()
		out["topology"] = map[string]any{"version": st.Version, "since": st.Since, "switches": c.Switches, "cas": c.CAs, "switch_ports": c.SwitchPorts, "links": c.Links}
		out["sweep"] = st.Sweep
		out["unreachable_ports"] = len(st.Unreachable)
		out["routes"] = st.Routes != nil
	}
	if stats, err := s.opt.Store.Stats(r.Context()); err == nil {
		out["store"] = stats
	}
	if s.opt.AgentAuth != nil {
		if a := s.opt.AgentAuth(); a != nil {
			out["agent_auth"] = a
		}
	}
	return out, nil
}

func (s *Server) fabricSummary(r *http.Request) (any, error) {
	v, err := s.viewAt(r)
	if err != nil {
		return nil, err
	}
	c := v.topo.Counts()
	return map[string]any{"version": v.version, "at": v.at, "switches": c.Switches, "cas": c.CAs,
		"switch_ports": c.SwitchPorts, "links": c.Links}, nil
}

func (s *Server) versions(r *http.Request) (any, error) {
	from, to, err := timeRange(r)
	if err != nil {
		return nil, err
	}
	vs, err := s.opt.Store.Versions(r.Context(), from, to)
	if err != nil {
		return nil, err
	}
	return map[string]any{"versions": vs}, nil
}

func (s *Server) nodes(r *http.Request) (any, error) {
	v, err := s.viewAt(r)
	if err != nil {
		return nil, err
	}
	typ := r.URL.Query().Get("type")
	if typ != "" && typ != "switch" && typ != "ca" {
		return nil, badParam("type", "%q: want switch or ca", typ)
	}
	nodes := v.topo.Nodes
	if typ != "" {
		nodes = nil
		for _, n := range v.topo.Nodes {
			if n.Type.String() == typ {
				nodes = append(nodes, n)
			}
		}
	}
	return map[string]any{"version": v.version, "at": v.at, "nodes": nodes}, nil
}

// linkJSON is a link with its capacity, as the API shows it.
type linkJSON struct {
	fabric.Link
	ID       string  `json:"id"`
	Capacity float64 `json:"capacity_bytes_per_second"`
}

func newLinkJSON(l fabric.Link) linkJSON {
	return linkJSON{Link: l, ID: l.ID(), Capacity: l.Capacity()}
}

func (s *Server) links(r *http.Request) (any, error) {
	v, err := s.viewAt(r)
	if err != nil {
		return nil, err
	}
	out := make([]linkJSON, len(v.topo.Links))
	for i, l := range v.topo.Links {
		out[i] = newLinkJSON(l)
	}
	return map[string]any{"version": v.version, "at": v.at, "links": out}, nil
}

// nodeView resolves the view and the {node} of the path.
func (s *Server) nodeView(r *http.Request) (*view, *fabric.Node, error) {
	v, err := s.viewAt(r)
	if err != nil {
		return nil, nil, err
	}
	n, err := v.topo.FindNode(r.PathValue("node"))
	if err != nil {
		return nil, nil, notFound("%v", err)
	}
	return v, n, nil
}

func (s *Server) node(r *http.Request) (any, error) {
	v, n, err := s.nodeView(r)
	if err != nil {
		return nil, err
	}
	latest, err := s.latest(r.Context(), v)
	if err != nil {
		return nil, err
	}
	type portJSON struct {
		Port int `json:"port"`
		// Name is the port's name where the fabric gives one (an Ethernet
		// interface's ifName); PeerPort its peer's.
		Name        string             `json:"name,omitempty"`
		LID         fabric.LID         `json:"lid,omitempty"`
		Link        *linkJSON          `json:"link,omitempty"`
		Peer        *fabric.PortRef    `json:"peer,omitempty"`
		PeerName    string             `json:"peer_description,omitempty"`
		PeerPort    string             `json:"peer_name,omitempty"`
		Rates       map[string]float64 `json:"rates,omitempty"`
		Unreachable bool               `json:"unreachable,omitempty"`
		// PeerRates are the latest rates of the link's other end: where this
		// port has none, what its link carried as that end measured it.
		PeerRates map[string]float64 `json:"peer_rates,omitempty"`
		// NoRates says why a linked port has no rates (noRates).
		NoRates string `json:"no_rates,omitempty"`
	}
	rates := func(smp *fabric.PortSample) map[string]float64 {
		m := make(map[string]float64, fabric.NumCounters)
		for c := fabric.Counter(0); c < fabric.NumCounters; c++ {
			m[fabric.CounterNames[c]] = smp.Rate(c)
		}
		return m
	}
	ports := []portJSON{}
	for p := 1; p <= n.Ports; p++ {
		ref := fabric.PortRef{GUID: n.GUID, Port: p}
		pj := portJSON{Port: p, Name: n.PortName(p)}
		if n.Type != fabric.Switch {
			pj.LID = n.PortLID(p)
		}
		if l, ok := v.topo.LinkAt(ref); ok {
			lj := newLinkJSON(*l)
			pj.Link = &lj
			peer, _ := v.topo.Peer(ref)
			pj.Peer = &peer
			if pn, ok := v.topo.Node(peer.GUID); ok {
				pj.PeerName, pj.PeerPort = pn.Description, pn.PortName(peer.Port)
			}
		}
		if smp, ok := latest[ref]; ok {
			pj.Rates = rates(smp)
		}
		if pj.Peer != nil {
			if smp, ok := latest[*pj.Peer]; ok {
				pj.PeerRates = rates(smp)
			}
		}
		if v.live != nil {
			_, pj.Unreachable = v.live.Unreachable[ref]
		}
		if pj.Link != nil && pj.Rates == nil {
			pj.NoRates = noRates(v, n, ref, pj.Unreachable, pj.PeerRates != nil)
		}
		ports = append(ports, pj)
	}
	return map[string]any{"version": v.version, "at": v.at, "node": n, "ports": ports}, nil
}

// Why a linked port has no rates (the node API's no_rates).
const (
	// NoRatesNotSwept: a host adapter port the daemon does not read (it
	// sweeps switch ports alone unless sweep_ca_ports is on); its link's
	// traffic is in the switch end's counters (peer_rates).
	NoRatesNotSwept = "not_swept"
	// NoRatesUnreachable: the port did not answer the last sweep.
	NoRatesUnreachable = "unreachable"
	// NoRatesFirstSweep: read once so far; a rate needs two readings.
	NoRatesFirstSweep = "first_sweep"
	// NoRatesNoSample: no sample of the port at the view's time.
	NoRatesNoSample = "no_sample"
)

// noRates says why linked port ref of node n has no rates in view v.
func noRates(v *view, n *fabric.Node, ref fabric.PortRef, unreachable, peerMeasured bool) string {
	switch {
	case unreachable:
		return NoRatesUnreachable
	case v.live != nil && v.live.Readings[ref] != nil:
		return NoRatesFirstSweep
	case n.Type == fabric.CA && (v.live != nil || peerMeasured):
		// Live, the last sweep did not read it; in the past, the switch
		// end was read at that time and this end was not.
		return NoRatesNotSwept
	}
	return NoRatesNoSample
}

// counterList reads the "counters" parameter (comma-separated names;
// default all).
func counterList(r *http.Request) ([]fabric.Counter, error) {
	v := r.URL.Query().Get("counters")
	if v == "" {
		out := make([]fabric.Counter, fabric.NumCounters)
		for i := range out {
			out[i] = fabric.Counter(i)
		}
		return out, nil
	}
	var out []fabric.Counter
	for _, name := range strings.Split(v, ",") {
		if name == "errors" {
			for c := fabric.FirstError; c < fabric.NumCounters; c++ {
				out = append(out, c)
			}
			continue
		}
		c, ok := fabric.CounterByName(name)
		if !ok {
			return nil, badParam("counters", "unknown counter %q (known: %s, or errors)", name, strings.Join(fabric.CounterNames[:], ", "))
		}
		out = append(out, c)
	}
	return out, nil
}

// seriesJSON is a columnar time series of one port: times (Unix seconds),
// and per counter the per-interval deltas and per-second rates.
type seriesJSON struct {
	Port      fabric.PortRef       `json:"port"`
	Time      []float64            `json:"time"`
	Span      []float64            `json:"span_seconds"`
	Reset     []int                `json:"resets"` // indices of samples with a counter reset
	Saturated []int                `json:"saturated"`
	Delta     map[string][]uint64  `json:"delta"`
	Rate      map[string][]float64 `json:"rate"`
}

func newSeries(p fabric.PortRef, samples []fabric.PortSample, counters []fabric.Counter) seriesJSON {
	s := seriesJSON{Port: p, Time: make([]float64, len(samples)), Span: make([]float64, len(samples)),
		Reset: []int{}, Saturated: []int{}, Delta: map[string][]uint64{}, Rate: map[string][]float64{}}
	for _, c := range counters {
		s.Delta[fabric.CounterNames[c]] = make([]uint64, len(samples))
		s.Rate[fabric.CounterNames[c]] = make([]float64, len(samples))
	}
	for i := range samples {
		x := &samples[i]
		s.Time[i] = float64(x.Time.UnixNano()) / 1e9
		s.Span[i] = x.Span.Seconds()
		if x.Reset {
			s.Reset = append(s.Reset, i)
		}
		if x.Saturated {
			s.Saturated = append(s.Saturated, i)
		}
		for _, c := range counters {
			s.Delta[fabric.CounterNames[c]][i] = x.Delta[c]
			s.Rate[fabric.CounterNames[c]][i] = x.Rate(c)
		}
	}
	return s
}

func (s *Server) series(r *http.Request, ports []fabric.PortRef) ([]seriesJSON, time.Time, time.Time, error) {
	from, to, counters, err := seriesParams(r)
	if err != nil {
		return nil, from, to, err
	}
	ser, err := s.seriesOf(r.Context(), ports, from, to, counters)
	return ser, from, to, err
}

// seriesParams reads a series' range and counters.
func seriesParams(r *http.Request) (from, to time.Time, counters []fabric.Counter, err error) {
	if from, to, err = timeRange(r); err != nil {
		return
	}
	counters, err = counterList(r)
	return
}

// seriesOf is the series of ports over [from, to].
func (s *Server) seriesOf(ctx context.Context, ports []fabric.PortRef, from, to time.Time, counters []fabric.Counter) ([]seriesJSON, error) {
	got, err := s.opt.Store.PortSamples(ctx, ports, from, to)
	if err != nil {
		return nil, err
	}
	out := make([]seriesJSON, len(ports))
	for i, p := range ports {
		out[i] = newSeries(p, got[p], counters)
	}
	return out, nil
}

func (s *Server) portCounters(r *http.Request) (any, error) {
	p, err := fabric.ParsePortRef(r.PathValue("port"))
	if err != nil {
		return nil, badParam("port", "%v", err)
	}
	ser, from, to, err := s.series(r, []fabric.PortRef{p})
	if err != nil {
		return nil, err
	}
	return map[string]any{"from": from, "to": to, "series": ser[0]}, nil
}

func (s *Server) nodeCounters(r *http.Request) (any, error) {
	v, n, err := s.nodeView(r)
	if err != nil {
		return nil, err
	}
	var ports []fabric.PortRef
	for p := 1; p <= n.Ports; p++ {
		if _, ok := v.topo.LinkAt(fabric.PortRef{GUID: n.GUID, Port: p}); ok {
			ports = append(ports, fabric.PortRef{GUID: n.GUID, Port: p})
		}
	}
	ser, from, to, err := s.series(r, ports)
	if err != nil {
		return nil, err
	}
	return map[string]any{"node": n, "from": from, "to": to, "series": ser}, nil
}

// linkView resolves the view and the {link} of the path.
func (s *Server) linkView(r *http.Request) (*view, *fabric.Link, error) {
	v, err := s.viewAt(r)
	if err != nil {
		return nil, nil, err
	}
	l, err := v.topo.FindLink(r.PathValue("link"))
	if err != nil {
		return nil, nil, notFound("%v", err)
	}
	return v, l, nil
}

func (s *Server) link(r *http.Request) (any, error) {
	v, err := s.viewAt(r)
	if err != nil {
		return nil, err
	}
	l, _, err := s.visibleLink(r.Context(), v, r.PathValue("link"), v.at.Add(-time.Hour), v.at, s.owners(r.Context()))
	if err != nil {
		return nil, err
	}
	latest, err := s.latest(r.Context(), v)
	if err != nil {
		return nil, err
	}
	return map[string]any{"version": v.version, "at": v.at, "link": newLinkJSON(*l),
		"directions": linkDirections(v.topo, l, latest)}, nil
}

// direction is one direction of a link with its latest load.
type direction struct {
	From        fabric.PortRef `json:"from"`
	To          fabric.PortRef `json:"to"`
	FromName    string         `json:"from_description"`
	ToName      string         `json:"to_description"`
	FromPort    string         `json:"from_name,omitempty"` // the ports' names (Node.PortNames)
	ToPort      string         `json:"to_name,omitempty"`
	Rate        float64        `json:"bytes_per_second"`
	Utilization float64        `json:"utilization_pct"`
	XmitWait    uint64         `json:"xmit_wait"`
	Errors      uint64         `json:"errors"` // errors counted at the receiving end
	Measured    bool           `json:"measured"`
}

// linkDirections computes both directions' load. Traffic from X to Y is
// X's transmit counter when X was swept, else Y's receive counter.
func linkDirections(t *fabric.Topology, l *fabric.Link, latest map[fabric.PortRef]*fabric.PortSample) [2]direction {
	var out [2]direction
	capacity := l.Capacity()
	for i, ends := range [2][2]fabric.PortRef{{l.A, l.B}, {l.B, l.A}} {
		d := direction{From: ends[0], To: ends[1], FromPort: t.PortName(ends[0]), ToPort: t.PortName(ends[1])}
		if n, ok := t.Node(ends[0].GUID); ok {
			d.FromName = n.Description
		}
		if n, ok := t.Node(ends[1].GUID); ok {
			d.ToName = n.Description
		}
		if x, ok := latest[ends[0]]; ok {
			d.Rate, d.XmitWait, d.Measured = x.Rate(fabric.XmitData), x.Delta[fabric.XmitWait], true
		} else if y, ok := latest[ends[1]]; ok {
			d.Rate, d.Measured = y.Rate(fabric.RcvData), true
		}
		if y, ok := latest[ends[1]]; ok {
			for c := fabric.FirstError; c < fabric.NumCounters; c++ {
				d.Errors += y.Delta[c]
			}
		}
		if capacity > 0 {
			d.Utilization = 100 * d.Rate / capacity
		}
		out[i] = d
	}
	return out
}

func (s *Server) linkCounters(r *http.Request) (any, error) {
	v, err := s.viewAt(r)
	if err != nil {
		return nil, err
	}
	from, to, counters, err := seriesParams(r)
	if err != nil {
		return nil, err
	}
	l, _, err := s.visibleLink(r.Context(), v, r.PathValue("link"), from, to, s.owners(r.Context()))
	if err != nil {
		return nil, err
	}
	ser, err := s.seriesOf(r.Context(), []fabric.PortRef{l.A, l.B}, from, to, counters)
	if err != nil {
		return nil, err
	}
	return map[string]any{"link": newLinkJSON(*l), "from": from, "to": to, "series": ser}, nil
}

func (s *Server) linkRoutes(r *http.Request) (any, error) {
	v, l, err := s.linkView(r)
	if err != nil {
		return nil, err
	}
	limit, err := intParam(r, "limit", 1000, 1, 1_000_000)
	if err != nil {
		return nil, err
	}
	routes, err := s.routes(r.Context(), v)
	if err != nil {
		return nil, err
	}
	type dirJSON struct {
		From  fabric.PortRef     `json:"from"`
		To    fabric.PortRef     `json:"to"`
		Total int                `json:"total"`
		Pairs []fabric.PairShare `json:"pairs"`
	}
	var out []dirJSON
	for _, ends := range [2][2]fabric.PortRef{{l.A, l.B}, {l.B, l.A}} {
		pairs, total, err := routes.PairSharesThrough(ends[0], limit)
		if err != nil {
			return nil, err
		}
		if pairs == nil {
			pairs = []fabric.PairShare{}
		}
		out = append(out, dirJSON{ends[0], ends[1], total, pairs})
	}
	return withRouteModel(v.topo, map[string]any{"link": newLinkJSON(*l), "directions": out}), nil
}

func (s *Server) routePath(r *http.Request) (any, error) {
	v, err := s.viewAt(r)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	var ends [2]fabric.PortRef
	for i, name := range []string{"src", "dst"} {
		if q.Get(name) == "" {
			return nil, badParam(name, "missing (a node name, GUID or LID)")
		}
		p, err := v.topo.Endpoint(q.Get(name))
		if err != nil {
			return nil, badParam(name, "%v", err)
		}
		ends[i] = p
	}
	routes, err := s.routes(r.Context(), v)
	if err != nil {
		return nil, err
	}
	rt, err := routes.PathBetween(ends[0], ends[1])
	if err != nil {
		return nil, notFound("%v", err)
	}
	return rt, nil
}

func (s *Server) topLinks(r *http.Request) (any, error) {
	v, err := s.viewAt(r)
	if err != nil {
		return nil, err
	}
	by := r.URL.Query().Get("by")
	if by == "" {
		by = "utilization"
	}
	var key func(d *direction) float64
	switch by {
	case "utilization":
		key = func(d *direction) float64 { return d.Utilization }
	case "bytes":
		key = func(d *direction) float64 { return d.Rate }
	case "errors":
		key = func(d *direction) float64 { return float64(d.Errors) }
	case "xmit_wait":
		key = func(d *direction) float64 { return float64(d.XmitWait) }
	default:
		return nil, badParam("by", "%q: want utilization, bytes, errors or xmit_wait", by)
	}
	n, err := intParam(r, "n", 10, 1, 10000)
	if err != nil {
		return nil, err
	}
	latest, err := s.latest(r.Context(), v)
	if err != nil {
		return nil, err
	}
	type entry struct {
		Link linkJSON `json:"link"`
		direction
	}
	all := make([]entry, 0, 2*len(v.topo.Links))
	for i := range v.topo.Links {
		l := &v.topo.Links[i]
		for _, d := range linkDirections(v.topo, l, latest) {
			if d.Measured {
				all = append(all, entry{newLinkJSON(*l), d})
			}
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return key(&all[i].direction) > key(&all[j].direction) })
	if len(all) > n {
		all = all[:n]
	}
	return map[string]any{"at": v.at, "by": by, "links": all}, nil
}

func (s *Server) events(r *http.Request) (any, error) {
	from, to, err := timeRange(r)
	if err != nil {
		return nil, err
	}
	limit, err := intParam(r, "limit", 1000, 1, 100000)
	if err != nil {
		return nil, err
	}
	q := store.EventQuery{From: from, To: to, Kind: r.URL.Query().Get("kind"), Limit: limit}
	if g := r.URL.Query().Get("node"); g != "" {
		if q.Node, err = fabric.ParseGUID(g); err != nil {
			return nil, badParam("node", "%v", err)
		}
	}
	// One more than asked for tells whether the list is cut; only then
	// are they all counted.
	q.Limit = limit + 1
	ev, err := s.opt.Store.Events(r.Context(), q)
	if err != nil {
		return nil, err
	}
	total := len(ev)
	if len(ev) > limit {
		if total, err = s.opt.Store.EventCount(r.Context(), q); err != nil {
			return nil, err
		}
		ev = ev[:limit]
	}
	if ev == nil {
		ev = []fabric.Event{}
	}
	return listed(map[string]any{"from": from, "to": to, "events": ev}, total, limit), nil
}

// listed says how a list in answer m was cut: total is how many it would
// hold, limit how many it may (every limited list says both, and whether
// it was cut).
func listed(m map[string]any, total, limit int) map[string]any {
	m["total"], m["limit"], m["truncated"] = total, limit, total > limit
	return m
}
