// Command health measures what link health costs at Stampede size
// (issue 31): the ranking and predictions of every link direction over a
// window of sweeps (health.Fabric, what GET /api/v1/health and `netloom
// health` compute after reading the store), and the error_trend alert
// rule per sweep (what the daemon adds to every sweep), each against the
// sweep's own time measured in the same run (the simulated source's
// in-process sweep of every switch port) and against the sweep interval.
// Some ports are given errors: rising, flat, and flat with a reset in the
// middle; the bench checks that the rising ones rank first.
//
//	go run ./bench/health -fabric stampede -sweeps 120
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"syscall"
	"time"

	"github.com/netloom/netloom/internal/alert"
	"github.com/netloom/netloom/internal/analysis"
	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/fabric/sim"
	"github.com/netloom/netloom/internal/health"
	"github.com/netloom/netloom/internal/store"
)

func main() {
	spec := flag.String("fabric", "stampede", "simulated fabric spec")
	sweeps := flag.Int("sweeps", 120, "sweeps in the window (120 at 30s: the default hour)")
	interval := flag.Duration("interval", 30*time.Second, "sweep interval")
	bad := flag.Int("bad", 50, "ports given each kind of errors (rising, flat)")
	runs := flag.Int("runs", 3, "timed runs of the ranking (best kept)")
	bin := flag.String("netloom", "", "also time GET /api/v1/health of `netloom serve --fabric sim:SPEC` (this binary) against its own sweeps")
	daemonSweeps := flag.Int("daemon-sweeps", 30, "sweeps the daemon makes (at -daemon-interval) before the API is timed")
	daemonInterval := flag.Duration("daemon-interval", 2*time.Second, "the daemon's sweep interval")
	flag.Parse()
	if err := run(context.Background(), *spec, *sweeps, *interval, *bad, *runs); err != nil {
		log.Fatal(err)
	}
	if *bin != "" {
		if err := runDaemon(*bin, *spec, *daemonSweeps, *daemonInterval, *runs); err != nil {
			log.Fatal(err)
		}
	}
}

// runDaemon starts the daemon on the simulated fabric, lets it sweep, and
// times the health API (store read included) against the daemon's own
// sweep time (GET /api/v1/status).
func runDaemon(bin, spec string, sweeps int, interval time.Duration, runs int) error {
	dir, err := os.MkdirTemp("", "netloom-bench-health-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cmd := exec.Command(bin, "serve", "--fabric", "sim:"+spec, "--db", filepath.Join(dir, "netloom.db"), "--listen", "127.0.0.1:0",
		"--agent-listen", "off", "--agent-address-file", "-", "--anonymous", "admin", "--sweep-interval", interval.String())
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	r := bufio.NewReader(out)
	base := ""
	for base == "" {
		line, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("daemon did not start: %v", err)
		}
		if m := regexp.MustCompile(`http://(\S+)`).FindStringSubmatch(line); m != nil {
			base = "http://" + m[1]
		}
	}
	go io.Copy(io.Discard, out)
	type status struct {
		Sweep struct {
			Count   int
			Seconds float64
		}
	}
	get := func(path string, v any) (time.Duration, error) {
		t0 := time.Now()
		resp, err := http.Get(base + path)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != 200 {
			return 0, fmt.Errorf("%s: %d %s", path, resp.StatusCode, b)
		}
		return time.Since(t0), json.Unmarshal(b, v)
	}
	var st status
	var sweepTimes []float64
	deadline := time.Now().Add(time.Duration(sweeps+30) * interval * 3)
	last := 0
	for st.Sweep.Count < sweeps {
		if time.Now().After(deadline) {
			return fmt.Errorf("daemon made %d sweeps of %d", st.Sweep.Count, sweeps)
		}
		time.Sleep(interval / 4)
		if _, err := get("/api/v1/status", &st); err != nil {
			continue
		}
		if st.Sweep.Count != last && st.Sweep.Count > 1 {
			sweepTimes = append(sweepTimes, st.Sweep.Seconds)
			last = st.Sweep.Count
		}
	}
	sort.Float64s(sweepTimes)
	sweep := sweepTimes[len(sweepTimes)/2]
	var best time.Duration
	var rep struct {
		Total  int
		Counts map[string]int
	}
	for range runs {
		d, err := get("/api/v1/health?window=1h&limit=20", &rep)
		if err != nil {
			return err
		}
		if best == 0 || d < best {
			best = d
		}
	}
	fmt.Printf("daemon `netloom serve --fabric sim:%s --sweep-interval %s`, after %d sweeps (store: SQLite):\n", spec, interval, st.Sweep.Count)
	fmt.Printf("  its sweep: %.3f s (median of %d); GET /api/v1/health?window=1h (store read + ranking of %d directions): %s = %.2fx its sweep, %.2f%% of its interval, %.3f%% of the default 30 s interval; %v\n",
		sweep, len(sweepTimes), rep.Total, best.Round(time.Millisecond), best.Seconds()/sweep, 100*best.Seconds()/interval.Seconds(),
		100*best.Seconds()/30, rep.Counts)
	return nil
}

