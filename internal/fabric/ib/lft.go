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
