// Command eth compares a counter sweep of every switch port of an Ethernet
// lab (network namespaces, real snmpd in every switch: test/ethlab) by
// Netloom's Ethernet source with Prometheus' snmp_exporter (Debian
// prometheus-snmp-exporter) scraping the same IF-MIB columns from the same
// switches, in one run, best of --runs each. Run as root:
//
//	go run ./bench/eth --leaves 2,8
//
// A lab of N leaves has N+1 switches (one spine) and one host per leaf.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/fabric/eth"
	"github.com/netloom/netloom/test/ethlab"
)

// columns are what both sides read per interface: the 64-bit data and
// packet counters, the discontinuity time and the 32-bit error counters
// (what Netloom's sweep walks).
var columns = []string{
	"1.3.6.1.2.1.31.1.1.1.6", "1.3.6.1.2.1.31.1.1.1.7", "1.3.6.1.2.1.31.1.1.1.8", "1.3.6.1.2.1.31.1.1.1.9",
	"1.3.6.1.2.1.31.1.1.1.10", "1.3.6.1.2.1.31.1.1.1.11", "1.3.6.1.2.1.31.1.1.1.12", "1.3.6.1.2.1.31.1.1.1.13",
	"1.3.6.1.2.1.31.1.1.1.19",
	"1.3.6.1.2.1.2.2.1.13", "1.3.6.1.2.1.2.2.1.14", "1.3.6.1.2.1.2.2.1.19", "1.3.6.1.2.1.2.2.1.20",
}

func main() {
	leaves := flag.String("leaves", "2,8", "lab sizes: leaves per lab (one spine, one host per leaf)")
	runs := flag.Int("runs", 5, "timed sweeps per side; the best is reported")
	exporter := flag.String("exporter", "prometheus-snmp-exporter", "snmp_exporter binary")
	flag.Parse()
	if m := ethlab.Missing(); m != "" {
		fmt.Fprintln(os.Stderr, "bench/eth:", m)
		os.Exit(1)
	}
	if _, err := exec.LookPath(*exporter); err != nil {
		fmt.Fprintln(os.Stderr, "bench/eth: snmp_exporter:", err)
		os.Exit(1)
	}
	fmt.Println("| switches | ports | netloom sweep | snmp_exporter scrape (all switches in parallel) | ratio | µs/port netloom | µs/port snmp_exporter |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, s := range strings.Split(*leaves, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bench/eth: --leaves %q\n", s)
			os.Exit(2)
		}
		if err := bench(n, *runs, *exporter); err != nil {
			fmt.Fprintln(os.Stderr, "bench/eth:", err)
			os.Exit(1)
		}
	}
}

func desc(leaves int) ethlab.Desc {
	d := ethlab.Desc{Name: fmt.Sprintf("bench-%d", leaves), Switches: []ethlab.Switch{{Name: "spine1", Role: "spine"}}}
	for l := 1; l <= leaves; l++ {
		leaf, host := fmt.Sprintf("leaf%d", l), fmt.Sprintf("h%d", l)
		d.Switches = append(d.Switches, ethlab.Switch{Name: leaf, Role: "leaf"})
		d.Hosts = append(d.Hosts, host)
		d.Links = append(d.Links, ethlab.Link{A: host, B: leaf}, ethlab.Link{A: leaf, B: "spine1"})
	}
	return d
}

