package alert

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/health"
)

// Input is what one evaluation sees: the fabric after a sweep or a
// discovery, the events recorded since the last evaluation, and whether
// the daemon keeps up.
type Input struct {
	Time     time.Time
	Topology *fabric.Topology
	// Readings are the last sweep's raw counters, Samples its per-interval
	// changes, SweepTime when it ended (a sweep is counted once).
	Readings    map[fabric.PortRef]*fabric.PortReading
	Samples     map[fabric.PortRef]*fabric.PortSample
	SweepTime   time.Time
	Unreachable map[fabric.PortRef]time.Time
	Events      []fabric.Event
	// Behind lists why the daemon falls behind (nil: it keeps up), since
	// BehindSince.
	Behind      []string
	BehindSince time.Time
}

// Job is a job an alert names: one that crossed what the alert is about
// since the alert's window began, running or finished since.
type Job struct {
	ID   string `json:"id"`
	User string `json:"user,omitempty"`
	// Bytes is the job's traffic over the alert's link since the alert's
	// window began (0: its routes cross the link; no traffic was seen).
	Bytes uint64 `json:"bytes"`
	// State is the job's state when it was looked up: JobRunning or
	// JobFinished ("" when the finder does not say).
	State string `json:"state,omitempty"`
	// Start and End are the job's time range (End zero while running).
	Start time.Time `json:"start,omitzero"`
	End   time.Time `json:"end,omitzero"`
}

// Job states, as the jobs API names them.
const (
	JobRunning  = "running"
	JobFinished = "finished"
)

// JobFinder names the jobs that crossed the link directions leaving ports
// (both of a link's ends for the whole link) at some time in [since, now]:
// those running now whose routes cross them, and those that ran in that
// range (finished since) with traffic attributed to them there or, for a
// job whose traffic is not known, routes over them; with their traffic
// over them since since.
type JobFinder interface {
	JobsCrossing(ports []fabric.PortRef, since time.Time) []Job
}

// Subject is what an alert is about.
type Subject struct {
	// Kind: "port", "link", "direction" (of a link, leaving Port),
	// "fabric" or "daemon".
	Kind       string          `json:"kind"`
	Port       *fabric.PortRef `json:"port,omitempty"`
	Node       string          `json:"node,omitempty"`
	Remote     *fabric.PortRef `json:"remote,omitempty"`
	RemoteNode string          `json:"remote_node,omitempty"`
	Link       string          `json:"link,omitempty"`
	// PortName and RemoteName are the ports' names where the fabric
	// gives them (an Ethernet interface, "swp1"; fabric.Node.PortNames).
	PortName   string `json:"port_name,omitempty"`
	RemoteName string `json:"remote_name,omitempty"`
}

// String names the subject for people.
func (s Subject) String() string {
	end := func(p *fabric.PortRef, name, port string) string {
		switch {
		case name == "":
			return p.String()
		case port != "":
			return fmt.Sprintf("%s %s (port %d, %s)", name, port, p.Port, p.String())
		}
		return fmt.Sprintf("%s port %d (%s)", name, p.Port, p.String())
	}
	switch {
	case s.Kind == "direction" && s.Remote != nil:
		return end(s.Port, s.Node, s.PortName) + " -> " + end(s.Remote, s.RemoteNode, s.RemoteName)
	case s.Kind == "link" && s.Remote != nil:
		return "link " + end(s.Port, s.Node, s.PortName) + " - " + end(s.Remote, s.RemoteNode, s.RemoteName)
	case s.Port != nil:
		return end(s.Port, s.Node, s.PortName)
	}
	return s.Kind
}

// States of an alert.
const (
	Pending  = "pending"
	Firing   = "firing"
	Resolved = "resolved"
)

