// Package gpupath tells where a GPU job's bytes went, from what its agents
// reported (store.GPU, docs/gpu.md): per ordered rank pair and for the
// whole job, the bytes and messages of each path between host (H) and
// device (D) memory, inside a node and across nodes, and the kinds of
// buffer each MPI function used; and the job's NCCL operations summed over
// its ranks. Pure functions of a job.
package gpupath

import (
	"cmp"
	"maps"
	"slices"

	"github.com/netloom/netloom/internal/store"
)

// Source says where the buffer figures come from.
const Source = "agent buffer probe (cuPointerGetAttributes)"

// Paths, sender's memory -> receiver's memory. H is host memory (pageable
// or pinned), D device memory (device or managed).
const (
	HH = "H->H"
	HD = "H->D"
	DH = "D->H"
	DD = "D->D"
	// One side's figures where the joint split is not known: the
	// sender's (H->?, D->?) or the receiver's (?->H, ?->D).
	HAny = "H->?"
	DAny = "D->?"
	AnyH = "?->H"
	AnyD = "?->D"
)

// PathOrder is the order of paths in tables.
var PathOrder = []string{HH, HD, DH, DD, HAny, DAny, AnyH, AnyD}

// How a pair's bytes split into paths.
const (
	// Exact: both sides counted the same messages and bytes and one side
	// used a single kind (H or D), so the other side's split is the joint
	// one.
	Exact = "exact"
	// Mixed: both sides used both kinds; which sender bytes went to
	// which receiver kind is not determined. Each side's figures are
	// given (the two count the same messages).
	Mixed = "mixed"
	// ReceiverUnknown: the receiver has no received_into row for the
	// sender (not probed, its receives named MPI_ANY_SOURCE and were
	// never resolved to a rank, or the sender was not among the busiest
	// peers its agent sent rows for).
	ReceiverUnknown = "receiver unknown"
	// SenderUnknown: the sender has no sent_from row for the receiver
	// (not probed, or not among its agent's busiest peers).
	SenderUnknown = "sender unknown"
	// CountsDiffer: the two sides did not count the same point-to-point
	// messages and bytes (a receive posted larger than the message, with
	// MPI_ANY_SOURCE, cancelled, or in flight at the snapshot): which of
	// the sender's bytes went into which receiver kind is not determined.
	// Each side's figures are given.
	CountsDiffer = "counts differ"
)

// Localities of a pair.
const (
	IntraNode   = "intra-node"
	InterNode   = "inter-node"
	NodeUnknown = "unknown" // a rank's node was not reported
	AllNodes    = "all"     // path totals over localities
)

var localityOrder = []string{IntraNode, InterNode, NodeUnknown, AllNodes}

// Side is one side of a pair by memory: Host is pageable and pinned,
// Device device and managed.
type Side struct {
	Host   store.Traffic `json:"host"`
	Device store.Traffic `json:"device"`
}

func sideOf(k store.BufferKinds) Side { return Side{Host: k.OnHost(), Device: k.OnDevice()} }

// Total is both kinds together.
func (s Side) Total() store.Traffic { return s.Host.Add(s.Device) }

func some(t store.Traffic) bool { return t.Bytes > 0 || t.Msgs > 0 }

// kind is 'H' or 'D' when the side used one kind only, 0 when both.
func (s Side) kind() byte {
	switch {
	case some(s.Host) && some(s.Device):
		return 0
	case some(s.Device):
		return 'D'
	}
	return 'H'
}

// PathTraffic is a pair's traffic per path, when its split is exact.
type PathTraffic struct {
	HH store.Traffic `json:"H->H"`
	HD store.Traffic `json:"H->D"`
	DH store.Traffic `json:"D->H"`
	DD store.Traffic `json:"D->D"`
}

func (p *PathTraffic) cell(from, to byte) *store.Traffic {
	switch {
	case from == 'H' && to == 'H':
		return &p.HH
	case from == 'H':
		return &p.HD
	case to == 'H':
		return &p.DH
	}
	return &p.DD
}