func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func run(ctx context.Context, spec string, sweeps int, interval time.Duration, bad, runs int) error {
	sp, err := sim.ParseSpec(spec)
	if err != nil {
		return err
	}
	clock := time.Now().Add(-time.Duration(sweeps+1) * interval)
	src, err := sim.NewSource(ctx, sp, sim.Options{Now: func() time.Time { return clock }})
	if err != nil {
		return err
	}
	topo, err := src.Discover(ctx)
	if err != nil {
		return err
	}
	ports := topo.SwitchPorts(false)
	c := topo.Counts()
	fmt.Printf("fabric sim:%s: %d switches, %d hosts, %d links, %d switch ports swept; %d CPUs; %d sweeps at %s\n",
		spec, c.Switches, c.CAs, c.Links, len(ports), runtime.NumCPU(), sweeps, interval)

	rising, flat := map[fabric.PortRef]bool{}, map[fabric.PortRef]bool{}
	for k := range bad {
		rising[ports[(k*7919)%len(ports)]] = true
		flat[ports[(k*7919+3331)%len(ports)]] = true
	}
	cfg := alert.Config{Rules: []alert.Rule{{Name: "link_errors_rising", Kind: alert.ErrorTrend, Threshold: 1e-12,
		Window: time.Duration(sweeps) * interval, Severity: "warning"}}}
	eng := alert.NewEngine(cfg, nil)
	samples := map[fabric.PortRef][]fabric.PortSample{}
	prev := map[fabric.PortRef]*fabric.PortReading{}
	var sweepWall, ruleWall, ruleCPU time.Duration
	timed := 0
	for i := 0; i <= sweeps; i++ {
		clock = clock.Add(interval)
		// EDR 4X: 1e-12 is 0.1 errors/s, 3 per 30 s sweep. Rising ports
		// climb from 0 to 3x that over the window; flat ones sit at half.
		for p := range rising {
			_ = src.AddErrors(p, fabric.SymbolErrors, uint64(9*i/sweeps))
		}
		for p := range flat {
			_ = src.AddErrors(p, fabric.SymbolErrors, uint64(1+i%2))
		}
		if i == sweeps/2 {
			_ = src.ResetCounters(ctx, topo, keys(flat))
		}
		w0 := time.Now()
		rs, err := src.Sweep(ctx, topo, ports, fabric.SweepOptions{}.WithDefaults())
		if err != nil {
			return err
		}
		in := alert.Input{Time: clock, Topology: topo, SweepTime: clock, Samples: make(map[fabric.PortRef]*fabric.PortSample, len(rs))}
		for j := range rs {
			r := &rs[j]
			if p, ok := prev[r.Port]; ok {
				s := fabric.Diff(p, r)
				samples[r.Port] = append(samples[r.Port], s)
				in.Samples[r.Port] = &samples[r.Port][len(samples[r.Port])-1]
			}
			prev[r.Port] = r
		}
		if i > 0 {
			sweepWall += time.Since(w0)
		}
		runtime.GC()
		c0, r0 := cpu(), time.Now()
		eng.Evaluate(in)
		if i > 0 {
			ruleWall += time.Since(r0)
			ruleCPU += cpu() - c0
			timed++
		}
	}
	sweepMean := sweepWall / time.Duration(timed)
	ruleMean, ruleCPUMean := ruleWall/time.Duration(timed), ruleCPU/time.Duration(timed)

	var best, bestCPU time.Duration
	var rep *health.Report
	for range runs {
		runtime.GC()
		c0, w0 := cpu(), time.Now()
		rep = health.Fabric(topo, samples, clock.Add(-time.Duration(sweeps)*interval), health.Options{Now: clock})
		w, u := time.Since(w0), cpu()-c0
		if best == 0 || w < best {
			best, bestCPU = w, u
		}
	}
	top := 0
	for _, d := range rep.Directions[:min(len(rising), len(rep.Directions))] {
		if rising[d.To] {
			top++
		}
	}
	flatCalledRising := 0
	for _, d := range rep.Directions {
		if flat[d.To] && d.Trend == health.TrendRising {
			flatCalledRising++
		}
	}
	fmt.Printf("  sweep (simulated source, in process, every switch port + diff): %s per sweep\n", sweepMean.Round(time.Microsecond))
	fmt.Printf("  ranking + predictions, %d directions, %d samples: %s wall, %s CPU = %.2fx the sweep's own time, %.3f%% of the interval\n",
		len(rep.Directions), sweeps*len(ports), best.Round(time.Microsecond), bestCPU.Round(time.Microsecond),
		best.Seconds()/sweepMean.Seconds(), 100*best.Seconds()/interval.Seconds())
	fmt.Printf("  error_trend alert rule per sweep: %s wall, %s CPU = %.3fx the sweep's own time, %.4f%% of the interval; %d firing\n",
		ruleMean.Round(time.Microsecond), ruleCPUMean.Round(time.Microsecond), ruleMean.Seconds()/sweepMean.Seconds(),
		100*ruleMean.Seconds()/interval.Seconds(), len(eng.Firing()))
	fmt.Printf("  statuses %v; rising ports among the first %d: %d; flat ports called rising: %d\n", rep.Counts, len(rising), top, flatCalledRising)
	return benchImpact(ctx, src, topo, sweepMean, interval, runs)
}

