// Package fabric is Netloom's model of a network fabric: nodes, ports, links,
// LIDs, port counters and routes. It is pure: no I/O beyond io.Reader/Writer,
// so every source (InfiniBand, simulated) and every consumer shares it.
package fabric

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// GUID is a 64-bit InfiniBand globally unique identifier.
type GUID uint64

func (g GUID) String() string { return fmt.Sprintf("0x%016x", uint64(g)) }

// MarshalText writes a GUID as "0x" and 16 hex digits, the way the
// infiniband-diags tools print it.
func (g GUID) MarshalText() ([]byte, error) { return []byte(g.String()), nil }

// UnmarshalText accepts a GUID with or without "0x".
func (g *GUID) UnmarshalText(b []byte) error {
	v, err := ParseGUID(string(b))
	if err != nil {
		return err
	}
	*g = v
	return nil
}

// ParseGUID parses a hexadecimal GUID, with or without "0x".
func ParseGUID(s string) (GUID, error) {
	t := strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	if t == "" || len(t) > 16 {
		return 0, fmt.Errorf("guid %q: want up to 16 hex digits", s)
	}
	v, err := strconv.ParseUint(t, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("guid %q: not hexadecimal", s)
	}
	return GUID(v), nil
}

// LID is a 16-bit InfiniBand local identifier; unicast LIDs are 1..0xBFFF.
type LID uint16

// MaxUnicastLID is the highest unicast LID.
const MaxUnicastLID = 0xBFFF

// NodeType tells switches from channel adapters (hosts) and routers.
type NodeType uint8

const (
	Switch NodeType = 1 + iota
	CA
	Router
)

func (t NodeType) String() string {
	switch t {
	case Switch:
		return "switch"
	case CA:
		return "ca"
	case Router:
		return "router"
	}
	return "unknown"
}

