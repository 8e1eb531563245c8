package api

import (
	"context"
	"encoding/base64"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/fabric/sim"
)

func genTopo(t testing.TB, spec string) *fabric.Topology {
	t.Helper()
	sp, err := sim.ParseSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	topo, _, err := sim.Generate(context.Background(), sp)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func TestLayoutStampede(t *testing.T) {
	if testing.Short() {
		t.Skip("generates the Stampede fabric")
	}
	topo := genTopo(t, "stampede")
	start := time.Now()
	l := ComputeLayout(topo)
	t.Logf("stampede layout: %d nodes, %d links, %d levels in %s", len(l.X), len(l.Edges)/2, l.Levels, time.Since(start))
	if len(l.X) != len(topo.Nodes) || len(l.Edges) != 2*len(topo.Links) {
		t.Fatalf("layout sizes %d nodes / %d edge ends, want %d / %d", len(l.X), len(l.Edges), len(topo.Nodes), 2*len(topo.Links))
	}
	// Hosts, leaves, line chips, spine chips.
	if l.Levels != 4 {
		t.Errorf("levels = %d, want 4", l.Levels)
	}
	count := make([]int, l.Levels)
	for i, lv := range l.Level {
		count[lv]++
		if lv == 0 && l.Group[i] < 0 {
			t.Errorf("host %s has no leaf", l.Name[i])
		}
		if lv > 0 && l.Type[i] != uint8(fabric.Switch) {
			t.Errorf("node %s on level %d is not a switch", l.Name[i], lv)
		}
	}
	if count[0] != 6541 || count[1] != 332 || count[2] != 288 || count[3] != 144 {
		t.Errorf("nodes per level = %v, want [6541 332 288 144]", count)
	}
	// Every link joins adjacent levels, upper levels drawn higher.
	for j := 0; j < len(l.Edges); j += 2 {
		a, b := l.Edges[j], l.Edges[j+1]
		d := int(l.Level[a]) - int(l.Level[b])
		if d != 1 && d != -1 {
			t.Fatalf("link %d joins levels %d and %d", j/2, l.Level[a], l.Level[b])
		}
		if (l.Level[a] > l.Level[b]) != (l.Y[a] > l.Y[b]) {
			t.Fatalf("link %d: higher level drawn lower", j/2)
		}
	}
}

// The barycentric sweeps must not make crossings worse than name order.
func TestLayoutReducesCrossings(t *testing.T) {
	topo := genTopo(t, "fat-tree:hosts=128,radix=16")
	l := ComputeLayout(topo)
	crossings := func(x []float32) int {
		n := 0
		var up [][2]float32 // level 1 -> 2 edges as (x low, x high)
		for j := 0; j < len(l.Edges); j += 2 {
			a, b := l.Edges[j], l.Edges[j+1]
			if l.Level[a] > l.Level[b] {
				a, b = b, a
			}
			if l.Level[a] == 1 && l.Level[b] == 2 {
				up = append(up, [2]float32{x[a], x[b]})
			}
		}
		for i := range up {
			for k := i + 1; k < len(up); k++ {
				if (up[i][0]-up[k][0])*(up[i][1]-up[k][1]) < 0 {
					n++
				}
			}
		}
		return n
	}
	got := crossings(l.X)
	// Baseline: each level in name order.
	base := make([]float32, len(l.X))
	for lv := uint8(1); lv < uint8(l.Levels); lv++ {
		var row []int
		for i := range l.Level {
			if l.Level[i] == lv {
				row = append(row, i)
			}
		}
		for a := 1; a < len(row); a++ {
			for b := a; b > 0 && naturalLess(l.Name[row[b]], l.Name[row[b-1]]); b-- {
				row[b], row[b-1] = row[b-1], row[b]
			}
		}
		for k, i := range row {
			base[i] = float32(k) / float32(len(row))
		}
	}
	if want := crossings(base); got > want {
		t.Errorf("crossings between levels 1 and 2: %d, name order has %d", got, want)
	}
}

func TestNaturalLess(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{{"leaf2", "leaf10", true}, {"leaf10", "leaf2", false}, {"a", "b", true}, {"n007", "n7", false}, {"core1-line2", "core1-line10", true}} {
		if got := naturalLess(c.a, c.b); got != c.want {
			t.Errorf("naturalLess(%q, %q) = %v", c.a, c.b, got)
		}
	}
}

func TestSweepMessage(t *testing.T) {
	topo := genTopo(t, "fat-tree:hosts=16,radix=8")
	lk := topo.Links[0]
	now := time.Now()
	st := &FabricState{Topology: topo, Version: 1, Sweep: SweepInfo{Time: now, Count: 3}, Samples: map[fabric.PortRef]*fabric.PortSample{}}
	half := &fabric.PortSample{Port: lk.A, Span: time.Second}
	half.Delta[fabric.XmitData] = uint64(lk.Capacity() / 2)
	half.Delta[fabric.SymbolErrors] = 2
	st.Samples[lk.A] = half
	m := SweepMessage(st, nil)
	util, err := base64.StdEncoding.DecodeString(m.Util)
	if err != nil || len(util) != 2*len(topo.Links) {
		t.Fatalf("util: %d bytes, %v", len(util), err)
	}
	if util[0] != 127 {
		t.Errorf("A->B at 50%% = %d, want 127", util[0])
	}
	if util[1] != 0 {
		t.Errorf("B->A from A's receive counter = %d, want 0", util[1])
	}
	if util[2] != UtilUnmeasured {
		t.Errorf("unswept link = %d, want %d", util[2], UtilUnmeasured)
	}
	bits, _ := base64.StdEncoding.DecodeString(m.Errors)
	idx := -1
	for i := range topo.Nodes {
		if topo.Nodes[i].GUID == lk.A.GUID {
			idx = i
		}
	}
	if m.ErrorNodes != 1 || bits[idx/8]&(1<<(idx%8)) == 0 {
		t.Errorf("error nodes = %d, bit of node %d not set", m.ErrorNodes, idx)
	}
}
