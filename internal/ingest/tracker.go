package ingest

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math/bits"
	"slices"
	"strings"
	"time"

	"github.com/netloom/netloom/internal/ingest/agentpb"
	"github.com/netloom/netloom/internal/store"
)

// Options tune a Tracker; the zero value is good.
type Options struct {
	Limits Limits
	// ReassemblyTimeout is how long the chunks of one snapshot may take to
	// arrive. Default 10s.
	ReassemblyTimeout time.Duration
	// A running job ends when no datagram came for JobTimeoutIntervals of
	// its snapshot interval, and at least JobTimeout. Defaults 6 and 15s.
	JobTimeoutIntervals int
	JobTimeout          time.Duration
	// Linger keeps finished jobs in the live view. Default 2m.
	Linger time.Duration
	// SaveEvery is how often a running job's summary is saved, and
	// ProcessSaveEvery how often its changed processes are (all of them
	// again when it ends). Defaults 10s and 2m. A process row holds the
	// rank's cumulative peers, nodes and histograms: storing a million
	// ranks' rows at every snapshot was most of the store writer's work,
	// while the per-interval samples, stored at SaveEvery, keep the time
	// series. With many ranks tracked the period grows so that process
	// rows are stored at ProcessRowsPerSecond on average (default 2,000:
	// at 8x Stampede, 837,000 ranks every 2 minutes were 7,000 rows/s,
	// more than the writer kept up with beside everything else; the
	// period is then 7 minutes). A daemon that dies loses at most that
	// period of a running job's cumulative detail.
	SaveEvery            time.Duration
	ProcessSaveEvery     time.Duration
	ProcessRowsPerSecond int
	// ViewEvery is the least time between rebuilds of the live view of a
	// job of LargeJob ranks or more: a rebuild copies every rank, so a
	// large job that changes all the time is republished at this pace
	// rather than on every Publish. Defaults 500ms and 4096 (a rank's wait
	// for a view showing it is up to ViewEvery plus the publish period, out
	// of the 2 s budget from arrival to queryable; a rebuild of 16,384
	// ranks copies 6.5 MB).
	ViewEvery time.Duration
	LargeJob  int
	// MaxJobs bounds live jobs; MaxPendingBytes the datagrams waiting for
	// the rest of their snapshot. Defaults 10000 and 256 MiB.
	MaxJobs         int
	MaxPendingBytes int
	// SaveJob receives a job to store: its summary and the processes that
	// changed since the last call. Samples receives per-interval process
	// samples. Either may be nil. Both are called from Add, Tick or Flush.
	SaveJob func(*store.Job)
	Samples func([]store.ProcessSample)
	// Admit, when set, bounds new jobs per source address and live jobs
	// per user; one Admission is shared by all of a daemon's trackers.
	Admit *Admission
}

// WithDefaults fills zero fields.
func (o Options) WithDefaults() Options {
	o.Limits = o.Limits.WithDefaults()
	if o.ReassemblyTimeout <= 0 {
		o.ReassemblyTimeout = 10 * time.Second
	}
	if o.JobTimeoutIntervals <= 0 {
		o.JobTimeoutIntervals = 6
	}
	if o.JobTimeout <= 0 {
		o.JobTimeout = 15 * time.Second
	}
	if o.Linger <= 0 {
		o.Linger = 2 * time.Minute
	}
	if o.SaveEvery <= 0 {
		o.SaveEvery = 10 * time.Second
	}
	if o.ProcessSaveEvery <= 0 {
		o.ProcessSaveEvery = 2 * time.Minute
	}
	if o.ProcessRowsPerSecond <= 0 {
		o.ProcessRowsPerSecond = 2000
	}
	if o.ViewEvery <= 0 {
		o.ViewEvery = 500 * time.Millisecond
	}
	if o.LargeJob <= 0 {
		o.LargeJob = 4096
	}
	if o.MaxJobs <= 0 {
		o.MaxJobs = 10000
	}
	if o.MaxPendingBytes <= 0 {
		o.MaxPendingBytes = 256 << 20
	}
	return o
}

// Tracker keeps live job state from validated datagrams. It is owned by one
// goroutine; Publish hands immutable views to readers.
type Tracker struct {
	opt  Options
	m    *Metrics
	jobs map[string]*jobState
	// pending snapshots being reassembled, for timeouts.
	pending      map[rankKey]struct{}
	pendingBytes int
	samples      []store.ProcessSample
	live         *Live
	// strs interns the strings every rank repeats (node, host, program,
	// user, library, function, region and destination node names), so that
	// a million ranks hold one copy of each.
	strs  map[string]string
	ranks int // tracked at the last tick
	// jobs running and finished as last counted in the metrics, which sum
	// the trackers of all aggregators
	running, finished int
	order             []rowRef // scratch: a snapshot's node rows by table index
	// nodeSums is scratch for nodesFromPeers: a snapshot's traffic per
	// destination node, in the order the nodes came.
	nodeSums []nodeSum
	// hints are ranks' nodes known before their snapshots are added
	// (KnowNode: an offline profile's files are read in rank order).
	hints map[rankKey]string
	// whole assembles each snapshot that comes in one datagram.
	whole    pending
	wholeGot [1]uint64
}

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

type pending struct {
	seq     uint64
	start   int64
	chunks  uint32
	final   bool
	got     []uint64 // bitset of chunks received
	n       uint32
	bytes   int
	first   time.Time
	proc    store.Process
	rows    nodeRows // proc's destination nodes until complete
	hasProc bool
	dupPeer int // a peer in two chunks, when hasDup
	hasDup  bool
	whole   bool // the tracker's own, for a snapshot of one datagram
}

// Live is an immutable view of the tracked jobs.
type Live struct {
	Time time.Time
	Jobs map[string]*store.Job
}

// NewTracker makes a tracker; m may be nil.
func NewTracker(opt Options, m *Metrics) *Tracker {
	return &Tracker{opt: opt.WithDefaults(), m: m, jobs: map[string]*jobState{}, pending: map[rankKey]struct{}{},
		live: &Live{Jobs: map[string]*store.Job{}}, strs: map[string]string{}}
}

