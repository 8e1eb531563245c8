package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/netloom/netloom/internal/analysis"
	"github.com/netloom/netloom/internal/api"
	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
)

// Roles (role: in the config, --role).
const (
	// RoleCollector is the whole daemon: fabric, agents, scheduler,
	// store writer and API.
	RoleCollector = "collector"
	// RoleAPI serves the API and the UI from the database alone: no
	// fabric, no agents, no scheduler, no writes. Any number of them can
	// run behind a load balancer.
	RoleAPI = "api"
)

// DefaultPollInterval is how often an API daemon reads the newest
// topology, routes and port samples from the database.
const DefaultPollInterval = 2 * time.Second

// storePoller is what an API daemon keeps between polls, owned by its
// poll goroutine.
type storePoller struct {
	ftAt time.Time // when the routes in use were recorded
}

// pollLoop publishes, every poll interval, the fabric state as the
// database holds it: the current topology version (read again only when
// it changed), the routes, and every port's newest sample. The live map,
// its stream and the pages of "now" read it as they read a collector's.
func (d *Daemon) pollLoop(ctx context.Context) error {
	var p storePoller
	t := time.NewTicker(d.cfg.PollInterval)
	defer t.Stop()
	failing := false
	for {
		err := d.poll(ctx, &p)
		switch {
		case err != nil && ctx.Err() == nil:
			if !failing {
				d.log.Error("reading the database failed; retrying every poll interval", "err", err)
			}
			failing = true
			b := &api.Behind{Since: time.Now(), Reasons: []string{"reading the database failed: " + err.Error()}}
			d.publish(func(p *published) { p.behind = b })
		case err == nil && failing:
			failing = false
			d.publish(func(p *published) { p.behind = nil })
			d.log.Info("reading the database again")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// poll reads the database once; no topology stored yet is not an error.
func (d *Daemon) poll(ctx context.Context, p *storePoller) error {
	now := time.Now()
	old := d.snap().state
	vs, err := d.st.Versions(ctx, now, now)
	if err != nil {
		return err
	}
	if len(vs) == 0 {
		return nil // no collector has written a topology yet
	}
	// The view's version is the newest id among the fabrics' current
	// versions (store.MergeVersions): it changes whenever any fabric does.
	cur := vs[0]
	for _, v := range vs[1:] {
		if v.ID > cur.ID {
			cur = v
		}
	}
	next := &api.FabricState{Version: cur.ID, Since: cur.From, Readings: map[fabric.PortRef]*fabric.PortReading{},
		Unreachable: map[fabric.PortRef]time.Time{}}
	var nodes *analysis.NodeMap // a new topology's, published with it
	if old != nil && old.Version == cur.ID {
		next.Topology, next.Routes, next.Sweep = old.Topology, old.Routes, old.Sweep
	} else {
		topo, v, err := d.st.TopologyAt(ctx, now)
		if err != nil {
			return fmt.Errorf("topology: %w", err)
		}
		next.Topology, next.Version, next.Since = topo, v.ID, v.From
		p.ftAt = time.Time{}
		nm, err := analysis.NewNodeMap(topo, d.nodeOverrides)
		if err != nil {
			d.log.Error("node map does not fit the fabric; mapping by adapter description only", "err", err)
			nm, _ = analysis.NewNodeMap(topo, nil)
		}
		nodes = nm
		if old != nil {
			next.Sweep = old.Sweep
		}
	}
	ft, at, err := d.st.ForwardingTablesAt(ctx, now)
	switch {
	case errors.Is(err, store.ErrNotFound):
		next.Routes = nil
	case err != nil:
		return fmt.Errorf("forwarding tables: %w", err)
	case next.Routes == nil || !at.Equal(p.ftAt):
		next.Routes, p.ftAt = fabric.NewRoutes(next.Topology, ft), at
	}
	// A port's newest sample no older than two sweeps and a poll: what
	// the collector's live map shows, one poll later at most.
	list, err := d.st.LatestSamples(ctx, now, 2*d.cfg.SweepInterval+d.cfg.PollInterval+time.Second)
	if err != nil {
		return fmt.Errorf("latest samples: %w", err)
	}
	next.Samples = make(map[fabric.PortRef]*fabric.PortSample, len(list))
	var newest time.Time
	for i := range list {
		next.Samples[list[i].Port] = &list[i]
		if list[i].Time.After(newest) {
			newest = list[i].Time
		}
	}
	if !newest.Equal(next.Sweep.Time) {
		// A sweep this daemon has not shown yet: the stream sends it.
		next.Sweep = api.SweepInfo{Time: newest, Ports: len(list), Count: next.Sweep.Count + 1}
	}
	d.publish(func(p *published) {
		p.state = next
		if nodes != nil {
			p.polledNodes = nodes
		}
	})
	return nil
}