// Pair is what one rank (From) sent another (To).
type Pair struct {
	From     int    `json:"from"`
	To       int    `json:"to"`
	Locality string `json:"locality"`
	// Sender is From's sent_from row for To; Receiver To's received_into
	// row for From; null when unknown.
	Sender   *Side  `json:"sender"`
	Receiver *Side  `json:"receiver"`
	Split    string `json:"split"`
	Exact    bool   `json:"exact"`
	// Paths is the joint split when exact: the counts of the side that
	// used both kinds (the sender's when each used one).
	Paths *PathTraffic `json:"paths,omitempty"`
}

// bytes is the larger of the sides' bytes (for ordering pairs).
func (p *Pair) bytes() uint64 {
	var b uint64
	if p.Sender != nil {
		b = p.Sender.Total().Bytes
	}
	if p.Receiver != nil {
		b = max(b, p.Receiver.Total().Bytes)
	}
	return b
}

// PathRow is the job's traffic on one path, in one locality, split one
// way. Rows of a mixed split give each side's figures for the same
// messages (H->? and D->? the sender's, ?->H and ?->D the receiver's).
type PathRow struct {
	Path     string `json:"path"`
	Locality string `json:"locality"`
	Split    string `json:"split"`
	Exact    bool   `json:"exact"`
	store.Traffic
}

// FunctionKinds is one MPI function's buffers by kind, summed over ranks.
type FunctionKinds struct {
	Name  string            `json:"name"`
	Ranks int               `json:"ranks"` // ranks whose probe saw it
	Send  store.BufferKinds `json:"send"`
	Recv  store.BufferKinds `json:"recv"`
}

// ProbeError is one reason the probe failed, and on how many ranks.
type ProbeError struct {
	Error     string `json:"error"`
	Ranks     int    `json:"ranks"`
	FirstRank int    `json:"first_rank"`
}

// Buffers is a job's MPI buffers by kind and path.
type Buffers struct {
	Source      string `json:"source"`
	Ranks       int    `json:"ranks"`        // ranks reporting
	ProbedRanks int    `json:"probed_ranks"` // ranks whose buffers were probed
	// NotProbed says why, when no rank was probed.
	NotProbed   string       `json:"not_probed,omitempty"`
	ProbeErrors []ProbeError `json:"probe_errors,omitempty"`
	// Paths per locality; PathTotals over all localities (locality
	// "all"). Zero rows are left out.
	Paths      []PathRow `json:"paths"`
	PathTotals []PathRow `json:"path_totals"`
	// Pairs, the largest first, at most as many as asked; PairsTotal
	// counts them all.
	Pairs      []Pair          `json:"pairs"`
	PairsTotal int             `json:"pairs_total"`
	Functions  []FunctionKinds `json:"functions"`
}

// Why no rank was probed.
const (
	NoCUDA      = "no rank had CUDA loaded"
	NCCLOnly    = "the ranks reported NCCL operations only: no MPI agent probed their buffers"
	probeFailed = "CUDA was loaded but the probe failed: "
)

// Summary is a job's GPU side: GET /jobs/{job}/gpu, `netloom report`.
type Summary struct {
	Buffers Buffers `json:"buffers"`
	NCCL    NCCL    `json:"nccl"`
}

// Summarize computes a job's summary, keeping at most maxPairs pairs and
// NCCL peer rows, the largest (negative: all).
func Summarize(j *store.Job, maxPairs int) *Summary {
	j = j.Full()
	return &Summary{Buffers: buffers(j, maxPairs), NCCL: nccl(j, maxPairs)}
}

