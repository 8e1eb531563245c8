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

// Ranks whose rows share one growing name table (as the daemon's tracker
// packs them): a destination first seen in a later interval is counted.
func TestJobCounterSharedTableGrows(t *testing.T) {
	var table store.NodeTable
	job := func(dests ...string) *store.Job {
		var to []store.NodeTraffic
		for _, d := range dests {
			to = append(to, store.NodeTraffic{Node: d, Classes: store.Classes{P2P: store.Traffic{Bytes: 100}}})
		}
		rows := table.Pack(to)
		return &store.Job{Processes: []store.Process{{Rank: 0, Node: "a", ToNodes: rows}, {Rank: 1, Node: "b", ToNodes: table.Pack(to[:1])}}}
	}
	lids := map[string]fabric.LID{"a": 1, "b": 2, "c": 3}
	lid := func(n string) (fabric.LID, bool) { l, ok := lids[n]; return l, ok }
	c := NewJobCounter()
	iv, scratch := c.Next(job("b"), lid, nil)
	if iv.Bytes != 100 { // a>b 100; b>b is intra-node
		t.Fatalf("first interval: %d bytes, want 100", iv.Bytes)
	}
	iv, _ = c.Next(job("b", "c"), lid, scratch) // c is new: a>c 100 since
	n := len(iv.Names)
	got := map[string]uint64{}
	for d := range n {
		for s := range n {
			if b := iv.Matrix.Bytes[d*n+s]; b > 0 {
				got[iv.Names[s]+">"+iv.Names[d]] = b
			}
		}
	}
	if fmt.Sprint(got) != "map[a>c:100]" {
		t.Fatalf("second interval: %v, want map[a>c:100]", got)
	}
}

// A rank whose peer rows carry what its library sent (monitored counts)
// is attributed from them, gets in the direction their data flows; a rank
// without them, or whose rows were cut to its top peers, from its node
// rows (the application's calls).
func TestJobCounterPhysical(t *testing.T) {
	logical := store.NewNodeRows([]store.NodeTraffic{{Node: "b", Classes: store.Classes{Coll: store.Traffic{Bytes: 1000}}}})
	phys := func(peer int, sent, fetched uint64) store.PeerTraffic {
		return store.PeerTraffic{Peer: peer, Classes: store.Classes{Coll: store.Traffic{Bytes: 1000}},
			Monitored: &store.Physical{Classes: store.Classes{Coll: store.Traffic{Bytes: sent}}, Fetched: store.Traffic{Bytes: fetched}}}
	}
	j := &store.Job{JobSummary: store.JobSummary{Ranks: 4}, Processes: []store.Process{
		// rank 0 on a: physically 300 to rank 2 (on b), 7 fetched from rank 3 (on b), 50 to rank 1 (a)
		{Rank: 0, Node: "a", ToNodes: logical, Peers: store.NewPeerRows([]store.PeerTraffic{phys(1, 50, 0), phys(2, 300, 0), phys(3, 0, 7)})},
		// rank 1 on a: no monitored counts: its node rows, 1000 to b
		{Rank: 1, Node: "a", ToNodes: logical, Peers: store.NewPeerRows([]store.PeerTraffic{{Peer: 2, Classes: store.Classes{Coll: store.Traffic{Bytes: 1000}}}})},
		// rank 2 on b: physical, but its rows are its top peers only: node rows (none)
		{Rank: 2, Node: "b", Peers: store.NewPeerRows([]store.PeerTraffic{phys(0, 9999, 0)}), PeersTruncated: true},
		// rank 3 on b: physical, 20 to rank 1, and to rank 5, never heard from
		{Rank: 3, Node: "b", Peers: store.NewPeerRows([]store.PeerTraffic{phys(1, 20, 0), phys(5, 4000, 0)})},
	}}
	if !j.Processes[0].Physical() || j.Processes[1].Physical() || j.Processes[2].Physical() || !j.Processes[3].Physical() {
		t.Fatalf("Physical: %v %v %v %v", j.Processes[0].Physical(), j.Processes[1].Physical(), j.Processes[2].Physical(), j.Processes[3].Physical())
	}
	lids := map[string]fabric.LID{"a": 1, "b": 2}
	iv, _ := NewJobCounter().Next(j, func(n string) (fabric.LID, bool) { l, ok := lids[n]; return l, ok }, nil)
	got := map[string]uint64{}
	n := len(iv.Names)
	for d := range n {
		for s := range n {
			if b := iv.Matrix.Bytes[d*n+s]; b > 0 {
				got[iv.Names[s]+">"+iv.Names[d]] = b
			}
		}
	}
	if want := map[string]uint64{"a>b": 300 + 1000, "b>a": 7 + 20}; fmt.Sprint(got) != fmt.Sprint(want) || iv.Bytes != 1327 {
		t.Errorf("matrix %v (%d bytes), want %v", got, iv.Bytes, want)
	}
}
