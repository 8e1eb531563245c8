package api

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/sflow"
	"github.com/netloom/netloom/internal/store"
)

// Attribution by what was seen (docs/sflow.md, issue 44): where the
// switches' sFlow samples show which equal-cost path a job's host pair
// took, the pair's bytes are split by the observed shares instead of
// evenly; ECMP collisions are the flows that share an uplink while an
// equal-cost uplink of the same switch carries less.

// FlowMatch is what a sampled flow's connection tells of it: the job, its
// user and the rank pair (internal/flowjobs' Lookup, from the ranks'
// reported connections).
type FlowMatch struct {
	Job, User        string
	SrcRank, DstRank int
}

// ObservedOptions feed attribution by observed shares. Nil functions turn
// the part off: without Flows every pair keeps the even split.
type ObservedOptions struct {
	// Flows are the flows the sFlow collector sampled over [from, to],
	// every direction.
	Flows func(from, to time.Time) []sflow.DirFlow
	// Lookup maps a flow to a job's rank pair by the connections its
	// ranks reported; where it does not match, flows are mapped by host
	// address (the address a switch delivered them to).
	Lookup func(k sflow.FlowKey, at time.Time) (FlowMatch, bool)
}

// Route models of one direction's split (route_model per direction).
const (
	ModelObserved = "sflow-observed"
	ModelEven     = "ecmp-even"
)

// splitModel says, per direction, how the bytes of pairs with several
// equal-cost paths were split over them: by the shares sFlow observed,
// with the samples behind them and sFlow's 95% bound on the error, or
// evenly. Empty on directions no pair reaches over a choice of paths.
type splitModel struct {
	RouteModel string `json:"route_model,omitempty"`
	// Samples: the job's (the jobs') samples behind the observed shares.
	Samples uint64 `json:"split_samples,omitempty"`
	// ErrorPct: sFlow's bound on the relative error at 95% for Samples,
	// 196·sqrt(1/n) %.
	ErrorPct *float64 `json:"split_error_pct,omitempty"`
	// ObservedPct: the part of the direction's ECMP-split bytes split by
	// observed shares (100: all; 0: all evenly).
	ObservedPct *float64 `json:"split_observed_pct,omitempty"`
}

// splitTally is what a direction's ECMP-split bytes were split by.
type splitTally struct {
	observed, even uint64 // bytes
	samples        uint64
	group          uint64 // where samples is 0: the group's samples
	ecmp           bool
}

func (t *splitTally) add(u splitTally) {
	t.observed += u.observed
	t.even += u.even
	t.samples += u.samples
	t.group = max(t.group, u.group)
	t.ecmp = t.ecmp || u.ecmp
}

func (t splitTally) model() splitModel {
	if !t.ecmp {
		return splitModel{}
	}
	if t.observed == 0 && t.samples == 0 && t.group == 0 {
		return splitModel{RouteModel: ModelEven}
	}
	m := splitModel{Samples: t.samples}
	obs := 100.0
	if sum := t.observed + t.even; sum > 0 {
		obs = 100 * float64(t.observed) / float64(sum)
	}
	m.ObservedPct = &obs
	if t.samples == 0 {
		m.RouteModel = fmt.Sprintf("%s (0 samples here of %d in its equal-cost group)", ModelObserved, t.group)
	} else {
		e := 100 * sflow.RelError95(t.samples)
		m.ErrorPct = &e
		m.RouteModel = fmt.Sprintf("%s (%d samples, ±%.1f%%)", ModelObserved, t.samples, e)
	}
	if t.even > 0 {
		m.RouteModel += fmt.Sprintf(" for %.0f%% of the bytes, %s for the rest", obs, ModelEven)
	}
	return m
}

// obsFlow is a sampled flow mapped onto hosts and, where it could be, a
// job's rank pair.
type obsFlow struct {
	sflow.DirFlow
	src, dst         fabric.LID // 0: unknown
	job, user        string     // "": other traffic
	srcRank, dstRank int        // -1: not known (mapped by host)
	ambiguous        bool       // its hosts carry several jobs' traffic
}

