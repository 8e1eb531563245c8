package health

import (
	"context"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
)

// Query reads every link end's samples in [from, to] from st and analyzes
// every link direction of t (Fabric). opt.Now defaults to to.
func Query(ctx context.Context, st store.Store, t *fabric.Topology, from, to time.Time, opt Options) (*Report, error) {
	if opt.Now.IsZero() {
		opt.Now = to
	}
	ports := make([]fabric.PortRef, 0, 2*len(t.Links))
	for _, l := range t.Links {
		ports = append(ports, l.A, l.B)
	}
	samples, err := st.PortSamples(ctx, ports, from, to)
	if err != nil {
		return nil, err
	}
	return Fabric(t, samples, from, opt), nil
}

// QueryLink is Query for one link, with each direction's series.
func QueryLink(ctx context.Context, st store.Store, t *fabric.Topology, l *fabric.Link, from, to time.Time, opt Options) ([2]Direction, error) {
	if opt.Now.IsZero() {
		opt.Now = to
	}
	opt.Series = true
	var out [2]Direction
	samples, err := st.PortSamples(ctx, []fabric.PortRef{l.A, l.B}, from, to)
	if err != nil {
		return out, err
	}
	for i, d := range Directions(t, l) {
		out[i] = AnalyzeDirection(d, l, samples[d.To], opt)
		if out[i].Series == nil {
			out[i].Series = []SeriesPoint{}
		}
	}
	return out, nil
}
