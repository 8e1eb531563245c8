package eth

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"slices"
	"sort"
	"strconv"

	"github.com/netloom/netloom/internal/fabric"
)

// Error is a problem with one switch's data: which switch, which MIB
// object, what. Discovery and sweeps go on without what it concerns.
type Error struct {
	Switch string // its sysName, or its configured name and address
	Field  string // the MIB object (column) or "snmp" for the exchange itself
	Msg    string
}

func (e *Error) Error() string {
	return fmt.Sprintf("switch %s: %s: %s", e.Switch, e.Field, e.Msg)
}

func errf(sw, field, format string, a ...any) *Error {
	return &Error{Switch: sw, Field: field, Msg: fmt.Sprintf(format, a...)}
}

// view is what discovery read from one switch.
type view struct {
	cfg  *SwitchConfig
	host string // the configured address' host part

	SysName           string
	LocChassisSubtype int
	LocChassis        []byte
	LocSysName        string
	Ifaces            map[int]*Iface
	LocPorts          map[int]*LocPort
	Remotes           []*Remote
}

// name is how errors and the topology name the switch.
func (v *view) name() string {
	switch {
	case v.SysName != "":
		return v.SysName
	case v.LocSysName != "":
		return v.LocSysName
	case v.cfg != nil && v.cfg.Name != "":
		return v.cfg.Name
	case v.cfg != nil:
		return v.cfg.Address
	}
	return v.host
}

// LLDP chassis and port ID subtypes (IEEE 802.1AB).
const (
	chassisMAC  = 4
	portAlias   = 1
	portMAC     = 3
	portNetAddr = 4
	portIfName  = 5
	portLocal   = 7
)

// chassisGUID derives a node's GUID from its LLDP chassis ID: a MAC
// address (subtype 4) maps to an EUI-64 as IEEE maps MAC-48 (ff:fe in the
// middle), anything else to a 64-bit FNV-1a hash of subtype and ID. Both
// are stable for as long as the chassis ID is.
func chassisGUID(subtype int, id []byte) fabric.GUID {
	if subtype == chassisMAC && len(id) == 6 {
		return fabric.GUID(uint64(id[0])<<56 | uint64(id[1])<<48 | uint64(id[2])<<40 | 0xff<<32 | 0xfe<<24 |
			uint64(id[3])<<16 | uint64(id[4])<<8 | uint64(id[5]))
	}
	return hashGUID(append([]byte{byte(subtype)}, id...))
}

func hashGUID(b []byte) fabric.GUID {
	h := fnv.New64a()
	h.Write(b)
	g := h.Sum64()
	if g == 0 {
		g = 1
	}
	return fabric.GUID(g)
}

// guid is the switch's GUID: from its own LLDP chassis ID (what its
// neighbours see), else from its sysName, else its address.
func (v *view) guid() fabric.GUID {
	switch {
	case len(v.LocChassis) > 0:
		return chassisGUID(v.LocChassisSubtype, v.LocChassis)
	case v.SysName != "":
		return hashGUID([]byte("sysname:" + v.SysName))
	}
	return hashGUID([]byte("address:" + v.cfg.Address))
}

// ifIndices lists the interfaces that are ports (all but loopbacks), by
// ifIndex.
func (v *view) ifIndices() []int {
	var out []int
	for i, f := range v.Ifaces {
		if f.Type != ifTypeLoopback {
			out = append(out, i)
		}
	}
	sort.Ints(out)
	return out
}

// ifByID finds the interface an LLDP port ID (subtype, id) names.
func (v *view) ifByID(subtype int, id []byte) (int, bool) {
	if len(id) == 0 {
		return 0, false
	}
	s := string(id)
	var match []int
	for _, i := range v.ifIndices() {
		f := v.Ifaces[i]
		switch subtype {
		case portMAC:
			if len(id) == 6 && bytes.Equal(f.MAC, id) {
				match = append(match, i)
			}
		case portLocal:
			if n, err := strconv.Atoi(s); err == nil && n == i {
				match = append(match, i)
			} else if f.Name == s {
				match = append(match, i)
			}
		case portNetAddr:
			// a network address names no one interface
		default: // ifName, ifAlias, port component, agent circuit ID
			if f.Name == s || f.Descr == s || (f.Alias != "" && f.Alias == s) {
				match = append(match, i)
			}
		}
	}
	if len(match) == 1 {
		return match[0], true
	}
	return 0, false
}

