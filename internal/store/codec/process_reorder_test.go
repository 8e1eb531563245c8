package codec

import (
	"reflect"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/store"
)

// A process row with reorders (flag 32), after a GPU section or without
// one, round-trips, and every cut of it is refused.
func TestProcessRowReorders(t *testing.T) {
	at := time.Date(2026, 11, 26, 16, 41, 20, 36926678, time.UTC)
	rs := []store.Reorder{
		{Index: 0, Time: at, Ranks: 12, Nodes: 4, Method: "scotch", Moved: 12, OldRank: 4, NewRank: 11,
			InterNodeBefore: 1966080, InterNodeAfter: 655360, TotalBytes: 1966080, Seconds: 0.0018, MapSeconds: 0.0009},
		{Index: 1, Time: at.Add(time.Second), Ranks: 12, CommWorld: true, Nodes: 4, Method: "kept", OldRank: 3, NewRank: 3,
			InterNodeBefore: 655360, InterNodeAfter: 655360, TotalBytes: 1966080, Since: "phase 2", Seconds: 0.5},
	}
	plain := bigProcess(3)
	plain.Reorders = rs
	withGPU := bigProcess(3)
	withGPU.GPU = gpuSection()
	withGPU.Reorders = rs[:1]
	for _, p := range []store.Process{plain, withGPU} {
		b := EncodeProcess(nil, &p)
		got, err := DecodeProcess(b)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !reflect.DeepEqual(got, p) {
			t.Fatalf("round trip differs:\n got %+v\nwant %+v", got.Reorders, p.Reorders)
		}
		for cut := 1; cut < len(b); cut++ {
			if _, err := DecodeProcess(b[:cut]); err == nil {
				t.Fatalf("a row cut to %d of %d bytes decoded", cut, len(b))
			}
		}
	}
	// Without reorders, the row is the one written before they existed.
	none := bigProcess(3)
	a, b := EncodeProcess(nil, &none), EncodeProcess(nil, &plain)
	if len(b) <= len(a) {
		t.Fatalf("rows: %d bytes without reorders, %d with", len(a), len(b))
	}
	if got, err := DecodeProcess(a); err != nil || got.Reorders != nil {
		t.Fatalf("a row without reorders: %v, %v", got.Reorders, err)
	}
}
