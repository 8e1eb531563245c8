// Package daemon wires Netloom's activities together: fabric discovery and
// counter sweeps, the store writer, pruning and the HTTP API. Each activity
// is one goroutine; they meet through bounded channels and one atomically
// published snapshot (published.go), never a lock on the hot path.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/netloom/netloom/internal/alert"
	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/flowjobs"
	"github.com/netloom/netloom/internal/ingest"
	"github.com/netloom/netloom/internal/sched"
	"github.com/netloom/netloom/internal/store"
)

// Daemon is one running `netloom serve`.
type Daemon struct {
	cfg Config
	src fabric.Source
	st  store.Store
	log *slog.Logger
	// pub is every fact the activities publish, one snapshot
	// (published.go).
	pub atomic.Pointer[published]
	// Caches derived from pub's facts: view, the API's fabric joining the
	// collector's own with the others' on the database (fabrics.go);
	// merged, the live jobs with the scheduler's and the attribution's;
	// sharedView, those without the jobs other collectors reported parts
	// of (attribution.go).
	view       atomic.Pointer[fabricView]
	merged     atomic.Pointer[mergedJobs]
	sharedView atomic.Pointer[sharedLive]

	writes chan writeOp
	reg    *prometheus.Registry
	m      metrics
	// unreachable tells errors of reaching the database (writes held
	// and retried) from others; nil: postgres.Unreachable.
	unreachable func(error) bool

	agents       agentSide
	agentDefault bool       // AgentListen was not set: a busy default port is not fatal
	sflow        *sflowSide // nil: sflow_listen is off
	flows        *flowjobs.Index

	scheduler     sched.Scheduler // nil: none
	nodeOverrides map[string]string

	// Alerts: the fabric activity ticks alertLoop, which publishes the
	// evaluated alerts and hands changes to the notifier.
	alertIn  chan alertTick
	notifier *alert.Notifier

	// Owned by the fabric goroutine only.
	prev map[fabric.PortRef]*fabric.PortReading
	ft   fabric.ForwardingTables
}

type metrics struct {
	sweeps, sweepPortErrors, sweepStale, discoveries, discoverErrors prometheus.Counter
	writeDropped, writeErrors                                        *prometheus.CounterVec
	events                                                           *prometheus.CounterVec
	writeQueue                                                       prometheus.GaugeFunc
	attr                                                             attributionMetrics
	sched                                                            schedMetrics
	alert                                                            alertMetrics
	w                                                                writerMetrics
}

// New builds a daemon; Run starts it.
func New(cfg Config, src fabric.Source, st store.Store, log *slog.Logger) *Daemon {
	d := &Daemon{cfg: cfg.WithDefaults(), src: src, st: st, log: log, agentDefault: cfg.AgentListen == "",
		writes: make(chan writeOp, writeQueueLen), reg: prometheus.NewRegistry(), alertIn: make(chan alertTick, alertQueueLen),
		prev: map[fabric.PortRef]*fabric.PortReading{}}
	d.pub.Store(&published{})
	d.agents.show = func(l *ingest.Live) { d.publish(func(p *published) { p.live = l }) }
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		d.reg.MustRegister(c)
		return c
	}
	vec := func(name, help, label string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{label})
		d.reg.MustRegister(c)
		return c
	}
	d.m = metrics{
		sweeps:          counter("netloom_fabric_sweeps_total", "Counter sweeps completed."),
		sweepPortErrors: counter("netloom_fabric_sweep_port_errors_total", "Port counter queries that failed after retries."),
		sweepStale:      counter("netloom_fabric_sweep_stale_readings_total", "Port readings the source's agent answered from its cache (the same values as the sweep before): no new sample; sweep such switches less often."),
		discoveries:     counter("netloom_fabric_discoveries_total", "Fabric discoveries completed."),
		discoverErrors:  counter("netloom_fabric_discovery_errors_total", "Fabric discoveries that failed."),
		writeDropped:    vec("netloom_store_writes_dropped_total", "Store writes dropped, by reason: queue_full, backlog_full, error, shutdown.", "reason"),
		writeErrors:     vec("netloom_store_write_errors_total", "Store write attempts that failed (retries of held writes included), by kind of data.", "kind"),
		events:          vec("netloom_fabric_events_total", "Fabric events recorded, by kind.", "kind"),
	}
	d.m.w = newWriterMetrics(d.reg)
	d.m.w.limit.Set(float64(int64(d.cfg.StoreBacklogMiB) << 20))
	d.m.writeQueue = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "netloom_store_write_queue_length",
		Help: "Store writes waiting for the writer."}, func() float64 { return float64(len(d.writes)) })
	d.agents.m = ingest.NewMetrics(d.reg)
	if d.cfg.SFlowListen != "" {
		d.sflow = newSFlowSide(d.reg, d.cfg.SFlowMaxFlows)
	}
	d.flows = newFlowJobs(d.reg)
	d.m.attr = newAttributionMetrics(d.reg)
	d.m.sched = newSchedMetrics(d.reg)
	d.m.alert = newAlertMetrics(d.reg)
	d.notifier = alert.NewNotifier(d.cfg.Alerting, log, d.reg)
	d.reg.MustRegister(&alert.Collector{Alerts: d.Alerts})
	// A source that counts its own errors (the Ethernet source: per switch
	// and MIB object) exports them beside the daemon's metrics.
	if c, ok := src.(prometheus.Collector); ok {
		d.reg.MustRegister(c)
	}
	d.reg.MustRegister(d.m.writeQueue, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return d
}

