package fabric

import "time"

// Counter indexes one port counter. The order is the storage order: do not
// reorder, only append.
type Counter int

const (
	XmitData Counter = iota // bytes (the wire counts 4-octet words; sources multiply by 4)
	RcvData                 // bytes
	XmitPkts
	RcvPkts
	UnicastXmitPkts
	UnicastRcvPkts
	MulticastXmitPkts
	MulticastRcvPkts
	XmitWait
	SymbolErrors
	LinkRecovers
	LinkDowned
	RcvErrors
	RcvRemotePhysErrors
	RcvSwitchRelayErrors
	XmitDiscards
	XmitConstraintErrors
	RcvConstraintErrors
	LinkIntegrityErrors
	ExcBufOverrunErrors
	VL15Dropped
	NumCounters
)

// CounterNames are the snake_case names used in JSON, the store and metrics.
var CounterNames = [NumCounters]string{
	"xmit_data_bytes", "rcv_data_bytes", "xmit_pkts", "rcv_pkts",
	"unicast_xmit_pkts", "unicast_rcv_pkts", "multicast_xmit_pkts", "multicast_rcv_pkts",
	"xmit_wait",
	"symbol_errors", "link_recovers", "link_downed", "rcv_errors", "rcv_remote_phys_errors",
	"rcv_switch_relay_errors", "xmit_discards", "xmit_constraint_errors", "rcv_constraint_errors",
	"link_integrity_errors", "excessive_buffer_overrun_errors", "vl15_dropped",
}

// FirstError is the first error counter; counters from it on are errors.
const FirstError = SymbolErrors

// CounterByName returns the counter with the given name.
func CounterByName(name string) (Counter, bool) {
	for i, n := range CounterNames {
		if n == name {
			return Counter(i), true
		}
	}
	return 0, false
}

// Width32 is the bit width of each counter in the 32-bit PortCounters
// attribute (IBA 16.1.3.5); these saturate at their maximum instead of
// wrapping. Counters absent from that attribute are 0.
var Width32 = [NumCounters]uint{
	XmitData: 32, RcvData: 32, XmitPkts: 32, RcvPkts: 32, XmitWait: 32,
	SymbolErrors: 16, LinkRecovers: 8, LinkDowned: 8, RcvErrors: 16, RcvRemotePhysErrors: 16,
	RcvSwitchRelayErrors: 16, XmitDiscards: 16, XmitConstraintErrors: 8, RcvConstraintErrors: 8,
	LinkIntegrityErrors: 4, ExcBufOverrunErrors: 4, VL15Dropped: 16,
}

// Counters is one raw reading of a port.
type Counters struct {
	V [NumCounters]uint64
	// Extended is true when data and packet counters came from the 64-bit
	// PortCountersExtended attribute; otherwise they are 32-bit and saturate.
	Extended bool
}

// PortReading is what a sweep returns for one port.
type PortReading struct {
	Port PortRef
	Time time.Time
	Counters
	Err error // the port could not be read this sweep
	// Stale is set when the source's agent answered with the values it
	// gave the sweep before: a cached table, not a new measurement (an
	// SNMP agent refreshes its interface counters seconds apart). The
	// reading is no sample: the daemon keeps the previous one as the base
	// of the next interval, so a rate is never 0 then a multiple.
	Stale bool
}

// PortSample is the per-interval change of one port's counters, the unit
// the store keeps.
type PortSample struct {
	Port  PortRef
	Time  time.Time     // end of the interval
	Span  time.Duration // length of the interval
	Delta [NumCounters]uint64
	// Reset is set when a counter went backwards (counter reset or switch
	// reboot); Delta then counts from zero, never a negative or huge rate.
	Reset bool
	// Saturated is set when a 32-bit counter sat at its maximum, so the true
	// delta is unknown and at least what Delta says.
	Saturated bool
}

// Rate is the counter's change per second over the interval.
func (s *PortSample) Rate(c Counter) float64 {
	if s.Span <= 0 {
		return 0
	}
	return float64(s.Delta[c]) / s.Span.Seconds()
}

// Diff computes the sample between two readings of the same port.
func Diff(prev, cur *PortReading) PortSample {
	s := PortSample{Port: cur.Port, Time: cur.Time, Span: cur.Time.Sub(prev.Time)}
	for c := Counter(0); c < NumCounters; c++ {
		if cur.V[c] < prev.V[c] {
			// Counters only go down when cleared or the switch rebooted; all
			// of them restarted, so count each from zero.
			s.Reset = true
			break
		}
	}
	for c := Counter(0); c < NumCounters; c++ {
		v := cur.V[c]
		if s.Reset {
			s.Delta[c] = v
		} else {
			s.Delta[c] = v - prev.V[c]
		}
		if saturates(cur, c) && v == max32(c) {
			s.Saturated = true
		}
	}
	return s
}

// saturates reports whether counter c of this reading is a narrow
// PortCounters field that sticks at its maximum.
func saturates(r *PortReading, c Counter) bool {
	return Width32[c] > 0 && !(r.Extended && c < XmitWait)
}

func max32(c Counter) uint64 {
	m := uint64(1)<<Width32[c] - 1
	if c == XmitData || c == RcvData {
		m *= 4 // stored as bytes
	}
	return m
}

// NearSaturation reports whether a 32-bit reading has a counter past
// frac of its maximum, the trigger for the optional reset-on-threshold.
func NearSaturation(r *PortReading, frac float64) bool {
	for c := Counter(0); c < NumCounters; c++ {
		if saturates(r, c) && float64(r.V[c]) >= frac*float64(max32(c)) {
			return true
		}
	}
	return false
}
