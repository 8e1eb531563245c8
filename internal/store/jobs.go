package store

import (
	"context"
	"sync"
	"time"
)

// JobStore keeps MPI jobs as the agents reported them: a summary per job,
// each rank's latest cumulative counters, and per-interval process samples.
type JobStore interface {
	// SaveJob inserts or replaces the job's summary and the processes in
	// j.Processes; stored processes of the job that j does not carry are
	// kept, so a caller may save only the ranks that changed.
	//
	// The summary is this store's fabric's collector's part of the job
	// (the ranks that report to it). Where collectors of several fabrics
	// saved parts of one job id, the job's summary as read (Jobs, Job,
	// JobSummary) is their join (JoinJobParts); its processes are all of
	// theirs.
	SaveJob(ctx context.Context, j *Job) error
	// JobPart returns the summary this store's collector last saved of
	// the job (a job saved before collectors had fabric names counts as
	// every collector's). ErrNotFound when it saved none.
	JobPart(ctx context.Context, id string) (*JobSummary, error)
	// SharedJobs lists the finished jobs that ended at or after since of
	// which this store's collector and another saved parts: those whose
	// stored summary is a join of several.
	SharedJobs(ctx context.Context, since time.Time) ([]string, error)
	// AddProcessSamples stores per-interval samples of ranks.
	AddProcessSamples(ctx context.Context, s []ProcessSample) error
	// Jobs lists job summaries matching q and the number that match in all.
	Jobs(ctx context.Context, q JobQuery) ([]JobSummary, int, error)
	// Job returns a job with all its stored processes, by rank.
	// ErrNotFound when unknown.
	Job(ctx context.Context, id string) (*Job, error)
	// ProcessSamples returns the samples of the job's ranks in [from, to],
	// oldest first, per rank; nil ranks means all. Where raw samples were
	// past their retention and rolled up, rollup points stand in for them
	// (see ProcessSample.Resolution).
	ProcessSamples(ctx context.Context, job string, ranks []int, from, to time.Time) (map[int][]ProcessSample, error)

	AttributionStore
}

// Job states.
const (
	JobRunning  = "running"
	JobFinished = "finished"
)

// Why a job ended.
const (
	EndFinal   = "final"   // every rank sent its MPI_Finalize report
	EndTimeout = "timeout" // no datagram for too long
	EndRestart = "daemon_restart"
)

// Traffic is bytes and messages.
type Traffic struct {
	Bytes uint64 `json:"bytes"`
	Msgs  uint64 `json:"msgs"`
}

// Add returns t + u.
func (t Traffic) Add(u Traffic) Traffic { return Traffic{t.Bytes + u.Bytes, t.Msgs + u.Msgs} }

// Classes is traffic split by class of MPI operation.
type Classes struct {
	P2P  Traffic `json:"p2p"`
	Coll Traffic `json:"coll"`
	RMA  Traffic `json:"rma"`
}

// Add returns c + d.
func (c Classes) Add(d Classes) Classes {
	return Classes{c.P2P.Add(d.P2P), c.Coll.Add(d.Coll), c.RMA.Add(d.RMA)}
}

// Total is the sum over classes.
func (c Classes) Total() Traffic { return c.P2P.Add(c.Coll).Add(c.RMA) }

// Class returns one class by name: p2p, coll or rma (anything else: the total).
func (c Classes) Class(name string) Traffic {
	switch name {
	case "p2p":
		return c.P2P
	case "coll":
		return c.Coll
	case "rma":
		return c.RMA
	}
	return c.Total()
}

