package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
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

// jobHidden is the answer for a job the principal may not see.
func jobHidden(id string) error { return notFound("no job %q", id) }

// checkLink lets a user see link l over [from, to] only when one of
// their jobs' traffic crossed it then; owner tells a job id's owner. For
// a user it returns the jobs' bytes on the link that it read to decide
// (nil for an administrator, whom it lets through unread).
func (s *Server) checkLink(ctx context.Context, l *fabric.Link, from, to time.Time, owner func(id string) string) ([]store.LinkJobBytes, error) {
	p := principal(ctx)
	if p == nil {
		return nil, errUnauthenticated
	}
	if p.Admin {
		return nil, nil
	}
	got, err := s.opt.Store.LinkJobs(ctx, []fabric.PortRef{l.A, l.B}, from, to)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, x := range got {
		if !seen[x.Job] {
			seen[x.Job] = true
			if owner(x.Job) == p.Name {
				return got, nil
			}
		}
	}
	// As for jobs: not "forbidden", which would confirm the link exists.
	return nil, notFound("no link %q crossed by your jobs between %s and %s", l.ID(), from.Format(time.RFC3339), to.Format(time.RFC3339))
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

// jobSummary finds a job's summary: live first, else stored.
func (s *Server) jobSummary(ctx context.Context, id string) (*store.JobSummary, error) {
	if j, ok := s.live()[id]; ok {
		return &j.JobSummary, nil
	}
	js, err := s.opt.Store.JobSummary(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("no job %q", id)
	}
	return js, err
}

func (s *Server) live() map[string]*store.Job {
	if s.liveJobs == nil {
		return nil
	}
	return s.liveJobs()
}
