package api

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/user"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"

	"github.com/netloom/netloom/internal/ingest"
	"github.com/netloom/netloom/internal/jobfiles"
	"github.com/netloom/netloom/internal/model"
	"github.com/netloom/netloom/internal/place"
	"github.com/netloom/netloom/internal/store"
)

// ModelOptions bound what GET /jobs/{job}/model reads and runs
// (docs/security.md, "What the daemon reads").
type ModelOptions struct {
	// TraceRoot is the only folder the daemon reads jobs' traces under
	// ("": it reads none and /model says so). A job's folder and files
	// must be its owner's, reached without symbolic links.
	TraceRoot string
	// MaxActions bounds the actions of one job's traces (default 2
	// million: about 50 bytes of the daemon's memory each while checked, 100 MB).
	MaxActions int
	// Files bound the bytes read of one job's folder.
	Files jobfiles.Limits
	// Timeout bounds one prediction, reading and replays (default 2
	// minutes); the answer's write deadline is extended beyond it.
	Timeout time.Duration
	// PerUser bounds one user's predictions waiting or running (default
	// 4: a few browser tabs); Queue all predictions waiting for a replay slot (default 8);
	// Replays the replays run at once (default 1).
	PerUser, Queue, Replays int
	// MaxScenarios bounds the network= parameters of one request
	// (default 8).
	MaxScenarios int
}

// DefaultModelOptions are the bounds where ModelOptions set none.
var DefaultModelOptions = ModelOptions{MaxActions: 2_000_000, Files: jobfiles.DefaultLimits, Timeout: 2 * time.Minute,
	PerUser: 4, Queue: 8, Replays: 1, MaxScenarios: 8}

func (o ModelOptions) withDefaults() ModelOptions {
	d := DefaultModelOptions
	o.MaxActions = cmp.Or(max(o.MaxActions, 0), d.MaxActions)
	if o.Files == (jobfiles.Limits{}) {
		o.Files = d.Files
	}
	o.Timeout = cmp.Or(max(o.Timeout, 0), d.Timeout)
	o.PerUser = cmp.Or(max(o.PerUser, 0), d.PerUser)
	o.Queue = cmp.Or(max(o.Queue, 0), d.Queue)
	o.Replays = cmp.Or(max(o.Replays, 0), d.Replays)
	o.MaxScenarios = cmp.Or(max(o.MaxScenarios, 0), d.MaxScenarios)
	return o
}

// serveModel adds GET /api/v1/jobs/{job}/model: what-if predictions for a
// finished job whose ranks wrote replay traces (netloom run --trace) under
// the trace root, on the fabric as of the request (docs/model.md).
func (a *attribAPI) serveModel() {
	opt := a.opt.Model.withDefaults()
	a.model = &modelRunner{opt: opt, cache: map[string]*model.Result{}, slot: make(chan struct{}, opt.Replays),
		waiting: make(chan struct{}, opt.Queue), users: map[string]int{},
		counted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "netloom_model_predictions_total",
			Help: "What-if prediction requests (GET /jobs/{job}/model) by result: computed (traces read and replayed), cached, joined (shared an identical request's computation), refused (a bound or a bad trace), failed.",
		}, []string{"result"})}
	if a.s.opt.Registry != nil {
		a.s.opt.Registry.MustRegister(a.model.counted)
	}
	a.s.slowUserRoute("GET /api/v1/jobs/{job}/model", opt.Timeout, a.modelAnswer)
}

// modelRunner runs a few replays at a time, one computation for identical
// questions, and keeps each answer under the identity of everything it
// depends on.
type modelRunner struct {
	opt     ModelOptions
	flight  singleflight.Group
	slot    chan struct{} // replays running
	waiting chan struct{} // predictions waiting for a slot
	mu      sync.Mutex
	cache   map[string]*model.Result
	users   map[string]int // each user's predictions waiting or running
	counted *prometheus.CounterVec
}

// modelCacheSize bounds the answers kept (each holds a time per rank).
const modelCacheSize = 64

var errModelBusy = &httpError{http.StatusServiceUnavailable, "busy", "the daemon's prediction queue is full; try again shortly"}

// admit counts one of user's predictions until done is called; it refuses
// past the per-user bound, so that no user holds the daemon's request
// slots waiting.
func (m *modelRunner) admit(user string) (done func(), err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.users[user] >= m.opt.PerUser {
		return nil, &httpError{http.StatusTooManyRequests, "too_many_predictions",
			fmt.Sprintf("you have %d predictions waiting or running, the most one user may: wait for their answers", m.users[user])}
	}
	m.users[user]++
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.users[user]--; m.users[user] <= 0 {
			delete(m.users, user)
		}
	}, nil
}

