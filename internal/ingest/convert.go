package ingest

import (
	"cmp"
	"slices"

	"github.com/netloom/netloom/internal/ingest/agentpb"
	"github.com/netloom/netloom/internal/store"
)

// The agent's messages copied into the store's types, field by field: a
// process block (processOf; keepProcess for a snapshot without one), the
// GPU section and Traffic values. Per-field copying like this (and the
// deltas of tracker_deltas.go) is what a generator from agent.proto would
// write; it is kept here, apart from the tracker's logic, for that.

// processOf copies a process block's fields into p. Its strings are
// interned, compared first with prev's (the rank's last snapshot, whose
// strings are usually the same).
func (t *Tracker) processOf(p *store.Process, pr *agentpb.Process, prev *store.Process) {
	p.Node, p.Host, p.PID, p.CPU = t.like(pr.Node, prev.Node), t.like(pr.Host, prev.Host), pr.Pid, pr.Cpu
	p.MPILibrary, p.Program, p.User = t.like(pr.MpiLibrary, prev.MPILibrary), t.like(pr.Program, prev.Program), t.like(pr.User, prev.User)
	p.CPUUser, p.CPUSystem, p.Wall, p.MPI = pr.CpuUserSeconds, pr.CpuSystemSeconds, pr.WallSeconds, pr.MpiSeconds
	p.VmSize, p.VmPeak, p.VmRSS, p.VmHWM = pr.VmSize, pr.VmPeak, pr.VmRss, pr.VmHwm
	p.IORead, p.IOWrite, p.MPIIORead, p.MPIIOWrite = pr.IoReadBytes, pr.IoWriteBytes, pr.MpiioReadBytes, pr.MpiioWriteBytes
	p.IntraNode, p.InterNode = traffic(pr.IntraNode), traffic(pr.InterNode)
	p.AgentDrops = pr.DatagramsDropped
}

// keepProcess copies into p what old's process block said: the identity
// and resource use known, for a snapshot without a process block.
func keepProcess(p, old *store.Process) {
	p.Node, p.Host, p.PID, p.CPU, p.MPILibrary, p.Program, p.User = old.Node, old.Host, old.PID, old.CPU, old.MPILibrary, old.Program, old.User
	p.CPUUser, p.CPUSystem, p.Wall, p.MPI = old.CPUUser, old.CPUSystem, old.Wall, old.MPI
	p.VmSize, p.VmPeak, p.VmRSS, p.VmHWM = old.VmSize, old.VmPeak, old.VmRSS, old.VmHWM
	p.IORead, p.IOWrite, p.MPIIORead, p.MPIIOWrite = old.IORead, old.IOWrite, old.MPIIORead, old.MPIIOWrite
	p.IntraNode, p.InterNode, p.AgentDrops = old.IntraNode, old.InterNode, old.AgentDrops
}

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