// Alert is one rule's alert about one subject.
type Alert struct {
	// ID is stable for a rule and subject (Alertmanager's fingerprint is
	// taken from the labels, which are as stable).
	ID       string  `json:"id"`
	Rule     string  `json:"rule"`
	Kind     Kind    `json:"kind"`
	Severity string  `json:"severity"`
	State    string  `json:"state"`
	Subject  Subject `json:"subject"`
	Counter  string  `json:"counter,omitempty"`
	// Event is the fabric change a fabric_changed alert is about.
	Event     string  `json:"event,omitempty"`
	Value     float64 `json:"value"`
	Threshold float64 `json:"threshold"`
	Summary   string  `json:"summary"`
	// Jobs are the jobs that crossed the subject since JobsSince (the
	// alert's window before it became active), running or finished.
	Jobs      []Job     `json:"jobs"`
	JobsSince time.Time `json:"jobs_since,omitzero"`
	// ActiveAt: the condition first held; StartsAt: the alert fired;
	// EndsAt: it resolved.
	ActiveAt time.Time `json:"active_at"`
	StartsAt time.Time `json:"starts_at,omitzero"`
	EndsAt   time.Time `json:"ends_at,omitzero"`
	Updated  time.Time `json:"updated"`

	key    string
	ports  []fabric.PortRef // the link directions whose jobs are named
	jobsAt time.Time
}

// Users lists the users of the alert's jobs, sorted, without repeats.
func (a *Alert) Users() []string {
	var u []string
	for _, j := range a.Jobs {
		if j.User != "" && !slices.Contains(u, j.User) {
			u = append(u, j.User)
		}
	}
	slices.Sort(u)
	return u
}

// JobList is the alert's jobs as "ID (user)", comma-separated, with
// finished ones marked "ID (user, finished)".
func (a *Alert) JobList() string {
	s := make([]string, len(a.Jobs))
	for i, j := range a.Jobs {
		var notes []string
		if j.User != "" {
			notes = append(notes, j.User)
		}
		if j.State == JobFinished {
			notes = append(notes, "finished")
		}
		s[i] = j.ID
		if len(notes) > 0 {
			s[i] += " (" + strings.Join(notes, ", ") + ")"
		}
	}
	return strings.Join(s, ", ")
}

// candidate is one rule's condition holding for one subject now.
type candidate struct {
	key     string
	subject Subject
	counter string
	event   string
	value   float64
	summary string
	ports   []fabric.PortRef
	since   time.Time // when the condition began, if known (else now)
}

type countEntry struct {
	t time.Time
	c fabric.Counter
	d uint64
}

type fabricChange struct {
	ev    fabric.Event
	ports []fabric.PortRef
	link  *fabric.Link
}

// Engine evaluates the rules. It belongs to one goroutine.
type Engine struct {
	cfg    Config
	rules  []Rule
	finder JobFinder

	watch     [fabric.NumCounters]time.Duration // counter_increase: longest window per counter
	fine      [fabric.NumCounters]time.Duration // counter_increase: shortest window per counter
	coarse    [fabric.NumCounters]time.Duration // past fine, increases are summed in steps this long (0: never)
	hist      map[fabric.PortRef][]countEntry   // nonzero increases of watched counters
	flaps     map[fabric.PortRef][]time.Time    // link (by its A end) -> down/up event times
	flapLink  map[fabric.PortRef]fabric.Link
	changes   []fabricChange
	prevTopo  *fabric.Topology
	lastSweep time.Time
	sweepCand map[string][]candidate // last sweep's candidates of sweep-driven rules
	// trendWin is the longest error_trend window (0: no such rule);
	// trend holds, per receiving port that counted errors within it,
	// its samples since (health points).
	trendWin time.Duration
	trend    map[fabric.PortRef][]health.Point

	active map[string]*Alert
	recent []*Alert // resolved, oldest first
}

// NewEngine builds an engine for cfg's enabled rules; finder may be nil.
func NewEngine(cfg Config, finder JobFinder) *Engine {
	cfg = cfg.WithDefaults()
	e := &Engine{cfg: cfg, rules: cfg.Enabled(), finder: finder, hist: map[fabric.PortRef][]countEntry{},
		flaps: map[fabric.PortRef][]time.Time{}, flapLink: map[fabric.PortRef]fabric.Link{},
		sweepCand: map[string][]candidate{}, active: map[string]*Alert{}, trend: map[fabric.PortRef][]health.Point{}}
	for _, r := range e.rules {
		if r.Kind == ErrorTrend {
			e.trendWin = max(e.trendWin, r.Window)
		}
		if r.Kind == CounterIncrease {
			for _, c := range r.Counters {
				e.watch[c] = max(e.watch[c], r.Window)
				if e.fine[c] == 0 || r.Window < e.fine[c] {
					e.fine[c] = r.Window
				}
			}
		}
	}
	for c := range e.coarse {
		// A window of an hour or more (port_errors_slow's day) is counted
		// in steps of 1/96 of it for increases older than the shortest
		// window (or one step), so a port with errors at every sweep keeps
		// ~100 entries, not one per sweep; the long window's far edge is
		// then that coarse.
		if e.watch[c] >= time.Hour {
			e.coarse[c] = e.watch[c] / 96
			e.fine[c] = min(e.fine[c], e.coarse[c])
		}
	}
	return e
}

