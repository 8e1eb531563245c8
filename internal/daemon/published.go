package daemon

import (
	"github.com/netloom/netloom/internal/alert"
	"github.com/netloom/netloom/internal/analysis"
	"github.com/netloom/netloom/internal/api"
	"github.com/netloom/netloom/internal/ingest"
)

// The daemon's state has three lifetimes:
//
//   - Fixed before the activities start (Daemon.cfg, nodeOverrides,
//     scheduler, agents.addr, agents.published): plain fields, written
//     by New and Run before any goroutine reads them.
//   - Published: what the activities tell the API, the metrics, the
//     alerts and each other, in one immutable snapshot (published,
//     Daemon.pub) replaced whole, so that a reader loading it once sees
//     every fact as of one moment.
//   - Derived: caches of views computed from a snapshot's facts
//     (fabricView, mergedJobs, sharedLive), each remembering the facts it
//     was computed from and used only while they are the snapshot's.
//
// What one goroutine keeps for itself (the fabric goroutine's previous
// readings and forwarding tables, an aggregator's tracker) is in no
// snapshot.

// published is every fact the daemon's activities publish. Each field has
// one writer, its activity, which publishes a copy of the snapshot with
// its new value (Daemon.publish); nothing reachable from a published
// snapshot changes afterwards.
type published struct {
	// state is the fabric as last discovered and swept (the fabric
	// goroutine; an API daemon's poller); nil before the first discovery.
	state *api.FabricState
	// polledNodes maps node names to the fabric an API daemon read,
	// published with the state it maps.
	polledNodes *analysis.NodeMap
	// others are the other collectors' fabrics on the database, shared
	// the recently finished jobs they reported parts of (othersLoop); nil
	// when the database holds no other fabric.
	others *otherFabrics
	shared *sharedJobs
	// live is the agents' live jobs, every aggregator's view merged
	// (agentSide.publish); nil before the first datagram.
	live *ingest.Live
	// auth is the agent authentication in force once the agents' socket
	// is open (openIngest).
	auth *api.AgentAuth
	// sched is the scheduler's jobs (schedLoop), attrib the link
	// attribution (attributionLoop); nil until their first update.
	sched  *schedView
	attrib *AttributionView
	// alerts are the alerts as last evaluated, active then recently
	// resolved (alertLoop): nil before its start, empty until one fires.
	alerts []alert.Alert
	// behind says why the daemon falls behind, nil while it does not
	// (watchBehind; an API daemon's poller).
	behind *api.Behind
	// backlog is the writes held while the database is unreachable (the
	// writer); nil before the first outage.
	backlog *backlogInfo
}

// snap returns the published snapshot (never nil).
func (d *Daemon) snap() *published {
	if p := d.pub.Load(); p != nil {
		return p
	}
	return &nothing
}

// nothing is the snapshot before New publishes one (a Daemon built bare,
// in tests).
var nothing published

// publish replaces the snapshot with a copy that set changed. set may run
// more than once (when another activity published meanwhile): it only
// assigns the fields its activity owns.
func (d *Daemon) publish(set func(*published)) {
	for {
		old := d.pub.Load()
		var next published
		if old != nil {
			next = *old
		}
		set(&next)
		if d.pub.CompareAndSwap(old, &next) {
			return
		}
	}
}