// Limits returns the limits in force.
func (t *Tracker) Limits() Limits { return t.opt.Limits }

// Add applies one datagram that Decode accepted; size is its length on the
// wire. It returns a *RejectError when the datagram was dropped (and
// counted).
func (t *Tracker) Add(d *Datagram, size int, now time.Time) error {
	return t.AddItem(Item{D: d, Size: size, At: now})
}

// AddItem is Add of a datagram from a Listener: a verified one also binds
// its job to the credential's uid, and is dropped (job_mismatch) when the
// job already belongs to another uid, or was begun by unverified agents;
// an unverified one is dropped (job_mismatch) when it claims another user
// than the job's owner. A datagram that would start a job may be refused
// by Options.Admit.
func (t *Tracker) AddItem(it Item) error {
	err := t.add(it)
	var re *RejectError
	if errors.As(err, &re) {
		t.m.drop(re.Reason, 1)
	}
	return err
}

// userOf is the user a datagram speaks for: the verified one, else the
// one it claims ("" when it names none: chunks after the first, or an
// agent that could not learn its user).
func userOf(it Item) string {
	if it.Verified {
		return it.User
	}
	if p := it.D.Process; p != nil {
		return p.User
	}
	return ""
}

func (t *Tracker) add(it Item) error {
	d, size, now, verified, uid := it.D, it.Size, it.At, it.Verified, it.UID
	user := userOf(it)
	j := t.jobs[d.JobId]
	if j != nil && (j.verified != verified || j.uid != uid) {
		return reject(ReasonJobMismatch, "job %s rank %d: datagram of %s, job of %s", d.JobId, d.Rank, owner(verified, uid), owner(j.verified, j.uid))
	}
	// Checked before anything else, the finished job's replacement and a
	// rank's restart included: another user's later start must neither
	// take a rank (whose own snapshots would then be dropped as stale)
	// nor, by taking the rank that names the job's user, the job.
	if j != nil && !verified && user != "" && j.owner != "" && user != j.owner {
		return reject(ReasonJobMismatch, "job %s rank %d: datagram claims user %q, the job is %q's", d.JobId, d.Rank, user, j.owner)
	}
	if j != nil && j.finished {
		// A finished job hears only from a new launch under the same id.
		if time.Unix(0, d.StartUnixNs).After(j.latestStart()) {
			t.dropJob(j)
			j = nil
		} else {
			return reject(ReasonStale, "job %s rank %d: job already finished", d.JobId, d.Rank)
		}
	}
	if j == nil {
		if len(t.jobs) >= t.opt.MaxJobs {
			return reject(ReasonTooManyJobs, "job %s: %d jobs tracked already", d.JobId, len(t.jobs))
		}
		if err := t.opt.Admit.admit(d.JobId, d.from, user, now); err != nil {
			return err
		}
		j = &jobState{id: d.JobId, world: int(d.WorldSize), ranks: map[int]*rankState{}, gen: 1,
			verified: verified, uid: uid, owner: user}
		// Jobs' process saves are spread over ProcessSaveEvery (a job's
		// first comes within it), so that jobs started together, or seen
		// first at the daemon's start, do not all save at one tick: at 8x
		// Stampede that was 800,000 process rows in one write, which held
		// the store writer for half a minute while its queue overflowed.
		j.procsSaved = now.Add(-time.Duration(maphash.String(saveSeed, d.JobId) % uint64(t.processSavePeriod())))
		t.jobs[d.JobId] = j
	}
	if int(d.WorldSize) != j.world {
		return reject(ReasonWorldChanged, "job %s rank %d: world size %d, job has %d", d.JobId, d.Rank, d.WorldSize, j.world)
	}
	if j.interval == 0 && d.IntervalNs > 0 && d.IntervalNs <= uint64(time.Hour) {
		// Until two snapshots show it, the agent's own word for its interval.
		j.interval = time.Duration(d.IntervalNs)
	}
	rank := int(d.Rank)
	r := j.ranks[rank]
	if r == nil {
		r = j.newRank()
		j.ranks[rank] = r
	}
	if r.has && d.StartUnixNs != r.cur.Start.UnixNano() {
		if d.StartUnixNs < r.cur.Start.UnixNano() {
			return reject(ReasonStale, "job %s rank %d: from an earlier run", d.JobId, d.Rank)
		}
		// The rank restarted (a new launch under the same job id): its
		// counters begin again.
		if r.cur.Final {
			j.finals--
		}
		r.has = false
		r.cur, r.sent = nil, store.Classes{}
		j.order = nil
	}
	if r.has && d.Seq <= r.cur.Seq {
		return reject(ReasonStale, "job %s rank %d: snapshot %d, have %d", d.JobId, d.Rank, d.Seq, r.cur.Seq)
	}
	key := rankKey{d.JobId, rank}
	if p := r.pend; p != nil && (p.seq != d.Seq || p.start != d.StartUnixNs) {
		if d.StartUnixNs == p.start && d.Seq < p.seq {
			return reject(ReasonStale, "job %s rank %d: snapshot %d, assembling %d", d.JobId, d.Rank, d.Seq, p.seq)
		}
		t.abandon(key, r, ReasonIncomplete)
	}
	p := r.pend
	if p == nil && d.Chunks == 1 {
		// A snapshot in one datagram, the usual case, is complete at
		// once: it is assembled in the tracker's own pending, neither
		// made nor listed for timeouts (at ten times Stampede's load,
		// each snapshot's pending was a tenth of what the daemon
		// allocated, and its entry in the pending map 2% of its CPU).
		p = &t.whole
		*p = pending{seq: d.Seq, start: d.StartUnixNs, chunks: 1, final: d.Final, got: t.wholeGot[:], first: now, whole: true}
		t.wholeGot[0] = 0
		p.proc.Rank = rank
	}
	if p == nil {
		if t.pendingBytes+size > t.opt.MaxPendingBytes {
			return reject(ReasonReassemblyFull, "job %s rank %d: %d bytes waiting for reassembly", d.JobId, d.Rank, t.pendingBytes)
		}
		p = &pending{seq: d.Seq, start: d.StartUnixNs, chunks: d.Chunks, final: d.Final,
			got: make([]uint64, (d.Chunks+63)/64), first: now}
		p.proc.Rank = rank
		r.pend = p
		t.pending[key] = struct{}{}
	}
	if p.chunks != d.Chunks || p.final != d.Final {
		return reject(ReasonChunksChanged, "job %s rank %d snapshot %d: chunk %d says %d chunks (final %v), earlier ones %d (final %v)",
			d.JobId, d.Rank, d.Seq, d.Chunk, d.Chunks, d.Final, p.chunks, p.final)
	}
	if p.got[d.Chunk/64]&(1<<(d.Chunk%64)) != 0 {
		return reject(ReasonDuplicate, "job %s rank %d snapshot %d: chunk %d twice", d.JobId, d.Rank, d.Seq, d.Chunk)
	}
	if int64(p.proc.Peers.Len()+d.peers.rows.Len()) > int64(j.world) || p.rows.n+d.rows.n > t.opt.Limits.MaxNodes {
		t.abandon(key, r, ReasonTooMany)
		return reject(ReasonTooMany, "job %s rank %d snapshot %d: more peers or nodes than the job has", d.JobId, d.Rank, d.Seq)
	}
	if j.owner == "" && user != "" {
		// The first datagram that names the job's user (it started with
		// a chunk after the first).
		t.opt.Admit.transfer("", user)
		j.owner = user
	}
	p.got[d.Chunk/64] |= 1 << (d.Chunk % 64)
	p.n++
	if !p.whole {
		p.bytes += size
		t.pendingBytes += size
	}
	var prev *store.Process
	if r.has {
		prev = r.cur
	}
	t.mergeChunk(j, p, d, prev)
	if d.Process != nil {
		p.hasProc = true
	}
	j.lastSeen = now
	if p.n < p.chunks {
		return nil
	}
	// Complete.
	if !p.whole {
		t.release(key, r)
	}
	err := t.apply(j, r, p, d, now)
	p.rows.release() // packed into the process, or rejected
	return err
}

