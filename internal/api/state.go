// Package api serves Netloom's JSON API under /api/v1 and Prometheus
// metrics. It reads live state through a snapshot function and history
// through the store; it never writes.
package api

import (
	"time"

	"github.com/netloom/netloom/internal/fabric"
)

// FabricState is one immutable snapshot of what the daemon knows about the
// fabric now. The daemon publishes a new one after every discovery and
// sweep; readers never lock.
type FabricState struct {
	Topology *fabric.Topology
	Version  int64
	Since    time.Time      // when this topology version was first seen
	Routes   *fabric.Routes // nil until forwarding tables were read
	// Readings are the raw counters of the last sweep; Samples the last
	// per-interval changes. Both keyed by port.
	Readings    map[fabric.PortRef]*fabric.PortReading
	Samples     map[fabric.PortRef]*fabric.PortSample
	Unreachable map[fabric.PortRef]time.Time // port -> since when
	Sweep       SweepInfo
}

// SweepInfo describes the last sweep.
type SweepInfo struct {
	Time    time.Time `json:"time"`
	Seconds float64   `json:"seconds"`
	Ports   int       `json:"ports"`
	Errors  int       `json:"errors"`
	Count   int64     `json:"count"` // sweeps since start
}
