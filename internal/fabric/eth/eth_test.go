package eth

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gosnmp/gosnmp"

	"github.com/netloom/netloom/internal/analysis"
	"github.com/netloom/netloom/internal/fabric"
)

// fakeAgent answers Get and GetBulk from a fixed set of varbinds as an
// SNMP agent does (lexicographic OID order, endOfMibView past the end).
type fakeAgent struct {
	vbs  []gosnmp.SnmpPDU
	arcs [][]uint32
	err  error
	// backwards makes GetBulk answer one OID lower than asked: a broken
	// agent walking in a loop.
	backwards bool
	requests  int
}

func newFakeAgent(vbs []gosnmp.SnmpPDU) *fakeAgent {
	f := &fakeAgent{}
	for _, v := range vbs {
		a, ok := parseOID(v.Name)
		if !ok {
			panic("bad test OID " + v.Name)
		}
		f.vbs, f.arcs = append(f.vbs, v), append(f.arcs, a)
	}
	idx := make([]int, len(f.vbs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return compareOID(f.arcs[a], f.arcs[b]) })
	vs, as := make([]gosnmp.SnmpPDU, len(idx)), make([][]uint32, len(idx))
	for k, i := range idx {
		vs[k], as[k] = f.vbs[i], f.arcs[i]
	}
	f.vbs, f.arcs = vs, as
	return f
}

func (f *fakeAgent) Get(oids []string) (*gosnmp.SnmpPacket, error) {
	f.requests++
	if f.err != nil {
		return nil, f.err
	}
	p := &gosnmp.SnmpPacket{}
	for _, o := range oids {
		a, _ := parseOID(o)
		v := gosnmp.SnmpPDU{Name: "." + o, Type: gosnmp.NoSuchObject}
		for i := range f.arcs {
			if compareOID(f.arcs[i], a) == 0 {
				v = f.vbs[i]
			}
		}
		p.Variables = append(p.Variables, v)
	}
	return p, nil
}

func (f *fakeAgent) GetBulk(oids []string, _ uint8, reps uint32) (*gosnmp.SnmpPacket, error) {
	f.requests++
	if f.err != nil {
		return nil, f.err
	}
	cur := make([][]uint32, len(oids))
	for j, o := range oids {
		cur[j], _ = parseOID(o)
	}
	p := &gosnmp.SnmpPacket{}
	for r := uint32(0); r < reps; r++ {
		for j := range oids {
			if f.backwards {
				// The first answer is inside the column, then it repeats it.
				if r == 0 && f.requests == 2 {
					cur[j] = append(slices.Clone(cur[j]), 5)
				}
				p.Variables = append(p.Variables, gosnmp.SnmpPDU{Name: "." + formatOID(cur[j]), Type: gosnmp.Integer, Value: 1})
				continue
			}
			k, _ := slices.BinarySearchFunc(f.arcs, cur[j], func(a, b []uint32) int { return compareOID(a, b) })
			for k < len(f.arcs) && compareOID(f.arcs[k], cur[j]) <= 0 {
				k++
			}
			if k >= len(f.arcs) {
				p.Variables = append(p.Variables, gosnmp.SnmpPDU{Name: "." + formatOID(cur[j]), Type: gosnmp.EndOfMibView})
				continue
			}
			p.Variables = append(p.Variables, f.vbs[k])
			cur[j] = f.arcs[k]
		}
	}
	return p, nil
}

func pdu(oid string, t gosnmp.Asn1BER, v any) gosnmp.SnmpPDU {
	return gosnmp.SnmpPDU{Name: "." + oid, Type: t, Value: v}
}

// fakeIf is one interface of a fake switch.
type fakeIf struct {
	idx  int
	name string
	typ  int
	mbps uint64
	oper int
	mac  []byte
}

// fakeRem is an LLDP neighbour seen on local interface local.
type fakeRem struct {
	local   int
	chassis []byte
	port    string
	sys     string
	mgmt    string
}

