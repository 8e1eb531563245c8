// Command attribution measures what the daemon does every interval to put
// jobs on links, for one all-to-all job over N nodes of the simulated
// Stampede fabric (one rank per node): turning the ranks' cumulative
// per-node counters into the interval's node matrix (analysis.JobCounter),
// mapping node names to LIDs, attributing the matrix to every link
// direction on the forwarding-table paths, and listing the directions'
// samples for the store. It reports each step as a fraction of the
// interval, plus the store write (done by the writer goroutine, off the
// attribution path).
//
//	go run ./bench/attribution -nodes 1000,6541 -intervals 3
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/netloom/netloom/internal/analysis"
	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/fabric/sim"
	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/sqlite"
)

func main() {
	nodes := flag.String("nodes", "1000,6541", "comma-separated job sizes in nodes")
	intervals := flag.Int("intervals", 3, "steady-state intervals to time (after the first)")
	interval := flag.Duration("interval", 30*time.Second, "the interval the times are reported against")
	spec := flag.String("fabric", "stampede", "simulated fabric spec")
	noStore := flag.Bool("no-store", false, "skip the SQLite write")
	flag.Parse()
	if err := run(context.Background(), *spec, *nodes, *intervals, *interval, !*noStore); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, spec, sizes string, intervals int, interval time.Duration, withStore bool) error {
	sp, err := sim.ParseSpec(spec)
	if err != nil {
		return err
	}
	t0 := time.Now()
	topo, ft, err := sim.Generate(ctx, sp)
	if err != nil {
		return fmt.Errorf("generate %s: %w", spec, err)
	}
	routes := fabric.NewRoutes(topo, ft)
	c := topo.Counts()
	fmt.Printf("fabric sim:%s: %d switches, %d hosts, %d links (built in %s); %d CPUs; interval %s\n",
		spec, c.Switches, c.CAs, c.Links, time.Since(t0).Round(time.Millisecond), runtime.NumCPU(), interval)
	nm, err := analysis.NewNodeMap(topo, nil)
	if err != nil {
		return err
	}
	lid := func(name string) (fabric.LID, bool) {
		l, err := nm.LID(name)
		return l, err == nil
	}
	fmt.Printf("%-7s %-9s %12s %12s %12s %12s %12s %10s %12s\n", "nodes", "interval", "counters", "attribute", "samples", "total", "% interval", "dirs", "store write")
	for _, f := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 2 || n > c.CAs {
			return fmt.Errorf("-nodes %q: want 2..%d", f, c.CAs)
		}
		if err := measure(ctx, routes, lid, n, intervals, interval, withStore); err != nil {
			return err
		}
	}
	return nil
}

// allToAll is a job of n ranks, rank i on node n(i+1), every rank sending
// to every other node: the agents' cumulative counters (rows, packed into
// the job's processes by advance, as the daemon's tracker packs them).
func allToAll(n int) (*store.Job, [][]store.NodeTraffic) {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i+1)
	}
	j := &store.Job{JobSummary: store.JobSummary{ID: "bench", Ranks: n}, Processes: make([]store.Process, n)}
	rows := make([][]store.NodeTraffic, n)
	for i := range n {
		rows[i] = make([]store.NodeTraffic, 0, n-1)
		for k := range n {
			if k != i {
				rows[i] = append(rows[i], store.NodeTraffic{Node: names[k]})
			}
		}
		j.Processes[i] = store.Process{Rank: i, Node: names[i]}
	}
	return j, rows
}

// advance adds one interval's traffic: 1 MiB (+ a little per pair) to
// every destination.
func advance(j *store.Job, rows [][]store.NodeTraffic, table *store.NodeTable, k int) {
	for i := range j.Processes {
		for t := range rows[i] {
			rows[i][t].Coll.Bytes += 1<<20 + uint64((i+t+k)%7)
		}
		j.Processes[i].ToNodes = table.Pack(rows[i])
	}
}

func measure(ctx context.Context, routes *fabric.Routes, lid func(string) (fabric.LID, bool), n, intervals int, interval time.Duration, withStore bool) error {
	t0 := time.Now()
	job, rows := allToAll(n)
	var table store.NodeTable
	build := time.Since(t0)
	a := analysis.NewAttributor(routes)
	load := make([]uint64, a.Directions())
	counter := analysis.NewJobCounter()
	var scratch []uint64
	var st *sqlite.Store
	if withStore {
		dir, err := os.MkdirTemp("", "netloom-bench-attribution-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if st, err = sqlite.Open(ctx, filepath.Join(dir, "netloom.db"), sqlite.Options{}); err != nil {
			return err
		}
		defer st.Close()
	}
	at := time.Now()
	for k := 0; k <= intervals; k++ {
		advance(job, rows, &table, k)
		runtime.GC()
		t1 := time.Now()
		var iv analysis.Interval
		iv, scratch = counter.Next(job, lid, scratch)
		t2 := time.Now()
		clear(load)
		if errs := a.AttributeMatrix(iv.Matrix, load); len(errs) > 0 {
			return fmt.Errorf("attribute %d nodes: %v", n, errs[0])
		}
		t3 := time.Now()
		at = at.Add(interval)
		var samples []store.LinkJobSample
		for i, b := range load {
			if b > 0 {
				samples = append(samples, store.LinkJobSample{Time: at, Span: interval, Job: job.ID, Port: a.Direction(i), Bytes: b})
			}
		}
		t4 := time.Now()
		var write time.Duration
		if st != nil {
			if err := st.AddLinkJobSamples(ctx, samples); err != nil {
				return err
			}
			write = time.Since(t4)
		}
		if len(iv.Unmapped) > 0 {
			return fmt.Errorf("%d unmapped nodes, e.g. %s", len(iv.Unmapped), iv.Unmapped[0])
		}
		total := t4.Sub(t1)
		label := "steady"
		if k == 0 {
			label = "first"
		}
		fmt.Printf("%-7d %-9s %12s %12s %12s %12s %11.2f%% %10d %12s\n", n, label, t2.Sub(t1).Round(time.Millisecond), t3.Sub(t2).Round(time.Millisecond),
			t4.Sub(t3).Round(time.Microsecond), total.Round(time.Millisecond), 100*total.Seconds()/interval.Seconds(), len(samples), write.Round(time.Millisecond))
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("        (job of %d ranks x %d peers built in %s; heap in use %d MiB)\n", n, n-1, build.Round(time.Millisecond), ms.HeapInuse>>20)
	return nil
}
