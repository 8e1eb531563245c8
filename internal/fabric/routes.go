package fabric

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
)

// NoPort marks an unset forwarding-table entry (IBA: 255 drops the packet).
const NoPort = 255

// ForwardingTables maps each switch to its linear forwarding table:
// entry [lid] is the port a packet for that LID leaves by.
type ForwardingTables map[GUID][]uint8

// Equal reports whether two sets of tables route every LID the same.
func (f ForwardingTables) Equal(g ForwardingTables) bool {
	if len(f) != len(g) {
		return false
	}
	for sw, a := range f {
		b, ok := g[sw]
		if !ok {
			return false
		}
		n := max(len(a), len(b))
		for i := 0; i < n; i++ {
			if lftAt(a, i) != lftAt(b, i) {
				return false
			}
		}
	}
	return true
}

func lftAt(t []uint8, i int) uint8 {
	if i < len(t) {
		return t[i]
	}
	return NoPort
}

// Hop is one step of a route: the port a packet leaves a node by.
type Hop struct {
	GUID        GUID     `json:"guid"`
	Port        int      `json:"port"`
	Type        NodeType `json:"type"`
	LID         LID      `json:"lid"`
	Description string   `json:"description"`
}

// Route is the path from one LID to another.
type Route struct {
	Src  LID   `json:"src_lid"`
	Dst  LID   `json:"dst_lid"`
	Hops []Hop `json:"hops"`
	// To is the node and port the packet arrives at.
	To Hop `json:"to"`
	// RouteModel says how the route was found where it was not read from
	// forwarding tables: "lldp-shortest-path (unique)" for the one
	// shortest path of a switch graph (Ethernet, discovered by LLDP), or
	// "lldp-shortest-path (ecmp: …)" where several equal-cost paths exist
	// and traffic is taken as split evenly over the next hops at each
	// switch. Empty for routes read from forwarding tables (InfiniBand).
	RouteModel string `json:"route_model,omitempty"`
	// Paths lists the equal-cost paths (at most MaxPaths, lowest ports
	// first) with the share of the traffic each carries under even
	// splitting, when there are several; Hops is the first of them.
	Paths []SharedPath `json:"paths,omitempty"`
	// PathCount is how many equal-cost paths there are (Paths holds at
	// most MaxPaths of them); 0 for routes read from forwarding tables.
	PathCount int `json:"path_count,omitempty"`
}

// SharedPath is one of several equal-cost paths and the share of the
// pair's traffic it carries.
type SharedPath struct {
	Share float64 `json:"share"`
	Hops  []Hop   `json:"hops"`
}

// MaxPaths bounds the equal-cost paths a Route lists.
const MaxPaths = 64

// ModelShortestPath names the route model of switches whose links are
// Ethernet: the shortest paths of the LLDP graph, traffic split evenly
// over equal-cost next hops (ECMP), since a switch's hash is not known.
const ModelShortestPath = "lldp-shortest-path"

// Pair is a (source LID, destination LID) pair.
type Pair struct {
	Src LID `json:"src_lid"`
	Dst LID `json:"dst_lid"`
}

// PairShare is a pair whose traffic crosses a port, with the fraction of
// it that does under the shortest-path model's even split (1 where the
// path is unique, and for routes read from forwarding tables).
type PairShare struct {
	Pair
	Share float64 `json:"share"`
}

// Routes answers path questions over one topology and its forwarding
// tables. It is immutable once built and safe for concurrent use.
type Routes struct {
	t   *Topology
	lft ForwardingTables
	// Dense switch indices make the all-pairs reverse lookup cheap.
	swIndex map[GUID]int
	swGUID  []GUID
	caPorts []PortRef // every CA port with a LID

	// sp routes the switches whose links are Ethernet by shortest paths;
	// nil when there are none (InfiniBand: the tables alone route).
	sp *spModel
}