// Rules are the rules in force.
func (e *Engine) Rules() []Rule { return slices.Clone(e.rules) }

// sweepDriven rules are evaluated on new sweeps only; between sweeps their
// last result stands.
func sweepDriven(k Kind) bool {
	switch k {
	case CounterIncrease, CounterTotal, Congestion, Utilization, ErrorTrend:
		return true
	}
	return false
}

// holdFor is how long a rule's condition must hold before it fires.
func holdFor(r *Rule) time.Duration {
	switch r.Kind {
	case LinkDegraded, Congestion, Utilization, PortUnreachable, DaemonBehind:
		return r.Window
	}
	return 0
}

// Evaluate runs every rule on in and returns the alerts that started
// firing or resolved (copies), for delivery.
func (e *Engine) Evaluate(in Input) []Alert {
	now := in.Time
	newSweep := in.Topology != nil && !in.SweepTime.IsZero() && in.SweepTime.After(e.lastSweep)
	if newSweep {
		e.lastSweep = in.SweepTime
		e.record(in)
	}
	e.recordEvents(in)
	var changed []Alert
	seen := map[string]bool{}
	for i := range e.rules {
		r := &e.rules[i]
		var cands []candidate
		switch {
		case sweepDriven(r.Kind) && !newSweep:
			cands = e.sweepCand[r.Name]
		default:
			cands = e.evalRule(r, in)
			if sweepDriven(r.Kind) {
				e.sweepCand[r.Name] = cands
			}
		}
		for _, c := range cands {
			key := r.Name + "|" + c.key
			seen[key] = true
			a := e.active[key]
			if a == nil {
				a = &Alert{ID: fingerprint(key), key: key, Rule: r.Name, Kind: r.Kind, Severity: r.Severity, State: Pending,
					Threshold: r.Threshold, ActiveAt: now, Jobs: []Job{}}
				if !c.since.IsZero() && c.since.Before(now) {
					a.ActiveAt = c.since
				}
				e.active[key] = a
			}
			a.Subject, a.Counter, a.Event, a.Value, a.Summary, a.ports, a.Updated = c.subject, c.counter, c.event, c.value, c.summary, c.ports, now
			if a.State == Pending && now.Sub(a.ActiveAt) >= holdFor(r) {
				a.State, a.StartsAt = Firing, now
				a.JobsSince = a.ActiveAt.Add(-r.Window)
				e.findJobs(a, now)
				changed = append(changed, e.copyOf(a))
			} else if a.State == Firing && now.Sub(a.jobsAt) >= jobRefresh {
				e.findJobs(a, now)
			}
		}
	}
	for _, key := range slices.Sorted(maps.Keys(e.active)) {
		if seen[key] {
			continue
		}
		a := e.active[key]
		delete(e.active, key)
		if a.State != Firing {
			continue
		}
		a.State, a.EndsAt, a.Updated = Resolved, now, now
		e.recent = append(e.recent, a)
		changed = append(changed, e.copyOf(a))
	}
	e.prune(now)
	if in.Topology != nil {
		e.prevTopo = in.Topology
	}
	return changed
}

// jobRefresh is how often a firing alert's jobs are looked up again.
const jobRefresh = 15 * time.Second

