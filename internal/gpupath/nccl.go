package gpupath

import (
	"cmp"
	"slices"

	"github.com/netloom/netloom/internal/store"
)

// NCCLSource says where the NCCL figures come from.
const NCCLSource = "NCCL profiler plugin (libnetloom-nccl.so)"

// Where NCCL's per-peer bytes come from (NCCL.PeersFrom).
const (
	PeersFromNetEvents = "network events"   // the IB/RoCE transport's network events
	PeersFromProxy     = "proxy operations" // no network events: NCCL's proxy operations
	PeersNone          = "none reported"
)

// Link attribution of NCCL traffic (NCCL.LinkAttribution).
const (
	LinksFromNetEvents = "from NCCL network events"
	LinksFromProxy     = "from NCCL's proxy operations (the bytes its network transport moved)"
	LinksNotAttributed = "not reported by NCCL's transport: links not attributed"
)

// NCCL is a job's NCCL operations summed over its ranks.
type NCCL struct {
	Source string `json:"source"`
	// Ranks that reported NCCL operations.
	Ranks              int      `json:"ranks"`
	Versions           []string `json:"versions"`            // NCCL versions the ranks ran
	ProfilerInterfaces []uint32 `json:"profiler_interfaces"` // the ncclProfiler_vN NCCL took: N
	// Ops per communicator, operation, algorithm and protocol, the most
	// time first.
	Ops       []NCCLOpTotal `json:"ops"`
	PeersFrom string        `json:"nccl_peers_from"`
	// LinkAttribution says whether the job's links are attributed from
	// NCCL's own per-peer network bytes.
	LinkAttribution string `json:"link_attribution"`
	// Peers: each rank's network traffic per communicator peer, the most
	// bytes first, at most as many as asked; PeersTotal counts them all.
	Peers      []NCCLPeerRow `json:"peers"`
	PeersTotal int           `json:"peers_total"`
}

// NCCLOpTotal is one NCCL operation over the ranks that ran it.
type NCCLOpTotal struct {
	Comm      store.CommHash `json:"comm"`
	CommSize  uint32         `json:"comm_size"`
	Name      string         `json:"name"`
	Algorithm string         `json:"algorithm"` // "" where NCCL did not report it
	Protocol  string         `json:"protocol"`
	Ranks     int            `json:"ranks"`
	Calls     uint64         `json:"calls"`
	Bytes     uint64         `json:"bytes"`
	TimeNS    uint64         `json:"time_ns"` // summed over calls and ranks
}

// NCCLPeerRow is what one rank's NCCL exchanged over the network with one
// peer of a communicator (Peer: its rank in the communicator).
type NCCLPeerRow struct {
	Rank     int            `json:"rank"`
	Comm     store.CommHash `json:"comm"`
	Peer     uint32         `json:"peer"`
	Sent     store.Traffic  `json:"sent"`
	Received store.Traffic  `json:"received"`
}

func nccl(j *store.Job, maxPeers int) NCCL {
	n := NCCL{Source: NCCLSource, Versions: []string{}, ProfilerInterfaces: []uint32{}, Ops: []NCCLOpTotal{}, Peers: []NCCLPeerRow{}, PeersFrom: PeersNone,
		LinkAttribution: LinksNotAttributed}
	type key struct {
		comm                      store.CommHash
		name, algorithm, protocol string
	}
	ops := map[key]*NCCLOpTotal{}
	netEvents := false
	for i := range j.Processes {
		p := &j.Processes[i]
		g := p.GPU
		if g == nil {
			continue
		}
		if len(g.NCCLOps) > 0 {
			n.Ranks++
		}
		if g.NCCLVersion != "" && !slices.Contains(n.Versions, g.NCCLVersion) {
			n.Versions = append(n.Versions, g.NCCLVersion)
		}
		if g.NCCLProfilerInterface != 0 && !slices.Contains(n.ProfilerInterfaces, g.NCCLProfilerInterface) {
			n.ProfilerInterfaces = append(n.ProfilerInterfaces, g.NCCLProfilerInterface)
		}
		netEvents = netEvents || g.NCCLNetEvents
		seen := map[key]bool{}
		for _, o := range g.NCCLOps {
			k := key{o.Comm, o.Name, o.Algorithm, o.Protocol}
			t := ops[k]
			if t == nil {
				t = &NCCLOpTotal{Comm: o.Comm, Name: o.Name, Algorithm: o.Algorithm, Protocol: o.Protocol}
				ops[k] = t
			}
			if !seen[k] {
				seen[k] = true
				t.Ranks++
			}
			t.CommSize = max(t.CommSize, o.CommSize)
			t.Calls += o.Calls
			t.Bytes += o.Bytes
			t.TimeNS += o.TimeNS
		}
		for _, x := range g.NCCLPeers {
			n.Peers = append(n.Peers, NCCLPeerRow{Rank: p.Rank, Comm: x.Comm, Peer: x.Peer, Sent: x.Sent, Received: x.Received})
		}
	}
	for _, t := range ops {
		n.Ops = append(n.Ops, *t)
	}
	slices.SortFunc(n.Ops, func(a, b NCCLOpTotal) int {
		return cmp.Or(cmp.Compare(b.TimeNS, a.TimeNS), cmp.Compare(b.Bytes, a.Bytes), cmp.Compare(a.Comm, b.Comm), cmp.Compare(a.Name, b.Name),
			cmp.Compare(a.Algorithm, b.Algorithm), cmp.Compare(a.Protocol, b.Protocol))
	})
	slices.Sort(n.Versions)
	slices.Sort(n.ProfilerInterfaces)
	switch {
	case netEvents:
		n.PeersFrom, n.LinkAttribution = PeersFromNetEvents, LinksFromNetEvents
	case len(n.Peers) > 0:
		n.PeersFrom, n.LinkAttribution = PeersFromProxy, LinksFromProxy
	}
	slices.SortStableFunc(n.Peers, func(a, b NCCLPeerRow) int {
		return cmp.Compare(b.Sent.Bytes+b.Received.Bytes, a.Sent.Bytes+a.Received.Bytes)
	})
	n.PeersTotal = len(n.Peers)
	if maxPeers >= 0 && len(n.Peers) > maxPeers {
		n.Peers = n.Peers[:maxPeers]
	}
	return n
}
