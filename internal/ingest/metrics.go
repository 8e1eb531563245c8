package ingest

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts what ingest received, accepted and dropped. A nil
// *Metrics counts nothing (offline reports).
type Metrics struct {
	received, accepted, bytes, snapshots prometheus.Counter
	decodes                              prometheus.Counter
	dropped                              *prometheus.CounterVec
	jobs                                 *prometheus.GaugeVec
	// visible is how long after arrival a snapshot was first part of a
	// published view, from the daemon's receipt and from the agent's own
	// time stamp.
	visibleRecv, visibleSnap prometheus.Observer
}

// VisibleBuckets are the buckets of netloom_ingest_visible_delay_seconds.
var VisibleBuckets = []float64{.01, .025, .05, .1, .25, .5, .75, 1, 1.25, 1.5, 2, 3, 5, 10, 30}

// NewMetrics creates the ingest metrics and registers them with reg (when
// not nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		received: prometheus.NewCounter(prometheus.CounterOpts{Name: "netloom_ingest_datagrams_received_total",
			Help: "Agent datagrams read from the socket."}),
		accepted: prometheus.NewCounter(prometheus.CounterOpts{Name: "netloom_ingest_datagrams_accepted_total",
			Help: "Agent datagrams that became part of an applied snapshot."}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "netloom_ingest_bytes_received_total",
			Help: "Bytes of agent datagrams read from the socket."}),
		snapshots: prometheus.NewCounter(prometheus.CounterOpts{Name: "netloom_ingest_snapshots_total",
			Help: "Complete rank snapshots applied to job state."}),
		decodes: prometheus.NewCounter(prometheus.CounterOpts{Name: "netloom_ingest_credentials_decoded_total",
			Help: "MUNGE credentials of agents sent to munged for decoding (one per agent per refresh)."}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "netloom_ingest_datagrams_dropped_total",
			Help: "Agent datagrams dropped, by reason."}, []string{"reason"}),
		jobs: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "netloom_ingest_jobs",
			Help: "Jobs held in live state, by state."}, []string{"state"}),
	}
	visible := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "netloom_ingest_visible_delay_seconds",
		Help: "Time from a rank snapshot's arrival to the first live view that shows it (the API answers from that view), " +
			"from the daemon's receipt of its last datagram (from=\"received\") or from the agent's time stamp (from=\"snapshot\", " +
			"meaningful when clocks agree).", Buckets: VisibleBuckets}, []string{"from"})
	m.visibleRecv, m.visibleSnap = visible.WithLabelValues("received"), visible.WithLabelValues("snapshot")
	for _, r := range Reasons {
		m.dropped.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.received, m.accepted, m.bytes, m.snapshots, m.decodes, m.dropped, m.jobs, visible)
	}
	return m
}

func (m *Metrics) receive(n int) {
	if m != nil {
		m.received.Inc()
		m.bytes.Add(float64(n))
	}
}

func (m *Metrics) drop(reason string, n int) {
	if m != nil && n > 0 {
		m.dropped.WithLabelValues(reason).Add(float64(n))
	}
}

// Drop counts one datagram dropped for reason (one of Reasons), for checks
// made outside this package (the daemon's scheduler view).
func (m *Metrics) Drop(reason string) { m.drop(reason, 1) }

// DroppedCollector collects netloom_ingest_datagrams_dropped_total alone
// (for the daemon's falling-behind check, which must not gather the whole
// registry every few seconds).
func (m *Metrics) DroppedCollector() prometheus.Collector { return m.dropped }

func (m *Metrics) decoded() {
	if m != nil {
		m.decodes.Inc()
	}
}

func (m *Metrics) accept(datagrams int) {
	if m != nil {
		m.accepted.Add(float64(datagrams))
		m.snapshots.Inc()
	}
}

// addJobs changes the jobs held by one tracker of several.
func (m *Metrics) addJobs(running, finished int) {
	if m != nil {
		m.jobs.WithLabelValues("running").Add(float64(running))
		m.jobs.WithLabelValues("finished").Add(float64(finished))
	}
}

// visible observes snapshots arrived at recv (daemon clock) and stamped snap
// (agent clock) that became visible at now.
func (m *Metrics) visible(now time.Time, w []arrival) {
	if m == nil {
		return
	}
	for _, a := range w {
		m.visibleRecv.Observe(max(now.Sub(a.recv), 0).Seconds())
		m.visibleSnap.Observe(max(now.Sub(a.snap), 0).Seconds())
	}
}