type hostPair struct{ s, d fabric.LID }

// portWeight is what was sampled of a flow set leaving one port.
type portWeight struct{ bytes, samples uint64 }

// observation is what sFlow saw over one range, for one request.
type observation struct {
	// mu guards what the methods fill in as asked (split, affected,
	// records): apply, dirModel and collisions lock it.
	mu       *sync.Mutex
	a        *attribAPI
	topo     *fabric.Topology
	routes   *fabric.Routes
	nodes    NodeMapper
	from, to time.Time
	flows    []obsFlow
	// seen[job][pair][direction]: the job's sampled bytes of the pair.
	seen map[string]map[hostPair]map[fabric.PortRef]portWeight
	// split[job][direction]: the job's bytes as split by observation,
	// less as split evenly, and how; filled by jobSplit.
	split map[string]map[fabric.PortRef]*dirSplit
	// affected caches whether a direction carries some pair's bytes over
	// a choice of equal-cost paths.
	affected map[fabric.PortRef]bool
	records  map[string]*store.Job
}

type dirSplit struct {
	delta int64 // observed less even
	tally splitTally
}

// observe reads what sFlow sampled over [from, to] and maps it onto hosts
// and jobs; nil where no route is a model of equal-cost paths, for a past
// fabric (the samples are the live collector's), or while there are no
// routes or node map yet. Without a collector or samples it
// observes nothing, and says so: every pair keeps the even split.
func (a *attribAPI) observe(ctx context.Context, t *fabric.Topology, from, to time.Time) (*observation, error) {
	if t.RouteModel() == "" || a.opt.Nodes == nil {
		return nil, nil
	}
	// One answer asks for each link it shows (why: up to its limit):
	// what was seen over a range is read once a second at most.
	key := obsKey{a: a, t: t, from: from.UnixNano(), to: to.UnixNano()}
	now := time.Now()
	obsCache.Lock()
	if c, ok := obsCache.m[key]; ok && now.Sub(c.at) < time.Second {
		obsCache.Unlock()
		return c.o, nil
	}
	obsCache.Unlock()
	o, err := a.observeNow(ctx, t, from, to)
	if err != nil || o == nil {
		return o, err
	}
	obsCache.Lock()
	for k, c := range obsCache.m {
		if now.Sub(c.at) >= time.Second {
			delete(obsCache.m, k)
		}
	}
	obsCache.m[key] = obsEntry{o: o, at: now}
	obsCache.Unlock()
	return o, nil
}

type obsKey struct {
	a        *attribAPI
	t        *fabric.Topology
	from, to int64
}

type obsEntry struct {
	o  *observation
	at time.Time
}

// obsCache keeps each range's observation for a second.
var obsCache = struct {
	sync.Mutex
	m map[obsKey]obsEntry
}{m: map[obsKey]obsEntry{}}

