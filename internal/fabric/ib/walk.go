package ib

/*
#include <infiniband/ibnetdisc.h>
#include <infiniband/mad.h>
#include "mad.h"
*/
import "C"

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/netloom/netloom/internal/fabric"
)

// PortInfo.PortPhysicalState of a port whose link is up.
const physLinkUp = 5

// walkNode is a node the walk found, and the route that reaches it.
type walkNode struct {
	raw      rawNode
	path     []byte
	portGUID uint64 // a switch's (all its ports share it)
}

// walk discovers the fabric from the local port with directed-route SMPs
// on the pipelined engine: breadth first, one batch per step (the
// NodeInfo of every port just reached; then the NodeDescription and
// PortInfo of every node new in it), nodes and links joined by maps, so
// its time grows with the fabric's ports, and ctx stops it between
// batches. It reads what libibnetdisc reads (NodeInfo, NodeDescription,
// PortInfo of every switch port and of the CA ports it enters by) and
// builds the same model. The caller holds s.mu.
func (s *Source) walk(ctx context.Context) (*fabric.Topology, error) {
	nodes := map[uint64]*walkNode{}
	var order []*walkNode
	// A port just reached, whose NodeInfo is asked: the route to it, and
	// the switch port it was reached from (none for the local port).
	type reach struct {
		path     []byte
		fromNode uint64
		fromPort int
	}
	frontier := []reach{{path: []byte{}}}
	for len(frontier) > 0 {
		qs := make([]query, len(frontier))
		for i, r := range frontier {
			qs[i] = query{class: classSMIDR, method: methodGet, attr: attrNodeInfo, path: r.path}
		}
		res, err := s.batch(ctx, qs, s.opt.Parallel, s.opt.Timeout, s.opt.Retries)
		if err != nil {
			return nil, fmt.Errorf("ib: discover: %w", err)
		}
		var fresh []*walkNode
		var errs []error
		for i, r := range res {
			if r.err != nil {
				errs = append(errs, r.err)
				continue
			}
			ni := r.out
			guid := binary.BigEndian.Uint64(ni[12:])
			portGUID := binary.BigEndian.Uint64(ni[20:])
			local := int(ni[36])
			n, seen := nodes[guid]
			if !seen {
				num := int(ni[3])
				n = &walkNode{raw: rawNode{guid: guid, typ: int(ni[2]), numPorts: num, ports: make([]*rawPort, num+1)}, path: frontier[i].path, portGUID: portGUID}
				nodes[guid] = n
				order = append(order, n)
				fresh = append(fresh, n)
			}
			if local > n.raw.numPorts {
				errs = append(errs, fmt.Errorf("node 0x%016x answered on port %d of %d", guid, local, n.raw.numPorts))
				continue
			}
			if n.raw.ports[local] == nil {
				n.raw.ports[local] = &rawPort{guid: portGUID}
			}
			if f := frontier[i]; f.fromNode != 0 {
				n.raw.ports[local].remoteNode, n.raw.ports[local].remotePort, n.raw.ports[local].linked = f.fromNode, f.fromPort, true
				from := nodes[f.fromNode].raw.ports[f.fromPort]
				from.remoteNode, from.remotePort, from.linked = guid, local, true
			}
		}
		if len(errs) > 0 && len(order) == 0 {
			return nil, fmt.Errorf("ib: discover: the local port does not answer: %w", errs[0])
		}
		frontier = frontier[:0:0]
		if len(fresh) == 0 {
			break
		}
		// NodeDescription and PortInfo of the new nodes: every port of a
		// switch (port 0 holds its LID), the entry port of a CA.
		qs = qs[:0]
		type ask struct {
			n    *walkNode
			port int // -1: NodeDescription
		}
		var asks []ask
		for _, n := range fresh {
			qs = append(qs, query{class: classSMIDR, method: methodGet, attr: attrNodeDesc, path: n.path})
			asks = append(asks, ask{n, -1})
			for p := range n.raw.ports {
				if n.raw.typ == C.IB_NODE_SWITCH || n.raw.ports[p] != nil {
					qs = append(qs, query{class: classSMIDR, method: methodGet, attr: attrPortInfo, mod: uint32(p), path: n.path})
					asks = append(asks, ask{n, p})
				}
			}
		}
		res, err = s.batch(ctx, qs, s.opt.Parallel, s.opt.Timeout, s.opt.Retries)
		if err != nil {
			return nil, fmt.Errorf("ib: discover: %w", err)
		}
		for i, r := range res {
			a := asks[i]
			if r.err != nil {
				errs = append(errs, r.err)
				continue
			}
			if a.port < 0 {
				a.n.raw.desc = cString(r.out[:smpDataSize])
				continue
			}
			rp := a.n.raw.ports[a.port]
			if rp == nil {
				rp = &rawPort{}
				a.n.raw.ports[a.port] = rp
			}
			rp.info = append([]byte(nil), r.out[:smpDataSize]...)
			rp.lid = binary.BigEndian.Uint16(rp.info[16:])
			if a.n.raw.typ != C.IB_NODE_SWITCH {
				continue
			}
			if a.port == 0 {
				a.n.raw.smaLID = rp.lid
			}
			// Leave a switch by every port whose link is up, but the one
			// it was reached by; never walk through a CA.
			if a.port > 0 && field(rp.info, C.IB_PORT_PHYS_STATE_F) == physLinkUp && !rp.linked && len(a.n.path) < C.NL_DR_PATH-1 {
				path := append(append(make([]byte, 0, len(a.n.path)+1), a.n.path...), byte(a.port))
				frontier = append(frontier, reach{path: path, fromNode: a.n.raw.guid, fromPort: a.port})
			}
		}
		// The local CA is left by the port it answered on.
		if len(order) == len(fresh) && order[0].raw.typ != C.IB_NODE_SWITCH {
			self := order[0]
			for p, rp := range self.raw.ports {
				if rp != nil && field(rp.info, C.IB_PORT_PHYS_STATE_F) == physLinkUp {
					frontier = append(frontier, reach{path: []byte{byte(p)}, fromNode: self.raw.guid, fromPort: p})
				}
			}
		}
		// Like libibnetdisc, a node or port that does not answer is left
		// out and the walk goes on.
	}
	raw := make([]rawNode, len(order))
	for i, n := range order {
		raw[i] = n.raw
		if n.raw.typ == C.IB_NODE_SWITCH {
			for _, p := range raw[i].ports {
				if p != nil {
					p.guid = n.portGUID
				}
			}
		}
	}
	return build(raw)
}