// Run serves until ctx is cancelled or an activity fails. ready, when not
// nil, receives the HTTP listener's address once it listens.
func (d *Daemon) Run(ctx context.Context, ready func(addr net.Addr)) (err error) {
	if d.nodeOverrides, err = loadNodeOverrides(d.cfg.NodeMap); err != nil {
		return err
	}
	if d.cfg.Role == RoleCollector {
		if d.scheduler, err = openScheduler(d.cfg.Scheduler); err != nil {
			return err
		}
	}
	srv, err := d.httpServer()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", d.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", d.cfg.Listen, err)
	}
	if d.cfg.Role == RoleAPI {
		return d.runAPI(ctx, srv, ln, ready)
	}
	if err := d.openSFlow(); err != nil {
		ln.Close()
		return err
	}
	if err := d.openIngest(); err != nil {
		ln.Close()
		if d.sflow != nil && d.sflow.pc != nil {
			d.sflow.pc.Close()
		}
		return err
	}
	if ready != nil {
		ready(ln.Addr())
	}
	d.log.Info("serving", "http", ln.Addr().String(), "tls", srv.TLSConfig != nil, "fabric", d.cfg.Fabric, "db", d.cfg.DB)

	g, gctx := errgroup.WithContext(ctx)
	writerCtx, stopWriter := context.WithCancel(context.Background())
	writerDone := make(chan struct{})
	go func() { d.writer(writerCtx); close(writerDone) }()
	g.Go(func() error { return d.fabricLoop(gctx) })
	g.Go(func() error { return d.othersLoop(gctx) })
	g.Go(func() error { d.pruner(gctx); return nil })
	g.Go(func() error { return d.ingestLoop(gctx) })
	g.Go(func() error { return d.sflowLoop(gctx) })
	g.Go(func() error { return d.attributionLoop(gctx) })
	g.Go(func() error { return d.schedLoop(gctx) })
	g.Go(func() error { d.watchBehind(gctx); return nil })
	g.Go(func() error { return d.alertLoop(gctx) })
	g.Go(func() error { d.notifier.Run(gctx); return nil })
	serveHTTP(g, gctx, srv, ln)
	err = g.Wait()
	// Agents no longer reach this daemon: withdraw its address.
	d.withdrawAddressFile()
	// Drain what was queued, then stop the writer.
	close(d.writes)
	<-writerDone
	stopWriter()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// runAPI is Run for the API role: the HTTP server and the database poller,
// nothing that reaches the fabric or agents or writes to the store.
func (d *Daemon) runAPI(ctx context.Context, srv *http.Server, ln net.Listener, ready func(addr net.Addr)) error {
	if ready != nil {
		ready(ln.Addr())
	}
	d.log.Info("serving the API from the database", "http", ln.Addr().String(), "tls", srv.TLSConfig != nil,
		"db", d.cfg.DB, "poll_interval", d.cfg.PollInterval)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return d.pollLoop(gctx) })
	serveHTTP(g, gctx, srv, ln)
	err := g.Wait()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// serveHTTP serves srv on ln in g until gctx ends.
func serveHTTP(g *errgroup.Group, gctx context.Context, srv *http.Server, ln net.Listener) {
	g.Go(func() error {
		serve := func() error { return srv.Serve(ln) }
		if srv.TLSConfig != nil {
			serve = func() error { return srv.ServeTLS(ln, "", "") }
		}
		if err := serve(); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shut)
	})
}
