package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netloom/netloom/internal/api"
	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/fabric/eth"
	"github.com/netloom/netloom/internal/sflow"
)

// sflowAgents is a source that knows its switches as sFlow agents (the
// Ethernet source).
type sflowAgents interface {
	Agents(ctx context.Context) []eth.Agent
}

// sflowSide is the sFlow collector (docs/sflow.md): one UDP socket, read by
// one goroutine into one reused Datagram; samples of the eth source's
// switches kept per link direction in store.
type sflowSide struct {
	pc       net.PacketConn
	store    *sflow.Store
	switches atomic.Pointer[map[netip.Addr]*sflow.Switch]

	datagrams, samples prometheus.Counter
	refused            *prometheus.CounterVec

	logs rejectLog // one log line per reason a minute
}

// sflowReadBuffer is the socket's receive buffer asked for.
const sflowReadBuffer = 16 << 20

func newSFlowSide(reg *prometheus.Registry, maxFlows int) *sflowSide {
	s := &sflowSide{store: sflow.NewStore(sflow.StoreOptions{MaxFlows: maxFlows}),
		logs: rejectLog{last: map[string]time.Time{}, skipped: map[string]int{}}}
	s.datagrams = prometheus.NewCounter(prometheus.CounterOpts{Name: "netloom_sflow_datagrams_total",
		Help: "sFlow datagrams received on sflow_listen (refused ones included)."})
	s.samples = prometheus.NewCounter(prometheus.CounterOpts{Name: "netloom_sflow_samples_total",
		Help: "sFlow flow samples kept: mapped onto a switch port of the fabric."})
	s.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "netloom_sflow_refused_total",
		Help: "sFlow datagrams (malformed, rate_zero, unknown_agent) and flow samples (unknown_ifindex, not_forwarded, no_header) refused, by reason."},
		[]string{"reason"})
	none := map[netip.Addr]*sflow.Switch{} // until the first discovery
	s.switches.Store(&none)
	for _, r := range []sflow.Refusal{sflow.Malformed, sflow.RateZero, sflow.UnknownAgent, sflow.UnknownIfIndex, sflow.NotForwarded, sflow.NoHeader} {
		s.refused.WithLabelValues(string(r))
	}
	reg.MustRegister(s.datagrams, s.samples, s.refused,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "netloom_sflow_flows_tracked",
			Help: "Flows (per link direction) the sFlow collector holds samples of."}, func() float64 { return float64(s.store.Tracked()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "netloom_sflow_flows_evicted_total",
			Help: "Flows the sFlow collector let go to stay within sflow_max_flows (the least recently sampled)."},
			func() float64 { return float64(s.store.Evicted()) }))
	return s
}

// openSFlow binds sflow_listen; the fabric must be an eth: one.
func (d *Daemon) openSFlow() error {
	if d.cfg.SFlowListen == "" {
		return nil
	}
	if _, ok := d.src.(sflowAgents); !ok {
		return fmt.Errorf("sflow_listen %s: the fabric %q has no switches that export sFlow; want an eth: fabric", d.cfg.SFlowListen, d.cfg.Fabric)
	}
	pc, err := net.ListenPacket("udp", d.cfg.SFlowListen)
	if err != nil {
		return fmt.Errorf("sflow_listen: %w", err)
	}
	// A switch's samples come in bursts with its traffic: room for them
	// (capped by net.core.rmem_max).
	_ = pc.(*net.UDPConn).SetReadBuffer(sflowReadBuffer)
	d.sflow.pc = pc
	d.log.Info("sflow collector listening", "addr", pc.LocalAddr().String())
	return nil
}

// SFlowAddr is the address the sFlow collector listens at ("" when off).
func (d *Daemon) SFlowAddr() string {
	if d.sflow == nil || d.sflow.pc == nil {
		return ""
	}
	return d.sflow.pc.LocalAddr().String()
}