// fakeSwitch is a switch's agent: IF-MIB, LLDP-MIB local and remote data.
type fakeSwitch struct {
	name string
	// sysName and lldpName, when set, are its agent's sysName and its
	// LLDP system name (lldpLocSysName) instead of name.
	sysName, lldpName string
	addr              string
	chassis           []byte
	ifs               []fakeIf
	rems              []fakeRem
	// counters by ifIndex: in/out octets, ucast in/out, errors; wide
	// says 64-bit ifHC* (else the 32-bit ifTable columns only).
	upTime   uint32
	counters map[int][5]uint64
	wide     bool
	noLLDP   bool
}

func mac(b ...byte) []byte { return append([]byte{0x02, 0, 0, 0, 0}, b...)[:6] }

func (s *fakeSwitch) agent() *fakeAgent {
	var v []gosnmp.SnmpPDU
	add := func(oid string, t gosnmp.Asn1BER, val any) { v = append(v, pdu(oid, t, val)) }
	add(oidSysName, gosnmp.OctetString, []byte(cmp.Or(s.sysName, s.name)))
	add(oidSysUpTime, gosnmp.TimeTicks, s.upTime)
	for _, f := range s.ifs {
		i := fmt.Sprintf(".%d", f.idx)
		add(oidIfDescr+i, gosnmp.OctetString, []byte(f.name))
		add(oidIfName+i, gosnmp.OctetString, []byte(f.name))
		add(oidIfType+i, gosnmp.Integer, f.typ)
		add(oidIfHighSpeed+i, gosnmp.Gauge32, uint(f.mbps))
		add(oidIfSpeed+i, gosnmp.Gauge32, uint(min(f.mbps*1e6, 1<<32-1)))
		add(oidIfOperStatus+i, gosnmp.Integer, f.oper)
		add(oidIfPhysAddress+i, gosnmp.OctetString, f.mac)
		if c, ok := s.counters[f.idx]; ok {
			if s.wide {
				add(oidIfHCInOctets+i, gosnmp.Counter64, c[0])
				add(oidIfHCOutOctets+i, gosnmp.Counter64, c[1])
				add(oidIfHCInUcastPkts+i, gosnmp.Counter64, c[2])
				add(oidIfHCOutUcastPkts+i, gosnmp.Counter64, c[3])
				add(oidIfHCInMulticastPkts+i, gosnmp.Counter64, uint64(0))
				add(oidIfHCOutMulticast+i, gosnmp.Counter64, uint64(0))
				add(oidIfHCInBroadcastPkts+i, gosnmp.Counter64, uint64(0))
				add(oidIfHCOutBroadcast+i, gosnmp.Counter64, uint64(0))
			} else {
				add(oidIfInOctets+i, gosnmp.Counter32, uint(c[0]&0xffffffff))
				add(oidIfOutOctets+i, gosnmp.Counter32, uint(c[1]&0xffffffff))
				add(oidIfInUcastPkts+i, gosnmp.Counter32, uint(c[2]&0xffffffff))
				add(oidIfOutUcastPkts+i, gosnmp.Counter32, uint(c[3]&0xffffffff))
			}
			add(oidIfInErrors+i, gosnmp.Counter32, uint(c[4]&0xffffffff))
			add(oidIfOutErrors+i, gosnmp.Counter32, uint(0))
			add(oidIfInDiscards+i, gosnmp.Counter32, uint(0))
			add(oidIfOutDiscards+i, gosnmp.Counter32, uint(0))
		}
	}
	if s.noLLDP {
		return newFakeAgent(v)
	}
	add(oidLldpLocChassisIDSubtype, gosnmp.Integer, chassisMAC)
	add(oidLldpLocChassisID, gosnmp.OctetString, s.chassis)
	add(oidLldpLocSysName, gosnmp.OctetString, []byte(cmp.Or(s.lldpName, s.name)))
	for _, f := range s.ifs {
		if f.typ == ifTypeLoopback {
			continue
		}
		i := fmt.Sprintf(".%d", f.idx)
		add(oidLldpLocPortIDSubtype+i, gosnmp.Integer, portIfName)
		add(oidLldpLocPortID+i, gosnmp.OctetString, []byte(f.name))
		add(oidLldpLocPortDesc+i, gosnmp.OctetString, []byte(f.name))
	}
	for k, r := range s.rems {
		i := fmt.Sprintf(".0.%d.%d", r.local, k+1)
		add(oidLldpRemChassisIDSubtype+i, gosnmp.Integer, chassisMAC)
		add(oidLldpRemChassisID+i, gosnmp.OctetString, r.chassis)
		add(oidLldpRemPortIDSubtype+i, gosnmp.Integer, portIfName)
		if r.port != "" {
			add(oidLldpRemPortID+i, gosnmp.OctetString, []byte(r.port))
		}
		add(oidLldpRemPortDesc+i, gosnmp.OctetString, []byte(r.port))
		add(oidLldpRemSysName+i, gosnmp.OctetString, []byte(r.sys))
		if r.mgmt != "" {
			var a [4]int
			fmt.Sscanf(r.mgmt, "%d.%d.%d.%d", &a[0], &a[1], &a[2], &a[3])
			add(fmt.Sprintf("%s%s.1.4.%d.%d.%d.%d", oidLldpRemManAddrIfSubtype, i, a[0], a[1], a[2], a[3]), gosnmp.Integer, 2)
		}
	}
	return newFakeAgent(v)
}