// benchImpact times the repair-impact answer (health.ComputeImpact: which
// running jobs' routes cross the element, the predicted routes around it
// and the load moved) for a spine switch, a leaf uplink and 16 nodes to
// drain, with jobs on every host: all-to-all jobs of 1024, 512, 256, ...
// nodes, each pair 1 MB, their load on every direction computed here by
// walking the routes (what link attribution stores).
func benchImpact(ctx context.Context, src *sim.Source, topo *fabric.Topology, sweep, interval time.Duration, runs int) error {
	ft, err := src.ForwardingTables(ctx, topo)
	if err != nil {
		return err
	}
	routes := fabric.NewRoutes(topo, ft)
	lids := routes.CALIDs()
	var jobs []health.ImpactJob
	var load []store.LinkJobBytes
	pairs := 0
	for start, size, k := 0, 1024, 0; start < len(lids) && size >= 2; k++ {
		if start+size > len(lids) {
			size /= 2
			continue
		}
		id := fmt.Sprintf("bench-%d", k)
		m := analysis.Matrix{LIDs: lids[start : start+size], Bytes: make([]uint64, size*size)}
		j := health.ImpactJob{Summary: store.JobSummary{ID: id, Ranks: size, State: store.JobRunning}, Matrix: m, RanksOn: map[string]int{}}
		onDir := map[fabric.PortRef]uint64{}
		for a, s := range m.LIDs {
			p, _ := topo.PortByLID(s)
			n, _ := topo.Node(p.GUID)
			j.Names = append(j.Names, n.Name())
			j.RanksOn[n.Name()] = 1
			for b, d := range m.LIDs {
				if a == b {
					continue
				}
				m.Bytes[b*size+a] = 1 << 20
				rt, err := routes.Path(s, d)
				if err != nil {
					return err
				}
				for _, h := range rt.Hops {
					onDir[fabric.PortRef{GUID: h.GUID, Port: h.Port}] += 1 << 20
				}
				pairs++
			}
		}
		for p, b := range onDir {
			load = append(load, store.LinkJobBytes{Job: id, Port: p, Bytes: b})
		}
		jobs = append(jobs, j)
		start += size
		if size > 16 && k%2 == 1 {
			size /= 2
		}
	}
	// The busiest spine (most links), a leaf's first uplink, 16 nodes.
	var spine *fabric.Node
	links := map[fabric.GUID]int{}
	for _, l := range topo.Links {
		links[l.A.GUID]++
		links[l.B.GUID]++
	}
	var uplink *fabric.Link
	for i := range topo.Nodes {
		n := &topo.Nodes[i]
		if n.Type != fabric.Switch {
			continue
		}
		hostLinked := false
		for p := 1; p <= n.Ports; p++ {
			if peer, ok := topo.Peer(fabric.PortRef{GUID: n.GUID, Port: p}); ok {
				if pn, _ := topo.Node(peer.GUID); pn.Type != fabric.Switch {
					hostLinked = true
				}
			}
		}
		if !hostLinked && (spine == nil || links[n.GUID] > links[spine.GUID]) {
			spine = n
		}
		if hostLinked && uplink == nil {
			for p := 1; p <= n.Ports && uplink == nil; p++ {
				if peer, ok := topo.Peer(fabric.PortRef{GUID: n.GUID, Port: p}); ok {
					if pn, _ := topo.Node(peer.GUID); pn.Type == fabric.Switch {
						uplink, _ = topo.LinkAt(fabric.PortRef{GUID: n.GUID, Port: p})
					}
				}
			}
		}
	}
	nm, err := analysis.NewNodeMap(topo, nil)
	if err != nil {
		return err
	}
	var drain []string
	for _, l := range lids[:16] {
		p, _ := topo.PortByLID(l)
		n, _ := topo.Node(p.GUID)
		drain = append(drain, n.Name())
	}
	fmt.Printf("  repair impact, %d running jobs on %d hosts (%d node pairs):\n", len(jobs), len(lids), pairs)
	for _, q := range []struct {
		what, link, sw string
		nodes          []string
	}{{"spine " + spine.Description, "", spine.GUID.String(), nil}, {"leaf uplink " + uplink.ID(), uplink.ID(), "", nil}, {"16 nodes", "", "", drain}} {
		tg, err := health.ResolveTarget(topo, nm, q.link, q.sw, q.nodes)
		if err != nil {
			return err
		}
		var best time.Duration
		var im *health.Impact
		for range runs {
			runtime.GC()
			w0 := time.Now()
			if im, err = health.ComputeImpact(health.ImpactInput{Target: tg, Topo: topo, Before: routes, Jobs: jobs, Load: load,
				From: time.Now().Add(-time.Hour), To: time.Now()}); err != nil {
				return err
			}
			if w := time.Since(w0); best == 0 || w < best {
				best = w
			}
		}
		fmt.Printf("    %s: %s = %.2fx the sweep's own time, %.3f%% of the interval; %d jobs named, %d pairs moved (%d bytes), %d unroutable bytes, %d directions change\n",
			q.what, best.Round(time.Millisecond), best.Seconds()/sweep.Seconds(), 100*best.Seconds()/interval.Seconds(), len(im.Jobs), im.PairsTotal,
			im.MovedBytes, im.UnroutableBytes, len(im.Changes))
	}
	return nil
}

func keys(m map[fabric.PortRef]bool) []fabric.PortRef {
	out := make([]fabric.PortRef, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	return out
}
