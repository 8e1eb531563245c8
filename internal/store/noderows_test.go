package store

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

func rows(n int, scale uint64) []NodeTraffic {
	out := make([]NodeTraffic, n)
	for i := range out {
		out[i] = NodeTraffic{Node: fmt.Sprintf("c%03d-%03d", 401+i/96, 101+i%96)}
		switch i % 4 {
		case 0:
			out[i].Coll = Traffic{Bytes: scale * uint64(i+1), Msgs: uint64(i)}
		case 1:
			out[i].P2P = Traffic{Bytes: 1 << 62, Msgs: 1}
		case 2:
			out[i].Classes = Classes{P2P: Traffic{1, 2}, Coll: Traffic{3, 4}, RMA: Traffic{5, 6}}
		}
	}
	return out
}

func TestNodeRowsPackAndRead(t *testing.T) {
	var table NodeTable
	a, b := rows(1024, 48e6), rows(1000, 7)
	ra := table.Pack(a)
	rb := table.Pack(b[500:]) // later names, then
	rc := table.Pack(b)       // a table that grew since ra and rb
	for _, c := range []struct {
		r    NodeRows
		want []NodeTraffic
	}{{ra, a}, {rb, b[500:]}, {rc, b}, {NewNodeRows(a), a}, {NodeRows{}, []NodeTraffic{}}} {
		if got := c.r.Slice(); c.r.Len() != len(c.want) || !reflect.DeepEqual(got, c.want) {
			t.Fatalf("%d rows read back as %d, differing", len(c.want), c.r.Len())
		}
	}
	if table.Len() != 1024 {
		t.Errorf("table of %d names, want 1024 (names shared)", table.Len())
	}
	if per := float64(len(ra.b)) / 1024; per > 12 {
		t.Errorf("%.1f bytes a row", per)
	}
	// The JSON is a list of NodeTraffic, both ways.
	j, err := json.Marshal(ra)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(a)
	if string(j) != string(want) {
		t.Fatalf("JSON differs from the rows'")
	}
	var back NodeRows
	if err := json.Unmarshal(j, &back); err != nil || !reflect.DeepEqual(back.Slice(), a) {
		t.Fatalf("JSON read back: %v", err)
	}
	if j, _ := json.Marshal(NodeRows{}); string(j) != "[]" {
		t.Errorf("no rows: %s", j)
	}
	// Stopping early.
	n := 0
	for range ra.All() {
		if n++; n == 3 {
			break
		}
	}
	if n != 3 {
		t.Errorf("iteration went on after break: %d", n)
	}
}

// TestNodeCursorLess: NextRow walks the rows NextIndex reads, and Less
// tells a counter below the row's from equal and higher ones, for each of
// the six counters.
func TestNodeCursorLess(t *testing.T) {
	var rows []NodeTraffic
	for i := range 6 {
		var v [6]uint64
		v[i] = 1 << (7 * i) // varints of 1 to 6 bytes
		v[(i+3)%6] = 300
		rows = append(rows, NodeTraffic{Node: fmt.Sprint("n", i), Classes: Classes{P2P: Traffic{v[0], v[1]}, Coll: Traffic{v[2], v[3]}, RMA: Traffic{v[4], v[5]}}})
	}
	rows = append(rows, NodeTraffic{Node: "zero"})
	r := NewNodeRows(rows)
	a, b := r.Cursor(), r.Cursor()
	for i := range rows {
		k, ok := a.NextRow()
		kk, cl, okk := b.NextIndex()
		if !ok || !okk || k != kk || cl != rows[i].Classes {
			t.Fatalf("row %d: NextRow %d %v, NextIndex %d %v", i, k, ok, kk, okk)
		}
		same := rows[i].Classes
		if a.Less(&same) {
			t.Errorf("row %d: equal counters are less", i)
		}
		for f := range 6 {
			c := rows[i].Classes
			fields := [6]*uint64{&c.P2P.Bytes, &c.P2P.Msgs, &c.Coll.Bytes, &c.Coll.Msgs, &c.RMA.Bytes, &c.RMA.Msgs}
			*fields[f]++
			if a.Less(&c) {
				t.Errorf("row %d: counter %d higher is less", i, f)
			}
			if *fields[f] -= 2; *fields[f] < 1<<63 && !a.Less(&c) { // not below zero
				t.Errorf("row %d: counter %d lower is not less", i, f)
			}
		}
	}
	if _, ok := a.NextRow(); ok {
		t.Error("a row after the last")
	}
}