// JobSummary is one job's identity and totals over its ranks.
type JobSummary struct {
	ID        string    `json:"id"`
	State     string    `json:"state"`
	EndReason string    `json:"end_reason,omitempty"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end,omitzero"`
	Updated   time.Time `json:"updated"` // newest snapshot
	Duration  float64   `json:"duration_seconds"`

	Ranks      int    `json:"ranks"`     // MPI_COMM_WORLD size
	Reporting  int    `json:"reporting"` // ranks heard from
	Finalized  int    `json:"finalized"` // ranks that sent their final report
	Nodes      int    `json:"nodes"`
	User       string `json:"user,omitempty"`
	Program    string `json:"program,omitempty"`
	MPILibrary string `json:"mpi_library,omitempty"`

	CPUSeconds  float64 `json:"cpu_seconds"` // user + system, all ranks
	CPUPercent  float64 `json:"cpu_percent"` // mean over ranks of CPU time / wall time
	MPISeconds  float64 `json:"mpi_seconds"`
	MPIPercent  float64 `json:"mpi_percent"`       // mean over ranks of MPI time / wall time
	Memory      uint64  `json:"memory_bytes"`      // sum of VmRSS
	MemoryPeak  uint64  `json:"memory_peak_bytes"` // sum of VmHWM
	IORead      uint64  `json:"io_read_bytes"`
	IOWrite     uint64  `json:"io_write_bytes"`
	MPIIORead   uint64  `json:"mpiio_read_bytes"`
	MPIIOWrite  uint64  `json:"mpiio_write_bytes"`
	Traffic     Classes `json:"traffic"` // sent, all ranks
	Total       Traffic `json:"total"`
	IntraNode   Traffic `json:"intra_node"`
	InterNode   Traffic `json:"inter_node"`
	AgentDrops  uint64  `json:"agent_datagrams_dropped"`
	PeersCapped bool    `json:"peers_truncated"` // some rank sent only its top peers
	// TrafficModel is TrafficPhysical when the ranks' MPI library told
	// what it really sent, else TrafficLogical.
	TrafficModel string `json:"traffic_model,omitempty"`
	// TraceDir is where the ranks write their replay traces (netloom run
	// --trace): what GET /jobs/{job}/model replays once the job ended.
	TraceDir string `json:"trace_dir,omitempty"`

	// Scheduler is the batch scheduler's view of the job (nil: it does
	// not know the job). Agent is whether MPI agents reported it, and
	// TrafficSource where its traffic numbers come from (SourceAgent,
	// SourceFabricCounters).
	Scheduler     *SchedInfo       `json:"scheduler,omitempty"`
	Agent         bool             `json:"agent"`
	TrafficSource string           `json:"traffic_source,omitempty"`
	Attribution   *Attribution     `json:"attribution,omitempty"`
	HostLinks     *HostLinkTraffic `json:"host_links,omitempty"`
}

// Process is one rank's state: counters cumulative since MPI_Init, as of
// Time.
type Process struct {
	Rank       int       `json:"rank"`
	Node       string    `json:"node"`
	Host       string    `json:"host"`
	PID        uint32    `json:"pid"`
	CPU        int32     `json:"cpu"`
	MPILibrary string    `json:"mpi_library,omitempty"`
	Program    string    `json:"program,omitempty"`
	User       string    `json:"user,omitempty"`
	Start      time.Time `json:"start"`
	Time       time.Time `json:"time"`
	Seq        uint64    `json:"seq"`
	Final      bool      `json:"final"`

	// ProcessUsage is the counters and gauges the agent reports
	// (record.gen.go, generated from agent.proto's Process).
	ProcessUsage

	Functions      []Function `json:"functions"`
	Regions        []Region   `json:"regions"`
	ToNodes        NodeRows   `json:"to_nodes"`
	Peers          PeerRows   `json:"peers"` // sorted by peer
	PeersTruncated bool       `json:"peers_truncated"`
	// GPU is the rank's GPU side (nil: its agent reported none, as for a
	// process without CUDA).
	GPU *GPU `json:"gpu,omitempty"`
	// Reorders are the netloom_reorder calls the rank took part in
	// (reorder.go; nil: none).
	Reorders []Reorder `json:"reorders,omitempty"`
}

// Sent is what the rank sent, by class (summed over destination nodes,
// which the agent always reports completely).
func (p *Process) Sent() Classes {
	var c Classes
	for n := range p.ToNodes.All() {
		c = c.Add(n.Classes)
	}
	return c
}