// fabricSpec builds fake switches for an L3 leaf-spine: spines and
// leaves, hostsPerLeaf hosts per leaf, each leaf linked to every spine.
// Leaf 2's ifIndexes are above 254.
type fakeFabric struct {
	sw    map[string]*fakeSwitch
	order []string
	hosts map[string][]byte // host -> chassis
}

func leafSpine(leaves, spines, hostsPerLeaf int) *fakeFabric {
	f := &fakeFabric{sw: map[string]*fakeSwitch{}, hosts: map[string][]byte{}}
	newSw := func(name string, id byte, base int) *fakeSwitch {
		s := &fakeSwitch{name: name, addr: fmt.Sprintf("192.0.2.%d", id), chassis: mac(id), upTime: 1_000_000, wide: true, counters: map[int][5]uint64{}}
		s.ifs = append(s.ifs, fakeIf{idx: 1, name: "lo", typ: ifTypeLoopback, oper: 1})
		s.ifs = append(s.ifs, fakeIf{idx: base, name: "mgmt0", typ: 6, mbps: 1000, oper: 1, mac: mac(id, 0xee)})
		f.sw[name] = s
		f.order = append(f.order, name)
		return s
	}
	addPort := func(s *fakeSwitch, base int) fakeIf {
		n := len(s.ifs) - 1
		p := fakeIf{idx: base + n, name: fmt.Sprintf("swp%d", n), typ: 6, mbps: 100000, oper: 1, mac: mac(s.chassis[5], byte(n))}
		s.ifs = append(s.ifs, p)
		return p
	}
	base := func(name string) int {
		if name == "leaf2" {
			return 300
		}
		return 2
	}
	for s := 1; s <= spines; s++ {
		newSw(fmt.Sprintf("spine%d", s), byte(200+s), 2)
	}
	h := 1
	for l := 1; l <= leaves; l++ {
		name := fmt.Sprintf("leaf%d", l)
		leaf := newSw(name, byte(100+l), base(name))
		for k := 0; k < hostsPerLeaf; k++ {
			host := fmt.Sprintf("h%d", h)
			chassis := mac(byte(h), 0xaa)
			f.hosts[host] = chassis
			p := addPort(leaf, base(name))
			leaf.rems = append(leaf.rems, fakeRem{local: p.idx, chassis: chassis, port: "eth0", sys: host})
			h++
		}
		for s := 1; s <= spines; s++ {
			sp := f.sw[fmt.Sprintf("spine%d", s)]
			lp := addPort(leaf, base(name))
			spp := addPort(sp, 2)
			leaf.rems = append(leaf.rems, fakeRem{local: lp.idx, chassis: sp.chassis, port: spp.name, sys: sp.name, mgmt: sp.addr})
			sp.rems = append(sp.rems, fakeRem{local: spp.idx, chassis: leaf.chassis, port: lp.name, sys: leaf.name, mgmt: leaf.addr})
		}
	}
	return f
}

// views reads every fake switch through the real session code.
func (f *fakeFabric) views(t testing.TB) ([]*view, []error) {
	var vs []*view
	var all []error
	for _, name := range f.order {
		s := f.sw[name]
		sc := &SwitchConfig{Address: s.addr, Community: "public"}
		v, errs := readView(&session{a: s.agent(), label: s.addr, reps: 7}, sc)
		all = append(all, errs...)
		if v != nil {
			vs = append(vs, v)
		}
	}
	return vs, all
}

