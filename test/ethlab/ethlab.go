// Package ethlab builds a small Ethernet fabric out of Linux network
// namespaces for tests, benchmarks and demos (as root): hosts and switches
// are namespaces, data links are veth pairs, every switch is a Linux bridge,
// and a separate management network connects the root namespace to every
// node. lldpd runs in every namespace, snmpd (IF-MIB, and LLDP-MIB through
// lldpd's AgentX sub-agent) in every switch, and MPI jobs run across the
// hosts under Open MPI or MPICH. See docs/ethlab.md.
//
// API:
//
//	Start(ctx, Desc, Options) (*Lab, error)  // build and start a lab
//	StartT(t, Desc, Options) *Lab            // same; skips when Missing(), Close on Cleanup
//	Preset(name) Desc, LoadDesc(path), ParseDesc(yaml)  // presets: single, two-leaf, leaf-spine, ecmp
//	Open(id) (*Lab, error)                   // attach to a running lab (scripts/ethlab up)
//	(*Lab).Close() error                     // remove every namespace, link, qdisc, process
//	(*Lab).SNMPTargets() []Target            // switches' SNMP endpoints, v2c and v3 credentials
//	(*Lab).Wiring() []Wire                   // both ends of every data link
//	(*Lab).WaitLLDP(ctx) error               // until every lldpd (and LLDP-MIB) sees its neighbours
//	(*Lab).Neighbors(node) ([]Neighbor, error), LLDPMismatch() []string
//	(*Lab).IfCounters(node, ifname) (Counters, error)  // the kernel's, in the node's namespace
//	Options{SFlow: ":6343"}, (*Lab).SFlowProbes()  // every switch port exports sFlow (pmacctd)
//	(*Lab).Pin(ctx, a, b, spine) error       // mode l3: a host pair's traffic over one spine
//	(*Lab).MPIRun(ctx, RunSpec) ([]byte, error), MPICommand(ctx, RunSpec) (*exec.Cmd, error)
//	(*Lab).MgmtAddr() string                 // root namespace's address on the management network
//	(*Lab).MgmtCIDR(), DataCIDR(), MgmtBridge(), AgentScript()
//	(*Lab).HostOf(name or address) (Node, bool), Node(name), Nodes()
//	(*Lab).Command(ctx, node, argv...) (*exec.Cmd, error)  // in a node's namespace, under its hostname
//	Sweep(id), Labs()                        // remove a lab left behind (id "": all stale ones); list labs
//
// Example:
//
//	lab := ethlab.StartT(t, ethlab.Preset("two-leaf"), ethlab.Options{})
//	if err := lab.WaitLLDP(ctx); err != nil { t.Fatal(err) }
//	out, err := lab.MPIRun(ctx, ethlab.RunSpec{Impl: "openmpi", Hosts: []string{"h1", "h3"},
//		Argv: []string{"./ring"}, Env: []string{"LD_PRELOAD=" + agentLib, "NETLOOM_DAEMON=" + lab.MgmtAddr() + ":9999"}})
//	for _, tg := range lab.SNMPTargets() { poll(tg.Addr, tg.Community) }
//
// Networks: the data fabric (DataCIDR, 10.(100+slot).0.0/16) carries only the
// MPI ranks' traffic (and LLDP/ARP): hosts have one address on their data
// interface, switches none (Desc.Mode "l2", bridges, a loop-free tree) or
// their gateway and routed-link addresses (Mode "l3", ECMP routes). The management network (MgmtCIDR,
// 10.(200+slot).0.0/16) is a bridge in the root namespace with a veth
// ("mgmt0") into every node: snmpd listens there, lldpd advertises that
// address, the agents' datagrams reach the daemon there, and MPI launchers
// run their out-of-band traffic over it.
//
// Every name a lab makes carries its id: namespaces "ethl<ID>-<node>", root
// namespace links "ethl<ID>-br" and "ethl<ID>-m<N>", state under
// /run/netloom-ethlab/<ID>. Start first sweeps labs whose owning process is
// gone (a killed test), so nothing outlives its test for long.
package ethlab

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// StateRoot holds one directory per lab (state.json, logs, sockets, pidfiles).
const StateRoot = "/run/netloom-ethlab"

// NSPrefix starts every namespace and root-namespace link name a lab makes.
const NSPrefix = "ethl"

const maxSlots = 50

var idRe = regexp.MustCompile(`^[a-z0-9]{1,5}$`)

// Options tune Start. The zero value is fine.
type Options struct {
	// ID names the lab (1-5 of [a-z0-9]); default random. It is part of
	// every name the lab makes, so labs side by side do not clash.
	ID string
	// Persist keeps the lab when the starting process exits (the CLI's
	// "up"): no Sweep removes it until Sweep(id) or "ethlab down ID".
	Persist bool
	// Community is the SNMPv2c read-only community; default "public".
	Community string
	// V3User, V3AuthPass, V3PrivPass: the SNMPv3 authPriv user (SHA, AES);
	// defaults "netloom", "netloom-auth", "netloom-priv".
	V3User, V3AuthPass, V3PrivPass string
	// LLDPInterval is lldpd's transmit interval in seconds; default 5.
	LLDPInterval int
	// Timeout bounds the wait for snmpd to answer; default 60s.
	Timeout time.Duration
	// SFlow, when set, makes every switch export sFlow v5 to this collector
	// ("IP:PORT", or ":PORT" for the root namespace's management address,
	// MgmtAddr): one pmacctd (sfprobe plugin) per switch port, in the
	// switch's namespace and its own process group, sampling the port's
	// egress 1 in SFlowRate, with the port's ifIndex and the switch's
	// management address (the address Netloom's eth source polls it at)
	// as agent address. See SFlowProbes and docs/ethlab.md.
	SFlow string
	// SFlowRate is the sampling rate, 1 in N; default 100.
	SFlowRate int
}

// Node is a host or switch namespace.
type Node struct {
	Name string `json:"name"`
	// Kind is "host" or "switch"; Role "leaf"/"spine" for switches.
	Kind string `json:"kind"`
	Role string `json:"role,omitempty"`
	// NS is the network namespace (ip netns exec NS ...).
	NS string `json:"ns"`
	// MgmtIf (always "mgmt0") and MgmtIP: the node's management interface.
	MgmtIf string `json:"mgmt_if"`
	MgmtIP string `json:"mgmt_ip"`
	// DataIP is a host's address on the data fabric ("" for switches).
	DataIP string `json:"data_ip,omitempty"`
	// Ports are the node's data interfaces in link order (hosts eth0...,
	// switches swp1...).
	Ports []string `json:"ports"`
	// Bridge is a switch's bridge ("br0").
	Bridge string `json:"bridge,omitempty"`
	// Mode l3 only: a host's Gateway (its leaf's address); a leaf's Subnet
	// (its hosts' /24, the gateway on its bridge).
	Gateway string `json:"gateway,omitempty"`
	Subnet  string `json:"subnet,omitempty"`

	rootIf string
}