// localIf maps an LLDP local port number to the ifIndex it is: by the
// port's own ID in lldpLocPortTable where that names one interface, else
// the number itself where it is an ifIndex (lldpd and most agents number
// LLDP ports by ifIndex).
func (v *view) localIf(num int) (int, bool) {
	if lp := v.LocPorts[num]; lp != nil {
		if i, ok := v.ifByID(lp.IDSubtype, lp.ID); ok {
			return i, true
		}
	}
	if f, ok := v.Ifaces[num]; ok && f.Type != ifTypeLoopback {
		return num, true
	}
	return 0, false
}

// remotePort finds the interface of this switch that a neighbour's
// lldpRemPortId (subtype, id) names: through this switch's own
// lldpLocPortTable first, then IF-MIB names and addresses.
func (v *view) remotePort(subtype int, id []byte) (int, bool) {
	nums := make([]int, 0, len(v.LocPorts))
	for n := range v.LocPorts {
		nums = append(nums, n)
	}
	sort.Ints(nums)
	for _, n := range nums {
		lp := v.LocPorts[n]
		if lp.IDSubtype == subtype && bytes.Equal(lp.ID, id) {
			if i, ok := v.localIf(n); ok {
				return i, true
			}
		}
	}
	return v.ifByID(subtype, id)
}

// swLayout maps a switch's ports to its interfaces.
type swLayout struct {
	view *view
	// name is the switch's name in the topology, distinct from every
	// other polled switch's, and why it was chosen (nameSwitches).
	name   SwitchName
	portIf map[int]int // port number -> ifIndex
	ifPort map[int]int
}

// layout is how the topology's switches and ports map to SNMP agents and
// interfaces.
type layout struct {
	switches map[fabric.GUID]*swLayout
	// names are the ports' interface names: ifName on switches, the LLDP
	// port ID (or its description) hosts advertise.
	names map[fabric.PortRef]string
}

// MaxPorts is the most ports a node has in the fabric model.
const MaxPorts = 254

// number gives each interface of a switch its port number: 1..N in
// ifIndex order, so every port of the model exists (as InfiniBand's 1..N
// do) whatever gaps the ifIndexes have (a loopback, a removed interface).
func number(v *view) (*swLayout, *Error) {
	l := &swLayout{view: v, portIf: map[int]int{}, ifPort: map[int]int{}}
	idx := v.ifIndices()
	var err *Error
	if len(idx) > MaxPorts {
		err = errf(v.name(), "ifTable", "%d interfaces; only the first %d by ifIndex are ports", len(idx), MaxPorts)
		idx = idx[:MaxPorts]
	}
	for k, i := range idx {
		l.portIf[k+1], l.ifPort[i] = i, k+1
	}
	return l, err
}

func (l *swLayout) ports() int {
	m := 0
	for p := range l.portIf {
		m = max(m, p)
	}
	return m
}

// operState is a link's state from its switch port's ifOperStatus; ""
// where the port is down (its LLDP entry is stale, and no link is there).
func operState(f *Iface) string {
	switch f.Oper {
	case 1:
		return "Active"
	case 2, 6, 7: // down, notPresent, lowerLayerDown
		return ""
	}
	return "Init" // testing, unknown, dormant
}

// linkSpeed is a link's width and speed from its ends' ifHighSpeed: the
// lower known one.
func linkSpeed(mbps ...uint64) (string, string) {
	var best uint64
	for _, m := range mbps {
		if m > 0 && (best == 0 || m < best) {
			best = m
		}
	}
	if best == 0 {
		return "", ""
	}
	return "1X", fabric.EthernetSpeed(best)
}

// hostEnd is a host's port as switches see it.
type hostEnd struct {
	host string // hostKey
	port string // portKey
}

type hostInfo struct {
	key            string
	sysName        string
	chassisSubtype int
	chassis        []byte
	ports          map[string]bool
	portName       map[string]string
}

func hostKey(r *Remote) string {
	if len(r.Chassis) > 0 {
		return fmt.Sprintf("c%d:%x", r.ChassisSubtype, r.Chassis)
	}
	if r.SysName != "" {
		return "n:" + r.SysName
	}
	return ""
}

func portKey(r *Remote) string { return fmt.Sprintf("%d:%x", r.PortSubtype, r.PortID) }

