// Package place computes placement advice: a mapping of a job's ranks to
// nodes (and to cores within them) that lowers the job's communication cost
// on the real fabric, from the rank-to-rank traffic it measured and the
// routes the switches' forwarding tables give. The combinatorics are
// Scotch's (a tree-leaf target built from the routes' hop distances); this
// package builds its inputs, repairs capacity, and judges every placement
// with one cost model: inter-node bytes, bytes times hops, and the load of
// the heaviest link direction (the daemon's own link attribution).
package place

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/netloom/netloom/internal/analysis"
	"github.com/netloom/netloom/internal/fabric"
)

// Traffic is a job's rank-to-rank bytes (all classes, row = sender) as
// non-zero entries.
type Traffic struct {
	Ranks    int
	Src, Dst []int32
	Bytes    []uint64
	// Truncated: some ranks reported only their top peers (the agent's
	// peer limit), so the matrix is a lower bound.
	Truncated bool
}

// Add appends one entry; zero bytes and self-traffic are left out.
func (t *Traffic) Add(src, dst int, bytes uint64) {
	if bytes == 0 || src == dst {
		return
	}
	t.Src, t.Dst, t.Bytes = append(t.Src, int32(src)), append(t.Dst, int32(dst)), append(t.Bytes, bytes)
}

// Total is the bytes of all entries.
func (t *Traffic) Total() uint64 {
	var s uint64
	for _, b := range t.Bytes {
		s += b
	}
	return s
}

// Node is a node ranks may be placed on.
type Node struct {
	Name  string `json:"name"`
	Cores int    `json:"cores"`
	// Slots is how many ranks the node may hold when more than its cores
	// (the job ran that many there: the placement oversubscribes it); 0:
	// its cores. A rank's core is always one of the node's Cores.
	Slots int `json:"slots,omitempty"`
	// CoresFrom says where Cores came from (CoresGiven, ...).
	CoresFrom string `json:"cores_from,omitempty"`
}

// slots is how many ranks the node may hold.
func (n Node) slots() int { return max(n.Cores, n.Slots) }

// NodeMapper maps node names to host adapter LIDs (analysis.NodeMap is one).
type NodeMapper interface {
	LID(name string) (fabric.LID, error)
}

// Fabric is the fabric a placement is judged on: routes from the
// forwarding tables and the names of its nodes.
type Fabric struct {
	Routes *fabric.Routes
	Nodes  NodeMapper
	attr   *analysis.Attributor
}

// NewFabric prepares routes and node names for placement.
func NewFabric(routes *fabric.Routes, nodes NodeMapper) *Fabric {
	return &Fabric{Routes: routes, Nodes: nodes, attr: analysis.NewAttributor(routes)}
}

// Request is one placement question.
type Request struct {
	Traffic Traffic
	// AsRan is each rank's node as the job ran ("" unknown); may be nil.
	AsRan []string
	// Nodes are the nodes to place on, with their cores.
	Nodes []Node
	// Background is other traffic per link direction (index as the
	// fabric's attribution directions), added before the heaviest link is
	// chosen; nil for none.
	Background []uint64
	// Seed makes the random placement reproducible.
	Seed uint64
}

// Placement is a rank -> node (and core) mapping.
type Placement struct {
	// Node[r] indexes the advice's node list; Core[r] is the slot within
	// the node (-1: any), its core modulo the node's cores.
	Node []int32
	Core []int32
}

// LinkLoad is the bytes a placement puts on one link direction.
//
// Which direction it is (Link, From, To and their descriptions) names
// switches: Advice.HideFabric clears it for those who may not see the
// fabric, and the JSON then leaves it out.
type LinkLoad struct {
	Link     string         `json:"link,omitempty"`
	From     fabric.PortRef `json:"from,omitzero"`
	To       fabric.PortRef `json:"to,omitzero"`
	FromName string         `json:"from_description,omitempty"`
	ToName   string         `json:"to_description,omitempty"`
	Bytes    uint64         `json:"bytes"`
	// JobBytes is the job's own share (Bytes less the background).
	JobBytes uint64 `json:"job_bytes"`
}

// Cost is what a placement costs the job on the fabric.
type Cost struct {
	InterNodeBytes uint64 `json:"inter_node_bytes"`
	IntraNodeBytes uint64 `json:"intra_node_bytes"`
	ByteHops       uint64 `json:"byte_hops"`
	// HeaviestLink is the most loaded link direction (nil: no inter-node
	// traffic).
	HeaviestLink *LinkLoad `json:"heaviest_link"`
	NodesUsed    int       `json:"nodes_used"`
	// Links are the loaded directions, heaviest first (only where asked).
	Links []LinkLoad `json:"links,omitempty"`
}

