package fabric

import (
	"encoding/json"
	"testing"
)

// Port names: each link's ends take their names from the nodes, whichever
// way round the link was given; the id keeps the numbers; a node without
// names (InfiniBand, a topology stored before names) gives none.
func TestPortNames(t *testing.T) {
	sw, h, ib := GUID(0x10), GUID(0x20), GUID(0x30)
	nodes := []Node{
		{GUID: sw, Type: Switch, Description: "leaf1", Ports: 3, PortNames: []string{"", "swp1", "swp2", "swp3"}},
		{GUID: h, Type: CA, Description: "h1", Ports: 1, PortNames: []string{"", "eth0"}},
		{GUID: ib, Type: CA, Description: "n1 HCA-1", Ports: 1},
	}
	// Given B first: NewTopology swaps the ends, and their names with them.
	links := []Link{{A: PortRef{h, 1}, B: PortRef{sw, 2}}, {A: PortRef{sw, 3}, B: PortRef{ib, 1}}}
	topo, err := NewTopology(nodes, links)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := topo.LinkAt(PortRef{h, 1})
	if l.A != (PortRef{sw, 2}) || l.AName != "swp2" || l.BName != "eth0" {
		t.Errorf("leaf1—h1: %+v, want a = leaf1 port 2 named swp2, b = h1 eth0", *l)
	}
	if id := l.ID(); id != "0x0000000000000010:2-0x0000000000000020:1" {
		t.Errorf("id %s: the numbers, not the names", id)
	}
	l, _ = topo.LinkAt(PortRef{ib, 1})
	if l.AName != "swp3" || l.BName != "" {
		t.Errorf("leaf1—n1: names %q, %q; want swp3 and none (InfiniBand)", l.AName, l.BName)
	}
	for _, c := range []struct {
		p    PortRef
		want string
	}{{PortRef{sw, 1}, "swp1"}, {PortRef{sw, 0}, ""}, {PortRef{sw, 9}, ""}, {PortRef{ib, 1}, ""}, {PortRef{0x99, 1}, ""}} {
		if got := topo.PortName(c.p); got != c.want {
			t.Errorf("PortName(%s) = %q, want %q", c.p, got, c.want)
		}
	}
	// JSON: names where there are some, no key where none.
	b, _ := json.Marshal(topo.Links)
	var back []map[string]any
	_ = json.Unmarshal(b, &back)
	if back[0]["a_name"] != "swp2" || back[0]["b_name"] != "eth0" {
		t.Errorf("link JSON %s", b)
	}
	if _, ok := back[1]["b_name"]; ok {
		t.Errorf("an unnamed end has b_name: %s", b)
	}
	nb, _ := json.Marshal(topo.Nodes[2])
	var nm map[string]any
	_ = json.Unmarshal(nb, &nm)
	if _, ok := nm["port_names"]; ok {
		t.Errorf("an InfiniBand node has port_names: %s", nb)
	}
}
