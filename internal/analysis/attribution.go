// Package analysis joins the fabric and the jobs on it: it turns a job's
// node-to-node traffic into traffic on each physical link direction
// (attribution), and ranks hot spots.
package analysis

import (
	"fmt"
	"sync"

	"github.com/netloom/netloom/internal/fabric"
)

// Flow is traffic from one fabric endpoint to another over an interval.
type Flow struct {
	Src, Dst fabric.LID
	Bytes    uint64
}

// Attributor routes flows over the forwarding-table paths of one topology
// and routing. It caches, per destination, the tree of next hops that all
// sources follow toward it, so attributing an all-to-all pattern costs
// O(destinations x (switches + sources)), not O(pairs x hops).
// It is safe for concurrent use.
type Attributor struct {
	routes *fabric.Routes
	topo   *fabric.Topology

	// Dense indices: every linked port is one link direction (the
	// direction leaving it).
	portIndex map[fabric.PortRef]int32
	ports     []fabric.PortRef

	swIndex map[fabric.GUID]int32
	swGUID  []fabric.GUID
	// caSwitch[lid] is the switch a CA port's link leads to (-1: none);
	// caPort[lid] is the CA port's direction index.
	caSwitch map[fabric.LID]int32
	caPort   map[fabric.LID]int32

	mu    sync.Mutex
	trees map[fabric.LID]*destTree

	// multi is set when the routes model some switches by shortest paths
	// (Ethernet): traffic toward a destination then follows a DAG of
	// equal-cost next hops, split evenly at each switch, not a tree.
	multi bool
	dags  map[fabric.LID]*destDAG
}

// destDAG is how every switch forwards toward one destination when it may
// have several equal-cost next hops: for switch i, outs[i] are the
// direction indices it splits its inflow over, evenly, and nexts[i] the
// switch each reaches (-1: it delivers to the destination). order lists
// switches farthest first; switches that cannot reach the destination are
// not in it and carry nothing.
type destDAG struct {
	outs  [][]int32
	nexts [][]int32
	order []int32
}

// destTree is how every switch forwards toward one destination: for switch
// i, out[i] is the direction index it sends by and next[i] the switch it
// reaches (-1 when out[i] delivers to the destination, -2 when the switch
// cannot reach it). order lists switches farthest first.
type destTree struct {
	out   []int32
	next  []int32
	order []int32
}

// NewAttributor prepares attribution over routes.
func NewAttributor(routes *fabric.Routes) *Attributor {
	t := routes.Topology()
	a := &Attributor{routes: routes, topo: t, portIndex: map[fabric.PortRef]int32{},
		swIndex: map[fabric.GUID]int32{}, caSwitch: map[fabric.LID]int32{}, caPort: map[fabric.LID]int32{},
		trees: map[fabric.LID]*destTree{}, multi: routes.Model() != "", dags: map[fabric.LID]*destDAG{}}
	for _, l := range t.Links {
		for _, end := range []fabric.PortRef{l.A, l.B} {
			a.portIndex[end] = int32(len(a.ports))
			a.ports = append(a.ports, end)
		}
	}
	for i := range t.Nodes {
		n := &t.Nodes[i]
		if n.Type == fabric.Switch {
			a.swIndex[n.GUID] = int32(len(a.swGUID))
			a.swGUID = append(a.swGUID, n.GUID)
		}
	}
	for i := range t.Nodes {
		n := &t.Nodes[i]
		if n.Type == fabric.Switch {
			continue
		}
		for p := 1; p <= n.Ports; p++ {
			ref := fabric.PortRef{GUID: n.GUID, Port: p}
			lid := n.PortLID(p)
			peer, ok := t.Peer(ref)
			if lid == 0 || !ok {
				continue
			}
			if sw, ok := a.swIndex[peer.GUID]; ok {
				a.caSwitch[lid] = sw
				a.caPort[lid] = a.portIndex[ref]
			}
		}
	}
	return a
}

// RouteModel says how the routes the attribution follows were found: ""
// for forwarding tables (InfiniBand: each pair's one path), or
// fabric.ModelShortestPath where some switches are routed by the LLDP
// graph's shortest paths and a pair's bytes are split evenly over
// equal-cost next hops (ECMP) at each switch, the switches' hash not
// being known.
func (a *Attributor) RouteModel() string { return a.routes.Model() }

// Directions is the number of link directions; Load slices are this long.
func (a *Attributor) Directions() int { return len(a.ports) }

// Direction returns the sending port of direction i.
func (a *Attributor) Direction(i int) fabric.PortRef { return a.ports[i] }

// DirectionIndex returns the index of the direction leaving port p.
func (a *Attributor) DirectionIndex(p fabric.PortRef) (int, bool) {
	i, ok := a.portIndex[p]
	return int(i), ok
}

