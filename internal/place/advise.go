package place

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/netloom/netloom/internal/sched"
	"github.com/netloom/netloom/internal/store"
)

// RankPlace is where one rank goes.
type RankPlace struct {
	Rank int    `json:"rank"`
	Node string `json:"node"`
	Core int    `json:"core"`
}

// Gain is how much less a placement costs than another, in percent of
// the other's cost (negative: it costs more).
type Gain struct {
	InterNodeBytes float64 `json:"inter_node_bytes_pct"`
	ByteHops       float64 `json:"byte_hops_pct"`
	HeaviestLink   float64 `json:"heaviest_link_pct"`
}

func gain(advice, than *Cost) *Gain {
	if advice == nil || than == nil {
		return nil
	}
	pct := func(a, b uint64) float64 {
		if b == 0 {
			return 0
		}
		return 100 * (float64(b) - float64(a)) / float64(b)
	}
	return &Gain{InterNodeBytes: pct(advice.InterNodeBytes, than.InterNodeBytes), ByteHops: pct(advice.ByteHops, than.ByteHops),
		HeaviestLink: pct(advice.HeaviestBytes(), than.HeaviestBytes())}
}

// methodText names a winning candidate in words.
func methodText(method string) string {
	switch method {
	case "scotch":
		return "Scotch's mapping"
	case "block":
		return "the block placement"
	}
	return method
}

// Advice is the answer: where each rank should go, and what the job's
// communication costs there, as it ran, and under the usual placements.
type Advice struct {
	Job   string `json:"job,omitempty"`
	Ranks int    `json:"ranks"`
	Nodes []Node `json:"nodes"`
	// Method says which placement won: "scotch" (the mapping), "block"
	// (filling the nodes in order did as well), or "as_ran" (nothing
	// better was found).
	Method string `json:"method"`
	// NothingToGain: the job as it ran costs no more than the advice.
	NothingToGain bool   `json:"nothing_to_gain"`
	Reason        string `json:"reason,omitempty"`
	// Costs of the advice, the job as it ran (nil when its nodes are not
	// all on the fabric; AsRanUnknown says why), and the baselines.
	Advice       *Cost            `json:"advice"`
	AsRan        *Cost            `json:"as_ran"`
	AsRanUnknown string           `json:"as_ran_unknown,omitempty"`
	RoundRobin   *Cost            `json:"round_robin"`
	Block        *Cost            `json:"block"`
	Random       *Cost            `json:"random"`
	RandomSeed   uint64           `json:"random_seed"`
	Gain         map[string]*Gain `json:"gain"`
	// TrafficBytes is the rank-to-rank bytes the advice is based on;
	// PeersTruncated says some ranks sent only their top peers.
	TrafficBytes   uint64      `json:"traffic_bytes"`
	PeersTruncated bool        `json:"peers_truncated"`
	Seconds        float64     `json:"seconds"`
	Mapping        []RankPlace `json:"mapping"`
	// FabricHidden: the link directions were left out (HideFabric).
	FabricHidden bool `json:"fabric_hidden,omitempty"`
	// Oversubscribed lists the nodes the advice puts more ranks on than
	// they have cores (ranks then share cores: a rankfile names a core
	// twice, which Open MPI 4.1 runs as it is); AsRanOversubscribed the
	// nodes given that the job as it ran did (their cores as given).
	Oversubscribed      []Oversubscribed `json:"oversubscribed,omitempty"`
	AsRanOversubscribed []Oversubscribed `json:"as_ran_oversubscribed,omitempty"`
}

// Oversubscribed is a node holding more ranks than cores.
type Oversubscribed struct {
	Node  string `json:"node"`
	Ranks int    `json:"ranks"`
	Cores int    `json:"cores"`
}

// oversubscribed lists the nodes (of the first len(nodes) indices) p puts
// more ranks on than they have cores, and how many ranks in all are
// beyond the cores.
func oversubscribed(p Placement, nodes []Node) ([]Oversubscribed, int) {
	held := make([]int, len(nodes))
	for _, ni := range p.Node {
		if int(ni) < len(nodes) {
			held[ni]++
		}
	}
	var out []Oversubscribed
	excess := 0
	for i, h := range held {
		if h > nodes[i].Cores {
			out = append(out, Oversubscribed{Node: nodes[i].Name, Ranks: h, Cores: nodes[i].Cores})
			excess += h - nodes[i].Cores
		}
	}
	return out, excess
}

// HideFabric leaves out of the advice what only an administrator may see
// of the fabric (docs/security.md): which link directions carry the load
// (their switches' GUIDs, ports and names, and so the routes between the
// nodes) and the list of loaded directions. What is left is the asker's
// own question and its answer: the nodes given, the mapping, and every
// figure (bytes, bytes x hops, the heaviest direction's load, gains),
// which say how far apart the nodes are but not through which switches.
func (a *Advice) HideFabric() {
	a.FabricHidden = true
	for _, c := range []*Cost{a.Advice, a.AsRan, a.RoundRobin, a.Block, a.Random} {
		if c == nil {
			continue
		}
		c.Links = nil
		if h := c.HeaviestLink; h != nil {
			c.HeaviestLink = &LinkLoad{Bytes: h.Bytes, JobBytes: h.JobBytes}
		}
	}
}

