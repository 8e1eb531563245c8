package sflow

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// xdr builds datagrams for the tests, field by field as sFlow v5 lays
// them out (independently of the decoder: offsets written by hand).
type xdr []byte

func (x xdr) u32(v uint32) xdr { return binary.BigEndian.AppendUint32(x, v) }
func (x xdr) u64(v uint64) xdr { return binary.BigEndian.AppendUint64(x, v) }
func (x xdr) opaque(b []byte) xdr {
	x = x.u32(uint32(len(b)))
	x = append(x, b...)
	for len(x)%4 != 0 {
		x = append(x, 0)
	}
	return x
}

// frame is an Ethernet + IPv4 + TCP or UDP header (the first bytes a
// switch samples), with a VLAN tag when vlan > 0.
func frame(vlan uint16, src, dst netip.Addr, proto uint8, sport, dport uint16) []byte {
	b := []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	if vlan > 0 {
		b = binary.BigEndian.AppendUint16(b, 0x8100)
		b = binary.BigEndian.AppendUint16(b, vlan)
	}
	b = binary.BigEndian.AppendUint16(b, 0x0800)
	ip := make([]byte, 20)
	ip[0], ip[9] = 0x45, proto
	s4, d4 := src.As4(), dst.As4()
	copy(ip[12:], s4[:])
	copy(ip[16:], d4[:])
	b = append(b, ip...)
	b = binary.BigEndian.AppendUint16(b, sport)
	b = binary.BigEndian.AppendUint16(b, dport)
	b = append(b, make([]byte, 16)...) // the rest of the TCP/UDP header
	return b
}

// flowSample is a compact flow sample with one raw header record.
func flowSample(seq, ifIndex, rate, pool, drops, in, out uint32, hdr []byte, frameLen uint32) xdr {
	rec := xdr{}.u32(headerEthernet).u32(frameLen).u32(4).opaque(hdr)
	s := xdr{}.u32(seq).u32(ifIndex).u32(rate).u32(pool).u32(drops).u32(in).u32(out).u32(1).
		u32(recordRawHeader).opaque(rec)
	return xdr{}.u32(formatFlowSample).opaque(s)
}

// counterSample is a compact counter sample with the generic interface
// counters.
func counterSample(seq, ifIndex uint32, inOctets, outOctets uint64) xdr {
	c := xdr{}.u32(ifIndex).u32(6).u64(10_000_000_000).u32(1).u32(3).u64(inOctets)
	for range 6 {
		c = c.u32(7)
	}
	c = c.u64(outOctets)
	for range 6 {
		c = c.u32(9)
	}
	s := xdr{}.u32(seq).u32(ifIndex).u32(1).u32(recordGenericInterface).opaque(c)
	return xdr{}.u32(formatCounterSample).opaque(s)
}

func datagram(agent netip.Addr, samples ...xdr) []byte {
	a := agent.As4()
	d := xdr{}.u32(5).u32(1)
	d = append(d, a[:]...)
	d = d.u32(0).u32(42).u32(123456).u32(uint32(len(samples)))
	for _, s := range samples {
		d = append(d, s...)
	}
	return d
}

var (
	agent = netip.MustParseAddr("10.99.0.2")
	h1    = netip.MustParseAddr("10.0.1.1")
	h3    = netip.MustParseAddr("10.0.3.1")
)

