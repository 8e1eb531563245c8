package loadgen

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/netloom/netloom/internal/ingest/agentpb"
)

// Field numbers of agent.proto's Datagram and its rows.
const (
	fVersion, fJobID, fRank, fWorldSize, fSeq protowire.Number = 1, 2, 3, 4, 5
	fChunk, fChunks, fTime, fFinal, fStart    protowire.Number = 6, 7, 8, 9, 10
	fProcess, fFunctions, fNodes, fPeers      protowire.Number = 11, 12, 14, 15
	fTruncated, fInterval                     protowire.Number = 16, 17
	fRowNode, fRowP2P, fRowColl, fPeerHist    protowire.Number = 1, 2, 3, 5
)

// encoder writes a rank's snapshot straight into datagrams of the agent's
// wire format, split into chunks under maxDatagram as the agent does: the
// process block and functions in chunk 0, node then peer rows spread over
// the chunks. It reuses its buffers, so a snapshot costs no allocation:
// encoding through proto.Marshal (sizing, then writing, every row of a
// 1,024-node all-to-all rank) made the generator cost about 14% of a core
// per 1x Stampede, as much as the daemon it loads. The encoding is the
// one proto.Marshal gives (loadgen_test.go checks it byte for byte).
type encoder struct {
	headA, headB, first, tail []byte // fields 1-5, 8-10, 11-12, 16-17
	rows                      []byte // node and peer rows, each a whole field
	ends                      []int  // where each row ends in rows
	out                       []byte // the datagram being sent
	msg                       []byte // scratch: the process block's body
	peers, nodes              []flow
	proc                      agentpb.Process
	intra, inter              agentpb.Traffic
	funcs                     [4]agentpb.FunctionStat
	funcPtrs                  []*agentpb.FunctionStat
}

// snap is one snapshot's header fields.
type snap struct {
	job                  *job
	rank                 int
	seq                  uint64
	time, start          int64
	interval             uint64
	final                bool
	elapsed              float64
	peerLimit, peerCount int
}

// encode lays a snapshot out; send each of its chunks with datagram(i).
// It returns the number of chunks.
func (e *encoder) encode(s snap) int {
	j, rank := s.job, s.rank
	n := j.ranks()
	limit := n
	if n > s.peerLimit {
		limit = s.peerCount
	}
	var truncated bool
	e.peers, e.nodes, truncated = flowsInto(e.peers[:0], e.nodes[:0], j, rank, rankJitter(rank), limit)

	e.headA = appendUint(e.headA[:0], fVersion, 1)
	e.headA = protowire.AppendTag(e.headA, fJobID, protowire.BytesType)
	e.headA = protowire.AppendString(e.headA, j.id)
	e.headA = appendUint(e.headA, fRank, uint64(rank))
	e.headA = appendUint(e.headA, fWorldSize, uint64(n))
	e.headA = appendUint(e.headA, fSeq, s.seq)
	e.headB = appendUint(e.headB[:0], fTime, uint64(s.time))
	if s.final {
		e.headB = appendUint(e.headB, fFinal, 1)
	}
	e.headB = appendUint(e.headB, fStart, uint64(s.start))
	e.tail = e.tail[:0]
	if truncated {
		e.tail = appendUint(e.tail, fTruncated, 1)
	}
	e.tail = appendUint(e.tail, fInterval, s.interval)

	e.rows, e.ends = e.rows[:0], e.ends[:0]
	myNode := rank / j.ppn
	e.intra, e.inter = agentpb.Traffic{}, agentpb.Traffic{}
	for _, f := range e.nodes {
		bytes := uint64(f.rate * s.elapsed)
		e.rows = appendNodeRow(e.rows, j.nodes[f.to], f.coll, bytes, bytes/65536)
		e.ends = append(e.ends, len(e.rows))
		side := &e.inter
		if f.to == myNode {
			side = &e.intra
		}
		side.Bytes += bytes
		side.Msgs += bytes / 65536
	}
	for _, f := range e.peers {
		bytes := uint64(f.rate * s.elapsed)
		e.rows = appendPeerRow(e.rows, uint32(f.to), f.coll, bytes, bytes/65536)
		e.ends = append(e.ends, len(e.rows))
	}

	fillProcess(&e.proc, j, rank, s.elapsed, &e.intra, &e.inter)
	e.funcPtrs = fillFunctions(e.funcPtrs[:0], &e.funcs, s.elapsed, e.intra.Bytes+e.inter.Bytes)
	e.first, e.msg = appendProcess(e.first[:0], e.msg, fProcess, &e.proc)
	for _, fs := range e.funcPtrs {
		e.first = appendFunction(e.first, fFunctions, fs)
	}
	return e.layout()
}

// chunkFields is room for the chunk and chunks fields.
const chunkFields = 2 * (1 + 5) // two tags and 32-bit varints

