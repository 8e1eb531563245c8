// Command storage measures the SQLite store on a Stampede-sized fabric:
// bytes on disk per port sample, insert time per sweep and query
// latencies. It builds its own two-level fabric and synthetic traffic.
//
//	go run ./bench/storage -sweeps 2880
//	go run ./bench/storage -retention -sweeps 2880 -processes 104656
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/sqlite"
)

type config struct {
	sweeps   int
	interval time.Duration
	switches int
	ports    int
	hosts    int
	links    int
	seed     uint64
	dir      string
	keep     bool
	load     float64
	caPorts  bool

	retention    bool
	stallEvery   time.Duration
	processes    int
	processHours float64

	rollupPortRows, rollupProcessRows int
	linkIntervals                     int
}

func main() {
	var c config
	flag.IntVar(&c.sweeps, "sweeps", 360, "sweeps to write (2880 = one day at 30 s)")
	flag.DurationVar(&c.interval, "interval", 30*time.Second, "sweep interval")
	flag.IntVar(&c.switches, "switches", 764, "switches")
	flag.IntVar(&c.ports, "ports", 36, "ports per switch")
	flag.IntVar(&c.hosts, "hosts", 6541, "hosts (one HCA port each)")
	flag.IntVar(&c.links, "links", 16893, "links in all")
	flag.Uint64Var(&c.seed, "seed", 1, "random seed")
	flag.StringVar(&c.dir, "dir", "", "directory for the database (default: a temporary one)")
	flag.BoolVar(&c.keep, "keep", false, "keep the database afterwards")
	flag.Float64Var(&c.load, "load", 1, "multiply every port's median rate (30 MB/s host ports, 80 MB/s uplinks)")
	flag.BoolVar(&c.caPorts, "ca-ports", false, "also write the host adapter ports' samples, as netloom serve --sweep-ca-ports sweeps them")
	flag.BoolVar(&c.retention, "retention", false, "measure bytes per day raw and rolled up, rollup time and the writer stall it causes (see retention.go)")
	flag.DurationVar(&c.stallEvery, "stall-every", 500*time.Millisecond, "with -retention: queue a sweep this often while rolling up")
	flag.IntVar(&c.processes, "processes", 0, "with -retention: also write and roll up samples of this many MPI processes (104656 = Stampede)")
	flag.Float64Var(&c.processHours, "process-hours", 1, "with -retention -processes: hours of process samples (every 45 s)")
	flag.IntVar(&c.rollupPortRows, "rollup-port-rows", 0, "with -retention: sqlite.Options.RollupPortRows (0: the default)")
	flag.IntVar(&c.rollupProcessRows, "rollup-process-rows", 0, "with -retention: sqlite.Options.RollupProcessRows (0: the default)")
	flag.IntVar(&c.linkIntervals, "link-intervals", 0, "with -retention: also write this many intervals of link attribution (33,495 directions each) and report bytes per row")
	flag.Parse()
	run := run
	if c.retention {
		run = runRetention
	}
	if err := run(context.Background(), c); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, c config) error {
	dir := c.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "netloom-bench-storage-")
		if err != nil {
			return err
		}
		dir = d
	}
	path := filepath.Join(dir, "bench.db")
	if !c.keep {
		defer os.RemoveAll(dir)
	}
	rng := rand.New(rand.NewPCG(c.seed, 0x5eed))
	topo, err := buildTopology(c, rng)
	if err != nil {
		return fmt.Errorf("build topology: %w", err)
	}
	cnt := topo.Counts()
	ports := topo.SwitchPorts(c.caPorts)
	fmt.Printf("fabric: %d switches, %d CAs, %d switch ports (%d linked ports sampled, CA ports %v), %d links\n",
		cnt.Switches, cnt.CAs, cnt.SwitchPorts, len(ports), c.caPorts, cnt.Links)

	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		return err
	}
	start := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)

	t0 := time.Now()
	if _, _, err := s.SaveTopology(ctx, topo, start); err != nil {
		return err
	}
	saveTopo := time.Since(t0)
	t0 = time.Now()
	if _, changed, err := s.SaveTopology(ctx, topo, start.Add(time.Minute)); err != nil || changed {
		return fmt.Errorf("save unchanged topology: changed %v, %v", changed, err)
	}
	saveSame := time.Since(t0)
	t0 = time.Now()
	if _, _, err := s.TopologyAt(ctx, start.Add(time.Hour)); err != nil {
		return err
	}
	loadTopo := time.Since(t0)
	fmt.Printf("topology: save %v, save unchanged %v, load %v\n", ms(saveTopo), ms(saveSame), ms(loadTopo))

	gen := newTraffic(topo, ports, rng, c.interval, c.load)
	var inserts []time.Duration
	var last time.Time
	samples := 0
	at := start
	for i := 0; i < c.sweeps; i++ {
		at = at.Add(c.interval + time.Duration(rng.IntN(100e6)-50e6))
		sw := gen.sweep(at)
		t0 := time.Now()
		if err := s.AddPortSamples(ctx, sw); err != nil {
			return fmt.Errorf("sweep %d: %w", i, err)
		}
		inserts = append(inserts, time.Since(t0))
		samples += len(sw)
		last = at
		if (i+1)%500 == 0 {
			fmt.Fprintf(os.Stderr, "  %d sweeps written\n", i+1)
		}
	}
	st, err := s.Stats(ctx)
	if err != nil {
		return err
	}
	if err := s.Close(); err != nil {
		return err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	sort.Slice(inserts, func(i, j int) bool { return inserts[i] < inserts[j] })
	var sum time.Duration
	for _, d := range inserts {
		sum += d
	}
	fmt.Printf("wrote %d sweeps, %d port samples (%d per sweep)\n", c.sweeps, samples, samples/c.sweeps)
	fmt.Printf("insert per sweep: mean %v, p50 %v, p99 %v, max %v\n",
		ms(sum/time.Duration(len(inserts))), ms(inserts[len(inserts)/2]), ms(inserts[len(inserts)*99/100]), ms(inserts[len(inserts)-1]))
	fmt.Printf("disk: %d bytes after close (db file), %d while open (db+wal)\n", fi.Size(), st.Bytes)
	fmt.Printf("BYTES PER PORT SAMPLE: %.2f (db file / samples; raw 21 counters + time = 176)\n", float64(fi.Size())/float64(samples))

	s, err = sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	// A few ports over the whole range.
	pick := []fabric.PortRef{ports[rng.IntN(len(ports))], ports[rng.IntN(len(ports))], ports[rng.IntN(len(ports))], ports[rng.IntN(len(ports))]}
	q := timeIt(5, func() error {
		got, err := s.PortSamples(ctx, pick, start, last)
		if err == nil && len(got[pick[0]]) != c.sweeps {
			err = fmt.Errorf("PortSamples: %d samples of %s, want %d", len(got[pick[0]]), pick[0], c.sweeps)
		}
		return err
	})
	if q.err != nil {
		return q.err
	}
	fmt.Printf("PortSamples, 4 ports x %d sweeps: median %v, max %v\n", c.sweeps, ms(q.median), ms(q.max))
	q = timeIt(5, func() error {
		got, err := s.LatestSamples(ctx, last, 2*c.interval)
		if err == nil && len(got) != len(ports) {
			err = fmt.Errorf("LatestSamples: %d samples, want %d", len(got), len(ports))
		}
		return err
	})
	if q.err != nil {
		return q.err
	}
	fmt.Printf("LatestSamples, all %d ports, window 2 sweeps: median %v, max %v\n", len(ports), ms(q.median), ms(q.max))
	mid := start.Add(time.Duration(c.sweeps/2) * c.interval)
	q = timeIt(5, func() error {
		_, err := s.LatestSamples(ctx, mid, 2*c.interval)
		return err
	})
	fmt.Printf("LatestSamples in the past (middle of the range): median %v\n", ms(q.median))

	// Prune the older half while the writer keeps adding sweeps: the
	// writer's worst insert time shows how long prune holds the lock.
	done := make(chan error, 1)
	pruneStart := time.Now()
	// Rollups that keep nothing: this measures deletion alone (-retention
	// measures rolling up).
	gone := last.Add(time.Hour)
	go func() { done <- s.Prune(ctx, store.Retention{Samples: mid, PortRollups5m: gone, PortRollups1h: gone}) }()
	var during []time.Duration
	var pruneErr error
	for running := true; running; {
		select {
		case pruneErr = <-done:
			running = false
		default:
			at = at.Add(c.interval)
			sw := gen.sweep(at)
			t0 := time.Now()
			if err := s.AddPortSamples(ctx, sw); err != nil {
				return err
			}
			during = append(during, time.Since(t0))
		}
	}
	if pruneErr != nil {
		return pruneErr
	}
	pruneTook := time.Since(pruneStart)
	var worst time.Duration
	for _, d := range during {
		worst = max(worst, d)
	}
	st2, err := s.Stats(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("Prune of the older half: %v; %d sweeps inserted meanwhile, worst insert %v; samples %d -> %d, bytes %d -> %d\n",
		ms(pruneTook), len(during), ms(worst), st.PortSamples, st2.PortSamples, st.Bytes, st2.Bytes)
	if c.keep {
		fmt.Println("database kept at", path)
	}
	return nil
}

type timing struct {
	median, max time.Duration
	err         error
}

func timeIt(n int, fn func() error) timing {
	var ds []time.Duration
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if err := fn(); err != nil {
			return timing{err: err}
		}
		ds = append(ds, time.Since(t0))
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return timing{median: ds[n/2], max: ds[n-1]}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/1e6) }

