package api

import (
	"net/http"
	"net/netip"
	"time"

	"github.com/netloom/netloom/internal/flowjobs"
)

// ServeConnections adds GET /api/v1/jobs/{job}/connections (docs/api.md,
// docs/sflow.md "Flows to jobs"): the network connections the job's ranks
// reported, as the flows-to-jobs index holds them, with the rank at each
// end. Administrators only: they name hosts' addresses and ports.
func (s *Server) ServeConnections(conns func(job string, limit int) (flowjobs.JobConns, bool)) {
	s.route("GET /api/v1/jobs/{job}/connections", func(r *http.Request) (any, error) {
		limit, err := intParam(r, "limit", 1000, 1, 1_000_000)
		if err != nil {
			return nil, err
		}
		job := r.PathValue("job")
		jc, ok := conns(job, limit)
		if !ok {
			return nil, notFound("job %q: no connections reported (not running or ended past the index's retention, or its agents sent none)", job)
		}
		type connJSON struct {
			Kind    string `json:"kind"`
			Src     string `json:"src"`
			Dst     string `json:"dst"`
			QP      uint32 `json:"qp,omitempty"`
			SrcRank int    `json:"src_rank"`
			DstRank int    `json:"dst_rank"`
			Current bool   `json:"current"`
		}
		out := []connJSON{}
		for _, c := range jc.Conns {
			k := c.Key
			cj := connJSON{Kind: "tcp", Src: netip.AddrPortFrom(k.Src, k.SrcPort).String(), Dst: netip.AddrPortFrom(k.Dst, k.DstPort).String(),
				SrcRank: c.SrcRank, DstRank: c.DstRank, Current: c.Current}
			if k.Proto != 6 {
				cj.Kind, cj.Src, cj.QP = "roce", k.Src.String(), k.QP
			}
			out = append(out, cj)
		}
		var end *time.Time
		if !jc.End.IsZero() {
			end = &jc.End
		}
		return map[string]any{"job": jc.Job, "user": jc.User, "start": jc.Start, "end": end, "connections": out,
			"total": jc.Total, "limit": limit, "truncated": jc.Total > limit}, nil
	})
}