// End is one end of a data link.
type End struct {
	Node string `json:"node"`
	If   string `json:"if"`
}

// Wire is a data link as built: both ends, and its tc limit if any.
type Wire struct {
	A        End     `json:"a"`
	B        End     `json:"b"`
	RateMbit float64 `json:"rate_mbit,omitempty"`
	Qdisc    string  `json:"qdisc,omitempty"`
	// AIP, BIP: the ends' addresses on a routed (mode l3, switch to
	// switch) link, a /31.
	AIP string `json:"a_ip,omitempty"`
	BIP string `json:"b_ip,omitempty"`
}

// Target is a switch's SNMP agent.
type Target struct {
	Switch string `json:"switch"`
	// Addr is "ip:port" on the management network.
	Addr      string `json:"addr"`
	Community string `json:"community"`
	// V3User etc.: an authPriv user, SHA (HMAC-SHA-96) and AES (128).
	V3User      string `json:"v3_user"`
	V3AuthProto string `json:"v3_auth_proto"`
	V3AuthPass  string `json:"v3_auth_pass"`
	V3PrivProto string `json:"v3_priv_proto"`
	V3PrivPass  string `json:"v3_priv_pass"`
}

// Lab is a running lab. Methods are safe for concurrent use, except Close.
type Lab struct {
	ID   string
	Desc Desc
	// Dir is the lab's state directory (logs: DIR/NODE-lldpd.log, ...).
	Dir string

	slot  int
	opt   Options
	nodes map[string]*Node
	order []string
	wires []Wire

	mu    sync.Mutex
	procs []*exec.Cmd
	done  bool

	probes []SFlowProbe
}

type stateFile struct {
	ID        string   `json:"id"`
	Owner     int      `json:"owner"` // 0: persistent
	OwnerTick uint64   `json:"owner_start"`
	Slot      int      `json:"slot"`
	Desc      Desc     `json:"desc"`
	Nodes     []*Node  `json:"nodes,omitempty"`
	Wires     []Wire   `json:"wires,omitempty"`
	Targets   []Target `json:"snmp,omitempty"`
	MgmtAddr  string   `json:"mgmt_addr,omitempty"`
	Created   string   `json:"created"`
	// SFlow: the pmacctd sFlow exporters, one per switch port (none when
	// Options.SFlow was empty).
	SFlow []SFlowProbe `json:"sflow,omitempty"`
}

// Missing says why a lab cannot run here ("" when it can): not root, or a
// tool missing (install them with scripts/install-deps.sh).
func Missing() string {
	if os.Geteuid() != 0 {
		return "ethlab needs root (network namespaces)"
	}
	var miss []string
	for _, b := range []string{"ip", "tc", "unshare", "lldpd", "lldpcli", "snmpd", "snmpget", "snmpwalk", "python3"} {
		if _, err := exec.LookPath(b); err != nil {
			miss = append(miss, b)
		}
	}
	if len(miss) > 0 {
		return "ethlab: missing " + strings.Join(miss, ", ") + " (run scripts/install-deps.sh)"
	}
	return ""
}

// StartT starts a lab for a test: it skips the test when Missing() says the
// lab cannot run, fails it when Start fails, and closes the lab on Cleanup
// (checking that nothing is left).
func StartT(t testing.TB, d Desc, opt Options) *Lab {
	t.Helper()
	if m := Missing(); m != "" {
		t.Skip(m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	lab, err := Start(ctx, d, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lab.Close(); err != nil {
			t.Errorf("ethlab close: %v", err)
		}
	})
	return lab
}

// Start builds the lab described by d and starts its daemons. On error
// everything made so far is removed.
func Start(ctx context.Context, d Desc, opt Options) (lab *Lab, err error) {
	if m := Missing(); m != "" {
		return nil, errors.New(m)
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	if opt.Community == "" {
		opt.Community = "public"
	}
	if opt.V3User == "" {
		opt.V3User = "netloom"
	}
	if opt.V3AuthPass == "" {
		opt.V3AuthPass = "netloom-auth"
	}
	if opt.V3PrivPass == "" {
		opt.V3PrivPass = "netloom-priv"
	}
	if len(opt.V3AuthPass) < 8 || len(opt.V3PrivPass) < 8 {
		return nil, errors.New("ethlab: SNMPv3 passphrases need at least 8 characters")
	}
	if opt.LLDPInterval <= 0 {
		opt.LLDPInterval = 5
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 60 * time.Second
	}
	if opt.ID != "" && !idRe.MatchString(opt.ID) {
		return nil, fmt.Errorf("ethlab: id %q: want 1-5 of [a-z0-9]", opt.ID)
	}
	if err := checkSFlow(&opt); err != nil {
		return nil, err
	}
	lab, err = reserve(d, opt)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			if cerr := lab.Close(); cerr != nil {
				err = fmt.Errorf("%w (and cleanup: %v)", err, cerr)
			}
			lab = nil
		}
	}()
	if err := lab.build(ctx); err != nil {
		return lab, err
	}
	if err := lab.startDaemons(ctx); err != nil {
		return lab, err
	}
	if err := lab.startSFlow(ctx); err != nil {
		return lab, err
	}
	if _, err := lab.agentScript(); err != nil {
		return lab, err
	}
	return lab, lab.writeState(true)
}

// reserve sweeps stale labs, picks an id and a slot and writes the state
// directory, all under the lock.
func reserve(d Desc, opt Options) (*Lab, error) {
	unlock, err := lockRoot()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := sweepLocked(""); err != nil {
		return nil, err
	}
	used := map[int]bool{}
	ids := map[string]bool{}
	for _, st := range readStates() {
		used[st.Slot] = true
		ids[st.ID] = true
	}
	for _, ns := range netnsList() {
		if id, ok := labIDOf(ns); ok {
			ids[id] = true
		}
	}
	id := opt.ID
	if id == "" {
		for i := 0; i < 100 && (id == "" || ids[id]); i++ {
			id = randomID()
		}
	}
	if ids[id] {
		return nil, fmt.Errorf("ethlab: lab %s exists (ethlab down %s)", id, id)
	}
	slot := -1
	for s := 0; s < maxSlots; s++ {
		if !used[s] {
			slot = s
			break
		}
	}
	if slot < 0 {
		return nil, fmt.Errorf("ethlab: %d labs running: no free subnet", maxSlots)
	}
	lab, err := layout(id, slot, d, opt)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(lab.Dir, 0o755); err != nil {
		return nil, err
	}
	return lab, lab.writeState(false)
}