// layout splits the rows over chunks, greedily in order, and returns the
// number of chunks; e.ends becomes the end of each chunk's rows.
func (e *encoder) layout() int {
	fixed := len(e.headA) + len(e.headB) + len(e.tail) + chunkFields
	room := maxDatagram - fixed - len(e.first)
	start, prev, chunks := 0, 0, 0
	for _, end := range e.ends {
		// A row that does not fit starts the next chunk (chunks < i: the
		// rows' ends not yet read are not overwritten).
		if end-start > room && prev > start {
			e.ends[chunks] = prev
			chunks++
			start, room = prev, maxDatagram-fixed
		}
		prev = end
	}
	e.ends = append(e.ends[:chunks], len(e.rows))
	return chunks + 1
}

// datagram returns chunk i of chunks, valid until the next call.
func (e *encoder) datagram(i, chunks int) []byte {
	from := 0
	if i > 0 {
		from = e.ends[i-1]
	}
	e.out = append(e.out[:0], e.headA...)
	if i > 0 {
		e.out = appendUint(e.out, fChunk, uint64(i))
	}
	e.out = appendUint(e.out, fChunks, uint64(chunks))
	e.out = append(e.out, e.headB...)
	if i == 0 {
		e.out = append(e.out, e.first...)
	}
	e.out = append(e.out, e.rows[from:e.ends[i]]...)
	return append(e.out, e.tail...)
}

// appendUint appends a varint field, left out when zero (proto3).
func appendUint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func trafficSize(bytes, msgs uint64) int {
	n := 0
	if bytes != 0 {
		n += 1 + protowire.SizeVarint(bytes)
	}
	if msgs != 0 {
		n += 1 + protowire.SizeVarint(msgs)
	}
	return n
}

func appendTraffic(b []byte, num protowire.Number, bytes, msgs uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(trafficSize(bytes, msgs)))
	b = appendUint(b, 1, bytes)
	return appendUint(b, 2, msgs)
}

func classField(coll bool) protowire.Number {
	if coll {
		return fRowColl
	}
	return fRowP2P
}

// appendNodeRow appends a NodeTraffic row; a class with no bytes is left
// out, as the agent does.
func appendNodeRow(b []byte, node string, coll bool, bytes, msgs uint64) []byte {
	size := 1 + protowire.SizeBytes(len(node))
	if bytes > 0 {
		size += 1 + protowire.SizeBytes(trafficSize(bytes, msgs))
	}
	b = protowire.AppendTag(b, fNodes, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	b = protowire.AppendTag(b, fRowNode, protowire.BytesType)
	b = protowire.AppendString(b, node)
	if bytes > 0 {
		b = appendTraffic(b, classField(coll), bytes, msgs)
	}
	return b
}

// histBins is the agent's size histogram length; the generator's
// point-to-point messages are all 64 KiB, the last bin.
const histBins = 18

// appendPeerRow appends a PeerTraffic row; point-to-point rows carry the
// size histogram.
func appendPeerRow(b []byte, peer uint32, coll bool, bytes, msgs uint64) []byte {
	size := 1 + protowire.SizeBytes(trafficSize(bytes, msgs))
	if peer != 0 {
		size += 1 + protowire.SizeVarint(uint64(peer))
	}
	hist := histBins - 1 + protowire.SizeVarint(msgs)
	if !coll {
		size += 1 + protowire.SizeBytes(hist)
	}
	b = protowire.AppendTag(b, fPeers, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	b = appendUint(b, 1, uint64(peer))
	b = appendTraffic(b, classField(coll), bytes, msgs)
	if !coll {
		b = protowire.AppendTag(b, fPeerHist, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(hist))
		for range histBins - 1 {
			b = append(b, 0)
		}
		b = protowire.AppendVarint(b, msgs)
	}
	return b
}

// appendProcess appends the process block as field num, its fields in
// order and zero ones left out, as proto.Marshal writes it (which, sizing
// and writing by reflection with the function rows, was 28% of the
// generator's CPU); scratch is reused for the block's body.
func appendProcess(b, scratch []byte, num protowire.Number, p *agentpb.Process) ([]byte, []byte) {
	m := appendProcessFields(scratch[:0], p) // record.gen.go
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, m), m
}

// appendFunction appends a function row as field num, as proto.Marshal
// writes it.
func appendFunction(b []byte, num protowire.Number, f *agentpb.FunctionStat) []byte {
	size := 0
	if f.Name != "" {
		size += 1 + protowire.SizeBytes(len(f.Name))
	}
	for _, v := range [...]uint64{f.Calls, f.TimeNs, f.BytesSent, f.BytesReceived} {
		if v != 0 {
			size += 1 + protowire.SizeVarint(v)
		}
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	b = appendString(b, 1, f.Name)
	b = appendUint(b, 2, f.Calls)
	b = appendUint(b, 3, f.TimeNs)
	b = appendUint(b, 4, f.BytesSent)
	return appendUint(b, 5, f.BytesReceived)
}

// appendString appends a string field, left out when empty (proto3).
func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}
