// Command ethlab builds, lists and removes Ethernet labs of network
// namespaces (as root); see docs/ethlab.md.
//
//	ethlab up [--id ID] [--sysname NAME] [--sflow IP:PORT|:PORT [--sflow-rate N]] (DESC.yaml | --preset NAME)
//	ethlab pin ID HOST HOST SPINE
//	ethlab down ID|--all
//	ethlab status
//	ethlab mpirun ID [--impl openmpi|mpich] [--hosts h1,h3] [--ppn N] PROGRAM [ARGS...]
//	ethlab config ID [--v3]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/netloom/netloom/test/ethlab"
)

func usage() {
	fmt.Fprintf(os.Stderr, `usage (as root):
  ethlab up [--id ID] [--no-wait] [--sysname NAME] [--sflow IP:PORT|:PORT [--sflow-rate N]] (DESC.yaml | --preset NAME)   presets: %s
  ethlab pin ID HOST HOST SPINE   mode l3: both directions between the two hosts over that spine (not ECMP's hash)
  ethlab down ID | --all
  ethlab status
  ethlab mpirun ID [--impl openmpi|mpich] [--hosts h1,h3] [--ppn N] [--env NAME=VALUE]... PROGRAM [ARGS...]
  ethlab config ID [--v3]     Netloom's Ethernet source configuration for the lab (netloom serve --fabric eth:FILE)
`, strings.Join(ethlab.Presets(), ", "))
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "up":
		err = up(os.Args[2:])
	case "down":
		err = down(os.Args[2:])
	case "status":
		err = status()
	case "mpirun":
		err = mpirun(os.Args[2:])
	case "config":
		err = config(os.Args[2:])
	case "pin":
		err = pin(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ethlab:", err)
		os.Exit(1)
	}
}