// NewRoutes builds the route oracle.
func NewRoutes(t *Topology, ft ForwardingTables) *Routes {
	r := &Routes{t: t, lft: ft, swIndex: map[GUID]int{}}
	for i := range t.Nodes {
		n := &t.Nodes[i]
		if n.Type == Switch {
			r.swIndex[n.GUID] = len(r.swGUID)
			r.swGUID = append(r.swGUID, n.GUID)
			continue
		}
		for p := 1; p <= n.Ports; p++ {
			if n.PortLID(p) != 0 {
				if _, linked := t.LinkAt(PortRef{n.GUID, p}); linked {
					r.caPorts = append(r.caPorts, PortRef{n.GUID, p})
				}
			}
		}
	}
	r.sp = newSPModel(r)
	return r
}

// RouteModel is the route model the topology's routes follow:
// ModelShortestPath when a switch has an Ethernet link (its routes are the
// LLDP graph's shortest paths, traffic split evenly over equal-cost ones),
// "" when every switch routes by its forwarding table (InfiniBand). It is
// what NewRoutes(t, …).Model() says, without building the routes.
func (t *Topology) RouteModel() string {
	for range t.ethernetSwitches {
		return ModelShortestPath
	}
	return ""
}

// ethernetSwitches yields every switch end of a link at an Ethernet speed
// (a switch once per such link): the switches the shortest-path model
// routes.
func (t *Topology) ethernetSwitches(yield func(GUID) bool) {
	for i := range t.Links {
		l := &t.Links[i]
		if !IsEthernetSpeed(l.Speed) {
			continue
		}
		for _, end := range []PortRef{l.A, l.B} {
			if n, ok := t.Node(end.GUID); ok && n.Type == Switch && !yield(end.GUID) {
				return
			}
		}
	}
}

// Model is the route model of switches routed by shortest paths
// (ModelShortestPath) when the fabric has any, or "" when every switch
// routes by its forwarding table.
func (r *Routes) Model() string {
	if r.sp == nil {
		return ""
	}
	return ModelShortestPath
}

// ShortestPath reports whether switch g is routed by the shortest-path
// model (its links are Ethernet) rather than by a forwarding table.
func (r *Routes) ShortestPath(g GUID) bool {
	return r.sp != nil && r.sp.member[g]
}

// NextPorts lists the ports switch g sends traffic for LID d by: every
// equal-cost next hop, lowest port first, for a switch of the shortest-path
// model; its forwarding-table entry otherwise. It is empty where g does
// not forward toward d, and for d's own switch (port 0 delivers).
func (r *Routes) NextPorts(g GUID, d LID) []int {
	if r.ShortestPath(g) {
		to, ok := r.t.PortByLID(d)
		if !ok {
			return nil
		}
		return r.sp.next(g, to)
	}
	n, ok := r.t.Node(g)
	if !ok || n.Type != Switch || n.LID == d {
		return nil
	}
	out := int(lftAt(r.lft[g], int(d)))
	if out == NoPort || out == 0 || out > n.Ports {
		return nil
	}
	return []int{out}
}

// Tables returns the forwarding tables the routes were built from.
func (r *Routes) Tables() ForwardingTables { return r.lft }

// Topology returns the topology the routes were built from.
func (r *Routes) Topology() *Topology { return r.t }

func (r *Routes) hop(p PortRef) Hop {
	n, _ := r.t.Node(p.GUID)
	return Hop{GUID: p.GUID, Port: p.Port, Type: n.Type, LID: n.PortLID(p.Port), Description: n.Description}
}

// maxHops bounds a walk so a routing loop is reported, not followed forever.
const maxHops = 64

// Path follows the forwarding tables from src to dst.
func (r *Routes) Path(src, dst LID) (*Route, error) {
	from, ok := r.t.PortByLID(src)
	if !ok {
		return nil, fmt.Errorf("route %d -> %d: %s", src, dst, r.noLID("source", src))
	}
	to, ok := r.t.PortByLID(dst)
	if !ok {
		return nil, fmt.Errorf("route %d -> %d: %s", src, dst, r.noLID("destination", dst))
	}
	return r.PathBetween(from, to)
}

