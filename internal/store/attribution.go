package store

import (
	"context"
	"time"

	"github.com/netloom/netloom/internal/fabric"
)

// AttributionStore keeps link attribution: how many bytes of each job's
// inter-node traffic crossed each link direction, per interval, and each
// job's running totals per direction.
type AttributionStore interface {
	// AddLinkJobSamples stores one interval's attribution and adds it to
	// the jobs' per-direction totals. Samples of one call may span jobs.
	AddLinkJobSamples(ctx context.Context, s []LinkJobSample) error
	// LinkJobs sums, per job and direction, the bytes attributed to the
	// directions leaving the given ports in [from, to]; nil ports: every
	// direction with traffic in the range.
	LinkJobs(ctx context.Context, ports []fabric.PortRef, from, to time.Time) ([]LinkJobBytes, error)
	// JobLinks returns a job's directions by bytes, largest first (at most
	// limit; 0: all): summed over [from, to], or the job's running totals
	// when both are zero.
	JobLinks(ctx context.Context, job string, from, to time.Time, limit int) ([]LinkJobBytes, error)
	// JobLinkCount is how many directions JobLinks would return without a
	// limit: the total of a list it cut.
	JobLinkCount(ctx context.Context, job string, from, to time.Time) (int, error)
	// JobSummary returns one job's summary without its processes.
	// ErrNotFound when unknown.
	JobSummary(ctx context.Context, id string) (*JobSummary, error)
}

// LinkJobSample is what one job sent over one link direction in one
// interval. The direction is named by its sending port.
type LinkJobSample struct {
	Time  time.Time     // end of the interval
	Span  time.Duration // length of the interval
	Job   string
	Port  fabric.PortRef
	Bytes uint64
}

// LinkJobBytes is a sum of one job's bytes over one direction.
type LinkJobBytes struct {
	Job   string         `json:"job"`
	Port  fabric.PortRef `json:"port"`
	Bytes uint64         `json:"bytes"`
}

// SchedInfo is what the batch scheduler says about a job.
type SchedInfo struct {
	Scheduler string    `json:"scheduler"` // "slurm"
	ID        string    `json:"id"`
	ArrayID   string    `json:"array_id,omitempty"`
	Name      string    `json:"name"`
	User      string    `json:"user"`
	UID       uint32    `json:"uid"`
	Partition string    `json:"partition,omitempty"`
	State     string    `json:"state"`     // Netloom's word (sched.State)
	RawState  string    `json:"raw_state"` // the scheduler's
	Nodes     []string  `json:"nodes"`
	CPUs      int       `json:"cpus,omitempty"`
	Submit    time.Time `json:"submit,omitzero"`
	Start     time.Time `json:"start,omitzero"`
	End       time.Time `json:"end,omitzero"`
	ExitCode  int       `json:"exit_code"`
	Source    string    `json:"source,omitempty"` // squeue or sacct
}

// Attribution is the part of a job's inter-node traffic that was routed
// over the fabric's links, and what could not be.
type Attribution struct {
	// Bytes is the inter-node traffic routed over the links: each byte
	// counted once, however many links it crossed.
	Bytes uint64 `json:"bytes"`
	// UnmappedNodes are the job's node names that map to no host adapter;
	// UnmappedBytes the inter-node traffic from or to them, not attributed.
	UnmappedNodes []string `json:"unmapped_nodes"`
	UnmappedBytes uint64   `json:"unmapped_bytes"`
	// Errors says why some traffic between mapped nodes was not routed
	// (a destination without forwarding entries, a link down).
	Errors    []string  `json:"errors,omitempty"`
	Intervals int       `json:"intervals"`
	Updated   time.Time `json:"updated,omitzero"`
}

// HostLinkTraffic is a job's traffic as its nodes' host links counted it
// on the fabric: the only source for a job without an agent. A node shared
// with other jobs counts all of its traffic here.
type HostLinkTraffic struct {
	Sent          uint64    `json:"bytes_sent"`     // from the nodes into the fabric
	Received      uint64    `json:"bytes_received"` // from the fabric to the nodes
	Nodes         int       `json:"nodes_mapped"`
	UnmappedNodes []string  `json:"unmapped_nodes"`
	Intervals     int       `json:"intervals"`
	Updated       time.Time `json:"updated,omitzero"`
}

// Traffic sources of a job.
const (
	SourceAgent          = "agent"           // MPI agents' per-rank counts
	SourceFabricCounters = "fabric_counters" // host-link counters of its nodes
)