func up(args []string) error {
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	preset := fs.String("preset", "", "built-in description: "+strings.Join(ethlab.Presets(), ", "))
	id := fs.String("id", "", "lab id (1-5 of [a-z0-9]); default random")
	noWait := fs.Bool("no-wait", false, "do not wait for LLDP neighbours")
	sysName := fs.String("sysname", "", "the sysName every switch's snmpd answers (lldpd keeps each switch's own name); default each its own")
	sflow := fs.String("sflow", "", "every switch port exports sFlow v5 here (a pmacctd each): IP:PORT, or :PORT for the lab's management address")
	sflowRate := fs.Int("sflow-rate", 0, fmt.Sprintf("sample 1 packet in N (default %d)", ethlab.DefaultSFlowRate))
	_ = fs.Parse(args)
	var d ethlab.Desc
	switch {
	case *preset != "" && fs.NArg() == 0:
		var ok bool
		if d, ok = ethlab.PresetOK(*preset); !ok {
			return fmt.Errorf("no preset %q (have %s)", *preset, strings.Join(ethlab.Presets(), ", "))
		}
	case *preset == "" && fs.NArg() == 1:
		var err error
		if d, err = ethlab.LoadDesc(fs.Arg(0)); err != nil {
			return err
		}
	default:
		usage()
	}
	if *sysName != "" {
		d.SysName = *sysName
		if err := d.Validate(); err != nil {
			return err
		}
	}
	if m := ethlab.Missing(); m != "" {
		return fmt.Errorf("%s", m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t0 := time.Now()
	lab, err := ethlab.Start(ctx, d, ethlab.Options{ID: *id, Persist: true, SFlow: *sflow, SFlowRate: *sflowRate})
	if err != nil {
		return err
	}
	if !*noWait {
		if err := lab.WaitLLDP(ctx); err != nil {
			return fmt.Errorf("lab %s is up but: %w (remove it: ethlab down %s)", lab.ID, err, lab.ID)
		}
	}
	fmt.Printf("lab %s up in %.1fs (state %s)\n", lab.ID, time.Since(t0).Seconds(), lab.Dir)
	fmt.Printf("management %s (root namespace %s on %s), data %s\n", lab.MgmtCIDR(), lab.MgmtAddr(), lab.MgmtBridge(), lab.DataCIDR())
	for _, n := range lab.Nodes() {
		fmt.Printf("  %-7s %-10s ns %-20s mgmt %-12s data %-12s ports %s\n", n.Kind, n.Name, n.NS, n.MgmtIP, n.DataIP, strings.Join(n.Ports, ","))
	}
	for _, w := range lab.Wiring() {
		lim := ""
		if w.RateMbit > 0 {
			lim = fmt.Sprintf("  (%g Mbit/s %s)", w.RateMbit, w.Qdisc)
		}
		if w.AIP != "" {
			lim += fmt.Sprintf("  (routed %s - %s)", w.AIP, w.BIP)
		}
		fmt.Printf("  link %s %s <-> %s %s%s\n", w.A.Node, w.A.If, w.B.Node, w.B.If, lim)
	}
	for _, t := range lab.SNMPTargets() {
		fmt.Printf("  snmp %-8s %s  sysName %s  v2c community %s  v3 %s SHA %s AES %s\n", t.Switch, t.Addr, lab.SysName(t.Switch), t.Community, t.V3User, t.V3AuthPass, t.V3PrivPass)
	}
	printSFlow(lab.SFlowProbes())
	fmt.Printf("remove with: scripts/ethlab down %s\n", lab.ID)
	return nil
}

func down(args []string) error {
	if len(args) != 1 {
		usage()
	}
	if args[0] == "--all" {
		var errs []string
		for _, st := range ethlab.Labs() {
			if err := ethlab.Sweep(st.ID); err != nil {
				errs = append(errs, err.Error())
			}
		}
		if err := ethlab.Sweep(""); err != nil {
			errs = append(errs, err.Error())
		}
		if len(errs) > 0 {
			return fmt.Errorf("%s", strings.Join(errs, "; "))
		}
		return nil
	}
	if err := ethlab.Sweep(args[0]); err != nil {
		return err
	}
	fmt.Printf("lab %s removed\n", args[0])
	return nil
}

func status() error {
	labs := ethlab.Labs()
	if len(labs) == 0 {
		fmt.Println("no labs")
		return nil
	}
	for _, l := range labs {
		owner := "persistent"
		if l.Owner != 0 {
			owner = fmt.Sprintf("owner pid %d", l.Owner)
			if !l.OwnerAlive {
				owner += " (gone: swept at the next start)"
			}
		}
		fmt.Printf("lab %s  %s  %d nodes, %d namespaces present, mgmt %s, created %s\n",
			l.ID, owner, l.Nodes, l.Namespaces, l.MgmtAddr, l.Created)
		for _, t := range l.Targets {
			fmt.Printf("  snmp %-8s %s\n", t.Switch, t.Addr)
		}
		printSFlow(l.SFlow)
	}
	return nil
}

type envList []string

func (e *envList) String() string     { return strings.Join(*e, " ") }
func (e *envList) Set(v string) error { *e = append(*e, v); return nil }

func mpirun(args []string) error {
	if len(args) < 1 {
		usage()
	}
	lab, err := ethlab.Open(args[0])
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("mpirun", flag.ExitOnError)
	impl := fs.String("impl", "openmpi", "openmpi or mpich")
	hosts := fs.String("hosts", "", "comma-separated hosts (default all)")
	ppn := fs.Int("ppn", 1, "ranks per host")
	var env envList
	fs.Var(&env, "env", "NAME=VALUE for the ranks (repeatable)")
	_ = fs.Parse(args[1:])
	if fs.NArg() == 0 {
		usage()
	}
	spec := ethlab.RunSpec{Impl: *impl, RanksPerHost: *ppn, Argv: fs.Args(), Env: env}
	if *hosts != "" {
		spec.Hosts = strings.Split(*hosts, ",")
	}
	out, err := lab.MPIRun(context.Background(), spec)
	if err != nil {
		return err // it holds the output
	}
	_, err = os.Stdout.Write(out)
	return err
}

// config prints the configuration of Netloom's Ethernet source that polls
// the lab's switches (docs/ethernet.md).
func config(args []string) error {
	if len(args) < 1 {
		usage()
	}
	fs := flag.NewFlagSet("config", flag.ExitOnError)
	v3 := fs.Bool("v3", false, "SNMPv3 authPriv with the lab's user instead of SNMPv2c")
	_ = fs.Parse(args[1:])
	lab, err := ethlab.Open(args[0])
	if err != nil {
		return err
	}
	_, err = fmt.Print(lab.NetloomConfig(*v3, nil))
	return err
}

// printSFlow prints a lab's sFlow exporters, one line per switch.
func printSFlow(probes []ethlab.SFlowProbe) {
	for i := 0; i < len(probes); {
		p := probes[i]
		var ports []string
		for ; i < len(probes) && probes[i].Switch == p.Switch; i++ {
			ports = append(ports, fmt.Sprintf("%s (ifIndex %d)", probes[i].Port, probes[i].IfIndex))
		}
		fmt.Printf("  sflow %-8s agent %s -> %s, 1 in %d, out of %s\n", p.Switch, p.Agent, p.Collector, p.Rate, strings.Join(ports, ", "))
	}
}

// pin routes a host pair's traffic over one spine (ethlab.Lab.Pin).
func pin(args []string) error {
	if len(args) != 4 {
		usage()
	}
	lab, err := ethlab.Open(args[0])
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := lab.Pin(ctx, args[1], args[2], args[3]); err != nil {
		return err
	}
	fmt.Printf("lab %s: %s <-> %s pinned over %s\n", lab.ID, args[1], args[2], args[3])
	return nil
}
