package api

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/netloom/netloom/internal/analysis"
	"github.com/netloom/netloom/internal/fabric"
)

// flatFabric gathers what the check's rule for a fabric whose counters do
// not carry the jobs' traffic weighs (analysis.FlatFabric.CountersFlat):
// the analysis.FlatDirections directions where the jobs put the most in
// [from, to], each with what the jobs put on it and what its counters
// measured over the range widened as the check widens it. Directions
// whose counters were not read tell nothing and are left out. Every
// answer over the same range decides alike: a job's page and the link
// page opened from it say the same.
//
// A regular user is told the sums rounded to two digits: they hold other
// users' jobs.
func (a *attribAPI) flatFabric(ctx context.Context, t *fabric.Topology, from, to time.Time) (*analysis.FlatFabric, error) {
	got, err := a.s.opt.Store.LinkJobs(ctx, nil, from, to)
	if err != nil {
		return nil, err
	}
	bytes := map[fabric.PortRef]uint64{}
	for _, x := range got {
		bytes[x.Port] += x.Bytes
	}
	heavy := make([]fabric.PortRef, 0, len(bytes))
	for p := range bytes {
		if _, ok := t.LinkAt(p); ok {
			heavy = append(heavy, p)
		}
	}
	slices.SortFunc(heavy, func(x, y fabric.PortRef) int {
		if c := cmp.Compare(bytes[y], bytes[x]); c != 0 {
			return c
		}
		if c := cmp.Compare(x.GUID, y.GUID); c != 0 {
			return c
		}
		return cmp.Compare(x.Port, y.Port)
	})
	heavy = heavy[:min(len(heavy), analysis.FlatDirections)]
	f := &analysis.FlatFabric{}
	if len(heavy) == 0 {
		return f, nil
	}
	read := make([]fabric.PortRef, 0, 2*len(heavy))
	for _, p := range heavy {
		peer, _ := t.Peer(p)
		read = append(read, p, peer)
	}
	sweep := a.s.opt.SweepInterval
	samples, err := a.s.opt.Store.PortSamples(ctx, read, from.Add(-analysis.WidenBefore(sweep)), to.Add(analysis.WidenAfter(sweep)))
	if err != nil {
		return nil, err
	}
	for i, p := range heavy {
		m := measure(samples, p, read[2*i+1])
		if !m.Measured {
			continue
		}
		f.Directions++
		f.Monitored += bytes[p]
		f.Measured += m.Bytes
	}
	if !isAdmin(ctx) {
		f.Monitored, f.Measured = roundBytes(f.Monitored), roundBytes(f.Measured)
	}
	return f, nil
}