func bench(leaves, runs int, exporter string) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	lab, err := ethlab.Start(ctx, desc(leaves), ethlab.Options{})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := lab.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	targets := lab.SNMPTargets()
	dir, err := os.MkdirTemp("", "bench-eth-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	// Netloom: discover once, then sweep every port of every switch.
	var b strings.Builder
	fmt.Fprintf(&b, "community: %q\nswitches:\n", targets[0].Community)
	for _, t := range targets {
		fmt.Fprintf(&b, "  - {address: %q, name: %q}\n", t.Addr, t.Switch)
	}
	cfg, err := eth.ParseConfig([]byte(b.String()))
	if err != nil {
		return err
	}
	src, err := eth.Open(*cfg, eth.Options{})
	if err != nil {
		return err
	}
	topo, err := src.Discover(ctx)
	if err != nil {
		return err
	}
	ports := topo.AllPorts(false)
	sweep := func() error {
		rs, err := src.Sweep(ctx, topo, ports, fabric.SweepOptions{})
		if err != nil {
			return err
		}
		for _, r := range rs {
			if r.Err != nil {
				return r.Err
			}
		}
		return nil
	}
	ours, err := best(runs, sweep)
	if err != nil {
		return fmt.Errorf("netloom sweep: %w", err)
	}

	// snmp_exporter: one module walking the same columns.
	var y strings.Builder
	fmt.Fprintf(&y, "if_mib_netloom:\n  version: 2\n  auth:\n    community: %s\n  max_repetitions: %d\n  timeout: 5s\n  walk:\n", targets[0].Community, eth.DefaultMaxRepetitions)
	for _, c := range columns {
		fmt.Fprintf(&y, "    - %s\n", c)
	}
	fmt.Fprintf(&y, "  get:\n    - 1.3.6.1.2.1.1.3.0\n  metrics:\n    - {name: sysUpTime, oid: 1.3.6.1.2.1.1.3, type: gauge}\n")
	for _, c := range columns {
		fmt.Fprintf(&y, "    - name: c%s\n      oid: %s\n      type: counter\n      indexes: [{labelname: ifIndex, type: gauge}]\n", strings.ReplaceAll(c, ".", "_"), c)
	}
	conf := filepath.Join(dir, "snmp.yml")
	if err := os.WriteFile(conf, []byte(y.String()), 0o600); err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.CommandContext(ctx, exporter, "--config.file="+conf, "--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	for i := 0; ; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if i > 100 {
			return fmt.Errorf("snmp_exporter does not listen on %s", addr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	wantLines := len(ports) // at least one ifHCInOctets line per port
	client := &http.Client{Timeout: 30 * time.Second}
	scrape := func() error {
		var wg sync.WaitGroup
		errs := make([]error, len(targets))
		for i, t := range targets {
			wg.Add(1)
			go func(i int, t ethlab.Target) {
				defer wg.Done()
				resp, err := client.Get("http://" + addr + "/snmp?module=if_mib_netloom&target=" + t.Addr)
				if err != nil {
					errs[i] = err
					return
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 {
					errs[i] = fmt.Errorf("%s: %d %v %.200s", t.Switch, resp.StatusCode, err, body)
					return
				}
				n := strings.Count(string(body), "\nc1_3_6_1_2_1_31_1_1_1_6{")
				errs[i] = nil
				mu.Lock()
				got += n
				mu.Unlock()
			}(i, t)
		}
		wg.Wait()
		for _, e := range errs {
			if e != nil {
				return e
			}
		}
		return nil
	}
	got = 0
	if err := scrape(); err != nil {
		return fmt.Errorf("snmp_exporter: %w", err)
	}
	if got < wantLines {
		return fmt.Errorf("snmp_exporter gave %d ifHCInOctets series for %d ports", got, wantLines)
	}
	theirs, err := best(runs, scrape)
	if err != nil {
		return fmt.Errorf("snmp_exporter: %w", err)
	}
	fmt.Printf("| %d | %d | %.4f s | %.4f s | %.1fx | %.0f | %.0f |\n", len(targets), len(ports), ours.Seconds(), theirs.Seconds(),
		theirs.Seconds()/ours.Seconds(), float64(ours.Microseconds())/float64(len(ports)), float64(theirs.Microseconds())/float64(len(ports)))
	return nil
}

var (
	mu  sync.Mutex
	got int
)

// best runs f once to warm up, then runs times, and returns the fastest.
func best(runs int, f func() error) (time.Duration, error) {
	if err := f(); err != nil {
		return 0, err
	}
	var b time.Duration
	for i := 0; i < runs; i++ {
		start := time.Now()
		if err := f(); err != nil {
			return 0, err
		}
		if d := time.Since(start); b == 0 || d < b {
			b = d
		}
	}
	return b, nil
}
