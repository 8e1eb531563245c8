package ingest

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/netloom/netloom/internal/ingest/agentpb"
)

// sameAsProto checks that unmarshal agrees with proto.Unmarshal on b: both
// fail, or both give the same datagram (but for unknown fields inside node
// rows, which unmarshal drops).
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
	w := FromProto(want)
	if g, w := got.rows.slice(), w.rows.slice(); !proto.Equal(got.Datagram, want) || len(got.Datagram.Nodes) > 0 || !reflect.DeepEqual(g, w) {
		t.Fatalf("unmarshal differs from proto.Unmarshal:\n got %v %+v\nwant %v %+v", got.Datagram, g, want, w)
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

	row := func(fields ...[]byte) []byte {
		var r []byte
		for _, f := range fields {
			r = append(r, f...)
		}
		return protowire.AppendBytes(protowire.AppendTag(nil, fieldNodes, protowire.BytesType), r)
	}
	str := func(num protowire.Number, s string) []byte {
		return protowire.AppendString(protowire.AppendTag(nil, num, protowire.BytesType), s)
	}
	msg := func(num protowire.Number, b []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), b)
	}
	varint := func(num protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
	}
	cat := func(bs ...[]byte) []byte {
		var r []byte
		for _, b := range bs {
			r = append(r, b...)
		}
		return r
	}
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
