package fabric

import (
	"context"
	"fmt"
	"time"
)

// Source is where a fabric's topology, counters and forwarding tables come
// from: the InfiniBand management stack (package ib) or a simulation
// (package sim). A new fabric type is one package implementing it.
type Source interface {
	// Discover returns the fabric as it is now.
	Discover(ctx context.Context) (*Topology, error)
	// Sweep reads the counters of the given ports of t. It returns one
	// reading per port, in order; a port that could not be read within the
	// options' timeout and retries has Err set and never stalls the rest.
	Sweep(ctx context.Context, t *Topology, ports []PortRef, opt SweepOptions) ([]PortReading, error)
	// ResetCounters clears the counters of the given ports (used for 32-bit
	// counters near saturation when reset-on-threshold is on).
	ResetCounters(ctx context.Context, t *Topology, ports []PortRef) error
	// ForwardingTables reads every switch's linear forwarding table.
	ForwardingTables(ctx context.Context, t *Topology) (ForwardingTables, error)
	Close() error
}

// SweepOptions bound one sweep.
type SweepOptions struct {
	Timeout  time.Duration // per query; default 200ms
	Retries  int           // per port after the first try; default 2
	Parallel int           // queries in flight at once; default 64
	// PortCountersOnly reads PortCounters alone, as ibqueryerrors does: the
	// error counters and the 32-bit data and packet counters, without
	// PortCountersExtended (half the queries where the 64-bit counters exist).
	PortCountersOnly bool
}

// WithDefaults fills zero fields.
func (o SweepOptions) WithDefaults() SweepOptions {
	if o.Timeout <= 0 {
		o.Timeout = 200 * time.Millisecond
	}
	if o.Retries < 0 {
		o.Retries = 0
	} else if o.Retries == 0 {
		o.Retries = 2
	}
	if o.Parallel <= 0 {
		o.Parallel = 64
	}
	return o
}

// Event is a change in the fabric worth recording.
type Event struct {
	Time   time.Time `json:"time"`
	Kind   string    `json:"kind"`
	Node   GUID      `json:"guid,omitempty"`
	Port   int       `json:"port,omitempty"`
	Detail string    `json:"detail"`
	// Fabric is the fabric the event happened in, as the store read it
	// back (the fabric name of the collector that recorded it).
	Fabric string `json:"fabric,omitempty"`
}

// Event kinds.
const (
	EventDiscovered      = "fabric_discovered"
	EventNodeAdded       = "node_added"
	EventNodeRemoved     = "node_removed"
	EventLinkUp          = "link_up"
	EventLinkDown        = "link_down"
	EventLIDChanged      = "lid_changed"
	EventCounterReset    = "counter_reset"
	EventPortUnreachable = "port_unreachable"
	EventPortRecovered   = "port_recovered"
	EventRoutesChanged   = "routes_changed"
)

// Changes lists the events that turn topology old into cur. A nil old is
// the empty fabric.
func Changes(old, cur *Topology, at time.Time) []Event {
	if old == nil {
		old = &Topology{}
		_ = old.index()
	}
	var ev []Event
	add := func(kind string, g GUID, port int, format string, a ...any) {
		ev = append(ev, Event{Time: at, Kind: kind, Node: g, Port: port, Detail: fmt.Sprintf(format, a...)})
	}
	for i := range cur.Nodes {
		n := &cur.Nodes[i]
		o, ok := old.Node(n.GUID)
		if !ok {
			add(EventNodeAdded, n.GUID, 0, "%s %q added", n.Type, n.Description)
			continue
		}
		if o.LID != n.LID {
			add(EventLIDChanged, n.GUID, 0, "%q LID %d -> %d", n.Description, o.LID, n.LID)
		}
	}
	for i := range old.Nodes {
		n := &old.Nodes[i]
		if _, ok := cur.Node(n.GUID); !ok {
			add(EventNodeRemoved, n.GUID, 0, "%s %q removed", n.Type, n.Description)
		}
	}
	for _, l := range cur.Links {
		if o, ok := old.LinkAt(l.A); !ok || o.B != l.B {
			add(EventLinkUp, l.A.GUID, l.A.Port, "link %s up (%s %s)", l.ID(), l.Width, l.Speed)
		}
	}
	for _, l := range old.Links {
		if c, ok := cur.LinkAt(l.A); !ok || c.B != l.B {
			add(EventLinkDown, l.A.GUID, l.A.Port, "link %s down", l.ID())
		}
	}
	return ev
}
