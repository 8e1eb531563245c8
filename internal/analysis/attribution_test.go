package analysis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/fabric/sim"
)

func generate(t testing.TB, spec string) *fabric.Routes {
	t.Helper()
	sp, err := sim.ParseSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	topo, ft, err := sim.Generate(context.Background(), sp)
	if err != nil {
		t.Fatal(err)
	}
	return fabric.NewRoutes(topo, ft)
}

// TestAttributeMatchesPaths checks attribution against walking every
// flow's path hop by hop.
func TestAttributeMatchesPaths(t *testing.T) {
	for _, spec := range []string{"fat-tree:hosts=32,radix=8", "fat-tree:hosts=60,radix=8,levels=3"} {
		routes := generate(t, spec)
		a := NewAttributor(routes)
		lids := routes.CALIDs()
		rng := rand.New(rand.NewPCG(1, 2))
		var flows []Flow
		for _, s := range lids {
			for _, d := range lids {
				if s != d && rng.IntN(3) > 0 {
					flows = append(flows, Flow{Src: s, Dst: d, Bytes: uint64(rng.IntN(1 << 20))})
				}
			}
		}
		got := make([]uint64, a.Directions())
		if errs := a.Attribute(flows, got); len(errs) > 0 {
			t.Fatal(errs)
		}
		want := make([]uint64, a.Directions())
		for _, f := range flows {
			rt, err := routes.Path(f.Src, f.Dst)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range rt.Hops {
				i, ok := a.DirectionIndex(fabric.PortRef{GUID: h.GUID, Port: h.Port})
				if !ok {
					t.Fatalf("hop %+v is not a link direction", h)
				}
				want[i] += f.Bytes
			}
		}
		// The dense form gives the same.
		dense := matrixLoad(t, a, lids, flows)
		for i := range want {
			if dense[i] != want[i] {
				t.Errorf("%s: direction %s: matrix attributed %d, paths give %d", spec, a.Direction(i), dense[i], want[i])
			}
			if got[i] != want[i] {
				t.Errorf("%s: direction %s: attributed %d, paths give %d", spec, a.Direction(i), got[i], want[i])
			}
		}
	}
}

func TestAttributeReportsUnknownEndpoints(t *testing.T) {
	a := NewAttributor(generate(t, "fat-tree:hosts=8,radix=8"))
	load := make([]uint64, a.Directions())
	errs := a.Attribute([]Flow{{Src: 1, Dst: 60000, Bytes: 5}, {Src: 60001, Dst: 2, Bytes: 5}}, load)
	if len(errs) != 2 {
		t.Fatalf("errors %v, want two", errs)
	}
	if errs := a.Attribute(nil, load[:1]); len(errs) != 1 {
		t.Errorf("short load slice accepted")
	}
}

// BenchmarkAllToAll attributes one interval of an all-to-all job over the
// first N hosts of the Stampede-size fat tree (trees cached after the
// first interval, as in the daemon).
func BenchmarkAllToAll(b *testing.B) {
	routes := generate(b, "stampede")
	for _, n := range []int{1000, 6541} {
		m := Matrix{LIDs: routes.CALIDs()[:n], Bytes: make([]uint64, n*n)}
		for i := range m.Bytes {
			m.Bytes[i] = 1 << 20
		}
		b.Run(fmtNodes(n)+"/first-interval", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				a := NewAttributor(routes)
				a.AttributeMatrix(m, make([]uint64, a.Directions()))
			}
		})
		b.Run(fmtNodes(n), func(b *testing.B) {
			a := NewAttributor(routes)
			load := make([]uint64, a.Directions())
			a.AttributeMatrix(m, load) // build the per-destination trees
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				a.AttributeMatrix(m, load)
			}
		})
	}
}

func fmtNodes(n int) string {
	return fmt.Sprintf("nodes=%d", n)
}

// matrixLoad attributes flows in the dense form (AttributeMatrix over the
// LIDs lids), for comparison with Attribute's answer.
func matrixLoad(t *testing.T, a *Attributor, lids []fabric.LID, flows []Flow) []uint64 {
	t.Helper()
	idx := map[fabric.LID]int{}
	for i, l := range lids {
		idx[l] = i
	}
	m := Matrix{LIDs: lids, Bytes: make([]uint64, len(lids)*len(lids))}
	for _, f := range flows {
		m.Bytes[idx[f.Dst]*len(lids)+idx[f.Src]] += f.Bytes
	}
	dense := make([]uint64, a.Directions())
	if errs := a.AttributeMatrix(m, dense); len(errs) > 0 {
		t.Fatal(errs)
	}
	return dense
}
