package health

import "github.com/netloom/netloom/internal/fabric"

// crossTest answers whether the route from one host port to another leaves
// by one of a set of ports, without walking every pair: per destination,
// whether each switch's walk toward it crosses the set is worked out once
// (memoized along the walk), so a job of n nodes costs O(n x (switches +
// n)) rather than O(n² x hops).
type crossTest struct {
	t      *fabric.Topology
	tables fabric.ForwardingTables
	ports  map[fabric.PortRef]bool
	sw     map[fabric.GUID]int
	memo   map[fabric.LID][]int8 // per destination, per switch: 1 crosses, -1 does not
}

func newCrossing(r *fabric.Routes, ports map[fabric.PortRef]bool) *crossTest {
	t := r.Topology()
	c := &crossTest{t: t, tables: r.Tables(), ports: ports, sw: map[fabric.GUID]int{}, memo: map[fabric.LID][]int8{}}
	for i := range t.Nodes {
		if t.Nodes[i].Type == fabric.Switch {
			c.sw[t.Nodes[i].GUID] = len(c.sw)
		}
	}
	return c
}

// crosses reports whether the route from src to dst (host LIDs) leaves by
// one of the ports.
func (c *crossTest) crosses(src, dst fabric.LID) bool {
	sp, ok := c.t.PortByLID(src)
	if !ok {
		return false
	}
	if c.ports[sp] {
		return true
	}
	peer, ok := c.t.Peer(sp)
	if !ok {
		return false
	}
	i, ok := c.sw[peer.GUID]
	if !ok {
		return false
	}
	state := c.memo[dst]
	if state == nil {
		state = make([]int8, len(c.sw))
		c.memo[dst] = state
	}
	var stack []int
	g := peer.GUID
	for hops := 0; state[i] == 0; hops++ {
		stack = append(stack, i)
		out := int(tableAt(c.tables[g], int(dst)))
		if hops > 64 || out == 0 || out == fabric.NoPort {
			state[i] = -1
			break
		}
		p := fabric.PortRef{GUID: g, Port: out}
		if c.ports[p] {
			state[i] = 1
			break
		}
		next, ok := c.t.Peer(p)
		j, isSwitch := c.sw[next.GUID]
		if !ok || !isSwitch {
			state[i] = -1 // delivered (or lost) without crossing
			break
		}
		i, g = j, next.GUID
	}
	v := state[i]
	for _, s := range stack {
		state[s] = v
	}
	return v == 1
}
