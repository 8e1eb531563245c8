// Package flowjobs maps network flows onto the MPI jobs whose ranks made
// them (issue 44, docs/sflow.md "Flows to jobs"). Each rank's agent
// reports its process's connections at every snapshot (for TCP the
// socket's two ends; for RoCEv2 the queue pairs); the Index keeps them
// per job and answers, for a flow a switch sampled, whose job it is and
// which ranks are at its two ends. The rank at the far end of a
// connection is the one that reported the same connection from the other
// side: one rank's (local, remote) is another's (remote, local).
//
// A job's connections stay while it runs and Retention after it ended,
// then go; the index holds MaxKeys flow keys at most (two a connection,
// one per direction) and counts those it had to refuse.
package flowjobs

import (
	"hash/maphash"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/netloom/netloom/internal/ingest"
	"github.com/netloom/netloom/internal/sflow"
)

// Match is what the index knows of a flow: its job, the job's owner, and
// the ranks at its two ends.
type Match struct {
	Job  string
	User string // the job's owner as ingest knows it ("" when no datagram named one)
	// SrcRank is the world rank at the flow key's Src end, DstRank at its
	// Dst end; -1 where that end is no rank of the job that has reported
	// it (a launcher's daemon, mpirun, a process without the agent, or a
	// rank whose snapshot has not come yet), or a socket several ranks
	// hold (inherited from the launcher).
	SrcRank, DstRank int
}

// Options bound an Index; the zero value is good.
type Options struct {
	// Retention keeps a job's connections after its end, for the samples
	// of its last minutes read later. Default 15 minutes (the sFlow
	// collector's window).
	Retention time.Duration
	// Slack widens each job's time span by this much at both ends: the
	// agents' clocks against the daemon's, and a connection made before
	// the first snapshot that showed it. Default 30 s.
	Slack time.Duration
	// MaxKeys bounds the flow keys held (two per TCP connection or RoCE
	// queue pair). Default 1,048,576.
	MaxKeys int
	// Now is the clock that prunes ended jobs (default time.Now).
	Now func() time.Time
}

// Index is the flows-to-jobs index. It is safe for concurrent use: the
// agents' aggregators report into it, the sFlow side looks flows up.
type Index struct {
	opt Options

	mu        sync.RWMutex
	keys      map[sflow.FlowKey][]*end // usually one
	nkeys     int
	runs      map[string]*run // each job id's latest run
	ended     []*run          // ended runs, to prune
	refused   uint64          // connections not kept for MaxKeys
	nextPrune time.Time
}

// run is one launch of a job (a job id started again after its end is a
// new run).
type run struct {
	job, user  string
	start, end time.Time // end zero: running
	keys       []sflow.FlowKey
	// last is each rank's latest report that changed its connections
	// (unix ns): the connections it named are the ones it holds now; sum
	// is that report's list's hash, so that the same list again (every
	// snapshot of a rank whose connections did not change) costs a look.
	last map[int]int64
	sum  map[int]uint64
}

// end is one run's view of a flow key: the ranks at its two ends, and
// whether more than one rank reported an end (a socket they share).
type end struct {
	run                  *run
	src, dst             int
	srcShared, dstShared bool
	// the latest report that named each end: its time (unix ns) and rank
	seen [2]int64
	by   [2]int
}

// current says whether a rank's latest report still named the key.
func (e *end) current() bool {
	for i := range 2 {
		if t, ok := e.run.last[e.by[i]]; ok && t == e.seen[i] {
			return true
		}
	}
	return false
}

