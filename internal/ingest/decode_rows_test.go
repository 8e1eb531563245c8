package ingest

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/netloom/netloom/internal/ingest/agentpb"
)

// sameAsProto checks that unmarshal agrees with proto.Unmarshal on b: both
// fail, or both give the same datagram (but for unknown fields, which
// unmarshal drops).
func sameAsProto(t *testing.T, b []byte) {
	t.Helper()
	want := new(agentpb.Datagram)
	werr := proto.Unmarshal(b, want)
	got, gerr := unmarshal(b)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("proto.Unmarshal: %v; unmarshal: %v (input %x)", werr, gerr, b)
	}
	if werr != nil {
		return
	}
	dropUnknown(want.ProtoReflect())
	w := FromProto(want)
	if g, w := got.rows.slice(), w.rows.slice(); !proto.Equal(got.Datagram, want) || len(got.Datagram.Nodes) > 0 || !reflect.DeepEqual(g, w) {
		t.Fatalf("unmarshal differs from proto.Unmarshal:\n got %v %+v\nwant %v %+v", got.Datagram, g, want, w)
	}
	if len(got.Datagram.Peers) > 0 || !reflect.DeepEqual(got.peers, w.peers) {
		t.Fatalf("unmarshal's peers differ from proto.Unmarshal's:\n got %+v\nwant %+v", got.peers, w.peers)
	}
}

func TestUnmarshalNodeRows(t *testing.T) {
	d := snapshot("n", 1, 4, 3, false)
	d.Nodes = append(d.Nodes, &agentpb.NodeTraffic{Node: "only-rma", Rma: &agentpb.Traffic{Bytes: 7}},
		&agentpb.NodeTraffic{Node: "empty-classes", P2P: &agentpb.Traffic{}, Coll: &agentpb.Traffic{}, Rma: &agentpb.Traffic{}},
		&agentpb.NodeTraffic{})
	b := encode(t, d)
	sameAsProto(t, b)
	sameAsProto(t, encode(t, &agentpb.Datagram{Version: 1, JobId: "no-nodes"}))

	row := func(fields ...[]byte) []byte { return msg(fieldNodes, cat(fields...)) }
	for name, in := range map[string][]byte{
		"rows between other fields": cat(varint(1, 1), row(str(1, "a"), msg(3, varint(1, 5))), str(2, "job"), row(str(1, "b"))),
		"name twice: last wins":     row(str(1, "a"), str(1, "bb")),
		"class twice: merged":       row(msg(2, varint(1, 5)), msg(2, varint(2, 6)), msg(2, varint(1, 7))),
		"unknown fields in rows":    row(str(1, "a"), varint(9, 1), msg(2, cat(varint(1, 5), varint(7, 1))), varint(1, 3)),
		"class as a varint":         row(varint(2, 5)),
		"nodes as a varint":         cat(varint(14, 3), row(str(1, "a"))),
		"invalid UTF-8 name":        row(str(1, "\xff")),
		"truncated row":             row(str(1, "a"))[:4],
		"truncated traffic":         row(msg(3, varint(1, 1<<40)[:3])),
		"bad varint in traffic":     row(msg(3, []byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})),
		"field number 0 in row":     row([]byte{0x02, 0x00}),
		"truncated after rows":      cat(row(str(1, "a")), []byte{0x12}),
		"long datagram":             b,
	} {
		t.Run(name, func(t *testing.T) { sameAsProto(t, in) })
	}
}

// Wire-format pieces for hand-made datagrams.
func str(num protowire.Number, s string) []byte {
	return protowire.AppendString(protowire.AppendTag(nil, num, protowire.BytesType), s)
}

func msg(num protowire.Number, b []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), b)
}

func varint(num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
}

func cat(bs ...[]byte) []byte {
	var r []byte
	for _, b := range bs {
		r = append(r, b...)
	}
	return r
}

func TestUnmarshalPeerRows(t *testing.T) {
	d := snapshot("p", 1, 8, 3, false)
	d.Peers = append(d.Peers, &agentpb.PeerTraffic{Peer: 5, MonitoredColl: &agentpb.Traffic{Msgs: 2}},
		&agentpb.PeerTraffic{Peer: 6, SizeHistogram: []uint64{0, 1, 1 << 40}, MonitoredP2P: &agentpb.Traffic{}},
		&agentpb.PeerTraffic{Peer: 7})
	sameAsProto(t, encode(t, d))

	peer := func(fields ...[]byte) []byte { return msg(fieldPeers, cat(fields...)) }
	packed := func(vs ...uint64) []byte {
		var b []byte
		for _, v := range vs {
			b = protowire.AppendVarint(b, v)
		}
		return msg(fieldPeerHistogram, b)
	}
	node := msg(fieldNodes, str(1, "a"))
	for name, in := range map[string][]byte{
		"peers between other fields":    cat(varint(1, 1), peer(varint(1, 2)), str(2, "job"), node, peer(varint(1, 3)), varint(3, 4)),
		"peer rows first":               cat(peer(varint(1, 2), packed(1, 2)), peer(varint(1, 3)), node),
		"peer twice: last wins":         peer(varint(1, 2), varint(1, 9)),
		"peer above 32 bits":            peer(varint(1, 1<<33|4)),
		"class twice: merged":           peer(msg(3, varint(1, 5)), msg(3, varint(2, 6)), msg(3, varint(1, 7))),
		"histogram packed and unpacked": peer(packed(1, 2), varint(5, 3), packed(), packed(1<<63)),
		"histograms of several rows":    cat(peer(packed(1, 2)), peer(varint(1, 1)), peer(varint(5, 4), msg(8, nil)), peer(packed(5))),
		"monitored, each class":         cat(peer(msg(6, varint(1, 1))), peer(msg(7, varint(2, 2))), peer(msg(8, nil)), peer(msg(2, nil))),
		"unknown fields in rows":        peer(varint(1, 1), varint(9, 1), msg(2, cat(varint(1, 5), varint(7, 1))), str(12, "x")),
		"wrong wire types":              peer(msg(1, nil), varint(2, 5), varint(6, 1), protowire.AppendFixed32(protowire.AppendTag(nil, 5, protowire.Fixed32Type), 1)),
		"peers as a varint":             cat(varint(15, 3), peer(varint(1, 1))),
		"truncated row":                 peer(varint(1, 1), packed(1, 2))[:5],
		"truncated packed histogram":    peer(msg(5, []byte{0x80})),
		"bad varint in histogram":       peer(msg(5, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})),
		"truncated traffic":             peer(msg(2, varint(1, 1<<40)[:3])),
		"truncated monitored":           peer(msg(7, varint(2, 1<<40)[:2])),
		"field number 0 in row":         peer([]byte{0x02, 0x00}),
	} {
		t.Run(name, func(t *testing.T) { sameAsProto(t, in) })
	}
}