// observeNow is observe without the cache.
func (a *attribAPI) observeNow(ctx context.Context, t *fabric.Topology, from, to time.Time) (*observation, error) {
	// Samples are the live collector's: the live fabric's routes.
	st := a.s.opt.State()
	if st == nil || st.Topology != t || st.Routes == nil {
		return nil, nil
	}
	routes, nodes := st.Routes, a.opt.Nodes()
	if nodes == nil {
		return nil, nil
	}
	var err error
	var raw []sflow.DirFlow
	if a.opt.Observed.Flows != nil {
		raw = a.opt.Observed.Flows(from, to)
	}
	o := &observation{mu: &sync.Mutex{}, a: a, topo: t, routes: routes, nodes: nodes, from: from, to: to,
		seen: map[string]map[hostPair]map[fabric.PortRef]portWeight{}, split: map[string]map[fabric.PortRef]*dirSplit{},
		affected: map[fabric.PortRef]bool{}, records: map[string]*store.Job{}}
	// A flow's destination address is the host a switch delivered it to.
	hostOf := map[netip.Addr]fabric.LID{}
	for _, f := range raw {
		peer, ok := t.Peer(f.Dir)
		if !ok || !f.Dst.IsValid() {
			continue
		}
		n, ok := t.Node(peer.GUID)
		if !ok || n.Type == fabric.Switch {
			continue
		}
		lid := n.PortLID(peer.Port)
		if old, dup := hostOf[f.Dst]; dup && old != lid {
			hostOf[f.Dst] = 0 // two hosts: unknown
			continue
		}
		hostOf[f.Dst] = lid
	}
	// The jobs whose traffic lies in the range, by the host pairs they
	// sent over: the fallback where no connection matched.
	jobsOf := map[hostPair][]string{}
	ids := map[string]bool{}
	var got []store.LinkJobBytes
	if len(raw) > 0 {
		if got, err = a.s.opt.Store.LinkJobs(ctx, nil, from, to); err != nil {
			return nil, err
		}
	}
	for _, x := range got {
		ids[x.Job] = true
	}
	for id := range ids {
		for p := range o.pairBytes(ctx, id) {
			jobsOf[p] = append(jobsOf[p], id)
		}
	}
	for _, f := range raw {
		of := obsFlow{DirFlow: f, src: hostOf[f.Src], dst: hostOf[f.Dst], srcRank: -1, dstRank: -1}
		if a.opt.Observed.Lookup != nil {
			if m, ok := a.opt.Observed.Lookup(f.FlowKey, to); ok {
				of.job, of.user, of.srcRank, of.dstRank = m.Job, m.User, m.SrcRank, m.DstRank
				// An end no delivery showed: its rank's node.
				if j := o.record(ctx, m.Job); j != nil {
					if of.src == 0 {
						of.src = o.rankLID(j, m.SrcRank)
					}
					if of.dst == 0 {
						of.dst = o.rankLID(j, m.DstRank)
					}
				}
			}
		}
		if of.job == "" && of.src != 0 && of.dst != 0 {
			switch js := jobsOf[hostPair{of.src, of.dst}]; len(js) {
			case 0:
			case 1:
				of.job = js[0]
				if j := o.record(ctx, js[0]); j != nil {
					of.user = j.User
					of.srcRank, of.dstRank = o.onlyRank(j, of.src), o.onlyRank(j, of.dst)
				}
			default:
				of.ambiguous = true
			}
		}
		o.flows = append(o.flows, of)
		if of.job != "" && of.src != 0 && of.dst != 0 {
			byPair := o.seen[of.job]
			if byPair == nil {
				byPair = map[hostPair]map[fabric.PortRef]portWeight{}
				o.seen[of.job] = byPair
			}
			p := hostPair{of.src, of.dst}
			if byPair[p] == nil {
				byPair[p] = map[fabric.PortRef]portWeight{}
			}
			w := byPair[p][f.Dir]
			w.bytes += f.Bytes
			w.samples += f.Samples
			byPair[p][f.Dir] = w
		}
	}
	return o, nil
}

// record is job id with its ranks (live first, else stored), nil when
// gone; read once a request.
func (o *observation) record(ctx context.Context, id string) *store.Job {
	if j, ok := o.records[id]; ok {
		return j
	}
	var j *store.Job
	if l, ok := o.a.s.live()[id]; ok {
		j = l.Full()
	} else if s, err := o.a.s.opt.Store.Job(ctx, id); err == nil {
		j = s.Full()
	}
	o.records[id] = j
	return j
}

// onlyRank is the job's one rank on the host with LID l, -1 when it has
// several there (or none).
func (o *observation) onlyRank(j *store.Job, l fabric.LID) int {
	rank := -1
	for i := range j.Processes {
		if lid, err := o.nodes.LID(j.Processes[i].Node); err == nil && lid == l {
			if rank >= 0 {
				return -1
			}
			rank = j.Processes[i].Rank
		}
	}
	return rank
}

