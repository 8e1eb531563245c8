// Command place measures placement advice (internal/place) on the
// simulated Stampede fabric: the time to advise a job of N ranks, and the
// bytes x hops and heaviest-link load of the advice against round-robin,
// block and random placements, for a 3-D stencil (6 neighbours, periodic)
// and an all-to-all with hot pairs (every pair 4 KiB, and each rank 1 MiB
// to 3 random partners). The job's nodes are scattered over the fabric as
// a busy machine's allocation is: every 7th host from a random start.
//
//	go run ./bench/place -ranks 1024,4096
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/netloom/netloom/internal/analysis"
	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/fabric/sim"
	"github.com/netloom/netloom/internal/place"
)

func main() {
	ranks := flag.String("ranks", "1024,4096", "comma-separated job sizes in ranks")
	cores := flag.Int("cores-per-node", 16, "cores per node")
	spec := flag.String("fabric", "stampede", "simulated fabric spec")
	patterns := flag.String("patterns", "stencil,alltoall", "stencil, alltoall")
	flag.Parse()
	if err := run(*spec, *ranks, *patterns, *cores); err != nil {
		log.Fatal(err)
	}
}

func run(spec, ranks, patterns string, cores int) error {
	sp, err := sim.ParseSpec(spec)
	if err != nil {
		return err
	}
	topo, ft, err := sim.Generate(context.Background(), sp)
	if err != nil {
		return err
	}
	nm, err := analysis.NewNodeMap(topo, nil)
	if err != nil {
		return err
	}
	hosts := topo.Counts().CAs
	fmt.Printf("fabric %s: %d hosts, %d switches; %d cores per node; GOMAXPROCS %d\n", spec, hosts, topo.Counts().Switches, cores, runtime.GOMAXPROCS(0))
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "pattern\tranks\tnodes\tadvise s\tmethod\tbyte-hops adv/rr\tadv/block\tadv/random\theaviest adv/rr\tadv/block\tadv/random\tinter-node adv/rr\t")
	for _, rs := range strings.Split(ranks, ",") {
		R, err := strconv.Atoi(rs)
		if err != nil {
			return fmt.Errorf("-ranks %q: %w", rs, err)
		}
		n := (R + cores - 1) / cores
		rng := rand.New(rand.NewPCG(uint64(R), 7))
		start := rng.IntN(hosts)
		var nodes []place.Node
		for i := range n {
			nodes = append(nodes, place.Node{Name: fmt.Sprintf("n%d", 1+(start+7*i)%hosts), Cores: cores})
		}
		for _, pat := range strings.Split(patterns, ",") {
			var t place.Traffic
			switch pat {
			case "stencil":
				t = stencil(R)
			case "alltoall":
				t = allToAll(R, rng)
			default:
				return fmt.Errorf("-patterns: %q: want stencil or alltoall", pat)
			}
			// Build the fabric inside the timing: routes and attribution
			// are what a request pays for.
			begin := time.Now()
			fab := place.NewFabric(fabric.NewRoutes(topo, ft), nm)
			a, err := place.Advise(fab, place.Request{Traffic: t, Nodes: nodes, Seed: 1})
			if err != nil {
				return fmt.Errorf("%s, %d ranks: %w", pat, R, err)
			}
			secs := time.Since(begin).Seconds()
			ratio := func(x, y uint64) string { return fmt.Sprintf("%.3f", float64(x)/float64(max(y, 1))) }
			hl := func(c *place.Cost) uint64 {
				if c.HeaviestLink == nil {
					return 0
				}
				return c.HeaviestLink.Bytes
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", pat, R, n, secs, a.Method,
				ratio(a.Advice.ByteHops, a.RoundRobin.ByteHops), ratio(a.Advice.ByteHops, a.Block.ByteHops), ratio(a.Advice.ByteHops, a.Random.ByteHops),
				ratio(hl(a.Advice), hl(a.RoundRobin)), ratio(hl(a.Advice), hl(a.Block)), ratio(hl(a.Advice), hl(a.Random)),
				ratio(a.Advice.InterNodeBytes, a.RoundRobin.InterNodeBytes))

		}
	}
	return tw.Flush()
}

// stencil is a periodic 3-D halo exchange, 1 MiB to each of 6 neighbours,
// on the most cubic grid of R ranks.
func stencil(R int) place.Traffic {
	x, y, z := dims(R)
	t := place.Traffic{Ranks: R}
	id := func(i, j, k int) int { return ((i+x)%x*y+(j+y)%y)*z + (k+z)%z }
	for i := range x {
		for j := range y {
			for k := range z {
				r := id(i, j, k)
				for _, d := range [][3]int{{1, 0, 0}, {-1, 0, 0}, {0, 1, 0}, {0, -1, 0}, {0, 0, 1}, {0, 0, -1}} {
					t.Add(r, id(i+d[0], j+d[1], k+d[2]), 1<<20)
				}
			}
		}
	}
	return t
}

func dims(R int) (int, int, int) {
	best := [3]int{R, 1, 1}
	for a := 1; a*a*a <= R; a++ {
		if R%a != 0 {
			continue
		}
		for b := a; a*b*b <= R; b++ {
			if (R/a)%b == 0 {
				c := R / a / b
				if c-a < best[0]-best[2] || best[2] == 1 {
					best = [3]int{c, b, a}
				}
			}
		}
	}
	return best[0], best[1], best[2]
}

// allToAll: every pair 4 KiB, and each rank 1 MiB to 3 random partners
// (both ways).
func allToAll(R int, rng *rand.Rand) place.Traffic {
	t := place.Traffic{Ranks: R}
	hot := map[[2]int]uint64{}
	for r := range R {
		for range 3 {
			p := rng.IntN(R)
			hot[[2]int{r, p}] += 1 << 20
			hot[[2]int{p, r}] += 1 << 20
		}
	}
	for s := range R {
		for d := range R {
			t.Add(s, d, 4096+hot[[2]int{s, d}])
		}
	}
	return t
}
