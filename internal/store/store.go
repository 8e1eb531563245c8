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
type Store interface {
	// SaveTopology records t as the topology from time at on. When t equals
	// the latest stored version nothing new is written and changed is false.
	SaveTopology(ctx context.Context, t *fabric.Topology, at time.Time) (version int64, changed bool, err error)
	// TopologyAt returns the topology in force at time at (the latest
	// version saved at or before it). ErrNotFound when there is none.
	TopologyAt(ctx context.Context, at time.Time) (*fabric.Topology, Version, error)
	// Versions lists topology versions whose validity overlaps [from, to].
	Versions(ctx context.Context, from, to time.Time) ([]Version, error)

	// SaveForwardingTables records the routing in force from time at on.
	SaveForwardingTables(ctx context.Context, ft fabric.ForwardingTables, at time.Time) error
	// ForwardingTablesAt returns the routing in force at time at.
	ForwardingTablesAt(ctx context.Context, at time.Time) (fabric.ForwardingTables, time.Time, error)

	AddEvents(ctx context.Context, ev []fabric.Event) error
	// Events returns events in [from, to], newest first, at most limit.
	Events(ctx context.Context, q EventQuery) ([]fabric.Event, error)

	// AddPortSamples stores one sweep's samples. All samples of one call
	// share a Time. Once it returns nil the samples survive a crash.
	AddPortSamples(ctx context.Context, s []fabric.PortSample) error
	// PortSamples returns the samples of the given ports in [from, to],
	// oldest first, per port.
	PortSamples(ctx context.Context, ports []fabric.PortRef, from, to time.Time) (map[fabric.PortRef][]fabric.PortSample, error)
	// LatestSamples returns, for every port, its newest sample at or before
	// at, no older than at-window.
	LatestSamples(ctx context.Context, at time.Time, window time.Duration) ([]fabric.PortSample, error)

	// JobStore keeps MPI jobs (jobs.go).
	JobStore

	// Prune deletes data older than the given times (zero time: keep all).
	Prune(ctx context.Context, r Retention) error
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
}

// EventQuery selects events.
type EventQuery struct {
	From, To time.Time
	Kind     string      // "" for all
	Node     fabric.GUID // 0 for all
	Limit    int
}

// Retention is the oldest time kept per kind of data.
type Retention struct {
	Samples, Events, Topology time.Time
	// Jobs: finished jobs that ended before it go, with their processes
	// (their samples follow Samples).
	Jobs time.Time
}

// Stats reports what a store holds.
type Stats struct {
	Bytes       int64 `json:"bytes"`
	PortSamples int64 `json:"port_samples"`
	Versions    int64 `json:"topology_versions"`
	Events      int64 `json:"events"`
	Jobs        int64 `json:"jobs"`
}

// ErrNotFound is returned when nothing is stored for the asked time or key.
var ErrNotFound = errors.New("not found")