// PathBetween follows the forwarding tables from port from to port to
// (port 0 of a switch). Unlike Path it needs no LID to name one port, so
// it answers in a view of several fabrics whose LIDs overlap.
func (r *Routes) PathBetween(from, to PortRef) (*Route, error) {
	for _, p := range []PortRef{from, to} {
		if _, ok := r.t.Node(p.GUID); !ok {
			return nil, fmt.Errorf("route %s -> %s: node %s is not in the routes' fabric", from, to, p.GUID)
		}
	}
	src, dst := r.lidOf(from), r.lidOf(to)
	if a, b := r.fabricOf(from), r.fabricOf(to); a != b {
		return nil, fmt.Errorf("route %d -> %d: the source is in fabric %q, the destination in fabric %q: no route joins fabrics", src, dst, a, b)
	}
	rt := &Route{Src: src, Dst: dst}
	cur := from
	n, _ := r.t.Node(cur.GUID)
	for i := 0; i < maxHops; i++ {
		if n.Type == Switch {
			if n.LID == dst {
				rt.To = r.hop(PortRef{n.GUID, 0})
				return r.spPaths(rt, from, to)
			}
			var out int
			if r.ShortestPath(n.GUID) {
				ports := r.sp.next(n.GUID, to)
				if len(ports) == 0 {
					return nil, fmt.Errorf("route %d -> %d: switch %s %q has no path to LID %d in the LLDP graph", src, dst, n.GUID, n.Description, dst)
				}
				out = ports[0]
			} else {
				tbl := r.lft[n.GUID]
				out = int(lftAt(tbl, int(dst)))
				if out == NoPort || out == 0 || out > n.Ports {
					return nil, fmt.Errorf("route %d -> %d: switch %s %q has no forwarding entry for LID %d", src, dst, n.GUID, n.Description, dst)
				}
			}
			cur = PortRef{n.GUID, out}
		} else if i > 0 {
			if n.PortLID(cur.Port) == dst {
				rt.To = r.hop(cur)
				return r.spPaths(rt, from, to)
			}
			return nil, fmt.Errorf("route %d -> %d: reached %q, which does not forward", src, dst, n.Description)
		} else if src == dst {
			rt.To = r.hop(cur)
			return rt, nil
		}
		rt.Hops = append(rt.Hops, r.hop(cur))
		next, ok := r.t.Peer(cur)
		if !ok {
			return nil, fmt.Errorf("route %d -> %d: port %s leads nowhere (link down?)", src, dst, cur)
		}
		cur = next
		n, _ = r.t.Node(cur.GUID)
	}
	return nil, fmt.Errorf("route %d -> %d: loop (more than %d hops)", src, dst, maxHops)
}

// noLID says why no port has LID l: none has it, or ports of several
// fabrics do.
func (r *Routes) noLID(what string, l LID) string {
	if fabs := r.t.SharedLID(l); len(fabs) > 0 {
		return fmt.Sprintf("%s LID %d is in several fabrics (%s): LIDs name a port within one fabric only", what, l, strings.Join(fabs, ", "))
	}
	return fmt.Sprintf("no port has %s LID %d", what, l)
}

// PairsThrough lists the (source, destination) pairs of CA ports whose route
// leaves by port from, i.e. crosses that link in the direction away from
// from. It returns at most limit pairs (all when limit <= 0) and the total.
func (r *Routes) PairsThrough(from PortRef, limit int) ([]Pair, int, error) {
	shares, total, err := r.PairSharesThrough(from, limit)
	if err != nil {
		return nil, 0, err
	}
	var out []Pair
	for _, p := range shares {
		out = append(out, p.Pair)
	}
	return out, total, nil
}