// InputError is a request that cannot be answered as asked (too few
// cores, nodes not on the fabric): the asker's to fix.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

func inputErr(format string, a ...any) error { return &InputError{fmt.Errorf(format, a...)} }

// Advise computes placement advice for req on fab.
func Advise(fab *Fabric, req Request) (*Advice, error) {
	start := time.Now()
	t := &req.Traffic
	R := t.Ranks
	if R <= 0 {
		return nil, inputErr("the job has no ranks")
	}
	if len(req.Nodes) == 0 {
		return nil, inputErr("no nodes to place on")
	}
	cores, slots, seen := 0, 0, map[string]bool{}
	for _, n := range req.Nodes {
		if n.Cores <= 0 {
			return nil, inputErr("node %s: %d cores", sched.Quote(n.Name), n.Cores)
		}
		if seen[n.Name] {
			return nil, inputErr("node %s is listed twice", sched.Quote(n.Name))
		}
		seen[n.Name] = true
		cores += n.Cores
		slots += n.slots()
	}
	if slots < R {
		if slots > cores {
			return nil, inputErr("the %d nodes have %d cores, and room for %d ranks as the job ran, for %d ranks: give more nodes or more cores per node", len(req.Nodes), cores, slots, R)
		}
		return nil, inputErr("the %d nodes have %d cores for %d ranks: give more nodes or more cores per node", len(req.Nodes), cores, R)
	}
	if req.AsRan != nil && len(req.AsRan) != R {
		return nil, fmt.Errorf("as-ran nodes: %d for %d ranks", len(req.AsRan), R)
	}
	for i := range t.Bytes {
		if t.Src[i] < 0 || int(t.Src[i]) >= R || t.Dst[i] < 0 || int(t.Dst[i]) >= R {
			return nil, fmt.Errorf("traffic entry %d: ranks %d -> %d outside 0..%d", i, t.Src[i], t.Dst[i], R-1)
		}
	}

	names := make([]string, len(req.Nodes))
	for i, n := range req.Nodes {
		names[i] = n.Name
	}
	ev, err := newEvaluator(fab, names, t, req.Background)
	var nf *errNotOnFabric
	if errors.As(err, &nf) {
		return nil, &InputError{fmt.Errorf("nodes not on the fabric: %w", err)}
	} else if err != nil {
		return nil, err
	}
	a := &Advice{Ranks: R, Nodes: req.Nodes, RandomSeed: req.Seed, TrafficBytes: t.Total(), PeersTruncated: t.Truncated,
		Gain: map[string]*Gain{}}

	// The job as it ran, judged over the target nodes plus its own.
	var asRan *Placement
	asRanFits := false
	asRanExcess := 0 // ranks beyond the cores of the nodes given, as it ran
	if req.AsRan != nil {
		union := slices.Clone(names)
		idx := map[string]int32{}
		for i, n := range names {
			idx[n] = int32(i)
		}
		p := Placement{Node: make([]int32, R), Core: make([]int32, R)}
		missing := 0
		for r, n := range req.AsRan {
			if n == "" {
				missing++
				continue
			}
			i, ok := idx[n]
			if !ok {
				i = int32(len(union))
				idx[n] = i
				union = append(union, n)
			}
			p.Node[r] = i
		}
		if missing == 0 {
			a.AsRanOversubscribed, asRanExcess = oversubscribed(p, req.Nodes)
		}
		switch {
		case missing > 0:
			a.AsRanUnknown = fmt.Sprintf("%d ranks did not report their node", missing)
		case len(union) > len(names):
			uev, err := newEvaluator(fab, union, t, req.Background)
			if errors.As(err, &nf) {
				a.AsRanUnknown = fmt.Sprintf("the nodes it ran on are not all on the fabric: %v", err)
			} else if err != nil {
				return nil, err
			} else if a.AsRan, err = uev.cost(p, true); err != nil {
				return nil, err
			}
		default:
			asRan = &p
			if a.AsRan, err = ev.cost(p, true); err != nil {
				return nil, err
			}
			asRanFits = true
			used := make([]int, len(names))
			for r, ni := range p.Node {
				p.Core[r] = int32(used[ni])
				used[ni]++
			}
			for i, u := range used {
				asRanFits = asRanFits && u <= req.Nodes[i].slots()
			}
		}
	}

	h := buildHierarchy(ev.hops, len(names))
	type candidate struct {
		name   string
		p      Placement
		c      *Cost
		excess int // ranks beyond the nodes' cores
	}
	var cands []candidate
	if len(names) > 1 && len(t.Bytes) > 0 {
		p, err := scotchPlacement(ev, req.Nodes, h)
		if err != nil {
			return nil, err
		}
		cands = append(cands, candidate{name: "scotch", p: p})
	}
	block := blockPlacement(R, req.Nodes)
	cands = append(cands, candidate{name: "block", p: block})
	if asRanFits {
		cands = append(cands, candidate{name: "as_ran", p: *asRan})
	}
	for i := range cands {
		if cands[i].c, err = ev.cost(cands[i].p, true); err != nil {
			return nil, err
		}
		_, cands[i].excess = oversubscribed(cands[i].p, req.Nodes)
	}
	// Fewer ranks sharing cores first (a placement that fits the cores
	// beats one that oversubscribes them, whatever its traffic), then
	// the cost.
	best := 0
	for i, c := range cands {
		if b := cands[best]; c.excess < b.excess || c.excess == b.excess && c.c.better(b.c) {
			best = i
		}
	}
	// Ties go to the earlier candidate: Scotch, then block, then as ran.
	win := cands[best]
	a.Method, a.Advice = win.name, win.c
	if a.Block, err = ev.cost(block, false); err != nil {
		return nil, err
	}
	if a.RoundRobin, err = ev.cost(roundRobinPlacement(R, req.Nodes), false); err != nil {
		return nil, err
	}
	if a.Random, err = ev.cost(randomPlacement(R, req.Nodes, req.Seed), false); err != nil {
		return nil, err
	}
	if a.AsRan != nil {
		a.Gain["as_ran"] = gain(a.Advice, a.AsRan)
		if win.excess >= asRanExcess && !a.Advice.better(a.AsRan) {
			a.NothingToGain = true
			switch {
			case a.AsRan.InterNodeBytes == 0:
				a.Reason = "all of the job's traffic stayed inside its nodes"
			case win.name == "as_ran":
				a.Reason = "no placement on these nodes found costs less than the job as it ran"
			case !a.AsRan.better(a.Advice):
				// Neither is cheaper: the best placement found ties the
				// job as it ran on every figure of the cost model.
				a.Reason = fmt.Sprintf("the best placement found on these nodes (%s) ties the job as it ran: the same inter-node bytes, bytes x hops and heaviest link", methodText(win.name))
			default:
				a.Reason = "the job as it ran costs less than any placement found on these nodes"
			}
		}
	} else if a.Advice.InterNodeBytes == 0 && a.TrafficBytes == 0 {
		a.NothingToGain, a.Reason = true, "the job sent no rank-to-rank traffic"
	}
	a.Gain["round_robin"] = gain(a.Advice, a.RoundRobin)
	a.Gain["block"] = gain(a.Advice, a.Block)
	a.Gain["random"] = gain(a.Advice, a.Random)
	// A slot beyond the node's cores shares a core: the rankfile names
	// only cores the node has.
	a.Mapping = make([]RankPlace, R)
	for r := range R {
		ni, core := win.p.Node[r], int(win.p.Core[r])
		if core >= 0 {
			core %= req.Nodes[ni].Cores
		}
		a.Mapping[r] = RankPlace{Rank: r, Node: names[ni], Core: core}
	}
	a.Oversubscribed, _ = oversubscribed(win.p, req.Nodes)
	a.Seconds = time.Since(start).Seconds()
	return a, nil
}