func (t NodeType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

func (t *NodeType) UnmarshalText(b []byte) error {
	switch string(b) {
	case "switch":
		*t = Switch
	case "ca":
		*t = CA
	case "router":
		*t = Router
	default:
		return fmt.Errorf("node type %q: want switch, ca or router", b)
	}
	return nil
}

// Node is a switch or channel adapter. A switch has one LID (its port 0);
// a CA has one LID per port, and LID holds that of its lowest active port.
type Node struct {
	GUID        GUID     `json:"guid"`
	Type        NodeType `json:"type"`
	Description string   `json:"description"`
	LID         LID      `json:"lid"`
	Ports       int      `json:"ports"`
	// PortLIDs holds per-port LIDs of a CA (index = port number); nil for switches.
	PortLIDs []LID `json:"port_lids,omitempty"`
	// PortGUIDs holds per-port GUIDs of a CA (index = port number); nil for switches.
	PortGUIDs []GUID `json:"port_guids,omitempty"`
	// Fabric names the fabric the node is in, in a view of several
	// fabrics (Merge); empty in one fabric's own topology.
	Fabric string `json:"fabric,omitempty"`
	// PortNames are the ports' names where the fabric gives them (index =
	// port number, "" where a port has none): an Ethernet interface's
	// ifName ("swp1"), a host's LLDP port ID ("eth0"). InfiniBand ports
	// have only numbers (nil). Stored with the topology; a topology
	// stored before names were kept reads back without them.
	PortNames []string `json:"port_names,omitempty"`
}

// PortName is port p's name (PortNames), "" where it has none.
func (n *Node) PortName(p int) string {
	if p > 0 && p < len(n.PortNames) {
		return n.PortNames[p]
	}
	return ""
}

// Name is the host name a CA's description starts with ("n17" for
// "n17 HCA-1"), or the whole description of a switch.
func (n *Node) Name() string {
	if n.Type == CA {
		if f := strings.Fields(n.Description); len(f) > 0 {
			return f[0]
		}
	}
	return n.Description
}

// PortLID is the LID addressing port p of the node.
func (n *Node) PortLID(p int) LID {
	if n.Type != Switch && p >= 0 && p < len(n.PortLIDs) && n.PortLIDs[p] != 0 {
		return n.PortLIDs[p]
	}
	return n.LID
}

// PortRef names one port of one node.
type PortRef struct {
	GUID GUID `json:"guid"`
	Port int  `json:"port"`
}

// String is "GUID:PORT", which is also how a port is named in URLs.
func (p PortRef) String() string { return fmt.Sprintf("%s:%d", p.GUID, p.Port) }

// ParsePortRef parses "GUID:PORT" or "GUID/PORT".
func ParsePortRef(s string) (PortRef, error) {
	i := strings.LastIndexAny(s, "/:")
	if i < 0 {
		return PortRef{}, fmt.Errorf("port %q: want GUID:PORT", s)
	}
	g, err := ParseGUID(s[:i])
	if err != nil {
		return PortRef{}, fmt.Errorf("port %q: %w", s, err)
	}
	n, err := strconv.Atoi(s[i+1:])
	if err != nil || n < 0 || n > 254 {
		return PortRef{}, fmt.Errorf("port %q: port number must be 0..254", s)
	}
	return PortRef{GUID: g, Port: n}, nil
}

// Less orders ports by GUID, then port number.
// comparePorts orders ports as Less does, for slices.SortFunc.
func comparePorts(p, q PortRef) int {
	if c := cmp.Compare(p.GUID, q.GUID); c != 0 {
		return c
	}
	return cmp.Compare(p.Port, q.Port)
}

func (p PortRef) Less(q PortRef) bool {
	if p.GUID != q.GUID {
		return p.GUID < q.GUID
	}
	return p.Port < q.Port
}

// Link joins two ports. A is always the lesser PortRef, so a link has one
// canonical form whichever end discovered it.
type Link struct {
	A PortRef `json:"a"`
	B PortRef `json:"b"`
	// AName and BName are the ends' port names (Node.PortNames), set by
	// NewTopology from the nodes: "" where a port has only its number.
	// A link's ID keeps the numbers.
	AName string `json:"a_name,omitempty"`
	BName string `json:"b_name,omitempty"`
	Width string `json:"width"` // "1X", "4X", "8X", "12X"
	Speed string `json:"speed"` // "SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR"
	State string `json:"state"` // "Active", "Armed", "Init", "Down"
	// MaxWidth and MaxSpeed are the widest width and fastest speed both
	// ends have enabled and support: what the link should train to (as
	// iblinkinfo's "could be"); empty when unknown.
	MaxWidth string `json:"max_width,omitempty"`
	MaxSpeed string `json:"max_speed,omitempty"`
}

// NewLink returns the canonical link between two ports.
func NewLink(a, b PortRef, width, speed, state string) Link {
	if b.Less(a) {
		a, b = b, a
	}
	return Link{A: a, B: b, Width: width, Speed: speed, State: state}
}

// ID is the link's canonical name, "GUIDA:PORTA-GUIDB:PORTB".
func (l Link) ID() string { return l.A.String() + "-" + l.B.String() }

// Capacity is the link's data rate in bytes per second, one direction.
func (l Link) Capacity() float64 { return LinkCapacity(l.Width, l.Speed) }

var laneGbps = map[string]float64{ // data rate per lane after encoding
	"SDR": 2.0, "DDR": 4.0, "QDR": 8.0, "FDR10": 10.0 * 64 / 66, "FDR": 14.0625 * 64 / 66,
	"EDR": 25.78125 * 64 / 66, "HDR": 50.0, "NDR": 100.0, "XDR": 200.0,
}

// LinkCapacity is the one-direction data rate in bytes/s of width x speed,
// or 0 when either is unknown. An Ethernet speed ("100GbE", "10GbE",
// "100MbE": see EthernetSpeed) is the whole link's rate; its width is "1X"
// (or empty) and any other width multiplies it as lanes would.
func LinkCapacity(width, speed string) float64 {
	if mbps, ok := ethernetMbps(speed); ok {
		w := 1
		if width != "" {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.ToUpper(width), "X"))
			if err != nil || n <= 0 {
				return 0
			}
			w = n
		}
		return float64(w) * mbps * 1e6 / 8
	}
	w, err := strconv.Atoi(strings.TrimSuffix(strings.ToUpper(width), "X"))
	if err != nil {
		return 0
	}
	return float64(w) * laneGbps[strings.ToUpper(speed)] * 1e9 / 8
}

