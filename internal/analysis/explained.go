package analysis

import (
	"fmt"
	"strings"
	"time"
)

// The consistency check under an "explained" figure. A direction's
// explained share is what the monitored jobs put on it (their attributed
// bytes) over what its port counters measured. The counters count every
// byte that crossed, headers included, so the jobs can never honestly put
// more on a direction than it carried: when they do, beyond what counter
// granularity and the timing of sweeps and attribution intervals allow,
// one of the two is wrong, and the check says so and names the likely
// cause. The figure itself is shown as measured, above 100% too, and the
// check says why it is above: the counters' granularity, their lag behind
// the attribution (timing), or the cause it names.
//
// A fabric whose counters do not carry the jobs' traffic at all (ibsim:
// its counters never see MPI traffic, which runs over shared memory or
// TCP on the machine; or a real fabric whose jobs' MPI traffic goes over
// another network) is told from the counters themselves, by the rule of
// CountersFlat over the heaviest directions of every job in the range:
// then the check says so (not_carried) instead of naming a job's cause.

// Check statuses.
const (
	// CheckConsistent: the jobs' bytes fit in what the counters measured.
	CheckConsistent = "consistent"
	// CheckTiming: they fit only with the sweeps just outside the range:
	// attribution intervals and counter sweeps do not line up.
	CheckTiming = "timing"
	// CheckInconsistent: the jobs put more on the direction than its
	// counters measured, beyond what granularity and timing allow.
	CheckInconsistent = "inconsistent"
	// CheckNotMeasured: no counter of either end was read: nothing to
	// compare with.
	CheckNotMeasured = "not_measured"
	// CheckNotCarried: the fabric's counters do not carry the jobs'
	// traffic (CountersFlat): explained cannot be measured on it.
	CheckNotCarried = "not_carried"
)

// Likely causes of a check that is not consistent.
const (
	CauseNotSwept       = "not_swept"           // neither end's counters read
	CauseSaturated      = "counters_saturated"  // a 32-bit data counter sat at its top
	CauseReset          = "counters_reset"      // counters cleared or the switch rebooted
	CauseCountersMissed = "counters_missing"    // sweeps missing for part of the time
	CauseClock          = "clock"               // the job's range (its nodes' clocks) misses its own intervals
	CauseNodeMap        = "node_map_or_network" // host link: wrong adapter for a node, or traffic on another network
	CauseRoutes         = "routes_or_network"   // switch link: other routes, or traffic on another network
	CauseLogical        = "logical_traffic"     // collectives counted as the root sending to every rank
	CauseTiming         = "timing"              // CheckTiming
	CauseGranularity    = "granularity"         // over 100% within the tolerance: 4-byte counter words, rounding
	CauseCountersFlat   = "counters_flat"       // CheckNotCarried
)

// FlatFabric is what the counters measured, in all, on the directions
// where monitored jobs put the most bytes over a range (the heaviest
// FlatDirections of them, each measured over the widened range).
type FlatFabric struct {
	Directions int    `json:"directions"`
	Monitored  uint64 `json:"monitored_bytes"`
	Measured   uint64 `json:"measured_bytes"`
}

// The rule of CountersFlat: over the FlatDirections heaviest directions
// of the jobs in a range, the jobs put at least FlatMinBytes and the
// counters measured under 1/FlatRatio of it.
const (
	FlatDirections = 32
	FlatMinBytes   = 64 << 10
	FlatRatio      = 100
)

// CountersFlat says whether the counters stay flat while the agents
// report bytes: the fabric's counters do not carry the jobs' traffic.
func (f FlatFabric) CountersFlat() bool {
	return f.Monitored >= FlatMinBytes && f.Measured*FlatRatio < f.Monitored
}

