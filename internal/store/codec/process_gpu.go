package codec

import (
	"encoding/binary"
	"fmt"

	"github.com/netloom/netloom/internal/store"
)

// The GPU section of a process row (flag 16), after its peer rows: uvarints
// and strings as in the rest of the row,
//
//	flags (1 probed, 2 NCCL network events), probe_error,
//	functions: count, then name, send kinds, recv kinds,
//	peers: count, then the peer as the (zig-zag) difference from the
//	  previous one, sent_from kinds, received_into kinds,
//	nccl_version, nccl_profiler_interface,
//	nccl ops: count, then comm (8 bytes, little-endian), comm_rank,
//	  comm_size, name, algorithm, protocol, calls, bytes, time_ns,
//	nccl peers: count, then comm (8 bytes), peer, sent bytes and msgs,
//	  received bytes and msgs,
//
// where kinds are a byte saying which of pageable, pinned, device and
// managed bytes and msgs are not zero, then those.
func appendGPU(dst []byte, g *store.GPU) []byte {
	var flags uint64
	if g.Probed {
		flags |= 1
	}
	if g.NCCLNetEvents {
		flags |= 2
	}
	dst = binary.AppendUvarint(dst, flags)
	dst = appendString(dst, g.ProbeError)
	dst = binary.AppendUvarint(dst, uint64(len(g.Functions)))
	for i := range g.Functions {
		f := &g.Functions[i]
		dst = appendString(dst, f.Name)
		dst = appendKinds(appendKinds(dst, &f.Send), &f.Recv)
	}
	dst = binary.AppendUvarint(dst, uint64(len(g.Peers)))
	prev := 0
	for i := range g.Peers {
		p := &g.Peers[i]
		dst = binary.AppendVarint(dst, int64(p.Peer-prev))
		prev = p.Peer
		dst = appendKinds(appendKinds(dst, &p.SentFrom), &p.ReceivedInto)
	}
	dst = appendString(dst, g.NCCLVersion)
	dst = binary.AppendUvarint(dst, uint64(g.NCCLProfilerInterface))
	dst = binary.AppendUvarint(dst, uint64(len(g.NCCLOps)))
	for i := range g.NCCLOps {
		o := &g.NCCLOps[i]
		dst = binary.LittleEndian.AppendUint64(dst, uint64(o.Comm))
		dst = binary.AppendUvarint(binary.AppendUvarint(dst, uint64(o.CommRank)), uint64(o.CommSize))
		dst = appendString(appendString(appendString(dst, o.Name), o.Algorithm), o.Protocol)
		for _, v := range [...]uint64{o.Calls, o.Bytes, o.TimeNS} {
			dst = binary.AppendUvarint(dst, v)
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(g.NCCLPeers)))
	for i := range g.NCCLPeers {
		p := &g.NCCLPeers[i]
		dst = binary.LittleEndian.AppendUint64(dst, uint64(p.Comm))
		dst = binary.AppendUvarint(dst, uint64(p.Peer))
		dst = appendTraffic(appendTraffic(dst, p.Sent), p.Received)
	}
	return dst
}

func appendKinds(dst []byte, k *store.BufferKinds) []byte {
	vals := [8]uint64{k.Pageable.Bytes, k.Pageable.Msgs, k.Pinned.Bytes, k.Pinned.Msgs, k.Device.Bytes, k.Device.Msgs, k.Managed.Bytes, k.Managed.Msgs}
	var mask byte
	for i, v := range vals {
		if v != 0 {
			mask |= 1 << i
		}
	}
	dst = append(dst, mask)
	for _, v := range vals {
		if v != 0 {
			dst = binary.AppendUvarint(dst, v)
		}
	}
	return dst
}

func (r *rowReader) kinds() store.BufferKinds {
	if len(r.b) == 0 {
		r.fail("buffer kinds")
		return store.BufferKinds{}
	}
	mask := r.b[0]
	r.b = r.b[1:]
	var v [8]uint64
	for i := range v {
		if mask&(1<<i) != 0 {
			v[i] = r.uvarint()
		}
	}
	return store.BufferKinds{Pageable: store.Traffic{Bytes: v[0], Msgs: v[1]}, Pinned: store.Traffic{Bytes: v[2], Msgs: v[3]},
		Device: store.Traffic{Bytes: v[4], Msgs: v[5]}, Managed: store.Traffic{Bytes: v[6], Msgs: v[7]}}
}

func (r *rowReader) fixed64() uint64 {
	if len(r.b) < 8 {
		r.fail("communicator")
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

// gpu reads the GPU section; empty lists are nil.
func (r *rowReader) gpu() *store.GPU {
	g := &store.GPU{}
	flags := r.uvarint()
	if r.err == nil && flags >= 4 {
		r.err = fmt.Errorf("gpu flags %#x", flags)
		r.b = nil
	}
	g.Probed, g.NCCLNetEvents = flags&1 != 0, flags&2 != 0
	g.ProbeError = r.string()
	if n := r.count("gpu functions", 3); n > 0 {
		g.Functions = make([]store.GPUFunction, n)
		for i := range g.Functions {
			f := &g.Functions[i]
			f.Name = r.string()
			f.Send, f.Recv = r.kinds(), r.kinds()
		}
	}
	if n := r.count("gpu peers", 3); n > 0 {
		g.Peers = make([]store.GPUPeer, n)
		prev := 0
		for i := range g.Peers {
			p := &g.Peers[i]
			p.Peer = prev + int(r.varint())
			prev = p.Peer
			p.SentFrom, p.ReceivedInto = r.kinds(), r.kinds()
		}
	}
	g.NCCLVersion = r.string()
	g.NCCLProfilerInterface = uint32(r.uvarint())
	if n := r.count("nccl ops", 16); n > 0 {
		g.NCCLOps = make([]store.NCCLOp, n)
		for i := range g.NCCLOps {
			o := &g.NCCLOps[i]
			o.Comm = store.CommHash(r.fixed64())
			o.CommRank, o.CommSize = uint32(r.uvarint()), uint32(r.uvarint())
			o.Name, o.Algorithm, o.Protocol = r.string(), r.string(), r.string()
			o.Calls, o.Bytes, o.TimeNS = r.uvarint(), r.uvarint(), r.uvarint()
		}
	}
	if n := r.count("nccl peers", 13); n > 0 {
		g.NCCLPeers = make([]store.NCCLPeer, n)
		for i := range g.NCCLPeers {
			p := &g.NCCLPeers[i]
			p.Comm = store.CommHash(r.fixed64())
			p.Peer = uint32(r.uvarint())
			p.Sent, p.Received = r.traffic(), r.traffic()
		}
	}
	return g
}