// HeaviestBytes is the bytes of the cost's heaviest link direction (0
// when none carried any).
func (c *Cost) HeaviestBytes() uint64 {
	if c == nil || c.HeaviestLink == nil {
		return 0
	}
	return c.HeaviestLink.Bytes
}

// better orders costs: bytes x hops, then the heaviest link, then
// inter-node bytes.
func (c *Cost) better(d *Cost) bool {
	if c.ByteHops != d.ByteHops {
		return c.ByteHops < d.ByteHops
	}
	if c.HeaviestBytes() != d.HeaviestBytes() {
		return c.HeaviestBytes() < d.HeaviestBytes()
	}
	return c.InterNodeBytes < d.InterNodeBytes
}

// evaluator judges placements over one set of nodes.
type evaluator struct {
	fab   *Fabric
	names []string
	lids  []fabric.LID
	hops  []int32 // src-major, len(names)^2
	t     *Traffic
	bg    []uint64
}

// errNotOnFabric lists node names that map to no host adapter.
type errNotOnFabric struct{ errs []error }

// maxListed is how many of the nodes not on the fabric an error names: a
// hostlist of thousands of unknown names must not come back as an error
// of thousands of lines.
const maxListed = 5

func (e *errNotOnFabric) Error() string {
	if len(e.errs) <= maxListed {
		return errors.Join(e.errs...).Error()
	}
	return fmt.Sprintf("%v\n(and %d more nodes not on the fabric)", errors.Join(e.errs[:maxListed]...), len(e.errs)-maxListed)
}

func newEvaluator(fab *Fabric, names []string, t *Traffic, bg []uint64) (*evaluator, error) {
	e := &evaluator{fab: fab, names: names, lids: make([]fabric.LID, len(names)), t: t, bg: bg}
	var bad []error
	for i, n := range names {
		lid, err := fab.Nodes.LID(n)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		e.lids[i] = lid
	}
	if len(bad) > 0 {
		return nil, &errNotOnFabric{bad}
	}
	if bg != nil && len(bg) != fab.attr.Directions() {
		return nil, fmt.Errorf("background load has %d link directions, the fabric %d", len(bg), fab.attr.Directions())
	}
	n := len(names)
	e.hops = make([]int32, n*n)
	for s := range n {
		for d := range n {
			if s == d || e.lids[s] == e.lids[d] {
				continue
			}
			rt, err := fab.Routes.Path(e.lids[s], e.lids[d])
			if err != nil {
				return nil, fmt.Errorf("node %s to node %s: %w", names[s], names[d], err)
			}
			e.hops[s*n+d] = int32(len(rt.Hops))
		}
	}
	return e, nil
}

// cost judges a placement; with links it lists every loaded direction.
func (e *evaluator) cost(p Placement, links bool) (*Cost, error) {
	n := len(e.names)
	nm := make([]uint64, n*n) // destination-major, as attribution reads it
	c := &Cost{}
	used := make([]bool, n)
	for _, v := range p.Node {
		used[v] = true
	}
	for _, u := range used {
		if u {
			c.NodesUsed++
		}
	}
	t := e.t
	for i, b := range t.Bytes {
		s, d := p.Node[t.Src[i]], p.Node[t.Dst[i]]
		if s == d {
			c.IntraNodeBytes += b
			continue
		}
		c.InterNodeBytes += b
		c.ByteHops += b * uint64(e.hops[int(s)*n+int(d)])
		nm[int(d)*n+int(s)] += b
	}
	attr := e.fab.attr
	load := make([]uint64, attr.Directions())
	if errs := attr.AttributeMatrix(analysis.Matrix{LIDs: e.lids, Bytes: nm}, load); len(errs) > 0 {
		return nil, fmt.Errorf("link loads: %w", errors.Join(errs...))
	}
	best := -1
	var bestBytes uint64
	for i, b := range load {
		total := b
		if e.bg != nil {
			total += e.bg[i]
		}
		if b > 0 && total > bestBytes {
			best, bestBytes = i, total
		}
	}
	if best >= 0 {
		l := e.linkLoad(best, load[best])
		c.HeaviestLink = &l
	}
	if links {
		for i, b := range load {
			if b > 0 {
				c.Links = append(c.Links, e.linkLoad(i, b))
			}
		}
		slices.SortFunc(c.Links, func(a, b LinkLoad) int {
			if a.Bytes != b.Bytes {
				return cmp.Compare(b.Bytes, a.Bytes)
			}
			return cmp.Compare(a.Link+a.From.String(), b.Link+b.From.String())
		})
	}
	return c, nil
}

