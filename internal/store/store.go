// Package store is Netloom's storage interface. Engines live in
// subpackages (sqlite, and later postgres); daemon.OpenStore picks one
// from the --db URL, and storetest checks any engine against it.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/netloom/netloom/internal/fabric"
)

// Store keeps the fabric's history: versioned topology, forwarding tables,
// events and port samples. Implementations are safe for concurrent use;
// writes are expected from one writer goroutine.
//
// One database may hold several fabrics, each written by its own
// collector: a store is opened with the name of the fabric it writes
// (DefaultFabric unless told), and topology versions, forwarding tables
// and events carry it. Reads show every fabric of the database; a
// database with one fabric reads exactly as that fabric's own.
type Store interface {
	// SaveTopology records t as the store's fabric's topology from time
	// at on. When t equals that fabric's latest stored version nothing new
	// is written and changed is false.
	SaveTopology(ctx context.Context, t *fabric.Topology, at time.Time) (version int64, changed bool, err error)
	// TopologyAt returns the topology in force at time at: of each fabric
	// the latest version saved at or before it, merged (fabric.Merge) when
	// there are several (see MergeVersions for the version it reports).
	// ErrNotFound when there is none.
	TopologyAt(ctx context.Context, at time.Time) (*fabric.Topology, Version, error)
	// FabricTopologyAt is TopologyAt of one fabric alone, as saved.
	FabricTopologyAt(ctx context.Context, name string, at time.Time) (*fabric.Topology, Version, error)
	// Versions lists topology versions of every fabric whose validity
	// overlaps [from, to], by start time.
	Versions(ctx context.Context, from, to time.Time) ([]Version, error)

	// SaveForwardingTables records the store's fabric's routing in force
	// from time at on.
	SaveForwardingTables(ctx context.Context, ft fabric.ForwardingTables, at time.Time) error
	// ForwardingTablesAt returns the routing in force at time at: every
	// fabric's tables (switch GUIDs are unique), and the newest start time
	// among them.
	ForwardingTablesAt(ctx context.Context, at time.Time) (fabric.ForwardingTables, time.Time, error)

	// AddEvents records events of the store's fabric.
	AddEvents(ctx context.Context, ev []fabric.Event) error
	// Events returns events of every fabric in [from, to], newest first,
	// at most limit, each with its Fabric set.
	Events(ctx context.Context, q EventQuery) ([]fabric.Event, error)
	// EventCount is how many events Events would return without a limit
	// (q.Limit is ignored): the total of a list it cut.
	EventCount(ctx context.Context, q EventQuery) (int, error)

	// AddPortSamples stores one sweep's samples. All samples of one call
	// share a Time. Once it returns nil the samples survive a crash.
	AddPortSamples(ctx context.Context, s []fabric.PortSample) error
	// PortSamples returns the samples of the given ports in [from, to]
	// (by sample time), oldest first, per port. Where raw samples were
	// past their retention and rolled up (see Retention), rollup points
	// stand in for them: one per port and bucket, deltas summed, Span the
	// summed spans (so Rate is the mean over the time measured), Reset and
	// Saturated set when any sample in it had them, Time the newest
	// sample's. PortSeries tells raw samples and rollups apart.
	PortSamples(ctx context.Context, ports []fabric.PortRef, from, to time.Time) (map[fabric.PortRef][]fabric.PortSample, error)
	// PortSeries is PortSamples with each point's resolution, the number
	// of raw samples it sums and its peak per-sample rates.
	PortSeries(ctx context.Context, ports []fabric.PortRef, from, to time.Time) (map[fabric.PortRef][]PortPoint, error)
	// LatestSamples returns, for every port, its newest sample at or before
	// at, no older than at-window. For a port whose raw samples there are
	// gone (window > 0), the rollup point of the bucket that holds at, or
	// ended within the window, stands in: its rates are the bucket's means.
	LatestSamples(ctx context.Context, at time.Time, window time.Duration) ([]fabric.PortSample, error)

	// JobStore keeps MPI jobs (jobs.go).
	JobStore

	// Prune deletes data older than the given times (zero time: keep
	// all), first rolling samples up into the coarser resolutions that
	// still keep them. It works in short transactions and returns when
	// everything is done.
	Prune(ctx context.Context, r Retention) error
	// PruneStep does one short transaction of what Prune does and says
	// whether more is left, so that a caller with a single writer can
	// interleave other writes between steps. Steps are idempotent and
	// may be stopped at any point (or the process may crash): the next
	// steps carry on from what is stored.
	PruneStep(ctx context.Context, r Retention) (more bool, err error)
	// Stats reports storage use.
	Stats(ctx context.Context) (Stats, error)
	Close() error
}

