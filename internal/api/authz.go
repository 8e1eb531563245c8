package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/netloom/netloom/internal/auth"
	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
)

// Who sees what (docs/security.md). An administrator sees everything. A
// user sees their own jobs, and of the fabric only the links their jobs'
// traffic crossed in the range asked about, with other jobs on them
// anonymized. Every endpoint is admin-only unless registered with
// userRoute, whose handler applies these rules itself; another user's job
// answers 404, exactly as a job that does not exist, so ids cannot be
// probed.

var (
	errUnauthenticated = &httpError{http.StatusUnauthorized, "unauthenticated", "sign in first"}
	errForbidden       = &httpError{http.StatusForbidden, "forbidden", "only administrators can see this"}
)

// principal is the request's principal; nil when the API runs without the
// auth guard in front, which then serves nobody.
func principal(ctx context.Context) *auth.Principal { return auth.FromContext(ctx) }

func isAdmin(ctx context.Context) bool {
	p := principal(ctx)
	return p != nil && p.Admin
}

// allowed checks the principal against a route's rule.
func allowed(r *http.Request, adminOnly bool) error {
	p := principal(r.Context())
	switch {
	case p == nil:
		return errUnauthenticated
	case adminOnly && !p.Admin:
		return errForbidden
	}
	return nil
}