// Physical says whether the rank's traffic to each node can be taken from
// what its MPI library really sent (the monitored counts of its peer
// rows), rather than from the application's calls (its node rows): it
// has rows for every peer it sent to, and they carry monitored counts
// (the agent gives them to every row of a rank whose library tells).
func (p *Process) Physical() bool {
	if p.PeersTruncated {
		return false
	}
	c := p.Peers.Cursor()
	_, _, _, has, _ := c.Next(nil, nil)
	return has
}

// Function is the use of one MPI function by one rank.
type Function struct {
	Name          string `json:"name"`
	Calls         uint64 `json:"calls"`
	TimeNS        uint64 `json:"time_ns"`
	BytesSent     uint64 `json:"bytes_sent"`
	BytesReceived uint64 `json:"bytes_received"`
	// WaitNS is the time in the barrier NETLOOM_WAITS puts before each
	// call of a blocking collective (waiting for the last rank: load
	// imbalance) or in the probe before each MPI_Recv (waiting for a late
	// sender). TimeNS is then the call's own time.
	WaitNS uint64 `json:"wait_ns,omitempty"`
}

// Region is an application-marked phase of one rank.
type Region struct {
	Name      string `json:"name"`
	Entries   uint64 `json:"entries"`
	TimeNS    uint64 `json:"time_ns"`
	MPITimeNS uint64 `json:"mpi_time_ns"`
	// WaitNS is, of the MPI time, the waits NETLOOM_WAITS times (before
	// collectives, for late senders) inside the region.
	WaitNS uint64 `json:"wait_ns,omitempty"`
	Classes
}

// NodeTraffic is what a rank sent to all ranks of one node.
type NodeTraffic struct {
	Node string `json:"node"`
	Classes
}

// PeerTraffic is what a rank sent to one peer rank.
type PeerTraffic struct {
	Peer int `json:"peer"`
	Classes
	// Histogram counts point-to-point messages by size: bin i holds sizes
	// s with 2^(i-1) <= s < 2^i, bin 0 empty messages.
	Histogram []uint64 `json:"size_histogram,omitempty"`
	// Monitored is what the MPI library really sent the peer, from Open
	// MPI's monitoring when it is on (nil: not known).
	Monitored *Physical `json:"monitored,omitempty"`
}

// Physical is a rank's traffic with one peer as its MPI library carried
// it: point-to-point messages (P2P), the messages collectives were
// decomposed into (Coll) and one-sided puts and accumulates (RMA), all
// sent by the rank to the peer; Fetched is one-sided data the rank got
// from the peer, which the peer's adapter sent.
type Physical struct {
	Classes
	Fetched Traffic `json:"fetched"`
}

// TrafficModel values: where a job's link attribution comes from.
const (
	// TrafficPhysical: the messages the MPI library sent (Open MPI's
	// monitoring), collectives as decomposed.
	TrafficPhysical = "physical"
	// TrafficLogical: the application's calls, a collective counted as
	// its root sending to every rank (MPInside's view).
	TrafficLogical = "logical"
)

// Job is a summary with its processes, ordered by rank.
type Job struct {
	JobSummary
	Processes []Process `json:"processes"`
	// ranks, for a live job's view (NewLiveJob): its processes by
	// reference, copied into Processes by Full.
	ranks *liveRanks
}

type liveRanks struct {
	once   sync.Once
	chunks [][]*Process
	procs  []Process
}

// NewLiveJob makes a job whose processes are kept by reference, for a live
// view that is rebuilt every time one of them changes: copying every rank
// of every large job twice a second was, at five times Stampede's load,
// the daemon's largest source of garbage. The references come in chunks,
// in rank order, so that successive views share the chunks that did not
// change (cloning the references of all of a large job's ranks at every
// rebuild was still 6% of the daemon's CPU at ten times Stampede). Its
// Processes are nil; Full gives a job with them. Neither the chunks nor
// the processes may ever change.
func NewLiveJob(s JobSummary, chunks [][]*Process) *Job {
	return &Job{JobSummary: s, ranks: &liveRanks{chunks: chunks}}
}

