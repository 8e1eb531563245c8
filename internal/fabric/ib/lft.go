package ib

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/netloom/netloom/internal/fabric"
)

// lftBlock is how many LIDs one LinearForwardingTable attribute holds.
const lftBlock = 64

// ForwardingTables reads every switch's linear forwarding table by
// LID-routed SMPs: SwitchInfo for LinearFDBTop, then the table's blocks,
// all pipelined. It returns the tables of the switches that answered; the
// error lists those that did not.
func (s *Source) ForwardingTables(ctx context.Context, t *fabric.Topology) (fabric.ForwardingTables, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	var sws []*fabric.Node
	var qs []query
	for i := range t.Nodes {
		n := &t.Nodes[i]
		if n.Type != fabric.Switch {
			continue
		}
		if n.LID == 0 {
			errs = append(errs, fmt.Errorf("switch %s %q has no LID", n.GUID, n.Description))
			continue
		}
		sws = append(sws, n)
		qs = append(qs, query{lid: n.LID, class: classSMI, method: methodGet, attr: attrSwitchInfo})
	}
	res, err := s.batch(ctx, qs, s.opt.Parallel, s.opt.Timeout, s.opt.Retries)
	if err != nil {
		return nil, fmt.Errorf("ib: forwarding tables: %w", err)
	}
	type span struct {
		first, blocks int
		top           int
	}
	spans := make([]span, len(sws))
	var blocks []query
	for i, r := range res {
		n := sws[i]
		if r.err != nil {
			errs = append(errs, fmt.Errorf("switch %s %q: %w", n.GUID, n.Description, r.err))
			spans[i].first = -1
			continue
		}
		top := int(binary.BigEndian.Uint16(r.out[6:8])) // SwitchInfo.LinearFDBTop
		if top > fabric.MaxUnicastLID {
			top = fabric.MaxUnicastLID
		}
		nb := top/lftBlock + 1
		spans[i] = span{first: len(blocks), blocks: nb, top: top}
		for b := 0; b < nb; b++ {
			blocks = append(blocks, query{lid: n.LID, class: classSMI, method: methodGet, attr: attrLFT, mod: uint32(b)})
		}
	}
	res, err = s.batch(ctx, blocks, s.opt.Parallel, s.opt.Timeout, s.opt.Retries)
	if err != nil {
		return nil, fmt.Errorf("ib: forwarding tables: %w", err)
	}
	ft := make(fabric.ForwardingTables, len(sws))
	for i, sp := range spans {
		if sp.first < 0 {
			continue
		}
		n := sws[i]
		tbl := make([]uint8, sp.top+1)
		ok := true
		for b := 0; b < sp.blocks; b++ {
			r := res[sp.first+b]
			if r.err != nil {
				errs = append(errs, fmt.Errorf("switch %s %q: %w", n.GUID, n.Description, r.err))
				ok = false
				break
			}
			copy(tbl[b*lftBlock:], r.out[:lftBlock])
		}
		if ok {
			ft[n.GUID] = tbl
		}
	}
	if len(errs) > 0 {
		return ft, fmt.Errorf("ib: forwarding tables: %d switches unread: %w", len(errs), errors.Join(firstN(errs, 5)...))
	}
	return ft, nil
}

// RouteTables reads what one route needs, the way ibtracert does: walking
// from src toward dst over t's links, the one LinearForwardingTable block
// of each switch on the way that holds dst's entry. The tables it returns
// hold those entries only (every other one is fabric.NoPort), enough for
// fabric.NewRoutes(t, ft).Path(src, dst), at one SMP per switch on the
// path instead of every block of every switch. Where the walk cannot go
// on (no entry, a port that leads nowhere, a loop) it stops and leaves it
// to Path to say why.
func (s *Source) RouteTables(ctx context.Context, t *fabric.Topology, src, dst fabric.LID) (fabric.ForwardingTables, error) {
	cur, ok := t.PortByLID(src)
	if !ok {
		return nil, fmt.Errorf("ib: route %d -> %d: no port has source LID %d", src, dst, src)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ft := fabric.ForwardingTables{}
	block := int(dst) / lftBlock
	for hop := 0; hop <= maxRouteHops; hop++ {
		n, ok := t.Node(cur.GUID)
		if !ok {
			return ft, nil
		}
		if n.Type != fabric.Switch {
			if hop > 0 {
				return ft, nil
			}
			if cur, ok = t.Peer(cur); !ok {
				return ft, nil
			}
			continue
		}
		if _, seen := ft[n.GUID]; seen || n.LID == dst {
			return ft, nil
		}
		if n.LID == 0 {
			return nil, fmt.Errorf("ib: route %d -> %d: switch %s %q has no LID", src, dst, n.GUID, n.Description)
		}
		q := []query{{lid: n.LID, class: classSMI, method: methodGet, attr: attrLFT, mod: uint32(block)}}
		res, err := s.batch(ctx, q, 1, s.opt.Timeout, s.opt.Retries)
		if err != nil {
			return nil, fmt.Errorf("ib: route %d -> %d: %w", src, dst, err)
		}
		if res[0].err != nil {
			return nil, fmt.Errorf("ib: route %d -> %d: switch %s %q: %w", src, dst, n.GUID, n.Description, res[0].err)
		}
		tbl := make([]uint8, (block+1)*lftBlock)
		for i := range tbl[:block*lftBlock] {
			tbl[i] = fabric.NoPort
		}
		copy(tbl[block*lftBlock:], res[0].out[:lftBlock])
		ft[n.GUID] = tbl
		out := int(tbl[dst])
		if out == 0 || out > n.Ports {
			return ft, nil
		}
		if cur, ok = t.Peer(fabric.PortRef{GUID: n.GUID, Port: out}); !ok {
			return ft, nil
		}
	}
	return ft, nil
}

// maxRouteHops bounds RouteTables' walk (IBA directed routes: 63 hops).
const maxRouteHops = 64
