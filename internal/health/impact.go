package health

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/netloom/netloom/internal/analysis"
	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
)

// Repair impact (docs/health.md, "Repair impact"): for a link, a switch or
// a set of nodes to be taken out, the running jobs whose routes cross it
// and the load their traffic puts on the remaining links before and after.

// Target kinds.
const (
	TargetLink   = "link"
	TargetSwitch = "switch"
	TargetNodes  = "nodes"
)

// Route models: how the routes after the change were obtained.
const (
	// RoutesPredicted: the element is still up; the routes after it goes
	// are computed here (PredictTables), not by the subnet manager.
	RoutesPredicted = "predicted"
	// RoutesRead: the element is down; the routes after are the
	// forwarding tables the subnet manager computed, read from the fabric.
	RoutesRead = "read"
	// RoutesUnchanged: draining nodes moves no route (host adapters do
	// not forward); their jobs' traffic leaves the fabric.
	RoutesUnchanged = "unchanged"
)

// Target is the element to be taken out, resolved in the topology it is
// part of.
type Target struct {
	Kind   string       `json:"kind"`
	Link   *fabric.Link `json:"link,omitempty"`
	Switch *fabric.Node `json:"switch,omitempty"`
	// Nodes are the host names asked for (Kind nodes) and Ports their
	// adapters' linked ports.
	Nodes []string         `json:"nodes,omitempty"`
	Ports []fabric.PortRef `json:"-"`
	// Name says what it is in words.
	Name string `json:"name"`
}

// removedLinks are the links the target takes out of t.
func (tg *Target) removedLinks(t *fabric.Topology) []fabric.Link {
	var out []fabric.Link
	switch tg.Kind {
	case TargetLink:
		out = append(out, *tg.Link)
	case TargetSwitch:
		for i := range t.Links {
			if l := t.Links[i]; l.A.GUID == tg.Switch.GUID || l.B.GUID == tg.Switch.GUID {
				out = append(out, l)
			}
		}
	case TargetNodes:
		for _, p := range tg.Ports {
			if l, ok := t.LinkAt(p); ok {
				out = append(out, *l)
			}
		}
	}
	return out
}

// ResolveTarget finds link, switch or nodes (one of them, the others
// empty) in t. The error names the bad value; it is a NotFoundError when
// the value is well formed but names nothing in t.
func ResolveTarget(t *fabric.Topology, nm *analysis.NodeMap, link, sw string, nodes []string) (*Target, error) {
	n := 0
	for _, v := range []bool{link != "", sw != "", len(nodes) > 0} {
		if v {
			n++
		}
	}
	if n != 1 {
		return nil, &ParamError{Param: "link", Msg: "give exactly one of link, switch or nodes"}
	}
	switch {
	case link != "":
		l, err := t.FindLink(link)
		if err != nil {
			return nil, &NotFoundError{Param: "link", Msg: fmt.Sprintf("%v (a link is GUID:PORT-GUID:PORT, or GUID:PORT of either end)", err)}
		}
		a, b := describeNode(t, l.A.GUID), describeNode(t, l.B.GUID)
		return &Target{Kind: TargetLink, Link: l, Name: fmt.Sprintf("link %s (%s[%d] - %s[%d])", l.ID(), a, l.A.Port, b, l.B.Port)}, nil
	case sw != "":
		node, err := t.FindNode(sw)
		if err != nil {
			return nil, &NotFoundError{Param: "switch", Msg: err.Error()}
		}
		if node.Type != fabric.Switch {
			return nil, &ParamError{Param: "switch", Msg: fmt.Sprintf("%q is a %s, not a switch", clipValue(sw), node.Type)}
		}
		return &Target{Kind: TargetSwitch, Switch: node, Name: fmt.Sprintf("switch %s %q", node.GUID, node.Description)}, nil
	}
	tg := &Target{Kind: TargetNodes}
	seen := map[string]bool{}
	var bad []string
	for _, name := range nodes {
		name = strings.TrimSpace(name)
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		port, ok := hostPort(t, nm, name)
		if !ok {
			bad = append(bad, clipValue(name))
			continue
		}
		tg.Nodes = append(tg.Nodes, name)
		tg.Ports = append(tg.Ports, port)
	}
	if len(bad) > 0 {
		return nil, &NotFoundError{Param: "nodes", Msg: fmt.Sprintf("no host adapter in the fabric for %s", strings.Join(bad, ", "))}
	}
	if len(tg.Nodes) == 0 {
		return nil, &ParamError{Param: "nodes", Msg: "no node named"}
	}
	tg.Name = "nodes " + strings.Join(tg.Nodes, ",")
	return tg, nil
}

