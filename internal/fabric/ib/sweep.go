package ib

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/netloom/netloom/internal/fabric"
)

// PMA ClassPortInfo.CapabilityMask bits that say PortCountersExtended
// holds all 64-bit counters (with or without the IETF ones).
const (
	pmExtWidthSupported = 1 << 9
	pmExtWidthNoIETF    = 1 << 10
)

// target is one port resolved to the LID its PMA answers on.
type target struct {
	lid  fabric.LID
	node fabric.GUID
	err  error
}

func resolve(t *fabric.Topology, ports []fabric.PortRef) []target {
	out := make([]target, len(ports))
	for i, p := range ports {
		n, ok := t.Node(p.GUID)
		switch {
		case !ok:
			out[i].err = fmt.Errorf("port %s: node not in topology", p)
		case p.Port < 1 || p.Port > n.Ports:
			out[i].err = fmt.Errorf("port %s: %q has ports 1..%d", p, n.Description, n.Ports)
		case n.PortLID(p.Port) == 0:
			out[i].err = fmt.Errorf("port %s: %q has no LID", p, n.Description)
		default:
			out[i] = target{lid: n.PortLID(p.Port), node: p.GUID}
		}
	}
	return out
}

// ensureCaps reads ClassPortInfo of every node among targets whose PMA
// capability mask is not cached for topology t; it returns why a node
// could not be read. The caller holds s.mu.
func (s *Source) ensureCaps(ctx context.Context, t *fabric.Topology, targets []target, opt fabric.SweepOptions) (map[fabric.GUID]error, error) {
	if s.capTopo != t {
		s.capTopo = t
		s.caps = map[fabric.GUID]uint16{}
	}
	var qs []query
	var guids []fabric.GUID
	asked := map[fabric.GUID]bool{}
	for _, tg := range targets {
		if tg.err != nil || asked[tg.node] {
			continue
		}
		if _, ok := s.caps[tg.node]; ok {
			continue
		}
		asked[tg.node] = true
		qs = append(qs, query{lid: tg.lid, class: classPerf, method: methodGet, attr: attrClassPortInfo})
		guids = append(guids, tg.node)
	}
	failed := map[fabric.GUID]error{}
	if len(qs) == 0 {
		return failed, nil
	}
	res, err := s.batch(ctx, qs, opt.Parallel, opt.Timeout, opt.Retries)
	if err != nil {
		return nil, err
	}
	for i, r := range res {
		if r.err != nil {
			// Not cached: the node is asked again next sweep.
			failed[guids[i]] = r.err
			continue
		}
		s.caps[guids[i]] = binary.BigEndian.Uint16(r.out[2:4])
	}
	return failed, nil
}

func (s *Source) extended(g fabric.GUID) bool {
	return s.caps[g]&(pmExtWidthSupported|pmExtWidthNoIETF) != 0
}

// Sweep reads PortCounters of every port, and PortCountersExtended where
// the node supports it (unless opt.PortCountersOnly), with opt.Parallel
// queries in flight.
func (s *Source) Sweep(ctx context.Context, t *fabric.Topology, ports []fabric.PortRef, opt fabric.SweepOptions) ([]fabric.PortReading, error) {
	opt = opt.WithDefaults()
	s.mu.Lock()
	defer s.mu.Unlock()
	targets := resolve(t, ports)
	// Whether a node has PortCountersExtended is in its PMA's
	// ClassPortInfo: not asked when only PortCounters is read.
	capErr := map[fabric.GUID]error{}
	extended := func(fabric.GUID) bool { return false }
	if !opt.PortCountersOnly {
		var err error
		if capErr, err = s.ensureCaps(ctx, t, targets, opt); err != nil {
			return nil, fmt.Errorf("ib: sweep: %w", err)
		}
		extended = s.extended
	}
	out := make([]fabric.PortReading, len(ports))
	qs := make([]query, 0, 2*len(ports))
	first := make([]int, len(ports)) // index of the port's PortCounters query, -1 if none
	for i, p := range ports {
		out[i].Port = p
		first[i] = -1
		tg := targets[i]
		if tg.err != nil {
			out[i].Err = tg.err
			continue
		}
		if e := capErr[tg.node]; e != nil {
			out[i].Err = fmt.Errorf("port %s: %w", p, e)
			continue
		}
		first[i] = len(qs)
		q := query{lid: tg.lid, class: classPerf, method: methodGet, attr: attrPortCounters, inBytes: 2}
		q.in[1] = byte(p.Port)
		qs = append(qs, q)
		if extended(tg.node) {
			q.attr = attrPortCountersX
			qs = append(qs, q)
		}
	}
	res, err := s.batch(ctx, qs, opt.Parallel, opt.Timeout, opt.Retries)
	if err != nil {
		return nil, fmt.Errorf("ib: sweep of %d ports: %w", len(ports), err)
	}
	for i := range ports {
		j := first[i]
		if j < 0 {
			continue
		}
		r := &out[i]
		pc := res[j]
		if pc.err != nil {
			r.Err = fmt.Errorf("port %s: %w", ports[i], pc.err)
			continue
		}
		r.Time = pc.time
		decodePortCounters(&r.Counters, pc.out)
		if extended(targets[i].node) {
			px := res[j+1]
			if px.err != nil {
				r.Err = fmt.Errorf("port %s: %w", ports[i], px.err)
				continue
			}
			decodePortCountersExtended(&r.Counters, px.out)
		}
	}
	return out, nil
}

