// Command fabric benchmarks Netloom's fabric commands against the
// infiniband-diags tools on the same ibsim fabrics, whole processes on
// both sides, in one run per fabric size:
//
//   - cached sweep: `netloom fabric sweep --load-cache C --ca-ports
//     --all-ports` versus `ibqueryerrors --load-cache C`, the same ports
//     (every switch port and every CA port; the bench checks the counts
//     agree) from the same ibnetdiscover cache. ibqueryerrors reads the
//     error counters only (PortCounters); the data and packet counters
//     netloom also reads (PortCountersExtended) take a second run,
//     `ibqueryerrors --load-cache C --counters`, so both are timed: errors
//     only, and errors + counters (the same values netloom reads); and
//     `netloom fabric sweep --port-counters-only` ("sw PC"), the one
//     PortCounters query per port ibqueryerrors makes, against it;
//   - uncached sweep: the same without the cache versus `ibqueryerrors`,
//     which discovers the fabric itself (ibnetdiscover's walk) and then
//     reads it;
//   - discovery: `netloom fabric discover` versus `ibnetdiscover`, and
//     the cost per node of each;
//   - route: `netloom fabric route --load-cache C` versus `ibtracert`.
//
// --ca-cost measures instead what sweeping the host adapter ports adds to
// the daemon's own sweep: `netloom serve --fabric ib` on the fabric,
// alternately without and with --sweep-ca-ports (--runs rounds of each),
// and the seconds of every sweep after the first as the daemon logs them
// (the first also reads each node's ClassPortInfo, once per topology).
//
// Each time is the best of --runs. It prints one row per fabric and the
// per-node and per-port costs, so growth with the fabric's size shows.
//
// --pin CPU runs every timed command on both sides under `taskset -c CPU`.
// Under umad2sim each client process has a helper thread that reads ibsim's
// replies and wakes the thread that asked; when the scheduler puts the two
// on different CPUs every reply costs a cross-CPU wake-up, and a 6,400-host
// sweep takes 0.19 or 0.38 s depending on where the threads landed. Pinned,
// both sides run the way they would on one core, and the noise goes.
// Usage:
//
//	go run ./bench/fabric --hosts 800,3200,6400 --netloom bin/netloom
//	go run ./bench/fabric --sizes small,stampede --netloom bin/netloom
//	go run ./bench/fabric --sizes stampede --ca-cost --netloom bin/netloom
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/fabric/sim"
	"github.com/netloom/netloom/test/ibsim"
)

func main() {
	hosts := flag.String("hosts", "800,3200,6400", "comma-separated fat-tree sizes (hosts)")
	sizes := flag.String("sizes", "", "named fabrics instead of --hosts: small (648 hosts), stampede (6,541 hosts, 764 switches), large (11,664 hosts)")
	radix := flag.Int("radix", 36, "switch ports of the fat trees")
	bin := flag.String("netloom", "bin/netloom", "netloom binary")
	runs := flag.Int("runs", 3, "runs of each command (best is reported)")
	parallel := flag.Int("parallel", 0, "netloom sweep --parallel (0: its default)")
	caCost := flag.Bool("ca-cost", false, "measure only what --sweep-ca-ports adds to the daemon's sweeps (see the package comment)")
	flag.StringVar(&pin, "pin", "", "run every timed command, netloom's and the diags', under taskset -c `CPU` (see the package comment)")
	flag.Parse()
	abs, err := filepath.Abs(*bin)
	if err != nil {
		fail(err)
	}
	if b, err := os.ReadFile("/proc/sys/net/unix/max_dgram_qlen"); err == nil {
		fmt.Printf("# net.unix.max_dgram_qlen = %s", b)
	}
	if pin != "" {
		fmt.Printf("# every timed command under taskset -c %s\n", pin)
	}
	if *caCost {
		for _, spec := range fabricSpecs(*sizes, *hosts, *radix) {
			if err := benchCACost(spec, abs, *runs); err != nil {
				fail(fmt.Errorf("%s: %w", spec, err))
			}
		}
		return
	}
	fmt.Printf("%-24s %7s %7s | %9s %9s %6s %9s %6s %9s %6s | %9s %9s %6s | %9s %9s %6s %7s %7s %7s | %7s %8s | %7s %7s\n",
		"fabric", "nodes", "ports",
		"sw cached", "iqe cache", "ratio", "+counters", "ratio", "sw PC", "ratio",
		"sw", "iqe", "ratio",
		"discover", "ibnetdisc", "ratio", "us/node", "ibnd/nd", "us/port",
		"sweep", "us/port",
		"route", "tracert")
	for _, spec := range fabricSpecs(*sizes, *hosts, *radix) {
		if err := benchOne(spec, abs, *runs, *parallel); err != nil {
			fail(fmt.Errorf("%s: %w", spec, err))
		}
	}
}