// CounterWindow is what one direction's counters said over a window: the
// sending port's transmit counter, else the receiving port's receive
// counter, as the API measures a direction.
type CounterWindow struct {
	Bytes   uint64
	Swept   bool // some sample lies in the window
	Samples int
	// Covered is how much of the window the samples cover (their spans,
	// clipped to the window); Length the window's length (to now at most).
	Covered, Length time.Duration
	// Saturated: a 32-bit counter sat at its maximum in some sample (the
	// true count is higher). Reset: the counters went back (cleared, or
	// the switch rebooted), losing what was counted before.
	Saturated, Reset bool
}

// MappedName is a node name the node map gives a host adapter, and how:
// "the node-map file" or "its adapter's description".
type MappedName struct {
	Name string `json:"name"`
	By   string `json:"by"`
}

// Ways a node name is mapped.
const (
	ByMappingFile = "the node-map file"
	ByDescription = "its adapter's description"
)

// ExplainedInput is what the check of one direction weighs.
type ExplainedInput struct {
	// Monitored is what the jobs put on the direction in the range;
	// Rounded when some of it is other users' jobs rounded to two digits.
	Monitored uint64
	Rounded   bool
	// Range: the counters over the range asked about; Wide: over the
	// range widened by the timing slack (WidenBefore, WidenAfter), which
	// holds every moment the jobs' attributed bytes can have crossed.
	Range, Wide CounterWindow
	// Host is the description of the direction's host adapter end when
	// the direction is a host link (either way), "" for a link between
	// switches; HostNodes the node names mapped to that adapter.
	Host      string
	HostNodes []MappedName
	// HostNodesHidden: the viewer may not see which names map there.
	HostNodesHidden bool
	// Logical names the jobs on the direction whose bytes are the
	// application's calls with collectives in them (logical traffic):
	// names a viewer may see, others as "another user's job".
	Logical []string
	// Sweep is the sweep interval: the counters of a range miss up to one
	// at its end.
	Sweep time.Duration
	// Outside is, for one job's question over its own life, its own
	// bytes on the direction attributed outside the range: its start and
	// end (its nodes' clocks) miss some of its intervals (the daemon's).
	Outside uint64
	// Fabric is what the counters measured on the heaviest directions of
	// every job in the range (nil: not looked at).
	Fabric *FlatFabric
}

// ExplainedCheck is the check's answer, served under the figure.
type ExplainedCheck struct {
	Status string `json:"status"`
	Cause  string `json:"cause,omitempty"`
	// Message says it in a sentence, with the likely cause and what to
	// do; empty when consistent.
	Message string `json:"message,omitempty"`
	// WideMeasured is what the counters measured over the widened range;
	// Tolerance what counter granularity (4-byte words per sample) and
	// rounding allow; Excess what the jobs put on it beyond both.
	WideMeasured uint64 `json:"widened_measured_bytes"`
	Tolerance    uint64 `json:"tolerance_bytes"`
	Excess       uint64 `json:"excess_bytes"`
}

// WidenBefore and WidenAfter are the timing slack around a range. An
// attribution interval ending at T holds what the agents reported since
// the previous one (one sweep interval), which their ranks sent up to one
// snapshot interval earlier (the agent's, 5 s by default; 30 s allowed
// for here); a counter sample catches a byte at the sweep after it
// crossed, up to a sweep interval later, and two when a sweep ran late.
func WidenBefore(sweep time.Duration) time.Duration { return 2*sweep + 30*time.Second }

// WidenAfter: see WidenBefore.
func WidenAfter(sweep time.Duration) time.Duration { return 2 * sweep }

// Explained is the share of measured bytes that the monitored ones
// explain, as measured (above 100 when the jobs put more on a direction
// than its counters counted: the check says why); ok is false when
// nothing was measured.
func Explained(monitored, measured uint64) (pct float64, ok bool) {
	if measured == 0 {
		return 0, false
	}
	return 100 * float64(monitored) / float64(measured), true
}