// tree returns (building once) the forwarding tree toward destination d.
func (a *Attributor) tree(d fabric.LID) *destTree {
	a.mu.Lock()
	t, ok := a.trees[d]
	a.mu.Unlock()
	if ok {
		return t
	}
	tbls := a.routes.Tables()
	n := len(a.swGUID)
	t = &destTree{out: make([]int32, n), next: make([]int32, n), order: make([]int32, 0, n)}
	for i, g := range a.swGUID {
		t.next[i], t.out[i] = -2, -1
		tbl := tbls[g]
		if int(d) >= len(tbl) {
			continue
		}
		out := int(tbl[d])
		if out == 0 || out == fabric.NoPort {
			continue
		}
		ref := fabric.PortRef{GUID: g, Port: out}
		dir, linked := a.portIndex[ref]
		if !linked {
			continue
		}
		peer, _ := a.topo.Peer(ref)
		t.out[i] = dir
		if sw, isSwitch := a.swIndex[peer.GUID]; isSwitch {
			t.next[i] = sw
		} else if node, _ := a.topo.Node(peer.GUID); node.PortLID(peer.Port) == d {
			t.next[i] = -1
		}
	}
	// Depth toward d, then switches farthest first, so each switch's
	// inflow is complete before it is passed on. Loops and dead ends get
	// no depth and carry nothing.
	depth := make([]int32, n)
	for i := range depth {
		depth[i] = -1
	}
	var resolve func(i int32, guard int) int32
	resolve = func(i int32, guard int) int32 {
		if depth[i] >= 0 || guard > 64 {
			return depth[i]
		}
		switch nx := t.next[i]; {
		case nx == -1:
			depth[i] = 0
		case nx >= 0:
			if d := resolve(nx, guard+1); d >= 0 {
				depth[i] = d + 1
			}
		}
		return depth[i]
	}
	maxDepth := int32(0)
	for i := range depth {
		if d := resolve(int32(i), 0); d > maxDepth {
			maxDepth = d
		}
	}
	t.order = farthestFirst(depth, maxDepth)
	a.mu.Lock()
	a.trees[d] = t
	a.mu.Unlock()
	return t
}

// endpoint is a host port resolved for attribution: its own direction
// and the switch its link leads to.
type endpoint struct {
	port, sw int32
	ok       bool
}

func (a *Attributor) endpoint(lid fabric.LID) endpoint {
	sw, ok := a.caSwitch[lid]
	return endpoint{port: a.caPort[lid], sw: sw, ok: ok}
}

// errorList collects distinct errors, at most 20.
type errorList []error

func (e *errorList) add(format string, args ...any) {
	err := fmt.Errorf(format, args...)
	for _, x := range *e {
		if x.Error() == err.Error() {
			return
		}
	}
	if len(*e) < 20 {
		*e = append(*e, err)
	}
}

// Attribute adds every flow's bytes to each link direction its route
// crosses. load must have Directions() entries; it is added to, not
// cleared, so several jobs or intervals can share one. Flows whose
// endpoints are unknown or unrouted attribute nothing and are reported.
func (a *Attributor) Attribute(flows []Flow, load []uint64) []error {
	var errs errorList
	if len(load) != len(a.ports) {
		errs.add("attribute: load has %d directions, want %d", len(load), len(a.ports))
		return errs
	}
	byDst := map[fabric.LID][]Flow{}
	for _, f := range flows {
		byDst[f.Dst] = append(byDst[f.Dst], f)
	}
	inflow := make([]uint64, len(a.swGUID))
	for d, fs := range byDst {
		clear(inflow)
		for _, f := range fs {
			if src := a.endpoint(f.Src); !src.ok {
				errs.add("attribute: source LID %d is not a linked host port", f.Src)
			} else if f.Bytes > 0 && f.Src != d {
				load[src.port] += f.Bytes
				inflow[src.sw] += f.Bytes
			}
		}
		a.drain(d, inflow, load, &errs)
	}
	return errs
}

// Matrix is traffic among a set of endpoints over an interval, stored by
// destination: Bytes[j*len(LIDs)+i] went from LIDs[i] to LIDs[j]. (Column
// by column is how attribution reads it.)
type Matrix struct {
	LIDs  []fabric.LID
	Bytes []uint64
}

// AttributeMatrix is Attribute for a dense endpoint matrix, the shape of a
// job's node-to-node traffic; it allocates nothing per pair.
func (a *Attributor) AttributeMatrix(m Matrix, load []uint64) []error {
	var errs errorList
	n := len(m.LIDs)
	if len(load) != len(a.ports) || len(m.Bytes) != n*n {
		errs.add("attribute: %d directions and %d matrix entries for %d endpoints; want %d and %d",
			len(load), len(m.Bytes), n, len(a.ports), n*n)
		return errs
	}
	eps := make([]endpoint, n)
	for i, lid := range m.LIDs {
		if eps[i] = a.endpoint(lid); !eps[i].ok {
			errs.add("attribute: LID %d is not a linked host port", lid)
		}
	}
	inflow := make([]uint64, len(a.swGUID))
	for j, d := range m.LIDs {
		if !eps[j].ok {
			continue
		}
		clear(inflow)
		for i, b := range m.Bytes[j*n : (j+1)*n] {
			if b > 0 && i != j && eps[i].ok {
				load[eps[i].port] += b
				inflow[eps[i].sw] += b
			}
		}
		a.drain(d, inflow, load, &errs)
	}
	return errs
}