// EthernetSpeed names an Ethernet link's rate from IF-MIB's ifHighSpeed
// (millions of bits per second): "100GbE", "25GbE", "2.5GbE", "100MbE";
// "" when the rate is unknown (0).
func EthernetSpeed(mbps uint64) string {
	switch {
	case mbps == 0:
		return ""
	case mbps%1000 == 0:
		return strconv.FormatUint(mbps/1000, 10) + "GbE"
	case mbps >= 1000 && mbps%100 == 0:
		return strconv.FormatFloat(float64(mbps)/1000, 'f', -1, 64) + "GbE"
	}
	return strconv.FormatUint(mbps, 10) + "MbE"
}

// IsEthernetSpeed reports whether speed names an Ethernet rate
// (EthernetSpeed's form) rather than an InfiniBand one.
func IsEthernetSpeed(speed string) bool {
	_, ok := ethernetMbps(speed)
	return ok
}

// ethernetMbps parses EthernetSpeed's form.
func ethernetMbps(speed string) (float64, bool) {
	var unit float64
	switch {
	case strings.HasSuffix(speed, "GbE"):
		unit = 1000
	case strings.HasSuffix(speed, "MbE"):
		unit = 1
	default:
		return 0, false
	}
	v, err := strconv.ParseFloat(speed[:len(speed)-3], 64)
	if err != nil || !(v > 0 && v <= 1e7) {
		return 0, false
	}
	return v * unit, true
}

// Topology is one snapshot of a fabric. Nodes and Links are kept sorted
// (nodes by GUID, links by A then B) so two snapshots compare directly.
type Topology struct {
	Nodes []Node `json:"nodes"`
	Links []Link `json:"links"`

	byGUID map[GUID]int
	byLID  map[LID]PortRef
	// sharedLIDs are LIDs that ports of several fabrics have (each
	// subnet numbers its own): they address no one port of a merged view.
	sharedLIDs map[LID][]string
	peer       map[PortRef]int // port -> index into Links
}

// NewTopology sorts and indexes nodes and links. It reports duplicate GUIDs
// and links that name unknown nodes or a port twice.
func NewTopology(nodes []Node, links []Link) (*Topology, error) {
	t := &Topology{Nodes: nodes, Links: links}
	slices.SortFunc(t.Nodes, func(a, b Node) int { return cmp.Compare(a.GUID, b.GUID) })
	for i := range t.Links {
		l := &t.Links[i]
		if l.B.Less(l.A) {
			l.A, l.B = l.B, l.A
		}
	}
	slices.SortFunc(t.Links, func(a, b Link) int {
		if c := comparePorts(a.A, b.A); c != 0 {
			return c
		}
		return comparePorts(a.B, b.B)
	})
	if err := t.index(); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Topology) index() error {
	t.byGUID = make(map[GUID]int, len(t.Nodes))
	t.byLID = make(map[LID]PortRef, len(t.Nodes))
	t.sharedLIDs = nil
	lidFabric := map[LID]string{}
	addLID := func(l LID, p PortRef, fab string) {
		if _, shared := t.sharedLIDs[l]; shared {
			t.sharedLIDs[l] = append(t.sharedLIDs[l], fab)
			return
		}
		if other, ok := lidFabric[l]; ok && other != fab {
			if t.sharedLIDs == nil {
				t.sharedLIDs = map[LID][]string{}
			}
			t.sharedLIDs[l] = []string{other, fab}
			delete(t.byLID, l)
			return
		}
		lidFabric[l] = fab
		t.byLID[l] = p
	}
	for i := range t.Nodes {
		n := &t.Nodes[i]
		if _, dup := t.byGUID[n.GUID]; dup {
			return fmt.Errorf("topology: node %s appears twice", n.GUID)
		}
		t.byGUID[n.GUID] = i
		if n.Type == Switch {
			if n.LID != 0 {
				addLID(n.LID, PortRef{n.GUID, 0}, n.Fabric)
			}
			continue
		}
		for p := 1; p < len(n.PortLIDs); p++ {
			if n.PortLIDs[p] != 0 {
				addLID(n.PortLIDs[p], PortRef{n.GUID, p}, n.Fabric)
			}
		}
		if len(n.PortLIDs) == 0 && n.LID != 0 {
			addLID(n.LID, PortRef{n.GUID, 1}, n.Fabric)
		}
	}
	t.peer = make(map[PortRef]int, 2*len(t.Links))
	for i := range t.Links {
		l := &t.Links[i]
		l.AName, l.BName = t.PortName(l.A), t.PortName(l.B)
		for _, end := range []PortRef{l.A, l.B} {
			if _, ok := t.byGUID[end.GUID]; !ok {
				return fmt.Errorf("topology: link %s names unknown node %s", l.ID(), end.GUID)
			}
			if j, dup := t.peer[end]; dup {
				return fmt.Errorf("topology: port %s is in links %s and %s", end, t.Links[j].ID(), l.ID())
			}
			t.peer[end] = i
		}
	}
	return nil
}