// rankLID is the LID of the host of job j's rank (0: unknown).
func (o *observation) rankLID(j *store.Job, rank int) fabric.LID {
	for i := range j.Processes {
		if rank >= 0 && j.Processes[i].Rank == rank {
			if l, err := o.nodes.LID(j.Processes[i].Node); err == nil {
				return l
			}
		}
	}
	return 0
}

// pairBytes is what job id sent between hosts over its life, by host
// pair (its ranks' per-node counts).
func (o *observation) pairBytes(ctx context.Context, id string) map[hostPair]uint64 {
	j := o.record(ctx, id)
	out := map[hostPair]uint64{}
	if j == nil {
		return out
	}
	for i := range j.Processes {
		p := &j.Processes[i]
		s, err := o.nodes.LID(p.Node)
		if err != nil {
			continue
		}
		for t := range p.ToNodes.All() {
			d, err := o.nodes.LID(t.Node)
			if err != nil || d == s {
				continue
			}
			if b := t.Classes.Total().Bytes; b > 0 {
				out[hostPair{s, d}] += b
			}
		}
	}
	return out
}

// jobSplit computes, once, job id's bytes per direction split by what was
// observed less what the even split put there, over the range: its host
// pairs' bytes (their shares of what each source host sent in the range,
// as stored) split over the equal-cost paths by the job's sampled bytes
// of the pair leaving each port, where it has samples.
func (o *observation) jobSplit(ctx context.Context, id string) map[fabric.PortRef]*dirSplit {
	if s, ok := o.split[id]; ok {
		return s
	}
	out := map[fabric.PortRef]*dirSplit{}
	o.split[id] = out
	seen := o.seen[id]
	if len(seen) == 0 {
		return out
	}
	got, err := o.a.s.opt.Store.JobLinks(ctx, id, o.from, o.to, 0)
	if err != nil {
		return out
	}
	pairs := o.pairBytes(ctx, id)
	// What each source host sent in the range, as attributed (its host
	// port's direction).
	sent := map[fabric.LID]uint64{}
	for _, x := range got {
		if x.Job != id {
			continue
		}
		if n, ok := o.topo.Node(x.Port.GUID); ok && n.Type != fabric.Switch {
			sent[n.PortLID(x.Port.Port)] += x.Bytes
		}
	}
	life := map[fabric.LID]uint64{}
	for p, b := range pairs {
		life[p.s] += b
	}
	at := func(dir fabric.PortRef) *dirSplit {
		d := out[dir]
		if d == nil {
			d = &dirSplit{}
			out[dir] = d
		}
		return d
	}
	for p, life1 := range pairs {
		if life[p.s] == 0 || sent[p.s] == 0 {
			continue
		}
		b := uint64(math.Round(float64(sent[p.s]) * float64(life1) / float64(life[p.s])))
		w := seen[p]
		weights := func(sw fabric.GUID, ports []int) (bs, ss []uint64) {
			bs, ss = make([]uint64, len(ports)), make([]uint64, len(ports))
			for k, port := range ports {
				x := w[fabric.PortRef{GUID: sw, Port: port}]
				bs[k], ss[k] = x.bytes, x.samples
			}
			return bs, ss
		}
		even := map[fabric.PortRef]uint64{}
		if err := o.routes.SplitPair(p.s, p.d, b, nil, func(dir fabric.PortRef, x uint64, _ fabric.SplitHow) { even[dir] += x }); err != nil {
			continue
		}
		_ = o.routes.SplitPair(p.s, p.d, b, weights, func(dir fabric.PortRef, x uint64, how fabric.SplitHow) {
			d := at(dir)
			d.delta += int64(x) - int64(even[dir])
			// A direction every path of a pair crosses (its host links)
			// carries the pair's bytes whatever the split.
			if !how.ECMP || !o.ecmpAffected(dir) {
				return
			}
			t := splitTally{ecmp: true}
			if how.Even {
				t.even = x
			} else {
				t.observed, t.samples, t.group = x, how.Samples, how.GroupSamples
			}
			d.tally.add(t)
		})
	}
	return out
}