// addressL3 gives every leaf with hosts a /24 (gateway .1 on its bridge,
// hosts from .2) and every switch-to-switch link a /31 from 10.D.128.0 up.
func (l *Lab) addressL3() error {
	base := 100 + l.slot
	leafNet := map[string]int{}
	used := map[string]int{}
	p2p := 0
	for i := range l.wires {
		w := &l.wires[i]
		a, b := l.nodes[w.A.Node], l.nodes[w.B.Node]
		if a.Kind == "host" || b.Kind == "host" {
			h, sw := a, b
			if b.Kind == "host" {
				h, sw = b, a
			}
			if leafNet[sw.Name] == 0 {
				leafNet[sw.Name] = len(leafNet) + 1
				if leafNet[sw.Name] > 127 {
					return fmt.Errorf("ethlab: mode l3: at most 127 switches with hosts")
				}
				sw.Subnet = fmt.Sprintf("10.%d.%d.0/24", base, leafNet[sw.Name])
			}
			used[sw.Name]++
			if used[sw.Name] > 250 {
				return fmt.Errorf("ethlab: mode l3: switch %s: at most 250 hosts", sw.Name)
			}
			h.Gateway = fmt.Sprintf("10.%d.%d.1", base, leafNet[sw.Name])
			h.DataIP = fmt.Sprintf("10.%d.%d.%d", base, leafNet[sw.Name], used[sw.Name]+1)
			continue
		}
		if p2p >= 128*128 {
			return fmt.Errorf("ethlab: mode l3: too many switch links")
		}
		w.AIP = fmt.Sprintf("10.%d.%d.%d", base, 128+p2p/128, 2*(p2p%128))
		w.BIP = fmt.Sprintf("10.%d.%d.%d", base, 128+p2p/128, 2*(p2p%128)+1)
		p2p++
	}
	return nil
}

// routesL3 returns, per switch, "ip route" lines that reach every leaf's
// /24 over all next hops on a shortest path (ECMP).
func (l *Lab) routesL3() map[string][]string {
	type adj struct{ peer, via, dev string }
	nb := map[string][]adj{}
	for _, w := range l.wires {
		if w.AIP == "" {
			continue
		}
		nb[w.A.Node] = append(nb[w.A.Node], adj{w.B.Node, w.BIP, w.A.If})
		nb[w.B.Node] = append(nb[w.B.Node], adj{w.A.Node, w.AIP, w.B.If})
	}
	out := map[string][]string{}
	for _, dst := range l.order {
		d := l.nodes[dst]
		if d.Subnet == "" {
			continue
		}
		dist := map[string]int{dst: 0}
		queue := []string{dst}
		for len(queue) > 0 {
			x := queue[0]
			queue = queue[1:]
			for _, a := range nb[x] {
				if _, ok := dist[a.peer]; !ok {
					dist[a.peer] = dist[x] + 1
					queue = append(queue, a.peer)
				}
			}
		}
		for _, sw := range l.order {
			ds, ok := dist[sw]
			if sw == dst || !ok || l.nodes[sw].Kind != "switch" {
				continue
			}
			line := "route add " + d.Subnet
			for _, a := range nb[sw] {
				if dist[a.peer] == ds-1 {
					line += " nexthop via " + a.via + " dev " + a.dev
				}
			}
			out[sw] = append(out[sw], line)
		}
	}
	return out
}

// layout names a lab's namespaces, interfaces and addresses (it makes
// nothing).
func layout(id string, slot int, d Desc, opt Options) (*Lab, error) {
	lab := &Lab{ID: id, Desc: d, Dir: filepath.Join(StateRoot, id), slot: slot, opt: opt, nodes: map[string]*Node{}}
	i := 0
	add := func(n *Node) {
		i++
		n.NS = NSPrefix + id + "-" + n.Name
		n.MgmtIf = "mgmt0"
		n.MgmtIP = lab.mgmtIP(i)
		n.rootIf = fmt.Sprintf("%s%s-m%d", NSPrefix, id, i)
		lab.nodes[n.Name] = n
		lab.order = append(lab.order, n.Name)
	}
	for _, s := range d.Switches {
		add(&Node{Name: s.Name, Kind: "switch", Role: s.Role, Bridge: "br0"})
	}
	for hi, h := range d.Hosts {
		add(&Node{Name: h, Kind: "host", DataIP: lab.dataIP(hi + 1)})
	}
	for _, l := range d.Links {
		a, b := lab.nodes[l.A], lab.nodes[l.B]
		w := Wire{A: End{a.Name, a.nextPort()}, B: End{b.Name, b.nextPort()}, RateMbit: l.RateMbit}
		if l.RateMbit > 0 {
			w.Qdisc = l.Qdisc
			if w.Qdisc == "" {
				w.Qdisc = "tbf"
			}
		}
		a.Ports = append(a.Ports, w.A.If)
		b.Ports = append(b.Ports, w.B.If)
		lab.wires = append(lab.wires, w)
	}
	if d.Mode == "l3" {
		if err := lab.addressL3(); err != nil {
			return nil, err
		}
	}
	return lab, nil
}

func (n *Node) nextPort() string {
	if n.Kind == "switch" {
		return fmt.Sprintf("swp%d", len(n.Ports)+1)
	}
	return fmt.Sprintf("eth%d", len(n.Ports))
}

func randomID() string {
	const al = "abcdefghijklmnopqrstuvwxyz0123456789"
	var b [4]byte
	_, _ = rand.Read(b[:])
	out := make([]byte, 4)
	for i := range b {
		out[i] = al[int(b[i])%len(al)]
	}
	if out[0] >= '0' && out[0] <= '9' {
		out[0] = 'a' + out[0] - '0'
	}
	return string(out)
}

// addr returns base.(n/250).(n%250+1): n=0 is x.x.0.1.
func addr(base, n int) string { return fmt.Sprintf("10.%d.%d.%d", base, n/250, n%250+1) }

func (l *Lab) mgmtIP(i int) string { return addr(200+l.slot, i) }
func (l *Lab) dataIP(i int) string { return addr(100+l.slot, i) }

// MgmtAddr is the root namespace's address on the management network (the
// daemon's UDP listener and SNMP poller bind or route there).
func (l *Lab) MgmtAddr() string { return l.mgmtIP(0) }

// MgmtCIDR is the management network, e.g. "10.200.0.0/16".
func (l *Lab) MgmtCIDR() string { return fmt.Sprintf("10.%d.0.0/16", 200+l.slot) }

