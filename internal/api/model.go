package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/netloom/netloom/internal/model"
	"github.com/netloom/netloom/internal/store"
)

// serveModel adds GET /api/v1/jobs/{job}/model: what-if predictions for a
// finished job whose ranks wrote replay traces (netloom run --trace) where
// the daemon can read them, on the fabric as of the request (docs/model.md).
func (a *attribAPI) serveModel() {
	a.model = &modelRunner{cache: map[string]*model.Result{}, slot: make(chan struct{}, 1)}
	a.s.userRoute("GET /api/v1/jobs/{job}/model", a.modelAnswer)
}

// modelRunner runs one replay at a time and keeps each answer: a
// finished job's traces do not change.
type modelRunner struct {
	mu    sync.Mutex
	cache map[string]*model.Result
	slot  chan struct{}
}

// modelCacheSize bounds the answers kept (each holds a time per rank).
const modelCacheSize = 64

// modelTimeout bounds one request's replays.
const modelTimeout = 2 * time.Minute

func (a *attribAPI) modelAnswer(r *http.Request) (any, error) {
	j, err := visibleJob(r.Context(), a.s.opt.Store, a.liveJobs(), r.PathValue("job"))
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	names := q["network"]
	if len(names) == 0 {
		names = []string{"perfect", "x2"}
	}
	var nets []model.Network
	for _, s := range names {
		n, err := model.ParseNetwork(s)
		if err != nil {
			return nil, badParam("network", "%v", err)
		}
		nets = append(nets, n)
	}
	if j.TraceDir == "" {
		return nil, &httpError{http.StatusNotFound, "not_traced", "job " + j.ID + " was not traced: run it with netloom run --trace --output DIR (DIR on a file system this daemon reads)"}
	}
	if j.State != store.JobFinished {
		return nil, &httpError{http.StatusConflict, "running", "job " + j.ID + " is running: its ranks write their traces at MPI_Finalize"}
	}
	key := j.ID + "\x00" + strings.Join(names, "\x00")
	a.model.mu.Lock()
	res, ok := a.model.cache[key]
	a.model.mu.Unlock()
	if ok {
		return res, nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), modelTimeout)
	defer cancel()
	select {
	case a.model.slot <- struct{}{}:
		defer func() { <-a.model.slot }()
	case <-ctx.Done():
		return nil, &httpError{http.StatusServiceUnavailable, "busy", "another prediction is running; try again"}
	}
	job, warnings, err := model.Load(j.TraceDir)
	if err != nil {
		return nil, &httpError{http.StatusNotFound, "no_trace", "job " + j.ID + ": " + err.Error()}
	}
	v, err := a.s.viewAt(r)
	if err != nil {
		return nil, err
	}
	routes, nodes, err := a.routesAndNodes(ctx, v)
	if err != nil {
		return nil, err
	}
	hosts := model.Hosts(job.Nodes)
	plat, err := model.FromRoutes("fabric", routes, hosts, model.Cores(job.Nodes), nodes.LID, model.DefaultHopLatency, model.DefaultLoopback)
	if err != nil {
		return nil, &httpError{http.StatusBadRequest, "not_on_fabric", "job " + j.ID + ": " + err.Error()}
	}
	res, err = model.Predict(ctx, job, model.Request{Platform: plat, HostOf: job.Nodes, Networks: nets})
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, &httpError{http.StatusServiceUnavailable, "timeout", "job " + j.ID + ": the replay took longer than " + modelTimeout.String() + ": use netloom model"}
	} else if err != nil {
		return nil, &httpError{http.StatusUnprocessableEntity, "model_failed", "job " + j.ID + ": " + err.Error()}
	}
	res.Warnings = slices.Concat(warnings, res.Warnings)
	a.model.mu.Lock()
	if len(a.model.cache) >= modelCacheSize { // bounded: a day's questions, not the daemon's life
		clear(a.model.cache)
	}
	a.model.cache[key] = res
	a.model.mu.Unlock()
	return res, nil
}