// Node returns the node with the given GUID.
func (t *Topology) Node(g GUID) (*Node, bool) {
	i, ok := t.byGUID[g]
	if !ok {
		return nil, false
	}
	return &t.Nodes[i], true
}

// PortName is port p's name in the fabric (Node.PortName), "" where it
// has only its number.
func (t *Topology) PortName(p PortRef) string {
	if n, ok := t.Node(p.GUID); ok {
		return n.PortName(p.Port)
	}
	return ""
}

// PortByLID returns the port a LID addresses (port 0 of a switch). In a
// merged view a LID that several fabrics use addresses none (SharedLID).
func (t *Topology) PortByLID(l LID) (PortRef, bool) {
	p, ok := t.byLID[l]
	return p, ok
}

// SharedLID returns the fabrics whose ports have LID l, when that is more
// than one (a merged view of several subnets; see Merge).
func (t *Topology) SharedLID(l LID) []string { return t.sharedLIDs[l] }

// Fabrics lists the fabric names of a merged view, sorted; nil for one
// fabric's own topology.
func (t *Topology) Fabrics() []string {
	seen := map[string]bool{}
	var out []string
	for i := range t.Nodes {
		if f := t.Nodes[i].Fabric; f != "" && !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out
}

// Merge joins the topologies of several fabrics into one view: every
// node is a copy with its Fabric set to the name it is listed under.
// Fabrics are separate subnets, so no link joins them; a GUID in two of
// them is an error naming both (GUIDs are unique worldwide, so it means
// one fabric was recorded under two names).
func Merge(parts map[string]*Topology) (*Topology, error) {
	names := make([]string, 0, len(parts))
	n, l := 0, 0
	for name, t := range parts {
		names = append(names, name)
		n += len(t.Nodes)
		l += len(t.Links)
	}
	sort.Strings(names)
	nodes := make([]Node, 0, n)
	links := make([]Link, 0, l)
	owner := make(map[GUID]string, n)
	for _, name := range names {
		t := parts[name]
		for _, nd := range t.Nodes {
			if other, dup := owner[nd.GUID]; dup {
				return nil, fmt.Errorf("merge fabrics: node %s is in fabric %q and in fabric %q", nd.GUID, other, name)
			}
			owner[nd.GUID] = name
			nd.Fabric = name
			nodes = append(nodes, nd)
		}
		links = append(links, t.Links...)
	}
	return NewTopology(nodes, links)
}

// LinkAt returns the link attached to a port.
func (t *Topology) LinkAt(p PortRef) (*Link, bool) {
	i, ok := t.peer[p]
	if !ok {
		return nil, false
	}
	return &t.Links[i], true
}

// Peer returns the port at the other end of p's link.
func (t *Topology) Peer(p PortRef) (PortRef, bool) {
	l, ok := t.LinkAt(p)
	if !ok {
		return PortRef{}, false
	}
	if l.A == p {
		return l.B, true
	}
	return l.A, true
}

// FindLink returns the link with the given ID ("A-B" in either order) or
// attached to the given port ("GUID:PORT").
func (t *Topology) FindLink(id string) (*Link, error) {
	if i := strings.Index(id, "-"); i > 0 {
		a, err := ParsePortRef(id[:i])
		if err != nil {
			return nil, err
		}
		b, err := ParsePortRef(id[i+1:])
		if err != nil {
			return nil, err
		}
		if l, ok := t.LinkAt(a); ok && (l.A == b || l.B == b) {
			return l, nil
		}
		return nil, fmt.Errorf("link %q: no such link", id)
	}
	p, err := ParsePortRef(id)
	if err != nil {
		return nil, err
	}
	if l, ok := t.LinkAt(p); ok {
		return l, nil
	}
	return nil, fmt.Errorf("link %q: no link at that port", id)
}

// FindNode resolves a node by GUID ("0x…"), LID (decimal), or name: the
// whole description or, for a CA, its first word ("n17").
func (t *Topology) FindNode(key string) (*Node, error) {
	if strings.HasPrefix(key, "0x") || strings.HasPrefix(key, "0X") {
		g, err := ParseGUID(key)
		if err != nil {
			return nil, err
		}
		if n, ok := t.Node(g); ok {
			return n, nil
		}
		// A CA port GUID names its node too.
		for i := range t.Nodes {
			for _, pg := range t.Nodes[i].PortGUIDs {
				if pg == g {
					return &t.Nodes[i], nil
				}
			}
		}
		return nil, fmt.Errorf("node %q: no node with that GUID", key)
	}
	if v, err := strconv.ParseUint(key, 10, 16); err == nil {
		if p, ok := t.PortByLID(LID(v)); ok {
			n, _ := t.Node(p.GUID)
			return n, nil
		}
		return nil, fmt.Errorf("node %q: no port has that LID", key)
	}
	var found *Node
	for i := range t.Nodes {
		n := &t.Nodes[i]
		if n.Description == key || (n.Type == CA && n.Name() == key) {
			if found != nil && found.GUID != n.GUID {
				return nil, fmt.Errorf("node %q: name is ambiguous (%s and %s); use a GUID or LID", key, found.GUID, n.GUID)
			}
			found = n
		}
	}
	if found == nil {
		return nil, fmt.Errorf("node %q: no node with that name, GUID or LID", key)
	}
	return found, nil
}

// Counts summarizes a topology.
type Counts struct {
	Switches, CAs, SwitchPorts, Links int
}

func (t *Topology) Counts() Counts {
	var c Counts
	for i := range t.Nodes {
		if t.Nodes[i].Type == Switch {
			c.Switches++
			c.SwitchPorts += t.Nodes[i].Ports
		} else {
			c.CAs++
		}
	}
	c.Links = len(t.Links)
	return c
}

// SwitchPorts lists every physical port (1..N) of every switch that has a
// link, the ports a sweep reads; with cas it adds linked CA ports.
func (t *Topology) SwitchPorts(cas bool) []PortRef {
	out := make([]PortRef, 0, 2*len(t.Links))
	for _, l := range t.Links {
		for _, end := range []PortRef{l.A, l.B} {
			n, _ := t.Node(end.GUID)
			if n.Type == Switch || cas {
				out = append(out, end)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out
}

// Endpoint resolves a route endpoint to a port: a decimal LID names the
// port it addresses (none where fabrics of a merged view share it); a name
// or GUID names the node's port of its (first) LID, port 0 of a switch.
func (t *Topology) Endpoint(key string) (PortRef, error) {
	if v, err := strconv.ParseUint(key, 10, 16); err == nil {
		if p, ok := t.PortByLID(LID(v)); ok {
			return p, nil
		}
		if fabs := t.SharedLID(LID(v)); len(fabs) > 0 {
			return PortRef{}, fmt.Errorf("LID %d is in several fabrics (%s): name the node instead", v, strings.Join(fabs, ", "))
		}
	}
	n, err := t.FindNode(key)
	if err != nil {
		return PortRef{}, err
	}
	if n.Type == Switch {
		return PortRef{n.GUID, 0}, nil
	}
	for p := 1; p < len(n.PortLIDs); p++ {
		if n.PortLIDs[p] == n.LID {
			return PortRef{n.GUID, p}, nil
		}
	}
	return PortRef{n.GUID, 1}, nil
}

// EndpointLID resolves a route endpoint: a decimal LID names exactly that
// port; a name or GUID names the node's (first) LID.
func (t *Topology) EndpointLID(key string) (LID, error) {
	n, err := t.FindNode(key)
	if err != nil {
		return 0, err
	}
	if v, err := strconv.ParseUint(key, 10, 16); err == nil {
		return LID(v), nil
	}
	return n.LID, nil
}

// AllPorts lists every physical port (1..N) of every switch, linked or
// not, the ports ibqueryerrors reads; with cas it adds every CA port that
// has a LID.
func (t *Topology) AllPorts(cas bool) []PortRef {
	var out []PortRef
	for i := range t.Nodes {
		n := &t.Nodes[i]
		for p := 1; p <= n.Ports; p++ {
			if n.Type == Switch || (cas && p < len(n.PortLIDs) && n.PortLIDs[p] != 0) {
				out = append(out, PortRef{GUID: n.GUID, Port: p})
			}
		}
	}
	return out
}