// CheckExplained runs the check.
func CheckExplained(in ExplainedInput) ExplainedCheck {
	c := ExplainedCheck{Status: CheckConsistent, WideMeasured: in.Wide.Bytes}
	if !in.Wide.Swept {
		c.WideMeasured = in.Range.Bytes
	}
	// Data counters count 4-byte words: up to 3 bytes short per sample,
	// per end. Other users' jobs are rounded to two significant digits:
	// up to 5% each.
	c.Tolerance = 4 * uint64(max(in.Wide.Samples, in.Range.Samples)+1)
	if in.Rounded {
		c.Tolerance += in.Monitored / 20
	}
	if in.Outside > c.Tolerance {
		c.Status, c.Cause = CheckInconsistent, CauseClock
		c.Message = fmt.Sprintf("%s of the job's own traffic on this direction was attributed outside the job's time range: "+
			"its start and end come from its nodes' clocks, the attribution from the daemon's, so the figures here miss part of the job. "+
			"Check the nodes' clocks (NTP).", FormatBytes(in.Outside))
		return c
	}
	if in.Monitored == 0 {
		return c
	}
	if !in.Range.Swept && !in.Wide.Swept {
		c.Status, c.Cause = CheckNotMeasured, CauseNotSwept
		c.Message = fmt.Sprintf("The jobs put %s on this direction, but neither of its ports was swept: nothing measured it, "+
			"so how much of its traffic they explain cannot be told.", FormatBytes(in.Monitored))
		return c
	}
	if f := in.Fabric; f != nil && f.CountersFlat() {
		c.Status, c.Cause = CheckNotCarried, CauseCountersFlat
		c.Message = fmt.Sprintf("This fabric's counters do not carry the jobs' traffic: on the %d directions where jobs put the most "+
			"in this range (%s), they counted %s, %s of it. A simulated fabric (ibsim) counts no MPI traffic, which runs over shared memory "+
			"or TCP on the machine; on a real fabric the jobs' MPI traffic went over another network. How much of this direction's "+
			"traffic the jobs explain cannot be measured here.", f.Directions, FormatBytes(f.Monitored), FormatBytes(f.Measured),
			sharePct(f.Measured, f.Monitored))
		return c
	}
	// Every sentence names the one measured figure shown beside it: the
	// counters over the range.
	measuredHere := fmt.Sprintf("its counters measured %s over this range", FormatBytes(in.Range.Bytes))
	if in.Monitored <= in.Range.Bytes {
		return c
	}
	over := in.Monitored - in.Range.Bytes
	if in.Monitored <= in.Range.Bytes+c.Tolerance {
		c.Cause = CauseGranularity
		c.Message = fmt.Sprintf("Over 100%%: the jobs put %s on this direction and %s, %s more, within what the counters' granularity allows "+
			"(they count 4-byte words%s).", FormatBytes(in.Monitored), measuredHere, FormatBytes(over), rounded(in.Rounded))
		return c
	}
	if in.Monitored <= c.WideMeasured+c.Tolerance {
		c.Status, c.Cause = CheckTiming, CauseTiming
		c.Message = fmt.Sprintf("The jobs put %s on this direction and %s: the other %s were counted by the sweeps just outside it, "+
			"since the counters lag behind the attribution (intervals and sweeps do not line up). Over a wider range the two agree.",
			FormatBytes(in.Monitored), measuredHere, FormatBytes(over))
		return c
	}
	c.Status = CheckInconsistent
	c.Excess = in.Monitored - c.WideMeasured - c.Tolerance
	w, r := in.Wide, in.Range
	if !w.Swept {
		w = r
	}
	head := fmt.Sprintf("The jobs put %s on this direction, but %s (%s of it), and even the sweeps just around the range leave %s of it uncounted",
		FormatBytes(in.Monitored), measuredHere, sharePct(in.Range.Bytes, in.Monitored), FormatBytes(in.Monitored-c.WideMeasured))
	if c.WideMeasured == 0 {
		head = fmt.Sprintf("The jobs put %s on this direction, but its counters measured nothing", FormatBytes(in.Monitored))
	}
	switch {
	case w.Saturated:
		c.Cause = CauseSaturated
		c.Message = head + ": its 32-bit data counters saturated, so they counted less than crossed. " +
			"Ports with 64-bit counters (PortCountersExtended) do not saturate; a shorter sweep interval lets the daemon clear 32-bit ones in time."
	case w.Reset:
		c.Cause = CauseReset
		c.Message = head + ": its counters were reset in the range (cleared, or the switch rebooted), and what they had counted since the previous sweep was lost."
	case r.Length > 0 && r.Covered+in.Sweep+r.Length/10 < r.Length:
		c.Cause = CauseCountersMissed
		c.Message = fmt.Sprintf("%s: its counters were read over only %s of the %s range: "+
			"sweeps are missing (the daemon was stopped or behind, or the port was not swept then).",
			head, roundDuration(r.Covered), roundDuration(r.Length))
	case len(in.Logical) > 0 && 100*c.WideMeasured >= in.Monitored:
		c.Cause = CauseLogical
		c.Message = fmt.Sprintf("%s: %s counted collectives as their root sending to every rank (the application's calls, logical traffic), "+
			"more than the MPI library sent over this direction. netloom run --physical counts what it really sent.",
			head, list(in.Logical))
	case in.Host != "":
		c.Cause = CauseNodeMap
		mapped := "no node name is mapped to it"
		if in.HostNodesHidden {
			mapped = "a node of the jobs is mapped to it"
		} else if len(in.HostNodes) > 0 {
			var parts []string
			for _, n := range in.HostNodes {
				parts = append(parts, fmt.Sprintf("%s (by %s)", n.Name, n.By))
			}
			mapped = fmt.Sprintf("nodes %s are mapped to it", list(parts))
			if len(parts) == 1 {
				mapped = fmt.Sprintf("node %s is mapped to it", parts[0])
			}
		}
		c.Message = fmt.Sprintf("%s: the jobs' traffic did not cross the link of %s, where %s. "+
			"If that is not the node's adapter, the node map is wrong (--node-map); else the jobs' MPI traffic went over another network "+
			"(TCP or another adapter or rail).", head, in.Host, mapped)
	default:
		c.Cause = CauseRoutes
		c.Message = head + ": the jobs' traffic did not take this link. The routes changed in the range, a node is mapped to the wrong adapter " +
			"(--node-map), or the jobs' MPI traffic went over another network (TCP or another adapter or rail)."
	}
	return c
}