func (f *fakeFabric) build(t testing.TB) (*fabric.Topology, *layout, []error) {
	t.Helper()
	vs, errs := f.views(t)
	topo, lay, berrs := build(vs)
	return topo, lay, append(errs, berrs...)
}

// linkNames lists a topology's links as "node:if-node:if", sorted.
func linkNames(t *fabric.Topology, lay *layout) []string {
	var out []string
	for _, l := range t.Links {
		a, _ := t.Node(l.A.GUID)
		b, _ := t.Node(l.B.GUID)
		x := a.Name() + ":" + lay.names[l.A]
		y := b.Name() + ":" + lay.names[l.B]
		if y < x {
			x, y = y, x
		}
		out = append(out, x+"-"+y)
	}
	slices.Sort(out)
	return out
}

func TestDiscoverLeafSpine(t *testing.T) {
	f := leafSpine(2, 2, 2)
	topo, lay, errs := f.build(t)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	c := topo.Counts()
	if c.Switches != 4 || c.CAs != 4 || c.Links != 8 {
		t.Fatalf("counts %+v", c)
	}
	want := []string{"h1:eth0-leaf1:swp1", "h2:eth0-leaf1:swp2", "h3:eth0-leaf2:swp1", "h4:eth0-leaf2:swp2",
		"leaf1:swp3-spine1:swp1", "leaf1:swp4-spine2:swp1", "leaf2:swp3-spine1:swp2", "leaf2:swp4-spine2:swp2"}
	if got := linkNames(topo, lay); !slices.Equal(got, want) {
		t.Errorf("links\n got %v\nwant %v", got, want)
	}
	for _, l := range topo.Links {
		if l.Speed != "100GbE" || l.Width != "1X" || l.State != "Active" || l.Capacity() != 12.5e9 {
			t.Errorf("link %s: %s %s %s", l.ID(), l.Width, l.Speed, l.State)
		}
	}
	// GUIDs come from the chassis MACs; ports are numbered 1..N in ifIndex
	// order (mgmt0 first, the loopback left out), whatever the ifIndexes.
	leaf1, _ := topo.FindNode("leaf1")
	if leaf1.GUID != 0x020000fffe000065 {
		t.Errorf("leaf1 GUID %s", leaf1.GUID)
	}
	for _, name := range []string{"leaf1", "leaf2"} {
		n, _ := topo.FindNode(name)
		for p, want := range []string{"", "mgmt0", "swp1", "swp2", "swp3", "swp4"} {
			if got := lay.names[fabric.PortRef{GUID: n.GUID, Port: p}]; got != want || n.Ports != 5 {
				t.Errorf("%s port %d is %q (of %d), want %q", name, p, got, n.Ports, want)
			}
		}
	}
	// Every switch and host port has a distinct pseudo-LID, the same each time.
	seen := map[fabric.LID]bool{}
	for _, n := range topo.Nodes {
		lids := []fabric.LID{n.LID}
		if n.Type == fabric.CA {
			lids = n.PortLIDs[1:]
		}
		for _, l := range lids {
			if l == 0 || seen[l] {
				t.Errorf("node %s: LID %d missing or repeated", n.Description, l)
			}
			seen[l] = true
		}
	}
	again, _, _ := f.build(t)
	for i := range topo.Nodes {
		if again.Nodes[i].LID != topo.Nodes[i].LID || again.Nodes[i].GUID != topo.Nodes[i].GUID {
			t.Errorf("node %s: not stable across discoveries", topo.Nodes[i].Description)
		}
	}

	// Routes: across leaves, two equal-cost paths, split evenly.
	ft := forwardingTables(topo)
	r := fabric.NewRoutes(topo, ft)
	h1, _ := topo.FindNode("h1")
	h3, _ := topo.FindNode("h3")
	rt, err := r.Path(h1.LID, h3.LID)
	if err != nil {
		t.Fatal(err)
	}
	if rt.PathCount != 2 || !strings.HasPrefix(rt.RouteModel, "lldp-shortest-path (ecmp: 2") {
		t.Errorf("route h1 -> h3: %q, %d paths", rt.RouteModel, rt.PathCount)
	}
	// The tables' one port per LID is the first equal-cost path.
	if tbl := ft[leaf1.GUID]; int(tbl[h3.LID]) != rt.Hops[1].Port {
		t.Errorf("leaf1's table sends h3 by %d, the first path by %d", tbl[h3.LID], rt.Hops[1].Port)
	}
	a := analysis.NewAttributor(r)
	load := make([]uint64, a.Directions())
	if errs := a.Attribute([]analysis.Flow{{Src: h1.LID, Dst: h3.LID, Bytes: 1000}}, load); len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, up := range []int{4, 5} { // leaf1 swp3, swp4
		i, _ := a.DirectionIndex(fabric.PortRef{GUID: leaf1.GUID, Port: up})
		if load[i] != 500 {
			t.Errorf("leaf1 uplink %d carries %d of h1's 1000 bytes to h3, want 500", up, load[i])
		}
	}
}