func owner(verified bool, uid uint32) string {
	if !verified {
		return "unverified agents"
	}
	return fmt.Sprintf("uid %d", uid)
}

// release forgets a pending snapshot without counting it.
func (t *Tracker) release(key rankKey, r *rankState) {
	if r.pend != nil {
		t.pendingBytes -= r.pend.bytes
		r.pend = nil
	}
	delete(t.pending, key)
}

// abandon drops a pending snapshot, counting its datagrams.
func (t *Tracker) abandon(key rankKey, r *rankState, reason string) {
	if r.pend != nil {
		t.m.drop(reason, int(r.pend.n))
	}
	t.release(key, r)
}

// mergeChunk adds a datagram to the snapshot being assembled; prev is the
// rank's last snapshot, if any, whose strings are usually the same
// (compared first, they are found without hashing them: interning was 4%
// of the daemon's CPU at ten times Stampede).
func (t *Tracker) mergeChunk(j *jobState, pend *pending, d *Datagram, prev *store.Process) {
	if prev == nil {
		prev = &noProcess
	}
	p := &pend.proc
	p.Seq, p.Final = d.Seq, d.Final
	p.Start, p.Time = time.Unix(0, d.StartUnixNs).UTC(), time.Unix(0, d.TimeUnixNs).UTC()
	p.PeersTruncated = p.PeersTruncated || d.PeersTruncated
	if pr := d.Process; pr != nil {
		if pr.TraceDir != "" && j.traceDir == "" {
			j.traceDir = pr.TraceDir
		}
		p.Node, p.Host, p.PID, p.CPU = t.like(pr.Node, prev.Node), t.like(pr.Host, prev.Host), pr.Pid, pr.Cpu
		p.MPILibrary, p.Program, p.User = t.like(pr.MpiLibrary, prev.MPILibrary), t.like(pr.Program, prev.Program), t.like(pr.User, prev.User)
		p.CPUUser, p.CPUSystem, p.Wall, p.MPI = pr.CpuUserSeconds, pr.CpuSystemSeconds, pr.WallSeconds, pr.MpiSeconds
		p.VmSize, p.VmPeak, p.VmRSS, p.VmHWM = pr.VmSize, pr.VmPeak, pr.VmRss, pr.VmHwm
		p.IORead, p.IOWrite, p.MPIIORead, p.MPIIOWrite = pr.IoReadBytes, pr.IoWriteBytes, pr.MpiioReadBytes, pr.MpiioWriteBytes
		p.IntraNode, p.InterNode = traffic(pr.IntraNode), traffic(pr.InterNode)
		p.AgentDrops = pr.DatagramsDropped
	}
	// Rows are appended to exactly sized slices (one chunk is the usual
	// case, whose decoded peers are kept as they are).
	if p.Functions == nil {
		p.Functions = j.newFunctions(len(d.Functions))
	}
	p.Functions = slices.Grow(p.Functions, len(d.Functions))
	p.Regions = slices.Grow(p.Regions, len(d.Regions))
	for _, f := range d.Functions {
		name := ""
		if i := len(p.Functions); i < len(prev.Functions) {
			name = prev.Functions[i].Name
		}
		p.Functions = append(p.Functions, store.Function{Name: t.like(f.Name, name), Calls: f.Calls, TimeNS: f.TimeNs, WaitNS: f.WaitNs,
			BytesSent: f.BytesSent, BytesReceived: f.BytesReceived})
	}
	for _, r := range d.Regions {
		name := ""
		if i := len(p.Regions); i < len(prev.Regions) {
			name = prev.Regions[i].Name
		}
		p.Regions = append(p.Regions, store.Region{Name: t.like(r.Name, name), Entries: r.Entries, TimeNS: r.TimeNs, MPITimeNS: r.MpiTimeNs,
			WaitNS: r.WaitNs, Classes: store.Classes{P2P: traffic(r.P2P), Coll: traffic(r.Coll), RMA: traffic(r.Rma)}})
	}
	if d.Gpu != nil {
		p.GPU = gpuOf(d.Gpu)
	}
	if len(d.Reorders) > 0 {
		p.Reorders = reordersOf(d.Reorders)
	}
	// The decoder made the rows; a one-chunk snapshot keeps them.
	if pend.rows.n == 0 {
		pend.rows = d.rows
	} else {
		pend.rows.b = append(pend.rows.b, d.rows.b...)
		pend.rows.c = append(pend.rows.c, d.rows.c...)
		pend.rows.n += d.rows.n
		d.rows.release()
	}
	// Each datagram's peers come sorted and packed (a one-chunk snapshot
	// keeps them); the rare snapshot of several chunks merges them.
	if p.Peers.Len() == 0 {
		p.Peers = d.peers.rows
	} else if d.peers.rows.Len() > 0 {
		rows := append(p.Peers.Slice(), d.peers.rows.Slice()...)
		slices.SortStableFunc(rows, func(a, b store.PeerTraffic) int { return cmp.Compare(a.Peer, b.Peer) })
		for i := 1; i < len(rows) && !pend.hasDup; i++ {
			if rows[i].Peer == rows[i-1].Peer {
				pend.dupPeer, pend.hasDup = rows[i].Peer, true
			}
		}
		p.Peers = store.NewPeerRows(rows)
	}
}

