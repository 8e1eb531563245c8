// Package sflow decodes sFlow version 5 datagrams (sflow.org's "sFlow
// Version 5", July 2004): the flow samples a switch takes of the packets
// crossing its ports (a sampled header, the input and output interface,
// the sampling rate and pool, the drops) and the counter samples it
// exports of its interfaces. It is the decoder under the Ethernet source's
// sFlow collector: which flow took which port.
//
// Decode reads a datagram into a Datagram whose slices it reuses, so a
// collector that keeps one Datagram decodes without allocating. Every
// error names the part of the datagram that is wrong and its byte offset;
// nothing in a datagram, however hostile, makes it panic or read past the
// datagram (FuzzDecode).
package sflow

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Formats of samples and records this decoder reads (enterprise 0, the
// standard ones); others are counted and skipped.
const (
	formatFlowSample            = 1
	formatCounterSample         = 2
	formatExpandedFlowSample    = 3
	formatExpandedCounterSample = 4

	recordRawHeader        = 1 // flow record: sampled packet header
	recordGenericInterface = 1 // counter record: generic interface counters

	headerEthernet = 1 // header_protocol: ISO 8802-3 Ethernet
)

// MaxSamples and MaxRecords bound what one datagram may claim, so that a
// forged count cannot make Decode grow its slices without end (a datagram
// is at most 64 KiB: no honest one holds more).
const (
	MaxSamples = 1024
	MaxRecords = 64
)

// Datagram is one decoded sFlow datagram.
type Datagram struct {
	Agent    netip.Addr // the switch's agent address
	SubAgent uint32
	Sequence uint32
	Uptime   uint32 // the agent's uptime, milliseconds

	Flows    []FlowSample
	Counters []CounterSample
	// Skipped counts the samples and records of formats this decoder does
	// not read (another enterprise's, or a standard one it has no use for).
	Skipped int
}

// FlowSample is one sampled packet: where it came in and went out, how
// many packets it stands for, and its header's flow.
type FlowSample struct {
	Sequence     uint32
	SourceType   uint8  // 0: ifIndex, 1: smonVlanDataSource, 2: entPhysicalEntry
	SourceIndex  uint32 // the port (ifIndex) that sampled it, for SourceType 0
	SamplingRate uint32 // one packet in SamplingRate was sampled
	SamplePool   uint32 // packets that could have been sampled
	Drops        uint32 // samples lost for lack of resources
	Input        uint32 // ifIndex the packet came in on (0: unknown)
	// Output is the ifIndex it went out on when OutputFormat is 0; 1: the
	// packet was discarded (Output holds the reason), 2: sent to several
	// interfaces (Output holds how many; 0x7fffffff: unknown).
	Output       uint32
	OutputFormat uint8
	// Header is the sampled header's flow when a raw Ethernet header
	// record came with the sample (HasHeader).
	HasHeader bool
	Header    Header
}

// Header is what a sampled Ethernet header tells of its packet.
type Header struct {
	FrameLength uint32 // the packet's length on the wire, as the switch saw it
	Stripped    uint32 // bytes removed before FrameLength (e.g. the FCS)
	EtherType   uint16
	VLAN        uint16 // the first 802.1Q tag's VLAN id, 0 without one
	// The IP flow, when the header holds an IPv4 or IPv6 packet (Src and
	// Dst valid) and its TCP or UDP ports (Proto 6 or 17; a later fragment
	// has none).
	Src, Dst         netip.Addr
	Proto            uint8
	SrcPort, DstPort uint16
	// RoCEv2 (UDP destination port 4791): the InfiniBand base transport
	// header's opcode and destination queue pair.
	RoCE   bool
	Opcode uint8
	DestQP uint32
}

// CounterSample is one interface's counters as the agent exported them.
type CounterSample struct {
	Sequence    uint32
	SourceType  uint8
	SourceIndex uint32
	HasIf       bool
	If          IfCounters
}

// IfCounters is the generic interface counters record (IF-MIB's).
type IfCounters struct {
	Index                  uint32
	Type                   uint32
	Speed                  uint64
	Direction              uint32
	Status                 uint32
	InOctets               uint64
	InUcast, InMcast, InBc uint32
	InDiscards, InErrors   uint32
	InUnknownProtos        uint32
	OutOctets              uint64
	OutUcast, OutMcast     uint32
	OutBc                  uint32
	OutDiscards, OutErrors uint32
	Promiscuous            uint32
}

// Error is a datagram Decode refused: what is wrong and where.
type Error struct {
	Offset int    // byte offset in the datagram
	Field  string // the part that is wrong ("version", "sample 2 length", ...)
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("sflow: byte %d: %s: %s", e.Offset, e.Field, e.Reason)
}

// reader reads XDR (big-endian, 4-byte aligned) from a datagram, the
// offset of its part in the whole kept for errors.
type reader struct {
	b      []byte
	base   int // offset of b[0] in the datagram
	off    int
	sample uint32 // the sample it reads, from 1 (0: the datagram's header)
}

// fail is an error at the reader's offset; the field is named with its
// sample's number, made only now (reading costs no formatting).
func (r *reader) fail(field, format string, a ...any) *Error {
	if r.sample > 0 {
		field = fmt.Sprintf("sample %d %s", r.sample, field)
	}
	return &Error{Offset: r.base + r.off, Field: field, Reason: fmt.Sprintf(format, a...)}
}

func (r *reader) u32(field string) (uint32, *Error) {
	if len(r.b)-r.off < 4 {
		return 0, r.fail(field, "cut short: %d bytes left, want 4", len(r.b)-r.off)
	}
	v := binary.BigEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v, nil
}

// opaque takes n bytes (padded to 4) as a reader of their own.
func (r *reader) opaque(field string, n uint32) (reader, *Error) {
	padded := (uint64(n) + 3) &^ 3
	if uint64(len(r.b)-r.off) < padded {
		return reader{}, r.fail(field, "length %d past the end (%d bytes left)", n, len(r.b)-r.off)
	}
	sub := reader{b: r.b[r.off : r.off+int(n)], base: r.base + r.off, sample: r.sample}
	r.off += int(padded)
	return sub, nil
}

// Decode reads one sFlow v5 datagram into d, reusing its slices. When it
// refuses the datagram, what d holds is not to be used.
func Decode(b []byte, d *Datagram) error {
	d.Flows, d.Counters, d.Skipped = d.Flows[:0], d.Counters[:0], 0
	r := &reader{b: b}
	if err := d.decode(r); err != nil {
		return err
	}
	return nil
}

func (d *Datagram) decode(r *reader) *Error {
	v, err := r.u32("version")
	if err != nil {
		return err
	}
	if v != 5 {
		r.off -= 4
		return r.fail("version", "%d, want 5", v)
	}
	at, err := r.u32("agent address type")
	if err != nil {
		return err
	}
	switch at {
	case 1:
		a, err := r.opaque("agent address", 4)
		if err != nil {
			return err
		}
		d.Agent = netip.AddrFrom4([4]byte(a.b))
	case 2:
		a, err := r.opaque("agent address", 16)
		if err != nil {
			return err
		}
		d.Agent = netip.AddrFrom16([16]byte(a.b))
	default:
		r.off -= 4
		return r.fail("agent address type", "%d, want 1 (IPv4) or 2 (IPv6)", at)
	}
	if d.SubAgent, err = r.u32("sub-agent id"); err != nil {
		return err
	}
	if d.Sequence, err = r.u32("sequence number"); err != nil {
		return err
	}
	if d.Uptime, err = r.u32("uptime"); err != nil {
		return err
	}
	n, err := r.u32("number of samples")
	if err != nil {
		return err
	}
	if n > MaxSamples {
		r.off -= 4
		return r.fail("number of samples", "%d, more than %d", n, MaxSamples)
	}
	for i := range n {
		r.sample = i + 1
		format, err := r.u32("format")
		if err != nil {
			return err
		}
		length, err := r.u32("length")
		if err != nil {
			return err
		}
		s, err := r.opaque("data", length)
		if err != nil {
			return err
		}
		r.sample = 0
		if format>>12 != 0 { // another enterprise's
			d.Skipped++
			continue
		}
		switch format & 0xfff {
		case formatFlowSample, formatExpandedFlowSample:
			if err := d.flowSample(&s, format&0xfff == formatExpandedFlowSample); err != nil {
				return err
			}
		case formatCounterSample, formatExpandedCounterSample:
			if err := d.counterSample(&s, format&0xfff == formatExpandedCounterSample); err != nil {
				return err
			}
		default:
			d.Skipped++
		}
	}
	if r.off != len(r.b) {
		return r.fail("datagram", "%d bytes after the last sample", len(r.b)-r.off)
	}
	return nil
}

// source reads a sample's source id: compact (type in the top byte) or
// expanded (type and index apart).
func source(s *reader, expanded bool) (uint8, uint32, *Error) {
	if expanded {
		t, err := s.u32("source id type")
		if err != nil {
			return 0, 0, err
		}
		idx, err := s.u32("source id index")
		return uint8(t), idx, err
	}
	id, err := s.u32("source id")
	return uint8(id >> 24), id & 0xffffff, err
}

func (d *Datagram) flowSample(s *reader, expanded bool) *Error {
	// Read in place (a refused datagram's samples are not to be used).
	d.Flows = append(d.Flows, FlowSample{})
	f := &d.Flows[len(d.Flows)-1]
	var err *Error
	if f.Sequence, err = s.u32("sequence number"); err != nil {
		return err
	}
	if f.SourceType, f.SourceIndex, err = source(s, expanded); err != nil {
		return err
	}
	if f.SamplingRate, err = s.u32("sampling rate"); err != nil {
		return err
	}
	if f.SamplingRate == 0 {
		s.off -= 4
		return s.fail("sampling rate", "0: a flow sample stands for at least one packet")
	}
	if f.SamplePool, err = s.u32("sample pool"); err != nil {
		return err
	}
	if f.Drops, err = s.u32("drops"); err != nil {
		return err
	}
	if expanded {
		var inFmt, outFmt uint32
		if inFmt, err = s.u32("input format"); err != nil {
			return err
		}
		if f.Input, err = s.u32("input"); err != nil {
			return err
		}
		if outFmt, err = s.u32("output format"); err != nil {
			return err
		}
		if f.Output, err = s.u32("output"); err != nil {
			return err
		}
		if inFmt != 0 {
			f.Input = 0
		}
		f.OutputFormat = uint8(min(outFmt, 255))
	} else {
		var in, out uint32
		if in, err = s.u32("input"); err != nil {
			return err
		}
		if out, err = s.u32("output"); err != nil {
			return err
		}
		if in>>30 == 0 {
			f.Input = in & 0x3fffffff
		}
		f.OutputFormat, f.Output = uint8(out>>30), out&0x3fffffff
	}
	err = d.records(s, func(format uint32, rec reader) (bool, *Error) {
		if format != recordRawHeader || f.HasHeader {
			return false, nil
		}
		f.HasHeader = true
		return true, rawHeader(&rec, &f.Header)
	})
	return err
}

// rawHeader reads a sampled header record; a header of another protocol
// than Ethernet, or one too short for its IP and ports, keeps what it
// holds (a sample counts for its bytes whatever its header tells).
func rawHeader(r *reader, h *Header) *Error {
	proto, err := r.u32("header protocol")
	if err != nil {
		return err
	}
	if h.FrameLength, err = r.u32("frame length"); err != nil {
		return err
	}
	if h.Stripped, err = r.u32("stripped"); err != nil {
		return err
	}
	n, err := r.u32("header length")
	if err != nil {
		return err
	}
	hdr, err := r.opaque("header", n)
	if err != nil {
		return err
	}
	if proto == headerEthernet {
		parseEthernet(hdr.b, h)
	}
	return nil
}

// parseEthernet reads an Ethernet frame's start: VLAN tags, IPv4 or IPv6,
// TCP or UDP ports, and RoCEv2's base transport header.
func parseEthernet(b []byte, h *Header) {
	if len(b) < 14 {
		return
	}
	et, p := binary.BigEndian.Uint16(b[12:]), 14
	for (et == 0x8100 || et == 0x88a8) && len(b) >= p+4 {
		if h.VLAN == 0 {
			h.VLAN = binary.BigEndian.Uint16(b[p:]) & 0x0fff
		}
		et, p = binary.BigEndian.Uint16(b[p+2:]), p+4
	}
	h.EtherType = et
	var l4 []byte
	switch et {
	case 0x0800:
		ip := b[p:]
		if len(ip) < 20 || ip[0]>>4 != 4 {
			return
		}
		ihl := int(ip[0]&0x0f) * 4
		h.Src, h.Dst, h.Proto = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20])), ip[9]
		if binary.BigEndian.Uint16(ip[6:])&0x1fff != 0 || ihl < 20 || len(ip) < ihl { // a later fragment: no ports
			return
		}
		l4 = ip[ihl:]
	case 0x86dd:
		ip := b[p:]
		if len(ip) < 40 || ip[0]>>4 != 6 {
			return
		}
		h.Src, h.Dst, h.Proto = netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40])), ip[6]
		l4 = ip[40:]
	default:
		return
	}
	if (h.Proto != 6 && h.Proto != 17) || len(l4) < 4 {
		return
	}
	h.SrcPort, h.DstPort = binary.BigEndian.Uint16(l4), binary.BigEndian.Uint16(l4[2:])
	if h.Proto == 17 && h.DstPort == RoCEv2Port {
		parseBTH(l4, h) // roce.go
	}
}

