package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/netloom/netloom/internal/daemon"
	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/sqlite"
)

// runRetention measures what a site must provision under the default
// retention, and what rolling up costs:
//
//  1. one period of Stampede-size sweeps (c.sweeps, a day at 2880) is
//     written raw: bytes per day of raw port samples;
//  2. a copy of it is rolled up into 5-minute rollups, alone (time per
//     day of data, longest step), then into 1-hour rollups: bytes per day
//     of each;
//  3. the other copy is rolled up the way the daemon does it, one step
//     at a time through a single writer queue, while a sweep is queued
//     every c.stallEvery: how long a sweep waits for the writer (the
//     stall), compared with 60 sweeps queued the same way right after;
//  4. with c.processes > 0, c.processHours hours of per-interval process
//     samples (every rank every 45 s, the paper's rate) are written and
//     rolled up the same way, and scaled to 104,656 processes and a day.
func runRetention(ctx context.Context, c config) error {
	if c.dir != "" {
		if err := os.MkdirAll(c.dir, 0o755); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp(c.dir, "netloom-bench-retention-")
	if err != nil {
		return err
	}
	if !c.keep {
		defer os.RemoveAll(dir)
	}
	rng := rand.New(rand.NewPCG(c.seed, 0x5eed))
	var pt *portResult
	if c.sweeps > 0 {
		if pt, err = runPorts(ctx, c, dir, rng); err != nil {
			return err
		}
	}
	var pr *procResult
	if c.processes > 0 {
		if pr, err = runProcesses(ctx, c, dir, rng); err != nil {
			return err
		}
	}

	var linkBytes float64
	if c.linkIntervals > 0 {
		if linkBytes, err = runLinks(ctx, c, dir, rng); err != nil {
			return err
		}
	}

	def := daemon.Config{}.WithDefaults().Retention
	days := func(d time.Duration) float64 { return d.Hours() / 24 }
	fmt.Println()
	fmt.Println("RESULT (1x Stampede size, per day of data)")
	var total float64
	if pt != nil {
		fmt.Printf("  port samples raw:         %8.1f MB/day (%.2f bytes per port sample)\n", pt.raw/1e6, pt.rawPerSample)
		fmt.Printf("  port 5-minute rollups:    %8.1f MB/day (%.1f bytes per rollup point)\n", pt.rollup5m/1e6, pt.perPoint5m)
		fmt.Printf("  port 1-hour rollups:      %8.1f MB/day\n", pt.rollup1h/1e6)
		t := pt.raw*days(def.Samples) + pt.rollup5m*days(def.Samples5m) + pt.rollup1h*days(def.Samples1h)
		fmt.Printf("  ports at the default retention (raw %v, 5m %v, 1h %v): %.1f GB\n", def.Samples, def.Samples5m, def.Samples1h, t/1e9)
		fmt.Printf("  rolling up a day of port samples alone: %v (%d steps: p50 %v, p99 %v, longest %v)\n", pt.foldDay.Round(time.Second),
			pt.fold.steps, ms(pt.fold.pct(50)), ms(pt.fold.pct(99)), ms(pt.fold.longest))
		st := pt.stall
		fmt.Printf("  rolling up through one writer with a sweep queued every %v: steps p50 %v, p99 %v, longest %v; a sweep's wait for the writer: p50 %v p99 %v max %v (%d sweeps); right after it, without a rollup: p50 %v p99 %v max %v\n",
			c.stallEvery, ms(st.steps.pct(50)), ms(st.steps.pct(99)), ms(st.steps.longest), ms(st.during.p50), ms(st.during.p99), ms(st.during.max), st.during.n,
			ms(st.before.p50), ms(st.before.p99), ms(st.before.max))
		total += t
	}
	if pr != nil {
		scale := 24 / pr.hours * (104656 / float64(pr.processes))
		// Hourly rollups: one row per rank and started hour.
		scale1h := 24 / math.Ceil(pr.hours) * (104656 / float64(pr.processes))
		fmt.Printf("  process samples raw:      %8.1f MB/day (%.1f bytes per sample)\n", pr.raw*scale/1e6, pr.raw/float64(pr.samples))
		fmt.Printf("  process 5-minute rollups: %8.1f MB/day\n", pr.rollup5m*scale/1e6)
		fmt.Printf("  process 1-hour rollups:   %8.1f MB/day\n", pr.rollup1h*scale1h/1e6)
		t := scale*(pr.raw*days(def.ProcessSamples)+pr.rollup5m*days(def.ProcessSamples5m)) + scale1h*pr.rollup1h*days(def.ProcessSamples1h)
		fmt.Printf("  processes at the default retention (raw %v, 5m %v, 1h %v): %.1f GB\n", def.ProcessSamples, def.ProcessSamples5m, def.ProcessSamples1h, t/1e9)
		fmt.Printf("  rolling up a day of process samples alone: %v (steps p50 %v, p99 %v, longest %v)\n", time.Duration(float64(pr.fold.total)*scale).Round(time.Second),
			ms(pr.fold.pct(50)), ms(pr.fold.pct(99)), ms(pr.fold.longest))
		total += t
	}
	if linkBytes > 0 {
		perDay := linkBytes * float64(linkDirections) * float64(24*time.Hour/c.interval)
		fmt.Printf("  link attribution: %.1f bytes per (direction, job, interval); %.1f MB/day for every %d directions with traffic in an interval (a 6,541-node all-to-all); %.1f GB at the default retention (%v)\n",
			linkBytes, perDay/1e6, linkDirections, perDay*days(def.LinkJobSamples)/1e9, def.LinkJobSamples)
	}
	if pt != nil && pr != nil {
		fmt.Printf("  ports + processes at the default retention: %.1f GB\n", total/1e9)
	}
	return nil
}

// portResult is what the port part measured, per day of data.
type portResult struct {
	raw, rollup5m, rollup1h  float64 // bytes per day
	rawPerSample, perPoint5m float64
	fold                     stepStats
	foldDay                  time.Duration
	stall                    stallResult
}

func runPorts(ctx context.Context, c config, dir string, rng *rand.Rand) (*portResult, error) {
	topo, err := buildTopology(c, rng)
	if err != nil {
		return nil, fmt.Errorf("build topology: %w", err)
	}
	ports := topo.SwitchPorts(false)
	fmt.Printf("fabric: %d switches, %d switch ports sampled; %d sweeps every %v (%v of data)\n",
		topo.Counts().Switches, len(ports), c.sweeps, c.interval, time.Duration(c.sweeps)*c.interval)
	period := time.Duration(c.sweeps) * c.interval
	perDay := float64(24*time.Hour) / float64(period)

	// 1. Raw.
	path := filepath.Join(dir, "ports.db")
	start := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	s, base, err := c.openEmpty(ctx, path, func(s *sqlite.Store) error {
		_, _, err := s.SaveTopology(ctx, topo, start)
		return err
	})
	if err != nil {
		return nil, err
	}
	gen := newTraffic(topo, ports, rng, c.interval, c.load)
	t0 := time.Now()
	var samples int64
	for i := 0; i < c.sweeps; i++ {
		// Sweeps end on the interval (the scheduler's clock), as the
		// daemon's ticker makes them.
		at := start.Add(time.Duration(i+1) * c.interval)
		sw := gen.sweep(at)
		if err := s.AddPortSamples(ctx, sw); err != nil {
			return nil, fmt.Errorf("sweep %d: %w", i, err)
		}
		samples += int64(len(sw))
		if (i+1)%500 == 0 {
			fmt.Fprintf(os.Stderr, "  %d sweeps written\n", i+1)
		}
	}
	writeTook := time.Since(t0)
	end := start.Add(period + c.interval) // after every sample written
	if err := s.Close(); err != nil {
		return nil, err
	}
	rawSize, err := fileSize(path)
	if err != nil {
		return nil, err
	}
	raw := float64(rawSize - base)
	fmt.Printf("raw: %d port samples in %v; %.2f bytes per sample; %.0f MB per day\n", samples, writeTook.Round(time.Second), raw/float64(samples), raw*perDay/1e6)

	stallPath := filepath.Join(dir, "ports-stall.db")
	if err := copyFile(path, stallPath); err != nil {
		return nil, err
	}

	// 2. Rollups alone.
	fold := func(what string, r store.Retention) (stepStats, int64, error) {
		s, err := sqlite.Open(ctx, path, c.storeOptions())
		if err != nil {
			return stepStats{}, 0, err
		}
		st, err := pruneSteps(ctx, s, r)
		if err != nil {
			s.Close()
			return st, 0, fmt.Errorf("%s: %w", what, err)
		}
		stats, err := s.Stats(ctx)
		if err != nil {
			s.Close()
			return st, 0, err
		}
		if err := s.Close(); err != nil {
			return st, 0, err
		}
		size, err := fileSize(path)
		fmt.Printf("%s: %v, %d steps (p50 %v, p99 %v, longest %v); %d rollup points, %d raw samples left; file %d bytes\n", what,
			st.total.Round(time.Millisecond), st.steps, ms(st.pct(50)), ms(st.pct(99)), ms(st.longest), stats.PortRollups, stats.PortSamples, size)
		return st, size, err
	}
	r5, size5m, err := fold("roll up into 5-minute rollups", store.Retention{Samples: end})
	if err != nil {
		return nil, err
	}
	rollup5m := float64(size5m - base)
	_, size1h, err := fold("roll 5-minute rollups into 1-hour rollups", store.Retention{Samples: end, PortRollups5m: end.Add(time.Hour)})
	if err != nil {
		return nil, err
	}
	rollup1h := float64(size1h - base)

	// 3. Rollup under load, through one writer, as in the daemon.
	stall, err := stallRun(ctx, c, stallPath, gen, end, store.Retention{Samples: end})
	if err != nil {
		return nil, err
	}

	return &portResult{
		raw: raw * perDay, rollup5m: rollup5m * perDay, rollup1h: rollup1h * perDay,
		rawPerSample: raw / float64(samples),
		perPoint5m:   rollup5m / float64(len(ports)) / (float64(period) / float64(store.Rollup5m)),
		fold:         r5,
		foldDay:      time.Duration(float64(r5.total) * perDay),
		stall:        stall,
	}, nil
}

type stepStats struct {
	steps   int
	total   time.Duration
	longest time.Duration
	times   []time.Duration
}

func (s *stepStats) add(d time.Duration) {
	s.steps++
	s.longest = max(s.longest, d)
	s.times = append(s.times, d)
}

// pct is the p-th percentile of the step times.
func (s *stepStats) pct(p int) time.Duration {
	if len(s.times) == 0 {
		return 0
	}
	t := append([]time.Duration(nil), s.times...)
	sort.Slice(t, func(i, j int) bool { return t[i] < t[j] })
	return t[min(len(t)-1, len(t)*p/100)]
}

// pruneSteps runs PruneStep until done, timing each step.
func pruneSteps(ctx context.Context, s store.Store, r store.Retention) (stepStats, error) {
	var st stepStats
	t0 := time.Now()
	for {
		s0 := time.Now()
		more, err := s.PruneStep(ctx, r)
		if err != nil {
			return st, err
		}
		st.add(time.Since(s0))
		if !more {
			break
		}
		if st.steps%2000 == 0 {
			fmt.Fprintf(os.Stderr, "  %d steps\n", st.steps)
		}
	}
	st.total = time.Since(t0)
	return st, nil
}

type latencies struct {
	n             int
	p50, p99, max time.Duration
	samples       []time.Duration
}

func (l *latencies) add(d time.Duration) { l.samples = append(l.samples, d) }

func (l *latencies) summarise() {
	s := append([]time.Duration(nil), l.samples...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	l.n = len(s)
	if l.n == 0 {
		return
	}
	l.p50, l.p99, l.max = s[l.n/2], s[min(l.n-1, l.n*99/100)], s[l.n-1]
}

type stallResult struct {
	before, during latencies // before: without a rollup, measured after it
	steps          stepStats
}

// stallRun emulates the daemon's writer: one goroutine applies queued
// operations in order; the pruner queues one PruneStep and waits for it
// before queuing the next; a sweep is queued every c.stallEvery. A
// sweep's latency is from queuing to committed.
func stallRun(ctx context.Context, c config, path string, gen *traffic, after time.Time, r store.Retention) (stallResult, error) {
	var res stallResult
	s, err := sqlite.Open(ctx, path, c.storeOptions())
	if err != nil {
		return res, err
	}
	defer s.Close()
	ops := make(chan func(), 256)
	writerDone := make(chan struct{})
	go func() {
		for op := range ops {
			op()
		}
		close(writerDone)
	}()
	defer func() { close(ops); <-writerDone }()
	at := after
	var sweepErr error
	sweep := func(l *latencies) {
		at = at.Add(c.interval)
		sw := gen.sweep(at)
		queued := time.Now()
		done := make(chan struct{})
		ops <- func() {
			if err := s.AddPortSamples(ctx, sw); err != nil && sweepErr == nil {
				sweepErr = err
			}
			l.add(time.Since(queued))
			close(done)
		}
		<-done
	}
	// With a rollup running.
	prunerDone := make(chan error, 1)
	t0 := time.Now()
	go func() {
		for {
			var more bool
			var err error
			done := make(chan struct{})
			ops <- func() {
				s0 := time.Now()
				more, err = s.PruneStep(ctx, r)
				res.steps.add(time.Since(s0))
				close(done)
			}
			<-done
			if err != nil || !more {
				prunerDone <- err
				return
			}
		}
	}()
	tick := time.NewTicker(c.stallEvery)
	defer tick.Stop()
	for running := true; running; {
		select {
		case err := <-prunerDone:
			if err != nil {
				return res, err
			}
			running = false
		case <-tick.C:
			sweep(&res.during)
		}
	}
	res.steps.total = time.Since(t0)
	// Without one, right after: the same file, the same cadence.
	for i := 0; i < 60; i++ {
		time.Sleep(c.stallEvery)
		sweep(&res.before)
	}
	if sweepErr != nil {
		return res, sweepErr
	}
	res.before.summarise()
	res.during.summarise()
	fmt.Printf("rollup under load (a sweep queued every %v): %v, %d steps (p50 %v, p99 %v, longest %v); sweep latency after it (no rollup) p50 %v p99 %v max %v, during p50 %v p99 %v max %v over %d sweeps\n",
		c.stallEvery, res.steps.total.Round(time.Millisecond), res.steps.steps, ms(res.steps.pct(50)), ms(res.steps.pct(99)), ms(res.steps.longest),
		ms(res.before.p50), ms(res.before.p99), ms(res.before.max), ms(res.during.p50), ms(res.during.p99), ms(res.during.max), res.during.n)
	return res, nil
}

type procResult struct {
	processes               int
	hours                   float64
	samples                 int64
	raw, rollup5m, rollup1h float64
	fold                    stepStats
}

// simJob is a job of the process load: loadgen's shapes (a power of two
// of nodes up to 1,024, 16 ranks a node, mostly halo exchanges).
type simJob struct {
	id      string
	ranks   int
	pattern int // 0 halo, 1 all-to-all, 2 reduce, 3 idle
	rss     []uint64
}

func runProcesses(ctx context.Context, c config, dir string, rng *rand.Rand) (*procResult, error) {
	var jobs []simJob
	for n, id := 0, 4000000; n < c.processes; id++ {
		nodes := 1 << rng.IntN(11)
		ranks := min(nodes*16, c.processes-n)
		j := simJob{id: fmt.Sprint(id), ranks: ranks, pattern: []int{0, 0, 1, 2, 0, 2, 0, 1, 0, 3}[id%10], rss: make([]uint64, ranks)}
		for r := range j.rss {
			j.rss[r] = uint64(1<<30+rng.IntN(2<<30)) &^ 4095
		}
		jobs = append(jobs, j)
		n += ranks
	}
	path := filepath.Join(dir, "processes.db")
	s, base, err := c.openEmpty(ctx, path, nil)
	if err != nil {
		return nil, err
	}
	const iv = 45 * time.Second
	start := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	intervals := int(math.Round(c.processHours * float64(time.Hour) / float64(iv)))
	res := &procResult{processes: c.processes, hours: float64(time.Duration(intervals)*iv) / float64(time.Hour)}
	// Ranks report spread evenly over the interval; the daemon writes
	// what arrived in about a second in one batch.
	batch := max(c.processes*int(time.Second)/int(iv), 1)
	buf := make([]store.ProcessSample, 0, batch)
	t0 := time.Now()
	for k := 0; k < intervals; k++ {
		g := 0
		for ji := range jobs {
			j := &jobs[ji]
			for r := 0; r < j.ranks; r++ {
				at := start.Add(time.Duration(k)*iv + time.Duration(int64(g)*int64(iv)/int64(c.processes)))
				buf = append(buf, processSample(j, r, at, iv, rng))
				g++
				if len(buf) == batch {
					if err := s.AddProcessSamples(ctx, buf); err != nil {
						return nil, err
					}
					res.samples += int64(len(buf))
					buf = buf[:0]
				}
			}
		}
		fmt.Fprintf(os.Stderr, "  %d of %d process intervals written\n", k+1, intervals)
	}
	if len(buf) > 0 {
		if err := s.AddProcessSamples(ctx, buf); err != nil {
			return nil, err
		}
		res.samples += int64(len(buf))
	}
	writeTook := time.Since(t0)
	if err := s.Close(); err != nil {
		return nil, err
	}
	size, err := fileSize(path)
	if err != nil {
		return nil, err
	}
	res.raw = float64(size - base)
	fmt.Printf("processes: %d samples of %d ranks in %d jobs over %.2f h, written in %v (%.0f samples/s); %.1f bytes per sample\n",
		res.samples, c.processes, len(jobs), res.hours, writeTook.Round(time.Second), float64(res.samples)/writeTook.Seconds(), res.raw/float64(res.samples))
	end := start.Add(time.Duration(intervals+1) * iv)
	foldP := func(what string, r store.Retention) (stepStats, float64, error) {
		s, err := sqlite.Open(ctx, path, c.storeOptions())
		if err != nil {
			return stepStats{}, 0, err
		}
		st, err := pruneSteps(ctx, s, r)
		if err != nil {
			s.Close()
			return st, 0, fmt.Errorf("%s: %w", what, err)
		}
		if err := s.Close(); err != nil {
			return st, 0, err
		}
		size, err := fileSize(path)
		fmt.Printf("%s: %v, %d steps (p50 %v, p99 %v, longest %v); file %d bytes\n", what, st.total.Round(time.Millisecond), st.steps,
			ms(st.pct(50)), ms(st.pct(99)), ms(st.longest), size)
		return st, float64(size - base), err
	}
	if res.fold, res.rollup5m, err = foldP("processes into 5-minute rollups", store.Retention{ProcessSamples: end}); err != nil {
		return nil, err
	}
	if _, res.rollup1h, err = foldP("processes' 5-minute rollups into 1-hour rollups", store.Retention{ProcessSamples: end, ProcessRollups5m: end.Add(time.Hour)}); err != nil {
		return nil, err
	}
	return res, nil
}

// processSample is one rank's interval: CPU time in clock ticks, MPI time
// in nanoseconds, memory in pages, traffic by the job's pattern.
func processSample(j *simJob, r int, at time.Time, iv time.Duration, rng *rand.Rand) store.ProcessSample {
	span := iv + time.Duration(rng.IntN(100e6)-50e6)
	sec := span.Seconds()
	x := store.ProcessSample{Job: j.id, Rank: r, Time: at, Span: span}
	busy := 0.97
	if j.pattern == 3 {
		busy = 0.02
	}
	x.CPUUser = math.Round(sec*busy*(0.9+0.1*rng.Float64())*100) / 100
	x.CPUSystem = math.Round(sec*0.01*rng.Float64()*100) / 100
	j.rss[r] += uint64(rng.IntN(64)) * 4096
	x.VmRSS = j.rss[r]
	x.VmSize = j.rss[r] + 3<<30
	if r == 0 && rng.IntN(20) == 0 {
		x.IOWrite = uint64(rng.IntN(1 << 30))
	}
	jit := 0.8 + 0.4*rng.Float64()
	var bytes float64
	switch j.pattern {
	case 0:
		bytes = 4 * 50e6 * sec * jit
		x.Traffic.P2P = store.Traffic{Bytes: uint64(bytes), Msgs: uint64(bytes / 65536)}
		x.Traffic.Coll = store.Traffic{Bytes: uint64(8 * 50 * sec), Msgs: uint64(50 * sec)}
		x.MPI = float64(time.Duration(sec*0.2*jit*1e9)) / 1e9
	case 1:
		bytes = 400e6 * sec * jit
		x.Traffic.Coll = store.Traffic{Bytes: uint64(bytes), Msgs: uint64(sec * 1000 * jit)}
		x.MPI = float64(time.Duration(sec*0.5*jit*1e9)) / 1e9
	case 2:
		bytes = 20e6 * sec * jit
		x.Traffic.Coll = store.Traffic{Bytes: uint64(bytes), Msgs: uint64(sec * 10)}
		x.MPI = float64(time.Duration(sec*0.1*jit*1e9)) / 1e9
	}
	if bytes > 0 {
		inter := uint64(bytes * 0.25)
		x.InterNode = store.Traffic{Bytes: inter, Msgs: inter / 65536}
		x.IntraNode = store.Traffic{Bytes: uint64(bytes) - inter, Msgs: (uint64(bytes) - inter) / 65536}
	}
	return x
}

func fileSize(path string) (int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// storeOptions are the store options of the retention runs.
func (c config) storeOptions() sqlite.Options {
	return sqlite.Options{RollupPortRows: c.rollupPortRows, RollupProcessRows: c.rollupProcessRows}
}

// linkDirections is how many link directions carry a 6,541-node
// all-to-all job's traffic in one interval (bench/attribution).
const linkDirections = 33495

// runLinks writes c.linkIntervals intervals of link attribution, each
// linkDirections rows over the fabric's switch ports split among a few
// jobs, and returns the bytes on disk per row.
func runLinks(ctx context.Context, c config, dir string, rng *rand.Rand) (float64, error) {
	path := filepath.Join(dir, "links.db")
	s, err := sqlite.Open(ctx, path, c.storeOptions())
	if err != nil {
		return 0, err
	}
	if err := s.Close(); err != nil {
		return 0, err
	}
	base, err := fileSize(path)
	if err != nil {
		return 0, err
	}
	if s, err = sqlite.Open(ctx, path, c.storeOptions()); err != nil {
		return 0, err
	}
	start := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	rows := 0
	batch := make([]store.LinkJobSample, 0, linkDirections)
	for k := 0; k < c.linkIntervals; k++ {
		at := start.Add(time.Duration(k+1) * c.interval)
		batch = batch[:0]
		for d := 0; d < linkDirections; d++ {
			sw := d / 36
			batch = append(batch, store.LinkJobSample{Time: at, Span: c.interval, Job: fmt.Sprint(4000000 + d%7),
				Port:  fabric.PortRef{GUID: fabric.GUID(0x0002c90300000000 + uint64(sw)*0x100), Port: 1 + d%36},
				Bytes: uint64(rng.ExpFloat64() * 2e9)})
		}
		if err := s.AddLinkJobSamples(ctx, batch); err != nil {
			return 0, err
		}
		rows += len(batch)
	}
	if err := s.Close(); err != nil {
		return 0, err
	}
	size, err := fileSize(path)
	if err != nil {
		return 0, err
	}
	per := float64(size-base) / float64(rows)
	fmt.Printf("link attribution: %d rows, %.1f bytes per row\n", rows, per)
	return per, nil
}

// openEmpty creates the store at path, runs prepare on it (when not nil),
// and reopens it; base is the file's size then, what the measured data
// comes on top of.
func (c config) openEmpty(ctx context.Context, path string, prepare func(*sqlite.Store) error) (s *sqlite.Store, base int64, err error) {
	if s, err = sqlite.Open(ctx, path, c.storeOptions()); err != nil {
		return nil, 0, err
	}
	if prepare != nil {
		if err := prepare(s); err != nil {
			s.Close()
			return nil, 0, err
		}
	}
	if err := s.Close(); err != nil {
		return nil, 0, err
	}
	if base, err = fileSize(path); err != nil {
		return nil, 0, err
	}
	s, err = sqlite.Open(ctx, path, c.storeOptions())
	return s, base, err
}