func buffers(j *store.Job, maxPairs int) Buffers {
	b := Buffers{Source: Source, Ranks: len(j.Processes), Paths: []PathRow{}, PathTotals: []PathRow{}, Pairs: []Pair{}, Functions: []FunctionKinds{}}
	gpus := map[int][]store.GPUPeer{}
	fns := map[string]*FunctionKinds{}
	errs := map[string]*ProbeError{}
	anySection := false
	for i := range j.Processes {
		p := &j.Processes[i]
		g := p.GPU
		if g == nil {
			continue
		}
		anySection = true
		if g.ProbeError != "" {
			e := errs[g.ProbeError]
			if e == nil {
				e = &ProbeError{Error: g.ProbeError, FirstRank: p.Rank}
				errs[g.ProbeError] = e
			}
			e.Ranks++
			e.FirstRank = min(e.FirstRank, p.Rank)
		}
		if !g.Probed {
			continue
		}
		b.ProbedRanks++
		peers := g.Peers
		if !slices.IsSortedFunc(peers, byPeer) {
			peers = slices.SortedFunc(slices.Values(peers), byPeer)
		}
		gpus[p.Rank] = peers
		seen := map[string]bool{}
		for _, f := range g.Functions {
			t := fns[f.Name]
			if t == nil {
				t = &FunctionKinds{Name: f.Name}
				fns[f.Name] = t
			}
			if !seen[f.Name] {
				seen[f.Name] = true
				t.Ranks++
			}
			t.Send, t.Recv = t.Send.Add(f.Send), t.Recv.Add(f.Recv)
		}
	}
	for _, e := range errs {
		b.ProbeErrors = append(b.ProbeErrors, *e)
	}
	slices.SortFunc(b.ProbeErrors, func(x, y ProbeError) int {
		return cmp.Or(cmp.Compare(y.Ranks, x.Ranks), cmp.Compare(x.FirstRank, y.FirstRank))
	})
	if b.ProbedRanks == 0 {
		switch {
		case len(b.ProbeErrors) > 0:
			b.NotProbed = probeFailed + b.ProbeErrors[0].Error
		case anySection:
			b.NotProbed = NCCLOnly
		default:
			b.NotProbed = NoCUDA
		}
	}
	for _, f := range fns {
		b.Functions = append(b.Functions, *f)
	}
	slices.SortFunc(b.Functions, func(x, y FunctionKinds) int {
		return cmp.Or(cmp.Compare(y.Send.Total().Bytes+y.Recv.Total().Bytes, x.Send.Total().Bytes+x.Recv.Total().Bytes), cmp.Compare(x.Name, y.Name))
	})

	// Processes are in rank order (store.Job).
	node := func(rank int) string {
		i, ok := slices.BinarySearchFunc(j.Processes, rank, func(p store.Process, r int) int { return cmp.Compare(p.Rank, r) })
		if !ok {
			return ""
		}
		return j.Processes[i].Node
	}
	locality := func(from, to int) string {
		a, c := node(from), node(to)
		switch {
		case a == "" || c == "":
			return NodeUnknown
		case a == c:
			return IntraNode
		}
		return InterNode
	}
	// The pairs: each sender's rows, then receivers' rows whose sender
	// has none for them.
	var pairs []Pair
	for _, a := range slices.Sorted(maps.Keys(gpus)) {
		for _, row := range gpus[a] {
			if !some(row.SentFrom.Total()) {
				continue
			}
			s := sideOf(row.SentFrom)
			var r *Side
			if x := find(gpus[row.Peer], a); x != nil && some(x.ReceivedInto.Total()) {
				rs := sideOf(x.ReceivedInto)
				r = &rs
			}
			pairs = append(pairs, pair(a, row.Peer, locality(a, row.Peer), &s, r))
		}
	}
	for _, c := range slices.Sorted(maps.Keys(gpus)) {
		for _, row := range gpus[c] {
			if !some(row.ReceivedInto.Total()) {
				continue
			}
			if x := find(gpus[row.Peer], c); x != nil && some(x.SentFrom.Total()) {
				continue // counted with its sender
			}
			r := sideOf(row.ReceivedInto)
			pairs = append(pairs, pair(row.Peer, c, locality(row.Peer, c), nil, &r))
		}
	}
	// The path table.
	type key struct{ path, locality, split string }
	sums := map[key]store.Traffic{}
	put := func(path, loc, split string, t store.Traffic) {
		if some(t) {
			sums[key{path, loc, split}] = sums[key{path, loc, split}].Add(t)
			sums[key{path, AllNodes, split}] = sums[key{path, AllNodes, split}].Add(t)
		}
	}
	for i := range pairs {
		p := &pairs[i]
		switch p.Split {
		case Exact:
			put(HH, p.Locality, Exact, p.Paths.HH)
			put(HD, p.Locality, Exact, p.Paths.HD)
			put(DH, p.Locality, Exact, p.Paths.DH)
			put(DD, p.Locality, Exact, p.Paths.DD)
			continue
		}
		if p.Sender != nil {
			put(HAny, p.Locality, p.Split, p.Sender.Host)
			put(DAny, p.Locality, p.Split, p.Sender.Device)
		}
		if p.Receiver != nil {
			put(AnyH, p.Locality, p.Split, p.Receiver.Host)
			put(AnyD, p.Locality, p.Split, p.Receiver.Device)
		}
	}
	for k, t := range sums {
		row := PathRow{Path: k.path, Locality: k.locality, Split: k.split, Exact: k.split == Exact, Traffic: t}
		if k.locality == AllNodes {
			b.PathTotals = append(b.PathTotals, row)
		} else {
			b.Paths = append(b.Paths, row)
		}
	}
	order := func(x, y PathRow) int {
		return cmp.Or(cmp.Compare(slices.Index(PathOrder, x.Path), slices.Index(PathOrder, y.Path)),
			cmp.Compare(slices.Index(localityOrder, x.Locality), slices.Index(localityOrder, y.Locality)), cmp.Compare(x.Split, y.Split))
	}
	slices.SortFunc(b.Paths, order)
	slices.SortFunc(b.PathTotals, order)

	slices.SortStableFunc(pairs, func(x, y Pair) int { return cmp.Compare(y.bytes(), x.bytes()) })
	b.PairsTotal = len(pairs)
	if maxPairs >= 0 && len(pairs) > maxPairs {
		pairs = pairs[:maxPairs]
	}
	if len(pairs) > 0 {
		b.Pairs = pairs
	}
	return b
}

