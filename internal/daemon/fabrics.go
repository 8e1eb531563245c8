package daemon

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/netloom/netloom/internal/api"
	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/ingest"
)

// otherFabrics is what a collector last read of the other collectors'
// fabrics on its database, owned by othersLoop and published whole.
type otherFabrics struct {
	ids     []int64 // their current version ids, sorted: what parts are of
	parts   map[string]*fabric.Topology
	version int64                                 // the newest of ids
	since   time.Time                             // when that version began
	samples map[fabric.PortRef]*fabric.PortSample // their ports' newest samples
}

// sharedJobs are the recently finished jobs of which another collector
// saved a part too.
type sharedJobs struct{ ids map[string]bool }

// fabricView is the API's view on a collector whose database holds other
// fabrics too: its own live state joined with theirs, cached per pair.
type fabricView struct {
	own    *api.FabricState
	others *otherFabrics
	view   *api.FabricState
	failed bool // the fabrics could not be merged: view is own
}

// State returns the fabric snapshot the API shows (nil before the first
// discovery): the collector's own live fabric, joined, when collectors of
// other fabrics write the same database, with their topologies and port
// samples as last read from it (every poll interval). Routes are its own.
func (d *Daemon) State() *api.FabricState {
	s := d.snap()
	own, o := s.state, s.others
	if own == nil || o == nil {
		return own
	}
	c := d.view.Load()
	if c != nil && c.own == own && c.others == o {
		return c.view
	}
	if c != nil && c.failed && c.others == o && c.own.Topology == own.Topology {
		d.view.Store(&fabricView{own: own, others: o, view: own, failed: true})
		return own
	}
	v := &api.FabricState{Version: max(own.Version, o.version), Since: own.Since, Readings: own.Readings,
		Unreachable: own.Unreachable, Sweep: own.Sweep,
		Samples: make(map[fabric.PortRef]*fabric.PortSample, len(own.Samples)+len(o.samples))}
	if o.version > own.Version {
		v.Since = o.since
	}
	maps.Copy(v.Samples, o.samples)
	maps.Copy(v.Samples, own.Samples)
	if c != nil && c.others == o && c.own.Topology == own.Topology && c.own.Routes == own.Routes {
		v.Topology, v.Routes = c.view.Topology, c.view.Routes
	} else {
		parts := maps.Clone(o.parts)
		parts[d.cfg.FabricName] = own.Topology
		t, err := fabric.Merge(parts)
		if err != nil {
			// Logged once per change of either side: the cached view is
			// this collector's own until then.
			d.log.Error("the database's fabrics cannot be shown together; showing this collector's own", "err", err)
			d.view.Store(&fabricView{own: own, others: o, view: own, failed: true})
			return own
		}
		// Routes stay this collector's own fabric's: what it attributes,
		// advises placement on and maps node names onto (one LID space).
		v.Topology, v.Routes = t, own.Routes
	}
	d.view.Store(&fabricView{own: own, others: o, view: v})
	return v
}

// othersLoop reads the other collectors' fabrics every poll interval.
func (d *Daemon) othersLoop(ctx context.Context) error {
	t := time.NewTicker(d.cfg.PollInterval)
	defer t.Stop()
	failing := false
	for {
		err := d.pollOthers(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			d.log.Error("reading the other fabrics of the database failed; retrying every poll interval", "err", err)
			failing = true
		case err == nil && failing:
			d.log.Info("reading the other fabrics of the database again")
			failing = false
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// pollOthers reads the current versions of the fabrics other than the
// collector's own (their topologies only when one changed) and their
// ports' newest samples.
func (d *Daemon) pollOthers(ctx context.Context) error {
	now := time.Now()
	vs, err := d.st.Versions(ctx, now, now)
	if err != nil {
		return err
	}
	next := &otherFabrics{parts: map[string]*fabric.Topology{}}
	for _, v := range vs {
		if v.Fabric == d.cfg.FabricName {
			continue
		}
		next.ids = append(next.ids, v.ID)
		if v.ID > next.version {
			next.version, next.since = v.ID, v.From
		}
		next.parts[v.Fabric] = nil
	}
	if len(next.ids) == 0 {
		d.publish(func(p *published) { p.others, p.shared = nil, nil })
		return nil
	}
	// Jobs shared with other collectors, finished within the time the
	// live view keeps them: the API then reads their join.
	ids, err := d.st.SharedJobs(ctx, now.Add(-ingest.Options{}.WithDefaults().Linger))
	if err != nil {
		return err
	}
	sh := &sharedJobs{ids: make(map[string]bool, len(ids))}
	for _, id := range ids {
		sh.ids[id] = true
	}
	if old := d.snap().shared; old == nil || !maps.Equal(old.ids, sh.ids) {
		d.publish(func(p *published) { p.shared = sh })
	}
	slices.Sort(next.ids)
	if old := d.snap().others; old != nil && slices.Equal(old.ids, next.ids) {
		next.parts = old.parts
	} else {
		for name := range next.parts {
			t, _, err := d.st.FabricTopologyAt(ctx, name, now)
			if err != nil {
				return fmt.Errorf("fabric %q: %w", name, err)
			}
			next.parts[name] = t
		}
	}
	list, err := d.st.LatestSamples(ctx, now, 2*d.cfg.SweepInterval+d.cfg.PollInterval+time.Second)
	if err != nil {
		return fmt.Errorf("latest samples: %w", err)
	}
	next.samples = map[fabric.PortRef]*fabric.PortSample{}
	for i := range list {
		for _, t := range next.parts {
			if _, ok := t.Node(list[i].Port.GUID); ok {
				next.samples[list[i].Port] = &list[i]
				break
			}
		}
	}
	d.publish(func(p *published) { p.others = next })
	return nil
}