func rounded(r bool) string {
	if r {
		return "; other users' jobs are rounded to two digits"
	}
	return ""
}

func sharePct(part, whole uint64) string {
	if whole == 0 {
		return "0%"
	}
	p := 100 * float64(part) / float64(whole)
	switch {
	case p >= 10:
		return fmt.Sprintf("%.0f%%", p)
	case p >= 0.1 || p == 0:
		return fmt.Sprintf("%.1f%%", p)
	default:
		return "under 0.1%"
	}
}

func roundDuration(d time.Duration) string {
	if d >= 10*time.Second {
		return d.Round(time.Second).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

// list joins names as "a", "a and b", "a, b and c".
func list(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// FormatBytes writes b as the web pages do: powers of 1000, three
// significant digits ("13.0 KB", "310 GB").
func FormatBytes(b uint64) string {
	units := []string{"B", "KB", "MB", "GB", "TB", "PB"}
	v, i := float64(b), 0
	for v >= 1000 && i < len(units)-1 {
		v /= 1000
		i++
	}
	switch {
	case v >= 100 || i == 0:
		return fmt.Sprintf("%.0f %s", v, units[i])
	case v >= 10:
		return fmt.Sprintf("%.1f %s", v, units[i])
	}
	return fmt.Sprintf("%.2f %s", v, units[i])
}