// Version is one stored topology version.
type Version struct {
	ID    int64     `json:"version"`
	From  time.Time `json:"from"`
	Until time.Time `json:"until,omitempty"` // zero while current
	Nodes int       `json:"nodes"`
	Links int       `json:"links"`
	// Fabric is the fabric the version belongs to; empty for a merged
	// view of several (MergeVersions).
	Fabric string `json:"fabric,omitempty"`
}

// EventQuery selects events.
type EventQuery struct {
	From, To time.Time
	Kind     string      // "" for all
	Node     fabric.GUID // 0 for all
	Limit    int
}

// Rollup resolutions. Fabric port samples and process samples past their
// raw retention are folded into 5-minute rollups, and those past theirs
// into 1-hour rollups. Buckets are aligned to the Unix epoch and hold the
// samples whose end time falls in [start, start+width).
const (
	Rollup5m = 5 * time.Minute
	Rollup1h = time.Hour
)

// Retention is the oldest time kept per kind of data; a zero time keeps
// all of that kind.
//
// Samples past their raw retention are not lost when a rollup keeps them:
// each is folded into the finest rollup whose retention still covers its
// bucket (5-minute, else 1-hour), else deleted. A rollup whose retention
// is no longer than the resolution below it therefore keeps nothing. Raw
// cutoffs are rounded down to 5 minutes and 5-minute cutoffs to 1 hour,
// so a bucket is never split between resolutions.
type Retention struct {
	// Samples: raw fabric port samples (one per port and sweep).
	Samples time.Time
	// PortRollups5m and PortRollups1h: rollups of port samples.
	PortRollups5m, PortRollups1h time.Time
	// ProcessSamples: raw per-interval samples of MPI ranks.
	ProcessSamples time.Time
	// ProcessRollups5m and ProcessRollups1h: rollups of process samples.
	ProcessRollups5m, ProcessRollups1h time.Time
	// LinkJobSamples: link attribution per direction, job and interval
	// (per-job totals stay with the job).
	LinkJobSamples   time.Time
	Events, Topology time.Time
	// Jobs: finished jobs that ended before it go, with their processes,
	// process samples and rollups, and link totals.
	Jobs time.Time
}

// PortPoint is one point of a port's series: a raw sample or a rollup.
type PortPoint struct {
	fabric.PortSample
	// Resolution is 0 for a raw sample, else the rollup's bucket width.
	Resolution time.Duration
	// Samples is how many raw samples the point sums (1 when raw).
	Samples int
	// Peak is, per counter of PeakCounters, the highest per-sample rate
	// (per second) among the samples the point sums: what a hot link's
	// busiest interval looked like after the mean was rolled up.
	Peak [NumPeaks]float64
}

// PeakCounters are the counters whose peak per-sample rate rollups keep.
var PeakCounters = [NumPeaks]fabric.Counter{fabric.XmitData, fabric.RcvData, fabric.XmitWait}

// NumPeaks is the number of PeakCounters.
const NumPeaks = 3

// PeakRate returns the point's peak per-second rate of counter c, and
// false when rollups do not keep a peak for c.
func (p *PortPoint) PeakRate(c fabric.Counter) (float64, bool) {
	for i, pc := range PeakCounters {
		if pc == c {
			return p.Peak[i], true
		}
	}
	return 0, false
}

// RawPoint makes the point of one raw sample: its own rate is its peak.
func RawPoint(s fabric.PortSample) PortPoint {
	p := PortPoint{PortSample: s, Samples: 1}
	for i, c := range PeakCounters {
		p.Peak[i] = s.Rate(c)
	}
	return p
}

// Stats reports what a store holds.
type Stats struct {
	Bytes       int64 `json:"bytes"`
	PortSamples int64 `json:"port_samples"`
	// PortRollups counts rollup points (a port's bucket) of any width.
	PortRollups int64 `json:"port_rollup_points"`
	Versions    int64 `json:"topology_versions"`
	Events      int64 `json:"events"`
	Jobs        int64 `json:"jobs"`
}

// ErrNotFound is returned when nothing is stored for the asked time or key.
var ErrNotFound = errors.New("not found")
