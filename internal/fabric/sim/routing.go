package sim

import (
	"context"
	"fmt"
	"math"
	"sort"

	"github.com/netloom/netloom/internal/fabric"
)

// Routing algorithms ComputeRoutes picks from.
const (
	// AlgoUpDown routes a tree (fat tree, Clos): shortest paths that only
	// go up toward the roots, then down, like OpenSM's ftree/updn.
	AlgoUpDown = "updn"
	// AlgoMinHop routes anything else by plain shortest paths, like
	// OpenSM's minhop.
	AlgoMinHop = "minhop"
)

const unreachable = math.MaxInt32

type swEdge struct {
	port int // local port
	peer int // switch index
}

// target is one LID and where it leaves the fabric: port 0 of switch sw for
// the switch itself, else the switch port a CA port hangs off.
type target struct {
	lid  fabric.LID
	sw   int
	port int
}

type swGraph struct {
	guid    []fabric.GUID
	ports   []int
	adj     [][]swEdge
	rank    []int // hops from the nearest switch with a CA; -1 if none
	targets [][]target
	maxLID  int
}

func newSwGraph(t *fabric.Topology) *swGraph {
	g := &swGraph{}
	idx := make(map[fabric.GUID]int)
	for i := range t.Nodes {
		n := &t.Nodes[i]
		if n.Type != fabric.Switch {
			continue
		}
		idx[n.GUID] = len(g.guid)
		g.guid = append(g.guid, n.GUID)
		g.ports = append(g.ports, n.Ports)
	}
	g.adj = make([][]swEdge, len(g.guid))
	g.targets = make([][]target, len(g.guid))
	for i := range t.Nodes {
		n := &t.Nodes[i]
		if n.Type == fabric.Switch && n.LID != 0 {
			s := idx[n.GUID]
			g.targets[s] = append(g.targets[s], target{n.LID, s, 0})
			g.maxLID = max(g.maxLID, int(n.LID))
		}
	}
	for _, l := range t.Links {
		if l.State != "" && l.State != "Active" {
			continue
		}
		a, aSw := idx[l.A.GUID]
		b, bSw := idx[l.B.GUID]
		switch {
		case aSw && bSw:
			g.adj[a] = append(g.adj[a], swEdge{l.A.Port, b})
			g.adj[b] = append(g.adj[b], swEdge{l.B.Port, a})
		case aSw:
			g.addCA(t, a, l.A.Port, l.B)
		case bSw:
			g.addCA(t, b, l.B.Port, l.A)
		}
	}
	for s := range g.targets {
		sort.Slice(g.targets[s], func(i, j int) bool { return g.targets[s][i].lid < g.targets[s][j].lid })
	}
	for s := range g.adj {
		sort.Slice(g.adj[s], func(i, j int) bool { return g.adj[s][i].port < g.adj[s][j].port })
	}
	g.rank = make([]int, len(g.guid))
	var queue []int
	for s := range g.rank {
		g.rank[s] = -1
		for _, tg := range g.targets[s] {
			if tg.port != 0 {
				g.rank[s] = 0
				queue = append(queue, s)
				break
			}
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, e := range g.adj[s] {
			if g.rank[e.peer] < 0 {
				g.rank[e.peer] = g.rank[s] + 1
				queue = append(queue, e.peer)
			}
		}
	}
	return g
}

func (g *swGraph) addCA(t *fabric.Topology, sw, swPort int, ca fabric.PortRef) {
	n, ok := t.Node(ca.GUID)
	if !ok {
		return
	}
	if lid := n.PortLID(ca.Port); lid != 0 {
		g.targets[sw] = append(g.targets[sw], target{lid, sw, swPort})
		g.maxLID = max(g.maxLID, int(lid))
	}
}

// isTree reports whether up/down routing applies: every switch is ranked
// and every switch-to-switch link joins adjacent ranks.
func (g *swGraph) isTree() bool {
	for s := range g.adj {
		if g.rank[s] < 0 {
			return false
		}
		for _, e := range g.adj[s] {
			if d := g.rank[s] - g.rank[e.peer]; d != 1 && d != -1 {
				return false
			}
		}
	}
	return true
}

// ComputeRoutes computes every switch's linear forwarding table for t:
// up/down shortest paths when t is a tree whose shortest paths are all
// up/down paths, plain shortest paths (minhop) otherwise. Among equal next
// hops it picks the port carrying the fewest CA destinations so far,
// starting from a destination-dependent port (destination-mod-k), so
// routes spread evenly. It returns the tables and the algorithm used.
func ComputeRoutes(ctx context.Context, t *fabric.Topology) (fabric.ForwardingTables, string, error) {
	g := newSwGraph(t)
	if g.isTree() {
		ft, ok, err := g.route(ctx, true)
		if err != nil || ok {
			return ft, AlgoUpDown, err
		}
	}
	ft, _, err := g.route(ctx, false)
	return ft, AlgoMinHop, err
}

// route fills the tables. With updown it gives up (ok false) as soon as
// some up/down route to a CA is longer than the shortest path.
func (g *swGraph) route(ctx context.Context, updown bool) (fabric.ForwardingTables, bool, error) {
	n := len(g.guid)
	lft := make([][]uint8, n)
	loads := make([][]int32, n)
	for s := range lft {
		lft[s] = make([]uint8, g.maxLID+1)
		for i := range lft[s] {
			lft[s][i] = fabric.NoPort
		}
		loads[s] = make([]int32, g.ports[s]+1)
	}
	// Switches from the top rank down, for the up/down distances.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return g.rank[order[i]] > g.rank[order[j]] })

	dist := make([]int, n)       // plain shortest distance to d
	down := make([]int, n)       // distance going only down to d
	ud := make([]int, n)         // distance going up, then down, to d
	queue := make([]int, 0, n)   // BFS
	cands := make([]int, 0, 4*n) // next-hop ports of all switches toward d
	candAt := make([]int, n+1)   // switch s's are cands[candAt[s]:candAt[s+1]]
	ord := 0
	for d := range n {
		if len(g.targets[d]) == 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, false, fmt.Errorf("computing routes: %w", err)
		}
		bfs(g, d, dist, queue, func(int, int) bool { return true })
		// Only CA traffic needs deadlock-free up/down paths; a switch
		// without CAs (its own LID: management traffic) is reached by the
		// shortest path, which between two roots must go down and up.
		updown := updown && g.rank[d] == 0
		if updown {
			bfs(g, d, down, queue, func(from, to int) bool { return g.rank[to] == g.rank[from]+1 })
			for _, s := range order {
				v := down[s]
				for _, e := range g.adj[s] {
					if g.rank[e.peer] == g.rank[s]+1 && ud[e.peer] != unreachable && ud[e.peer]+1 < v {
						v = ud[e.peer] + 1
					}
				}
				ud[s] = v
				if v != dist[s] {
					return nil, false, nil
				}
			}
		}
		// Equal-cost next hops of every switch toward d, shared by all of
		// d's LIDs.
		cands = cands[:0]
		for s := range n {
			candAt[s] = len(cands)
			if s == d || dist[s] == unreachable {
				continue
			}
			for _, e := range g.adj[s] {
				var ok bool
				switch {
				case !updown:
					ok = dist[e.peer] == dist[s]-1
				case down[s] == ud[s]:
					ok = g.rank[e.peer] == g.rank[s]-1 && down[e.peer] == down[s]-1
				default:
					ok = g.rank[e.peer] == g.rank[s]+1 && ud[e.peer] == ud[s]-1
				}
				if ok {
					cands = append(cands, e.port)
				}
			}
		}
		candAt[n] = len(cands)
		for _, tg := range g.targets[d] {
			lft[d][tg.lid] = uint8(tg.port)
			ca := tg.port != 0
			if ca {
				loads[d][tg.port]++
			}
			for s := range n {
				c := cands[candAt[s]:candAt[s+1]]
				if len(c) == 0 {
					continue
				}
				ld := loads[s]
				best := c[ord%len(c)]
				if len(c) > 1 {
					start := ord % len(c)
					for _, p := range c[start:] {
						if ld[p] < ld[best] {
							best = p
						}
					}
					for _, p := range c[:start] {
						if ld[p] < ld[best] {
							best = p
						}
					}
				}
				lft[s][tg.lid] = uint8(best)
				if ca {
					ld[best]++
				}
			}
			if ca {
				ord++
			}
		}
	}
	ft := make(fabric.ForwardingTables, n)
	for s, tbl := range lft {
		ft[g.guid[s]] = tbl
	}
	return ft, true, nil
}

// bfs fills dist with hop counts to d over edges from->to allowed by step,
// walking outward from d (so step sees the reverse of the packet's move).
func bfs(g *swGraph, d int, dist []int, queue []int, step func(from, to int) bool) {
	for i := range dist {
		dist[i] = unreachable
	}
	dist[d] = 0
	queue = append(queue[:0], d)
	for head := 0; head < len(queue); head++ {
		x := queue[head]
		for _, e := range g.adj[x] {
			if dist[e.peer] == unreachable && step(x, e.peer) {
				dist[e.peer] = dist[x] + 1
				queue = append(queue, e.peer)
			}
		}
	}
}
