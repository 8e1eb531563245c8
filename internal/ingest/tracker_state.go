package ingest

import (
	"strings"
	"time"

	"github.com/netloom/netloom/internal/store"
)

// A job's and a rank's live state, the slabs their processes are made
// from, and the interned strings they share.

// maxInterned bounds the interner; past it, it starts afresh.
const maxInterned = 1 << 20

func (t *Tracker) intern(s string) string {
	if s == "" {
		return ""
	}
	if v, ok := t.strs[s]; ok {
		return v
	}
	if len(t.strs) >= maxInterned {
		t.strs = make(map[string]string)
	}
	s = strings.Clone(s)
	t.strs[s] = s
	return s
}

// noProcess is the previous snapshot of a rank that has none.
var noProcess store.Process

// like interns s, which is often prev (an interned string).
func (t *Tracker) like(s, prev string) string {
	if s == prev {
		return prev
	}
	return t.intern(s)
}

type rankKey struct {
	job  string
	rank int
}

type jobState struct {
	id        string
	traceDir  string // where its ranks write replay traces (the first rank to say)
	world     int
	ranks     map[int]*rankState
	procs     []*store.Process // the current process of each rank in order
	sums      []rankSum        // and what it adds to the job's summary
	procNodes map[string]int32 // the nodes its ranks run on, numbered
	order     []int            // ranks with a snapshot, ascending; nil when it must be rebuilt
	// chunks are the view's references to procs, viewChunk at a time,
	// shared by successive views but for those changed (a bit each), and
	// chunkSums what the chunks' sums add up to.
	chunks    [][]*store.Process
	chunkSums []chunkSum
	changed   []uint64
	// nodeRanks counts the ranks in procs on each of procNodes, and
	// nodesUsed the nodes with any.
	nodeRanks  []int32
	nodesUsed  int
	viewAt     time.Time
	lastSeen   time.Time // daemon clock
	interval   time.Duration
	finals     int
	finished   bool
	endReason  string
	end        time.Time // by the agents' clocks
	finishedAt time.Time // by the daemon's
	start      time.Time // earliest rank start
	dirty      bool      // changed since the last Publish
	// unsaved counts the ranks changed since their processes were last
	// saved: those whose gen is the job's (a save moves the job's on).
	unsaved    int
	gen        uint32
	nodes      *store.NodeTable // the names its ranks' destination nodes are packed against
	lastSave   time.Time
	procsSaved time.Time // when its processes were last saved
	saved      bool      // saved since finishing
	view       *store.Job
	slab       slabs
	// verified: the job's datagrams carry MUNGE credentials, all of uid.
	verified bool
	uid      uint32
	// owner is the job's user: the verified one, or without
	// authentication the one its first datagram that named a user
	// claimed. A datagram naming another is dropped (job_mismatch), so a
	// job or a rank once seen cannot be taken over by another user's
	// datagrams; "" until a datagram names one.
	owner string
	// waiting: snapshots applied since the view was last rebuilt; shown:
	// those in the rebuilt view, until it is published (for the metrics).
	waiting, shown []arrival
}

// slabs hand out a job's processes, their function rows and its ranks'
// state from arrays of many, rather than one object each: the collector
// marks a million live processes in 40% less time when they lie together
// (and the daemon's p99 rose during each mark at ten times Stampede's
// load), and the allocator makes one object where it made hundreds. A
// process is never changed once current, so a slot is never reused: an
// array is garbage once every process in it has been replaced, about one
// snapshot interval later (a rank that stops reporting keeps its array).
// Until then its replaced processes keep what they point to, so an array
// holds what the job sends in a sixteenth of an interval (slabSpan): with
// arrays of 256 processes whatever the job's size, a job of 256 ranks
// kept twice its data, a whole interval's more.
type slabs struct {
	procs []store.Process
	fns   []store.Function
	ranks []rankState
	bytes []byte // for packed node and peer rows
}

// slabLen is how many processes (and ranks' states) an array holds.
func (j *jobState) slabLen() int { return min(viewChunk, slabSpan(j.world)) }