// PairSharesThrough is PairsThrough with each pair's share of traffic
// crossing the port: below 1 where the shortest-path model splits a
// pair's traffic over equal-cost paths (ECMP), 1 otherwise.
func (r *Routes) PairSharesThrough(from PortRef, limit int) ([]PairShare, int, error) {
	n, ok := r.t.Node(from.GUID)
	if !ok {
		return nil, 0, fmt.Errorf("port %s: no such node", from)
	}
	if _, ok := r.t.LinkAt(from); !ok {
		return nil, 0, fmt.Errorf("port %s: not linked", from)
	}
	var out []PairShare
	total := 0
	emitPair := func(p PairShare) {
		total++
		if limit <= 0 || len(out) < limit {
			out = append(out, p)
		}
	}
	emit := func(s, d LID) { emitPair(PairShare{Pair{Src: s, Dst: d}, 1}) }
	if n.Type == Switch && r.ShortestPath(from.GUID) {
		r.sp.pairsThrough(from, n.Fabric, emitPair)
		return out, total, nil
	}
	if n.Type != Switch {
		// Everything a CA port sends to another CA leaves by that port.
		src := n.PortLID(from.Port)
		for _, c := range r.caPorts {
			if r.fabricOf(c) != n.Fabric {
				continue // another subnet: no route leads there
			}
			if d := r.lidOf(c); d != src {
				emit(src, d)
			}
		}
		return out, total, nil
	}
	target := r.swIndex[from.GUID]
	// state per switch for the current destination: 0 unknown, 1 crosses, 2 does not.
	state := make([]uint8, len(r.swGUID))
	stack := make([]int, 0, 16)
	tbl := r.lft[from.GUID]
	for _, dport := range r.caPorts {
		if r.fabricOf(dport) != n.Fabric {
			continue
		}
		d := r.lidOf(dport)
		if int(lftAt(tbl, int(d))) != from.Port {
			continue
		}
		clear(state)
		state[target] = 1
		r.eachSource(n.Fabric, d, func(s LID, peer PortRef) {
			if sw, isSwitch := r.swIndex[peer.GUID]; isSwitch && r.crosses(sw, d, state, stack[:0]) {
				emit(s, d)
			}
		})
	}
	return out, total, nil
}

// eachSource calls f with every linked CA port of fabric fab other than
// LID d (each a source of traffic toward d): its LID and its peer port.
func (r *Routes) eachSource(fab string, d LID, f func(s LID, peer PortRef)) {
	for _, sport := range r.caPorts {
		if r.fabricOf(sport) != fab {
			continue
		}
		s := r.lidOf(sport)
		if s == d {
			continue
		}
		if peer, ok := r.t.Peer(sport); ok {
			f(s, peer)
		}
	}
}

// crosses resolves whether the walk from switch sw toward d reaches the
// target switch (state 1), memoizing every switch on the way.
func (r *Routes) crosses(sw int, d LID, state []uint8, stack []int) bool {
	for hops := 0; state[sw] == 0; hops++ {
		stack = append(stack, sw)
		next := -1
		if hops < maxHops {
			g := r.swGUID[sw]
			out := int(lftAt(r.lft[g], int(d)))
			if out != NoPort && out != 0 {
				if p, ok := r.t.Peer(PortRef{g, out}); ok {
					if i, ok := r.swIndex[p.GUID]; ok {
						next = i
					}
				}
			}
		}
		if next < 0 {
			state[sw] = 2
			break
		}
		sw = next
	}
	v := state[sw]
	for _, s := range stack {
		state[s] = v
	}
	return v == 1
}

func (r *Routes) fabricOf(p PortRef) string {
	if n, ok := r.t.Node(p.GUID); ok {
		return n.Fabric
	}
	return ""
}

func (r *Routes) lidOf(p PortRef) LID {
	n, _ := r.t.Node(p.GUID)
	return n.PortLID(p.Port)
}