// records reads a sample's records, each read by read (true) or counted
// as skipped, and checks the sample holds nothing after them. A record
// goes by value: a pointer through a function value would escape.
func (d *Datagram) records(s *reader, read func(format uint32, rec reader) (bool, *Error)) *Error {
	n, err := s.u32("number of records")
	if err != nil {
		return err
	}
	if n > MaxRecords {
		s.off -= 4
		return s.fail("number of records", "%d, more than %d", n, MaxRecords)
	}
	for range n {
		format, err := s.u32("record format")
		if err != nil {
			return err
		}
		length, err := s.u32("record length")
		if err != nil {
			return err
		}
		rec, err := s.opaque("record data", length)
		if err != nil {
			return err
		}
		used, err := read(format, rec)
		if err != nil {
			return err
		}
		if !used {
			d.Skipped++
		}
	}
	if s.off != len(s.b) {
		return s.fail("data", "%d bytes after its last record", len(s.b)-s.off)
	}
	return nil
}

func (d *Datagram) counterSample(s *reader, expanded bool) *Error {
	d.Counters = append(d.Counters, CounterSample{})
	c := &d.Counters[len(d.Counters)-1]
	var err *Error
	if c.Sequence, err = s.u32("sequence number"); err != nil {
		return err
	}
	if c.SourceType, c.SourceIndex, err = source(s, expanded); err != nil {
		return err
	}
	err = d.records(s, func(format uint32, rec reader) (bool, *Error) {
		if format != recordGenericInterface || c.HasIf {
			return false, nil
		}
		c.HasIf = true
		return true, ifCounters(&rec, &c.If)
	})
	return err
}

// ifCounters reads the generic interface counters record (88 bytes).
func ifCounters(r *reader, c *IfCounters) *Error {
	if len(r.b) < 88 {
		return r.fail("interface counters", "%d bytes, want 88", len(r.b))
	}
	b := r.b
	u32 := func(o int) uint32 { return binary.BigEndian.Uint32(b[o:]) }
	u64 := func(o int) uint64 { return binary.BigEndian.Uint64(b[o:]) }
	*c = IfCounters{Index: u32(0), Type: u32(4), Speed: u64(8), Direction: u32(16), Status: u32(20),
		InOctets: u64(24), InUcast: u32(32), InMcast: u32(36), InBc: u32(40), InDiscards: u32(44), InErrors: u32(48),
		InUnknownProtos: u32(52), OutOctets: u64(56), OutUcast: u32(64), OutMcast: u32(68), OutBc: u32(72),
		OutDiscards: u32(76), OutErrors: u32(80), Promiscuous: u32(84)}
	return nil
}