// describeID writes an LLDP ID for people: a MAC as aa:bb:…, printable
// text as it is, anything else in hex.
func describeID(subtype int, id []byte, macSubtype int) string {
	if subtype == macSubtype && len(id) == 6 {
		return net.HardwareAddr(id).String()
	}
	printable := len(id) > 0
	for _, b := range id {
		if b < 0x20 || b > 0x7e {
			printable = false
			break
		}
	}
	if printable {
		return clip(string(id))
	}
	return hex.EncodeToString(id)
}

// candidate is a link as one or both of its ends reported it.
type candidate struct {
	a, b  fabric.PortRef
	width string
	speed string
	state string
	seen  int // how many ends' LLDP tables have it (1 or 2); 0: dropped
	from  string
	by    fabric.GUID // the switch whose table this report is from
	hostB *hostEnd    // b is a host port, numbered once all are known
}

// build turns what the switches that answered said into a topology: the
// switches, their LLDP neighbours that are not polled switches (hosts),
// and the links LLDP shows between them. Inconsistent data (a neighbour
// naming a port its switch does not have, a switch seeing itself, two
// links claiming one port) is left out with an error naming the switch and
// the MIB object; the rest is kept. Ports and LIDs are numbered
// deterministically (see docs/ethernet.md).
func build(views []*view) (*fabric.Topology, *layout, []error) {
	var errs []error
	lay := &layout{switches: map[fabric.GUID]*swLayout{}, names: map[fabric.PortRef]string{}}
	byGUID := map[fabric.GUID]*view{}
	var guids []fabric.GUID
	numbering := map[fabric.GUID]error{} // named once the switches are
	for _, v := range views {
		g := v.guid()
		if other, dup := byGUID[g]; dup {
			errs = append(errs, errf(v.name(), "lldpLocChassisId", "same chassis (GUID %s) as switch %s: the same switch listed twice? read once", g, other.name()))
			continue
		}
		byGUID[g] = v
		guids = append(guids, g)
		l, err := number(v)
		if err != nil {
			numbering[g] = err
		}
		lay.switches[g] = l
	}
	slices.Sort(guids)
	// Which polled switch a neighbour is: by chassis ID, then management
	// address, then system name.
	// A name several switches share (a default sysName) names none.
	byChassis := map[string]fabric.GUID{}
	byAddr := map[string]fabric.GUID{}
	byName := map[string]fabric.GUID{}
	nameUsers := map[string]map[fabric.GUID]bool{}
	for _, g := range guids {
		v := byGUID[g]
		if len(v.LocChassis) > 0 {
			byChassis[fmt.Sprintf("%d:%x", v.LocChassisSubtype, v.LocChassis)] = g
		}
		if v.host != "" {
			byAddr[v.host] = g
		}
		for _, n := range []string{v.SysName, v.LocSysName} {
			if n != "" {
				if nameUsers[n] == nil {
					nameUsers[n] = map[fabric.GUID]bool{}
				}
				nameUsers[n][g] = true
				byName[n] = g
			}
		}
	}
	for n, users := range nameUsers {
		if len(users) > 1 {
			delete(byName, n)
		}
	}
	seenAs := func(r *Remote) (fabric.GUID, bool) {
		if len(r.Chassis) > 0 {
			if g, ok := byChassis[fmt.Sprintf("%d:%x", r.ChassisSubtype, r.Chassis)]; ok {
				return g, true
			}
		}
		for _, a := range r.MgmtAddrs {
			if g, ok := byAddr[a]; ok {
				return g, true
			}
		}
		return 0, false
	}
	switchOf := func(r *Remote) (fabric.GUID, bool) {
		if g, ok := seenAs(r); ok {
			return g, true
		}
		if r.SysName != "" {
			g, ok := byName[r.SysName]
			return g, ok
		}
		return 0, false
	}
	// Each switch's name, distinct from the others' (names.go).
	names := nameSwitches(guids, byGUID, seenAs)
	for g, l := range lay.switches {
		l.name = names[g]
	}
	for _, g := range guids {
		if err := numbering[g]; err != nil {
			retag([]error{err}, byGUID[g], names[g].Name)
			errs = append(errs, err)
		}
	}

	hosts := map[string]*hostInfo{}
	var cands []*candidate
	for _, g := range guids {
		v, l := byGUID[g], lay.switches[g]
		name := l.name.Name
		for _, r := range v.Remotes {
			who := describeID(r.ChassisSubtype, r.Chassis, chassisMAC)
			if r.SysName != "" {
				who = strconv.Quote(r.SysName)
			}
			ifi, ok := v.localIf(r.LocalPort)
			if !ok {
				errs = append(errs, errf(name, "lldpRemLocalPortNum", "neighbour %s is on local port %d, which neither lldpLocPortTable nor ifTable has", who, r.LocalPort))
				continue
			}
			port, ok := l.ifPort[ifi]
			if !ok {
				errs = append(errs, errf(name, "lldpRemLocalPortNum", "neighbour %s is on interface %d, which is not a port", who, ifi))
				continue
			}
			lf := v.Ifaces[ifi]
			state := operState(lf)
			if state == "" {
				continue // port down: the entry is stale until it ages out
			}
			if len(r.PortID) == 0 {
				errs = append(errs, errf(name, "lldpRemPortId", "neighbour %s on %s: missing (truncated table?)", who, lf.Name))
				continue
			}
			pid := describeID(r.PortSubtype, r.PortID, portMAC)
			if og, isSwitch := switchOf(r); isSwitch {
				o, ol := byGUID[og], lay.switches[og]
				oname := ol.name.Name
				oifi, ok := o.remotePort(r.PortSubtype, r.PortID)
				if !ok {
					errs = append(errs, errf(name, "lldpRemPortId", "neighbour %s on %s names port %q, which switch %s does not have", oname, lf.Name, pid, oname))
					continue
				}
				oport, ok := ol.ifPort[oifi]
				if !ok {
					errs = append(errs, errf(name, "lldpRemPortId", "neighbour %s on %s names interface %q, which is not a port", oname, lf.Name, pid))
					continue
				}
				if og == g && oport == port {
					errs = append(errs, errf(name, "lldpRemChassisId", "port %s sees itself as its neighbour (a loop)", lf.Name))
					continue
				}
				if og == g {
					errs = append(errs, errf(name, "lldpRemChassisId", "port %s sees this same switch on its port %s (a loop); link left out", lf.Name, o.Ifaces[oifi].Name))
					continue
				}
				of := o.Ifaces[oifi]
				ostate := operState(of)
				if ostate == "" {
					continue
				}
				if ostate != "Active" {
					state = ostate
				}
				w, s := linkSpeed(lf.HighSpeed, of.HighSpeed)
				cands = append(cands, &candidate{a: fabric.PortRef{GUID: g, Port: port}, b: fabric.PortRef{GUID: og, Port: oport},
					width: w, speed: s, state: state, seen: 1, from: name, by: g})
				continue
			}
			hk := hostKey(r)
			if hk == "" {
				errs = append(errs, errf(name, "lldpRemChassisId", "neighbour on %s has neither a chassis ID nor a system name", lf.Name))
				continue
			}
			h := hosts[hk]
			if h == nil {
				h = &hostInfo{key: hk, chassisSubtype: r.ChassisSubtype, chassis: r.Chassis, ports: map[string]bool{}, portName: map[string]string{}}
				hosts[hk] = h
			}
			if h.sysName == "" {
				h.sysName = r.SysName
			}
			pk := portKey(r)
			if !h.ports[pk] {
				h.portName[pk] = pid
			}
			h.ports[pk] = true
			w, s := linkSpeed(lf.HighSpeed)
			cands = append(cands, &candidate{a: fabric.PortRef{GUID: g, Port: port}, width: w, speed: s, state: state, seen: 1,
				from: name, by: g, hostB: &hostEnd{host: hk, port: pk}})
		}
	}

	// Hosts: GUIDs from their chassis, ports numbered in port-ID order.
	var nodes []fabric.Node
	hostGUID := map[string]fabric.GUID{}
	hostPort := map[hostEnd]int{}
	taken := map[fabric.GUID]string{}
	for _, g := range guids {
		taken[g] = lay.switches[g].name.Name
	}
	hkeys := make([]string, 0, len(hosts))
	for k := range hosts {
		hkeys = append(hkeys, k)
	}
	sort.Strings(hkeys)
	for _, k := range hkeys {
		h := hosts[k]
		g := chassisGUID(h.chassisSubtype, h.chassis)
		if len(h.chassis) == 0 {
			g = hashGUID([]byte("host:" + h.sysName))
		}
		desc := h.sysName
		if desc == "" {
			desc = describeID(h.chassisSubtype, h.chassis, chassisMAC)
		}
		if other, dup := taken[g]; dup {
			errs = append(errs, errf(desc, "lldpRemChassisId", "host has the chassis ID (GUID %s) of %s; left out", g, other))
			continue
		}
		taken[g] = desc
		hostGUID[k] = g
		pks := make([]string, 0, len(h.ports))
		for pk := range h.ports {
			pks = append(pks, pk)
		}
		sort.Strings(pks)
		if len(pks) > MaxPorts {
			errs = append(errs, errf(desc, "lldpRemPortId", "host seen on %d ports; only %d kept", len(pks), MaxPorts))
			pks = pks[:MaxPorts]
		}
		pnames := make([]string, len(pks)+1)
		for i, pk := range pks {
			hostPort[hostEnd{k, pk}] = i + 1
			lay.names[fabric.PortRef{GUID: g, Port: i + 1}] = h.portName[pk]
			pnames[i+1] = h.portName[pk]
		}
		nodes = append(nodes, fabric.Node{GUID: g, Type: fabric.CA, Description: desc, Ports: len(pks), PortNames: pnames})
	}
	for _, c := range cands {
		if c.hostB != nil {
			g, ok := hostGUID[c.hostB.host]
			p, pok := hostPort[*c.hostB]
			if !ok || !pok {
				c.seen = 0
				continue
			}
			c.b = fabric.PortRef{GUID: g, Port: p}
		}
	}

	// Links: both ends' reports of one link are one link, confirmed; two
	// links claiming a port are a conflict, the confirmed one kept.
	type pair struct{ a, b fabric.PortRef }
	key := func(c *candidate) pair {
		if c.b.Less(c.a) {
			return pair{c.b, c.a}
		}
		return pair{c.a, c.b}
	}
	merged := map[pair]*candidate{}
	var order []*candidate
	for _, c := range cands {
		if c.seen == 0 {
			continue
		}
		k := key(c)
		if m, ok := merged[k]; ok {
			if m.by != c.by && m.seen < 2 { // the other end confirms it
				m.seen++
			}
			continue
		}
		merged[k] = c
		order = append(order, c)
	}
	slices.SortStableFunc(order, func(x, y *candidate) int {
		if c := cmp.Compare(y.seen, x.seen); c != 0 {
			return c
		}
		kx, ky := key(x), key(y)
		if c := cmp.Compare(kx.a.GUID, ky.a.GUID); c != 0 {
			return c
		}
		if c := cmp.Compare(kx.a.Port, ky.a.Port); c != 0 {
			return c
		}
		if c := cmp.Compare(kx.b.GUID, ky.b.GUID); c != 0 {
			return c
		}
		return cmp.Compare(kx.b.Port, ky.b.Port)
	})
	used := map[fabric.PortRef]*candidate{}
	var links []fabric.Link
	portName := func(p fabric.PortRef) string {
		if l := lay.switches[p.GUID]; l != nil {
			return fmt.Sprintf("%s %s", l.name.Name, l.view.Ifaces[l.portIf[p.Port]].Name)
		}
		return fmt.Sprintf("%s port %d", taken[p.GUID], p.Port)
	}
	for _, c := range order {
		clash := used[c.a]
		if clash == nil {
			clash = used[c.b]
		}
		if clash != nil {
			errs = append(errs, errf(c.from, "lldpRemTable", "LLDP shows %s linked to %s, but %s is already linked to %s; left out (inconsistent LLDP tables)",
				portName(c.a), portName(c.b), portName(clash.a), portName(clash.b)))
			continue
		}
		used[c.a], used[c.b] = c, c
		links = append(links, fabric.NewLink(c.a, c.b, c.width, c.speed, c.state))
	}

	for _, g := range guids {
		v, l := byGUID[g], lay.switches[g]
		pnames := make([]string, l.ports()+1)
		for p, i := range l.portIf {
			lay.names[fabric.PortRef{GUID: g, Port: p}] = v.Ifaces[i].Name
			pnames[p] = v.Ifaces[i].Name
		}
		nodes = append(nodes, fabric.Node{GUID: g, Type: fabric.Switch, Description: l.name.Name, Ports: l.ports(), PortNames: pnames})
	}
	assignLIDs(nodes, links)
	t, err := fabric.NewTopology(nodes, links)
	if err != nil {
		return nil, nil, append(errs, fmt.Errorf("eth: topology: %w", err))
	}
	return t, lay, errs
}