// ecmpAffected reports whether some pair's traffic crosses direction dir
// over a choice of equal-cost paths (a share below 1).
func (o *observation) ecmpAffected(dir fabric.PortRef) bool {
	if v, ok := o.affected[dir]; ok {
		return v
	}
	shares, _, err := o.routes.PairSharesThrough(dir, 0)
	v := false
	if err == nil {
		for _, s := range shares {
			if s.Share < 1 {
				v = true
				break
			}
		}
	}
	o.affected[dir] = v
	return v
}

// apply replaces the even split's bytes of the jobs whose pairs were
// sampled by the observed split's, and returns with them how each job's
// bytes on each direction were split ("ecmp-even" where pairs had a
// choice of paths and no samples). A nil observation (no equal-cost
// model) changes nothing.
func (o *observation) apply(ctx context.Context, got []store.LinkJobBytes) ([]store.LinkJobBytes, map[store.LinkJobBytes]splitModel) {
	models := map[store.LinkJobBytes]splitModel{}
	if o == nil {
		return got, models
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]store.LinkJobBytes, len(got))
	for i, x := range got {
		key := store.LinkJobBytes{Job: x.Job, Port: x.Port}
		d := o.jobSplit(ctx, x.Job)[x.Port]
		if d != nil && d.tally.ecmp {
			b := int64(x.Bytes) + d.delta
			x.Bytes = uint64(max(b, 0))
			models[key] = d.tally.model()
		} else if o.ecmpAffected(x.Port) {
			models[key] = splitTally{ecmp: true, even: x.Bytes}.model()
		}
		out[i] = x
	}
	return out, models
}