func TestDecode(t *testing.T) {
	b := datagram(agent,
		flowSample(7, 3, 100, 7000, 2, 3, 5, frame(12, h1, h3, 6, 40000, 5201), 1514),
		counterSample(8, 5, 1<<40, 1<<41),
		xdr{}.u32(1<<12|1).opaque([]byte{1, 2, 3, 4}), // another enterprise's sample: skipped
	)
	var d Datagram
	if err := Decode(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.Agent != agent || d.Sequence != 42 || d.Uptime != 123456 || len(d.Flows) != 1 || len(d.Counters) != 1 || d.Skipped != 1 {
		t.Fatalf("datagram %+v", d)
	}
	f := d.Flows[0]
	want := FlowSample{Sequence: 7, SourceIndex: 3, SamplingRate: 100, SamplePool: 7000, Drops: 2, Input: 3, Output: 5, HasHeader: true,
		Header: Header{FrameLength: 1514, Stripped: 4, EtherType: 0x0800, VLAN: 12, Src: h1, Dst: h3, Proto: 6, SrcPort: 40000, DstPort: 5201}}
	if f != want {
		t.Errorf("flow sample\n%+v\nwant\n%+v", f, want)
	}
	c := d.Counters[0]
	if !c.HasIf || c.SourceIndex != 5 || c.If.Index != 5 || c.If.Speed != 10e9 || c.If.InOctets != 1<<40 || c.If.OutOctets != 1<<41 ||
		c.If.InErrors != 7 || c.If.OutErrors != 9 || c.If.Promiscuous != 9 {
		t.Errorf("counter sample %+v", c)
	}
	// The slices are reused: a second datagram decodes into the same.
	if err := Decode(datagram(agent, counterSample(9, 6, 1, 2)), &d); err != nil || len(d.Flows) != 0 || len(d.Counters) != 1 || d.Counters[0].If.Index != 6 {
		t.Errorf("reused: %v %+v", err, d)
	}
}

func TestRoCE(t *testing.T) {
	hdr := frame(0, h1, h3, 17, 49152, 4791)
	bth := hdr[len(hdr)-16+4:] // after the UDP header's 8 bytes
	bth[0] = 0x0a              // RC RDMA WRITE ONLY
	binary.BigEndian.PutUint32(bth[4:], 0x00123456)
	var d Datagram
	if err := Decode(datagram(agent, flowSample(1, 1, 1, 1, 0, 1, 2, hdr, 4096)), &d); err != nil {
		t.Fatal(err)
	}
	if h := d.Flows[0].Header; !h.RoCE || h.Opcode != 0x0a || h.DestQP != 0x123456 {
		t.Errorf("RoCEv2 header %+v", h)
	}
}

// Every bad datagram is refused with the part named, never a panic.
func TestBadDatagrams(t *testing.T) {
	good := datagram(agent, flowSample(7, 3, 100, 7000, 0, 3, 5, frame(0, h1, h3, 6, 1, 2), 1514), counterSample(8, 5, 1, 2))
	rate0 := datagram(agent, flowSample(7, 3, 0, 7000, 0, 3, 5, frame(0, h1, h3, 6, 1, 2), 1514))
	v4 := append([]byte{}, good...)
	binary.BigEndian.PutUint32(v4, 4)
	manySamples := append([]byte{}, good...)
	binary.BigEndian.PutUint32(manySamples[24:], 1<<30)
	longSample := append([]byte{}, good...)
	binary.BigEndian.PutUint32(longSample[32:], 1<<31)
	badAgent := append([]byte{}, good...)
	binary.BigEndian.PutUint32(badAgent[4:], 3)
	for _, c := range []struct {
		name, field string
		b           []byte
	}{
		{"empty", "version", nil},
		{"version 4", "version", v4},
		{"agent address type 3", "agent address type", badAgent},
		{"a billion samples", "number of samples", manySamples},
		{"a sample longer than the datagram", "sample 1 data", longSample},
		{"sampling rate 0", "sample 1 sampling rate", rate0},
		{"trailing bytes", "datagram", append(append([]byte{}, good...), 0, 0, 0, 0)},
	} {
		var d Datagram
		err := Decode(c.b, &d)
		var e *Error
		if !errors.As(err, &e) || e.Field != c.field {
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.field)
		}
	}
	// Cut at every byte: an error, never a panic nor a read past the end.
	for n := range len(good) {
		var d Datagram
		if err := Decode(good[:n], &d); err == nil {
			t.Errorf("cut at %d of %d bytes: no error", n, len(good))
		} else if !strings.HasPrefix(err.Error(), "sflow: byte ") {
			t.Errorf("cut at %d: %v", n, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(datagram(agent, flowSample(7, 3, 100, 7000, 0, 3, 5, frame(12, h1, h3, 6, 1, 2), 1514), counterSample(8, 5, 1, 2)))
	f.Add(datagram(agent, flowSample(1, 1, 1, 1, 0, 1, 2, frame(0, h1, h3, 17, 3, 4791), 4096)))
	f.Fuzz(func(t *testing.T, b []byte) {
		var d Datagram
		if err := Decode(b, &d); err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Offset < 0 || e.Offset > len(b) {
				t.Fatalf("error %v (offset outside the datagram of %d bytes)", err, len(b))
			}
			return
		}
		for _, f := range d.Flows {
			if f.SamplingRate == 0 {
				t.Fatal("a flow sample of rate 0 decoded")
			}
		}
	})
}

// BenchmarkDecode reports flow samples decoded per second on one core: a
// datagram as switches send them, 8 flow samples with their headers.
func BenchmarkDecode(b *testing.B) {
	var samples []xdr
	for i := range 8 {
		samples = append(samples, flowSample(uint32(i), 3, 50000, 7000, 0, 3, 5, frame(12, h1, h3, 6, uint16(40000+i), 5201), 1514))
	}
	dg := datagram(agent, samples...)
	var d Datagram
	b.ReportAllocs()
	b.SetBytes(int64(len(dg)))
	for b.Loop() {
		if err := Decode(dg, &d); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(8*b.N)/b.Elapsed().Seconds(), "samples/s")
}
