package ethlab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// DefaultSFlowRate is the sampling rate of the lab's sFlow exporters when
// Options.SFlowRate is 0: 1 in 100, some hundred samples a second per busy
// port at the lab's few Gbit/s, while pmacctd still keeps up.
const DefaultSFlowRate = 100

// SFlowProbe is one sFlow exporter of the lab: a pmacctd (sfprobe plugin)
// on one switch port, sampling what leaves the port.
type SFlowProbe struct {
	Switch string `json:"switch"`
	Port   string `json:"port"`
	// IfIndex is the port's ifIndex (the kernel's, in the switch's
	// namespace), which every sample gives as its output interface.
	IfIndex int `json:"ifindex"`
	// Agent is the agent address in its datagrams: the switch's
	// management address, where Netloom's eth source polls it.
	Agent string `json:"agent"`
	// Collector is where it sends them ("IP:PORT").
	Collector string `json:"collector"`
	// Rate: one packet in Rate is sampled.
	Rate int `json:"rate"`
}

// SFlowProbes lists the lab's sFlow exporters, one per switch port, by
// switch and port (nil when the lab was started without Options.SFlow).
func (l *Lab) SFlowProbes() []SFlowProbe { return append([]SFlowProbe(nil), l.probes...) }

// checkSFlow validates Options.SFlow and SFlowRate and sets the default rate.
func checkSFlow(opt *Options) error {
	if opt.SFlow == "" {
		if opt.SFlowRate != 0 {
			return errors.New("ethlab: sflow rate without a collector (Options.SFlow, --sflow)")
		}
		return nil
	}
	i := strings.LastIndexByte(opt.SFlow, ':')
	host, port := opt.SFlow[:max(i, 0)], opt.SFlow[i+1:]
	p, err := strconv.Atoi(port)
	if i < 0 || err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("ethlab: sflow collector %q: want IP:PORT or :PORT (the lab's management address)", opt.SFlow)
	}
	if host != "" {
		if _, err := netip.ParseAddr(host); err != nil {
			return fmt.Errorf("ethlab: sflow collector %q: %q is no IP address", opt.SFlow, host)
		}
	}
	if opt.SFlowRate < 0 {
		return fmt.Errorf("ethlab: sflow rate %d: want 1 or more (1 in N)", opt.SFlowRate)
	}
	if opt.SFlowRate == 0 {
		opt.SFlowRate = DefaultSFlowRate
	}
	if _, err := exec.LookPath("pmacctd"); err != nil {
		return errors.New("ethlab: sflow: pmacctd missing (scripts/install-deps.sh installs pmacct)")
	}
	return nil
}

