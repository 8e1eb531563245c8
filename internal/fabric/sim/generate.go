package sim

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"strings"

	"github.com/netloom/netloom/internal/fabric"
)

// GUID bases of generated nodes. Host k has node GUID hostGUIDBase+2k and
// port GUID one more; switch i (1-based, creation order) switchGUIDBase+i.
const (
	switchGUIDBase = 0x0002c90200000000
	hostGUIDBase   = 0x0002c90300000000
)

// builder accumulates a generated fabric in creation order.
type builder struct {
	width, speed string
	nodes        []fabric.Node
	links        []fabric.Link
	hosts        []int // indices into nodes, host order
	switches     []int // indices into nodes, creation order
}

func newBuilder(width, speed string, hosts, switches, links int) *builder {
	if width == "" {
		width = "4X"
	}
	if speed == "" {
		speed = "EDR"
	}
	return &builder{
		width: width, speed: speed,
		nodes:    make([]fabric.Node, 0, hosts+switches),
		links:    make([]fabric.Link, 0, links),
		hosts:    make([]int, 0, hosts),
		switches: make([]int, 0, switches),
	}
}

func (b *builder) addSwitch(desc string, ports int) int {
	i := len(b.nodes)
	b.switches = append(b.switches, i)
	b.nodes = append(b.nodes, fabric.Node{
		GUID: fabric.GUID(switchGUIDBase + uint64(len(b.switches))), Type: fabric.Switch,
		Description: desc, Ports: ports,
	})
	return i
}

// addHost adds host n<k> with k = number of hosts so far + 1.
func (b *builder) addHost() int {
	i := len(b.nodes)
	b.hosts = append(b.hosts, i)
	k := uint64(len(b.hosts))
	g := fabric.GUID(hostGUIDBase + 2*k)
	b.nodes = append(b.nodes, fabric.Node{
		GUID: g, Type: fabric.CA, Description: fmt.Sprintf("n%d HCA-1", k), Ports: 1,
		PortLIDs: make([]fabric.LID, 2), PortGUIDs: []fabric.GUID{0, g + 1},
	})
	return i
}

func (b *builder) connect(a, pa, c, pc int) {
	b.links = append(b.links, fabric.NewLink(
		fabric.PortRef{GUID: b.nodes[a].GUID, Port: pa},
		fabric.PortRef{GUID: b.nodes[c].GUID, Port: pc},
		b.width, b.speed, "Active"))
}

// finish assigns LIDs (hosts n1..nN get 1..N, then switches in creation
// order, the way OpenSM numbers a fabric it sweeps from the host side) and
// builds the topology. A fabric with more endpoints than one subnet has
// unicast LIDs gets none.
func (b *builder) finish() (*fabric.Topology, error) {
	if len(b.hosts)+len(b.switches) <= fabric.MaxUnicastLID {
		lid := fabric.LID(1)
		for _, i := range b.hosts {
			b.nodes[i].LID = lid
			b.nodes[i].PortLIDs[1] = lid
			lid++
		}
		for _, i := range b.switches {
			b.nodes[i].LID = lid
			lid++
		}
	}
	return fabric.NewTopology(b.nodes, b.links)
}

// FatTreeLimits returns how many hosts a fat tree of radix-port switches
// holds with 2 and 3 levels.
func FatTreeLimits(radix int) (two, three int) {
	h := radix / 2
	return radix * h, radix * h * h
}

// GenerateFatTree builds a folded-Clos fat tree of hosts hosts from
// radix-port switches with levels levels (0: the fewest that fit), links 4X
// EDR. Routes come from Routes or Generate.
func GenerateFatTree(hosts, radix, levels int) (*fabric.Topology, error) {
	return fatTree(Spec{Kind: KindFatTree, Hosts: hosts, Radix: radix, Levels: levels})
}

