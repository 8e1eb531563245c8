package store

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestPeerRows(t *testing.T) {
	rows := []PeerTraffic{
		{Peer: 3, Classes: Classes{P2P: Traffic{Bytes: 1 << 40, Msgs: 9}}, Histogram: []uint64{0, 1, 1 << 33}},
		{Peer: 2}, // out of order: packed as given
		{Peer: 70000, Classes: Classes{Coll: Traffic{Bytes: 5, Msgs: 1}}, Monitored: &Physical{Classes: Classes{RMA: Traffic{Bytes: 7, Msgs: 2}}}},
		{Peer: 70001, Histogram: make([]uint64, 65), Monitored: &Physical{}},
		{Peer: 9, Histogram: []uint64{1}, Monitored: &Physical{Classes: Classes{Coll: Traffic{Bytes: 300, Msgs: 1}}, Fetched: Traffic{Bytes: 1 << 35, Msgs: 200}}},
		{Peer: 10, Monitored: &Physical{Fetched: Traffic{Msgs: 1}}},
	}
	rows[3].Histogram[64] = 1
	r := NewPeerRows(rows)
	if r.Len() != len(rows) || !reflect.DeepEqual(r.Slice(), rows) {
		t.Fatalf("unpacked %+v, want %+v", r.Slice(), rows)
	}
	i := 0
	for peer, cl := range r.Traffic() {
		if peer != rows[i].Peer || cl != rows[i].Classes {
			t.Errorf("Traffic row %d: %d %+v, want %d %+v", i, peer, cl, rows[i].Peer, rows[i].Classes)
		}
		i++
	}
	if i != len(rows) {
		t.Errorf("Traffic yielded %d rows", i)
	}
	i = 0
	for peer, m := range r.Physical() {
		for rows[i].Monitored == nil {
			i++
		}
		if peer != rows[i].Peer || m != *rows[i].Monitored {
			t.Errorf("Physical: %d %+v, want %d %+v", peer, m, rows[i].Peer, *rows[i].Monitored)
		}
		i++
	}
	if i != len(rows) {
		t.Errorf("Physical stopped at row %d", i)
	}
	// A cursor reuses the caller's histogram buffer.
	c := r.Cursor()
	buf := make([]uint64, 0, 80)
	var mon Physical
	for i := range rows {
		peer, cl, bins, has, ok := c.Next(buf, &mon)
		if !ok || peer != rows[i].Peer || cl != rows[i].Classes || len(bins) != len(rows[i].Histogram) ||
			(len(bins) > 0 && &bins[0] != &buf[:1][0]) || has != (rows[i].Monitored != nil) || (has && mon != *rows[i].Monitored) {
			t.Errorf("cursor row %d: %d %+v %v %v %+v", i, peer, cl, bins, has, mon)
		}
	}
	if _, _, _, _, ok := c.Next(buf, nil); ok {
		t.Error("a row after the last")
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back PeerRows
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, r) {
		t.Errorf("JSON %s read back as %+v (%v)", b, back.Slice(), err)
	}
	if b, _ := json.Marshal(PeerRows{}); string(b) != "[]" {
		t.Errorf("no rows encode as %s", b)
	}
}