// sflowLoop reads datagrams until ctx ends.
func (d *Daemon) sflowLoop(ctx context.Context) error {
	s := d.sflow
	if s == nil || s.pc == nil {
		return nil
	}
	stop := context.AfterFunc(ctx, func() { s.pc.Close() })
	defer stop()
	err := s.read(d.log.Warn)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// read is the collector's loop: one buffer, one Datagram, until the socket
// closes.
func (s *sflowSide) read(warn func(string, ...any)) error {
	buf := make([]byte, 65536)
	var dg sflow.Datagram
	lookup := func(a netip.Addr) (*sflow.Switch, bool) {
		sw, ok := (*s.switches.Load())[a]
		return sw, ok
	}
	for {
		n, from, err := s.pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("sflow_listen: %w", err)
		}
		s.datagrams.Inc()
		kept := 0
		why, derr := s.store.Ingest(buf[:n], &dg, lookup, time.Now(), func(r sflow.Refusal) {
			s.refuse(warn, r, from, dg.Agent, nil)
			kept--
		})
		if why != "" {
			s.refuse(warn, why, from, dg.Agent, derr)
			continue
		}
		s.samples.Add(float64(len(dg.Flows) + kept))
	}
}

// refuse counts a refusal and logs it, each reason at most once a minute
// (with how many were not logged since, as the agents' rejections are).
func (s *sflowSide) refuse(warn func(string, ...any), r sflow.Refusal, from net.Addr, agent netip.Addr, err error) {
	s.refused.WithLabelValues(string(r)).Inc()
	skipped, ok := s.logs.due(string(r))
	if !ok {
		return
	}
	args := []any{"reason", string(r), "from", from.String(), "similar_not_logged", skipped}
	if r != sflow.Malformed && r != sflow.RateZero {
		args = append(args, "agent", agent.String())
	}
	if err != nil {
		args = append(args, "err", err)
	}
	warn("sflow data refused", args...)
}

// Flows are the flows sampled leaving a switch port (one link direction)
// in [from, to]; nil when the collector is off.
func (d *Daemon) Flows(dir fabric.PortRef, from, to time.Time) []sflow.Flow {
	if d.sflow == nil {
		return nil
	}
	return d.sflow.store.Flows(dir, from, to)
}

// refreshSFlow makes the switches of the discovery just made the
// collector's allow-list: their addresses in the eth file, their ports by
// ifIndex.
func (d *Daemon) refreshSFlow(ctx context.Context) {
	src, ok := d.src.(sflowAgents)
	if d.sflow == nil || !ok {
		return
	}
	m := map[netip.Addr]*sflow.Switch{}
	for _, a := range src.Agents(ctx) {
		sw := &sflow.Switch{GUID: a.GUID, Ports: a.Ports}
		for _, ip := range a.Addrs {
			m[ip] = sw
		}
	}
	d.sflow.switches.Store(&m)
}

// checkUDPAddr checks a HOST:PORT early, for a clear error.
func checkUDPAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if strings.ContainsAny(host, " /") || port == "" {
		return errors.New("want HOST:PORT")
	}
	return nil
}

// observedOptions feed the API's attribution by observed shares and its
// ECMP collisions (docs/sflow.md): every direction's sampled flows, mapped
// onto jobs' rank pairs by the ranks' reported connections (flowjobs);
// off (the even split everywhere) when the collector is.
func (d *Daemon) observedOptions() api.ObservedOptions {
	if d.sflow == nil {
		return api.ObservedOptions{}
	}
	opt := api.ObservedOptions{Flows: d.sflow.store.All}
	if x := d.flows; x != nil {
		opt.Lookup = func(k sflow.FlowKey, at time.Time) (api.FlowMatch, bool) {
			m, ok := x.Lookup(k, at)
			return api.FlowMatch{Job: m.Job, User: m.User, SrcRank: m.SrcRank, DstRank: m.DstRank}, ok
		}
	}
	return opt
}