// hostPort is the linked adapter port of a host: by the node map's name,
// else by GUID, LID or description (a CA).
func hostPort(t *fabric.Topology, nm *analysis.NodeMap, name string) (fabric.PortRef, bool) {
	if nm != nil {
		if lid, err := nm.LID(name); err == nil {
			if p, ok := t.PortByLID(lid); ok {
				return p, true
			}
		}
	}
	n, err := t.FindNode(name)
	if err != nil || n.Type == fabric.Switch {
		return fabric.PortRef{}, false
	}
	for p := 1; p <= n.Ports; p++ {
		if _, ok := t.LinkAt(fabric.PortRef{GUID: n.GUID, Port: p}); ok {
			return fabric.PortRef{GUID: n.GUID, Port: p}, true
		}
	}
	return fabric.PortRef{}, false
}

func clipValue(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

func describeNode(t *fabric.Topology, g fabric.GUID) string {
	if n, ok := t.Node(g); ok {
		return n.Description
	}
	return g.String()
}

// ParamError is a bad parameter; NotFoundError a parameter that names
// nothing in the fabric.
type ParamError struct{ Param, Msg string }

func (e *ParamError) Error() string { return e.Param + ": " + e.Msg }

type NotFoundError struct{ Param, Msg string }

func (e *NotFoundError) Error() string { return e.Param + ": " + e.Msg }

// Without returns t without the links in removed.
func Without(t *fabric.Topology, removed []fabric.Link) (*fabric.Topology, error) {
	gone := map[string]bool{}
	for _, l := range removed {
		gone[l.ID()] = true
	}
	nodes := slices.Clone(t.Nodes)
	links := make([]fabric.Link, 0, len(t.Links))
	for _, l := range t.Links {
		if !gone[l.ID()] {
			links = append(links, l)
		}
	}
	return fabric.NewTopology(nodes, links)
}

// PredictTables predicts the forwarding tables after the links in removed
// go down, for the destination LIDs dsts: an entry whose walk from its
// switch still reaches the destination without a removed link is kept; a
// switch whose walk crossed one sends instead toward a neighbour one hop
// closer to the destination (by hop count in after, the topology without
// the links), the port fewest rerouted destinations use first, then the
// lowest. It is a model: OpenSM's own routing engine recomputes every
// table and may choose other ports, move routes that never crossed the
// links, or balance differently.
func PredictTables(before *fabric.Routes, after *fabric.Topology, dsts []fabric.LID) fabric.ForwardingTables {
	old := before.Tables()
	ft := make(fabric.ForwardingTables, len(old))
	for g, tbl := range old {
		ft[g] = slices.Clone(tbl)
	}
	var switches []fabric.GUID
	for i := range after.Nodes {
		if after.Nodes[i].Type == fabric.Switch {
			switches = append(switches, after.Nodes[i].GUID)
		}
	}
	use := map[fabric.PortRef]int{}
	for _, d := range dsts {
		dport, ok := after.PortByLID(d)
		if !ok {
			continue
		}
		last, ok := after.Peer(dport)
		if !ok {
			continue // the destination's own link is gone: unroutable
		}
		if n, _ := after.Node(last.GUID); n.Type != fabric.Switch {
			continue
		}
		// Hops to the destination's switch.
		dist := map[fabric.GUID]int{last.GUID: 0}
		queue := []fabric.GUID{last.GUID}
		for len(queue) > 0 {
			g := queue[0]
			queue = queue[1:]
			n, _ := after.Node(g)
			for p := 1; p <= n.Ports; p++ {
				peer, ok := after.Peer(fabric.PortRef{GUID: g, Port: p})
				if !ok {
					continue
				}
				if pn, _ := after.Node(peer.GUID); pn.Type != fabric.Switch {
					continue
				}
				if _, seen := dist[peer.GUID]; !seen {
					dist[peer.GUID] = dist[g] + 1
					queue = append(queue, peer.GUID)
				}
			}
		}
		// ok[g]: the old walk from g reaches d in after.
		state := map[fabric.GUID]int8{} // 1 reaches, -1 does not
		var reaches func(g fabric.GUID, hops int) bool
		reaches = func(g fabric.GUID, hops int) bool {
			if s := state[g]; s != 0 {
				return s > 0
			}
			state[g] = -1 // a loop reads as not reaching
			out := int(tableAt(old[g], int(d)))
			ok := false
			if out != 0 && out != fabric.NoPort && hops < 64 {
				if peer, linked := after.Peer(fabric.PortRef{GUID: g, Port: out}); linked {
					if peer == dport {
						ok = true
					} else if pn, _ := after.Node(peer.GUID); pn.Type == fabric.Switch {
						ok = reaches(peer.GUID, hops+1)
					}
				}
			}
			if ok {
				state[g] = 1
			}
			return ok
		}
		for _, g := range switches {
			if reaches(g, 0) {
				continue
			}
			dg, known := dist[g]
			if !known {
				continue // cut off from the destination
			}
			n, _ := after.Node(g)
			best, bestUse := 0, 0
			for p := 1; p <= n.Ports; p++ {
				peer, ok := after.Peer(fabric.PortRef{GUID: g, Port: p})
				if !ok {
					continue
				}
				good := false
				if dg == 0 {
					good = peer == dport
				} else if dp, ok := dist[peer.GUID]; ok && dp == dg-1 {
					good = true
				}
				if !good {
					continue
				}
				if u := use[fabric.PortRef{GUID: g, Port: p}]; best == 0 || u < bestUse {
					best, bestUse = p, u
				}
			}
			if best == 0 {
				continue
			}
			tbl := ft[g]
			for len(tbl) <= int(d) {
				tbl = append(tbl, fabric.NoPort)
			}
			tbl[d] = uint8(best)
			ft[g] = tbl
			use[fabric.PortRef{GUID: g, Port: best}]++
		}
	}
	return ft
}

func tableAt(t []uint8, i int) uint8 {
	if i < len(t) {
		return t[i]
	}
	return fabric.NoPort
}

// ImpactJob is what the impact needs of one running job: its summary and
// its node-to-node traffic pattern (cumulative, any scale: it only splits
// the bytes attributed on the element among the job's node pairs).
type ImpactJob struct {
	Summary store.JobSummary
	// Matrix and Names: the job's node pairs (mapped nodes), as
	// analysis.JobCounter gives them.
	Matrix analysis.Matrix
	Names  []string
	// Unmapped lists the job's nodes that map to no adapter.
	Unmapped []string
	// RanksOn counts the job's ranks per node name.
	RanksOn map[string]int
	// PairsFrom says where the node pairs come from.
	PairsFrom string
}

// Where a job's node pairs come from.
const (
	// PairsFromRanks: the ranks' reported traffic per node.
	PairsFromRanks = "ranks"
	// PairsFromHostLinks: the ranks are not known yet (a store's running
	// job before its ranks are saved, every 2 minutes); the nodes are
	// those whose host links link attribution put the job's bytes on.
	PairsFromHostLinks = "host_links"
)

// ImpactInput is everything Impact computes from.
type ImpactInput struct {
	Target *Target
	// Topo is the topology with the element in it, Before its routes.
	Topo   *fabric.Topology
	Before *fabric.Routes
	// After is the routes without the element: read from the fabric once
	// it is down (Model RoutesRead), else nil and predicted.
	After *fabric.Routes
	// Down is when the element was last seen (the element is down).
	Down time.Time
	Jobs []ImpactJob
	// Load is the running jobs' bytes attributed per direction in
	// [From, To] (store.LinkJobs).
	Load     []store.LinkJobBytes
	From, To time.Time
	// MaxPairs bounds the pairs listed (0: 200).
	MaxPairs int
}

// DirLoad is the load of one link direction, by its sending port.
type DirLoad struct {
	Link        string         `json:"link"`
	From        fabric.PortRef `json:"from"`
	To          fabric.PortRef `json:"to"`
	FromNode    string         `json:"from_node,omitempty"`
	ToNode      string         `json:"to_node,omitempty"`
	FromName    string         `json:"from_name,omitempty"` // the port's name where the fabric gives one
	ToName      string         `json:"to_name,omitempty"`
	Bytes       uint64         `json:"bytes"`
	Utilization float64        `json:"utilization_pct"`
}

// LoadChange is one direction whose load the change moves.
type LoadChange struct {
	DirLoad
	Before uint64 `json:"bytes_before"`
	After  uint64 `json:"bytes_after"`
	Delta  int64  `json:"delta_bytes"`
}

// JobImpact is one running job whose routes cross the element.
type JobImpact struct {
	Job   string   `json:"job"`
	User  string   `json:"user,omitempty"`
	Ranks int      `json:"ranks"`
	Nodes []string `json:"nodes"`
	// RanksAffected counts the ranks on the nodes whose routes cross the
	// element (on the drained nodes, for nodes).
	RanksAffected int `json:"ranks_affected"`
	// Bytes is what link attribution put on the element in the window:
	// on both directions of a link, on the directions into a switch (each
	// byte through it once), on the host links of drained nodes;
	// PairsCrossing the job's node pairs (ordered) whose route
	// crosses it.
	Bytes         uint64 `json:"bytes"`
	PairsCrossing int    `json:"pairs_crossing"`
	// MovedBytes: the bytes that take new routes after (for nodes: the
	// job's bytes in the window, which leave the fabric).
	MovedBytes uint64    `json:"moved_bytes"`
	Unroutable uint64    `json:"unroutable_bytes,omitempty"`
	Start      time.Time `json:"start,omitzero"`
	// PairsFrom says where the job's node pairs come from (PairsFromRanks,
	// PairsFromHostLinks).
	PairsFrom string `json:"pairs_from,omitempty"`
}

// PairRoute is one node pair of a job whose route crosses the element:
// the bytes moved and the sending ports of its route before and after.
type PairRoute struct {
	Job    string           `json:"job"`
	Src    string           `json:"src_node"`
	Dst    string           `json:"dst_node"`
	SrcLID fabric.LID       `json:"src_lid"`
	DstLID fabric.LID       `json:"dst_lid"`
	Bytes  uint64           `json:"bytes"`
	Before []fabric.PortRef `json:"route_before"`
	After  []fabric.PortRef `json:"route_after"`
	// Unroutable says why no route after exists.
	Unroutable string `json:"unroutable,omitempty"`
}

// Impact is the answer.
type Impact struct {
	Target *Target `json:"target"`
	// State is "up" (the element is in the fabric: the after is
	// predicted) or "down" (gone from the fabric since DownSince: the
	// routes after are the subnet manager's).
	State     string    `json:"state"`
	DownSince time.Time `json:"down_since,omitzero"`
	// RouteModel is how the routes after were obtained and RouteNote
	// says it in words.
	RouteModel string `json:"route_model"`
	RouteNote  string `json:"route_note"`
	// TrafficNote says what traffic is moved.
	TrafficNote string    `json:"traffic_note"`
	From        time.Time `json:"from"`
	To          time.Time `json:"to"`
	Seconds     float64   `json:"seconds"`
	// Removed are the element's directions with their load in the window.
	Removed []DirLoad   `json:"removed"`
	Jobs    []JobImpact `json:"jobs"`
	// Pairs are the moved pairs, heaviest first, at most MaxPairs
	// (PairsTotal in all).
	Pairs      []PairRoute `json:"pairs"`
	PairsTotal int         `json:"pairs_total"`
	// MovedBytes and UnroutableBytes sum the jobs'.
	MovedBytes      uint64 `json:"moved_bytes"`
	UnroutableBytes uint64 `json:"unroutable_bytes"`
	// HeaviestBefore is the most loaded direction of the whole fabric in
	// the window, HeaviestAfter of the remaining ones after the change
	// (nil when no direction carries a byte).
	HeaviestBefore *DirLoad `json:"heaviest_before"`
	HeaviestAfter  *DirLoad `json:"heaviest_after"`
	// Changes lists the remaining directions whose load changes, the
	// largest change first.
	Changes []LoadChange `json:"changes"`
	// Errors lists routing problems met (at most 20).
	Errors []string `json:"errors,omitempty"`
}

func (im *Impact) errorf(format string, a ...any) {
	if len(im.Errors) < 20 {
		im.Errors = append(im.Errors, fmt.Sprintf(format, a...))
	}
}

// ComputeImpact answers the repair-impact question from in.
func ComputeImpact(in ImpactInput) (*Impact, error) {
	t, tg := in.Topo, in.Target
	removedLinks := tg.removedLinks(t)
	removed := map[fabric.PortRef]bool{} // sending ports of the removed directions
	for _, l := range removedLinks {
		removed[l.A], removed[l.B] = true, true
	}
	// cut: the directions each crossing pair crosses exactly once.
	cut := map[fabric.PortRef]bool{}
	switch tg.Kind {
	case TargetLink:
		cut = removed
	case TargetSwitch:
		for _, l := range removedLinks {
			if l.A.GUID == tg.Switch.GUID {
				cut[l.B] = true
			} else {
				cut[l.A] = true
			}
		}
	}
	im := &Impact{Target: tg, State: "up", From: in.From, To: in.To, Seconds: in.To.Sub(in.From).Seconds(),
		Jobs: []JobImpact{}, Pairs: []PairRoute{}, Changes: []LoadChange{}, Removed: []DirLoad{}}
	if !in.Down.IsZero() {
		im.State, im.DownSince = "down", in.Down
	}
	maxPairs := in.MaxPairs
	if maxPairs <= 0 {
		maxPairs = 200
	}
	after := in.After
	var afterTopo *fabric.Topology
	switch {
	case tg.Kind == TargetNodes:
		im.RouteModel = RoutesUnchanged
		im.RouteNote = "routes unchanged: host adapters forward nothing, so no route between other nodes crosses the drained nodes; " +
			"the jobs with ranks on them stop (drained), and all their traffic leaves the fabric. OpenSM may still recompute " +
			"and rebalance its tables when the nodes' ports go down: that cannot be known before it happens"
		im.TrafficNote = "every byte attributed to the jobs on the drained nodes in the window is taken off every link it crossed"
	case after != nil:
		im.RouteModel = RoutesRead
		im.RouteNote = "read: the routes after are the forwarding tables the subnet manager computed without the element, " +
			"read from the fabric since it went down; the routes before are those in force before it went down"
		afterTopo = after.Topology()
	default:
		im.RouteModel = RoutesPredicted
		im.RouteNote = "predicted: routes that cross the element are moved to shortest paths avoiding it (each switch whose " +
			"route crossed it sends toward a neighbour one hop closer, keeping every route that does not cross it); the subnet " +
			"manager (OpenSM) computes its own tables when the element goes down and may choose otherwise: the real routes " +
			"after cannot be known before it happens. Once it is down this answer reads them from the fabric"
	}
	if tg.Kind != TargetNodes {
		im.TrafficNote = "each job's bytes attributed to the element in the window are split among its node pairs that cross it " +
			"in proportion to the pairs' bytes since the job started, and moved from those pairs' routes before onto their routes after"
	}
	// The load before: the running jobs' attributed bytes per direction.
	before := map[fabric.PortRef]uint64{}
	onElem := map[string]map[fabric.PortRef]uint64{} // job -> cut (or removed) port -> bytes
	jobTotal := map[string]uint64{}
	byJob := map[string][]store.LinkJobBytes{}
	for _, x := range in.Load {
		before[x.Port] += x.Bytes
		byJob[x.Job] = append(byJob[x.Job], x)
		if removed[x.Port] {
			if onElem[x.Job] == nil {
				onElem[x.Job] = map[fabric.PortRef]uint64{}
			}
			onElem[x.Job][x.Port] += x.Bytes
		}
		if n, ok := t.Node(x.Port.GUID); ok && n.Type != fabric.Switch {
			jobTotal[x.Job] += x.Bytes // each byte leaves one host port
		}
	}
	for _, l := range removedLinks {
		for _, p := range []fabric.PortRef{l.A, l.B} {
			im.Removed = append(im.Removed, dirLoad(t, p, before[p], im.Seconds))
		}
	}
	delta := map[fabric.PortRef]int64{}
	var moves []PairRoute
	// Destinations whose routes must be predicted.
	type pairRef struct {
		job  int
		i, j int // source and destination index in the job's matrix
		cut  fabric.PortRef
		hops []fabric.PortRef
	}
	var crossing []pairRef
	var cross *crossTest
	if tg.Kind != TargetNodes {
		cross = newCrossing(in.Before, removed)
	}
	for k := range in.Jobs {
		j := &in.Jobs[k]
		ji := JobImpact{Job: j.Summary.ID, User: j.Summary.User, Ranks: j.Summary.Ranks, Nodes: jobNodes(j), Start: j.Summary.Start, PairsFrom: j.PairsFrom}
		// Bytes through the element, each once: on the directions into a
		// switch (what leaves it came in), on both of a link's, on the
		// drained nodes' host links.
		for p, b := range onElem[ji.Job] {
			if cut[p] || tg.Kind == TargetNodes {
				ji.Bytes += b
			}
		}
		if tg.Kind == TargetNodes {
			drained := map[string]bool{}
			for _, n := range tg.Nodes {
				drained[n] = true
			}
			on := false
			for n, r := range j.RanksOn {
				if drained[n] {
					on = true
					ji.RanksAffected += r
				}
			}
			if !on {
				continue
			}
			ji.PairsCrossing = 0
			for a := range j.Names {
				for b := range j.Names {
					if a != b && (drained[j.Names[a]] || drained[j.Names[b]]) {
						ji.PairsCrossing++
					}
				}
			}
			for _, x := range byJob[ji.Job] {
				delta[x.Port] -= int64(x.Bytes)
			}
			ji.MovedBytes = jobTotal[ji.Job]
			im.MovedBytes += ji.MovedBytes
			im.Jobs = append(im.Jobs, ji)
			continue
		}
		n := len(j.Matrix.LIDs)
		affected := map[string]bool{}
		for a := range n {
			for b := range n {
				if a == b || !cross.crosses(j.Matrix.LIDs[a], j.Matrix.LIDs[b]) {
					continue
				}
				rt, err := in.Before.Path(j.Matrix.LIDs[a], j.Matrix.LIDs[b])
				if err != nil {
					im.errorf("job %s: %s -> %s before: %v", ji.Job, j.Names[a], j.Names[b], err)
					continue
				}
				hops := make([]fabric.PortRef, len(rt.Hops))
				var c fabric.PortRef
				crosses := false
				for h, hop := range rt.Hops {
					hops[h] = fabric.PortRef{GUID: hop.GUID, Port: hop.Port}
					if removed[hops[h]] {
						crosses = true
					}
					if cut[hops[h]] && c.GUID == 0 {
						c = hops[h]
					}
				}
				if !crosses {
					continue
				}
				ji.PairsCrossing++
				affected[j.Names[a]], affected[j.Names[b]] = true, true
				crossing = append(crossing, pairRef{job: k, i: a, j: b, cut: c, hops: hops})
			}
		}
		if ji.PairsCrossing == 0 && ji.Bytes == 0 {
			continue
		}
		for name := range affected {
			ji.RanksAffected += j.RanksOn[name]
		}
		im.Jobs = append(im.Jobs, ji)
	}
	if tg.Kind != TargetNodes && len(crossing) > 0 {
		if after == nil {
			var err error
			if afterTopo, err = Without(t, removedLinks); err != nil {
				return nil, err
			}
			var dsts []fabric.LID
			seen := map[fabric.LID]bool{}
			for _, c := range crossing {
				if d := in.Jobs[c.job].Matrix.LIDs[c.j]; !seen[d] {
					seen[d] = true
					dsts = append(dsts, d)
				}
			}
			after = fabric.NewRoutes(afterTopo, PredictTables(in.Before, afterTopo, dsts))
		}
		// Each job's bytes on a cut direction, split among its pairs
		// crossing it by their weights.
		type jc struct {
			job int
			cut fabric.PortRef
		}
		weight := map[jc]uint64{}
		for _, c := range crossing {
			j := &in.Jobs[c.job]
			weight[jc{c.job, c.cut}] += j.Matrix.Bytes[c.j*len(j.Matrix.LIDs)+c.i]
		}
		for _, c := range crossing {
			j := &in.Jobs[c.job]
			w := j.Matrix.Bytes[c.j*len(j.Matrix.LIDs)+c.i]
			total := weight[jc{c.job, c.cut}]
			b := onElem[j.Summary.ID][c.cut]
			var moved uint64
			if total > 0 && w > 0 {
				moved = uint64(float64(b) * float64(w) / float64(total))
			}
			pr := PairRoute{Job: j.Summary.ID, Src: j.Names[c.i], Dst: j.Names[c.j], SrcLID: j.Matrix.LIDs[c.i], DstLID: j.Matrix.LIDs[c.j],
				Bytes: moved, Before: c.hops, After: []fabric.PortRef{}}
			srcPort, ok1 := afterTopo.PortByLID(pr.SrcLID)
			dstPort, ok2 := afterTopo.PortByLID(pr.DstLID)
			var rt *fabric.Route
			var err error
			if ok1 && ok2 {
				rt, err = after.PathBetween(srcPort, dstPort)
			} else {
				err = fmt.Errorf("an end is no longer in the fabric")
			}
			if err == nil {
				for _, h := range rt.Hops {
					p := fabric.PortRef{GUID: h.GUID, Port: h.Port}
					if removed[p] {
						err = fmt.Errorf("the route after still crosses %s", p)
						break
					}
					pr.After = append(pr.After, p)
				}
			}
			for k := range im.Jobs {
				if im.Jobs[k].Job != pr.Job {
					continue
				}
				if err != nil {
					pr.Unroutable = err.Error()
					im.Jobs[k].Unroutable += moved
					im.UnroutableBytes += moved
				} else {
					im.Jobs[k].MovedBytes += moved
					im.MovedBytes += moved
				}
			}
			for _, p := range c.hops {
				delta[p] -= int64(moved)
			}
			if err == nil {
				for _, p := range pr.After {
					delta[p] += int64(moved)
				}
			}
			moves = append(moves, pr)
		}
	}
	// Loads after, and the changes.
	var hb, ha *DirLoad
	ports := map[fabric.PortRef]bool{}
	for p := range before {
		ports[p] = true
	}
	for p := range delta {
		ports[p] = true
	}
	for p := range ports {
		b := before[p]
		if b > 0 {
			d := dirLoad(t, p, b, im.Seconds)
			if hb == nil || heavier(&d, hb) {
				hb = &d
			}
		}
		if removed[p] {
			continue
		}
		a := max(0, int64(b)+delta[p])
		if a > 0 {
			d := dirLoad(t, p, uint64(a), im.Seconds)
			if afterTopo != nil {
				d = dirLoad(afterTopo, p, uint64(a), im.Seconds)
			}
			if ha == nil || heavier(&d, ha) {
				ha = &d
			}
		}
		if uint64(a) != b {
			ch := LoadChange{DirLoad: dirLoad(t, p, uint64(a), im.Seconds), Before: b, After: uint64(a), Delta: a - int64(b)}
			im.Changes = append(im.Changes, ch)
		}
	}
	im.HeaviestBefore, im.HeaviestAfter = hb, ha
	slices.SortFunc(im.Changes, func(x, y LoadChange) int {
		if c := cmp.Compare(abs64(y.Delta), abs64(x.Delta)); c != 0 {
			return c
		}
		return comparePort(x.From, y.From)
	})
	slices.SortFunc(moves, func(x, y PairRoute) int {
		if c := cmp.Compare(y.Bytes, x.Bytes); c != 0 {
			return c
		}
		if c := cmp.Compare(x.Job, y.Job); c != 0 {
			return c
		}
		if c := cmp.Compare(x.Src, y.Src); c != 0 {
			return c
		}
		return cmp.Compare(x.Dst, y.Dst)
	})
	im.PairsTotal = len(moves)
	if len(moves) > maxPairs {
		moves = moves[:maxPairs]
	}
	if moves != nil {
		im.Pairs = moves
	}
	slices.SortFunc(im.Jobs, func(x, y JobImpact) int {
		if c := cmp.Compare(y.Bytes, x.Bytes); c != 0 {
			return c
		}
		return cmp.Compare(x.Job, y.Job)
	})
	return im, nil
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func comparePort(a, b fabric.PortRef) int {
	if c := cmp.Compare(a.GUID, b.GUID); c != 0 {
		return c
	}
	return cmp.Compare(a.Port, b.Port)
}

// heavier orders directions by bytes, then by sending port.
func heavier(x, y *DirLoad) bool {
	if x.Bytes != y.Bytes {
		return x.Bytes > y.Bytes
	}
	return comparePort(x.From, y.From) < 0
}

func dirLoad(t *fabric.Topology, from fabric.PortRef, bytes uint64, seconds float64) DirLoad {
	d := DirLoad{From: from, Bytes: bytes, FromNode: describeNode(t, from.GUID), FromName: t.PortName(from)}
	if l, ok := t.LinkAt(from); ok {
		d.Link = l.ID()
		d.To, _ = t.Peer(from)
		d.ToNode = describeNode(t, d.To.GUID)
		d.ToName = t.PortName(d.To)
		if c := l.Capacity(); c > 0 && seconds > 0 {
			d.Utilization = 100 * float64(bytes) / (c * seconds)
		}
	}
	return d
}

func jobNodes(j *ImpactJob) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range j.Names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	for n := range j.RanksOn {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	if out == nil {
		out = []string{}
	}
	return out
}

// JobInput prepares a job for the impact: its cumulative node-to-node
// bytes by the node map, and its ranks per node.
func JobInput(j *store.Job, nm *analysis.NodeMap) ImpactJob {
	full := j.Full()
	iv, _ := analysis.NewJobCounter().Next(full, func(name string) (fabric.LID, bool) {
		if nm == nil {
			return 0, false
		}
		l, err := nm.LID(name)
		return l, err == nil
	}, nil)
	ij := ImpactJob{Summary: full.JobSummary, Matrix: iv.Matrix, Names: iv.Names, Unmapped: iv.Unmapped, RanksOn: map[string]int{}}
	for i := range full.Processes {
		ij.RanksOn[full.Processes[i].Node]++
	}
	// Nodes with ranks but no traffic yet are pairs too: their routes
	// cross the element as much as busy ones'.
	have := map[string]bool{}
	for _, n := range ij.Names {
		have[n] = true
	}
	var extra []string
	for n := range ij.RanksOn {
		if have[n] {
			continue
		}
		if nm != nil {
			if _, err := nm.LID(n); err == nil {
				extra = append(extra, n)
			}
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		old := len(ij.Names)
		n := old + len(extra)
		lids := append(slices.Clone(ij.Matrix.LIDs), make([]fabric.LID, len(extra))...)
		names := append(slices.Clone(ij.Names), extra...)
		for i, e := range extra {
			lids[old+i], _ = nm.LID(e)
		}
		bytes := make([]uint64, n*n)
		for d := range old {
			copy(bytes[d*n:d*n+old], ij.Matrix.Bytes[d*old:(d+1)*old])
		}
		ij.Matrix, ij.Names = analysis.Matrix{LIDs: lids, Bytes: bytes}, names
	}
	return ij
}