// gpuOf converts a GPU section, its peers sorted (Validate checked them
// world ranks, each once); empty lists are nil, as the store reads them.
func gpuOf(g *agentpb.Gpu) *store.GPU {
	out := &store.GPU{Probed: g.Probed, ProbeError: g.ProbeError, NCCLVersion: g.NcclVersion,
		NCCLProfilerInterface: g.NcclProfilerInterface, NCCLNetEvents: g.NcclNetEvents}
	if len(g.Functions) > 0 {
		out.Functions = make([]store.GPUFunction, len(g.Functions))
		for i, f := range g.Functions {
			out.Functions[i] = store.GPUFunction{Name: f.Name, Send: bufferKinds(f.Send), Recv: bufferKinds(f.Recv)}
		}
	}
	if len(g.Peers) > 0 {
		out.Peers = make([]store.GPUPeer, len(g.Peers))
		for i, p := range g.Peers {
			out.Peers[i] = store.GPUPeer{Peer: int(p.Peer), SentFrom: bufferKinds(p.SentFrom), ReceivedInto: bufferKinds(p.ReceivedInto)}
		}
		slices.SortFunc(out.Peers, func(a, b store.GPUPeer) int { return cmp.Compare(a.Peer, b.Peer) })
	}
	if len(g.NcclOps) > 0 {
		out.NCCLOps = make([]store.NCCLOp, len(g.NcclOps))
		for i, o := range g.NcclOps {
			out.NCCLOps[i] = store.NCCLOp{Comm: store.CommHash(o.Comm), CommRank: o.CommRank, CommSize: o.CommSize, Name: o.Name,
				Algorithm: o.Algorithm, Protocol: o.Protocol, Calls: o.Calls, Bytes: o.Bytes, TimeNS: o.TimeNs}
		}
	}
	if len(g.NcclPeers) > 0 {
		out.NCCLPeers = make([]store.NCCLPeer, len(g.NcclPeers))
		for i, p := range g.NcclPeers {
			out.NCCLPeers[i] = store.NCCLPeer{Comm: store.CommHash(p.Comm), Peer: p.Peer, Sent: traffic(p.Sent), Received: traffic(p.Received)}
		}
	}
	return out
}

func bufferKinds(k *agentpb.BufferKinds) store.BufferKinds {
	if k == nil {
		return store.BufferKinds{}
	}
	return store.BufferKinds{Pageable: traffic(k.Pageable), Pinned: traffic(k.Pinned), Device: traffic(k.Device), Managed: traffic(k.Managed)}
}

func traffic(t *agentpb.Traffic) store.Traffic {
	if t == nil {
		return store.Traffic{}
	}
	return store.Traffic{Bytes: t.Bytes, Msgs: t.Msgs}
}

