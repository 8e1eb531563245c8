package api

import (
	"bufio"
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/netloom/netloom/internal/fabric"
)

// fabricCollector adds the fabric's size and last sweep to /metrics. The
// per-port counters are at /metrics/ports (portMetrics): one series per
// port and counter is 600,000 series at Stampede's size, and building them
// as Prometheus client objects took a scrape 4.4 s and 560 MB there, and at
// ten times that size more memory than the machine had.
type fabricCollector struct {
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
	fabricNodesDesc  = prometheus.NewDesc("netloom_fabric_nodes", "Nodes in the fabric by type.", []string{"type"}, nil)
	fabricLinksDesc  = prometheus.NewDesc("netloom_fabric_links", "Links in the fabric.", nil, nil)
	sweepSecsDesc    = prometheus.NewDesc("netloom_fabric_sweep_duration_seconds", "Duration of the last counter sweep.", nil, nil)
	sweepPortsDesc   = prometheus.NewDesc("netloom_fabric_sweep_ports", "Ports read in the last sweep.", nil, nil)
	unreachableDesc  = prometheus.NewDesc("netloom_fabric_ports_unreachable", "Ports whose counters could not be read in the last sweep.", nil, nil)
	topoVerDesc      = prometheus.NewDesc("netloom_fabric_topology_version", "Stored topology version in force.", nil, nil)
	fabricCollectors = []*prometheus.Desc{fabricNodesDesc, fabricLinksDesc, sweepSecsDesc, sweepPortsDesc, unreachableDesc, topoVerDesc}
)

func (c *fabricCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range fabricCollectors {
		ch <- d
	}
}

func (c *fabricCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.state()
	if st == nil {
		return
	}
	counts := st.Topology.Counts()
	ch <- prometheus.MustNewConstMetric(fabricNodesDesc, prometheus.GaugeValue, float64(counts.Switches), "switch")
	ch <- prometheus.MustNewConstMetric(fabricNodesDesc, prometheus.GaugeValue, float64(counts.CAs), "ca")
	ch <- prometheus.MustNewConstMetric(fabricLinksDesc, prometheus.GaugeValue, float64(counts.Links))
	ch <- prometheus.MustNewConstMetric(topoVerDesc, prometheus.GaugeValue, float64(st.Version))
	ch <- prometheus.MustNewConstMetric(sweepSecsDesc, prometheus.GaugeValue, st.Sweep.Seconds)
	ch <- prometheus.MustNewConstMetric(sweepPortsDesc, prometheus.GaugeValue, float64(st.Sweep.Ports))
	ch <- prometheus.MustNewConstMetric(unreachableDesc, prometheus.GaugeValue, float64(st.Sweep.Errors))
}

// portMetrics serves GET /metrics/ports: the latest raw counters of every
// swept port in Prometheus' text format, the way InfiniBand exporters do,
// one series per port and counter labelled with the node's GUID and name,
// the port, and what is at the far end, plus netloom_port_reachable.
// ?counters=NAME,... (the API's counter names) limits the families. It is
// written straight from the last sweep, with each port's labels kept per
// topology, so a scrape costs no object per series.
type portMetrics struct {
	state func() *FabricState
	mu    sync.Mutex
	topo  *fabric.Topology          // the labels are for this topology
	label map[fabric.PortRef][]byte // `{guid="…",…,remote_port="…"} `
}

type portRow struct {
	p      fabric.PortRef
	r      *fabric.PortReading
	labels []byte
}

func (m *portMetrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	want := make([]fabric.Counter, 0, fabric.NumCounters)
	if q := r.URL.Query().Get("counters"); q != "" {
		for name := range strings.SplitSeq(q, ",") {
			c, ok := fabric.CounterByName(name)
			if !ok {
				http.Error(w, fmt.Sprintf("counters: unknown counter %q (want names as in /api/v1/fabric/utilization, such as xmit_data_bytes)", name), http.StatusBadRequest)
				return
			}
			want = append(want, c)
		}
	} else {
		for c := range fabric.NumCounters {
			want = append(want, c)
		}
	}
	rows := m.rows()
	w.Header().Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	bw := bufio.NewWriterSize(w, 64<<10)
	defer bw.Flush()
	var line []byte
	family := func(name, help, typ string, value func(*fabric.PortReading) (uint64, bool)) error {
		line = append(line[:0], "# HELP "...)
		line = append(line, name...)
		line = append(line, ' ')
		line = append(line, help...)
		line = append(line, "\n# TYPE "...)
		line = append(line, name...)
		line = append(line, ' ')
		line = append(line, typ...)
		line = append(line, '\n')
		if _, err := bw.Write(line); err != nil {
			return err
		}
		for _, row := range rows {
			v, ok := value(row.r)
			if !ok {
				continue
			}
			line = append(append(line[:0], name...), row.labels...)
			line = strconv.AppendUint(line, v, 10)
			line = append(line, '\n')
			if _, err := bw.Write(line); err != nil {
				return err
			}
		}
		return nil
	}
	if err := family("netloom_port_reachable", "1 if the port's counters were read in the last sweep, 0 if the query failed.", "gauge",
		func(r *fabric.PortReading) (uint64, bool) {
			if r.Err != nil {
				return 0, true
			}
			return 1, true
		}); err != nil {
		return
	}
	for _, c := range want {
		help := "InfiniBand port counter " + fabric.CounterNames[c] + " as last read (PortCounters/PortCountersExtended)."
		if err := family(portMetricNames[c], help, "counter", func(r *fabric.PortReading) (uint64, bool) {
			return r.V[c], r.Err == nil
		}); err != nil {
			return
		}
	}
}

// rows lists the last sweep's ports in order, with their labels.
func (m *portMetrics) rows() []portRow {
	st := m.state()
	if st == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.topo != st.Topology {
		m.topo, m.label = st.Topology, make(map[fabric.PortRef][]byte, len(st.Readings))
	}
	rows := make([]portRow, 0, len(st.Readings))
	for p, r := range st.Readings {
		l, ok := m.label[p]
		if !ok {
			l = portLabelBlock(st.Topology, p)
			m.label[p] = l
		}
		rows = append(rows, portRow{p, r, l})
	}
	slices.SortFunc(rows, func(a, b portRow) int {
		return cmp.Or(cmp.Compare(a.p.GUID, b.p.GUID), cmp.Compare(a.p.Port, b.p.Port))
	})
	return rows
}

// portLabelBlock is a port's labels as written after a series name, with
// the space before the value.
func portLabelBlock(t *fabric.Topology, p fabric.PortRef) []byte {
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
	b := []byte{'{'}
	for i, name := range portLabels {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, name...)
		b = append(b, '=', '"')
		b = append(b, labelEscaper.Replace(v[i])...)
		b = append(b, '"')
	}
	return append(b, '}', ' ')
}

// labelEscaper escapes a label value for the text format.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