// Full returns the job with its processes: j itself, or for a live job
// (NewLiveJob) a copy with Processes filled in, made once and shared by
// every caller (and by copies of j).
func (j *Job) Full() *Job {
	if j.ranks == nil {
		return j
	}
	l := j.ranks
	l.once.Do(func() {
		n := 0
		for _, c := range l.chunks {
			n += len(c)
		}
		l.procs = make([]Process, 0, n)
		for _, c := range l.chunks {
			for _, p := range c {
				l.procs = append(l.procs, *p)
			}
		}
	})
	return &Job{JobSummary: j.JobSummary, Processes: l.procs}
}

// EachProcess calls f with each process, in rank order, without copying
// them.
func (j *Job) EachProcess(f func(*Process)) {
	if j.ranks == nil {
		for i := range j.Processes {
			f(&j.Processes[i])
		}
		return
	}
	for _, c := range j.ranks.chunks {
		for _, p := range c {
			f(p)
		}
	}
}

// ProcessSample is what one rank did over one interval.
type ProcessSample struct {
	Job       string        `json:"-"`
	Rank      int           `json:"rank"`
	Time      time.Time     `json:"time"` // end of the interval
	Span      time.Duration `json:"span"`
	CPUUser   float64       `json:"cpu_user_seconds"`
	CPUSystem float64       `json:"cpu_system_seconds"`
	MPI       float64       `json:"mpi_seconds"`
	// Wait is, of MPI, the waits NETLOOM_WAITS times (before collectives,
	// for late senders); 0 without.
	Wait       float64 `json:"wait_seconds,omitempty"`
	VmRSS      uint64  `json:"vm_rss"`  // at the end
	VmSize     uint64  `json:"vm_size"` // at the end
	IORead     uint64  `json:"io_read_bytes"`
	IOWrite    uint64  `json:"io_write_bytes"`
	MPIIORead  uint64  `json:"mpiio_read_bytes"`
	MPIIOWrite uint64  `json:"mpiio_write_bytes"`
	Traffic    Classes `json:"traffic"`
	IntraNode  Traffic `json:"intra_node"`
	InterNode  Traffic `json:"inter_node"`
	// SampleExtra is the sampled fields declared after the sample's layout
	// was frozen (record.gen.go; codec stores them in the row's tail).
	SampleExtra

	// Resolution is 0 for a raw sample. A rollup point (Resolution is its
	// bucket width) sums the Samples raw samples of its bucket: CPU and
	// MPI seconds, I/O and traffic are sums, Span the summed spans, Time
	// the newest sample's; VmRSS and VmSize are the means, and the
	// fields below keep the peaks.
	Resolution time.Duration `json:"resolution,omitempty"`
	Samples    int           `json:"samples,omitempty"`
	// CPUPeak is the highest per-sample CPU use, (user+system)/span (1 =
	// one core busy), to a thousandth; BytesPeak the highest per-sample
	// sent bytes per second, to a byte; VmRSSMax and VmSizeMax the highest
	// memory. Rollup seconds are kept to the microsecond.
	CPUPeak   float64 `json:"cpu_peak,omitempty"`
	BytesPeak float64 `json:"bytes_peak_per_second,omitempty"`
	VmRSSMax  uint64  `json:"vm_rss_max,omitempty"`
	VmSizeMax uint64  `json:"vm_size_max,omitempty"`
}

// AddUsage adds u's CPU, MPI and wait seconds, I/O bytes and traffic to x: what
// sums over samples or ranks (memory, span and time are the caller's).
func (x *ProcessSample) AddUsage(u *ProcessSample) {
	x.CPUUser += u.CPUUser
	x.CPUSystem += u.CPUSystem
	x.MPI += u.MPI
	x.Wait += u.Wait
	x.IORead += u.IORead
	x.IOWrite += u.IOWrite
	x.MPIIORead += u.MPIIORead
	x.MPIIOWrite += u.MPIIOWrite
	x.Traffic = x.Traffic.Add(u.Traffic)
	x.IntraNode = x.IntraNode.Add(u.IntraNode)
	x.InterNode = x.InterNode.Add(u.InterNode)
	x.SampleExtra.Add(&u.SampleExtra)
}