// apply checks a complete snapshot against the rank's last one and makes
// it current.
func (t *Tracker) apply(j *jobState, r *rankState, p *pending, last *Datagram, now time.Time) error {
	np := &p.proc // checked here, then copied into the job's slab
	if !p.hasProc && r.has {
		// No process block: keep the identity and resource use known.
		old := r.cur
		np.Node, np.Host, np.PID, np.CPU, np.MPILibrary, np.Program, np.User = old.Node, old.Host, old.PID, old.CPU, old.MPILibrary, old.Program, old.User
		np.CPUUser, np.CPUSystem, np.Wall, np.MPI = old.CPUUser, old.CPUSystem, old.Wall, old.MPI
		np.VmSize, np.VmPeak, np.VmRSS, np.VmHWM = old.VmSize, old.VmPeak, old.VmRSS, old.VmHWM
		np.IORead, np.IOWrite, np.MPIIORead, np.MPIIOWrite = old.IORead, old.IOWrite, old.MPIIORead, old.MPIIOWrite
		np.IntraNode, np.InterNode, np.AgentDrops = old.IntraNode, old.InterNode, old.AgentDrops
	}
	if np.Reorders == nil && r.has {
		np.Reorders = r.cur.Reorders // cumulative: a snapshot without them keeps the last ones
	}
	if np.GPU == nil && r.has {
		// Cumulative like the rest: a snapshot without the section (sent
		// before CUDA was loaded, or by an agent that leaves it out when
		// nothing changed) keeps the last one.
		np.GPU = r.cur.GPU
	}
	if p.hasDup {
		t.m.drop(ReasonPeer, int(p.n)-1) // Add counts the last one
		return reject(ReasonPeer, "job %s rank %d snapshot %d: peer %d twice", j.id, np.Rank, np.Seq, p.dupPeer)
	}
	if p.rows.n == 0 && np.Peers.Len() > 0 && !np.PeersTruncated {
		t.nodesFromPeers(j, np, &p.rows)
	}
	// A hostile agent could invent node names forever: past a bound the
	// job starts a new table (rows packed earlier keep theirs).
	if j.nodes == nil || j.nodes.Len() > max(4*j.world, t.opt.Limits.MaxNodes) {
		j.nodes = &store.NodeTable{}
	}
	// Rows are ordered by their node's index in the job's table, the order
	// in which its agents first reported the nodes, so usually as they
	// come (sorting 1,024 rows by name at every snapshot was 16% of the
	// daemon's CPU at six times Stampede's load).
	rows := &p.rows
	order := t.order[:0]
	sorted := true
	next := uint32(0) // the index the next row likely has
	size := 0         // the rows packed: each index, then its counters
	for off := 0; off < len(rows.b); {
		name, cls, end := rows.row(off)
		k := j.nodes.IndexNear(name, next)
		sorted = sorted && (len(order) == 0 || k > order[len(order)-1].idx)
		order = append(order, rowRef{k, uint32(len(order)), uint32(off), uint32(cls), uint32(end)})
		size += uvarintLen(uint64(k)) + end - cls
		off, next = end, k+1
	}
	t.order = order
	if !sorted {
		slices.SortStableFunc(order, func(a, b rowRef) int { return cmp.Compare(a.idx, b.idx) })
	}
	var what string // the first counter that went backwards
	if r.has {
		what = backwards(r.cur, np)
	}
	// One pass over the rows: duplicates, totals, decreases since the last
	// snapshot (whose rows are in the same order when packed against the
	// same table), and packing: each row's index, then its counters as the
	// decoder packed them.
	var sent store.Classes
	var before store.NodeRows
	if r.has {
		before = r.cur.ToNodes
	}
	sameTable := r.has && before.Table() == j.nodes
	var (
		c    store.NodeCursor
		k    int
		more bool
	)
	if sameTable {
		c = before.Cursor()
		k, more = c.NextRow()
	}
	// Packed straight into the rows' own array (packed into a scratch
	// buffer and then copied, they were 3% of the daemon's CPU at ten
	// times Stampede).
	b := j.newBytes(size)
	for i, o := range order {
		if i > 0 && o.idx == order[i-1].idx {
			t.m.drop(ReasonPeer, int(p.n)-1) // Add counts the last one
			return reject(ReasonPeer, "job %s rank %d snapshot %d: destination node %q twice", j.id, np.Rank, np.Seq, o.name(rows))
		}
		cl := &rows.c[o.row]
		addClasses(&sent, cl)
		for more && uint32(k) < o.idx {
			k, more = c.NextRow()
		}
		if what == "" && more && uint32(k) == o.idx && c.Less(cl) {
			what = "traffic to node " + o.name(rows)
		}
		b = binary.AppendUvarint(b, uint64(o.idx))
		b = append(b, rows.b[o.cls:o.end]...)
	}
	if what == "" && r.has && !sameTable {
		what = nodesBackwardsByName(before, order, rows)
	}
	if r.has {
		if what != "" {
			t.m.drop(ReasonBackwards, int(p.n)-1) // Add counts the last one
			return reject(ReasonBackwards, "job %s rank %d snapshot %d: %s decreased since snapshot %d", j.id, np.Rank, np.Seq, what, r.cur.Seq)
		}
		s := delta(j.id, r.cur, np, r.sent, sent)
		t.samples = append(t.samples, s)
		if s.Span > 0 {
			j.interval = time.Duration(float64(s.Span) / float64(np.Seq-r.cur.Seq))
		}
		if len(t.samples) >= maxSamples {
			t.flushSamples()
		}
	}
	if np.Final && !(r.has && r.cur.Final) {
		j.finals++
	}
	np.ToNodes = j.nodes.Packed(b, len(order))
	np.Peers = store.PackedPeers(j.keepBytes(np.Peers.Packed()), np.Peers.Len())
	first := !r.has // the rank's first snapshot (of its run)
	r.cur, r.sent, r.has = j.newProcess(np), sent, true
	// While the lists exist they hold exactly the ranks with a snapshot (a
	// restart empties them).
	if j.order != nil {
		if first { // ranks come about in order (the agents' phases)
			i, _ := slices.BinarySearch(j.order, np.Rank)
			j.order, j.procs, j.sums = slices.Insert(j.order, i, np.Rank), slices.Insert(j.procs, i, nil), slices.Insert(j.sums, i, rankSum{})
			for k := i; k < len(j.order); k++ {
				j.ranks[j.order[k]].pos = k
			}
			for c := i / viewChunk; c*viewChunk < len(j.order); c++ {
				j.change(c * viewChunk)
			}
		}
		node := j.nodeIndex(r.cur.Node)
		if old := j.sums[r.pos].node; first {
			j.countNode(node, 1)
		} else if old != node {
			j.countNode(old, -1)
			j.countNode(node, 1)
		}
		j.procs[r.pos], j.sums[r.pos] = r.cur, sumOf(r.cur, sent, node)
		j.change(r.pos)
	}
	if j.start.IsZero() || np.Start.Before(j.start) {
		j.start = np.Start
	}
	j.dirty = true
	if r.gen != j.gen {
		r.gen = j.gen
		j.unsaved++
	}
	if t.m != nil {
		j.waiting = append(j.waiting, arrival{now, np.Time})
	}
	t.m.accept(int(p.n))
	if j.finals >= j.world && len(j.ranks) >= j.world {
		t.finish(j, store.EndFinal, now)
	}
	return nil
}

var saveSeed = maphash.MakeSeed()

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

