package ingest

import (
	"cmp"
	"slices"

	"github.com/netloom/netloom/internal/ingest/agentpb"
	"github.com/netloom/netloom/internal/store"
)

// The agent's messages copied into the store's types, field by field: the
// GPU section and Traffic values. The process block's copies (processOf,
// keepProcess) are generated from agent.proto's annotations, in
// record.gen.go.

// gpuOf converts a GPU section, its peers sorted (Validate checked them
// world ranks, each once); empty lists are nil, as the store reads them.
func gpuOf(g *agentpb.Gpu) *store.GPU {
	out := &store.GPU{Probed: g.Probed, ProbeError: g.ProbeError, NCCLVersion: g.NcclVersion,
		NCCLProfilerInterface: g.NcclProfilerInterface, NCCLNetEvents: g.NcclNetEvents}
	if len(g.Functions) > 0 {
		out.Functions = make([]store.GPUFunction, len(g.Functions))
		for i, f := range g.Functions {
			out.Functions[i] = store.GPUFunction{Name: f.Name, Send: bufferKinds(f.Send), Recv: bufferKinds(f.Recv)}
		}
	}
	if len(g.Peers) > 0 {
		out.Peers = make([]store.GPUPeer, len(g.Peers))
		for i, p := range g.Peers {
			out.Peers[i] = store.GPUPeer{Peer: int(p.Peer), SentFrom: bufferKinds(p.SentFrom), ReceivedInto: bufferKinds(p.ReceivedInto)}
		}
		slices.SortFunc(out.Peers, func(a, b store.GPUPeer) int { return cmp.Compare(a.Peer, b.Peer) })
	}
	if len(g.NcclOps) > 0 {
		out.NCCLOps = make([]store.NCCLOp, len(g.NcclOps))
		for i, o := range g.NcclOps {
			out.NCCLOps[i] = store.NCCLOp{Comm: store.CommHash(o.Comm), CommRank: o.CommRank, CommSize: o.CommSize, Name: o.Name,
				Algorithm: o.Algorithm, Protocol: o.Protocol, Calls: o.Calls, Bytes: o.Bytes, TimeNS: o.TimeNs}
		}
	}
	if len(g.NcclPeers) > 0 {
		out.NCCLPeers = make([]store.NCCLPeer, len(g.NcclPeers))
		for i, p := range g.NcclPeers {
			out.NCCLPeers[i] = store.NCCLPeer{Comm: store.CommHash(p.Comm), Peer: p.Peer, Sent: traffic(p.Sent), Received: traffic(p.Received)}
		}
	}
	return out
}

func bufferKinds(k *agentpb.BufferKinds) store.BufferKinds {
	if k == nil {
		return store.BufferKinds{}
	}
	return store.BufferKinds{Pageable: traffic(k.Pageable), Pinned: traffic(k.Pinned), Device: traffic(k.Device), Managed: traffic(k.Managed)}
}

func traffic(t *agentpb.Traffic) store.Traffic {
	if t == nil {
		return store.Traffic{}
	}
	return store.Traffic{Bytes: t.Bytes, Msgs: t.Msgs}
}