// buildTopology makes a two-level fabric: leaf switches with up to half
// their ports to hosts and the rest up to spines, spines joined to each
// other until the link count is reached.
func buildTopology(c config, rng *rand.Rand) (*fabric.Topology, error) {
	half := c.ports / 2
	leaves := (c.hosts + half - 1) / half
	if leaves >= c.switches {
		return nil, fmt.Errorf("%d hosts need %d leaf switches, have %d", c.hosts, leaves, c.switches)
	}
	var nodes []fabric.Node
	var links []fabric.Link
	swGUID := func(i int) fabric.GUID { return fabric.GUID(0x0002c90300000000 + uint64(i)*0x100) }
	for i := 0; i < c.switches; i++ {
		nodes = append(nodes, fabric.Node{GUID: swGUID(i), Type: fabric.Switch, LID: fabric.LID(1 + i), Ports: c.ports,
			Description: fmt.Sprintf("MF0;sw-%03d:SX6036/U1", i)})
	}
	free := make([][]int, c.switches) // free ports per switch
	for i := range free {
		for p := 1; p <= c.ports; p++ {
			free[i] = append(free[i], p)
		}
	}
	take := func(sw int) int {
		p := free[sw][0]
		free[sw] = free[sw][1:]
		return p
	}
	for h := 0; h < c.hosts; h++ {
		g := fabric.GUID(0x0002c90300f00000 + uint64(h)*2)
		lid := fabric.LID(c.switches + 1 + h)
		nodes = append(nodes, fabric.Node{GUID: g, Type: fabric.CA, LID: lid, Ports: 1, Description: fmt.Sprintf("c%03d-%03d HCA-1", h/64, h%64),
			PortLIDs: []fabric.LID{0, lid}, PortGUIDs: []fabric.GUID{0, g + 1}})
		links = append(links, fabric.NewLink(fabric.PortRef{GUID: swGUID(h / half), Port: take(h / half)}, fabric.PortRef{GUID: g, Port: 1}, "4X", "FDR", "Active"))
	}
	spines := c.switches - leaves
	next := 0
	for l := 0; l < leaves && len(links) < c.links; l++ {
		for k := 0; k < half && len(links) < c.links; k++ {
			for tries := 0; tries < spines && len(free[leaves+next]) == 0; tries++ {
				next = (next + 1) % spines
			}
			sp := leaves + next
			if len(free[sp]) == 0 {
				break
			}
			links = append(links, fabric.NewLink(fabric.PortRef{GUID: swGUID(l), Port: take(l)}, fabric.PortRef{GUID: swGUID(sp), Port: take(sp)}, "4X", "FDR", "Active"))
			next = (next + 1) % spines
		}
	}
	for tries := 0; len(links) < c.links && tries < 100*c.links; tries++ {
		a, b := leaves+rng.IntN(spines), leaves+rng.IntN(spines)
		if a == b || len(free[a]) == 0 || len(free[b]) == 0 {
			continue
		}
		links = append(links, fabric.NewLink(fabric.PortRef{GUID: swGUID(a), Port: take(a)}, fabric.PortRef{GUID: swGUID(b), Port: take(b)}, "4X", "FDR", "Active"))
	}
	return fabric.NewTopology(nodes, links)
}