func (e *evaluator) linkLoad(dir int, job uint64) LinkLoad {
	t := e.fab.Routes.Topology()
	from := e.fab.attr.Direction(dir)
	to, _ := t.Peer(from)
	l := LinkLoad{From: from, To: to, Bytes: job, JobBytes: job}
	if e.bg != nil {
		l.Bytes += e.bg[dir]
	}
	if lk, ok := t.LinkAt(from); ok {
		l.Link = lk.ID()
	}
	if n, ok := t.Node(from.GUID); ok {
		l.FromName = n.Description
	}
	if n, ok := t.Node(to.GUID); ok {
		l.ToName = n.Description
	}
	return l
}

// hierarchy groups nodes by hop distance, for a tree-leaf target: levels
// from the root down, each a hop threshold; groups at each level. On a fat
// tree the hop distances are ultrametric (same leaf switch, same pod, ...)
// and the tree is exact; elsewhere it is single-linkage clustering, and the
// cost model still judges the result with the real routes.
type hierarchy struct {
	thresholds []int32 // descending: the root's, then each level below
	// path[node] is the node's child index at each level (root first); its
	// last entry is its index among its leaf group's nodes.
	path  [][]int32
	sizes []int32 // per level: most children of any group at it
	order []int   // nodes in tree order (leftmost first)
}