// DataCIDR is the data fabric's subnet, e.g. "10.100.0.0/16".
func (l *Lab) DataCIDR() string { return fmt.Sprintf("10.%d.0.0/16", 100+l.slot) }

// MgmtBridge is the management bridge's name in the root namespace.
func (l *Lab) MgmtBridge() string { return NSPrefix + l.ID + "-br" }

// Nodes returns every node, switches first, in description order.
func (l *Lab) Nodes() []Node {
	out := make([]Node, 0, len(l.order))
	for _, n := range l.order {
		out = append(out, *l.nodes[n])
	}
	return out
}

// Node returns the node of that name.
func (l *Lab) Node(name string) (Node, bool) {
	n, ok := l.nodes[name]
	if !ok {
		return Node{}, false
	}
	return *n, true
}

// HostOf returns the host whose hostname (the name in the description) or
// management or data address is h.
func (l *Lab) HostOf(h string) (Node, bool) {
	for _, name := range l.order {
		n := l.nodes[name]
		if n.Kind == "host" && (n.Name == h || n.MgmtIP == h || n.DataIP == h) {
			return *n, true
		}
	}
	return Node{}, false
}

// Wiring returns both ends of every data link, in description order.
func (l *Lab) Wiring() []Wire { return append([]Wire(nil), l.wires...) }

// SNMPTargets returns every switch's SNMP agent (port 161 on its
// management address).
func (l *Lab) SNMPTargets() []Target {
	var out []Target
	for _, name := range l.order {
		n := l.nodes[name]
		if n.Kind != "switch" {
			continue
		}
		out = append(out, Target{Switch: n.Name, Addr: n.MgmtIP + ":161", Community: l.opt.Community,
			V3User: l.opt.V3User, V3AuthProto: "SHA", V3AuthPass: l.opt.V3AuthPass,
			V3PrivProto: "AES", V3PrivPass: l.opt.V3PrivPass})
	}
	return out
}

// run runs one command, returning its output in the error.
func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// ipBatch runs "ip -batch" lines (in namespace ns when not "").
func ipBatch(ctx context.Context, ns string, lines []string) error {
	if len(lines) == 0 {
		return nil
	}
	args := []string{"-batch", "-"}
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	cmd := exec.CommandContext(ctx, "ip", args...)
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func (l *Lab) build(ctx context.Context) error {
	br := l.MgmtBridge()
	root := []string{
		"link add " + br + " type bridge",
		"addr add " + l.MgmtAddr() + "/16 dev " + br,
	}
	rootUp := []string{"link set " + br + " up"}
	for _, name := range l.order {
		n := l.nodes[name]
		if err := run(ctx, "ip", "netns", "add", n.NS); err != nil {
			return err
		}
		// No IPv6 in the lab: its neighbour discovery and MLD would put
		// traffic on the data links that is neither a job's nor LLDP/ARP.
		script := "for f in all default; do echo 1 > /proc/sys/net/ipv6/conf/$f/disable_ipv6; done 2>/dev/null; true"
		if l.Desc.Mode == "l3" && n.Kind == "switch" {
			// A router: forwarding, ECMP hashed on the L4 ports (flows
			// spread over the paths), no reverse-path filter.
			script = "set -e; echo 1 > /proc/sys/net/ipv4/ip_forward; echo 1 > /proc/sys/net/ipv4/fib_multipath_hash_policy; " +
				"for f in all default; do echo 0 > /proc/sys/net/ipv4/conf/$f/rp_filter; done; " + script
		}
		if err := run(ctx, "ip", "netns", "exec", n.NS, "sh", "-c", script); err != nil {
			return err
		}
		root = append(root,
			fmt.Sprintf("link add %s type veth peer name %s netns %s", n.rootIf, n.MgmtIf, n.NS),
			fmt.Sprintf("link set %s master %s", n.rootIf, br))
		rootUp = append(rootUp, "link set "+n.rootIf+" up")
	}
	for _, w := range l.wires {
		a, b := l.nodes[w.A.Node], l.nodes[w.B.Node]
		root = append(root, fmt.Sprintf("link add %s netns %s type veth peer name %s netns %s", w.A.If, a.NS, w.B.If, b.NS))
	}
	if err := ipBatch(ctx, "", root); err != nil {
		return err
	}
	disableIPv6(br)
	for _, name := range l.order {
		disableIPv6(l.nodes[name].rootIf)
	}
	if err := ipBatch(ctx, "", rootUp); err != nil {
		return err
	}
	for _, name := range l.order {
		n := l.nodes[name]
		lines := []string{
			"link set lo up",
			fmt.Sprintf("addr add %s/16 dev %s", n.MgmtIP, n.MgmtIf),
			"link set " + n.MgmtIf + " up",
		}
		l3 := l.Desc.Mode == "l3"
		if n.Kind == "switch" {
			stp := 0
			if l.Desc.STP {
				stp = 1
			}
			lines = append(lines, fmt.Sprintf("link add br0 type bridge stp_state %d", stp), "link set br0 up")
			if n.Subnet != "" {
				gw := strings.Replace(n.Subnet, ".0/24", ".1/24", 1)
				lines = append(lines, "addr add "+gw+" dev br0")
			}
			for _, p := range n.Ports {
				if ip := l.routedIP(n.Name, p); l3 && ip != "" {
					lines = append(lines, "addr add "+ip+"/31 dev "+p)
				} else {
					lines = append(lines, "link set "+p+" master br0")
				}
			}
		} else if len(n.Ports) > 0 {
			mask := "/16"
			if l3 {
				mask = "/24"
			}
			lines = append(lines, fmt.Sprintf("addr add %s%s dev %s", n.DataIP, mask, n.Ports[0]))
		}
		for _, p := range n.Ports {
			lines = append(lines, "link set "+p+" up")
		}
		if l3 && n.Kind == "host" && n.Gateway != "" {
			lines = append(lines, fmt.Sprintf("route add %s via %s dev %s", l.DataCIDR(), n.Gateway, n.Ports[0]))
		}
		if err := ipBatch(ctx, n.NS, lines); err != nil {
			return err
		}
	}
	if l.Desc.Mode == "l3" {
		routes := l.routesL3()
		for _, name := range l.order {
			if err := ipBatch(ctx, l.nodes[name].NS, routes[name]); err != nil {
				return err
			}
		}
	}
	for _, w := range l.wires {
		if w.RateMbit <= 0 {
			continue
		}
		for _, e := range []End{w.A, w.B} {
			if err := l.limit(ctx, l.nodes[e.Node].NS, e.If, w.RateMbit, w.Qdisc); err != nil {
				return err
			}
		}
	}
	return nil
}

// routedIP is a switch port's address on a routed link ("" if none).
func (l *Lab) routedIP(node, ifname string) string {
	for _, w := range l.wires {
		if w.A.Node == node && w.A.If == ifname {
			return w.AIP
		}
		if w.B.Node == node && w.B.If == ifname {
			return w.BIP
		}
	}
	return ""
}

// disableIPv6 turns IPv6 off on a root-namespace interface (best effort:
// the file is missing when the kernel has no IPv6).
func disableIPv6(ifname string) {
	_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+ifname+"/disable_ipv6", []byte("1"), 0o644)
}

