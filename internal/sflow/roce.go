package sflow

import "encoding/binary"

// RoCEv2 (InfiniBand Architecture Specification, Annex A17 "RoCEv2"): an
// InfiniBand transport packet inside UDP to port 4791. The UDP source port
// is an entropy value the sender picks per queue pair, so that switches
// hash its flows over equal-cost paths; what names the flow is the base
// transport header's (BTH) destination queue pair, the receiver's, with
// the packet's addresses. No RoCE device exists on the machines this is
// built on (no kernel modules: no Soft-RoCE either): the frames decoded
// here are made by the tests, byte by byte, from the specification.

// RoCEv2Port is RoCEv2's UDP destination port (IANA).
const RoCEv2Port = 4791

// bthLen is the base transport header's length: opcode, flags, partition
// key, reserved byte and destination QP, acknowledge-request bit and
// packet sequence number.
const bthLen = 12

// parseBTH reads the base transport header after a UDP header (udp is
// the UDP header and what follows) into h: the opcode and destination
// queue pair. A header too short for it, or of a transport version other
// than 0 (the only one defined), is no RoCEv2 packet: h keeps its UDP flow.
func parseBTH(udp []byte, h *Header) {
	if len(udp) < 8+bthLen {
		return
	}
	bth := udp[8:]
	if bth[1]&0x0f != 0 { // TVer: 0
		return
	}
	h.RoCE, h.Opcode, h.DestQP = true, bth[0], binary.BigEndian.Uint32(bth[4:])&0xffffff
}

// Key is the header's flow as the collector keeps it and as jobs'
// connections are matched (internal/flowjobs): addresses, protocol and
// ports, and for RoCEv2 the destination queue pair, with the source port
// (the sender's entropy) left out.
func (h *Header) Key() FlowKey {
	k := FlowKey{Src: h.Src, Dst: h.Dst, Proto: h.Proto, SrcPort: h.SrcPort, DstPort: h.DstPort}
	if h.RoCE {
		k.SrcPort, k.QP = 0, h.DestQP
	}
	return k
}