// viewChunks returns the chunks of references to procs for a new view:
// the last view's where unchanged, else new copies, and brings chunkSums
// up to date with them.
func (j *jobState) viewChunks() [][]*store.Process {
	chunks := make([][]*store.Process, (len(j.procs)+viewChunk-1)/viewChunk)
	sums := make([]chunkSum, len(chunks))
	for c := range chunks {
		lo, hi := c*viewChunk, min((c+1)*viewChunk, len(j.procs))
		if c < len(j.chunks) && (c/64 >= len(j.changed) || j.changed[c/64]&(1<<(c%64)) == 0) {
			chunks[c], sums[c] = j.chunks[c], j.chunkSums[c]
		} else {
			chunks[c], sums[c] = slices.Clone(j.procs[lo:hi]), sumChunk(j.sums[lo:hi])
		}
	}
	j.chunks, j.chunkSums = chunks, sums
	clear(j.changed)
	return chunks
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

// uvarintLen is the length of v as a uvarint.
func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// addClasses adds c to sum in place (Classes.Add copies both, and this is
// done for every node row of every snapshot).
func addClasses(sum, c *store.Classes) {
	sum.P2P.Bytes += c.P2P.Bytes
	sum.P2P.Msgs += c.P2P.Msgs
	sum.Coll.Bytes += c.Coll.Bytes
	sum.Coll.Msgs += c.Coll.Msgs
	sum.RMA.Bytes += c.RMA.Bytes
	sum.RMA.Msgs += c.RMA.Msgs
}

// rowRef is a snapshot's node row: its index in the job's node table and
// where it is in the decoded rows (the row-th, its name at off, its
// counters packed in cls:end).
type rowRef struct {
	idx, row, off, cls, end uint32
}

func (a rowRef) name(rows *nodeRows) string {
	name, _, _ := rows.row(int(a.off))
	return string(name)
}

// backwards names the first cumulative counter that decreased from a to
// b, but for destination nodes (apply compares those as it packs them).
func backwards(a, b *store.Process) string {
	switch {
	case b.CPUUser < a.CPUUser || b.CPUSystem < a.CPUSystem:
		return "CPU time"
	case timeBack(a.Wall, b.Wall) || timeBack(a.MPI, b.MPI):
		return "wall or MPI time"
	case b.Time.Before(a.Time):
		return "snapshot time"
	case b.IORead < a.IORead || b.IOWrite < a.IOWrite || b.MPIIORead < a.MPIIORead || b.MPIIOWrite < a.MPIIOWrite:
		return "I/O bytes"
	case lessTraffic(b.IntraNode, a.IntraNode) || lessTraffic(b.InterNode, a.InterNode):
		return "intra/inter-node traffic"
	}
	// Functions usually come in the same order every snapshot.
	var fa map[string]store.Function
	for i, f := range b.Functions {
		o, ok := store.Function{}, false
		if i < len(a.Functions) && a.Functions[i].Name == f.Name {
			o, ok = a.Functions[i], true
		} else {
			if fa == nil {
				fa = make(map[string]store.Function, len(a.Functions))
				for _, f := range a.Functions {
					fa[f.Name] = f
				}
			}
			o, ok = fa[f.Name]
		}
		if ok && (f.Calls < o.Calls || nsBack(o.TimeNS, f.TimeNS) || nsBack(o.WaitNS, f.WaitNS) || f.BytesSent < o.BytesSent || f.BytesReceived < o.BytesReceived) {
			return "function " + f.Name
		}
	}
	// Both peer lists are sorted by peer; a peer that left a top-K list is
	// not a decrease.
	ca, cb := a.Peers.Cursor(), b.Peers.Cursor()
	pa, ta, more := ca.NextTraffic()
	for {
		pb, tb, ok := cb.NextTraffic()
		if !ok {
			return ""
		}
		for more && pa < pb {
			pa, ta, more = ca.NextTraffic()
		}
		if more && pa == pb && lessClasses(tb, ta) {
			return "traffic to a peer rank"
		}
	}
}

// nodesBackwardsByName names the first destination node whose traffic
// decreased from the rows before, packed against a node table since
// replaced, to the rows now (rare: apply compares rows of one table by
// index).
func nodesBackwardsByName(before store.NodeRows, now []rowRef, rows *nodeRows) string {
	if before.Len() == 0 {
		return ""
	}
	old := make(map[string]store.Classes, before.Len())
	for o := range before.All() {
		old[o.Node] = o.Classes
	}
	for _, n := range now {
		name := n.name(rows)
		if o, ok := old[name]; ok {
			if lessClasses(rows.c[n.row], o) {
				return "traffic to node " + name
			}
		}
	}
	return ""
}

// Measured times may wobble by a little between snapshots (a clock source
// recalibrated, a conversion rounded); a decrease within the tolerance is
// jitter, not a new run. Counts must never decrease.
const (
	timeTolerance    = 1e-3 // seconds
	timeToleranceRel = 1e-3
)

func timeBack(a, b float64) bool { return b < a-max(timeTolerance, timeToleranceRel*a) }

func nsBack(a, b uint64) bool { return b < a && timeBack(float64(a)/1e9, float64(b)/1e9) }

func lessTraffic(a, b store.Traffic) bool { return a.Bytes < b.Bytes || a.Msgs < b.Msgs }

func lessClasses(a, b store.Classes) bool {
	return lessTraffic(a.P2P, b.P2P) || lessTraffic(a.Coll, b.Coll) || lessTraffic(a.RMA, b.RMA)
}

func subTraffic(a, b store.Traffic) store.Traffic {
	return store.Traffic{Bytes: a.Bytes - b.Bytes, Msgs: a.Msgs - b.Msgs}
}

func subUint(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// waitNS is a rank's waits (NETLOOM_WAITS) so far, all functions.
func waitNS(p *store.Process) uint64 {
	var w uint64
	for i := range p.Functions {
		w += p.Functions[i].WaitNS
	}
	return w
}

// delta is what a rank did between two snapshots; sa and sb are what
// they sent.
func delta(job string, a, b *store.Process, sa, sb store.Classes) store.ProcessSample {
	s := store.ProcessSample{Job: job, Rank: b.Rank, Time: b.Time, Span: b.Time.Sub(a.Time),
		CPUUser: b.CPUUser - a.CPUUser, CPUSystem: b.CPUSystem - a.CPUSystem, MPI: max(b.MPI-a.MPI, 0),
		Wait:  float64(subUint(waitNS(b), waitNS(a))) / 1e9,
		VmRSS: b.VmRSS, VmSize: b.VmSize,
		IORead: b.IORead - a.IORead, IOWrite: b.IOWrite - a.IOWrite, MPIIORead: b.MPIIORead - a.MPIIORead, MPIIOWrite: b.MPIIOWrite - a.MPIIOWrite,
		IntraNode: subTraffic(b.IntraNode, a.IntraNode), InterNode: subTraffic(b.InterNode, a.InterNode)}
	// Class totals come from destination nodes; a node absent before
	// counts from zero, so a decrease cannot happen here, but be safe.
	s.Traffic = store.Classes{
		P2P:  store.Traffic{Bytes: subUint(sb.P2P.Bytes, sa.P2P.Bytes), Msgs: subUint(sb.P2P.Msgs, sa.P2P.Msgs)},
		Coll: store.Traffic{Bytes: subUint(sb.Coll.Bytes, sa.Coll.Bytes), Msgs: subUint(sb.Coll.Msgs, sa.Coll.Msgs)},
		RMA:  store.Traffic{Bytes: subUint(sb.RMA.Bytes, sa.RMA.Bytes), Msgs: subUint(sb.RMA.Msgs, sa.RMA.Msgs)},
	}
	return s
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

func (t *Tracker) finish(j *jobState, reason string, now time.Time) {
	j.finished, j.endReason, j.finishedAt, j.dirty = true, reason, now, true
	// The job ended with its last snapshot, by the agents' clocks.
	j.end = time.Time{}
	for rank, r := range j.ranks {
		if r.pend != nil {
			t.abandon(rankKey{j.id, rank}, r, ReasonIncomplete)
		}
		if r.has && r.cur.Time.After(j.end) {
			j.end = r.cur.Time
		}
	}
	if j.end.IsZero() {
		j.end = now
	}
	t.save(j, true)
	j.saved = true
}

func (t *Tracker) dropJob(j *jobState) {
	for rank, r := range j.ranks {
		if r.pend != nil {
			t.abandon(rankKey{j.id, rank}, r, ReasonIncomplete)
		}
	}
	t.forget(j)
	if t.live.Jobs[j.id] != nil {
		t.publishAll()
	}
}

// forget removes a job from the live table.
func (t *Tracker) forget(j *jobState) {
	delete(t.jobs, j.id)
	t.opt.Admit.release(j.owner)
}

// Tick times out reassembly and jobs, saves running jobs on their
// schedule and flushes samples. Call it about once a second.
func (t *Tracker) Tick(now time.Time) {
	for key := range t.pending {
		j := t.jobs[key.job]
		if j == nil {
			delete(t.pending, key)
			continue
		}
		r := j.ranks[key.rank]
		if r == nil || r.pend == nil {
			delete(t.pending, key)
			continue
		}
		if now.Sub(r.pend.first) > t.opt.ReassemblyTimeout {
			t.abandon(key, r, ReasonIncomplete)
		}
	}
	t.ranks = 0
	for _, j := range t.jobs {
		t.ranks += len(j.ranks)
	}
	period := t.processSavePeriod()
	for _, j := range t.jobs {
		switch {
		case !j.finished && now.Sub(j.lastSeen) > t.jobTimeout(j):
			t.finish(j, store.EndTimeout, now)
		case j.finished && now.Sub(j.finishedAt) > t.opt.Linger && now.Sub(j.lastSeen) > t.opt.Linger:
			t.forget(j)
			t.publishAll()
		case !j.finished && j.unsaved > 0 && now.Sub(j.lastSave) >= t.opt.SaveEvery:
			procs := now.Sub(j.procsSaved) >= period
			t.save(j, procs)
			j.lastSave = now
			if procs {
				j.procsSaved = now
			}
		}
	}
	t.flushSamples()
}

// processSavePeriod is how often a running job's processes are saved:
// ProcessSaveEvery, or longer so that the ranks tracked at the last tick
// are stored at ProcessRowsPerSecond.
func (t *Tracker) processSavePeriod() time.Duration {
	return max(t.opt.ProcessSaveEvery, time.Duration(t.ranks)*time.Second/time.Duration(t.opt.ProcessRowsPerSecond))
}

func (t *Tracker) jobTimeout(j *jobState) time.Duration {
	d := time.Duration(t.opt.JobTimeoutIntervals) * j.interval
	if d < t.opt.JobTimeout {
		d = t.opt.JobTimeout
	}
	return d
}

// Flush saves every job with unsaved changes and flushes samples (at
// shutdown, and at the end of an offline report).
func (t *Tracker) Flush() {
	for _, j := range t.jobs {
		if j.unsaved > 0 || (j.finished && !j.saved) {
			t.save(j, true)
		}
	}
	t.flushSamples()
}

func (t *Tracker) flushSamples() {
	if len(t.samples) == 0 {
		return
	}
	if t.opt.Samples != nil {
		t.opt.Samples(t.samples)
	}
	// The next batch is likely as large: grown from nothing by append, the
	// batches' copies were 1.5% of the daemon's CPU at ten times Stampede.
	t.samples = make([]store.ProcessSample, 0, min(len(t.samples), maxSamples))
}

// maxSamples is the most samples handed on at once.
const maxSamples = 4096

// save hands the job's summary to SaveJob, with its changed processes
// when procs is set.
func (t *Tracker) save(j *jobState, procs bool) {
	// Samples first, so a stored job's series is complete up to it.
	t.flushSamples()
	if t.opt.SaveJob == nil {
		j.allSaved()
		return
	}
	out := &store.Job{JobSummary: t.view(j).JobSummary}
	if procs {
		j.rebuildLists()
		out.Processes = make([]store.Process, 0, j.unsaved)
		for _, rank := range j.order {
			if r := j.ranks[rank]; r.gen == j.gen {
				out.Processes = append(out.Processes, *r.cur)
			}
		}
		j.allSaved()
	}
	t.opt.SaveJob(out)
}

// rebuildLists makes the job's lists of reporting ranks when they are
// missing: the ranks with a snapshot in order, with their processes and
// what they add to the summary, which apply keeps up to date (a rank's
// first snapshot inserts it) until a rank restarts (rare).
func (j *jobState) rebuildLists() {
	if j.order != nil {
		return
	}
	j.order = make([]int, 0, len(j.ranks))
	for rank, r := range j.ranks {
		if r.has {
			j.order = append(j.order, rank)
		}
	}
	slices.Sort(j.order)
	j.procs, j.sums = make([]*store.Process, len(j.order)), make([]rankSum, len(j.order))
	j.nodeRanks, j.nodesUsed = nil, 0
	for i, rank := range j.order {
		r := j.ranks[rank]
		node := j.nodeIndex(r.cur.Node)
		r.pos, j.procs[i], j.sums[i] = i, r.cur, sumOf(r.cur, r.sent, node)
		j.countNode(node, 1)
	}
	j.chunks, j.chunkSums = nil, nil
}

// allSaved marks every rank of the job saved.
func (j *jobState) allSaved() {
	j.gen++
	j.unsaved = 0
}

// view returns the job's immutable view, rebuilding it when it changed.
func (t *Tracker) view(j *jobState) *store.Job {
	if j.view != nil && !j.dirty {
		return j.view
	}
	v := &store.Job{JobSummary: store.JobSummary{ID: j.id, State: store.JobRunning, Start: j.start, Ranks: j.world}}
	if j.finished {
		v.State, v.EndReason, v.End = store.JobFinished, j.endReason, j.end
	}
	j.rebuildLists()
	v = store.NewLiveJob(v.JobSummary, j.viewChunks())
	v.TraceDir = j.traceDir
	summarizeChunks(&v.JobSummary, j.chunkSums, j.procs, j.nodesUsed)
	if j.owner != "" {
		v.User = j.owner
	}
	j.view, j.dirty = v, false
	j.shown = append(j.shown, j.waiting...)
	j.waiting = j.waiting[:0]
	return v
}

// Publish returns the current immutable view of all live jobs. Views of
// jobs that did not change are reused.
func (t *Tracker) Publish(now time.Time) *Live {
	changed := false
	for id, j := range t.jobs {
		// A view rebuilt by a save is newer than the published one too.
		if (j.dirty && !t.throttled(j, now)) || j.view == nil || t.live.Jobs[id] != j.view {
			changed = true
			break
		}
	}
	if changed || len(t.live.Jobs) != len(t.jobs) {
		t.publish(now)
		t.live.Time = now // not yet seen by anyone
	}
	running := 0
	for _, j := range t.jobs {
		if !j.finished {
			running++
		}
	}
	finished := len(t.jobs) - running
	t.m.addJobs(running-t.running, finished-t.finished)
	t.running, t.finished = running, finished
	return t.live
}

// throttled says whether a large, running job's changed view waits for
// its next rebuild (ViewEvery after the last). A tenth of ViewEvery is
// slack for late ticks: a tick that came a hair under ViewEvery after the
// last rebuild would make the view wait a whole further period.
func (t *Tracker) throttled(j *jobState, now time.Time) bool {
	return j.view != nil && !j.finished && len(j.ranks) >= t.opt.LargeJob && now.Sub(j.viewAt) < t.opt.ViewEvery-t.opt.ViewEvery/10
}

// publish rebuilds the views that changed, except throttled ones, which
// keep their last view until their time comes.
func (t *Tracker) publish(now time.Time) {
	l := &Live{Time: t.live.Time, Jobs: make(map[string]*store.Job, len(t.jobs))}
	for id, j := range t.jobs {
		if len(j.ranks) == 0 || !j.anyRank() {
			continue
		}
		if j.dirty && t.throttled(j, now) {
			l.Jobs[id] = j.view
			continue
		}
		if j.dirty || j.view == nil {
			j.viewAt = now
		}
		l.Jobs[id] = t.view(j)
	}
	t.live = l
	t.observeShown()
}

// observeShown counts the snapshots that the published views show for the
// first time.
func (t *Tracker) observeShown() {
	if t.m == nil {
		return
	}
	now := time.Now()
	for id, j := range t.jobs {
		if len(j.shown) > 0 && t.live.Jobs[id] == j.view {
			t.m.visible(now, j.shown)
			j.shown = j.shown[:0]
		}
	}
}

// publishAll rebuilds every changed view.
func (t *Tracker) publishAll() {
	l := &Live{Time: t.live.Time, Jobs: make(map[string]*store.Job, len(t.jobs))}
	for id, j := range t.jobs {
		if len(j.ranks) == 0 || !j.anyRank() {
			continue
		}
		l.Jobs[id] = t.view(j)
	}
	t.live = l
	t.observeShown()
}

func (j *jobState) anyRank() bool {
	for _, r := range j.ranks {
		if r.has {
			return true
		}
	}
	return false
}

type nodeSum struct {
	node string
	c    store.Classes
}

// KnowNode tells the tracker the node of a job's rank before that rank's
// snapshots are added, so that other ranks' traffic to it can be placed on
// its node (nodesFromPeers) whatever order snapshots come in.
func (t *Tracker) KnowNode(job string, rank int, node string) {
	if t.hints == nil {
		t.hints = map[rankKey]string{}
	}
	t.hints[rankKey{job, rank}] = node
}

// nodeOf is the node of rank in job j ("" while unknown): the one its
// current snapshot reports, else a hint.
func (t *Tracker) nodeOf(j *jobState, rank int) string {
	if r := j.ranks[rank]; r != nil && r.has {
		return r.cur.Node
	}
	return t.hints[rankKey{j.id, rank}]
}

// nodesFromPeers makes a snapshot's destination-node rows, and its intra-
// and inter-node totals, from its peer rows and the node each peer rank
// reports of itself. Agents send peer rows only: a rank learning the other
// ranks' nodes would take MPI traffic the application never asked for. A
// peer whose node is not known yet (every rank reports once at its start, so
// this is rare) is left out for now; counters are cumulative, so its traffic
// shows in the rank's next snapshot.
func (t *Tracker) nodesFromPeers(j *jobState, np *store.Process, rows *nodeRows) {
	sums := t.nodeSums[:0]
	for peer, c := range np.Peers.Traffic() {
		node := np.Node
		if peer != np.Rank {
			node = t.nodeOf(j, peer)
		}
		if node == "" {
			continue
		}
		k := slices.IndexFunc(sums, func(s nodeSum) bool { return s.node == node })
		if k < 0 {
			k = len(sums)
			sums = append(sums, nodeSum{node: node})
		}
		sums[k].c = sums[k].c.Add(c)
	}
	var intra, inter store.Traffic
	for i := range sums {
		rows.add([]byte(sums[i].node), &sums[i].c)
		if sums[i].node == np.Node {
			intra = sums[i].c.Total()
		} else {
			inter = inter.Add(sums[i].c.Total())
		}
	}
	if np.IntraNode == (store.Traffic{}) && np.InterNode == (store.Traffic{}) {
		np.IntraNode, np.InterNode = intra, inter
	}
	t.nodeSums = sums[:0]
}