func (e *Engine) findJobs(a *Alert, now time.Time) {
	a.jobsAt = now
	if e.finder == nil || len(a.ports) == 0 {
		return
	}
	jobs := e.finder.JobsCrossing(a.ports, a.JobsSince)
	// Running jobs first, then those that finished, the latest first;
	// within each the most traffic first.
	slices.SortFunc(jobs, func(x, y Job) int {
		if xf, yf := x.State == JobFinished, y.State == JobFinished; xf != yf {
			if xf {
				return 1
			}
			return -1
		}
		if c := y.End.Compare(x.End); c != 0 {
			return c
		}
		if c := cmp.Compare(y.Bytes, x.Bytes); c != 0 {
			return c
		}
		return cmp.Compare(x.ID, y.ID)
	})
	if jobs == nil {
		jobs = []Job{}
	}
	a.Jobs = jobs
}

func (e *Engine) copyOf(a *Alert) Alert {
	c := *a
	c.Jobs = slices.Clone(a.Jobs)
	c.ports = slices.Clone(a.ports)
	return c
}

func fingerprint(key string) string {
	h := fnv.New64a()
	h.Write([]byte(key))
	return fmt.Sprintf("%016x", h.Sum64())
}

// Alerts returns the active alerts (firing, then pending) and the recently
// resolved ones, newest first within each; copies.
func (e *Engine) Alerts() []Alert {
	out := make([]Alert, 0, len(e.active)+len(e.recent))
	for _, a := range e.active {
		out = append(out, e.copyOf(a))
	}
	slices.SortFunc(out, func(x, y Alert) int {
		if x.State != y.State {
			if x.State == Firing {
				return -1
			}
			return 1
		}
		if c := y.ActiveAt.Compare(x.ActiveAt); c != 0 {
			return c
		}
		return cmp.Compare(x.key, y.key)
	})
	for i := len(e.recent) - 1; i >= 0; i-- {
		out = append(out, e.copyOf(e.recent[i]))
	}
	return out
}

// Firing returns copies of the firing alerts.
func (e *Engine) Firing() []Alert {
	var out []Alert
	for _, key := range slices.Sorted(maps.Keys(e.active)) {
		if a := e.active[key]; a.State == Firing {
			out = append(out, e.copyOf(a))
		}
	}
	return out
}

// record keeps the nonzero increases of watched counters from a sweep.
func (e *Engine) record(in Input) {
	for p, s := range in.Samples {
		for c := fabric.FirstError; c < fabric.NumCounters; c++ {
			if e.watch[c] > 0 && s.Delta[c] > 0 {
				e.hist[p] = append(e.hist[p], countEntry{t: in.SweepTime, c: c, d: s.Delta[c]})
			}
		}
		if e.watch[fabric.XmitWait] > 0 && s.Delta[fabric.XmitWait] > 0 {
			e.hist[p] = append(e.hist[p], countEntry{t: in.SweepTime, c: fabric.XmitWait, d: s.Delta[fabric.XmitWait]})
		}
		if e.trendWin > 0 {
			// A port's series starts at its first error (or retrain); a
			// clean port costs nothing.
			pt := health.PointOf(s)
			if _, ok := e.trend[p]; ok || (!pt.Reset && pt.Symbol+pt.Integrity+pt.Rcv+pt.Recovers+pt.Downed > 0) {
				h := append(e.trend[p], pt)
				if len(h) > maxTrendPoints {
					h = h[len(h)-maxTrendPoints:]
				}
				e.trend[p] = h
			}
		}
	}
}

// maxTrendPoints bounds the samples an error_trend rule keeps per port
// (a day of 10-second sweeps; longer windows see the newest).
const maxTrendPoints = 8640

// fabricChangeKinds are the events fabric_changed alerts on.
var fabricChangeKinds = []string{fabric.EventNodeAdded, fabric.EventNodeRemoved, fabric.EventLinkUp, fabric.EventLinkDown,
	fabric.EventLIDChanged, fabric.EventRoutesChanged}

func (e *Engine) recordEvents(in Input) {
	for _, ev := range in.Events {
		if !slices.Contains(fabricChangeKinds, ev.Kind) {
			continue
		}
		ch := fabricChange{ev: ev}
		if ev.Kind == fabric.EventLinkUp || ev.Kind == fabric.EventLinkDown {
			p := fabric.PortRef{GUID: ev.Node, Port: ev.Port}
			// A link that went down is found in the topology before.
			for _, t := range []*fabric.Topology{in.Topology, e.prevTopo} {
				if t == nil {
					continue
				}
				if l, ok := t.LinkAt(p); ok {
					c := *l
					ch.link = &c
					ch.ports = []fabric.PortRef{l.A, l.B}
					break
				}
			}
			if ch.link == nil {
				ch.ports = []fabric.PortRef{p}
			}
			e.flaps[p] = append(e.flaps[p], ev.Time)
			if ch.link != nil {
				e.flapLink[p] = *ch.link
			}
		}
		e.changes = append(e.changes, ch)
	}
}