// slabSpan is how many snapshots a job of world ranks sends in a
// sixteenth of an interval.
func slabSpan(world int) int { return max(world/16, 1) }

// newProcess returns a copy of p from the job's slab.
func (j *jobState) newProcess(p *store.Process) *store.Process {
	if len(j.slab.procs) == 0 {
		j.slab.procs = make([]store.Process, j.slabLen())
	}
	np := &j.slab.procs[0]
	j.slab.procs = j.slab.procs[1:]
	*np = *p
	return np
}

// newFunctions returns an empty slice for n function rows (nil for none)
// from the job's slab.
func (j *jobState) newFunctions(n int) []store.Function {
	if n == 0 {
		return nil
	}
	if len(j.slab.fns) < n {
		j.slab.fns = make([]store.Function, max(n, min(4*viewChunk, n*slabSpan(j.world))))
	}
	f := j.slab.fns[:0:n]
	j.slab.fns = j.slab.fns[n:]
	return f
}

// newBytes returns an empty slice for n bytes, from the job's slab when
// small: packed node and peer rows, which would otherwise be two objects
// a process.
func (j *jobState) newBytes(n int) []byte {
	size := min(64<<10, max(1<<10, n*slabSpan(j.world)))
	if n > size/4 {
		return make([]byte, 0, n)
	}
	if cap(j.slab.bytes)-len(j.slab.bytes) < n {
		j.slab.bytes = make([]byte, 0, size)
	}
	k := len(j.slab.bytes)
	j.slab.bytes = j.slab.bytes[:k+n]
	return j.slab.bytes[k : k : k+n]
}

// keepBytes returns a copy of b from the job's slab (see newBytes).
func (j *jobState) keepBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append(j.newBytes(len(b)), b...)
}

// newRank returns a new rank's state from the job's slab.
func (j *jobState) newRank() *rankState {
	if len(j.slab.ranks) == 0 {
		j.slab.ranks = make([]rankState, j.slabLen())
	}
	r := &j.slab.ranks[0]
	j.slab.ranks = j.slab.ranks[1:]
	return r
}

// arrival is when a snapshot arrived: its last datagram's receipt (daemon
// clock) and its time stamp (agent clock).
type arrival struct{ recv, snap time.Time }

type rankState struct {
	cur  *store.Process // never changed once current: live views share it
	sent store.Classes  // cur.Sent(), summed once per snapshot
	has  bool
	pend *pending
	pos  int    // where the rank is in the job's order, procs and sums, while order is not nil
	gen  uint32 // the job's gen when the rank last changed
}

// viewChunk is how many ranks' references a view's chunk holds.
const viewChunk = 256

// change marks the view's chunk of the rank at pos changed.
func (j *jobState) change(pos int) {
	c := pos / viewChunk
	for c/64 >= len(j.changed) {
		j.changed = append(j.changed, 0)
	}
	j.changed[c/64] |= 1 << (c % 64)
}

// countNode adds n to the ranks counted on node k.
func (j *jobState) countNode(k int32, n int32) {
	for int(k) >= len(j.nodeRanks) {
		j.nodeRanks = append(j.nodeRanks, 0)
	}
	before := j.nodeRanks[k]
	j.nodeRanks[k] += n
	switch {
	case before == 0 && j.nodeRanks[k] > 0:
		j.nodesUsed++
	case before > 0 && j.nodeRanks[k] == 0:
		j.nodesUsed--
	}
}

// nodeIndex numbers the nodes the job's ranks run on.
func (j *jobState) nodeIndex(node string) int32 {
	k, ok := j.procNodes[node]
	if !ok {
		if j.procNodes == nil {
			j.procNodes = map[string]int32{}
		}
		k = int32(len(j.procNodes))
		j.procNodes[node] = k
	}
	return k
}

func (j *jobState) latestStart() time.Time {
	var t time.Time
	for _, r := range j.ranks {
		if r.has && r.cur.Start.After(t) {
			t = r.cur.Start
		}
	}
	return t
}

func (j *jobState) anyRank() bool {
	for _, r := range j.ranks {
		if r.has {
			return true
		}
	}
	return false
}