// adminOnly wraps a plain handler (streams, layout, metrics).
func (s *Server) adminOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := allowed(r, true); err != nil {
			s.fail(w, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// canSeeJob says whether the request's principal may see job j.
func canSeeJob(ctx context.Context, j *store.JobSummary) bool {
	p := principal(ctx)
	return p != nil && (p.Admin || (j.Owner() != "" && j.Owner() == p.Name))
}

// errJobHidden is the one answer for a job the principal may not see and
// for a job that does not exist: it does not even quote the id, so that
// the answers to two ids are the same bytes.
var errJobHidden = &httpError{http.StatusNotFound, "not_found", "no job you may see has that id"}

// errLinkHidden is a user's one answer for every link they may not see:
// a link their jobs did not cross in the range, a port without a link, a
// port or node that does not exist, an id that is not one. It names
// nothing, not even the id asked for, so that answers to many probes are
// byte for byte the same and tell nothing of the fabric behind them.
var errLinkHidden = &httpError{http.StatusNotFound, "not_found", "no link crossed by your jobs in the range asked for has that id"}

// visibleLink resolves the link named id in view v for the request's
// principal. An administrator gets any link (else a 404 saying what is
// wrong with id). A user gets it only when one of their jobs' traffic
// crossed it over [from, to], and errLinkHidden otherwise, whatever lies
// behind id; owner tells a job id's owner. For a user it also returns the
// jobs' bytes on the link that it read to decide (nil for an
// administrator, whom it lets through unread).
//
// Callers check every parameter that does not depend on the link before
// calling it: a user must not see a 400 for one id where another id gets
// errLinkHidden.
func (s *Server) visibleLink(ctx context.Context, v *view, id string, from, to time.Time, owner func(id string) string) (*fabric.Link, []store.LinkJobBytes, error) {
	p := principal(ctx)
	if p == nil {
		return nil, nil, errUnauthenticated
	}
	l, err := v.topo.FindLink(id)
	if p.Admin {
		if err != nil {
			return nil, nil, notFound("%v", err)
		}
		return l, nil, nil
	}
	// The same store read whether a link is there or not.
	ports := probedPorts(id)
	if err == nil {
		ports = []fabric.PortRef{l.A, l.B}
	}
	got, rerr := s.opt.Store.LinkJobs(ctx, ports, from, to)
	if rerr != nil {
		return nil, nil, rerr
	}
	if err != nil {
		return nil, nil, errLinkHidden
	}
	seen := map[string]bool{}
	for _, x := range got {
		if !seen[x.Job] {
			seen[x.Job] = true
			if owner(x.Job) == p.Name {
				return l, got, nil
			}
		}
	}
	// As for jobs: not "forbidden", which would confirm the link exists.
	return nil, nil, errLinkHidden
}

// probedPorts are the ports a link id names, as far as it names any: the
// store is read for them when no link answers to the id, as it is for a
// link's two ends.
func probedPorts(id string) []fabric.PortRef {
	var out []fabric.PortRef
	for _, part := range strings.SplitN(id, "-", 2) {
		if p, err := fabric.ParsePortRef(part); err == nil {
			out = append(out, p)
		}
	}
	for len(out) < 2 {
		out = append(out, fabric.PortRef{})
	}
	return out
}

// anonymizer renames other users' jobs "other-1", "other-2", ... in the
// order first met, so a user sees how a link is shared without learning
// whose jobs share it.
type anonymizer struct {
	user  string // "" for an administrator: nothing is hidden
	owner func(id string) string
	names map[string]string
}

func newAnonymizer(ctx context.Context, owner func(id string) string) *anonymizer {
	a := &anonymizer{owner: owner, names: map[string]string{}}
	if p := principal(ctx); p != nil && !p.Admin {
		a.user = p.Name
	}
	return a
}

// apply hides d's job unless it is the user's.
func (a *anonymizer) apply(d *dirJob) {
	if a.user == "" || a.owner(d.Job) == a.user {
		return
	}
	name, ok := a.names[d.Job]
	if !ok {
		name = "other-" + strconv.Itoa(len(a.names)+1)
		a.names[d.Job] = name
	}
	d.Job, d.User, d.Anonymized = name, "", true
}

func (a *anonymizer) applyAll(ds []dirJob) {
	for i := range ds {
		a.apply(&ds[i])
	}
}

// owners returns a lookup of job owners for one request, remembering
// what it found (live jobs first, else the store; "" when unknown).
func (s *Server) owners(ctx context.Context) func(id string) string {
	known := map[string]string{}
	return func(id string) string {
		if o, ok := known[id]; ok {
			return o
		}
		o := ""
		if js, err := s.jobSummary(ctx, id); err == nil {
			o = js.Owner()
		}
		known[id] = o
		return o
	}
}

// visibleSummary finds job id's summary for the request's principal:
// ownership is checked before anything else of the job is read. A job a
// user may not see answers errJobHidden, as a job that does not exist, and
// costs the same: whatever the id names (the user's job, another's, live
// or stored, or nothing), a user's request reads the store once for it
// and decodes one summary (the stored one, or the decoy when none is
// stored), so that neither the answer nor its time tells whether another
// user's job exists (docs/security.md).
func (s *Server) visibleSummary(ctx context.Context, id string) (*store.JobSummary, error) {
	p := principal(ctx)
	if p == nil {
		return nil, errUnauthenticated
	}
	live, inLive := s.live()[id]
	if p.Admin {
		if inLive {
			return &live.JobSummary, nil
		}
		return s.jobSummary(ctx, id)
	}
	js, err := s.opt.Store.JobSummary(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		js = nil
		s.decoy.decode()
	case err != nil:
		return nil, err
	default:
		s.decoy.keep(js)
	}
	if inLive {
		js = &live.JobSummary
	}
	if js == nil || !canSeeJob(ctx, js) {
		return nil, errJobHidden
	}
	return js, nil
}

// decoy is a job summary as the store holds it, decoded where the store
// holds none, so that a missing job costs what a stored one does. It is
// refreshed from a summary met at most once a minute (re-encoding one costs
// about what decoding it does).
type decoy struct {
	mu   sync.Mutex
	data []byte
	at   time.Time
}

const decoyRefresh = time.Minute

func (d *decoy) keep(js *store.JobSummary) {
	d.mu.Lock()
	stale := d.data == nil || time.Since(d.at) >= decoyRefresh
	if stale {
		d.at = time.Now() // one refresh at a time
	}
	d.mu.Unlock()
	if !stale {
		return
	}
	b, err := json.Marshal(js)
	if err != nil {
		return
	}
	d.mu.Lock()
	d.data = b
	d.mu.Unlock()
}

func (d *decoy) decode() {
	d.mu.Lock()
	b := d.data
	d.mu.Unlock()
	if b == nil {
		b, _ = json.Marshal(&store.JobSummary{ID: "decoy", State: store.JobFinished, User: "decoy", Program: "/decoy",
			Scheduler: &store.SchedInfo{User: "decoy", Nodes: []string{"decoy"}}})
	}
	var js store.JobSummary
	_ = json.Unmarshal(b, &js)
}

// jobSummary finds a job's summary: live first, else stored.
func (s *Server) jobSummary(ctx context.Context, id string) (*store.JobSummary, error) {
	if j, ok := s.live()[id]; ok {
		return &j.JobSummary, nil
	}
	js, err := s.opt.Store.JobSummary(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errJobHidden
	}
	return js, err
}

func (s *Server) live() map[string]*store.Job {
	if s.liveJobs == nil {
		return nil
	}
	return s.liveJobs()
}
