package api

import (
	"net/http"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/sflow"
)

// FlowSource is the sFlow collector's store: the flows sampled leaving a
// switch port (one link direction) in a time range.
type FlowSource func(dir fabric.PortRef, from, to time.Time) []sflow.Flow

// ServeFlows adds GET /api/v1/links/{link}/flows (docs/api.md, docs/sflow.md):
// administrators only, as flows name hosts' addresses and ports.
func (s *Server) ServeFlows(flows FlowSource) {
	s.route("GET /api/v1/links/{link}/flows", func(r *http.Request) (any, error) {
		_, l, err := s.linkView(r)
		if err != nil {
			return nil, err
		}
		from, to, err := timeRange(r)
		if err != nil {
			return nil, err
		}
		type flowJSON struct {
			Src     string `json:"src"`
			Dst     string `json:"dst"`
			Proto   uint8  `json:"proto"`
			SrcPort uint16 `json:"src_port"`
			DstPort uint16 `json:"dst_port"`
			InPort  int    `json:"in_port"`
			Bytes   uint64 `json:"estimated_bytes"`
			Samples uint64 `json:"samples"`
		}
		type dirJSON struct {
			From    fabric.PortRef `json:"from"`
			To      fabric.PortRef `json:"to"`
			Bytes   uint64         `json:"estimated_bytes"`
			Samples uint64         `json:"samples"`
			Flows   []flowJSON     `json:"flows"`
		}
		out := []dirJSON{}
		for _, ends := range [2][2]fabric.PortRef{{l.A, l.B}, {l.B, l.A}} {
			d := dirJSON{From: ends[0], To: ends[1], Flows: []flowJSON{}}
			for _, f := range flows(ends[0], from, to) {
				fj := flowJSON{Proto: f.Proto, SrcPort: f.SrcPort, DstPort: f.DstPort, InPort: f.InPort, Bytes: f.Bytes, Samples: f.Samples}
				if f.Src.IsValid() {
					fj.Src, fj.Dst = f.Src.String(), f.Dst.String()
				}
				d.Flows = append(d.Flows, fj)
				d.Bytes += f.Bytes
				d.Samples += f.Samples
			}
			out = append(out, d)
		}
		return map[string]any{"link": newLinkJSON(*l), "from": from, "to": to, "directions": out}, nil
	})
}