// prune forgets what no rule's window reaches any more, and resolved
// alerts older than Keep.
func (e *Engine) prune(now time.Time) {
	for p, h := range e.hist {
		h = slices.DeleteFunc(h, func(x countEntry) bool { return now.Sub(x.t) > e.watch[x.c] })
		if len(h) > compactAbove {
			h = e.compact(h, now)
		}
		if len(h) == 0 {
			delete(e.hist, p)
		} else {
			e.hist[p] = h
		}
	}
	var flapWin, changeWin time.Duration
	for _, r := range e.rules {
		switch r.Kind {
		case LinkFlap:
			flapWin = max(flapWin, r.Window)
		case FabricChanged:
			changeWin = max(changeWin, r.Window)
		}
	}
	for p, ts := range e.flaps {
		ts = slices.DeleteFunc(ts, func(t time.Time) bool { return now.Sub(t) > flapWin })
		if len(ts) == 0 {
			delete(e.flaps, p)
			delete(e.flapLink, p)
		} else {
			e.flaps[p] = ts
		}
	}
	e.changes = slices.DeleteFunc(e.changes, func(c fabricChange) bool { return now.Sub(c.ev.Time) > changeWin })
	for p, h := range e.trend {
		i := 0
		for i < len(h) && now.Sub(h[i].Time) > e.trendWin {
			i++
		}
		errs := false
		for _, x := range h[i:] {
			errs = errs || (!x.Reset && x.Symbol+x.Integrity+x.Rcv+x.Recovers+x.Downed > 0)
		}
		if !errs {
			delete(e.trend, p)
		} else {
			e.trend[p] = h[i:]
		}
	}
	i := 0
	for i < len(e.recent) && now.Sub(e.recent[i].EndsAt) > e.cfg.Keep {
		i++
	}
	e.recent = e.recent[i:]
	if len(e.recent) > maxRecent {
		e.recent = e.recent[len(e.recent)-maxRecent:]
	}
}

// compactAbove is how many increases a port keeps before those older than
// their counter's shortest window are summed (compact).
const compactAbove = 32

// compact sums the increases of each counter that are older than its
// shortest window into steps of coarse[c], each dated by its latest
// increase, so that long windows cost ~100 entries however often errors
// come.
func (e *Engine) compact(h []countEntry, now time.Time) []countEntry {
	out := h[:0]
	for _, x := range h {
		if g := e.coarse[x.c]; g > 0 && now.Sub(x.t) > e.fine[x.c] {
			b := x.t.Truncate(g)
			merged := false
			for i := len(out) - 1; i >= 0; i-- {
				y := &out[i]
				if y.c == x.c && now.Sub(y.t) > e.fine[x.c] && y.t.Truncate(g).Equal(b) {
					y.d += x.d
					if x.t.After(y.t) {
						y.t = x.t
					}
					merged = true
					break
				}
			}
			if merged {
				continue
			}
		}
		out = append(out, x)
	}
	return out
}

// maxRecent bounds the resolved alerts kept, whatever Keep says.
const maxRecent = 1000

// portSubject names a port and the port at the other end of its link.
func portSubject(t *fabric.Topology, p fabric.PortRef, kind string) (Subject, []fabric.PortRef) {
	s := Subject{Kind: kind, Port: &p, Node: nodeName(t, p.GUID)}
	ports := []fabric.PortRef{p}
	if t == nil {
		return s, ports
	}
	s.PortName = t.PortName(p)
	if peer, ok := t.Peer(p); ok {
		s.Remote, s.RemoteNode, s.RemoteName = &peer, nodeName(t, peer.GUID), t.PortName(peer)
		if l, ok := t.LinkAt(p); ok {
			s.Link = l.ID()
		}
		if kind != "direction" {
			ports = append(ports, peer)
		}
	}
	return s, ports
}

