package fabric

import (
	"fmt"
	"io"
	"sort"
	"strings"
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
}

// Pair is a (source LID, destination LID) pair.
type Pair struct {
	Src LID `json:"src_lid"`
	Dst LID `json:"dst_lid"`
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
	return r
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
				return rt, nil
			}
			tbl := r.lft[n.GUID]
			out := int(lftAt(tbl, int(dst)))
			if out == NoPort || out == 0 || out > n.Ports {
				return nil, fmt.Errorf("route %d -> %d: switch %s %q has no forwarding entry for LID %d", src, dst, n.GUID, n.Description, dst)
			}
			cur = PortRef{n.GUID, out}
		} else if i > 0 {
			if n.PortLID(cur.Port) == dst {
				rt.To = r.hop(cur)
				return rt, nil
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
	n, ok := r.t.Node(from.GUID)
	if !ok {
		return nil, 0, fmt.Errorf("port %s: no such node", from)
	}
	if _, ok := r.t.LinkAt(from); !ok {
		return nil, 0, fmt.Errorf("port %s: not linked", from)
	}
	var out []Pair
	total := 0
	emit := func(s, d LID) {
		total++
		if limit <= 0 || len(out) < limit {
			out = append(out, Pair{s, d})
		}
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
		for _, sport := range r.caPorts {
			if r.fabricOf(sport) != n.Fabric {
				continue
			}
			s := r.lidOf(sport)
			if s == d {
				continue
			}
			peer, ok := r.t.Peer(sport)
			if !ok {
				continue
			}
			sw, isSwitch := r.swIndex[peer.GUID]
			if !isSwitch {
				continue
			}
			if r.crosses(sw, d, state, stack[:0]) {
				emit(s, d)
			}
		}
	}
	return out, total, nil
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
	return err
}