func (a *attribAPI) modelAnswer(r *http.Request) (any, error) {
	j, err := a.s.visibleJob(r.Context(), r.PathValue("job"))
	if err != nil {
		return nil, err
	}
	m := a.model
	names := r.URL.Query()["network"]
	// placement=advice: the job replayed placed as GET /jobs/{job}/placement
	// advises (its default options), beside any network asked for
	withAdvice := false
	switch pl := r.URL.Query().Get("placement"); pl {
	case "":
	case "advice":
		withAdvice = true
	default:
		return nil, badParam("placement", "%q: want advice", pl)
	}
	if len(names) == 0 && !withAdvice {
		names = []string{"perfect", "x2"}
	}
	var nets []model.Network
	seen := map[string]bool{}
	for _, s := range names {
		if seen[s] {
			continue
		}
		seen[s] = true
		if len(seen) > m.opt.MaxScenarios {
			return nil, badParam("network", "more than %d scenarios in one request", m.opt.MaxScenarios)
		}
		n, err := model.ParseNetwork(s)
		if err != nil {
			return nil, badParam("network", "%v", err)
		}
		nets = append(nets, n)
	}
	if j.TraceDir == "" {
		return nil, &httpError{http.StatusNotFound, "not_traced", "job " + j.ID + " was not traced: run it with netloom run --trace --output DIR (DIR under the daemon's trace_root)"}
	}
	if j.State != store.JobFinished {
		return nil, &httpError{http.StatusConflict, "running", "job " + j.ID + " is running: its ranks write their traces at MPI_Finalize"}
	}
	if m.opt.TraceRoot == "" {
		return nil, &httpError{http.StatusNotFound, "traces_off", "this daemon reads no traces (trace_root is not set): predict job " + j.ID + " with netloom model " + j.TraceDir}
	}
	owner := j.Owner()
	uid, err := lookupUID(owner)
	if err != nil {
		return nil, &httpError{http.StatusNotFound, "no_trace", "job " + j.ID + ": its owner " + strconv.Quote(owner) + " is no account on the daemon's host, whose files the daemon could read as theirs"}
	}
	v, err := a.s.viewAt(r)
	if err != nil {
		return nil, err
	}
	open := func(ctx context.Context) (*jobfiles.FS, error) {
		fsys, err := jobfiles.Open(ctx, m.opt.TraceRoot, j.TraceDir, uid, m.opt.Files)
		if errors.Is(err, jobfiles.ErrNotYours) {
			a.s.opt.Log.Info("model: a job's trace folder refused", "job", j.ID, "user", owner, "dir", j.TraceDir, "why", jobfiles.Why(err))
			return nil, &httpError{http.StatusNotFound, "no_trace", "job " + j.ID + ": " + err.Error()}
		}
		if err == nil {
			fsys.OnRefuse(func(path string, why error) {
				a.s.opt.Log.Info("model: a job's trace file refused", "job", j.ID, "user", owner, "path", path, "why", why.Error())
			})
		}
		return fsys, err
	}
	fsys, err := open(r.Context())
	if err != nil {
		return nil, err
	}
	files, err := fingerprint(fsys)
	if err != nil {
		return nil, &httpError{http.StatusNotFound, "no_trace", "job " + j.ID + ": " + err.Error()}
	}
	// The answer depends on the job as it ran (its id, start and owner),
	// the files as they are now, the fabric's version and the question:
	// never on a name another user can reuse.
	parts := []string{j.ID, j.Start.UTC().Format(time.RFC3339Nano), owner, j.TraceDir, files, strconv.FormatInt(v.version, 10)}
	if v.live == nil { // a past view's time; the live one's changes each request, its version does not
		parts = append(parts, v.at.UTC().Format(time.RFC3339Nano))
	}
	h := sha256.New()
	question := slices.Clone(names)
	if withAdvice {
		question = append(question, "placement=advice")
	}
	for _, s := range append(parts, question...) {
		fmt.Fprintf(h, "%d:%s", len(s), s)
	}
	key := hex.EncodeToString(h.Sum(nil))
	m.mu.Lock()
	res, ok := m.cache[key]
	m.mu.Unlock()
	if ok {
		m.counted.WithLabelValues("cached").Inc()
		return res, nil
	}
	p := principal(r.Context())
	done, err := m.admit(p.Name)
	if err != nil {
		m.counted.WithLabelValues("refused").Inc()
		return nil, err
	}
	defer done()
	routes, nodes, err := a.routesAndNodes(r.Context(), v)
	if err != nil {
		return nil, err
	}
	ran := false // this request's own function computed the answer
	ch := m.flight.DoChan(key, func() (any, error) {
		ran = true
		ctx, cancel := context.WithTimeout(context.Background(), m.opt.Timeout)
		defer cancel()
		select {
		case m.waiting <- struct{}{}:
		default:
			return nil, errModelBusy
		}
		select {
		case m.slot <- struct{}{}:
			<-m.waiting
			defer func() { <-m.slot }()
		case <-ctx.Done():
			<-m.waiting
			return nil, &httpError{http.StatusServiceUnavailable, "busy", "other predictions ran for " + m.opt.Timeout.String() + ": try again"}
		}
		fsys, err := open(ctx)
		if err != nil {
			return nil, err
		}
		job, warnings, err := model.LoadFrom(model.Source{FS: fsys, Name: fsys.Dir(), MaxActions: m.opt.MaxActions, MaxRecord: 64 << 20})
		if err != nil {
			return nil, timeoutOr(ctx, j.ID, m.opt.Timeout, &httpError{http.StatusNotFound, "no_trace", "job " + j.ID + ": " + err.Error()})
		}
		// the advice inside the flight and its slot: computed once for
		// requests that share the question, and bounded as replays are
		var advised []string
		if withAdvice {
			adv, err := advise(j, place.Options{Seed: 1}, routes, nodes)
			if err != nil {
				return nil, err
			}
			if advised, err = adv.NodesOf(job.Ranks); err != nil {
				return nil, &httpError{http.StatusUnprocessableEntity, "model_failed", "job " + j.ID + ": " + err.Error()}
			}
		}
		plat, err := model.FromRoutes("fabric", routes, model.Hosts(job.Nodes, advised), model.Cores(job.Nodes, advised), nodes.LID, model.DefaultHopLatency, model.DefaultLoopback)
		if err != nil {
			return nil, &httpError{http.StatusBadRequest, "not_on_fabric", "job " + j.ID + ": " + err.Error()}
		}
		work, err := os.MkdirTemp("", "netloom-model-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(work)
		// What is wrong with the job's own traces (checked first, while
		// the only step said is "reading") is the user's to see; what
		// fails later, or names the daemon's work folder, is the replay's
		// own (the simulator's abort, its command line, temporary paths):
		// the daemon's to log, never the answer's.
		var replaying atomic.Bool
		progress := func(format string, _ ...any) {
			if !strings.HasPrefix(format, "reading ") {
				replaying.Store(true)
			}
		}
		res, err := model.Predict(ctx, job, model.Request{Platform: plat, HostOf: job.Nodes, Networks: nets, Placement: advised,
			Work: work, Progress: progress})
		if err != nil {
			msg := "job " + j.ID + ": " + err.Error()
			if replaying.Load() || strings.Contains(err.Error(), work) {
				a.s.opt.Log.Warn("model: a replay failed", "job", j.ID, "user", owner, "networks", names, "err", err)
				msg = "job " + j.ID + ": the replay of its traces failed; the daemon's log says why"
			}
			return nil, timeoutOr(ctx, j.ID, m.opt.Timeout, &httpError{http.StatusUnprocessableEntity, "model_failed", msg})
		}
		res.Warnings = slices.Concat([]string{}, warnings, res.Warnings)
		m.counted.WithLabelValues("computed").Inc()
		m.mu.Lock()
		if len(m.cache) >= modelCacheSize { // bounded: a day's questions, not the daemon's life
			clear(m.cache)
		}
		m.cache[key] = res
		m.mu.Unlock()
		return res, nil
	})
	select {
	case out := <-ch:
		if out.Shared && !ran { // ran is read after fn returned: the channel orders it
			m.counted.WithLabelValues("joined").Inc()
		}
		var he *httpError
		switch {
		case out.Err == nil:
			return out.Val, nil
		case errors.As(out.Err, &he) && he.status < 500:
			m.counted.WithLabelValues("refused").Inc()
		default:
			m.counted.WithLabelValues("failed").Inc()
		}
		return nil, out.Err
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
}

// timeoutOr is the answer for a prediction that failed: its timeout when
// that is why, else err.
func timeoutOr(ctx context.Context, job string, limit time.Duration, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &httpError{http.StatusServiceUnavailable, "timeout", "job " + job + ": reading and replaying its traces took longer than " + limit.String() + ": use netloom model"}
	}
	return err
}

// lookupUID is a user name's uid on the daemon's host (a number when the
// agents knew the uid but the host no name for it).
func lookupUID(name string) (uint32, error) {
	if name == "" {
		return 0, errors.New("no owner")
	}
	if u, err := user.Lookup(name); err == nil {
		n, err := strconv.ParseUint(u.Uid, 10, 32)
		return uint32(n), err
	}
	n, err := strconv.ParseUint(name, 10, 32)
	return uint32(n), err
}

// fingerprint identifies a job folder's files as they are now: the name,
// size, modification time and inode of each file of the folder and of its
// job subdirectory, so that a changed or replaced trace is a new question.
func fingerprint(fsys fs.FS) (string, error) {
	sub, err := ingest.FindProfileDirFS(fsys, "the job's folder")
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, dir := range slices.Compact([]string{".", sub}) {
		entries, err := fs.ReadDir(fsys, dir)
		if err != nil {
			return "", err
		}
		for _, e := range entries {
			info, err := e.Info()
			if err != nil {
				continue // gone since listed
			}
			var ino uint64
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				ino = st.Ino
			}
			fmt.Fprintf(h, "%s\x00%d\x00%d\x00%d\x00", path.Join(dir, e.Name()), info.Size(), info.ModTime().UnixNano(), ino)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