// fabricSpecs are the sim specs --sizes or --hosts name.
func fabricSpecs(sizes, hosts string, radix int) []string {
	specs := map[string]string{"small": "fat-tree:hosts=648,radix=36", "stampede": "stampede", "large": "fat-tree:hosts=11664,radix=36,levels=3"}
	var list []string
	if sizes != "" {
		for _, name := range strings.Split(sizes, ",") {
			spec, ok := specs[name]
			if !ok {
				fail(fmt.Errorf("--sizes: unknown size %q; want small, stampede or large", name))
			}
			list = append(list, spec)
		}
	} else {
		for _, h := range strings.Split(hosts, ",") {
			list = append(list, fmt.Sprintf("fat-tree:hosts=%s,radix=%d", strings.TrimSpace(h), radix))
		}
	}
	return list
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench/fabric:", err)
	os.Exit(1)
}

// pin is --pin: the CPU list every timed command is pinned to, or "".
var pin string

// timed runs a whole command on the fabric runs times and returns the
// best wall time and the last standard output.
func timed(ctx context.Context, f *ibsim.Fabric, runs int, name string, args ...string) (time.Duration, []byte, error) {
	best := time.Duration(1 << 62)
	var out []byte
	cmd, cmdArgs := name, args
	if pin != "" {
		cmd, cmdArgs = "taskset", append([]string{"-c", pin, name}, args...)
	}
	for i := 0; i < runs; i++ {
		start := time.Now()
		o, err := f.Run(ctx, cmd, cmdArgs...)
		took := time.Since(start)
		var exit *exec.ExitError
		// ibqueryerrors exits 1 when it finds errors; the time still counts.
		if err != nil && !(name == "ibqueryerrors" && errors.As(err, &exit) && exit.ExitCode() == 1) {
			return 0, nil, err
		}
		best, out = min(best, took), o
	}
	return best, out, nil
}

var portsChecked = regexp.MustCompile(`(\d+) ports checked`)

// startFabric generates the fabric spec names and starts ibsim and
// OpenSM on it, with a scratch directory; stop stops both and removes it.
func startFabric(ctx context.Context, spec string) (f *ibsim.Fabric, c fabric.Counts, dir string, stop func(), err error) {
	sp, err := sim.ParseSpec(spec)
	if err != nil {
		return nil, c, "", nil, err
	}
	topo, _, err := sim.Generate(ctx, sp)
	if err != nil {
		return nil, c, "", nil, err
	}
	dir, err = os.MkdirTemp("", "netloom-bench-")
	if err != nil {
		return nil, c, "", nil, err
	}
	var buf bytes.Buffer
	if err := sim.WriteNetfile(&buf, topo); err != nil {
		os.RemoveAll(dir)
		return nil, c, "", nil, err
	}
	net := filepath.Join(dir, "fabric.net")
	if err := os.WriteFile(net, buf.Bytes(), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, c, "", nil, err
	}
	c = topo.Counts()
	ports := c.SwitchPorts + c.CAs
	opt := ibsim.Options{Timeout: 10 * time.Minute}
	if nodes := c.Switches + c.CAs; nodes > 2048 || c.Switches > 256 || ports > 13312 {
		opt.Nodes, opt.Switches, opt.Ports = 2*nodes, 2*c.Switches, 2*(ports+c.Switches)
	}
	fmt.Fprintf(os.Stderr, "starting ibsim + OpenSM for %d hosts, %d switches ...\n", c.CAs, c.Switches)
	start := time.Now()
	f, err = ibsim.Start(ctx, net, opt)
	if err != nil {
		os.RemoveAll(dir)
		return nil, c, "", nil, err
	}
	fmt.Fprintf(os.Stderr, "fabric up in %s\n", time.Since(start).Round(time.Second))
	return f, c, dir, func() { f.Stop(); os.RemoveAll(dir) }, nil
}