func linkSubject(t *fabric.Topology, l *fabric.Link) Subject {
	a, b := l.A, l.B
	return Subject{Kind: "link", Port: &a, Node: nodeName(t, a.GUID), Remote: &b, RemoteNode: nodeName(t, b.GUID), Link: l.ID(), PortName: l.AName, RemoteName: l.BName}
}

func nodeName(t *fabric.Topology, g fabric.GUID) string {
	if t == nil {
		return ""
	}
	if n, ok := t.Node(g); ok {
		return n.Description
	}
	return ""
}

func (e *Engine) evalRule(r *Rule, in Input) []candidate {
	t := in.Topology
	var out []candidate
	switch r.Kind {
	case CounterIncrease:
		for p, h := range e.hist {
			for _, c := range r.Counters {
				var sum uint64
				for _, x := range h {
					if x.c == c && in.Time.Sub(x.t) <= r.Window {
						sum += x.d
					}
				}
				if float64(sum) >= r.Threshold {
					s, ports := portSubject(t, p, "port")
					name := fabric.CounterNames[c]
					out = append(out, candidate{key: p.String() + "|" + name, subject: s, counter: name, value: float64(sum), ports: ports,
						summary: fmt.Sprintf("%s rose by %d in %s on %s (threshold %g)", name, sum, r.Window, s, r.Threshold)})
				}
			}
		}
	case CounterTotal:
		for p, rd := range in.Readings {
			if rd.Err != nil {
				continue
			}
			for _, c := range r.Counters {
				if v := rd.V[c]; float64(v) >= r.Threshold {
					s, ports := portSubject(t, p, "port")
					name := fabric.CounterNames[c]
					out = append(out, candidate{key: p.String() + "|" + name, subject: s, counter: name, value: float64(v), ports: ports,
						summary: fmt.Sprintf("%s is %d on %s (threshold %g)", name, v, s, r.Threshold)})
				}
			}
		}
	case LinkFlap:
		for p, ts := range e.flaps {
			n := 0
			for _, x := range ts {
				if in.Time.Sub(x) <= r.Window {
					n++
				}
			}
			if float64(n) < r.Threshold {
				continue
			}
			c := candidate{key: p.String(), value: float64(n)}
			if l, ok := e.flapLink[p]; ok {
				c.subject, c.ports = linkSubject(orTopo(t, e.prevTopo, l.A.GUID), &l), []fabric.PortRef{l.A, l.B}
			} else {
				c.subject, c.ports = Subject{Kind: "link", Port: &p}, []fabric.PortRef{p}
			}
			c.summary = fmt.Sprintf("%s went down or up %d times in %s (threshold %g)", c.subject, n, r.Window, r.Threshold)
			out = append(out, c)
		}
	case LinkDegraded:
		if t != nil {
			out = degraded(r, t)
		}
	case Congestion:
		if t == nil {
			break
		}
		for p, s := range in.Samples {
			l, ok := t.LinkAt(p)
			if !ok || s.Span <= 0 || l.Capacity() <= 0 {
				continue
			}
			// XmitWait counts ticks; a tick is taken as the time to send
			// one 4-byte word at the link's rate (docs/alerts.md).
			frac := min(1, float64(s.Delta[fabric.XmitWait])*4/(l.Capacity()*s.Span.Seconds()))
			if frac >= r.Threshold {
				sub, ports := portSubject(t, p, "direction")
				out = append(out, candidate{key: p.String(), subject: sub, counter: fabric.CounterNames[fabric.XmitWait], value: frac, ports: ports,
					summary: fmt.Sprintf("%s waited to send %.0f%% of the interval (threshold %.0f%%)", sub, 100*frac, 100*r.Threshold)})
			}
		}
	case Utilization:
		if t == nil {
			break
		}
		for i := range t.Links {
			l := &t.Links[i]
			capacity := l.Capacity()
			if capacity <= 0 {
				continue
			}
			for _, d := range [2][2]fabric.PortRef{{l.A, l.B}, {l.B, l.A}} {
				var bytes uint64
				var span time.Duration
				if s, ok := in.Samples[d[0]]; ok {
					bytes, span = s.Delta[fabric.XmitData], s.Span
				} else if s, ok := in.Samples[d[1]]; ok {
					bytes, span = s.Delta[fabric.RcvData], s.Span
				}
				if span <= 0 {
					continue
				}
				frac := float64(bytes) / (capacity * span.Seconds())
				if frac >= r.Threshold {
					sub, ports := portSubject(t, d[0], "direction")
					out = append(out, candidate{key: d[0].String(), subject: sub, value: frac, ports: ports,
						summary: fmt.Sprintf("%s carried %.0f%% of its capacity (threshold %.0f%%)", sub, 100*frac, 100*r.Threshold)})
				}
			}
		}
	case PortUnreachable:
		for p, since := range in.Unreachable {
			s, ports := portSubject(t, p, "port")
			out = append(out, candidate{key: p.String(), subject: s, value: in.Time.Sub(since).Seconds(), since: since, ports: ports,
				summary: fmt.Sprintf("%s has not answered counter queries since %s", s, since.UTC().Format(time.RFC3339))})
		}
	case FabricChanged:
		byKey := map[string]int{}
		for _, ch := range e.changes {
			if in.Time.Sub(ch.ev.Time) > r.Window {
				continue
			}
			key := ch.ev.Kind
			if ch.ev.Node != 0 {
				key += "|" + fabric.PortRef{GUID: ch.ev.Node, Port: ch.ev.Port}.String()
			}
			c := candidate{key: key, event: ch.ev.Kind, value: 1, since: ch.ev.Time, ports: ch.ports, summary: ch.ev.Kind + ": " + ch.ev.Detail}
			switch {
			case ch.link != nil:
				c.subject = linkSubject(orTopo(t, e.prevTopo, ch.link.A.GUID), ch.link)
			case ch.ev.Node != 0:
				p := fabric.PortRef{GUID: ch.ev.Node, Port: ch.ev.Port}
				c.subject = Subject{Kind: "port", Port: &p, Node: nodeName(orTopo(t, e.prevTopo, p.GUID), p.GUID)}
			default:
				c.subject = Subject{Kind: "fabric"}
			}
			if i, ok := byKey[key]; ok {
				c.value = out[i].value + 1
				c.since = out[i].since
				out[i] = c
				continue
			}
			byKey[key] = len(out)
			out = append(out, c)
		}
	case ErrorTrend:
		out = e.errorTrend(r, in)
	case DaemonBehind:
		if len(in.Behind) > 0 {
			out = append(out, candidate{key: "daemon", subject: Subject{Kind: "daemon"}, value: float64(len(in.Behind)), since: in.BehindSince,
				summary: "the daemon is falling behind: " + strings.Join(in.Behind, "; ")})
		}
	}
	return out
}

