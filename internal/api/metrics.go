package api

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netloom/netloom/internal/fabric"
)

// portCollector exposes the latest raw counters of every swept port, the
// way infiniband exporters do: one counter series per port and counter,
// labelled with the node's GUID and name, the port, and what is at the far end.
type portCollector struct {
	state func() *FabricState
}

var portLabels = []string{"guid", "node", "port", "remote_guid", "remote_node", "remote_port"}

// portMetricNames maps counters to conventional Prometheus names.
var portMetricNames = [fabric.NumCounters]string{
	"netloom_port_transmit_data_bytes_total",
	"netloom_port_receive_data_bytes_total",
	"netloom_port_transmit_packets_total",
	"netloom_port_receive_packets_total",
	"netloom_port_unicast_transmit_packets_total",
	"netloom_port_unicast_receive_packets_total",
	"netloom_port_multicast_transmit_packets_total",
	"netloom_port_multicast_receive_packets_total",
	"netloom_port_transmit_wait_total",
	"netloom_port_symbol_error_total",
	"netloom_port_link_error_recovery_total",
	"netloom_port_link_downed_total",
	"netloom_port_receive_errors_total",
	"netloom_port_receive_remote_physical_errors_total",
	"netloom_port_receive_switch_relay_errors_total",
	"netloom_port_transmit_discards_total",
	"netloom_port_transmit_constraint_errors_total",
	"netloom_port_receive_constraint_errors_total",
	"netloom_port_local_link_integrity_errors_total",
	"netloom_port_excessive_buffer_overrun_errors_total",
	"netloom_port_vl15_dropped_total",
}

var (
	portDescs = func() [fabric.NumCounters]*prometheus.Desc {
		var d [fabric.NumCounters]*prometheus.Desc
		for c := range d {
			d[c] = prometheus.NewDesc(portMetricNames[c],
				"InfiniBand port counter "+fabric.CounterNames[c]+" as last read (PortCounters/PortCountersExtended).", portLabels, nil)
		}
		return d
	}()
	portUpDesc = prometheus.NewDesc("netloom_port_reachable",
		"1 if the port's counters were read in the last sweep, 0 if the query failed.", portLabels, nil)
	fabricNodesDesc = prometheus.NewDesc("netloom_fabric_nodes", "Nodes in the fabric by type.", []string{"type"}, nil)
	fabricLinksDesc = prometheus.NewDesc("netloom_fabric_links", "Links in the fabric.", nil, nil)
	sweepSecsDesc   = prometheus.NewDesc("netloom_fabric_sweep_duration_seconds", "Duration of the last counter sweep.", nil, nil)
	sweepPortsDesc  = prometheus.NewDesc("netloom_fabric_sweep_ports", "Ports read in the last sweep.", nil, nil)
	topoVerDesc     = prometheus.NewDesc("netloom_fabric_topology_version", "Stored topology version in force.", nil, nil)
)

func (c *portCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range portDescs {
		ch <- d
	}
	ch <- portUpDesc
	ch <- fabricNodesDesc
	ch <- fabricLinksDesc
	ch <- sweepSecsDesc
	ch <- sweepPortsDesc
	ch <- topoVerDesc
}

func (c *portCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.state()
	if st == nil {
		return
	}
	t := st.Topology
	counts := t.Counts()
	ch <- prometheus.MustNewConstMetric(fabricNodesDesc, prometheus.GaugeValue, float64(counts.Switches), "switch")
	ch <- prometheus.MustNewConstMetric(fabricNodesDesc, prometheus.GaugeValue, float64(counts.CAs), "ca")
	ch <- prometheus.MustNewConstMetric(fabricLinksDesc, prometheus.GaugeValue, float64(counts.Links))
	ch <- prometheus.MustNewConstMetric(topoVerDesc, prometheus.GaugeValue, float64(st.Version))
	ch <- prometheus.MustNewConstMetric(sweepSecsDesc, prometheus.GaugeValue, st.Sweep.Seconds)
	ch <- prometheus.MustNewConstMetric(sweepPortsDesc, prometheus.GaugeValue, float64(st.Sweep.Ports))
	for p, r := range st.Readings {
		labels := portLabelValues(t, p)
		up := 1.0
		if r.Err != nil {
			up = 0
		}
		ch <- prometheus.MustNewConstMetric(portUpDesc, prometheus.GaugeValue, up, labels...)
		if r.Err != nil {
			continue
		}
		for k := fabric.Counter(0); k < fabric.NumCounters; k++ {
			ch <- prometheus.MustNewConstMetric(portDescs[k], prometheus.CounterValue, float64(r.V[k]), labels...)
		}
	}
}

func portLabelValues(t *fabric.Topology, p fabric.PortRef) []string {
	v := []string{p.GUID.String(), "", strconv.Itoa(p.Port), "", "", ""}
	if n, ok := t.Node(p.GUID); ok {
		v[1] = n.Description
	}
	if q, ok := t.Peer(p); ok {
		v[3], v[5] = q.GUID.String(), strconv.Itoa(q.Port)
		if n, ok := t.Node(q.GUID); ok {
			v[4] = n.Description
		}
	}
	return v
}
