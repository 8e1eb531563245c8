// Command alerts measures what the alert engine costs per counter sweep on
// the simulated Stampede fabric and at ten times its size: the daemon's
// default rules evaluated over one sweep's readings and samples of every
// switch port, as a fraction of the sweep interval, in a steady state and
// with errors injected on some ports (alerts firing). Looking up the jobs
// of an alert is excluded (it runs once per new alert and every 15 s
// after, and is measured by the e2e test's fault-to-Alertmanager time).
//
//	go run ./bench/alerts -fabric stampede,10x-stampede -sweeps 5
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/netloom/netloom/internal/alert"
	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/fabric/sim"
)

func main() {
	specs := flag.String("fabric", "stampede,10x-stampede", "comma-separated simulated fabric specs")
	sweeps := flag.Int("sweeps", 5, "sweeps timed per case")
	interval := flag.Duration("interval", 30*time.Second, "the sweep interval the cost is reported against")
	faulty := flag.Int("faulty", 200, "ports given errors in the faulty case")
	flag.Parse()
	for _, spec := range strings.Split(*specs, ",") {
		if err := run(context.Background(), spec, *sweeps, *interval, *faulty); err != nil {
			log.Fatal(err)
		}
	}
}

func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func run(ctx context.Context, spec string, sweeps int, interval time.Duration, faulty int) error {
	sp, err := sim.ParseSpec(spec)
	if err != nil {
		return err
	}
	now := time.Now()
	clock := now
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
	fmt.Printf("fabric sim:%s: %d switches, %d hosts, %d links, %d switch ports; %d CPUs; interval %s\n",
		spec, c.Switches, c.CAs, c.Links, len(ports), runtime.NumCPU(), interval)

	prev := map[fabric.PortRef]*fabric.PortReading{}
	sweep := func() alert.Input {
		clock = clock.Add(interval)
		rs, err := src.Sweep(ctx, topo, ports, fabric.SweepOptions{}.WithDefaults())
		if err != nil {
			log.Fatal(err)
		}
		in := alert.Input{Time: clock, Topology: topo, SweepTime: clock, Readings: make(map[fabric.PortRef]*fabric.PortReading, len(rs)),
			Samples: make(map[fabric.PortRef]*fabric.PortSample, len(rs)), Unreachable: map[fabric.PortRef]time.Time{}}
		for i := range rs {
			r := &rs[i]
			in.Readings[r.Port] = r
			if p, ok := prev[r.Port]; ok {
				s := fabric.Diff(p, r)
				in.Samples[r.Port] = &s
			}
			prev[r.Port] = r
		}
		return in
	}
	eng := alert.NewEngine(alert.Config{}.WithDefaults(), nil)
	eng.Evaluate(sweep())
	measure := func(name string, before func()) {
		var wall, used time.Duration
		firing := 0
		for range sweeps {
			if before != nil {
				before()
			}
			in := sweep()
			runtime.GC()
			c0, w0 := cpu(), time.Now()
			eng.Evaluate(in)
			wall += time.Since(w0)
			used += cpu() - c0
			firing = len(eng.Firing())
		}
		w, u := wall/time.Duration(sweeps), used/time.Duration(sweeps)
		by := map[string]int{}
		for _, a := range eng.Firing() {
			by[a.Rule]++
		}
		fmt.Printf("  %-22s %8s wall %8s CPU per sweep = %.3f%% of the interval's CPU (target < 5%%); %d alerts firing %v\n",
			name, w.Round(time.Microsecond), u.Round(time.Microsecond), 100*u.Seconds()/interval.Seconds(), firing, by)
	}
	measure("steady", nil)
	i := 0
	measure(fmt.Sprintf("errors on %d ports", faulty), func() {
		for k := range faulty {
			p := ports[(i*faulty+k*7919)%len(ports)]
			_ = src.AddErrors(p, fabric.SymbolErrors, 50)
		}
		i++
	})
	return nil
}
