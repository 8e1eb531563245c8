package daemon

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/netloom/netloom/internal/api"
	"github.com/netloom/netloom/internal/auth"
	"github.com/netloom/netloom/internal/ingest"
	"github.com/netloom/netloom/web"
)

// Handler returns the HTTP handler: the API and the UI behind the auth
// guard, which identifies every request and bounds its cost.
func (d *Daemon) Handler() (http.Handler, error) {
	srv := api.New(api.Options{Store: d.st, State: d.State, Registry: d.reg, SweepInterval: d.cfg.SweepInterval, Log: d.log,
		Behind: func() *api.Behind { return d.snap().behind }, Role: d.cfg.Role,
		AgentAuth: func() *api.AgentAuth { return d.snap().auth }, NodeOverrides: d.nodeOverrides})
	srv.Mux().Handle("/", api.UI(web.Dist()))
	srv.Mux().HandleFunc("GET /api/v1/alerts", d.serveAlerts)
	if d.cfg.Role == RoleAPI {
		// Jobs, running or not, as the collectors last saved them.
		srv.ServeJobs(nil)
		srv.ServeAttribution(api.AttributionOptions{Model: d.cfg.Model.apiOptions(), Nodes: func() api.NodeMapper {
			if nm := d.snap().polledNodes; nm != nil {
				return nm
			}
			return nil
		}})
		return auth.NewGuard(d.cfg.Auth, srv, d.reg, d.log)
	}
	srv.ServeJobs(d.liveJobs)
	srv.ServeConnections(d.flows.Connections)
	if d.sflow != nil {
		srv.ServeFlows(d.Flows)
	}
	srv.ServeAttribution(api.AttributionOptions{Jobs: d.liveJobs, Model: d.cfg.Model.apiOptions(), Observed: d.observedOptions(), Nodes: func() api.NodeMapper {
		if v := d.snap().attrib; v != nil && v.Nodes != nil {
			return v.Nodes
		}
		return nil
	}})
	return auth.NewGuard(d.cfg.Auth, srv, d.reg, d.log)
}

// httpServer is the HTTP(S) server with a timeout on every phase of a
// connection, so slow or stalled clients cannot hold the daemon's memory.
// Live-update streams lift the write timeout for themselves.
func (d *Daemon) httpServer() (*http.Server, error) {
	h, err := d.Handler()
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	if d.cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(d.cfg.TLSCert, d.cfg.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("tls_cert %s / tls_key %s: %w", d.cfg.TLSCert, d.cfg.TLSKey, err)
		}
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	}
	return srv, nil
}

// Falling behind: the store's write queue or the agents' queue is mostly
// full, or they dropped data since the last look. Checked every sweep
// interval, bounded to 1..5 s; entering and leaving the state is logged,
// and the API shows it.
func (d *Daemon) watchBehind(ctx context.Context) {
	every := min(max(d.cfg.SweepInterval, time.Second), 5*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	last := d.lossCounts()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var reasons []string
		if n := len(d.writes); n > writeQueueLen*3/4 {
			reasons = append(reasons, fmt.Sprintf("store write queue %d/%d", n, writeQueueLen))
		}
		if b := d.snap().backlog; b != nil && b.writes > 0 {
			reasons = append(reasons, fmt.Sprintf("database unreachable since %s: %d writes (%.1f of %d MiB) held",
				b.since.Format(time.RFC3339), b.writes, float64(b.bytes)/(1<<20), d.cfg.StoreBacklogMiB))
		}
		if l := d.agents.l; l != nil && l.QueueLen() > l.QueueCap()/2 {
			reasons = append(reasons, fmt.Sprintf("agent datagram queue %d/%d", l.QueueLen(), l.QueueCap()))
		}
		now := d.lossCounts()
		for k, v := range now {
			if v > last[k] {
				reasons = append(reasons, fmt.Sprintf("%.0f %s in the last %s", v-last[k], k, every))
			}
		}
		last = now
		prev := d.snap().behind
		switch {
		case len(reasons) == 0 && prev != nil:
			d.publish(func(p *published) { p.behind = nil })
			d.log.Info("caught up", "behind_since", prev.Since)
		case len(reasons) > 0:
			b := &api.Behind{Since: time.Now(), Reasons: reasons}
			if prev != nil {
				b.Since = prev.Since
			} else {
				d.log.Warn("falling behind: data is being dropped or queues are filling", "reasons", strings.Join(reasons, "; "))
			}
			d.publish(func(p *published) { p.behind = b })
		}
	}
}

// lossCounts reads the counters of data lost because the daemon could not
// keep up (not of bad input): store writes dropped for a full queue or
// backlog or at a stop with the database unreachable, agent datagrams
// dropped for a full queue or reassembly table. It collects those two
// counters only: gathering the whole registry builds every switch port's
// series (27k ports at Stampede's size), which cost half the daemon's CPU
// and allocations when done every few seconds.
func (d *Daemon) lossCounts() map[string]float64 {
	return map[string]float64{
		"store writes dropped":    sumCounters(d.m.writeDropped, storeLossReason),
		"agent datagrams dropped": sumCounters(d.agents.m.DroppedCollector(), lossReason),
	}
}

// sumCounters adds up the counters c collects that keep selects.
func sumCounters(c prometheus.Collector, keep func(*dto.Metric) bool) float64 {
	ch := make(chan prometheus.Metric, 32)
	go func() { c.Collect(ch); close(ch) }()
	sum := 0.0
	for m := range ch {
		var pb dto.Metric
		if m.Write(&pb) == nil && keep(&pb) {
			sum += pb.GetCounter().GetValue()
		}
	}
	return sum
}

func lossReason(m *dto.Metric) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == "reason" {
			switch l.GetValue() {
			case ingest.ReasonQueueFull, ingest.ReasonReassemblyFull, ingest.ReasonTooManyJobs:
				return true
			}
		}
	}
	return false
}

func storeLossReason(m *dto.Metric) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == "reason" {
			return l.GetValue() != dropError
		}
	}
	return true
}