// New makes an empty index.
func New(opt Options) *Index {
	if opt.Retention <= 0 {
		opt.Retention = 15 * time.Minute
	}
	if opt.Slack <= 0 {
		opt.Slack = 30 * time.Second
	}
	if opt.MaxKeys <= 0 {
		opt.MaxKeys = 1 << 20
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return &Index{opt: opt, keys: map[sflow.FlowKey][]*end{}, runs: map[string]*run{}}
}

// Keys returns the connection's flow key in each direction: its packets
// from the local end (out) and toward it (in). TCP: the socket's
// addresses and ports. RoCE: a packet carries the destination queue pair,
// the receiver's, and an entropy source port the key leaves out (as
// sflow.Header.Key does). ok is false for a kind the index does not
// match (nothing from a sampled header could be compared with it).
func Keys(c ingest.Conn) (out, in sflow.FlowKey, ok bool) {
	l, r := c.Local, c.Remote
	switch c.Kind {
	case "tcp":
		return sflow.FlowKey{Src: l.Addr(), Dst: r.Addr(), Proto: 6, SrcPort: l.Port(), DstPort: r.Port()},
			sflow.FlowKey{Src: r.Addr(), Dst: l.Addr(), Proto: 6, SrcPort: r.Port(), DstPort: l.Port()}, true
	case "roce":
		return sflow.FlowKey{Src: l.Addr(), Dst: r.Addr(), Proto: 17, DstPort: sflow.RoCEv2Port, QP: c.RemoteQPN},
			sflow.FlowKey{Src: r.Addr(), Dst: l.Addr(), Proto: 17, DstPort: sflow.RoCEv2Port, QP: c.LocalQPN}, true
	}
	return sflow.FlowKey{}, sflow.FlowKey{}, false
}

// Report takes one rank's connections (ingest.Options.Connections). A
// connection reported again changes nothing; one its peer reported first
// gets its far rank filled in.
func (x *Index) Report(r ingest.ConnReport) {
	sum := hashConns(r.Conns)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.pruneLocked()
	ru := x.runs[r.Job]
	if ru != nil && !ru.end.IsZero() && r.Start.After(ru.end) {
		ru = nil // a new launch under the job's id; the old run stays until pruned
	}
	if ru == nil {
		if len(r.Conns) == 0 {
			return // nothing to hold: a job that has no connections (yet)
		}
		ru = &run{job: r.Job, user: r.User, start: r.Start, last: map[int]int64{}, sum: map[int]uint64{}}
		x.runs[r.Job] = ru
	}
	if _, ok := ru.last[r.Rank]; ok && ru.sum[r.Rank] == sum {
		return // what the rank reported last time
	}
	at := r.At.UnixNano()
	ru.last[r.Rank], ru.sum[r.Rank] = at, sum
	if r.Start.Before(ru.start) {
		ru.start = r.Start
	}
	if ru.user == "" {
		ru.user = r.User
	}
	for _, c := range r.Conns {
		out, in, ok := Keys(c)
		if !ok {
			continue
		}
		x.side(ru, out, r.Rank, 0, at)
		x.side(ru, in, r.Rank, 1, at)
	}
}

var seed = maphash.MakeSeed()

// hashConns is a hash of a list of connections, in its order.
func hashConns(cs []ingest.Conn) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	for _, c := range cs {
		maphash.WriteComparable(&h, c)
	}
	return h.Sum64()
}

// side records that rank is at k's source end (i 0) or its destination
// (1), as its report of time at said.
func (x *Index) side(ru *run, k sflow.FlowKey, rank, i int, at int64) {
	k = norm(k)
	var e *end
	for _, o := range x.keys[k] {
		if o.run == ru {
			e = o
			break
		}
	}
	if e == nil {
		if x.nkeys >= x.opt.MaxKeys {
			x.refused++
			return
		}
		e = &end{run: ru, src: -1, dst: -1, by: [2]int{-1, -1}}
		x.keys[k] = append(x.keys[k], e)
		ru.keys = append(ru.keys, k)
		x.nkeys++
	}
	e.seen[i], e.by[i] = at, rank
	if i == 0 {
		claim(&e.src, &e.srcShared, rank)
	} else {
		claim(&e.dst, &e.dstShared, rank)
	}
}

// claim makes rank the one at an end, unless another rank reported it
// too: a socket that several processes hold (inherited from the
// launcher's daemon, as Hydra's proxy passes its connection to mpiexec on
// to the ranks it starts) is no one rank's.
func claim(at *int, shared *bool, rank int) {
	switch {
	case *shared || *at == rank:
	case *at == -1:
		*at = rank
	default:
		*at, *shared = -1, true
	}
}

// End marks a job's end (ingest.Options.JobEnded): its connections match
// samples until end (and Slack), and go Retention after it.
func (x *Index) End(job string, at time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	ru := x.runs[job]
	if ru == nil || !ru.end.IsZero() {
		return
	}
	ru.end = at
	x.ended = append(x.ended, ru)
	x.pruneLocked()
}

// Lookup says whose flow k is at time at (when a switch sampled it):
// the job whose ranks reported its connection and that ran at that time,
// the latest started where several did (a 5-tuple reused by a later job).
// For RoCEv2 (k.QP set) the source port is not compared. ok is false for
// a flow no rank reported: other traffic.
func (x *Index) Lookup(k sflow.FlowKey, at time.Time) (Match, bool) {
	k = norm(k)
	x.mu.RLock()
	defer x.mu.RUnlock()
	var best *end
	for _, e := range x.keys[k] {
		ru := e.run
		if at.Before(ru.start.Add(-x.opt.Slack)) || !ru.end.IsZero() && at.After(ru.end.Add(x.opt.Slack)) {
			continue
		}
		if best == nil || ru.start.After(best.run.start) {
			best = e
		}
	}
	if best == nil {
		return Match{}, false
	}
	return Match{Job: best.run.job, User: best.run.user, SrcRank: best.src, DstRank: best.dst}, true
}