// TestUnmarshalMessage checks the hand decoder of the datagram's own
// fields, its process block and its function rows against proto.Unmarshal.
func TestUnmarshalMessage(t *testing.T) {
	d := snapshot("m", 1, 8, 3, true)
	d.Credential, d.Mac, d.PeersTruncated, d.IntervalNs, d.StartUnixNs = []byte("cred"), make([]byte, 32), true, 45e9, -5
	d.Process.Cpu, d.Process.CpuSystemSeconds, d.Process.DatagramsDropped = -1, 0.25, 7
	d.Process.IntraNode, d.Process.InterNode = &agentpb.Traffic{Bytes: 1}, &agentpb.Traffic{Msgs: 2}
	d.Regions = []*agentpb.Region{{Name: "solve", Entries: 3, Coll: &agentpb.Traffic{Bytes: 9}}}
	for i := range 11 { // more than the datagram's own storage holds
		d.Functions = append(d.Functions, &agentpb.FunctionStat{Name: fmt.Sprintf("MPI_F%d", i), Calls: uint64(i), TimeNs: 1,
			BytesSent: 2, BytesReceived: 3})
	}
	sameAsProto(t, encode(t, d))
	sameAsProto(t, nil)

	proc := func(fields ...[]byte) []byte { return msg(11, cat(fields...)) }
	fn := func(fields ...[]byte) []byte { return msg(12, cat(fields...)) }
	fixed := func(num protowire.Number, v uint64) []byte {
		return protowire.AppendFixed64(protowire.AppendTag(nil, num, protowire.Fixed64Type), v)
	}
	for name, in := range map[string][]byte{
		"scalars twice: last wins":       cat(varint(3, 1), str(2, "a"), varint(3, 2), str(2, "b"), varint(9, 1), varint(9, 0)),
		"scalars above their width":      cat(varint(1, 1<<33|1), varint(8, 1<<63), varint(4, 1<<32)),
		"process twice: merged":          cat(proc(str(1, "n"), varint(3, 4)), proc(str(2, "h"), msg(30, varint(1, 1))), proc(msg(30, varint(2, 2)))),
		"process doubles":                proc(fixed(10, 0x3ff0000000000000), fixed(13, 0x7ff8000000000001), fixed(12, 1)),
		"function fields twice":          fn(str(1, "a"), varint(2, 1), str(1, "b"), varint(5, 9), varint(2, 3)),
		"unknown fields":                 cat(varint(30, 1), proc(varint(40, 1), str(8, "x")), fn(varint(9, 1)), str(99, "y")),
		"wrong wire types":               cat(str(1, "x"), varint(2, 5), varint(11, 1), proc(varint(1, 1), str(3, "x"), varint(10, 1), fixed(14, 1)), fn(varint(1, 1), str(2, "x"))),
		"traffic with a wrong wire type": proc(msg(30, cat(str(1, "x"), varint(2, 3)))),
		"invalid UTF-8 job id":           str(2, "\xff"),
		"invalid UTF-8 process string":   proc(str(6, "a\xc0")),
		"invalid UTF-8 function name":    fn(str(1, "\xfe")),
		"truncated double":               proc(fixed(11, 1)[:5]),
		"truncated process":              proc(str(1, "node"))[:4],
		"truncated function":             fn(varint(3, 1<<40))[:4],
		"bad varint in function":         fn([]byte{0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}),
		"truncated traffic in process":   proc(msg(31, varint(1, 1<<40)[:3])),
		"malformed region":               msg(13, []byte{0x0a, 0x05}),
		"empty credential":               msg(20, nil),
		"field number 0 in process":      proc([]byte{0x00}),
		"truncated varint at the top":    []byte{0x08, 0x80},
		"group at the top":               []byte{0x0b, 0x0c},
	} {
		t.Run(name, func(t *testing.T) { sameAsProto(t, in) })
	}
}

func TestUvarintLen(t *testing.T) {
	for _, v := range []uint64{0, 1, 127, 128, 16383, 16384, 1<<21 - 1, 1 << 21, 1<<63 - 1, 1 << 63, ^uint64(0)} {
		if got, want := uvarintLen(v), len(binary.AppendUvarint(nil, v)); got != want {
			t.Errorf("uvarintLen(%d) = %d, want %d", v, got, want)
		}
	}
}

// dropUnknown clears the unknown fields of m and of the messages in it.
func dropUnknown(m protoreflect.Message) {
	m.SetUnknown(nil)
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Message() == nil || fd.IsMap():
		case fd.IsList():
			for i := range v.List().Len() {
				dropUnknown(v.List().Get(i).Message())
			}
		default:
			dropUnknown(v.Message())
		}
		return true
	})
}