// errorsMention reports whether some error mentions every word.
func errorsMention(errs []error, words ...string) bool {
	for _, e := range errs {
		ok := true
		for _, w := range words {
			if !strings.Contains(e.Error(), w) {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func TestDiscoverBadLLDP(t *testing.T) {
	// A neighbour naming a port its switch does not have.
	f := leafSpine(2, 1, 2)
	f.sw["leaf1"].rems[2].port = "swp9"
	f.sw["spine1"].rems[0].port = "swp9"
	topo, lay, errs := f.build(t)
	if !errorsMention(errs, "switch leaf1", "lldpRemPortId", `"swp9"`, "spine1 does not have") {
		t.Errorf("errors %v", errs)
	}
	if got := linkNames(topo, lay); len(got) != 5 || slices.Contains(got, "leaf1:swp3-spine1:swp1") {
		t.Errorf("links %v: want the bad one left out, the other 5 kept", got)
	}

	// A loop: a switch port that sees the switch itself.
	f = leafSpine(2, 1, 2)
	l1 := f.sw["leaf1"]
	l1.rems = append(l1.rems, fakeRem{local: 2, chassis: l1.chassis, port: "swp1", sys: "leaf1"})
	_, _, errs = f.build(t)
	if !errorsMention(errs, "switch leaf1", "lldpRemChassisId", "loop") {
		t.Errorf("loop: errors %v", errs)
	}

	// Inconsistent tables: spine1 claims leaf2's uplink on the port that
	// leaf1 (confirmed by both ends) is on.
	f = leafSpine(2, 1, 2)
	f.sw["spine1"].rems = append(f.sw["spine1"].rems, fakeRem{local: 3, chassis: f.sw["leaf2"].chassis, port: "swp2", sys: "leaf2"})
	topo, lay, errs = f.build(t)
	if !errorsMention(errs, "switch spine1", "lldpRemTable", "already linked") {
		t.Errorf("conflict: errors %v", errs)
	}
	if got := linkNames(topo, lay); !slices.Contains(got, "leaf1:swp3-spine1:swp1") || len(got) != 6 {
		t.Errorf("conflict: links %v", got)
	}

	// A truncated remote table: an entry without lldpRemPortId.
	f = leafSpine(1, 0, 2)
	f.sw["leaf1"].rems[1].port = ""
	topo, _, errs = f.build(t)
	if !errorsMention(errs, "switch leaf1", "lldpRemPortId", "missing") || len(topo.Links) != 1 {
		t.Errorf("truncated: %d links, errors %v", len(topo.Links), errs)
	}

	// A neighbour on a local port number that does not exist.
	f = leafSpine(1, 0, 1)
	f.sw["leaf1"].rems = append(f.sw["leaf1"].rems, fakeRem{local: 77, chassis: mac(9), port: "eth0", sys: "ghost"})
	_, _, errs = f.build(t)
	if !errorsMention(errs, "switch leaf1", "lldpRemLocalPortNum", "77") {
		t.Errorf("bad local port: errors %v", errs)
	}

	// A switch without LLDP-MIB: said, and its interfaces still read.
	f = leafSpine(1, 0, 1)
	f.sw["leaf1"].noLLDP = true
	topo, _, errs = f.build(t)
	if !errorsMention(errs, "lldpLocChassisId", "no LLDP-MIB") || topo.Counts().Switches != 1 {
		t.Errorf("no LLDP: %+v %v", topo.Counts(), errs)
	}

	// A port that is down: its stale LLDP entry is no link.
	f = leafSpine(1, 0, 2)
	f.sw["leaf1"].ifs[2].oper = 2
	topo, _, errs = f.build(t)
	if len(errs) > 0 || len(topo.Links) != 1 {
		t.Errorf("down port: %d links, errors %v", len(topo.Links), errs)
	}
}

func TestWalkErrors(t *testing.T) {
	f := leafSpine(1, 0, 2)
	ag := f.sw["leaf1"].agent()
	ag.backwards = true
	_, errs := readView(&session{a: ag, label: "leaf1", reps: 5}, &SwitchConfig{Address: "x"})
	if !errorsMention(errs, "leaf1", "went back") {
		t.Errorf("agent walking backwards: %v", errs)
	}
	ag = f.sw["leaf1"].agent()
	ag.err = errors.New("request timeout (after 1 retries)")
	_, errs = readView(&session{a: ag, label: "leaf1 (192.0.2.101)", reps: 5}, &SwitchConfig{Address: "x"})
	if !errorsMention(errs, "leaf1 (192.0.2.101)", "sysName", "timeout") {
		t.Errorf("no answer: %v", errs)
	}
}

// TestAbsorbInterleaved checks the GetBulk splitter on a hand-made
// answer: two columns, the second ending early, rows interleaved.
func TestAbsorbInterleaved(t *testing.T) {
	a, b := newColumn(oidIfName), newColumn(oidIfHighSpeed)
	vbs := []gosnmp.SnmpPDU{
		pdu(oidIfName+".1", gosnmp.OctetString, []byte("lo")), pdu(oidIfHighSpeed+".1", gosnmp.Gauge32, uint(0)),
		pdu(oidIfName+".7", gosnmp.OctetString, []byte("swp1")), pdu(oidIfAlias+".1", gosnmp.OctetString, []byte("x")),
		pdu(oidIfName+".9", gosnmp.OctetString, []byte("swp2")), pdu(oidIfAlias+".7", gosnmp.OctetString, []byte("y")),
	}
	if err := absorb([]*column{a, b}, vbs); err != nil {
		t.Fatal(err)
	}
	if len(a.cells) != 3 || a.done || len(b.cells) != 1 || !b.done || a.nextOID() != oidIfName+".9" {
		t.Errorf("a %d cells done %v next %s; b %d cells done %v", len(a.cells), a.done, a.nextOID(), len(b.cells), b.done)
	}
	ifs, errs := decodeIfaces(map[string]*column{oidIfName: a, oidIfHighSpeed: b})
	if len(errs) > 0 || ifs[7].Name != "swp1" || ifs[9].Name != "swp2" || len(ifs) != 3 {
		t.Errorf("ifaces %+v %v", ifs, errs)
	}
	// A malformed index and a wrong type are errors naming the column.
	c := newColumn(oidIfOperStatus)
	if err := absorb([]*column{c}, []gosnmp.SnmpPDU{pdu(oidIfOperStatus+".3.4", gosnmp.Integer, 1), pdu(oidIfOperStatus+".5", gosnmp.OctetString, []byte("up"))}); err != nil {
		t.Fatal(err)
	}
	_, errs = decodeIfaces(map[string]*column{oidIfOperStatus: c})
	if !errorsMention(errs, "ifOperStatus", "bad ifIndex 3.4") || !errorsMention(errs, "ifOperStatus.5", "unexpected") {
		t.Errorf("errors %v", errs)
	}
	// Management addresses from lldpRemManAddrTable's index.
	m := newColumn(oidLldpRemManAddrIfSubtype)
	if err := absorb([]*column{m}, []gosnmp.SnmpPDU{
		pdu(oidLldpRemManAddrIfSubtype+".0.3.1.1.4.10.0.0.7", gosnmp.Integer, 2),
		pdu(oidLldpRemManAddrIfSubtype+".0.3.1.1.5.10.0.0.7", gosnmp.Integer, 2),
	}); err != nil {
		t.Fatal(err)
	}
	rems, errs := decodeRemotes(map[string]*column{oidLldpRemManAddrIfSubtype: m})
	if len(rems) != 1 || !slices.Equal(rems[0].MgmtAddrs, []string{"10.0.0.7"}) || !errorsMention(errs, "length 5 but 4 octets") {
		t.Errorf("remotes %+v errors %v", rems, errs)
	}
}

// sweepOnce sweeps the fake switch's ports.
func sweepOnce(t *testing.T, s *fakeSwitch, l *swLayout, st *swState, ports []int) ([]fabric.PortReading, []error) {
	t.Helper()
	out := make([]fabric.PortReading, len(ports))
	idx := make([]int, len(ports))
	for i, p := range ports {
		out[i].Port = fabric.PortRef{GUID: 1, Port: p}
		idx[i] = i
	}
	errs := sweepFrom(&session{a: s.agent(), label: s.name, reps: 4}, st, l, idx, out)
	return out, errs
}

// TestSweepCounters checks counters against what the agent serves,
// 32-bit wraps and a reboot.
func TestSweepCounters(t *testing.T) {
	for _, wide := range []bool{true, false} {
		f := leafSpine(1, 0, 2)
		s := f.sw["leaf1"]
		s.wide = wide
		s.counters[3] = [5]uint64{1000, 2000, 10, 20, 0xfffffff0}
		s.counters[4] = [5]uint64{5, 6, 7, 8, 0}
		vs, _ := f.views(t)
		l, _ := number(vs[0])
		st := &swState{ports: map[int]*portState{}}
		out, errs := sweepOnce(t, s, l, st, []int{2, 3, 1}) // swp1 (ifIndex 3), swp2 (4), mgmt0 (2)
		if len(errs) != 1 || out[2].Err == nil || !strings.Contains(out[2].Err.Error(), "no counters for port 1 (ifIndex 2, mgmt0)") {
			t.Errorf("wide %v: port without counters: %v %v", wide, out[2].Err, errs)
		}
		r := out[0]
		if r.Err != nil || r.V[fabric.RcvData] != 1000 || r.V[fabric.XmitData] != 2000 || r.V[fabric.UnicastRcvPkts] != 10 ||
			r.V[fabric.XmitPkts] != 20 || r.V[fabric.RcvErrors] != 0xfffffff0 || !r.Extended {
			t.Errorf("wide %v: reading %+v", wide, r)
		}
		if (st.hc == 1) != wide {
			t.Errorf("wide %v: agent taken as hc=%d", wide, st.hc)
		}
		// The 32-bit counters wrap: readings keep growing.
		s.counters[3] = [5]uint64{1<<32 + 500, 2500, 15, 25, 1<<32 + 5}
		prev := out[0]
		time.Sleep(10 * time.Millisecond)
		out, _ = sweepOnce(t, s, l, st, []int{2})
		d := fabric.Diff(&prev, &out[0])
		if d.Reset || d.Delta[fabric.RcvData] != 1<<32-500 || d.Delta[fabric.XmitData] != 500 || d.Delta[fabric.RcvErrors] != 21 {
			t.Errorf("wide %v: after a wrap: %+v", wide, d)
		}
		// A reboot: sysUpTime went back, counters restarted from near zero
		// (here above the last reading's low bits, which unwrapping alone
		// would take for no wrap): the sample is counted from zero.
		s.upTime = 100
		s.counters[3] = [5]uint64{700, 300, 2, 2, 0}
		prev = out[0]
		time.Sleep(10 * time.Millisecond)
		out, _ = sweepOnce(t, s, l, st, []int{2})
		d = fabric.Diff(&prev, &out[0])
		if !d.Reset || d.Delta[fabric.RcvData] != 700 || d.Delta[fabric.XmitData] != 300 {
			t.Errorf("wide %v: after a reboot: %+v (readings %v -> %v)", wide, d, prev.V[:2], out[0].V[:2])
		}
	}
}

// TestSweepStale: an answer with every interface's counters as before is
// the agent's cache: its readings say so; a change on any interface of the
// switch (another port, the management interface the request crossed)
// makes them a measurement again.
func TestSweepStale(t *testing.T) {
	f := leafSpine(1, 0, 2)
	s := f.sw["leaf1"]
	s.counters[3] = [5]uint64{1000, 2000, 10, 20, 0}
	s.counters[4] = [5]uint64{5, 6, 7, 8, 0}
	vs, _ := f.views(t)
	l, _ := number(vs[0])
	st := &swState{ports: map[int]*portState{}}
	if out, _ := sweepOnce(t, s, l, st, []int{2}); out[0].Stale {
		t.Fatal("the first answer taken for a cached one")
	}
	out, _ := sweepOnce(t, s, l, st, []int{2, 3})
	if !out[0].Stale || !out[1].Stale || out[0].V[fabric.RcvData] != 1000 {
		t.Errorf("the same table again: %+v", out)
	}
	s.counters[4] = [5]uint64{5, 6, 7, 9, 0} // only swp2 counted a packet
	if out, _ := sweepOnce(t, s, l, st, []int{2}); out[0].Stale {
		t.Error("a change on another interface taken for the cache")
	}
	s.upTime = 5 // a reboot with the very same counters is no cache
	if out, _ := sweepOnce(t, s, l, st, []int{2}); out[0].Stale {
		t.Error("a reboot taken for the cache")
	}
}

func TestRebooted(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		old, cur uint64
		secs     float64
		want     bool
	}{
		{1000, 4000, 30, false},
		{1000, 100, 30, true},
		{1<<32 - 1000, 2000, 30, false}, // sysUpTime wrapped after 497 days
		{5_000_000, 5_003_000, 30, false},
		{2_600_000_000, 500, 30, true}, // rebooted after a long uptime
	} {
		if got := rebooted(c.old, t0, c.cur, t0.Add(time.Duration(c.secs*float64(time.Second)))); got != c.want {
			t.Errorf("rebooted(%d -> %d in %gs) = %v", c.old, c.cur, c.secs, got)
		}
	}
}

func TestConfig(t *testing.T) {
	c, err := ParseConfig([]byte("community: public\ntimeout: 500ms\nretries: 0\nswitches:\n  - address: 10.0.0.1\n  - address: '[fe80::1]:1161'\n    v3: {user: u, auth_pass: aaaaaaaa, priv_pass: bbbbbbbb, priv_proto: AES256}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Timeout != 500*time.Millisecond || *c.Retries != 0 {
		t.Errorf("config %+v", c)
	}
	if h, p, err := c.Switches[1].hostPort(); err != nil || h != "fe80::1" || p != 1161 {
		t.Errorf("host %q port %d %v", h, p, err)
	}
	for in, want := range map[string]string{
		"switches: []":                                                                     "none listed",
		"switches: [{address: a}]":                                                         "no credentials",
		"community: c\nswitches: [{address: 'a:0'}]":                                       "port must be",
		"community: c\nswitches: [{address: a}, {address: 'a:161'}]":                       "also switches[0]",
		"community: c\nbogus: 1\nswitches: [{address: a}]":                                 "bogus",
		"switches: [{address: a, v3: {user: u, auth_pass: short, priv_pass: longenough}}]": "auth_pass",
		"switches: [{address: a, v3: {user: u, auth_proto: SHA3, auth_pass: longenough, priv_pass: longenough}}]": "auth_proto",
	} {
		if _, err := ParseConfig([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
}

// TestErrorCounting checks that errors are counted by switch and field,
// and the same error is logged once, not every sweep.
func TestErrorCounting(t *testing.T) {
	var buf strings.Builder
	cfg, err := ParseConfig([]byte("community: c\nswitches: [{address: a}]"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := Open(*cfg, Options{Log: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	e := errf("leaf1", "sysName", "no answer")
	src.record([]error{e, e, errf("leaf1", "ifTable", "x"), errors.New("plain")})
	src.record([]error{e})
	want := []ErrorCount{{"", "other", 1}, {"leaf1", "ifTable", 1}, {"leaf1", "sysName", 3}}
	if got := src.Errors(); !slices.Equal(got, want) {
		t.Errorf("errors %+v, want %+v", got, want)
	}
	if n := strings.Count(buf.String(), "no answer"); n != 1 {
		t.Errorf("the same error logged %d times:\n%s", n, buf.String())
	}
}
