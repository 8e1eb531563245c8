package analysis

import (
	"fmt"
	"slices"
	"testing"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
)

func TestJobCounterIntervals(t *testing.T) {
	// Ranks 0,1 on a; 2 on b; 3 on ghost (unmapped).
	nodes := []string{"a", "a", "b", "ghost"}
	job := func(scale uint64) *store.Job {
		j := &store.Job{}
		for r, n := range nodes {
			var to []store.NodeTraffic
			for _, d := range []string{"a", "b", "ghost"} {
				to = append(to, store.NodeTraffic{Node: d, Classes: store.Classes{P2P: store.Traffic{Bytes: scale * uint64(r+1)},
					Coll: store.Traffic{Bytes: scale}}})
			}
			j.Processes = append(j.Processes, store.Process{Rank: r, Node: n, ToNodes: store.NewNodeRows(to)})
		}
		return j
	}
	lids := map[string]fabric.LID{"a": 1, "b": 2}
	lid := func(n string) (fabric.LID, bool) { l, ok := lids[n]; return l, ok }
	c := NewJobCounter()
	var scratch []uint64
	check := func(scale uint64, wantAB, wantBA, wantUnmapped uint64) {
		t.Helper()
		var iv Interval
		iv, scratch = c.Next(job(scale), lid, scratch)
		m := map[string]uint64{}
		n := len(iv.Matrix.LIDs)
		for d := range n {
			for s := range n {
				if b := iv.Matrix.Bytes[d*n+s]; b > 0 {
					m[fmt.Sprintf("%s>%s", iv.Names[s], iv.Names[d])] = b
				}
			}
		}
		want := map[string]uint64{}
		if wantAB > 0 {
			want["a>b"] = wantAB
		}
		if wantBA > 0 {
			want["b>a"] = wantBA
		}
		if fmt.Sprint(m) != fmt.Sprint(want) || iv.Bytes != wantAB+wantBA || iv.UnmappedBytes != wantUnmapped ||
			!slices.Equal(iv.Unmapped, []string{"ghost"}) || !slices.Equal(iv.Names, []string{"a", "b"}) {
			t.Errorf("scale %d: matrix %v bytes %d unmapped %v %d; want %v, %d unmapped bytes", scale, m, iv.Bytes, iv.Unmapped, iv.UnmappedBytes, want, wantUnmapped)
		}
	}
	// Cumulative at scale s: rank r sends s*(r+1)+s to every node. a->b:
	// ranks 0,1: s*(1+1)+s*(2+1) = 5s; b->a: rank 2: 4s; to/from ghost:
	// ranks 0,1,2 -> ghost 2s+3s+4s, rank 3 -> a, b 5s+5s: 19s.
	check(10, 50, 40, 190)
	check(30, 100, 80, 380) // the interval is the difference
	check(30, 0, 0, 0)
	check(5, 25, 20, 95) // counters went back: start over
}