func fatTree(sp Spec) (*fabric.Topology, error) {
	n, k, levels := sp.Hosts, sp.Radix, sp.Levels
	if k == 0 {
		k = 36
	}
	what := fmt.Sprintf("fat tree of %d hosts, radix %d", n, k)
	if err := sp.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if n <= 0 {
		return nil, fmt.Errorf("%s: need at least one host", what)
	}
	if k < 4 || k%2 != 0 || k > 254 {
		return nil, fmt.Errorf("%s: radix must be an even number 4..254", what)
	}
	two, three := FatTreeLimits(k)
	switch levels {
	case 0:
		if levels = 2; n > two {
			levels = 3
		}
		if n > three {
			return nil, fmt.Errorf("%s: too many hosts; %d-port switches hold at most %d hosts in 3 levels", what, k, three)
		}
	case 2:
		if n > two {
			return nil, fmt.Errorf("%s: too many hosts for 2 levels (at most %d); use levels=3 or a larger radix", what, two)
		}
	case 3:
		if n > three {
			return nil, fmt.Errorf("%s: too many hosts for 3 levels (at most %d); use a larger radix", what, three)
		}
	default:
		return nil, fmt.Errorf("%s: levels %d: want 2 or 3", what, levels)
	}
	h := k / 2
	leaves := (n + h - 1) / h
	if levels == 2 {
		b := newBuilder(sp.Width, sp.Speed, n, leaves+h, n+leaves*h)
		leafIdx := make([]int, leaves)
		for i := range leaves {
			leafIdx[i] = b.addSwitch(fmt.Sprintf("l1-sw%d", i+1), k)
		}
		spineIdx := make([]int, h)
		for j := range h {
			spineIdx[j] = b.addSwitch(fmt.Sprintf("l2-sw%d", j+1), k)
		}
		addHosts(b, leafIdx, n)
		for i, l := range leafIdx {
			for j, s := range spineIdx {
				b.connect(l, h+1+j, s, i+1)
			}
		}
		t, err := b.finish()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		return t, nil
	}
	pods := (leaves + h - 1) / h
	b := newBuilder(sp.Width, sp.Speed, n, leaves+pods*h+h*h, n+leaves*h+pods*h*h)
	leafIdx := make([]int, leaves)
	for i := range leaves {
		leafIdx[i] = b.addSwitch(fmt.Sprintf("l1-sw%d", i+1), k)
	}
	aggIdx := make([]int, pods*h)
	for i := range aggIdx {
		aggIdx[i] = b.addSwitch(fmt.Sprintf("l2-sw%d", i+1), k)
	}
	coreIdx := make([]int, h*h)
	for i := range coreIdx {
		coreIdx[i] = b.addSwitch(fmt.Sprintf("l3-sw%d", i+1), k)
	}
	addHosts(b, leafIdx, n)
	// Leaves are spread evenly over the pods.
	leaf := 0
	for p := range pods {
		inPod := leaves / pods
		if p < leaves%pods {
			inPod++
		}
		for li := range inPod {
			for a := range h {
				b.connect(leafIdx[leaf], h+1+a, aggIdx[p*h+a], li+1)
			}
			leaf++
		}
		for a := range h {
			for j := range h {
				b.connect(aggIdx[p*h+a], h+1+j, coreIdx[a*h+j], p+1)
			}
		}
	}
	t, err := b.finish()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return t, nil
}

// addHosts spreads n hosts evenly over the leaves, on ports 1.. of each.
func addHosts(b *builder, leaves []int, n int) {
	for i, l := range leaves {
		c := n / len(leaves)
		if i < n%len(leaves) {
			c++
		}
		for p := 1; p <= c; p++ {
			b.connect(b.addHost(), 1, l, p)
		}
	}
}

// Stampede layout; see SpecHelp and the package tests for the totals.
const (
	stampedeLeaves      = 332
	stampedeLeaves20    = 233 // leaves with 20 hosts; the rest have 19
	stampedeLeaves16Up  = 188 // leaves with 16 uplinks; the rest have 15
	stampedeChassis     = 8
	stampedeLines       = 36 // line chips per chassis
	stampedeSpines      = 18 // spine chips per chassis
	stampedeLineDown    = 18 // line chip ports facing leaves
	stampedeFirstUplink = 21 // leaf port of the first uplink
	stampedeRadix       = 36
)