// assignLIDs gives every switch and every linked host port a pseudo-LID,
// which the route and attribution machinery address endpoints by. A LID is
// a hash of the node's GUID (and the port, for a host) into a space of at
// least 1024 and four times the endpoints, taken in GUID order with the
// next free LID on a collision: the same fabric gets the same LIDs, and a
// node added or removed moves no other's LID unless it collided.
func assignLIDs(nodes []fabric.Node, links []fabric.Link) {
	linked := map[fabric.PortRef]bool{}
	for _, l := range links {
		linked[l.A], linked[l.B] = true, true
	}
	type want struct {
		node, port int // port 0: the switch
		key        uint64
	}
	var ws []want
	for i := range nodes {
		n := &nodes[i]
		if n.Type == fabric.Switch {
			ws = append(ws, want{i, 0, uint64(n.GUID)})
			continue
		}
		n.PortLIDs = make([]fabric.LID, n.Ports+1)
		for p := 1; p <= n.Ports; p++ {
			if linked[fabric.PortRef{GUID: n.GUID, Port: p}] {
				ws = append(ws, want{i, p, uint64(n.GUID) ^ uint64(p)<<56 ^ uint64(p)})
			}
		}
	}
	space := 1024
	for space < 4*len(ws) && space < fabric.MaxUnicastLID {
		space *= 2
	}
	space = min(space, fabric.MaxUnicastLID)
	slices.SortFunc(ws, func(a, b want) int {
		if c := cmp.Compare(nodes[a.node].GUID, nodes[b.node].GUID); c != 0 {
			return c
		}
		return cmp.Compare(a.port, b.port)
	})
	used := make([]bool, space+1)
	for k, w := range ws {
		if k >= space {
			break // more endpoints than LIDs: the rest have none
		}
		h := fnv.New64a()
		var b [8]byte
		for i := range b {
			b[i] = byte(w.key >> (8 * i))
		}
		h.Write(b[:])
		lid := 1 + int(h.Sum64()%uint64(space))
		for used[lid] {
			lid = lid%space + 1
		}
		used[lid] = true
		n := &nodes[w.node]
		if w.port == 0 {
			n.LID = fabric.LID(lid)
			continue
		}
		n.PortLIDs[w.port] = fabric.LID(lid)
		if n.LID == 0 {
			n.LID = fabric.LID(lid)
		}
	}
}

