package api

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netloom/netloom/internal/fabric"
)

// The live stream (GET /api/v1/fabric/stream) is Server-Sent Events. After
// each sweep every client gets one "sweep" event:
//
//	{"version": 3, "sweep": 41, "time": 1763781600.5, "links": 16893, "nodes": 7305,
//	 "util": "<base64>", "errors": "<base64>", "error_nodes": 2}
//
// util holds two bytes per link in the layout's link order: the direction
// A→B (what leaves end A) then B→A. A byte is the utilization in percent
// times 2.54, rounded (0..254); 255 means not measured. errors is a bitset
// over the layout's nodes (bit i%8 of byte i/8): the node had a port whose
// error counters rose in the last sweep. A "topology" event carries the new
// version when the fabric changed; clients then fetch the new layout.
//
// Each client only ever holds the newest message: a client that falls
// behind skips sweeps, and one whose writes stall past streamWriteTimeout is
// dropped. The message is encoded once per sweep for all clients.

const (
	streamPoll         = 100 * time.Millisecond
	streamWriteTimeout = 5 * time.Second
	streamKeepAlive    = 15 * time.Second
	streamMaxClients   = 256
	// UtilUnmeasured marks a link direction with no sample.
	UtilUnmeasured = 255
)

// StreamMessage is one "sweep" event.
type StreamMessage struct {
	Version    int64   `json:"version"`
	Sweep      int64   `json:"sweep"`
	Time       float64 `json:"time"`
	Links      int     `json:"links"`
	Nodes      int     `json:"nodes"`
	Util       string  `json:"util"`
	Errors     string  `json:"errors"`
	ErrorNodes int     `json:"error_nodes"`
}

type streamHub struct {
	clients atomic.Int64
	mu      sync.Mutex
	last    *encodedSweep
	index   map[fabric.GUID]int // node index of the cached version
	indexV  int64
}

type encodedSweep struct {
	version, sweep int64
	data           []byte // the "data:" payload
}

// message returns the encoded sweep message of a state, computed once.
func (h *streamHub) message(st *FabricState) *encodedSweep {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last != nil && h.last.version == st.Version && h.last.sweep == st.Sweep.Count {
		return h.last
	}
	if h.index == nil || h.indexV != st.Version {
		h.index = make(map[fabric.GUID]int, len(st.Topology.Nodes))
		for i := range st.Topology.Nodes {
			h.index[st.Topology.Nodes[i].GUID] = i
		}
		h.indexV = st.Version
	}
	m := SweepMessage(st, h.index)
	data, _ := json.Marshal(m) // plain struct: cannot fail
	h.last = &encodedSweep{version: st.Version, sweep: st.Sweep.Count, data: data}
	return h.last
}

// SweepMessage computes the per-direction utilization and per-node error
// flags of a state. index maps GUIDs to node indices (nil: computed).
func SweepMessage(st *FabricState, index map[fabric.GUID]int) StreamMessage {
	t := st.Topology
	if index == nil {
		index = make(map[fabric.GUID]int, len(t.Nodes))
		for i := range t.Nodes {
			index[t.Nodes[i].GUID] = i
		}
	}
	util := make([]byte, 2*len(t.Links))
	for j := range t.Links {
		lk := &t.Links[j]
		capacity := lk.Capacity()
		util[2*j] = quantize(dirRate(st.Samples, lk.A, lk.B), capacity)
		util[2*j+1] = quantize(dirRate(st.Samples, lk.B, lk.A), capacity)
	}
	bits := make([]byte, (len(t.Nodes)+7)/8)
	errNodes := 0
	for p, smp := range st.Samples {
		var sum uint64
		for c := fabric.FirstError; c < fabric.NumCounters; c++ {
			sum += smp.Delta[c]
		}
		if sum == 0 {
			continue
		}
		if i, ok := index[p.GUID]; ok && bits[i/8]&(1<<(i%8)) == 0 {
			bits[i/8] |= 1 << (i % 8)
			errNodes++
		}
	}
	return StreamMessage{Version: st.Version, Sweep: st.Sweep.Count, Time: float64(st.Sweep.Time.UnixMilli()) / 1000,
		Links: len(t.Links), Nodes: len(t.Nodes), Util: base64.StdEncoding.EncodeToString(util),
		Errors: base64.StdEncoding.EncodeToString(bits), ErrorNodes: errNodes}
}