// drain passes the bytes that entered each switch toward destination d
// down its forwarding tree, farthest switch first so each switch's inflow
// is complete before it moves on.
func (a *Attributor) drain(d fabric.LID, inflow, load []uint64, errs *errorList) {
	if _, ok := a.caSwitch[d]; !ok {
		errs.add("attribute: destination LID %d is not a linked host port", d)
		return
	}
	if a.multi {
		a.drainDAG(d, inflow, load)
		return
	}
	t := a.tree(d)
	for _, sw := range t.order {
		b := inflow[sw]
		if b == 0 {
			continue
		}
		load[t.out[sw]] += b
		if nx := t.next[sw]; nx >= 0 {
			inflow[nx] += b
		}
	}
}

// drainDAG is drain over equal-cost next hops: each switch's inflow is
// split evenly over its next hops, the bytes that do not divide going one
// each to the lowest ports, so no byte is lost or made up.
func (a *Attributor) drainDAG(d fabric.LID, inflow, load []uint64) {
	g := a.dag(d)
	for _, sw := range g.order {
		b := inflow[sw]
		if b == 0 {
			continue
		}
		outs, nexts := g.outs[sw], g.nexts[sw]
		k := uint64(len(outs))
		q, rem := b/k, b%k
		for j, dir := range outs {
			x := q
			if uint64(j) < rem {
				x++
			}
			if x == 0 {
				continue
			}
			load[dir] += x
			if nx := nexts[j]; nx >= 0 {
				inflow[nx] += x
			}
		}
	}
}

// dag returns (building once) the equal-cost forwarding DAG toward d.
func (a *Attributor) dag(d fabric.LID) *destDAG {
	a.mu.Lock()
	g, ok := a.dags[d]
	a.mu.Unlock()
	if ok {
		return g
	}
	n := len(a.swGUID)
	g = &destDAG{outs: make([][]int32, n), nexts: make([][]int32, n)}
	const deadEnd = -2
	for i, sw := range a.swGUID {
		for _, out := range a.routes.NextPorts(sw, d) {
			ref := fabric.PortRef{GUID: sw, Port: out}
			dir, linked := a.portIndex[ref]
			if !linked {
				continue
			}
			peer, _ := a.topo.Peer(ref)
			next := int32(deadEnd)
			if s, isSwitch := a.swIndex[peer.GUID]; isSwitch {
				next = s
			} else if node, _ := a.topo.Node(peer.GUID); node.PortLID(peer.Port) == d {
				next = -1
			}
			g.outs[i] = append(g.outs[i], dir)
			g.nexts[i] = append(g.nexts[i], next)
		}
	}
	// Longest distance to delivery; loops and dead ends get none. A next
	// hop that cannot deliver is dropped, so what a switch splits all
	// arrives.
	depth := make([]int32, n)
	for i := range depth {
		depth[i] = -2 // not computed
	}
	var resolve func(i int32, guard int) int32
	resolve = func(i int32, guard int) int32 {
		if depth[i] != -2 {
			return depth[i]
		}
		if guard > 64 {
			return -1
		}
		depth[i] = -1 // in progress: a loop back here finds no depth
		best := int32(-1)
		for _, nx := range g.nexts[i] {
			switch {
			case nx == -1:
				best = max(best, 0)
			case nx >= 0:
				if dd := resolve(nx, guard+1); dd >= 0 {
					best = max(best, dd+1)
				}
			}
		}
		depth[i] = best
		return best
	}
	maxDepth := int32(0)
	for i := range depth {
		maxDepth = max(maxDepth, resolve(int32(i), 0))
	}
	for i := range g.outs {
		var outs, nexts []int32
		for j, nx := range g.nexts[i] {
			if nx == -1 || (nx >= 0 && depth[nx] >= 0 && depth[nx] < depth[i]) {
				outs, nexts = append(outs, g.outs[i][j]), append(nexts, nx)
			}
		}
		g.outs[i], g.nexts[i] = outs, nexts
		if len(outs) == 0 {
			depth[i] = -1
		}
	}
	g.order = farthestFirst(depth, maxDepth)
	a.mu.Lock()
	a.dags[d] = g
	a.mu.Unlock()
	return g
}

// farthestFirst lists the switches by their distance to the destination
// (depth, at most maxDepth), farthest first, leaving out those that do
// not reach it (depth < 0): the order in which a switch has received all
// its inflow before it passes it on.
func farthestFirst(depth []int32, maxDepth int32) []int32 {
	var order []int32
	for d := maxDepth; d >= 0; d-- {
		for i := range depth {
			if depth[i] == d {
				order = append(order, int32(i))
			}
		}
	}
	return order
}