// limit puts a rate limit on an interface's egress.
func (l *Lab) limit(ctx context.Context, ns, ifname string, mbit float64, qdisc string) error {
	rate := fmt.Sprintf("%gmbit", mbit)
	// Burst: 10 ms at the rate, at least 64 KiB so that a GSO packet fits.
	burst := int(mbit * 1e6 / 8 / 100)
	if burst < 65536 {
		burst = 65536
	}
	tc := func(args ...string) error { return run(ctx, "tc", append([]string{"-n", ns}, args...)...) }
	if qdisc == "htb" {
		if err := tc("qdisc", "add", "dev", ifname, "root", "handle", "1:", "htb", "default", "10"); err != nil {
			return err
		}
		return tc("class", "add", "dev", ifname, "parent", "1:", "classid", "1:10", "htb", "rate", rate, "ceil", rate,
			"burst", strconv.Itoa(burst), "cburst", strconv.Itoa(burst))
	}
	return tc("qdisc", "add", "dev", ifname, "root", "tbf", "rate", rate, "burst", strconv.Itoa(burst), "latency", "100ms")
}

// Command returns a command that runs argv in node's namespace under its own
// hostname (a UTS namespace of its own).
func (l *Lab) Command(ctx context.Context, node string, argv ...string) (*exec.Cmd, error) {
	n, ok := l.nodes[node]
	if !ok {
		return nil, fmt.Errorf("ethlab: no node %q", node)
	}
	args := []string{"netns", "exec", n.NS, "unshare", "--uts", "sh", "-c", `hostname "$0" && exec "$@"`, n.Name}
	return exec.CommandContext(ctx, "ip", append(args, argv...)...), nil
}

