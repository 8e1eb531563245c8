package ingest

import (
	"errors"
	"fmt"
	"hash/maphash"
	"time"

	"github.com/netloom/netloom/internal/store"
)

// The Tracker, its options, and a datagram's way in (AddItem): the job's
// owner and admission checked, then the datagram added to its snapshot.
// The tracker's rooms, each calling only rooms after it in this list
// (TestDatagramPathOneWay checks that no file calls back into one that
// called it):
//
//   - tracker.go: the Tracker and AddItem;
//   - tracker_validate.go: a complete snapshot checked against the rank's
//     last one (counters never go back) and made current;
//   - tracker_lifecycle.go: jobs that end, time out, linger and are
//     forgotten (Tick);
//   - tracker_reassembly.go: chunks assembled into snapshots, destination
//     nodes made from peers;
//   - tracker_publish.go: the immutable views and the saves (Publish,
//     Flush);
//   - tracker_deltas.go: what a rank did between two snapshots, the
//     samples handed on;
//   - convert.go: the agent's messages copied into the store's types;
//   - tracker_state.go: a job's and a rank's state, and their slabs.

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
	// PastOwner, when set, says whose stored history a job id has: the
	// owner of the stored job of that id ("" when there is none, or it
	// names no user). A job leaves the tracker Linger after it ends; a
	// datagram that would start it again is then checked against its
	// history, which never changes owner: another user's datagram (or one
	// naming no user) is dropped (job_mismatch), and the owner's own
	// re-run starts a new run as before. When it errs the datagram is
	// dropped too (its agent sends again). Called from Add for a job not
	// live, so never for most datagrams.
	PastOwner func(job string) (string, error)
	// Connections, when set, receives the network connections each
	// rank's snapshot carried (chunk 0, decode_conn.go; none too: those it
	// held before are closed), and JobEnded each job's
	// end (every rank final, or timed out; by the agents' clocks): the
	// daemon's flows-to-jobs index (internal/flowjobs). Called from Add
	// and Tick; a report's Conns are the datagram's own, not to be kept.
	Connections func(ConnReport)
	JobEnded    func(job string, end time.Time)
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
	// pastOwners are the owners of stored jobs whose ids datagrams of
	// another user came under, as PastOwner said: the next ones are
	// refused without asking again, for pastOwnerFor.
	pastOwners map[string]pastOwner
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
		if err := t.history(d, user, now); err != nil {
			return err
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
	if d.Chunk == 0 && t.opt.Connections != nil {
		t.opt.Connections(d.conns.report(d, j.owner))
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

var saveSeed = maphash.MakeSeed()
