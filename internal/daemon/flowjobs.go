package daemon

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/netloom/netloom/internal/flowjobs"
)

// The flows-to-jobs index (internal/flowjobs, docs/sflow.md "Flows to
// jobs"): the agents' aggregators report each rank's connections into it
// (ingest.Options.Connections, JobEnded); the sFlow side looks sampled
// flows up in it.

func newFlowJobs(reg *prometheus.Registry) *flowjobs.Index {
	x := flowjobs.New(flowjobs.Options{})
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "netloom_flowjobs_keys",
			Help: "Flow keys (two per reported connection) the flows-to-jobs index holds."},
			func() float64 { return float64(x.Stats().Keys) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "netloom_flowjobs_jobs",
			Help: "Job runs whose connections the flows-to-jobs index holds (ended ones within its retention included)."},
			func() float64 { return float64(x.Stats().Jobs) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "netloom_flowjobs_refused_total",
			Help: "Flow keys of reported connections the flows-to-jobs index refused for its bound."},
			func() float64 { return float64(x.Stats().Refused) }))
	return x
}

// FlowJobs is the daemon's flows-to-jobs index: whose job, and which
// ranks, a sampled flow is (Lookup).
func (d *Daemon) FlowJobs() *flowjobs.Index { return d.flows }