func benchOne(spec, bin string, runs, parallel int) error {
	ctx := context.Background()
	f, c, dir, stop, err := startFabric(ctx, spec)
	if err != nil {
		return err
	}
	defer stop()
	hosts := c.CAs
	ports := c.SwitchPorts + hosts

	cache := filepath.Join(dir, "fabric.cache")
	if _, err := f.Run(ctx, "ibnetdiscover", "--cache", cache); err != nil {
		return err
	}
	sweepArgs := []string{"fabric", "sweep", "--ca-ports", "--all-ports", "--json"}
	if parallel > 0 {
		sweepArgs = append(sweepArgs, "--parallel", strconv.Itoa(parallel))
	}
	type sweepOut struct {
		Ports, Errors int
		Seconds       float64
	}
	sweep := func(extra ...string) (time.Duration, sweepOut, error) {
		d, out, err := timed(ctx, f, runs, bin, append(append([]string{}, sweepArgs...), extra...)...)
		var r sweepOut
		if err == nil {
			if err = json.Unmarshal(out, &r); err == nil && r.Errors > 0 {
				err = fmt.Errorf("sweep: %d of %d ports failed", r.Errors, r.Ports)
			}
		}
		return d, r, err
	}

	// Cached sweep, both sides from the same cache.
	swCached, r, err := sweep("--load-cache", cache)
	if err != nil {
		return err
	}
	iqeCached, out, err := timed(ctx, f, runs, "ibqueryerrors", "--load-cache", cache)
	if err != nil {
		return err
	}
	m := portsChecked.FindSubmatch(out)
	if m == nil {
		return fmt.Errorf("no port count in ibqueryerrors output")
	}
	if checked, _ := strconv.Atoi(string(m[1])); checked != r.Ports {
		return fmt.Errorf("netloom swept %d ports, ibqueryerrors checked %d", r.Ports, checked)
	}
	iqeCounters, _, err := timed(ctx, f, runs, "ibqueryerrors", "--load-cache", cache, "--counters")
	if err != nil {
		return err
	}
	// ibqueryerrors' own work: PortCounters alone, one query per port.
	swPC, rPC, err := sweep("--load-cache", cache, "--port-counters-only")
	if err != nil {
		return err
	}
	if rPC.Ports != r.Ports {
		return fmt.Errorf("netloom swept %d ports with PortCounters only, %d with both", rPC.Ports, r.Ports)
	}
	// Per-port cost: the best sweep-only time netloom reports.
	bestSweep := r.Seconds
	for i := 1; i < runs; i++ {
		if _, r2, err := sweep("--load-cache", cache); err == nil {
			bestSweep = min(bestSweep, r2.Seconds)
		}
	}

	// Without a cache: both discover, then read.
	sw, _, err := sweep()
	if err != nil {
		return err
	}
	iqe, _, err := timed(ctx, f, runs, "ibqueryerrors")
	if err != nil {
		return err
	}

	disc, out, err := timed(ctx, f, runs, bin, "fabric", "discover", "--json")
	if err != nil {
		return err
	}
	var live struct{ Nodes []fabric.Node }
	if err := json.Unmarshal(out, &live); err != nil {
		return fmt.Errorf("discover output: %w", err)
	}
	ibnd, _, err := timed(ctx, f, runs, "ibnetdiscover")
	if err != nil {
		return err
	}

	// A route across the tree, by LID on both sides.
	var first, last fabric.Node
	for _, n := range live.Nodes {
		if n.Type == fabric.CA && (first.LID == 0 || n.LID < first.LID) {
			first = n
		}
		if n.Type == fabric.CA && n.LID > last.LID {
			last = n
		}
	}
	src, dst := strconv.Itoa(int(first.LID)), strconv.Itoa(int(last.LID))
	route, _, err := timed(ctx, f, runs, bin, "fabric", "route", "--load-cache", cache, src, dst)
	if err != nil {
		return err
	}
	tracert, _, err := timed(ctx, f, runs, "ibtracert", src, dst)
	if err != nil {
		return err
	}

	nodes := len(live.Nodes)
	us := func(d time.Duration, n int) float64 { return float64(d.Microseconds()) / float64(n) }
	both := iqeCached + iqeCounters
	fmt.Printf("%-24s %7d %7d | %8.3fs %8.3fs %5.1fx %8.3fs %5.1fx %8.3fs %5.1fx | %8.3fs %8.3fs %5.1fx | %8.3fs %8.3fs %5.2fx %7.1f %7.1f %7.2f | %6.3fs %8.2f | %6.3fs %6.3fs\n",
		fmt.Sprintf("%d hosts, %d sw", hosts, c.Switches), nodes, r.Ports,
		swCached.Seconds(), iqeCached.Seconds(), iqeCached.Seconds()/swCached.Seconds(), both.Seconds(), both.Seconds()/swCached.Seconds(),
		swPC.Seconds(), iqeCached.Seconds()/swPC.Seconds(),
		sw.Seconds(), iqe.Seconds(), iqe.Seconds()/sw.Seconds(),
		disc.Seconds(), ibnd.Seconds(), ibnd.Seconds()/disc.Seconds(), us(disc, nodes), us(ibnd, nodes), us(disc, ports),
		bestSweep, bestSweep*1e6/float64(r.Ports),
		route.Seconds(), tracert.Seconds())
	return nil
}
