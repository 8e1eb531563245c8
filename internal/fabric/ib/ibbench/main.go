// Command ibbench measures the ib source against a simulated fabric: it
// writes a net file for a generated fabric (package sim's specs), starts
// ibsim and OpenSM, re-runs
// itself under umad2sim, and times Discover, Sweep (several windows),
// ForwardingTables and, as the baseline, `perfquery -x -l LID 255` per
// switch (a sample of switches, scaled up).
//
//	go run ./internal/fabric/ib/ibbench -spec stampede
//	go run ./internal/fabric/ib/ibbench -spec fat-tree:hosts=648
//
// The default is the scale reference: TACC Stampede, 764 36-port switches
// (27,504 switch ports), 6,541 hosts.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/fabric/ib"
	"github.com/netloom/netloom/internal/fabric/sim"
	"github.com/netloom/netloom/test/ibsim"
)

const childVar = "NETLOOM_IBBENCH_CHILD"

type config struct {
	spec     string
	rounds   int
	baseline int
	windows  string
	keep     bool
}

func main() {
	var c config
	flag.StringVar(&c.spec, "spec", "stampede", "simulated fabric spec (see netloom topo gen)")
	flag.IntVar(&c.rounds, "rounds", 3, "sweeps per window size")
	flag.IntVar(&c.baseline, "baseline", 40, "switches to time perfquery on (0: none)")
	flag.StringVar(&c.windows, "windows", "8,16,64", "Parallel values to try (capped by the source under umad2sim)")
	flag.BoolVar(&c.keep, "keep", false, "keep the scratch directory")
	flag.Parse()
	var err error
	if v := os.Getenv(childVar); v != "" {
		err = child(c)
		ibsim.RemoveSysTree()
	} else {
		err = parent(c)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ibbench:", err)
		os.Exit(1)
	}
}

func parent(c config) error {
	if m := ibsim.Missing(); m != "" {
		return errors.New(m)
	}
	dir, err := os.MkdirTemp("", "ibbench-")
	if err != nil {
		return err
	}
	if !c.keep {
		defer os.RemoveAll(dir)
	}
	ctx := context.Background()
	net := filepath.Join(dir, "fabric.net")
	sp, err := sim.ParseSpec(c.spec)
	if err != nil {
		return err
	}
	topo, _, err := sim.Generate(ctx, sp)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := sim.WriteNetfile(&buf, topo); err != nil {
		return err
	}
	if err := os.WriteFile(net, buf.Bytes(), 0o644); err != nil {
		return err
	}
	cn := topo.Counts()
	switches, ports, hosts := cn.Switches, cn.SwitchPorts, cn.CAs
	fmt.Printf("fabric %s: %d switches (%d ports), %d hosts, %d links\n", c.spec, switches, ports, hosts, cn.Links)
	t0 := time.Now()
	f, err := ibsim.Start(ctx, net, ibsim.Options{
		Nodes: 2 * (hosts + switches), Switches: 2 * switches, Ports: 2 * (ports + hosts),
		Timeout: 10 * time.Minute, Keep: c.keep,
	})
	if err != nil {
		return err
	}
	defer f.Stop()
	fmt.Printf("ibsim + OpenSM ready in %s (%s)\n", time.Since(t0).Round(time.Millisecond), f.Dir)
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Env = append(os.Environ(), append(f.Env(), childVar+"="+f.Dir+"|"+f.SockName)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("measuring child: %w", err)
	}
	if c.baseline > 0 {
		return baseline(ctx, f, c.baseline, switches)
	}
	return nil
}

func child(c config) error {
	ctx := context.Background()
	s, err := ib.Open(ib.Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	t0 := time.Now()
	topo, err := s.Discover(ctx)
	if err != nil {
		return err
	}
	cn := topo.Counts()
	fmt.Printf("in flight at most %d queries\n", s.MaxInFlight())
	fmt.Printf("Discover: %s (%d switches, %d CAs, %d links)\n", time.Since(t0).Round(time.Millisecond), cn.Switches, cn.CAs, cn.Links)
	ports := topo.SwitchPorts(false)
	for _, w := range strings.Split(c.windows, ",") {
		par, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil {
			return fmt.Errorf("-windows %q: %w", c.windows, err)
		}
		for r := 0; r < c.rounds; r++ {
			t0 = time.Now()
			rs, err := s.Sweep(ctx, topo, ports, fabric.SweepOptions{Parallel: par})
			if err != nil {
				return err
			}
			d := time.Since(t0)
			bad := 0
			for _, x := range rs {
				if x.Err != nil {
					bad++
				}
			}
			note := ""
			if r == 0 && w == strings.Split(c.windows, ",")[0] {
				note = " (first: includes ClassPortInfo per node)"
			}
			fmt.Printf("Sweep parallel=%d: %d ports in %s, %.0f ports/s, %d errors%s\n",
				par, len(ports), d.Round(time.Millisecond), float64(len(ports))/d.Seconds(), bad, note)
		}
	}
	t0 = time.Now()
	ft, err := s.ForwardingTables(ctx, topo)
	if err != nil {
		return err
	}
	fmt.Printf("ForwardingTables: %d switches in %s\n", len(ft), time.Since(t0).Round(time.Millisecond))
	return nil
}

// baseline times perfquery -x -l LID 255 on n switches and scales to all.
func baseline(ctx context.Context, f *ibsim.Fabric, n, switches int) error {
	_, lids, err := f.LIDs()
	if err != nil {
		return err
	}
	if n > len(lids) {
		n = len(lids)
	}
	t0 := time.Now()
	for _, l := range lids[:n] {
		if _, err := f.Run(ctx, "perfquery", "-x", "-l", strconv.Itoa(l), "255"); err != nil {
			return err
		}
	}
	d := time.Since(t0)
	per := d / time.Duration(n)
	fmt.Printf("baseline perfquery -x -l LID 255: %d switches in %s, %s each, %s for all %d switches\n",
		n, d.Round(time.Millisecond), per.Round(time.Microsecond), (per * time.Duration(switches)).Round(time.Millisecond), switches)
	return nil
}