// retag names the switch of the errors about v that name it by its own
// name (view.name) as name: errors read before the switches were named.
func retag(errs []error, v *view, name string) {
	own := v.name()
	for _, err := range errs {
		var e *Error
		if errors.As(err, &e) && e.Switch == own {
			e.Switch = name
		}
	}
}

// forwardingTables projects the shortest-path model onto one linear table
// per switch: the lowest-numbered of the equal-cost ports toward each LID
// (0 for the switch's own). They are what the store keeps and what tools
// that follow one path use; fabric.Routes itself routes these switches by
// the model, equal-cost paths included.
func forwardingTables(t *fabric.Topology) fabric.ForwardingTables {
	r := fabric.NewRoutes(t, nil)
	var lids []fabric.LID
	maxLID := fabric.LID(0)
	for i := range t.Nodes {
		n := &t.Nodes[i]
		if n.Type == fabric.Switch {
			if n.LID != 0 {
				lids = append(lids, n.LID)
			}
		} else {
			for _, l := range n.PortLIDs {
				if l != 0 {
					lids = append(lids, l)
				}
			}
		}
	}
	for _, l := range lids {
		maxLID = max(maxLID, l)
	}
	ft := fabric.ForwardingTables{}
	for i := range t.Nodes {
		n := &t.Nodes[i]
		if n.Type != fabric.Switch {
			continue
		}
		tbl := make([]uint8, int(maxLID)+1)
		for j := range tbl {
			tbl[j] = fabric.NoPort
		}
		for _, l := range lids {
			if l == n.LID {
				tbl[l] = 0
			} else if ps := r.NextPorts(n.GUID, l); len(ps) > 0 {
				tbl[l] = uint8(ps[0])
			}
		}
		ft[n.GUID] = tbl
	}
	return ft
}