// JobQuery selects and orders job summaries.
type JobQuery struct {
	State   string   // JobRunning, JobFinished or "" for all
	Sort    string   // one of JobSortKeys; default "start"
	Asc     bool     // default newest/largest first
	Limit   int      // 0: no limit
	Offset  int      //
	Exclude []string // job ids to leave out (those the caller has live)
	// Owner, when set, keeps only that user's jobs (JobSummary.Owner).
	Owner string
	// From and To, when set, keep only jobs that ran at some time in
	// [From, To] (running jobs run until now).
	From, To time.Time
}

// Owner is the user a job belongs to: the scheduler's record when it has
// one (the batch system authenticated the submitter), else the user the
// agents reported (verified by MUNGE when the daemon requires it).
func (j *JobSummary) Owner() string {
	if j.Scheduler != nil && j.Scheduler.User != "" {
		return j.Scheduler.User
	}
	return j.User
}

// Overlaps says whether the job ran at some time in [from, to]; a zero
// bound is open.
func (j *JobSummary) Overlaps(from, to time.Time) bool {
	if !to.IsZero() && j.Start.After(to) {
		return false
	}
	return from.IsZero() || j.End.IsZero() || !j.End.Before(from)
}

// JobSortKeys are the metrics a job list can be ordered by.
var JobSortKeys = []string{"start", "end", "updated", "duration", "ranks", "nodes", "cpu", "cpu_seconds", "mpi", "mpi_seconds",
	"memory", "memory_peak", "io", "bytes", "msgs", "inter_node_bytes", "intra_node_bytes", "p2p_bytes", "coll_bytes", "rma_bytes",
	"p2p_msgs", "coll_msgs", "rma_msgs", "id"}

// JobSortValue returns the value of a sort key for a summary, so that
// engines and in-memory lists order the same way. Unknown keys give 0.
func JobSortValue(j *JobSummary, key string) float64 {
	switch key {
	case "start":
		return float64(j.Start.UnixNano())
	case "end":
		return float64(j.End.UnixNano())
	case "updated":
		return float64(j.Updated.UnixNano())
	case "duration":
		return j.Duration
	case "ranks":
		return float64(j.Ranks)
	case "nodes":
		return float64(j.Nodes)
	case "cpu":
		return j.CPUPercent
	case "cpu_seconds":
		return j.CPUSeconds
	case "mpi":
		return j.MPIPercent
	case "mpi_seconds":
		return j.MPISeconds
	case "memory":
		return float64(j.Memory)
	case "memory_peak":
		return float64(j.MemoryPeak)
	case "io":
		return float64(j.IORead + j.IOWrite + j.MPIIORead + j.MPIIOWrite)
	case "bytes":
		return float64(j.Total.Bytes)
	case "msgs":
		return float64(j.Total.Msgs)
	case "inter_node_bytes":
		return float64(j.InterNode.Bytes)
	case "intra_node_bytes":
		return float64(j.IntraNode.Bytes)
	case "p2p_bytes":
		return float64(j.Traffic.P2P.Bytes)
	case "coll_bytes":
		return float64(j.Traffic.Coll.Bytes)
	case "rma_bytes":
		return float64(j.Traffic.RMA.Bytes)
	case "p2p_msgs":
		return float64(j.Traffic.P2P.Msgs)
	case "coll_msgs":
		return float64(j.Traffic.Coll.Msgs)
	case "rma_msgs":
		return float64(j.Traffic.RMA.Msgs)
	}
	return 0
}

// ValidJobSort reports whether key is one of JobSortKeys.
func ValidJobSort(key string) bool {
	for _, k := range JobSortKeys {
		if k == key {
			return true
		}
	}
	return false
}