// decodePortCounters fills c from PortCounters data (IBA 16.1.3.5). Data
// counters count 4-octet words; they are stored as bytes.
func decodePortCounters(c *fabric.Counters, d []byte) {
	be16 := func(o int) uint64 { return uint64(binary.BigEndian.Uint16(d[o:])) }
	be32 := func(o int) uint64 { return uint64(binary.BigEndian.Uint32(d[o:])) }
	c.V[fabric.SymbolErrors] = be16(4)
	c.V[fabric.LinkRecovers] = uint64(d[6])
	c.V[fabric.LinkDowned] = uint64(d[7])
	c.V[fabric.RcvErrors] = be16(8)
	c.V[fabric.RcvRemotePhysErrors] = be16(10)
	c.V[fabric.RcvSwitchRelayErrors] = be16(12)
	c.V[fabric.XmitDiscards] = be16(14)
	c.V[fabric.XmitConstraintErrors] = uint64(d[16])
	c.V[fabric.RcvConstraintErrors] = uint64(d[17])
	c.V[fabric.LinkIntegrityErrors] = uint64(d[19] >> 4)
	c.V[fabric.ExcBufOverrunErrors] = uint64(d[19] & 0xf)
	c.V[fabric.VL15Dropped] = be16(22)
	c.V[fabric.XmitData] = be32(24) * 4
	c.V[fabric.RcvData] = be32(28) * 4
	c.V[fabric.XmitPkts] = be32(32)
	c.V[fabric.RcvPkts] = be32(36)
	c.V[fabric.XmitWait] = be32(40)
	c.Extended = false
}

// decodePortCountersExtended overwrites the data and packet counters with
// the 64-bit ones of PortCountersExtended (IBA 16.1.4.11).
func decodePortCountersExtended(c *fabric.Counters, d []byte) {
	be64 := func(o int) uint64 { return binary.BigEndian.Uint64(d[o:]) }
	c.V[fabric.XmitData] = be64(8) * 4
	c.V[fabric.RcvData] = be64(16) * 4
	c.V[fabric.XmitPkts] = be64(24)
	c.V[fabric.RcvPkts] = be64(32)
	c.V[fabric.UnicastXmitPkts] = be64(40)
	c.V[fabric.UnicastRcvPkts] = be64(48)
	c.V[fabric.MulticastXmitPkts] = be64(56)
	c.V[fabric.MulticastRcvPkts] = be64(64)
	c.Extended = true
}

// ResetCounters clears every PortCounters counter of the given ports, and
// PortCountersExtended where supported.
func (s *Source) ResetCounters(ctx context.Context, t *fabric.Topology, ports []fabric.PortRef) error {
	opt := fabric.SweepOptions{Timeout: s.opt.Timeout, Retries: s.opt.Retries, Parallel: s.opt.Parallel}.WithDefaults()
	s.mu.Lock()
	defer s.mu.Unlock()
	targets := resolve(t, ports)
	capErr, err := s.ensureCaps(ctx, t, targets, opt)
	if err != nil {
		return fmt.Errorf("ib: reset counters: %w", err)
	}
	var errs []error
	var qs []query
	var owner []int
	for i, p := range ports {
		tg := targets[i]
		if tg.err != nil {
			errs = append(errs, tg.err)
			continue
		}
		if e := capErr[tg.node]; e != nil {
			errs = append(errs, fmt.Errorf("port %s: %w", p, e))
			continue
		}
		q := query{lid: tg.lid, class: classPerf, method: methodSet, attr: attrPortCounters, inBytes: 19}
		q.in[1] = byte(p.Port)
		q.in[2], q.in[3] = 0xff, 0xff // CounterSelect: all
		q.in[18] = 0xff               // CounterSelect2: all (XmitWait, QP1Dropped...)
		qs = append(qs, q)
		owner = append(owner, i)
		if s.extended(tg.node) {
			q = query{lid: tg.lid, class: classPerf, method: methodSet, attr: attrPortCountersX, inBytes: 4}
			q.in[1] = byte(p.Port)
			q.in[2], q.in[3] = 0x00, 0xff // CounterSelect: the eight 64-bit counters
			qs = append(qs, q)
			owner = append(owner, i)
		}
	}
	res, err := s.batch(ctx, qs, opt.Parallel, opt.Timeout, opt.Retries)
	if err != nil {
		return fmt.Errorf("ib: reset counters of %d ports: %w", len(ports), err)
	}
	for i, r := range res {
		if r.err != nil {
			errs = append(errs, fmt.Errorf("port %s: %w", ports[owner[i]], r.err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("ib: reset counters: %d of %d ports failed: %w", len(errs), len(ports), errors.Join(firstN(errs, 5)...))
	}
	return nil
}

func firstN(errs []error, n int) []error {
	if len(errs) > n {
		return append(errs[:n:n], fmt.Errorf("and %d more", len(errs)-n))
	}
	return errs
}