// pair splits what from sent to into paths (s and r nil when unknown).
func pair(from, to int, loc string, s, r *Side) Pair {
	p := Pair{From: from, To: to, Locality: loc, Sender: s, Receiver: r}
	switch {
	case s == nil:
		p.Split = SenderUnknown
	case r == nil:
		p.Split = ReceiverUnknown
	default:
		sk, rk := s.kind(), r.kind()
		if s.Total() != r.Total() {
			p.Split = CountsDiffer
			break
		}
		if sk == 0 && rk == 0 {
			p.Split = Mixed
			break
		}
		p.Split, p.Exact, p.Paths = Exact, true, &PathTraffic{}
		switch {
		case sk != 0 && rk != 0: // one cell: the sender's count
			*p.Paths.cell(sk, rk) = s.Total()
		case sk != 0: // the receiver's split
			*p.Paths.cell(sk, 'H') = r.Host
			*p.Paths.cell(sk, 'D') = r.Device
		default: // the sender's split
			*p.Paths.cell('H', rk) = s.Host
			*p.Paths.cell('D', rk) = s.Device
		}
	}
	return p
}

func byPeer(a, b store.GPUPeer) int { return cmp.Compare(a.Peer, b.Peer) }

// find returns the row of peer in rows sorted by peer, or nil.
func find(rows []store.GPUPeer, peer int) *store.GPUPeer {
	i, ok := slices.BinarySearchFunc(rows, peer, func(r store.GPUPeer, p int) int { return cmp.Compare(r.Peer, p) })
	if !ok {
		return nil
	}
	return &rows[i]
}
