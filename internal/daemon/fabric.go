package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/netloom/netloom/internal/api"
	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
)

// fabricLoop discovers the fabric, reads its routes, and sweeps its
// counters on their intervals until ctx ends. A failing discovery or sweep
// is logged and counted and tried again on the next tick.
func (d *Daemon) fabricLoop(ctx context.Context) error {
	if err := d.discover(ctx); err != nil {
		d.log.Error("fabric discovery failed; retrying every 10s", "err", err)
	}
	disc := time.NewTicker(d.cfg.DiscoverInterval)
	defer disc.Stop()
	sweep := time.NewTicker(d.cfg.SweepInterval)
	defer sweep.Stop()
	retry := time.NewTicker(10 * time.Second)
	defer retry.Stop()
	if d.snap().state != nil {
		d.sweep(ctx)
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-retry.C:
			if d.snap().state != nil {
				retry.Stop()
				continue
			}
			if err := d.discover(ctx); err != nil {
				d.log.Error("fabric discovery failed", "err", err)
			}
		case <-disc.C:
			if err := d.discover(ctx); err != nil {
				d.log.Error("fabric discovery failed", "err", err)
			}
		case <-sweep.C:
			if d.snap().state != nil {
				d.sweep(ctx)
			}
		}
	}
}

// discover takes a new topology snapshot, records what changed, re-reads
// the forwarding tables, and publishes the result.
func (d *Daemon) discover(ctx context.Context) error {
	start := time.Now()
	topo, err := d.src.Discover(ctx)
	if err != nil {
		d.m.discoverErrors.Inc()
		return fmt.Errorf("discover: %w", err)
	}
	d.m.discoveries.Inc()
	d.refreshSFlow(ctx)
	now := time.Now()
	old := d.snap().state
	var oldTopo *fabric.Topology
	if old != nil {
		oldTopo = old.Topology
	} else if prev, _, err := d.st.FabricTopologyAt(ctx, d.cfg.FabricName, now); err == nil {
		oldTopo = prev // compare with what the last run saw, so a restart is not "everything added"
	} else if !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("discover: loading the last stored topology: %w", err)
	}
	var events []fabric.Event
	if oldTopo == nil {
		// A first discovery is one event, not one per node and link.
		c := topo.Counts()
		events = []fabric.Event{{Time: now, Kind: fabric.EventDiscovered,
			Detail: fmt.Sprintf("first discovery: %d switches, %d channel adapters, %d links", c.Switches, c.CAs, c.Links)}}
	} else {
		events = fabric.Changes(oldTopo, topo, now)
	}

	var version int64
	err = d.writeSync(ctx, "topology", func(ctx context.Context, st store.Store) error {
		var err error
		version, _, err = st.SaveTopology(ctx, topo, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("discover: saving topology: %w", err)
	}
	since := now
	if old != nil && old.Version == version {
		since = old.Since
	}

	var routes *fabric.Routes
	ft, err := d.src.ForwardingTables(ctx, topo)
	if err != nil {
		d.log.Error("reading forwarding tables failed; routes unavailable until the next discovery", "err", err)
	} else {
		if d.ft == nil || !d.ft.Equal(ft) {
			if d.ft != nil {
				events = append(events, fabric.Event{Time: now, Kind: fabric.EventRoutesChanged,
					Detail: fmt.Sprintf("forwarding tables of %d switches changed", changedTables(d.ft, ft))})
			}
			d.ft = ft
			d.enqueue(writeOp{kind: "routes", bytes: forwardingBytes(ft), apply: func(ctx context.Context, st store.Store) error {
				return st.SaveForwardingTables(ctx, ft, now)
			}})
		}
		routes = fabric.NewRoutes(topo, ft)
	}
	d.recordEvents(events)

	next := &api.FabricState{Topology: topo, Version: version, Since: since, Routes: routes,
		Readings: map[fabric.PortRef]*fabric.PortReading{}, Samples: map[fabric.PortRef]*fabric.PortSample{},
		Unreachable: map[fabric.PortRef]time.Time{}}
	if old != nil {
		next.Readings, next.Samples, next.Unreachable, next.Sweep = old.Readings, old.Samples, old.Unreachable, old.Sweep
	}
	d.publish(func(p *published) { p.state = next })
	d.tickAlerts(events)
	c := topo.Counts()
	d.log.Info("fabric discovered", "fabric", d.cfg.FabricName, "switches", c.Switches, "cas", c.CAs, "links", c.Links,
		"version", version, "events", len(events), "seconds", time.Since(start).Seconds())
	return nil
}

func changedTables(a, b fabric.ForwardingTables) int {
	n := 0
	for sw, t := range b {
		if !(fabric.ForwardingTables{sw: t}).Equal(fabric.ForwardingTables{sw: a[sw]}) {
			n++
		}
	}
	return n
}

func (d *Daemon) recordEvents(ev []fabric.Event) {
	if len(ev) == 0 {
		return
	}
	for _, e := range ev {
		d.m.events.WithLabelValues(e.Kind).Inc()
	}
	d.enqueue(writeOp{kind: "events", bytes: eventsBytes(ev), apply: func(ctx context.Context, st store.Store) error { return st.AddEvents(ctx, ev) }})
}

// sweep reads every port's counters once, turns them into per-interval
// samples, hands those to the writer and publishes the new readings.
func (d *Daemon) sweep(ctx context.Context) {
	cur := d.snap().state
	ports := cur.Topology.SwitchPorts(d.cfg.SweepCAPorts)
	opt := fabric.SweepOptions{Timeout: d.cfg.SweepTimeout, Retries: d.cfg.SweepRetries, Parallel: d.cfg.SweepParallel}.WithDefaults()
	start := time.Now()
	readings, err := d.src.Sweep(ctx, cur.Topology, ports, opt)
	secs := time.Since(start).Seconds()
	if err != nil {
		d.log.Error("counter sweep failed", "ports", len(ports), "err", err)
		return
	}
	now := time.Now()
	var (
		samples  = make([]fabric.PortSample, 0, len(readings))
		events   []fabric.Event
		nearFull []fabric.PortRef
		failed   int
		stale    int
		unreach  = maps.Clone(cur.Unreachable)
		read     = make(map[fabric.PortRef]*fabric.PortReading, len(readings))
		latest   = make(map[fabric.PortRef]*fabric.PortSample, len(readings))
	)
	for i := range readings {
		r := &readings[i]
		read[r.Port] = r
		if r.Err != nil {
			failed++
			if _, known := unreach[r.Port]; !known {
				unreach[r.Port] = now
				events = append(events, fabric.Event{Time: now, Kind: fabric.EventPortUnreachable, Node: r.Port.GUID, Port: r.Port.Port,
					Detail: fmt.Sprintf("port %s: %v", r.Port, r.Err)})
			}
			continue
		}
		if since, was := unreach[r.Port]; was {
			delete(unreach, r.Port)
			events = append(events, fabric.Event{Time: now, Kind: fabric.EventPortRecovered, Node: r.Port.GUID, Port: r.Port.Port,
				Detail: fmt.Sprintf("port %s answers again after %s", r.Port, now.Sub(since).Round(time.Second))})
		}
		if r.Stale {
			// The same values as before (an agent's cache): no new
			// interval. The previous reading stays the base of the next
			// and the newest sample stays the last measured.
			if s, ok := cur.Samples[r.Port]; ok {
				latest[r.Port] = s
			}
			if p, ok := d.prev[r.Port]; ok {
				read[r.Port] = p
			}
			stale++
			continue
		}
		if p, ok := d.prev[r.Port]; ok {
			s := fabric.Diff(p, r)
			s.Time = now // one sweep, one time; Span keeps each port's own interval
			if s.Reset {
				events = append(events, fabric.Event{Time: now, Kind: fabric.EventCounterReset, Node: r.Port.GUID, Port: r.Port.Port,
					Detail: fmt.Sprintf("port %s: counters went backwards (cleared or switch rebooted); counted from zero", r.Port)})
			}
			samples = append(samples, s)
			latest[r.Port] = &samples[len(samples)-1]
		}
		d.prev[r.Port] = r
		if d.cfg.ResetThreshold > 0 && fabric.NearSaturation(r, d.cfg.ResetThreshold) {
			nearFull = append(nearFull, r.Port)
		}
	}
	if len(nearFull) > 0 {
		d.resetCounters(ctx, cur.Topology, nearFull)
	}
	for p := range d.prev {
		if _, ok := read[p]; !ok {
			delete(d.prev, p) // port left the fabric
		}
	}
	d.m.sweeps.Inc()
	d.m.sweepPortErrors.Add(float64(failed))
	if len(samples) > 0 {
		d.enqueue(writeOp{kind: "samples", bytes: portSamplesBytes(samples), apply: func(ctx context.Context, st store.Store) error { return st.AddPortSamples(ctx, samples) }})
	}
	d.recordEvents(events)

	next := *cur
	next.Readings, next.Samples, next.Unreachable = read, latest, unreach
	next.Sweep = api.SweepInfo{Time: now, Seconds: secs, Ports: len(ports), Errors: failed, Count: cur.Sweep.Count + 1}
	d.publish(func(p *published) { p.state = &next })
	d.tickAlerts(events)
	d.m.sweepStale.Add(float64(stale))
	d.log.Debug("sweep", "ports", len(ports), "errors", failed, "stale", stale, "seconds", secs)
}

// resetCounters clears 32-bit counters near saturation; the next delta is
// then taken from zero at the time of the reset.
func (d *Daemon) resetCounters(ctx context.Context, t *fabric.Topology, ports []fabric.PortRef) {
	if err := d.src.ResetCounters(ctx, t, ports); err != nil {
		d.log.Warn("resetting counters near saturation failed", "ports", len(ports), "err", err)
		return
	}
	now := time.Now()
	for _, p := range ports {
		if r, ok := d.prev[p]; ok {
			z := &fabric.PortReading{Port: p, Time: now}
			z.Extended = r.Extended
			if r.Extended { // extended data counters were not cleared
				copy(z.V[:fabric.XmitWait], r.V[:fabric.XmitWait])
			}
			d.prev[p] = z
		}
	}
}