func buildHierarchy(hops []int32, n int) hierarchy {
	distinct := map[int32]bool{}
	for s := range n {
		for d := range n {
			if s != d {
				distinct[hops[s*n+d]] = true
			}
		}
	}
	var th []int32
	for h := range distinct {
		th = append(th, h)
	}
	slices.Sort(th)
	slices.Reverse(th) // root's threshold first
	h := hierarchy{thresholds: th, path: make([][]int32, n), sizes: make([]int32, len(th))}
	var split func(members []int, level int)
	split = func(members []int, level int) {
		var groups [][]int
		if level+1 < len(th) {
			groups = components(members, hops, n, th[level+1])
		} else {
			for _, m := range members {
				groups = append(groups, []int{m})
			}
		}
		h.sizes[level] = max(h.sizes[level], int32(len(groups)))
		for i, g := range groups {
			for _, m := range g {
				h.path[m] = append(h.path[m], int32(i))
			}
			if level+1 < len(th) {
				split(g, level+1)
			} else {
				h.order = append(h.order, g...)
			}
		}
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	if len(th) == 0 {
		h.order = all
		for i := range h.path {
			h.path[i] = nil
		}
		return h
	}
	split(all, 0)
	return h
}

// components splits members into groups joined by hops <= limit, each
// group in the members' order, groups by their first member.
func components(members []int, hops []int32, n int, limit int32) [][]int {
	parent := map[int]int{}
	find := func(x int) int {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	for _, m := range members {
		parent[m] = m
	}
	for i, a := range members {
		for _, b := range members[i+1:] {
			if hops[a*n+b] <= limit && hops[b*n+a] <= limit {
				if ra, rb := find(a), find(b); ra != rb {
					parent[rb] = ra
				}
			}
		}
	}
	idx := map[int]int{}
	var groups [][]int
	for _, m := range members {
		r := find(m)
		i, ok := idx[r]
		if !ok {
			i = len(groups)
			idx[r] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], m)
	}
	return groups
}

// maxPeers bounds the edges per rank handed to Scotch: an all-to-all of
// 4,096 ranks is 16 million pairs, and its structure (if any) is in each
// rank's heaviest peers. Costs are always judged on the full matrix.
const maxPeers = 64

// commGraph builds Scotch's undirected graph from the traffic: each rank's
// heaviest maxPeers partners (by bytes both ways), weights scaled so that
// Scotch's 32-bit communication loads cannot overflow.
func commGraph(t *Traffic, maxDist int32) graph {
	n := t.Ranks
	// Rows by sender, sorted by receiver, for lookups of the reverse.
	order := make([]int, len(t.Bytes))
	for i := range order {
		order[i] = i
	}
	less := func(x, y int) bool {
		if t.Src[x] != t.Src[y] {
			return t.Src[x] < t.Src[y]
		}
		return t.Dst[x] < t.Dst[y]
	}
	// Jobs' rows come sorted (by rank, peers by rank); sort only if not.
	sorted := true
	for i := 1; i < len(order) && sorted; i++ {
		sorted = !less(i, i-1)
	}
	if !sorted {
		sort.Slice(order, func(a, b int) bool { return less(order[a], order[b]) })
	}
	start := make([]int, n+1)
	for _, i := range order {
		start[t.Src[i]+1]++
	}
	for r := range n {
		start[r+1] += start[r]
	}
	sent := func(s, d int32) uint64 {
		row := order[start[s]:start[s+1]]
		k := sort.Search(len(row), func(j int) bool { return t.Dst[row[j]] >= d })
		var b uint64
		for ; k < len(row) && t.Dst[row[k]] == d; k++ {
			b += t.Bytes[row[k]]
		}
		return b
	}
	// Each rank's heaviest receivers (its sent row), as candidate pairs.
	var pairs []uint64
	for r := range n {
		row := slices.Clone(order[start[r]:start[r+1]])
		if len(row) > maxPeers {
			slices.SortFunc(row, func(a, b int) int { return cmp.Compare(t.Bytes[b], t.Bytes[a]) })
			row = row[:maxPeers]
		}
		for _, i := range row {
			a, b := t.Src[i], t.Dst[i]
			if a == b {
				continue
			}
			pairs = append(pairs, uint64(min(a, b))<<32|uint64(max(a, b)))
		}
	}
	slices.Sort(pairs)
	pairs = slices.Compact(pairs)
	weights := make([]float64, len(pairs))
	total := 0.0
	for i, p := range pairs {
		a, b := int32(p>>32), int32(p&0xffffffff)
		weights[i] = float64(sent(a, b) + sent(b, a))
		total += weights[i]
	}
	// Scotch sums weight x distance over all arcs in 32 bits.
	scale := 1.0
	if budget := float64(1<<29) / float64(max(maxDist, 1)) / 2; total > budget {
		scale = budget / total
	}
	deg := make([]int32, n+1)
	for _, p := range pairs {
		deg[int32(p>>32)+1]++
		deg[int32(p&0xffffffff)+1]++
	}
	for r := range n {
		deg[r+1] += deg[r]
	}
	g := graph{Start: slices.Clone(deg), Adj: make([]int32, deg[n]), Weight: make([]int32, deg[n])}
	fill := deg[:n]
	for i, p := range pairs {
		a, b := int32(p>>32), int32(p&0xffffffff)
		w := int32(max(1, math.Round(weights[i]*scale)))
		g.Adj[fill[a]], g.Weight[fill[a]] = b, w
		fill[a]++
		g.Adj[fill[b]], g.Weight[fill[b]] = a, w
		fill[b]++
	}
	return g
}

// hopScale makes any fabric hop far dearer than staying in a node: the
// tree-leaf distance of two cores of one node is 1, of two nodes
// hops x hopScale.
const hopScale = 16

// scotchPlacement maps the ranks onto the first nodes (in tree order)
// whose cores hold them all, with Scotch, then repairs what Scotch left
// over capacity.
func scotchPlacement(e *evaluator, nodes []Node, h hierarchy) (Placement, error) {
	t := e.t
	R := t.Ranks
	// The terminals: cores of nodes in tree order, until every rank has
	// one; then, if they do not, the slots beyond the cores
	// (oversubscription) in the same order.
	type term struct{ node, core int32 }
	var terms []term
	for _, ni := range h.order {
		for c := 0; c < nodes[ni].Cores && len(terms) < R; c++ {
			terms = append(terms, term{int32(ni), int32(c)})
		}
	}
	for _, ni := range h.order {
		for c := nodes[ni].Cores; c < nodes[ni].slots() && len(terms) < R; c++ {
			terms = append(terms, term{int32(ni), int32(c)})
		}
	}
	maxCores := int32(0) // the most slots of a node
	for _, nd := range nodes {
		maxCores = max(maxCores, int32(nd.slots()))
	}
	arch := tleaf{}
	for i, th := range h.thresholds {
		arch.Sizes = append(arch.Sizes, h.sizes[i])
		arch.Links = append(arch.Links, th*hopScale)
	}
	arch.Sizes = append(arch.Sizes, maxCores)
	arch.Links = append(arch.Links, 1)
	for _, tm := range terms {
		num := int32(0)
		for i, c := range h.path[tm.node] {
			num = num*arch.Sizes[i] + c
		}
		arch.Terms = append(arch.Terms, num*maxCores+tm.core)
	}
	maxDist := int32(1)
	if len(h.thresholds) > 0 {
		maxDist = h.thresholds[0] * hopScale
	}
	g := commGraph(t, maxDist)
	part, err := scotchMap(arch, g, 0.01)
	if err != nil {
		return Placement{}, err
	}
	p := Placement{Node: make([]int32, R), Core: make([]int32, R)}
	taken := make([]bool, len(terms))
	var homeless []int
	for r, k := range part {
		if k < 0 || int(k) >= len(terms) || taken[k] {
			homeless = append(homeless, r)
			continue
		}
		taken[k] = true
		p.Node[r], p.Core[r] = terms[k].node, terms[k].core
	}
	// Ranks Scotch put on a taken core go to the free core nearest (by
	// bytes x hops to their graph neighbours already placed).
	n := len(e.names)
	for _, r := range homeless {
		best, bestCost := -1, uint64(math.MaxUint64)
		seen := map[int32]bool{}
		for k, tk := range taken {
			if tk || seen[terms[k].node] {
				continue
			}
			seen[terms[k].node] = true
			var c uint64
			for j := g.Start[r]; j < g.Start[r+1]; j++ {
				c += uint64(g.Weight[j]) * uint64(e.hops[int(terms[k].node)*n+int(p.Node[g.Adj[j]])])
			}
			if c < bestCost {
				best, bestCost = k, c
			}
		}
		taken[best] = true
		p.Node[r], p.Core[r] = terms[best].node, terms[best].core
	}
	return p, nil
}

// blockPlacement fills the nodes in the order given, core by core (Open
// MPI's --map-by core, Slurm's block distribution); ranks left when every
// core is taken share cores (the slots beyond them), in the same order.
func blockPlacement(R int, nodes []Node) Placement {
	p := Placement{Node: make([]int32, R), Core: make([]int32, R)}
	r := 0
	for ni, nd := range nodes {
		for c := 0; c < nd.Cores && r < R; c++ {
			p.Node[r], p.Core[r] = int32(ni), int32(c)
			r++
		}
	}
	for ni, nd := range nodes {
		for c := nd.Cores; c < nd.slots() && r < R; c++ {
			p.Node[r], p.Core[r] = int32(ni), int32(c)
			r++
		}
	}
	return p
}

// roundRobinPlacement deals ranks to the nodes in turn (Open MPI's
// --map-by node, Slurm's cyclic distribution), skipping full nodes; ranks
// left when every core is taken share cores, dealt the same way.
func roundRobinPlacement(R int, nodes []Node) Placement {
	p := Placement{Node: make([]int32, R), Core: make([]int32, R)}
	used := make([]int, len(nodes))
	cores := 0
	for _, nd := range nodes {
		cores += nd.Cores
	}
	room := func(n Node) int { return n.Cores } // then, once every core is taken, the slots beyond
	ni := 0
	for r := range R {
		if r == cores {
			room = Node.slots
		}
		for used[ni] >= room(nodes[ni]) {
			ni = (ni + 1) % len(nodes)
		}
		p.Node[r], p.Core[r] = int32(ni), int32(used[ni])
		used[ni]++
		ni = (ni + 1) % len(nodes)
	}
	return p
}

// randomPlacement puts the ranks on randomly chosen free cores (then, if
// they are too few, on random slots beyond them).
func randomPlacement(R int, nodes []Node, seed uint64) Placement {
	type slot struct{ node, core int32 }
	var slots, extra []slot
	for ni, nd := range nodes {
		for c := range nd.slots() {
			if c < nd.Cores {
				slots = append(slots, slot{int32(ni), int32(c)})
			} else {
				extra = append(extra, slot{int32(ni), int32(c)})
			}
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x6e65746c6f6f6d))
	rng.Shuffle(len(slots), func(i, j int) { slots[i], slots[j] = slots[j], slots[i] })
	rng.Shuffle(len(extra), func(i, j int) { extra[i], extra[j] = extra[j], extra[i] })
	slots = append(slots, extra...)
	p := Placement{Node: make([]int32, R), Core: make([]int32, R)}
	for r := range R {
		p.Node[r], p.Core[r] = slots[r].node, slots[r].core
	}
	return p
}