// portState is one direction pair of a port's traffic process.
type portState struct {
	ref            fabric.PortRef
	mu, xLog, rLog float64 // log bytes/s: mean and current, xmit and rcv
	pkt            float64 // mean bytes per packet
	busy           bool
	badCable       bool
	capacity       float64
}

type traffic struct {
	ports    []portState
	rng      *rand.Rand
	interval time.Duration
}

// newTraffic gives every linked switch port a log-normal mean rate
// (host ports lower and more spread than uplinks), a packet size between
// 256 B and 4 KiB and, for a few, a bad cable that throws symbol errors.
func newTraffic(t *fabric.Topology, ports []fabric.PortRef, rng *rand.Rand, interval time.Duration, load float64) *traffic {
	tr := &traffic{rng: rng, interval: interval}
	for _, p := range ports {
		peer, _ := t.Peer(p)
		n, _ := t.Node(peer.GUID)
		self, _ := t.Node(p.GUID)
		l, _ := t.LinkAt(p)
		median, sigma := 80e6, 1.5
		if n.Type == fabric.CA || self.Type == fabric.CA {
			median, sigma = 30e6, 2.0
		}
		mu := math.Log(median*load) + sigma*rng.NormFloat64()
		tr.ports = append(tr.ports, portState{
			ref: p, mu: mu, xLog: mu, rLog: mu + 0.3*rng.NormFloat64(),
			pkt:      math.Exp(math.Log(256) + rng.Float64()*math.Log(4200.0/256)),
			busy:     rng.Float64() < 0.85,
			badCable: rng.Float64() < 0.003,
			capacity: l.Capacity(),
		})
	}
	return tr
}