// orTopo is t when it knows node g, else prev.
func orTopo(t, prev *fabric.Topology, g fabric.GUID) *fabric.Topology {
	if t != nil {
		if _, ok := t.Node(g); ok {
			return t
		}
	}
	if prev != nil {
		return prev
	}
	return t
}

// widthRank orders widths (lanes).
var widthRank = map[string]int{"1X": 1, "2X": 2, "4X": 4, "8X": 8, "12X": 12}

// speedRank orders speeds by their data rate per lane in Mb/s, InfiniBand
// ("EDR") and Ethernet ("100GbE": one lane of the whole rate) alike; 0
// when unknown.
func speedRank(speed string) int { return int(fabric.LinkCapacity("1X", speed) * 8 / 1e6) }

// degraded finds active links below the rule's width and speed or, where
// the rule names none, below what both ends support and have enabled
// (Link.MaxWidth, MaxSpeed, from PortInfo), or, where the topology does not
// say (a simulated fabric, an Ethernet fabric), below the best width and
// speed among the other links of either end's node.
func degraded(r *Rule, t *fabric.Topology) []candidate {
	type best struct{ w, s [2]int } // top two per node, so a link is compared with the others
	top := map[fabric.GUID]*best{}
	push := func(v *[2]int, x int) {
		if x > v[0] {
			v[1], v[0] = v[0], x
		} else if x > v[1] {
			v[1] = x
		}
	}
	speedName := map[int]string{} // each rank's name, as the links give it
	named := func(speed string) int {
		x := speedRank(speed)
		if _, ok := speedName[x]; !ok && x > 0 {
			speedName[x] = speed
		}
		return x
	}
	up := func(l *fabric.Link) bool { return !strings.EqualFold(l.State, "Down") }
	for i := range t.Links {
		l := &t.Links[i]
		if !up(l) {
			continue
		}
		for _, g := range []fabric.GUID{l.A.GUID, l.B.GUID} {
			b := top[g]
			if b == nil {
				b = &best{}
				top[g] = b
			}
			push(&b.w, widthRank[strings.ToUpper(l.Width)])
			push(&b.s, named(l.Speed))
		}
	}
	other := func(v [2]int, mine int) int {
		if mine == v[0] {
			return v[1]
		}
		return v[0]
	}
	var out []candidate
	for i := range t.Links {
		l := &t.Links[i]
		w, s := widthRank[strings.ToUpper(l.Width)], speedRank(l.Speed)
		if !up(l) || w == 0 || s == 0 {
			continue
		}
		ew, es := widthRank[strings.ToUpper(r.Width)], named(r.Speed)
		if r.Width == "" && l.MaxWidth != "" && l.MaxSpeed != "" {
			ew, es = widthRank[strings.ToUpper(l.MaxWidth)], named(l.MaxSpeed)
		} else if r.Width == "" {
			for _, g := range []fabric.GUID{l.A.GUID, l.B.GUID} {
				ew = max(ew, other(top[g].w, w))
				es = max(es, other(top[g].s, s))
			}
		}
		if w >= ew && s >= es {
			continue
		}
		sub := linkSubject(t, l)
		wantW, wantS := l.Width, l.Speed
		for k, x := range widthRank {
			if x == max(ew, w) {
				wantW = k
			}
		}
		if n, ok := speedName[max(es, s)]; ok {
			wantS = n
		}
		out = append(out, candidate{key: l.ID(), subject: sub, value: l.Capacity(), ports: []fabric.PortRef{l.A, l.B},
			summary: fmt.Sprintf("%s is up at %s %s, below %s %s", sub, l.Width, l.Speed, wantW, wantS)})
	}
	return out
}

