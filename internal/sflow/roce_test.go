package sflow

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
)

// roceFrame is a RoCEv2 packet's start as a switch samples it: Ethernet,
// IPv4, UDP from the sender's entropy port to 4791, and the base
// transport header (opcode, flags with the transport version tver,
// partition key, destination QP, PSN), laid out by hand from the
// InfiniBand specification's Annex A17 and chapter 9.2.
func roceFrame(src, dst netip.Addr, entropy uint16, opcode, tver uint8, qp uint32) []byte {
	b := frame(0, src, dst, 17, entropy, RoCEv2Port)
	bth := b[len(b)-12:] // frame leaves 8 bytes of UDP header and 12 after it
	bth[0], bth[1] = opcode, tver&0x0f
	binary.BigEndian.PutUint16(bth[2:], 0xffff)   // default partition key
	binary.BigEndian.PutUint32(bth[4:], qp)       // reserved byte, then the QP
	binary.BigEndian.PutUint32(bth[8:], 0x000abc) // PSN
	return b
}

// TestRoCEFlows: the collector keeps RoCEv2 samples per destination queue
// pair, whatever the entropy source port (one QP's packets keep one port
// in practice, but the port says nothing more than the QP): two QPs
// between the same hosts are two flows, each SrcPort 0 and QP set; a
// header of another transport version, or cut before the QP, is plain UDP.
func TestRoCEFlows(t *testing.T) {
	sw := &Switch{GUID: 0xabc, Ports: map[uint32]int{5: 2}}
	known := func(a netip.Addr) (*Switch, bool) { return sw, a == agent }
	s := NewStore(StoreOptions{})
	var d Datagram
	at := time.Unix(1_700_000_000, 0)
	cut := roceFrame(h1, h3, 50000, 0x0a, 0, 0x77)
	b := datagram(agent,
		flowSample(1, 5, 10, 1, 0, 3, 5, roceFrame(h1, h3, 49152, 0x0a, 0, 0x000101), 4158),
		flowSample(2, 5, 10, 2, 0, 3, 5, roceFrame(h1, h3, 49153, 0x0a, 0, 0x000101), 4158),
		flowSample(3, 5, 10, 3, 0, 3, 5, roceFrame(h1, h3, 49152, 0x06, 0, 0x000202), 1082),
		flowSample(4, 5, 10, 4, 0, 3, 5, roceFrame(h1, h3, 49154, 0x0a, 1, 0x000303), 100), // TVer 1: not RoCEv2
		flowSample(5, 5, 10, 5, 0, 3, 5, cut[:len(cut)-5], 100),                            // no QP in the header
	)
	if why, err := s.Ingest(b, &d, known, at, func(r Refusal) { t.Errorf("refused a sample: %s", r) }); why != "" || err != nil {
		t.Fatalf("refused: %q %v", why, err)
	}
	if h := d.Flows[2].Header; !h.RoCE || h.Opcode != 0x06 || h.DestQP != 0x202 {
		t.Errorf("third sample's header %+v", h)
	}
	got := map[FlowKey]Flow{}
	for _, f := range s.Flows(fabric.PortRef{GUID: 0xabc, Port: 2}, at, at) {
		got[f.FlowKey] = f
	}
	want := map[FlowKey]uint64{
		{Src: h1, Dst: h3, Proto: 17, DstPort: RoCEv2Port, QP: 0x101}:      2 * 4154 * 10,
		{Src: h1, Dst: h3, Proto: 17, DstPort: RoCEv2Port, QP: 0x202}:      1078 * 10,
		{Src: h1, Dst: h3, Proto: 17, SrcPort: 49154, DstPort: RoCEv2Port}: 96 * 10,
		{Src: h1, Dst: h3, Proto: 17, SrcPort: 50000, DstPort: RoCEv2Port}: 96 * 10,
	}
	if len(got) != len(want) {
		t.Errorf("flows %+v, want %v", got, want)
	}
	for k, bytes := range want {
		if got[k].Bytes != bytes {
			t.Errorf("flow %+v: %d bytes, want %d (flows %+v)", k, got[k].Bytes, bytes, got)
		}
	}
}

// FuzzRoCE: whatever a sampled frame holds, a header read as RoCEv2 is a
// UDP packet to 4791 whose QP fits in 24 bits, and its key names the QP
// without the entropy port; any other keeps its ports and no QP.
func FuzzRoCE(f *testing.F) {
	f.Add(roceFrame(h1, h3, 49152, 0x0a, 0, 0x123456))
	f.Add(roceFrame(h1, h3, 49152, 0x0a, 3, 0x123456))
	f.Add(frame(12, h1, h3, 17, 1, RoCEv2Port))
	f.Fuzz(func(t *testing.T, b []byte) {
		var h Header
		parseEthernet(b, &h)
		k := h.Key()
		if h.RoCE {
			if h.Proto != 17 || h.DstPort != RoCEv2Port || h.DestQP >= 1<<24 || k.QP != h.DestQP || k.SrcPort != 0 {
				t.Fatalf("RoCE header %+v key %+v", h, k)
			}
		} else if k.QP != 0 || k.SrcPort != h.SrcPort || k.DstPort != h.DstPort {
			t.Fatalf("header %+v key %+v", h, k)
		}
	})
}
