package alert

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Collector exposes the alerts to Prometheus: one netloom_alert series per
// active alert (value 1, like Prometheus' own ALERTS) and the count of
// alerts by rule, severity and state.
type Collector struct {
	// Alerts returns the current alerts (nil before the first evaluation).
	Alerts func() []Alert
}

var (
	alertDesc = prometheus.NewDesc("netloom_alert", "An active Netloom alert (1), by rule, state and subject.",
		[]string{"alertname", "severity", "state", "kind", "node", "port", "remote_node", "link", "counter", "event"}, nil)
	alertsDesc = prometheus.NewDesc("netloom_alerts", "Active Netloom alerts by rule, severity and state.",
		[]string{"alertname", "severity", "state"}, nil)
)

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- alertDesc
	ch <- alertsDesc
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	type key struct{ rule, sev, state string }
	counts := map[key]int{}
	for _, a := range c.Alerts() {
		if a.State == Resolved {
			continue
		}
		counts[key{a.Rule, a.Severity, a.State}]++
		l := a.Labels()
		port := ""
		if a.Subject.Port != nil {
			port = a.Subject.Port.String()
		}
		ch <- prometheus.MustNewConstMetric(alertDesc, prometheus.GaugeValue, 1,
			a.Rule, a.Severity, a.State, string(a.Kind), l["node"], port, l["remote_node"], l["link"], a.Counter, a.Event)
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(alertsDesc, prometheus.GaugeValue, float64(n), k.rule, k.sev, k.state)
	}
}