// dirRate is the bytes/s from port from to port to: from's transmit
// counter when it was swept, else to's receive counter; -1 when neither.
func dirRate(samples map[fabric.PortRef]*fabric.PortSample, from, to fabric.PortRef) float64 {
	if x, ok := samples[from]; ok {
		return x.Rate(fabric.XmitData)
	}
	if y, ok := samples[to]; ok {
		return y.Rate(fabric.RcvData)
	}
	return -1
}

func quantize(rate, capacity float64) byte {
	if rate < 0 || capacity <= 0 {
		return UtilUnmeasured
	}
	q := math.Round(rate / capacity * 254)
	return byte(min(max(q, 0), 254))
}

// stream serves GET /api/v1/fabric/stream.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	if n := s.hub.clients.Add(1); n > streamMaxClients {
		s.hub.clients.Add(-1)
		s.fail(w, &httpError{http.StatusServiceUnavailable, "too_many_streams", fmt.Sprintf("more than %d live streams open", streamMaxClients)})
		return
	}
	defer s.hub.clients.Add(-1)
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	// write sends one chunk within the write timeout; an error drops the client.
	write := func(chunks ...[]byte) error {
		if err := rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout)); err != nil && err != http.ErrNotSupported {
			return err
		}
		for _, c := range chunks {
			if _, err := w.Write(c); err != nil {
				return err
			}
		}
		return rc.Flush()
	}
	if err := write([]byte("retry: 2000\n\n")); err != nil {
		return
	}
	ctx := r.Context()
	tick := time.NewTicker(streamPoll)
	defer tick.Stop()
	var sentVersion, sentSweep int64 = -1, -1
	lastWrite := time.Now()
	for {
		if st := s.opt.State(); st != nil {
			if st.Version != sentVersion && sentVersion >= 0 {
				if err := write([]byte("event: topology\ndata: {\"version\":" + strconv.FormatInt(st.Version, 10) + "}\n\n")); err != nil {
					s.opt.Log.Debug("api: stream client dropped", "remote", r.RemoteAddr, "err", err)
					return
				}
				lastWrite = time.Now()
			}
			if st.Version != sentVersion || st.Sweep.Count != sentSweep {
				m := s.hub.message(st)
				id := strconv.FormatInt(m.version, 10) + "-" + strconv.FormatInt(m.sweep, 10)
				if err := write([]byte("event: sweep\nid: "+id+"\ndata: "), m.data, []byte("\n\n")); err != nil {
					s.opt.Log.Debug("api: stream client dropped", "remote", r.RemoteAddr, "err", err)
					return
				}
				sentVersion, sentSweep, lastWrite = st.Version, st.Sweep.Count, time.Now()
			}
		}
		if time.Since(lastWrite) > streamKeepAlive {
			if err := write([]byte(": keep-alive\n\n")); err != nil {
				return
			}
			lastWrite = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// utilization serves GET /api/v1/fabric/utilization?at=: the stream's
// "sweep" message for one moment, live or past, so the map can be drawn as
// it was at any time.
func (s *Server) utilization(r *http.Request) (any, error) {
	v, err := s.viewAt(r)
	if err != nil {
		return nil, err
	}
	if v.live != nil {
		return json.RawMessage(s.hub.message(v.live).data), nil
	}
	latest, err := s.latest(r.Context(), v)
	if err != nil {
		return nil, err
	}
	st := &FabricState{Topology: v.topo, Version: v.version, Samples: latest}
	for _, smp := range latest {
		if smp.Time.After(st.Sweep.Time) {
			st.Sweep.Time = smp.Time
		}
	}
	return SweepMessage(st, nil), nil
}
