package api

import (
	"bytes"
	"errors"
	"net/http"
	"slices"
	"strconv"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/place"
	"github.com/netloom/netloom/internal/store"
)

// servePlacement adds GET /api/v1/jobs/{job}/placement: placement advice
// for a job on the fabric as of the request (docs/place.md).
func (a *attribAPI) servePlacement() {
	a.s.userRoute("GET /api/v1/jobs/{job}/placement", a.placement)
}

// placementFile is the advice as a launcher's file, for download.
type placementFile struct {
	Format  string `json:"format"`
	Name    string `json:"name"`
	Content string `json:"content"`
}

func (a *attribAPI) placement(r *http.Request) (any, error) {
	j, err := a.s.visibleJob(r.Context(), r.PathValue("job"))
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	opt := place.Options{Hostlist: q.Get("nodes"), Seed: 1}
	if v := q.Get("cores_per_node"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > 1<<20 {
			return nil, badParam("cores_per_node", "%q: want a positive number", v)
		}
		opt.CoresPerNode = n
	}
	if v := q.Get("seed"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, badParam("seed", "%q: want a number", v)
		}
		opt.Seed = n
	}
	format := q.Get("format")
	if format == "" {
		format = "openmpi"
	}
	if !slices.Contains(place.Formats, format) {
		return nil, badParam("format", "%q: want openmpi, mpich or slurm", format)
	}
	v, err := a.s.viewAt(r)
	if err != nil {
		return nil, err
	}
	routes, nodes, err := a.routesAndNodes(r.Context(), v)
	if err != nil {
		return nil, err
	}
	adv, err := advise(j, opt, routes, nodes)
	if err != nil {
		return nil, err
	}
	// A user chooses the nodes (where to run next) and sees the answer's
	// figures, but not the switches the routes between them cross
	// (docs/security.md): that is the fabric's topology.
	if !isAdmin(r.Context()) {
		adv.HideFabric()
	}
	var file bytes.Buffer
	if err := place.Write(&file, format, adv.Mapping); err != nil {
		return nil, err
	}
	return struct {
		*place.Advice
		File placementFile `json:"file"`
	}{adv, placementFile{Format: format, Name: place.FileName(format), Content: file.String()}}, nil
}

// advise is the placement advice for job j on the fabric's routes, as
// GET /jobs/{job}/placement gives it and the model replays it
// (GET /jobs/{job}/model?placement=advice).
func advise(j *store.Job, opt place.Options, routes *fabric.Routes, nodes NodeMapper) (*place.Advice, error) {
	// No more nodes may be named than the fabric has hosts: the hostlist
	// is counted against that before it is expanded (place.JobRequest).
	opt.FabricHosts = routes.Topology().Counts().CAs
	req, err := place.JobRequest(j, opt)
	var adv *place.Advice
	if err == nil {
		adv, err = place.Advise(place.NewFabric(routes, nodes), req)
	}
	var ie *place.InputError
	if errors.As(err, &ie) {
		return nil, &httpError{http.StatusBadRequest, "bad_placement", "job " + j.ID + ": " + ie.Error()}
	} else if err != nil {
		return nil, err
	}
	adv.Job = j.ID
	return adv, nil
}