// dirModel is how all jobs' bytes on dir were split.
func (o *observation) dirModel(ctx context.Context, got []store.LinkJobBytes, dir fabric.PortRef) splitModel {
	if o == nil {
		return splitModel{}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	var t splitTally
	for _, x := range got {
		if x.Port != dir {
			continue
		}
		if d := o.jobSplit(ctx, x.Job)[dir]; d != nil && d.tally.ecmp {
			t.add(d.tally)
		} else if o.ecmpAffected(dir) {
			t.add(splitTally{ecmp: true, even: x.Bytes})
		}
	}
	return t.model()
}

// Collisions.

// collisionFlow is one flow on a shared uplink: its job and ranks (or
// other traffic), and what was sampled of it.
type collisionFlow struct {
	Job        string `json:"job,omitempty"`
	User       string `json:"user,omitempty"`
	Other      bool   `json:"other_traffic,omitempty"` // matches no job
	Ambiguous  bool   `json:"ambiguous,omitempty"`     // its hosts carry several jobs' traffic
	Anonymized bool   `json:"anonymized,omitempty"`
	SrcRank    *int   `json:"src_rank,omitempty"`
	DstRank    *int   `json:"dst_rank,omitempty"`
	SrcNode    string `json:"src_node,omitempty"`
	DstNode    string `json:"dst_node,omitempty"`
	// The flow itself, for administrators.
	Src     string `json:"src,omitempty"`
	Dst     string `json:"dst,omitempty"`
	Proto   uint8  `json:"proto,omitempty"`
	SrcPort uint16 `json:"src_port,omitempty"`
	DstPort uint16 `json:"dst_port,omitempty"`
	Bytes   uint64 `json:"estimated_bytes"`
	Samples uint64 `json:"samples"`
}

// groupPort is one port of a switch's equal-cost group with its load.
type groupPort struct {
	Port          int         `json:"port"`
	Link          string      `json:"link"`
	To            fabric.GUID `json:"to"`
	ToName        string      `json:"to_description"`
	MeasuredBytes uint64      `json:"measured_bytes"`
	Measured      bool        `json:"measured"`
	Utilization   float64     `json:"measured_utilization_pct"`
	SampledBytes  uint64      `json:"estimated_bytes"`
	Samples       uint64      `json:"samples"`
	Flows         int         `json:"flows"` // large flows (collisionShare of the group's sampled bytes)
}

// collisionJSON is an ECMP collision: large flows that share one uplink
// of a switch while an equal-cost uplink of it carries less.
type collisionJSON struct {
	Switch     fabric.GUID     `json:"switch"`
	SwitchName string          `json:"switch_description"`
	Port       int             `json:"port"` // the shared uplink
	Link       string          `json:"link"`
	ToName     string          `json:"to_description"`
	Flows      []collisionFlow `json:"flows"`
	Jobs       []string        `json:"jobs"` // the flows' jobs, as shown
	// Group: every port of the switch's equal-cost group, the shared one
	// among them, with what its counters measured and sFlow sampled.
	Group []groupPort `json:"group"`
	// LeastLoaded is the group's port that carried the fewest bytes.
	LeastLoaded groupPort `json:"least_loaded"`
	// Imbalance is the group's largest port load over its mean (1: even;
	// k: all on one of k ports), by the counters where every port was
	// measured (basis "counters"), else by the samples ("samples").
	Imbalance float64 `json:"imbalance"`
	Basis     string  `json:"imbalance_basis"`
}

// collisionShare: a flow is large when it carries at least this part of
// its equal-cost group's sampled bytes (acknowledgements and control
// traffic are not).
const collisionShare = 0.05

// collisions finds the ECMP collisions of the range: for every switch's
// equal-cost group, the ports with two or more large flows while another
// port of the group carried less than the shared one less its smallest
// large flow (moving that flow there would lower the largest load).
func (o *observation) collisions(ctx context.Context, job string) ([]collisionJSON, error) {
	out := []collisionJSON{}
	if o == nil {
		return out, nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	byDir := map[fabric.PortRef][]*obsFlow{}
	for i := range o.flows {
		f := &o.flows[i]
		byDir[f.Dir] = append(byDir[f.Dir], f)
	}
	admin := isAdmin(ctx)
	anon := newAnonymizer(ctx, o.a.s.owners(ctx))
	seconds := o.to.Sub(o.from).Seconds()
	for _, g := range o.routes.ECMPGroups() {
		refs := make([]fabric.PortRef, len(g.Ports))
		var sampled uint64
		for k, p := range g.Ports {
			refs[k] = fabric.PortRef{GUID: g.Switch, Port: p}
			for _, f := range byDir[refs[k]] {
				sampled += f.Bytes
			}
		}
		if sampled == 0 {
			continue
		}
		var peers []fabric.PortRef
		for _, r := range refs {
			if p, ok := o.topo.Peer(r); ok {
				peers = append(peers, p)
			}
		}
		samples, err := o.a.s.opt.Store.PortSamples(ctx, append(slices.Clone(refs), peers...), o.from, o.to)
		if err != nil {
			return nil, err
		}
		group := make([]groupPort, len(refs))
		large := make([][]*obsFlow, len(refs))
		allMeasured := true
		for k, r := range refs {
			gp := groupPort{Port: r.Port}
			if l, ok := o.topo.LinkAt(r); ok {
				gp.Link = l.ID()
				peer, _ := o.topo.Peer(r)
				gp.To, gp.ToName = peer.GUID, describe(o.topo, peer)
				m := measure(samples, r, peer)
				gp.MeasuredBytes, gp.Measured = m.Bytes, m.Measured
				gp.Utilization = utilization(m.Bytes, l.Capacity(), seconds)
			}
			allMeasured = allMeasured && gp.Measured
			for _, f := range byDir[r] {
				gp.SampledBytes += f.Bytes
				gp.Samples += f.Samples
				if float64(f.Bytes) >= collisionShare*float64(sampled) {
					large[k] = append(large[k], f)
				}
			}
			gp.Flows = len(large[k])
			group[k] = gp
		}
		load := func(gp groupPort) uint64 {
			if allMeasured {
				return gp.MeasuredBytes
			}
			return gp.SampledBytes
		}
		var sum, top uint64
		least := group[0]
		for _, gp := range group {
			sum += load(gp)
			top = max(top, load(gp))
			if load(gp) < load(least) {
				least = gp
			}
		}
		imb := 0.0
		if sum > 0 {
			imb = float64(top) / (float64(sum) / float64(len(group)))
		}
		basis := "samples"
		if allMeasured {
			basis = "counters"
		}
		for k, fs := range large {
			if len(fs) < 2 {
				continue
			}
			smallest := fs[0].Bytes
			for _, f := range fs {
				smallest = min(smallest, f.Bytes)
			}
			// In the basis's units: the smallest flow's share of the port.
			cut := uint64(float64(load(group[k])) * float64(smallest) / float64(max(group[k].SampledBytes, 1)))
			if load(least) >= load(group[k])-min(cut, load(group[k])) {
				continue
			}
			if job != "" && !slices.ContainsFunc(fs, func(f *obsFlow) bool { return f.job == job }) {
				continue
			}
			slices.SortFunc(fs, func(x, y *obsFlow) int { return cmp.Compare(y.Bytes, x.Bytes) })
			c := collisionJSON{Switch: g.Switch, SwitchName: describe(o.topo, refs[k]), Port: refs[k].Port, Link: group[k].Link,
				ToName: group[k].ToName, Group: group, LeastLoaded: least, Imbalance: imb, Basis: basis, Flows: []collisionFlow{}, Jobs: []string{}}
			for _, f := range fs {
				cf := o.showFlow(f, admin, anon)
				c.Flows = append(c.Flows, cf)
				if cf.Job != "" && !slices.Contains(c.Jobs, cf.Job) {
					c.Jobs = append(c.Jobs, cf.Job)
				}
			}
			out = append(out, c)
		}
	}
	slices.SortStableFunc(out, func(x, y collisionJSON) int { return cmp.Compare(y.Imbalance, x.Imbalance) })
	return out, nil
}

// showFlow is a collision's flow as the caller may see it: another
// user's job anonymized, without ranks, nodes, addresses or exact bytes;
// addresses and ports for administrators only.
func (o *observation) showFlow(f *obsFlow, admin bool, anon *anonymizer) collisionFlow {
	cf := collisionFlow{Job: f.job, User: f.user, Other: f.job == "" && !f.ambiguous, Ambiguous: f.ambiguous, Bytes: f.Bytes, Samples: f.Samples}
	if f.src != 0 {
		cf.SrcNode = o.hostName(f.src)
	}
	if f.dst != 0 {
		cf.DstNode = o.hostName(f.dst)
	}
	if f.srcRank >= 0 {
		r := f.srcRank
		cf.SrcRank = &r
	}
	if f.dstRank >= 0 {
		r := f.dstRank
		cf.DstRank = &r
	}
	if admin {
		if f.Src.IsValid() {
			cf.Src, cf.Dst = f.Src.String(), f.Dst.String()
		}
		cf.Proto, cf.SrcPort, cf.DstPort = f.Proto, f.SrcPort, f.DstPort
	}
	if f.job != "" {
		d := dirJob{Job: f.job, User: f.user}
		anon.apply(&d)
		if d.Anonymized {
			cf.Job, cf.User, cf.Anonymized = d.Job, "", true
			cf.SrcRank, cf.DstRank, cf.SrcNode, cf.DstNode = nil, nil, "", ""
			cf.Bytes = roundBytes(cf.Bytes)
		}
	} else if !admin {
		cf.SrcNode, cf.DstNode = "", ""
	}
	return cf
}

func (o *observation) hostName(l fabric.LID) string {
	if p, ok := o.topo.PortByLID(l); ok {
		return describe(o.topo, p)
	}
	return ""
}