func stampede() (*fabric.Topology, error) {
	hosts := stampedeLeaves20*20 + (stampedeLeaves-stampedeLeaves20)*19
	b := newBuilder("4X", "EDR", hosts, 764, 16893)
	leafIdx := make([]int, stampedeLeaves)
	for i := range leafIdx {
		leafIdx[i] = b.addSwitch(fmt.Sprintf("leaf%d", i+1), stampedeRadix)
	}
	line := make([][]int, stampedeChassis)
	spine := make([][]int, stampedeChassis)
	for c := range stampedeChassis {
		line[c] = make([]int, stampedeLines)
		for l := range line[c] {
			line[c][l] = b.addSwitch(fmt.Sprintf("core%d-line%d", c+1, l+1), stampedeRadix)
		}
		spine[c] = make([]int, stampedeSpines)
		for s := range spine[c] {
			spine[c][s] = b.addSwitch(fmt.Sprintf("core%d-spine%d", c+1, s+1), stampedeRadix)
		}
	}
	for i, l := range leafIdx {
		n := 19
		if i < stampedeLeaves20 {
			n = 20
		}
		for p := 1; p <= n; p++ {
			b.connect(b.addHost(), 1, l, p)
		}
	}
	// Two uplinks to each chassis; a 15-uplink leaf skips one, rotating
	// over the chassis so each loses the same number. Each chassis fills
	// its line chips round-robin, so a leaf's two links land on two chips.
	used := make([]int, stampedeChassis)
	for i, l := range leafIdx {
		skip := -1
		if i >= stampedeLeaves16Up {
			skip = (i - stampedeLeaves16Up) % stampedeChassis
		}
		port := stampedeFirstUplink
		for c := range stampedeChassis {
			for r := range 2 {
				if c == skip && r == 1 {
					continue
				}
				k := used[c]
				used[c]++
				if k >= stampedeLines*stampedeLineDown {
					return nil, fmt.Errorf("stampede: chassis %d has no free line port for leaf%d", c+1, i+1)
				}
				b.connect(l, port, line[c][k%stampedeLines], k/stampedeLines+1)
				port++
			}
		}
	}
	for c := range stampedeChassis {
		for l, li := range line[c] {
			for s, si := range spine[c] {
				b.connect(li, stampedeLineDown+1+s, si, l+1)
			}
		}
	}
	t, err := b.finish()
	if err != nil {
		return nil, fmt.Errorf("stampede: %w", err)
	}
	return t, nil
}

// Generate builds the fabric a spec describes and its forwarding tables.
// The tables are nil (with no error) when the fabric has more endpoints
// than one subnet has unicast LIDs (10x-stampede).
func Generate(ctx context.Context, sp Spec) (*fabric.Topology, fabric.ForwardingTables, error) {
	t, err := Build(sp)
	if err != nil {
		return nil, nil, err
	}
	if !hasLIDs(t) {
		return t, nil, nil
	}
	ft, _, err := ComputeRoutes(ctx, t)
	if err != nil {
		return nil, nil, fmt.Errorf("sim spec %q: %w", sp, err)
	}
	return t, ft, nil
}

// Build builds the fabric a spec describes, without routes.
func Build(sp Spec) (*fabric.Topology, error) {
	t, err := build(sp)
	if err != nil || sp.Prefix == "" {
		return t, err
	}
	return withPrefix(t, sp.Prefix)
}

// withPrefix renames t's hosts nK to PK and switches to P-NAME, and moves
// its GUIDs by (1 + a hash of P mod 255) << 24: bits generated GUIDs leave
// clear, so that fabrics with different prefixes differ in GUIDs too (but
// for one pair of prefixes in 255, which fabric.Merge reports).
func withPrefix(t *fabric.Topology, prefix string) (*fabric.Topology, error) {
	h := fnv.New32a()
	h.Write([]byte(prefix))
	off := fabric.GUID(1+h.Sum32()%255) << 24
	nodes := make([]fabric.Node, len(t.Nodes))
	for i, n := range t.Nodes {
		n.GUID += off
		if n.Type == fabric.Switch {
			n.Description = prefix + "-" + n.Description
		} else {
			n.Description = prefix + strings.TrimPrefix(n.Description, "n")
		}
		if n.PortGUIDs != nil {
			pg := make([]fabric.GUID, len(n.PortGUIDs))
			for j, g := range n.PortGUIDs {
				if g != 0 {
					pg[j] = g + off
				}
			}
			n.PortGUIDs = pg
		}
		nodes[i] = n
	}
	links := make([]fabric.Link, len(t.Links))
	for i, l := range t.Links {
		l.A.GUID += off
		l.B.GUID += off
		links[i] = l
	}
	return fabric.NewTopology(nodes, links)
}

func build(sp Spec) (*fabric.Topology, error) {
	switch sp.Kind {
	case KindFatTree:
		return fatTree(sp)
	case KindStampede:
		return stampede()
	case KindStampede10x:
		return fatTree(Spec{Kind: KindFatTree, Hosts: 10 * 6541, Radix: 64, Levels: 3})
	case KindFile:
		f, err := os.Open(sp.Path)
		if err != nil {
			return nil, fmt.Errorf("sim spec %q: %w", sp, err)
		}
		defer f.Close()
		return ParseNetfile(f, sp.Path)
	}
	return nil, fmt.Errorf("sim spec %q: unknown kind %q", sp, sp.Kind)
}

func hasLIDs(t *fabric.Topology) bool {
	for i := range t.Nodes {
		if t.Nodes[i].LID != 0 {
			return true
		}
	}
	return false
}