// startSFlow starts one pmacctd per switch port when Options.SFlow is set
// (docs/sflow.md's configuration: pmacctd 1.7.7 takes the plugin's keys
// under its name), each in its own process group, and waits until every one
// samples.
func (l *Lab) startSFlow(ctx context.Context) error {
	if l.opt.SFlow == "" {
		return nil
	}
	collector := l.opt.SFlow
	if strings.HasPrefix(collector, ":") {
		collector = l.MgmtAddr() + collector
	}
	var logs []string
	for _, name := range l.order {
		n := l.nodes[name]
		if n.Kind != "switch" {
			continue
		}
		for _, port := range n.Ports {
			b, err := exec.CommandContext(ctx, "ip", "netns", "exec", n.NS, "cat", "/sys/class/net/"+port+"/ifindex").Output()
			if err != nil {
				return fmt.Errorf("ethlab: ifindex of %s %s: %v", n.Name, port, err)
			}
			idx, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				return fmt.Errorf("ethlab: ifindex of %s %s: %q", n.Name, port, b)
			}
			p := SFlowProbe{Switch: n.Name, Port: port, IfIndex: idx, Agent: n.MgmtIP, Collector: collector, Rate: l.opt.SFlowRate}
			conf := filepath.Join(l.Dir, n.Name+"-"+port+"-pmacctd.conf")
			text := fmt.Sprintf("daemonize: false\npcap_interface: %s\npcap_direction: out\nplugins: sfprobe[p]\n"+
				"sfprobe_receiver[p]: %s\nsampling_rate[p]: %d\nsfprobe_agentip[p]: %s\nsfprobe_ifindex[p]: %d\nsfprobe_direction[p]: out\n",
				port, collector, p.Rate, p.Agent, p.IfIndex)
			if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
				return err
			}
			// pmacctd forks its plugin: both stay in the process group
			// startProc gives it, and in the namespace, whose processes
			// Close and Sweep kill.
			cmd := exec.Command("ip", "netns", "exec", n.NS, "pmacctd", "-f", conf)
			logName := n.Name + "-" + port + "-pmacctd"
			if err := l.startProc(logName, cmd); err != nil {
				return err
			}
			logs = append(logs, filepath.Join(l.Dir, logName+".log"))
			l.probes = append(l.probes, p)
		}
	}
	// pmacctd logs its sampling rate once its capture is open.
	deadline := time.Now().Add(l.opt.Timeout)
	for _, lf := range logs {
		for {
			b, _ := os.ReadFile(lf)
			if strings.Contains(string(b), "Sampling at") {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("ethlab: pmacctd did not start sampling (%s):\n%s", lf, b)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// Pin routes both directions of the traffic between hosts a and b over
// spine (mode l3): on each host's leaf, a policy rule for the pair (from
// one host's address to the other's, before the main table) looks up a
// table of the leaf's own for that spine, whose route to the other host
// goes to the spine only. The leaves' ECMP hash then no longer chooses for
// that pair, whatever its ports; other pairs keep it. Pinning a pair again
// moves it. a and b must be on different leaves, each linked to spine.
func (l *Lab) Pin(ctx context.Context, a, b, spine string) error {
	if l.Desc.Mode != "l3" {
		return errors.New("ethlab: pin: a routed lab only (mode l3)")
	}
	ha, okA := l.HostOf(a)
	hb, okB := l.HostOf(b)
	if !okA || !okB {
		return fmt.Errorf("ethlab: pin: %s and %s: want two hosts of the lab", a, b)
	}
	sp, ok := l.nodes[spine]
	if !ok || sp.Kind != "switch" {
		return fmt.Errorf("ethlab: pin: no switch %q", spine)
	}
	la, lb := l.leafOf(ha.Name), l.leafOf(hb.Name)
	if la == "" || lb == "" || la == lb {
		return fmt.Errorf("ethlab: pin: %s (leaf %q) and %s (leaf %q): want hosts on two different leaves", ha.Name, la, hb.Name, lb)
	}
	table := 0
	for i, name := range l.order {
		if name == spine {
			table = 100 + i
		}
	}
	for _, dir := range [][3]string{{la, ha.DataIP, hb.DataIP}, {lb, hb.DataIP, ha.DataIP}} {
		leaf, src, dst := dir[0], dir[1], dir[2]
		var port, via string
		for _, w := range l.wires {
			if w.A.Node == leaf && w.B.Node == spine {
				port, via = w.A.If, w.BIP
			} else if w.B.Node == leaf && w.A.Node == spine {
				port, via = w.B.If, w.AIP
			}
		}
		if port == "" {
			return fmt.Errorf("ethlab: pin: %s has no link to %s", leaf, spine)
		}
		ns := l.nodes[leaf].NS
		// The pair's earlier pin, if any, goes first.
		for i := 0; i < 10; i++ {
			if exec.CommandContext(ctx, "ip", "-n", ns, "rule", "del", "from", src, "to", dst).Run() != nil {
				break
			}
		}
		if err := ipBatch(ctx, ns, []string{
			fmt.Sprintf("route replace %s/32 via %s dev %s table %d", dst, via, port, table),
			fmt.Sprintf("rule add from %s/32 to %s/32 lookup %d pref 1000", src, dst, table),
		}); err != nil {
			return fmt.Errorf("ethlab: pin %s -> %s over %s: %w", src, dst, spine, err)
		}
	}
	return nil
}

// leafOf is the switch a host is linked to ("" if none).
func (l *Lab) leafOf(host string) string {
	for _, w := range l.wires {
		if w.A.Node == host {
			return w.B.Node
		}
		if w.B.Node == host {
			return w.A.Node
		}
	}
	return ""
}