func (l *Lab) startProc(name string, cmd *exec.Cmd) error {
	logf, err := os.Create(filepath.Join(l.Dir, name+".log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("ethlab: start %s: %w", name, err)
	}
	l.mu.Lock()
	l.procs = append(l.procs, cmd)
	l.mu.Unlock()
	go func() { _ = cmd.Wait() }()
	return nil
}

func (l *Lab) sock(node, what string) string { return filepath.Join(l.Dir, node+"-"+what) }

func (l *Lab) startDaemons(ctx context.Context) error {
	lldpConf := filepath.Join(l.Dir, "lldpd.conf")
	conf := fmt.Sprintf("configure lldp tx-interval %d\nconfigure lldp portidsubtype ifname\n", l.opt.LLDPInterval)
	if err := os.WriteFile(lldpConf, []byte(conf), 0o644); err != nil {
		return err
	}
	for _, name := range l.order {
		n := l.nodes[name]
		if n.Kind != "switch" {
			continue
		}
		snmpDir := l.sock(n.Name, "snmp")
		if err := os.MkdirAll(snmpDir, 0o700); err != nil {
			return err
		}
		cf := filepath.Join(snmpDir, "snmpd.conf")
		c := fmt.Sprintf(`sysName %s
sysDescr netloom ethlab switch %s (%s)
rocommunity %s %s
createUser %s SHA "%s" AES "%s"
rouser %s priv
master agentx
agentXSocket %s
agentXPerms 0600 0700
`, l.SysName(n.Name), n.Name, n.Role, l.opt.Community, l.MgmtCIDR(), l.opt.V3User, l.opt.V3AuthPass, l.opt.V3PrivPass,
			l.opt.V3User, l.sock(n.Name, "agentx"))
		// A port shaped with tc reports the rate it is shaped to, as a
		// real switch reports a slower port's speed (a veth says 10000
		// Mb/s whatever its qdisc): net-snmp's "interface NAME TYPE
		// SPEED" sets ifSpeed and ifHighSpeed (ethernetCsmacd, bit/s).
		for _, sp := range l.shapedPorts(n.Name) {
			c += fmt.Sprintf("interface %s 6 %d\n", sp.If, sp.Bits)
		}
		if err := os.WriteFile(cf, []byte(c), 0o600); err != nil {
			return err
		}
		cmd := exec.Command("ip", "netns", "exec", n.NS, "snmpd", "-f", "-Lo", "-C", "-c", cf,
			"-p", l.sock(n.Name, "snmpd.pid"), "udp:"+n.MgmtIP+":161")
		cmd.Env = append(os.Environ(), "SNMP_PERSISTENT_DIR="+snmpDir, "MIBS=", "MIBDIRS=/nonexistent")
		if err := l.startProc(n.Name+"-snmpd", cmd); err != nil {
			return err
		}
	}
	// Wait until every snmpd answers over the management network.
	deadline := time.Now().Add(l.opt.Timeout)
	for _, t := range l.SNMPTargets() {
		for {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			out, err := exec.CommandContext(cctx, "snmpget", "-v2c", "-c", t.Community, "-t", "1", "-r", "0",
				"-On", t.Addr, "1.3.6.1.2.1.1.5.0").CombinedOutput()
			cancel()
			if err == nil && bytes.Contains(out, []byte(l.SysName(t.Switch))) {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				log, _ := os.ReadFile(filepath.Join(l.Dir, t.Switch+"-snmpd.log"))
				return fmt.Errorf("ethlab: snmpd of %s does not answer at %s: %v %s; log: %s", t.Switch, t.Addr, err, out, log)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// A real switch's CPU takes the LLDP frames it receives. A Linux
	// bridge passes them up its port, where lldpd's tap reads them but no
	// protocol takes them: the kernel counts each as dropped, and IF-MIB as
	// ifInDiscards, so an idle lab would show every switch port
	// discarding. A socket bound to LLDP's EtherType in every switch takes
	// them, started before any lldpd sends.
	for _, name := range l.order {
		if n := l.nodes[name]; n.Kind == "switch" {
			sink, _ := l.Command(context.Background(), n.Name, "python3", "-c", lldpSink)
			if err := l.startProc(n.Name+"-lldpsink", sink); err != nil {
				return err
			}
		}
	}
	time.Sleep(300 * time.Millisecond) // the sinks' sockets bound
	// lldpd after snmpd, so that its AgentX sub-agent finds the master.
	for _, name := range l.order {
		n := l.nodes[name]
		ifs := strings.Join(n.Ports, ",")
		if ifs == "" {
			continue
		}
		args := []string{"-d", "-u", l.sock(n.Name, "lldpd.sock"), "-p", l.sock(n.Name, "lldpd.pid"),
			"-I", ifs, "-C", ifs, "-m", n.MgmtIP, "-O", lldpConf}
		if n.Kind == "switch" {
			args = append(args, "-x", "-X", l.sock(n.Name, "agentx"))
		}
		cmd, _ := l.Command(context.Background(), n.Name, append([]string{"lldpd"}, args...)...)
		if err := l.startProc(n.Name+"-lldpd", cmd); err != nil {
			return err
		}
	}
	return l.waitShapedSpeeds(ctx, deadline)
}

// SysName is the sysName a switch's snmpd answers: the description's
// sysname when it sets one (every switch the same), else the switch's own
// name. Its lldpd always advertises its own name (its hostname).
func (l *Lab) SysName(sw string) string {
	if l.Desc.SysName != "" {
		return l.Desc.SysName
	}
	return sw
}

// lldpSink reads and drops every LLDP frame (EtherType 0x88cc) its
// namespace receives.
const lldpSink = `import socket
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x88cc))
while True:
    s.recv(65535)
`

// shapedPort is a switch port with a tc limit: its interface and rate.
type shapedPort struct {
	If   string
	Bits uint64 // bit/s
}

// shapedPorts lists a switch's ports whose link carries a rate limit.
func (l *Lab) shapedPorts(sw string) []shapedPort {
	var out []shapedPort
	for _, w := range l.wires {
		if w.RateMbit <= 0 {
			continue
		}
		for _, e := range []End{w.A, w.B} {
			if e.Node == sw {
				out = append(out, shapedPort{If: e.If, Bits: uint64(w.RateMbit * 1e6)})
			}
		}
	}
	return out
}

// waitShapedSpeeds waits until every switch's snmpd reports each shaped
// port at its rate: net-snmp reads its interfaces once before its
// configuration (the "interface" overrides) and applies them from the next
// reload of its interface cache, about 3 s after it starts.
func (l *Lab) waitShapedSpeeds(ctx context.Context, deadline time.Time) error {
	for _, t := range l.SNMPTargets() {
		n := l.nodes[t.Switch]
		for _, sp := range l.shapedPorts(t.Switch) {
			out, err := exec.CommandContext(ctx, "ip", "-n", n.NS, "-o", "link", "show", "dev", sp.If).Output()
			idx, _, _ := strings.Cut(string(out), ":")
			if err != nil || idx == "" {
				return fmt.Errorf("ethlab: ifindex of %s %s: %v %s", t.Switch, sp.If, err, out)
			}
			// ifHighSpeed in Mb/s, ifSpeed in bit/s (at most 2^32-1).
			want := fmt.Sprintf("%d\n%d\n", sp.Bits/1000000, min(sp.Bits, 1<<32-1))
			for {
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				got, err := exec.CommandContext(cctx, "snmpget", "-v2c", "-c", t.Community, "-t", "1", "-r", "0",
					"-Oqv", t.Addr, "1.3.6.1.2.1.31.1.1.1.15."+idx, "1.3.6.1.2.1.2.2.1.5."+idx).Output()
				cancel()
				if err == nil && string(got) == want {
					break
				}
				if time.Now().After(deadline) || ctx.Err() != nil {
					return fmt.Errorf("ethlab: snmpd of %s does not report %s (ifIndex %s) at %d bit/s: ifHighSpeed, ifSpeed %q (%v)",
						t.Switch, sp.If, idx, sp.Bits, got, err)
				}
				time.Sleep(250 * time.Millisecond)
			}
		}
	}
	return nil
}

// writeState records the lab. Until Start is done (final false) even a
// persistent lab names its owner, so that a start killed half-way is swept.
func (l *Lab) writeState(final bool) error {
	st := stateFile{ID: l.ID, Slot: l.slot, Desc: l.Desc, Wires: l.wires, Targets: l.SNMPTargets(),
		MgmtAddr: l.MgmtAddr(), Created: time.Now().UTC().Format(time.RFC3339), SFlow: l.SFlowProbes()}
	if !l.opt.Persist || !final {
		st.Owner = os.Getpid()
		st.OwnerTick = procStart(st.Owner)
	}
	for _, name := range l.order {
		st.Nodes = append(st.Nodes, l.nodes[name])
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(l.Dir, "state.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(l.Dir, "state.json"))
}

// Close stops every process of the lab and removes its namespaces, links,
// qdiscs and state directory. It checks that nothing is left.
func (l *Lab) Close() error {
	l.mu.Lock()
	if l.done {
		l.mu.Unlock()
		return nil
	}
	l.done = true
	procs := l.procs
	l.mu.Unlock()
	for _, c := range procs {
		if c.Process != nil {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
		}
	}
	unlock, err := lockRoot()
	if err != nil {
		return err
	}
	defer unlock()
	return removeLab(l.ID)
}

// Sweep removes lab id (every namespace, root-namespace link, process and
// the state directory), whoever made it. With id "", it removes every lab
// whose owning process is gone (persistent labs stay).
func Sweep(id string) error {
	if os.Geteuid() != 0 {
		return errors.New("ethlab: sweep needs root")
	}
	unlock, err := lockRoot()
	if err != nil {
		return err
	}
	defer unlock()
	return sweepLocked(id)
}

func sweepLocked(id string) error {
	if id != "" {
		return removeLab(id)
	}
	live := map[string]bool{}
	all := map[string]bool{}
	for _, st := range readStates() {
		all[st.ID] = true
		if st.Owner == 0 || (procAlive(st.Owner) && procStart(st.Owner) == st.OwnerTick) {
			live[st.ID] = true
		}
	}
	if ents, err := os.ReadDir(StateRoot); err == nil {
		for _, e := range ents {
			if e.IsDir() && idRe.MatchString(e.Name()) {
				if _, err := os.Stat(filepath.Join(StateRoot, e.Name(), "state.json")); err != nil {
					all[e.Name()] = true // a lab that died before writing its state
				}
			}
		}
	}
	for _, ns := range netnsList() {
		if id, ok := labIDOf(ns); ok {
			all[id] = true
		}
	}
	for _, ln := range rootLinks() {
		if id, ok := labIDOf(ln); ok {
			all[id] = true
		}
	}
	var errs []error
	for id := range all {
		if !live[id] {
			if err := removeLab(id); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// removeLab kills every process in the lab's namespaces and its launchers,
// deletes the namespaces and root links and the state directory, and checks
// that none is left.
func removeLab(id string) error {
	prefix := NSPrefix + id + "-"
	dir := filepath.Join(StateRoot, id)
	// Launchers in the root namespace (mpirun, mpiexec) recorded by MPIRun.
	if ents, err := os.ReadDir(filepath.Join(dir, "launch")); err == nil {
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if bytes.Contains(cl, []byte(dir)) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	var nss []string
	for _, ns := range netnsList() {
		if strings.HasPrefix(ns, prefix) {
			nss = append(nss, ns)
		}
	}
	for round := 0; round < 20; round++ {
		n := 0
		for _, ns := range nss {
			for _, pid := range netnsPids(ns) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				n++
			}
		}
		if n == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var errs []error
	for _, ns := range nss {
		if err := run(context.Background(), "ip", "netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	for _, ln := range rootLinks() {
		if strings.HasPrefix(ln, prefix) {
			// A veth whose peer went with its namespace is gone already.
			if err := run(context.Background(), "ip", "link", "del", ln); err != nil && linkExists(ln) {
				errs = append(errs, err)
			}
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, err)
	}
	for _, ns := range netnsList() {
		if strings.HasPrefix(ns, prefix) {
			errs = append(errs, fmt.Errorf("ethlab: namespace %s left", ns))
		}
	}
	for _, ln := range rootLinks() {
		if strings.HasPrefix(ln, prefix) {
			errs = append(errs, fmt.Errorf("ethlab: link %s left", ln))
		}
	}
	return errors.Join(errs...)
}

func lockRoot() (func(), error) {
	// lldpcli is setuid _lldpd: it must reach the sockets in lab directories.
	if err := os.MkdirAll(StateRoot, 0o755); err != nil {
		return nil, err
	}
	if err := os.Chmod(StateRoot, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(StateRoot, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

func readStates() []stateFile {
	var out []stateFile
	ents, _ := os.ReadDir(StateRoot)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(StateRoot, e.Name(), "state.json"))
		if err != nil {
			continue
		}
		var st stateFile
		if json.Unmarshal(b, &st) == nil && st.ID == e.Name() {
			out = append(out, st)
		}
	}
	return out
}

var labNameRe = regexp.MustCompile(`^` + NSPrefix + `([a-z0-9]{1,5})-`)

func labIDOf(name string) (string, bool) {
	m := labNameRe.FindStringSubmatch(name)
	if m == nil {
		return "", false
	}
	return m[1], true
}

func netnsList() []string {
	out, _ := exec.Command("ip", "netns", "list").Output()
	var nss []string
	for _, ln := range strings.Split(string(out), "\n") {
		if f := strings.Fields(ln); len(f) > 0 {
			nss = append(nss, f[0])
		}
	}
	return nss
}

func netnsPids(ns string) []int {
	out, _ := exec.Command("ip", "netns", "pids", ns).Output()
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if p, err := strconv.Atoi(f); err == nil && p != os.Getpid() {
			pids = append(pids, p)
		}
	}
	return pids
}

// rootLinks lists the root namespace's interface names.
func rootLinks() []string {
	ents, _ := os.ReadDir("/sys/class/net")
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

func procAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// procStart returns a process's start time in clock ticks (0 if unknown),
// to tell a live owner from a reused pid.
func procStart(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0
	}
	v, _ := strconv.ParseUint(f[19], 10, 64)
	return v
}

// Counters are an interface's kernel statistics (/sys/class/net/IF/statistics).
type Counters struct {
	RxBytes, TxBytes, RxPackets, TxPackets   uint64
	RxErrors, TxErrors, RxDropped, TxDropped uint64
	// All holds every file of the statistics directory by name.
	All map[string]uint64
}

// IfCounters reads the kernel's counters of interface ifname in node's
// namespace ("" or "root" for the root namespace).
func (l *Lab) IfCounters(node, ifname string) (Counters, error) {
	var cmd *exec.Cmd
	script := `cd "/sys/class/net/$0/statistics" && grep -H . *`
	if node == "" || node == "root" {
		cmd = exec.Command("sh", "-c", script, ifname)
	} else {
		n, ok := l.nodes[node]
		if !ok {
			return Counters{}, fmt.Errorf("ethlab: no node %q", node)
		}
		cmd = exec.Command("ip", "netns", "exec", n.NS, "sh", "-c", script, ifname)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return Counters{}, fmt.Errorf("ethlab: counters of %s %s: %v: %s", node, ifname, err, bytes.TrimSpace(out))
	}
	c := Counters{All: map[string]uint64{}}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			continue
		}
		c.All[k] = n
	}
	c.RxBytes, c.TxBytes = c.All["rx_bytes"], c.All["tx_bytes"]
	c.RxPackets, c.TxPackets = c.All["rx_packets"], c.All["tx_packets"]
	c.RxErrors, c.TxErrors = c.All["rx_errors"], c.All["tx_errors"]
	c.RxDropped, c.TxDropped = c.All["rx_dropped"], c.All["tx_dropped"]
	if _, ok := c.All["rx_bytes"]; !ok {
		return c, fmt.Errorf("ethlab: counters of %s %s: no rx_bytes in %q", node, ifname, out)
	}
	return c, nil
}

// Neighbor is one LLDP neighbour as an lldpd sees it.
type Neighbor struct {
	// LocalIf is the interface it was seen on.
	LocalIf string
	// SysName is the neighbour's chassis name (its hostname).
	SysName string
	// PortID and PortDescr are the neighbour's port (the interface name).
	PortID, PortDescr string
	// MgmtIP is the management address it advertises.
	MgmtIP string
}

// Neighbors asks node's lldpd for its neighbours.
func (l *Lab) Neighbors(node string) ([]Neighbor, error) {
	if _, ok := l.nodes[node]; !ok {
		return nil, fmt.Errorf("ethlab: no node %q", node)
	}
	out, err := exec.Command("lldpcli", "-u", l.sock(node, "lldpd.sock"), "-f", "json0", "show", "neighbors").Output()
	if err != nil {
		return nil, fmt.Errorf("ethlab: lldpcli on %s: %v", node, err)
	}
	return parseNeighbors(out)
}

// lldpcli's json0 format: every value is a list of objects.
type lldpValue struct {
	Value string `json:"value"`
	Type  string `json:"type"`
}

type lldpJSON struct {
	LLDP []struct {
		Interface []struct {
			Name    string `json:"name"`
			Chassis []struct {
				Name   []lldpValue `json:"name"`
				MgmtIP []lldpValue `json:"mgmt-ip"`
			} `json:"chassis"`
			Port []struct {
				ID    []lldpValue `json:"id"`
				Descr []lldpValue `json:"descr"`
			} `json:"port"`
		} `json:"interface"`
	} `json:"lldp"`
}

func first(v []lldpValue) string {
	if len(v) == 0 {
		return ""
	}
	return v[0].Value
}

func parseNeighbors(b []byte) ([]Neighbor, error) {
	var j lldpJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("ethlab: lldpcli json0: %w", err)
	}
	var out []Neighbor
	for _, l := range j.LLDP {
		for _, i := range l.Interface {
			n := Neighbor{LocalIf: i.Name}
			if len(i.Chassis) > 0 {
				n.SysName = first(i.Chassis[0].Name)
				n.MgmtIP = first(i.Chassis[0].MgmtIP)
			}
			if len(i.Port) > 0 {
				n.PortID = first(i.Port[0].ID)
				n.PortDescr = first(i.Port[0].Descr)
			}
			out = append(out, n)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].LocalIf < out[b].LocalIf })
	return out, nil
}

// LLDPMismatch compares every lldpd's neighbours with the wiring and
// returns what differs (nil when every port sees exactly its peer).
func (l *Lab) LLDPMismatch() []string {
	want := map[string]map[string]End{} // node -> local if -> peer
	for _, w := range l.wires {
		if want[w.A.Node] == nil {
			want[w.A.Node] = map[string]End{}
		}
		if want[w.B.Node] == nil {
			want[w.B.Node] = map[string]End{}
		}
		want[w.A.Node][w.A.If] = w.B
		want[w.B.Node][w.B.If] = w.A
	}
	var diff []string
	for _, name := range l.order {
		if len(want[name]) == 0 {
			continue
		}
		ns, err := l.Neighbors(name)
		if err != nil {
			diff = append(diff, err.Error())
			continue
		}
		seen := map[string]bool{}
		for _, n := range ns {
			peer, ok := want[name][n.LocalIf]
			switch {
			case !ok:
				diff = append(diff, fmt.Sprintf("%s %s: unexpected neighbour %s %s", name, n.LocalIf, n.SysName, n.PortID))
			case seen[n.LocalIf]:
				diff = append(diff, fmt.Sprintf("%s %s: several neighbours", name, n.LocalIf))
			case n.SysName != peer.Node || n.PortID != peer.If:
				diff = append(diff, fmt.Sprintf("%s %s: sees %s %s, wired to %s %s", name, n.LocalIf, n.SysName, n.PortID, peer.Node, peer.If))
			case n.MgmtIP != l.nodes[peer.Node].MgmtIP:
				diff = append(diff, fmt.Sprintf("%s %s: neighbour %s advertises %s, not %s", name, n.LocalIf, n.SysName, n.MgmtIP, l.nodes[peer.Node].MgmtIP))
			}
			seen[n.LocalIf] = true
		}
		for ifn, peer := range want[name] {
			if !seen[ifn] {
				diff = append(diff, fmt.Sprintf("%s %s: no neighbour (wired to %s %s)", name, ifn, peer.Node, peer.If))
			}
		}
	}
	sort.Strings(diff)
	return diff
}

// snmpLLDPMissing lists the switches whose snmpd does not yet serve one
// LLDP-MIB lldpRemSysName row per port (lldpd's AgentX sub-agent).
func (l *Lab) snmpLLDPMissing(ctx context.Context) []string {
	var diff []string
	for _, t := range l.SNMPTargets() {
		n := l.nodes[t.Switch]
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		out, err := exec.CommandContext(cctx, "snmpwalk", "-v2c", "-c", t.Community, "-t", "1", "-r", "0",
			"-On", t.Addr, "1.0.8802.1.1.2.1.4.1.1.9").CombinedOutput()
		cancel()
		rows := bytes.Count(out, []byte(".1.0.8802.1.1.2.1.4.1.1.9."))
		if err != nil || rows != len(n.Ports) {
			diff = append(diff, fmt.Sprintf("%s: snmpd serves %d lldpRemSysName rows for %d ports (%v)", t.Switch, rows, len(n.Ports), err))
		}
	}
	return diff
}

// WaitLLDP waits until every lldpd sees exactly its wired neighbours
// (LLDPMismatch is empty) and every switch's snmpd serves them in LLDP-MIB,
// polling every 500 ms.
func (l *Lab) WaitLLDP(ctx context.Context) error {
	for {
		diff := l.LLDPMismatch()
		if len(diff) == 0 {
			diff = l.snmpLLDPMissing(ctx)
		}
		if len(diff) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ethlab: LLDP neighbours not as wired: %s", strings.Join(diff, "; "))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// LabInfo describes a lab found on this machine (Labs).
type LabInfo struct {
	ID         string
	Owner      int // 0: persistent (made by "ethlab up")
	OwnerAlive bool
	Nodes      int
	Namespaces int // of its namespaces, how many exist
	MgmtAddr   string
	Created    string
	Targets    []Target
	SFlow      []SFlowProbe
}

// Labs lists the labs whose state is on this machine.
func Labs() []LabInfo {
	nss := netnsList()
	var out []LabInfo
	for _, st := range readStates() {
		li := LabInfo{ID: st.ID, Owner: st.Owner, Nodes: len(st.Nodes), MgmtAddr: st.MgmtAddr, Created: st.Created, Targets: st.Targets, SFlow: st.SFlow}
		li.OwnerAlive = st.Owner != 0 && procAlive(st.Owner) && procStart(st.Owner) == st.OwnerTick
		for _, ns := range nss {
			if strings.HasPrefix(ns, NSPrefix+st.ID+"-") {
				li.Namespaces++
			}
		}
		out = append(out, li)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

// Open attaches to a running lab by id (one made by "ethlab up" or by
// another process): every method works on it; Close removes it.
func Open(id string) (*Lab, error) {
	if !idRe.MatchString(id) {
		return nil, fmt.Errorf("ethlab: id %q: want 1-5 of [a-z0-9]", id)
	}
	b, err := os.ReadFile(filepath.Join(StateRoot, id, "state.json"))
	if err != nil {
		return nil, fmt.Errorf("ethlab: no lab %s: %w", id, err)
	}
	var st stateFile
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("ethlab: lab %s: %w", id, err)
	}
	l := &Lab{ID: st.ID, Desc: st.Desc, Dir: filepath.Join(StateRoot, id), slot: st.Slot, nodes: map[string]*Node{}, wires: st.Wires, probes: st.SFlow}
	for _, n := range st.Nodes {
		l.nodes[n.Name] = n
		l.order = append(l.order, n.Name)
	}
	if len(st.Targets) > 0 {
		t := st.Targets[0]
		l.opt.Community, l.opt.V3User, l.opt.V3AuthPass, l.opt.V3PrivPass = t.Community, t.V3User, t.V3AuthPass, t.V3PrivPass
	}
	return l, nil
}
