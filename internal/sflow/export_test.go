package sflow

import "net/netip"

// For the external benchmark (attribute_bench_test.go): the tests' own
// datagram builders.
var (
	FlowSampleForTest = func(seq, ifIndex, rate, pool, drops, in, out uint32, hdr []byte, frameLen uint32) []byte {
		return flowSample(seq, ifIndex, rate, pool, drops, in, out, hdr, frameLen)
	}
	FrameForTest    = frame
	DatagramForTest = func(agent netip.Addr, samples ...[]byte) []byte {
		xs := make([]xdr, len(samples))
		for i, s := range samples {
			xs[i] = s
		}
		return datagram(agent, xs...)
	}
)
