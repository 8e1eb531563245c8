package ingest

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/netloom/netloom/internal/ingest/agentpb"
)

// withConns is a snapshot carrying connections: a TCP one over IPv4, one
// over IPv6, one IPv4-mapped and a RoCE queue pair.
func withConns(d *agentpb.Datagram) *agentpb.Datagram {
	v4 := func(s string) []byte { a := netip.MustParseAddr(s).As4(); return a[:] }
	v6 := func(s string) []byte { a := netip.MustParseAddr(s).As16(); return a[:] }
	d.Connections = []*agentpb.Connection{
		{Kind: "tcp", LocalAddr: v4("10.0.1.1"), LocalPort: 40000, RemoteAddr: v4("10.0.3.1"), RemotePort: 1024, Peer: NoPeer},
		{Kind: "tcp", LocalAddr: v6("fd00::1"), LocalPort: 40001, RemoteAddr: v6("fd00::3"), RemotePort: 1025, Peer: 1},
		{Kind: "tcp", LocalAddr: v6("::ffff:10.0.1.1"), LocalPort: 40002, RemoteAddr: v6("::ffff:127.0.0.1"), RemotePort: 6000, Peer: NoPeer},
		{Kind: "roce", LocalAddr: v4("10.0.1.1"), LocalPort: 4791, RemoteAddr: v4("10.0.3.1"), RemotePort: 4791, LocalQpn: 0x11, RemoteQpn: 0xffffff, Peer: 1},
	}
	d.ConnectionsTruncated = true
	return d
}

// TestDecodeConnections: the hand decoder reads what protobuf encoded,
// as proto.Unmarshal reads it (FromProto), IPv4-mapped addresses as IPv4.
func TestDecodeConnections(t *testing.T) {
	lim := Limits{}.WithDefaults()
	b := encode(t, withConns(snapshot("42", 1, 4, 0, false)))
	d, err := Decode(b, lim)
	if err != nil {
		t.Fatal(err)
	}
	ap := netip.MustParseAddrPort
	want := []Conn{
		{Kind: "tcp", Local: ap("10.0.1.1:40000"), Remote: ap("10.0.3.1:1024"), Peer: NoPeer},
		{Kind: "tcp", Local: ap("[fd00::1]:40001"), Remote: ap("[fd00::3]:1025"), Peer: 1},
		{Kind: "tcp", Local: ap("10.0.1.1:40002"), Remote: ap("127.0.0.1:6000"), Peer: NoPeer},
		{Kind: "roce", Local: ap("10.0.1.1:4791"), Remote: ap("10.0.3.1:4791"), LocalQPN: 0x11, RemoteQPN: 0xffffff, Peer: 1},
	}
	if !slices.Equal(d.conns.list, want) || !d.conns.truncated {
		t.Errorf("decoded %+v (truncated %v)\nwant %+v", d.conns.list, d.conns.truncated, want)
	}
	var m agentpb.Datagram
	if err := proto.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if p := FromProto(&m); !slices.Equal(p.conns.list, d.conns.list) || p.conns.truncated != d.conns.truncated {
		t.Errorf("through proto.Unmarshal: %+v", p.conns.list)
	}
}

// TestConnectionRejects: each bad connection drops the datagram, counted
// by its reason, with the connection and its field named.
func TestConnectionRejects(t *testing.T) {
	lim := Limits{}.WithDefaults()
	mod := func(f func(d *agentpb.Datagram)) []byte {
		d := withConns(snapshot("42", 1, 4, 0, false))
		f(d)
		return encode(t, d)
	}
	for _, c := range []struct {
		name, reason, detail string
		b                    []byte
	}{
		{"address of 5 bytes", ReasonConnection, "connections[1].remote_addr: 5 bytes, want 4 (IPv4) or 16 (IPv6)",
			mod(func(d *agentpb.Datagram) { d.Connections[1].RemoteAddr = []byte{1, 2, 3, 4, 5} })},
		{"no address", ReasonConnection, "connections[0].local_addr: 0 bytes",
			mod(func(d *agentpb.Datagram) { d.Connections[0].LocalAddr = nil })},
		{"port past 65535", ReasonConnection, "connections[0].local_port: 70000",
			mod(func(d *agentpb.Datagram) { d.Connections[0].LocalPort = 70000 })},
		{"TCP without a port", ReasonConnection, "connections[2].remote_port: 0",
			mod(func(d *agentpb.Datagram) { d.Connections[2].RemotePort = 0 })},
		{"QPN past 24 bits", ReasonConnection, "connections[3].remote_qpn: 16777216",
			mod(func(d *agentpb.Datagram) { d.Connections[3].RemoteQpn = 1 << 24 })},
		{"no kind", ReasonConnection, "connections[3].kind: 0 bytes",
			mod(func(d *agentpb.Datagram) { d.Connections[3].Kind = "" })},
		{"long kind", ReasonConnection, "connections[0].kind: 17 bytes",
			mod(func(d *agentpb.Datagram) { d.Connections[0].Kind = strings.Repeat("k", 17) })},
		{"peer out of world", ReasonConnection, "peer 4 of world size 4",
			mod(func(d *agentpb.Datagram) { d.Connections[1].Peer = 4 })},
		{"65 connections", ReasonTooMany, "65 connections, limit 64", mod(func(d *agentpb.Datagram) {
			for len(d.Connections) < 65 {
				d.Connections = append(d.Connections, d.Connections[0])
			}
		})},
		{"connections in chunk 1", ReasonChunk, "carries connections", mod(func(d *agentpb.Datagram) {
			d.Chunk, d.Chunks, d.Process, d.Functions, d.Regions = 1, 2, nil, nil, nil
		})},
		{"a connection cut short", ReasonMalformed, "connections[0] (field 24)", append(encode(t, snapshot("42", 1, 4, 0, false)),
			protowire.AppendBytes(protowire.AppendTag(nil, 24, protowire.BytesType), []byte{0x12, 0x09, 1, 2})...)},
	} {
		_, err := Decode(c.b, lim)
		if got := reasonOf(err); got != c.reason || !strings.Contains(err.Error(), c.detail) {
			t.Errorf("%s: rejected as %q (%v), want %q naming %q", c.name, got, err, c.reason, c.detail)
		}
	}
	// 64 are fine, and a kind a later agent may send is kept.
	b := mod(func(d *agentpb.Datagram) {
		d.Connections[0].Kind = "udp"
		for len(d.Connections) < 64 {
			d.Connections = append(d.Connections, d.Connections[1])
		}
	})
	if d, err := Decode(b, lim); err != nil || len(d.conns.list) != 64 || d.conns.list[0].Kind != "udp" {
		t.Errorf("64 connections: %v", err)
	}
}

