package api

import (
	"errors"
	"sort"
	"time"

	"net/http"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
)

// portErrors serves GET /api/v1/fabric/errors?from=&to=&min=: every port
// whose error counters rose by at least min (default 1) in [from, to], most
// errors first, with the total per error counter. The topology is the one
// in force at to.
func (s *Server) portErrors(r *http.Request) (any, error) {
	from, to, err := timeRange(r)
	if err != nil {
		return nil, err
	}
	minErrors, err := intParam(r, "min", 1, 1, 1<<30)
	if err != nil {
		return nil, err
	}
	limit, err := intParam(r, "limit", 1000, 1, 100000)
	if err != nil {
		return nil, err
	}
	var topo *fabric.Topology
	if st := s.opt.State(); st != nil && r.URL.Query().Get("to") == "" {
		topo = st.Topology
	} else {
		t, _, err := s.opt.Store.TopologyAt(r.Context(), to)
		if errors.Is(err, store.ErrNotFound) {
			return nil, notFound("no topology recorded at or before %s", to.Format(time.RFC3339))
		}
		if err != nil {
			return nil, err
		}
		topo = t
	}
	ports := topo.SwitchPorts(true)
	got, err := s.opt.Store.PortSamples(r.Context(), ports, from, to)
	if err != nil {
		return nil, err
	}
	type row struct {
		Port     fabric.PortRef    `json:"port"`
		Node     string            `json:"node"`
		PortName string            `json:"port_name,omitempty"` // where the fabric names ports
		Peer     *fabric.PortRef   `json:"peer,omitempty"`
		PeerNode string            `json:"peer_node,omitempty"`
		PeerName string            `json:"peer_name,omitempty"`
		Link     string            `json:"link,omitempty"`
		Total    uint64            `json:"total"`
		Counters map[string]uint64 `json:"counters"`
		Last     time.Time         `json:"last"`
	}
	rows := []row{}
	for _, p := range ports {
		var total uint64
		var per [fabric.NumCounters]uint64
		var last time.Time
		for i := range got[p] {
			smp := &got[p][i]
			var sum uint64
			for c := fabric.FirstError; c < fabric.NumCounters; c++ {
				per[c] += smp.Delta[c]
				sum += smp.Delta[c]
			}
			if sum > 0 {
				last = smp.Time
			}
			total += sum
		}
		if total < uint64(minErrors) {
			continue
		}
		rw := row{Port: p, PortName: topo.PortName(p), Total: total, Counters: map[string]uint64{}, Last: last}
		if n, ok := topo.Node(p.GUID); ok {
			rw.Node = n.Name()
		}
		if lk, ok := topo.LinkAt(p); ok {
			rw.Link = lk.ID()
			peer, _ := topo.Peer(p)
			rw.Peer, rw.PeerName = &peer, topo.PortName(peer)
			if n, ok := topo.Node(peer.GUID); ok {
				rw.PeerNode = n.Name()
			}
		}
		for c := fabric.FirstError; c < fabric.NumCounters; c++ {
			if per[c] > 0 {
				rw.Counters[fabric.CounterNames[c]] = per[c]
			}
		}
		rows = append(rows, rw)
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Total > rows[j].Total })
	total := len(rows)
	if len(rows) > limit {
		rows = rows[:limit]
	}
	return map[string]any{"from": from, "to": to, "min": minErrors, "total": total, "ports": rows}, nil
}
