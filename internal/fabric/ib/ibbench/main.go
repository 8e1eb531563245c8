// Command ibbench measures the ib source against a simulated fabric: it
// writes a two-level fat tree net file, starts ibsim and OpenSM, re-runs
// itself under umad2sim, and times Discover, Sweep (several windows),
// ForwardingTables and, as the baseline, `perfquery -x -l LID 255` per
// switch (a sample of switches, scaled up).
//
//	go run ./internal/fabric/ib/ibbench -leaves 509 -spines 255 -radix 36
//
// Defaults give 764 36-port switches (27,504 switch ports) and 9,162 hosts,
// the switch-port count of the scale reference.
package main

import (
	"bufio"
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
	"github.com/netloom/netloom/test/ibsim"
)

const childVar = "NETLOOM_IBBENCH_CHILD"

type config struct {
	leaves, spines, radix int
	rounds                int
	baseline              int
	windows               string
	keep                  bool
}

func main() {
	var c config
	flag.IntVar(&c.leaves, "leaves", 509, "leaf switches")
	flag.IntVar(&c.spines, "spines", 255, "spine switches")
	flag.IntVar(&c.radix, "radix", 36, "ports per switch; leaves give half to hosts")
	flag.IntVar(&c.rounds, "rounds", 3, "sweeps per window size")
	flag.IntVar(&c.baseline, "baseline", 40, "switches to time perfquery on (0: none)")
	flag.StringVar(&c.windows, "windows", "16,64,256", "Parallel values to try")
	flag.BoolVar(&c.keep, "keep", false, "keep the scratch directory")
	flag.Parse()
	var err error
	if v := os.Getenv(childVar); v != "" {
		err = child(c)
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
	net := filepath.Join(dir, "fattree.net")
	hosts, ports, err := writeFatTree(net, c.leaves, c.spines, c.radix)
	if err != nil {
		return err
	}
	switches := c.leaves + c.spines
	fmt.Printf("fabric: %d switches (%d ports), %d hosts\n", switches, ports, hosts)
	ctx := context.Background()
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
	lids, err := switchLIDs(filepath.Join(f.Dir, "opensm", "guid2lid"))
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

func switchLIDs(guid2lid string) ([]int, error) {
	file, err := os.Open(guid2lid)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	var lids []int
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 2 {
			continue
		}
		g, _ := strconv.ParseUint(strings.TrimPrefix(fs[0], "0x"), 16, 64)
		l, _ := strconv.ParseUint(strings.TrimPrefix(fs[1], "0x"), 16, 16)
		if g >= 0x200000 && l != 0 { // ibsim numbers switches from 0x200000
			lids = append(lids, int(l))
		}
	}
	return lids, sc.Err()
}

// writeFatTree writes a two-level fat tree: each leaf gives radix/2 ports
// to hosts and spreads radix/2 uplinks over the spines round-robin. The
// first entry is a host, ibsim's point of attachment.
func writeFatTree(path string, leaves, spines, radix int) (hosts, ports int, err error) {
	down := radix / 2
	up := radix - down
	if leaves*up > spines*radix {
		return 0, 0, fmt.Errorf("%d leaves x %d uplinks do not fit %d spines x %d ports", leaves, up, spines, radix)
	}
	type end struct{ sw, port int }
	// spine s port p <- leaf l uplink u
	spinePeer := make([][]end, spines)
	for s := range spinePeer {
		spinePeer[s] = make([]end, radix+1)
	}
	leafUp := make([][]end, leaves)
	next := make([]int, spines)
	k := 0
	for l := 0; l < leaves; l++ {
		leafUp[l] = make([]end, up)
		for u := 0; u < up; u++ {
			s := k % spines
			for next[s] >= radix {
				k++
				s = k % spines
			}
			k++
			next[s]++
			leafUp[l][u] = end{s, next[s]}
			spinePeer[s][next[s]] = end{l, down + 1 + u}
		}
	}
	var b strings.Builder
	host := func(i int) string { return fmt.Sprintf(`"H-%016x"`, 0x1000000+i) }
	leaf := func(i int) string { return fmt.Sprintf(`"S-%016x"`, 0x10000+i) }
	spine := func(i int) string { return fmt.Sprintf(`"S-%016x"`, 0x20000+i) }
	for l := 0; l < leaves; l++ {
		for p := 1; p <= down; p++ {
			h := l*down + p
			fmt.Fprintf(&b, "Hca\t1 %s\t\t# \"n%d HCA-1\"\n[1]\t%s[%d]\n\n", host(h), h, leaf(l), p)
		}
	}
	for l := 0; l < leaves; l++ {
		fmt.Fprintf(&b, "Switch\t%d %s\t\t# \"leaf%d\" enhanced port 0 lid 0 lmc 0\n", radix, leaf(l), l+1)
		for p := 1; p <= down; p++ {
			fmt.Fprintf(&b, "[%d]\t%s[1]\n", p, host(l*down+p))
		}
		for u, e := range leafUp[l] {
			fmt.Fprintf(&b, "[%d]\t%s[%d]\n", down+1+u, spine(e.sw), e.port)
		}
		b.WriteString("\n")
	}
	for s := 0; s < spines; s++ {
		fmt.Fprintf(&b, "Switch\t%d %s\t\t# \"spine%d\" enhanced port 0 lid 0 lmc 0\n", radix, spine(s), s+1)
		for p := 1; p <= next[s]; p++ {
			e := spinePeer[s][p]
			fmt.Fprintf(&b, "[%d]\t%s[%d]\n", p, leaf(e.sw), e.port)
		}
		b.WriteString("\n")
	}
	hosts = leaves * down
	ports = (leaves + spines) * radix
	return hosts, ports, os.WriteFile(path, []byte(b.String()), 0o644)
}