// FromJob reads a job's rank-to-rank traffic (all classes) and each
// rank's node as it ran.
func FromJob(j *store.Job) (Traffic, []string, error) {
	j = j.Full()
	R := j.Ranks
	if R <= 0 {
		return Traffic{}, nil, fmt.Errorf("job %s: no ranks reported", j.ID)
	}
	t := Traffic{Ranks: R}
	asRan := make([]string, R)
	for i := range j.Processes {
		p := &j.Processes[i]
		if p.Rank < 0 || p.Rank >= R {
			continue
		}
		asRan[p.Rank] = p.Node
		t.Truncated = t.Truncated || p.PeersTruncated
		for peer, cl := range p.Peers.Traffic() {
			if peer >= 0 && peer < R {
				t.Add(p.Rank, peer, cl.Total().Bytes)
			}
		}
	}
	return t, asRan, nil
}

// JobNodes lists the nodes a job ran on (in rank order of first use) with
// the ranks each held.
func JobNodes(asRan []string) []Node {
	idx := map[string]int{}
	var out []Node
	for _, n := range asRan {
		if n == "" {
			continue
		}
		i, ok := idx[n]
		if !ok {
			i = len(out)
			idx[n] = i
			out = append(out, Node{Name: n})
		}
		out[i].Cores++
	}
	return out
}

// NodesOf is the node of each of a job's ranks as the advice places them,
// for a replay of the job so placed (netloom place, the API's model).
func (a *Advice) NodesOf(ranks int) ([]string, error) {
	out := make([]string, ranks)
	for _, m := range a.Mapping {
		if m.Rank >= 0 && m.Rank < ranks {
			out[m.Rank] = m.Node
		}
	}
	if len(a.Mapping) != ranks || slices.Contains(out, "") {
		return nil, fmt.Errorf("the traces hold %d ranks, the advice places %d", ranks, len(a.Mapping))
	}
	return out, nil
}