func (tr *traffic) sweep(at time.Time) []fabric.PortSample {
	rng := tr.rng
	span := tr.interval + time.Duration(rng.IntN(2e6)-1e6)
	sec := span.Seconds()
	out := make([]fabric.PortSample, 0, len(tr.ports))
	for i := range tr.ports {
		ps := &tr.ports[i]
		// Jobs start and end: about every two hours a port's load changes.
		if rng.Float64() < 1.0/240 {
			ps.busy = !ps.busy
			if ps.busy {
				ps.mu += rng.NormFloat64()
			}
		}
		// Rates drift slowly around their mean (AR(1) in log space).
		ps.xLog += 0.05*(ps.mu-ps.xLog) + 0.15*rng.NormFloat64()
		ps.rLog += 0.05*(ps.mu-ps.rLog) + 0.15*rng.NormFloat64()
		s := fabric.PortSample{Port: ps.ref, Time: at, Span: span}
		d := &s.Delta
		var xb, rb float64
		if ps.busy {
			xb = math.Min(math.Exp(ps.xLog), 0.95*ps.capacity) * sec
			rb = math.Min(math.Exp(ps.rLog), 0.95*ps.capacity) * sec
		} else {
			// Management traffic only: SM/SA and IPoIB chatter.
			xb = float64(rng.IntN(40)) * 256
			rb = float64(rng.IntN(40)) * 256
		}
		d[fabric.XmitData] = uint64(xb) &^ 3
		d[fabric.RcvData] = uint64(rb) &^ 3
		pkt := ps.pkt * (0.9 + 0.2*rng.Float64())
		d[fabric.XmitPkts] = uint64(xb/pkt) + 1
		d[fabric.RcvPkts] = uint64(rb/pkt) + 1
		d[fabric.MulticastXmitPkts] = uint64(rng.IntN(4))
		d[fabric.MulticastRcvPkts] = uint64(rng.IntN(4))
		d[fabric.XmitPkts] += d[fabric.MulticastXmitPkts]
		d[fabric.RcvPkts] += d[fabric.MulticastRcvPkts]
		d[fabric.UnicastXmitPkts] = d[fabric.XmitPkts] - d[fabric.MulticastXmitPkts]
		d[fabric.UnicastRcvPkts] = d[fabric.RcvPkts] - d[fabric.MulticastRcvPkts]
		// Congestion: wait ticks grow with utilization.
		if u := xb / sec / ps.capacity; u > 0.2 {
			d[fabric.XmitWait] = uint64(u * u * sec * 2e5 * (0.5 + rng.Float64()))
			if rng.Float64() < 0.05 {
				d[fabric.XmitDiscards] = uint64(rng.IntN(20))
			}
		} else if rng.Float64() < 0.05 {
			d[fabric.XmitWait] = uint64(rng.IntN(2000))
		}
		if ps.badCable && rng.Float64() < 0.3 {
			d[fabric.SymbolErrors] = uint64(1 + rng.IntN(50))
			if rng.Float64() < 0.1 {
				d[fabric.LinkRecovers]++
				d[fabric.LinkIntegrityErrors] = uint64(rng.IntN(3))
			}
		}
		if rng.Float64() < 1e-4 {
			d[fabric.FirstError+fabric.Counter(rng.IntN(int(fabric.NumCounters-fabric.FirstError)))] += uint64(1 + rng.IntN(3))
		}
		if rng.Float64() < 1e-6 {
			s.Reset = true
		}
		out = append(out, s)
	}
	return out
}