// CALIDs lists the LIDs of all linked CA ports, sorted.
func (r *Routes) CALIDs() []LID {
	out := make([]LID, 0, len(r.caPorts))
	for _, p := range r.caPorts {
		out = append(out, r.lidOf(p))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// FormatRoute prints a route the way ibtracert does: where it starts, each
// hop's output port and the port it arrives at, and where it ends.
func FormatRoute(w io.Writer, rt *Route) error {
	name := func(t NodeType) string {
		if t == Switch {
			return "switch"
		}
		return "ca"
	}
	var err error
	p := func(format string, a ...any) {
		if err == nil {
			_, err = fmt.Fprintf(w, format, a...)
		}
	}
	if len(rt.Hops) == 0 {
		p("From %s {%s} portnum %d lid %d %q\n", name(rt.To.Type), rt.To.GUID, rt.To.Port, rt.To.LID, rt.To.Description)
	} else {
		first := rt.Hops[0]
		p("From %s {%s} portnum %d lid %d %q\n", name(first.Type), first.GUID, first.Port, first.LID, first.Description)
	}
	for i, h := range rt.Hops {
		next := rt.To
		if i+1 < len(rt.Hops) {
			next = rt.Hops[i+1]
		}
		p("[%d] -> %s {%s} lid %d %q\n", h.Port, name(next.Type), next.GUID, next.LID, next.Description)
	}
	p("To %s {%s} portnum %d lid %d %q\n", name(rt.To.Type), rt.To.GUID, rt.To.Port, rt.To.LID, rt.To.Description)
	if rt.RouteModel != "" {
		p("# route model: %s\n", rt.RouteModel)
		for i, sp := range rt.Paths {
			p("# path %d, share %.4g:", i+1, sp.Share)
			for _, h := range sp.Hops {
				p(" %q[%d]", h.Description, h.Port)
			}
			p("\n")
		}
		if rt.PathCount > len(rt.Paths) && len(rt.Paths) > 0 {
			p("# … and %d more equal-cost paths\n", rt.PathCount-len(rt.Paths))
		}
	}
	return err
}

// spModel routes the switches whose links are Ethernet, discovered by
// LLDP: no forwarding table says where an L2/L3 switch sends a packet, so
// traffic is taken to follow the shortest paths of the switch graph, split
// evenly over the equal-cost next hops at each switch (ECMP), as a
// switch's hash would on average over many flows. Which flow takes which
// path is not known and never claimed.
type spModel struct {
	r      *Routes
	member map[GUID]bool
	idx    map[GUID]int32
	adj    [][]spEdge // per member switch: up links to member switches, by port

	mu    sync.Mutex
	dests map[PortRef]*spDest // by destination port (port 0: a switch)
}

type spEdge struct {
	port int
	to   int32
}

// spDest is the shortest-path distance of every member switch to one
// destination: target is the switch the destination is (port 0) or hangs
// off (port), -1 when it is not on a member switch.
type spDest struct {
	dist   []int32 // -1: cannot reach
	target int32
	port   int
}

func linkUp(l *Link) bool { return !strings.EqualFold(l.State, "Down") }

func newSPModel(r *Routes) *spModel {
	m := &spModel{r: r, member: map[GUID]bool{}, idx: map[GUID]int32{}, dests: map[PortRef]*spDest{}}
	t := r.t
	for g := range t.ethernetSwitches {
		m.member[g] = true
	}
	if len(m.member) == 0 {
		return nil
	}
	for _, g := range r.swGUID { // GUID order: deterministic
		if m.member[g] {
			m.idx[g] = int32(len(m.adj))
			m.adj = append(m.adj, nil)
		}
	}
	for g, i := range m.idx {
		n, _ := t.Node(g)
		for p := 1; p <= n.Ports; p++ {
			l, ok := t.LinkAt(PortRef{g, p})
			if !ok || !linkUp(l) {
				continue
			}
			peer, _ := t.Peer(PortRef{g, p})
			if j, ok := m.idx[peer.GUID]; ok && peer.GUID != g {
				m.adj[i] = append(m.adj[i], spEdge{port: p, to: j})
			}
		}
	}
	return m
}

// dest returns (computing once) every member switch's distance to port
// p (port 0 of a switch, or a host port). Destinations are ports, not
// LIDs, so a view of several fabrics whose LIDs overlap routes too.
func (m *spModel) dest(p PortRef) *spDest {
	m.mu.Lock()
	ds, ok := m.dests[p]
	m.mu.Unlock()
	if ok {
		return ds
	}
	ds = &spDest{dist: make([]int32, len(m.adj)), target: -1}
	for i := range ds.dist {
		ds.dist[i] = -1
	}
	t := m.r.t
	if n, ok := t.Node(p.GUID); ok {
		if i, member := m.idx[p.GUID]; member && p.Port == 0 && n.Type == Switch {
			ds.target = i
		} else if l, linked := t.LinkAt(p); linked && linkUp(l) {
			peer, _ := t.Peer(p)
			if i, member := m.idx[peer.GUID]; member {
				ds.target, ds.port = i, peer.Port
			}
		}
	}
	if ds.target >= 0 {
		ds.dist[ds.target] = 0
		queue := []int32{ds.target}
		for len(queue) > 0 {
			i := queue[0]
			queue = queue[1:]
			for _, e := range m.adj[i] {
				if ds.dist[e.to] < 0 {
					ds.dist[e.to] = ds.dist[i] + 1
					queue = append(queue, e.to)
				}
			}
		}
	}
	m.mu.Lock()
	m.dests[p] = ds
	m.mu.Unlock()
	return ds
}

// next lists member switch g's equal-cost ports toward port to, lowest
// first.
func (m *spModel) next(g GUID, to PortRef) []int {
	i, ok := m.idx[g]
	if !ok {
		return nil
	}
	ds := m.dest(to)
	if ds.target < 0 || ds.dist[i] < 0 {
		return nil
	}
	if i == ds.target {
		if ds.port == 0 {
			return nil
		}
		return []int{ds.port}
	}
	var out []int
	for _, e := range m.adj[i] {
		if ds.dist[e.to] == ds.dist[i]-1 {
			out = append(out, e.port)
		}
	}
	return out
}

// pairsThrough emits the (source, destination) pairs of host ports whose
// traffic crosses port from of a member switch on some shortest path,
// each with the share of it that does under even splitting.
func (m *spModel) pairsThrough(from PortRef, fab string, emit func(PairShare)) {
	r := m.r
	target := m.idx[from.GUID]
	for _, dport := range r.caPorts {
		if r.fabricOf(dport) != fab {
			continue
		}
		d := r.lidOf(dport)
		ports := m.next(from.GUID, dport)
		k := 0
		for _, p := range ports {
			if p == from.Port {
				k = len(ports)
			}
		}
		if k == 0 {
			continue
		}
		ds := m.dest(dport)
		frac := make([]float64, len(m.adj))
		for i := range frac {
			frac[i] = -1
		}
		var share func(i int32) float64
		share = func(i int32) float64 {
			if frac[i] >= 0 {
				return frac[i]
			}
			f := 0.0
			switch {
			case i == target:
				f = 1 / float64(k)
			case ds.dist[i] > ds.dist[target]:
				var nx []int32
				for _, e := range m.adj[i] {
					if ds.dist[e.to] == ds.dist[i]-1 {
						nx = append(nx, e.to)
					}
				}
				for _, j := range nx {
					f += share(j) / float64(len(nx))
				}
			}
			frac[i] = f
			return f
		}
		r.eachSource(fab, d, func(s LID, peer PortRef) {
			if i, member := m.idx[peer.GUID]; member && ds.dist[i] >= 0 {
				if f := share(i); f > 0 {
					emit(PairShare{Pair{Src: s, Dst: d}, f})
				}
			}
		})
	}
}

// spPaths completes a route from port from to port to that crossed
// switches of the shortest-path model: its model, how many equal-cost paths
// there are and, when several, each (up to MaxPaths) with its share.
// Routes over forwarding tables alone are returned as they are.
func (r *Routes) spPaths(rt *Route, from, to PortRef) (*Route, error) {
	if r.sp == nil {
		return rt, nil
	}
	uses := false
	for _, h := range rt.Hops {
		if r.ShortestPath(h.GUID) {
			uses = true
			break
		}
	}
	if !uses {
		return rt, nil
	}
	// next is where switch g sends toward to: the model's equal-cost
	// ports, or a forwarding table's one.
	next := func(g GUID) []int {
		if r.ShortestPath(g) {
			return r.sp.next(g, to)
		}
		return r.NextPorts(g, rt.Dst)
	}
	arrived := func(p PortRef) bool { return p == to }
	// Count the paths from each switch without listing them.
	counts := map[GUID]float64{}
	var count func(g GUID, depth int) float64
	count = func(g GUID, depth int) float64 {
		if c, ok := counts[g]; ok {
			return c
		}
		c := 0.0
		if arrived(PortRef{g, 0}) {
			c = 1
		} else if depth < maxHops {
			counts[g] = 0 // a loop back here counts nothing
			for _, p := range next(g) {
				peer, ok := r.t.Peer(PortRef{g, p})
				if !ok {
					continue
				}
				if pn, _ := r.t.Node(peer.GUID); pn.Type == Switch {
					c += count(peer.GUID, depth+1)
				} else if arrived(peer) {
					c++
				}
			}
		}
		counts[g] = c
		return c
	}
	var first PortRef // the first switch
	var prefix []Hop
	if n, _ := r.t.Node(from.GUID); n.Type == Switch {
		first = PortRef{from.GUID, 0}
	} else {
		prefix = []Hop{r.hop(from)}
		first, _ = r.t.Peer(from)
	}
	total := count(first.GUID, 0)
	rt.PathCount = int(min(total, 1<<30))
	if total <= 1 {
		rt.RouteModel = ModelShortestPath + " (unique)"
		return rt, nil
	}
	rt.RouteModel = fmt.Sprintf("%s (ecmp: %d equal-cost paths; traffic taken as split evenly over each switch's next hops, not the switches' own hash)", ModelShortestPath, rt.PathCount)
	var walk func(g GUID, hops []Hop, share float64)
	walk = func(g GUID, hops []Hop, share float64) {
		if len(rt.Paths) >= MaxPaths || len(hops) > maxHops {
			return
		}
		if arrived(PortRef{g, 0}) {
			rt.Paths = append(rt.Paths, SharedPath{Share: share, Hops: slicesClone(hops)})
			return
		}
		ports := next(g)
		for _, p := range ports {
			peer, ok := r.t.Peer(PortRef{g, p})
			if !ok {
				continue
			}
			h := append(hops, r.hop(PortRef{g, p}))
			if pn, _ := r.t.Node(peer.GUID); pn.Type == Switch {
				walk(peer.GUID, h, share/float64(len(ports)))
			} else if arrived(peer) && len(rt.Paths) < MaxPaths {
				rt.Paths = append(rt.Paths, SharedPath{Share: share / float64(len(ports)), Hops: slicesClone(h)})
			}
		}
	}
	walk(first.GUID, prefix, 1)
	return rt, nil
}

func slicesClone(h []Hop) []Hop { return append([]Hop(nil), h...) }

// ECMPGroup is a set of two or more ports of one switch that are
// equal-cost next hops toward some host: the ports its hash spreads flows
// over (a leaf's uplinks in a leaf-spine).
type ECMPGroup struct {
	Switch GUID
	Ports  []int // lowest first
}

// ECMPGroups lists every switch's distinct sets of equal-cost next ports
// toward the fabric's host ports (switches of the shortest-path model
// only), by switch GUID then ports.
func (r *Routes) ECMPGroups() []ECMPGroup {
	if r.sp == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []ECMPGroup
	for _, g := range r.swGUID {
		if !r.sp.member[g] {
			continue
		}
		for _, d := range r.caPorts {
			ports := r.sp.next(g, d)
			if len(ports) < 2 {
				continue
			}
			key := fmt.Sprint(g, ports)
			if !seen[key] {
				seen[key] = true
				out = append(out, ECMPGroup{Switch: g, Ports: ports})
			}
		}
	}
	return out
}

// SplitHow says how the bytes a pair put on one direction were split
// over equal-cost paths on the way there (SplitPair).
type SplitHow struct {
	// ECMP: some switch on the way had several equal-cost next ports.
	ECMP bool
	// Even: at one of them at least, no weights were known and the bytes
	// were split evenly (the route model's split).
	Even bool
	// Samples and GroupSamples: where every split was weighted, the
	// fewest samples behind the port taken at a split on the way, and the
	// samples of that switch's equal-cost group then.
	Samples, GroupSamples uint64
}

// SplitWeights weighs switch sw's equal-cost ports toward the pair's
// destination (lowest first): the bytes seen leaving each and the samples
// they come from. Nil, or all zero, splits evenly.
type SplitWeights func(sw GUID, ports []int) (bytes, samples []uint64)

// SplitPair routes bytes from host LID src to host LID dst over the
// shortest-path model's equal-cost paths, splitting each switch's inflow
// over its next ports in proportion to weights (evenly where it has
// none), the bytes that do not divide going one each to the lowest
// weighted ports, so that no byte is lost or made up. emit is called once
// for every direction the pair's paths cross (the source's host port
// first), also with 0 bytes for a port weighted 0, with how the bytes got
// there.
func (r *Routes) SplitPair(src, dst LID, bytes uint64, weights SplitWeights, emit func(dir PortRef, b uint64, how SplitHow)) error {
	from, ok := r.t.PortByLID(src)
	if !ok {
		return fmt.Errorf("split %d -> %d: %s", src, dst, r.noLID("source", src))
	}
	to, ok := r.t.PortByLID(dst)
	if !ok {
		return fmt.Errorf("split %d -> %d: %s", src, dst, r.noLID("destination", dst))
	}
	first, ok := r.t.Peer(from)
	if !ok || r.sp == nil || !r.sp.member[first.GUID] {
		return fmt.Errorf("split %d -> %d: the source's switch is not routed by shortest paths", src, dst)
	}
	emit(from, bytes, SplitHow{})
	ds := r.sp.dest(to)
	type inflow struct {
		b   uint64
		how SplitHow
	}
	// Every step goes one closer to dst: switches by distance, farthest
	// first, have all their inflow when they pass it on.
	levels := map[int32]map[GUID]*inflow{}
	at := func(g GUID) *inflow {
		i := r.sp.idx[g]
		dist := ds.dist[i]
		if levels[dist] == nil {
			levels[dist] = map[GUID]*inflow{}
		}
		x := levels[dist][g]
		if x == nil {
			x = &inflow{}
			levels[dist][g] = x
		}
		return x
	}
	if ds.dist[r.sp.idx[first.GUID]] < 0 {
		return fmt.Errorf("split %d -> %d: no path in the LLDP graph", src, dst)
	}
	x := at(first.GUID)
	x.b = bytes
	for dist := ds.dist[r.sp.idx[first.GUID]]; dist >= 0; dist-- {
		lv := levels[dist]
		gs := make([]GUID, 0, len(lv))
		for g := range lv {
			gs = append(gs, g)
		}
		sort.Slice(gs, func(i, j int) bool { return gs[i] < gs[j] })
		for _, g := range gs {
			in := lv[g]
			ports := r.sp.next(g, to)
			if len(ports) == 0 {
				continue
			}
			var wb, ws []uint64
			var total, totalSamples uint64
			if len(ports) > 1 && weights != nil {
				wb, ws = weights(g, ports)
				for k := range wb {
					total += wb[k]
					totalSamples += ws[k]
				}
			}
			parts := make([]uint64, len(ports))
			var given uint64
			for k := range ports {
				if total > 0 {
					parts[k] = uint64(float64(in.b) * float64(wb[k]) / float64(total))
				} else {
					parts[k] = in.b / uint64(len(ports))
				}
				given += parts[k]
			}
			for k := 0; given < in.b; k = (k + 1) % len(ports) {
				if total == 0 || wb[k] > 0 {
					parts[k]++
					given++
				}
			}
			for k, p := range ports {
				how := in.how
				if len(ports) > 1 {
					how.ECMP = true
					if total == 0 {
						how.Even = true
					} else if !how.Even && (how.GroupSamples == 0 || ws[k] < how.Samples) {
						how.Samples, how.GroupSamples = ws[k], totalSamples
					}
				}
				out := PortRef{g, p}
				emit(out, parts[k], how)
				peer, ok := r.t.Peer(out)
				if !ok {
					continue
				}
				if _, member := r.sp.idx[peer.GUID]; member && peer.GUID != g {
					nx := at(peer.GUID)
					if nx.b == 0 && !nx.how.ECMP {
						nx.how = how
					} else {
						nx.how = mergeHow(nx.how, how)
					}
					nx.b += parts[k]
				}
			}
		}
	}
	return nil
}

// mergeHow joins how two inflows of one switch were split: even if either
// was, else the fewer samples.
func mergeHow(a, b SplitHow) SplitHow {
	out := SplitHow{ECMP: a.ECMP || b.ECMP, Even: a.Even || b.Even}
	switch {
	case out.Even:
	case !a.ECMP:
		out.Samples, out.GroupSamples = b.Samples, b.GroupSamples
	case !b.ECMP || a.Samples <= b.Samples:
		out.Samples, out.GroupSamples = a.Samples, a.GroupSamples
	default:
		out.Samples, out.GroupSamples = b.Samples, b.GroupSamples
	}
	return out
}