// TestTrackerConnections: the tracker hands each chunk 0's connections
// on with the job's owner, and the job's end when its last rank ends.
func TestTrackerConnections(t *testing.T) {
	var got []ConnReport
	var ended []string
	tr := NewTracker(Options{Connections: func(r ConnReport) { got = append(got, r) },
		JobEnded: func(job string, end time.Time) { ended = append(ended, job+" "+end.Format(time.RFC3339)) }}, nil)
	lim := Limits{}.WithDefaults()
	add := func(d *agentpb.Datagram) {
		t.Helper()
		dg, err := Decode(encode(t, d), lim)
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.Add(dg, 100, t0); err != nil {
			t.Fatal(err)
		}
	}
	add(withConns(snapshot("j", 0, 2, 0, false)))
	add(snapshot("j", 1, 2, 0, false)) // none: handed on too (any it had are closed)
	if len(got) != 2 || got[0].Job != "j" || got[0].User != "alice" || got[0].Rank != 0 || len(got[0].Conns) != 4 ||
		!got[0].Truncated || !got[0].Start.Equal(t0) || !got[0].At.Equal(t0.Add(5*time.Second)) ||
		got[1].Rank != 1 || len(got[1].Conns) != 0 || got[1].Truncated {
		t.Fatalf("reports %+v", got)
	}
	if len(ended) != 0 {
		t.Errorf("ended before the finals: %v", ended)
	}
	add(withConns(snapshot("j", 0, 2, 1, true)))
	add(snapshot("j", 1, 2, 1, true))
	if len(got) != 4 || len(ended) != 1 || ended[0] != "j "+t0.Add(10*time.Second).Format(time.RFC3339) {
		t.Errorf("after the finals: %d reports, ended %v", len(got), ended)
	}
}

// FuzzDecodeConnections: whatever bytes come as connections, Decode never
// panics, keeps at most MaxConns, and what it accepts is what
// proto.Unmarshal reads, each one's addresses 4 or 16 bytes.
func FuzzDecodeConnections(f *testing.F) {
	base := encode(f, snapshot("42", 1, 4, 0, false))
	for _, c := range withConns(snapshot("42", 1, 4, 0, false)).Connections {
		b, _ := proto.Marshal(c)
		f.Add(b)
	}
	f.Add([]byte{0x12, 0x05, 1, 2, 3, 4, 5})
	f.Add([]byte{0x0a, 0x03, 't', 'c', 'p', 0x18, 0xff, 0xff, 0x7f})
	lim := Limits{}.WithDefaults()
	f.Fuzz(func(t *testing.T, conn []byte) {
		b := slices.Clone(base)
		for range 2 {
			b = protowire.AppendBytes(protowire.AppendTag(b, 24, protowire.BytesType), conn)
		}
		d, err := Decode(b, lim)
		var m agentpb.Datagram
		perr := proto.Unmarshal(b, &m)
		if err != nil {
			if reasonOf(err) == "" {
				t.Fatalf("an error with no reason: %v", err)
			}
			return
		}
		if perr != nil {
			t.Fatalf("accepted what proto.Unmarshal refuses (%v)", perr)
		}
		if len(d.conns.list) != 2 {
			t.Fatalf("%d connections kept of 2", len(d.conns.list))
		}
		p := FromProto(&m)
		if p.conns.bad != "" || !slices.Equal(p.conns.list, d.conns.list) {
			t.Fatalf("hand decoder %+v, protobuf's %+v (%s)", d.conns.list, p.conns.list, p.conns.bad)
		}
	})
}