// errorTrend fits each erroring port's symbol error rate over the rule's
// window (health.Analyze) and names the link directions whose rate rises
// and whose BER is expected to reach the threshold within the window, or
// has reached it while rising. The jobs named are those crossing the link
// either way: a link that retrains or fails stops both directions.
func (e *Engine) errorTrend(r *Rule, in Input) []candidate {
	t := in.Topology
	if t == nil {
		return nil
	}
	var out []candidate
	for p, h := range e.trend {
		l, ok := t.LinkAt(p)
		if !ok {
			continue
		}
		i := 0
		for i < len(h) && in.Time.Sub(h[i].Time) > r.Window {
			i++
		}
		d := health.Analyze(h[i:], health.LinkBits(l), health.Options{BERLimit: r.Threshold, Horizon: r.Window, Now: in.Time})
		pr := d.Prediction
		if pr == nil || pr.CrossesAt.IsZero() || pr.InSeconds > r.Window.Seconds() {
			continue
		}
		peer, _ := t.Peer(p)
		sub, _ := portSubject(t, peer, "direction")
		when := "is expected to reach it at " + pr.CrossesAt.UTC().Format(time.RFC3339) + " (in " + (time.Duration(pr.InSeconds) * time.Second).String() + ")"
		if pr.Crossed {
			when = "reached it at " + pr.CrossesAt.UTC().Format(time.RFC3339)
		}
		out = append(out, candidate{key: p.String(), subject: sub, counter: fabric.CounterNames[fabric.SymbolErrors], value: d.BERNow,
			ports: []fabric.PortRef{peer, p}, since: pr.RisingSince,
			summary: fmt.Sprintf("symbol errors on %s rising since %s: bit error rate %.2g now, limit %g; it %s (fit R² %.2f over %d samples)",
				sub, pr.RisingSince.UTC().Format(time.RFC3339), d.BERNow, r.Threshold, when, pr.Confidence, pr.Points)})
	}
	return out
}