// Conn is one connection of a job as the index holds it: for TCP once,
// from the end whose address and port sort first; for RoCE once per
// direction (each carries the receiving end's queue pair).
type Conn struct {
	Key              sflow.FlowKey
	SrcRank, DstRank int // -1: no rank of the job reported that end, or several did
	// Current: a rank's latest report named it (a connection since closed
	// is kept for the samples of its time).
	Current bool
}

// JobConns is a job's latest run and its connections.
type JobConns struct {
	Job, User  string
	Start, End time.Time // End zero: running
	Conns      []Conn    // the first limit, sorted by key
	Total      int       // all of them
}

// Connections returns the connections the index holds of job's latest
// run, the first limit of them; false when it holds none.
func (x *Index) Connections(job string, limit int) (JobConns, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	ru := x.runs[job]
	if ru == nil {
		return JobConns{}, false
	}
	out := JobConns{Job: ru.job, User: ru.user, Start: ru.start, End: ru.end}
	for _, k := range ru.keys {
		if k.Proto == 6 && less(k.Dst, k.DstPort, k.Src, k.SrcPort) {
			continue // its other direction stands for it
		}
		for _, e := range x.keys[k] {
			if e.run == ru {
				out.Conns = append(out.Conns, Conn{Key: k, SrcRank: e.src, DstRank: e.dst, Current: e.current()})
			}
		}
	}
	slices.SortFunc(out.Conns, func(a, b Conn) int {
		switch {
		case less(a.Key.Src, a.Key.SrcPort, b.Key.Src, b.Key.SrcPort):
			return -1
		case less(b.Key.Src, b.Key.SrcPort, a.Key.Src, a.Key.SrcPort):
			return 1
		case less(a.Key.Dst, a.Key.DstPort, b.Key.Dst, b.Key.DstPort):
			return -1
		case less(b.Key.Dst, b.Key.DstPort, a.Key.Dst, a.Key.DstPort):
			return 1
		}
		return int(a.Key.QP) - int(b.Key.QP)
	})
	out.Total = len(out.Conns)
	if len(out.Conns) > limit {
		out.Conns = out.Conns[:limit]
	}
	return out, true
}

func less(a netip.Addr, ap uint16, b netip.Addr, bp uint16) bool {
	if c := a.Compare(b); c != 0 {
		return c < 0
	}
	return ap < bp
}

// Stats is the index's size and what it refused.
type Stats struct {
	Jobs    int    // runs held, ended ones within Retention included
	Keys    int    // flow keys held
	Refused uint64 // flow keys not kept for MaxKeys
}

// Stats returns the index's size.
func (x *Index) Stats() Stats {
	x.mu.RLock()
	defer x.mu.RUnlock()
	jobs := len(x.runs)
	for _, ru := range x.ended {
		if x.runs[ru.job] != ru {
			jobs++ // an earlier run of a job id started again
		}
	}
	return Stats{Jobs: jobs, Keys: x.nkeys, Refused: x.refused}
}

// norm is a key as the index holds it: IPv4 addresses as such (not
// IPv4-mapped), and for RoCEv2 no source port.
func norm(k sflow.FlowKey) sflow.FlowKey {
	k.Src, k.Dst = k.Src.Unmap(), k.Dst.Unmap()
	if k.QP != 0 || k.Proto == 17 && k.DstPort == sflow.RoCEv2Port {
		k.SrcPort = 0
	}
	return k
}

// pruneLocked drops the runs that ended more than Retention ago, at most
// once every 10 seconds.
func (x *Index) pruneLocked() {
	now := x.opt.Now()
	if now.Before(x.nextPrune) {
		return
	}
	x.nextPrune = now.Add(10 * time.Second)
	kept := x.ended[:0]
	for _, ru := range x.ended {
		if now.Sub(ru.end) <= x.opt.Retention {
			kept = append(kept, ru)
			continue
		}
		for _, k := range ru.keys {
			es := x.keys[k]
			for i, e := range es {
				if e.run == ru {
					es = append(es[:i], es[i+1:]...)
					break
				}
			}
			if len(es) == 0 {
				delete(x.keys, k)
			} else {
				x.keys[k] = es
			}
			x.nkeys--
		}
		if x.runs[ru.job] == ru {
			delete(x.runs, ru.job)
		}
	}
	clear(x.ended[len(kept):])
	x.ended = kept
}
