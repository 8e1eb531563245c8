package ethlab

import (
	"fmt"
	"os"
	"regexp"
	"sort"

	"gopkg.in/yaml.v3"
)

// Desc describes a lab: hosts, switches and the data links between them.
// Its YAML form (see docs/ethlab.md) uses the field names in the tags.
type Desc struct {
	// Name is a label for the description (a preset's name); not part of
	// any namespace or interface name.
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
	// STP turns on the kernel's spanning tree in every switch bridge. Off
	// by default, and then the data links must form a tree (no loop).
	STP bool `yaml:"stp,omitempty" json:"stp,omitempty"`
	// Mode is "l2" (default: every switch one bridge, the whole data fabric
	// one subnet) or "l3": a routed leaf-spine. In l3 mode a switch's
	// host ports share a bridge with the hosts' gateway address (one /24 per
	// leaf), switch-to-switch links are routed /31s, and every switch routes
	// each leaf's /24 over all its equal-cost next hops (ECMP, hashing on
	// the L4 ports), so loops between switches are allowed.
	Mode string `yaml:"mode,omitempty" json:"mode,omitempty"`
	// SysName, when set, is the sysName every switch's snmpd answers, as
	// switches whose SNMP agents all keep one default host name do; lldpd
	// keeps each switch's own name as its LLDP system name. Empty: each
	// switch's snmpd answers its own name.
	SysName string `yaml:"sysname,omitempty" json:"sysname,omitempty"`
	// Switches are Linux bridges, one per namespace.
	Switches []Switch `yaml:"switches" json:"switches"`
	// Hosts are the namespaces MPI ranks run in; each is also the hostname
	// its processes see.
	Hosts []string `yaml:"hosts" json:"hosts"`
	// Links are the data fabric's cables (veth pairs), in order: a node's
	// interfaces are numbered in the order its links appear here.
	Links []Link `yaml:"links" json:"links"`
}

// Switch is a switch of the data fabric.
type Switch struct {
	Name string `yaml:"name" json:"name"`
	// Role is "leaf" or "spine" (informational; both are L2 bridges).
	Role string `yaml:"role,omitempty" json:"role,omitempty"`
}

// Link is a data link between two nodes (host or switch), with an optional
// rate limit applied to both directions.
type Link struct {
	A string `yaml:"a" json:"a"`
	B string `yaml:"b" json:"b"`
	// RateMbit limits each direction to this many Mbit/s with tc; 0: no limit.
	RateMbit float64 `yaml:"rate_mbit,omitempty" json:"rate_mbit,omitempty"`
	// Qdisc is "tbf" (default) or "htb".
	Qdisc string `yaml:"qdisc,omitempty" json:"qdisc,omitempty"`
}

var (
	nodeNameRe = regexp.MustCompile(`^[a-z][a-z0-9-]{0,19}$`)
	sysNameRe  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
)

// LoadDesc reads a YAML description from a file.
func LoadDesc(path string) (Desc, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Desc{}, err
	}
	return ParseDesc(b)
}

// ParseDesc parses a YAML description and validates it.
func ParseDesc(b []byte) (Desc, error) {
	var d Desc
	if err := yaml.Unmarshal(b, &d); err != nil {
		return Desc{}, fmt.Errorf("ethlab: description: %w", err)
	}
	return d, d.Validate()
}

// Validate checks names, links and (without STP) that the data fabric is a
// tree.
func (d Desc) Validate() error {
	kind := map[string]string{}
	for _, s := range d.Switches {
		if !nodeNameRe.MatchString(s.Name) {
			return fmt.Errorf("ethlab: switch name %q: want [a-z][a-z0-9-]{0,19}", s.Name)
		}
		if kind[s.Name] != "" {
			return fmt.Errorf("ethlab: node %q named twice", s.Name)
		}
		if s.Role != "" && s.Role != "leaf" && s.Role != "spine" {
			return fmt.Errorf("ethlab: switch %s: role %q: want leaf or spine", s.Name, s.Role)
		}
		kind[s.Name] = "switch"
	}
	for _, h := range d.Hosts {
		if !nodeNameRe.MatchString(h) {
			return fmt.Errorf("ethlab: host name %q: want [a-z][a-z0-9-]{0,19}", h)
		}
		if kind[h] != "" {
			return fmt.Errorf("ethlab: node %q named twice", h)
		}
		kind[h] = "host"
	}
	if len(kind) == 0 {
		return fmt.Errorf("ethlab: description has no nodes")
	}
	if d.SysName != "" && !sysNameRe.MatchString(d.SysName) {
		return fmt.Errorf("ethlab: sysname %q: want [A-Za-z0-9][A-Za-z0-9._-]{0,63}", d.SysName)
	}
	if d.Mode != "" && d.Mode != "l2" && d.Mode != "l3" {
		return fmt.Errorf("ethlab: mode %q: want l2 or l3", d.Mode)
	}
	l3 := d.Mode == "l3"
	if l3 && d.STP {
		return fmt.Errorf("ethlab: stp applies to mode l2 only")
	}
	if len(kind) > 2000 {
		return fmt.Errorf("ethlab: %d nodes: at most 2000", len(kind))
	}
	// Union-find for the loop check.
	parent := map[string]string{}
	var find func(string) string
	find = func(x string) string {
		if p, ok := parent[x]; ok && p != x {
			r := find(p)
			parent[x] = r
			return r
		}
		return x
	}
	ports := map[string]int{}
	for i, l := range d.Links {
		if kind[l.A] == "" || kind[l.B] == "" {
			return fmt.Errorf("ethlab: link %d (%s-%s): unknown node", i, l.A, l.B)
		}
		if l.A == l.B {
			return fmt.Errorf("ethlab: link %d: %s linked to itself", i, l.A)
		}
		if l.RateMbit < 0 {
			return fmt.Errorf("ethlab: link %d: negative rate", i)
		}
		if l.Qdisc != "" && l.Qdisc != "tbf" && l.Qdisc != "htb" {
			return fmt.Errorf("ethlab: link %d: qdisc %q: want tbf or htb", i, l.Qdisc)
		}
		ports[l.A]++
		ports[l.B]++
		if l3 && (kind[l.A] == "host" || kind[l.B] == "host") && (kind[l.A] == "host") == (kind[l.B] == "host") {
			return fmt.Errorf("ethlab: link %d (%s-%s): in mode l3 a host links to a switch", i, l.A, l.B)
		}
		if !d.STP && !l3 {
			ra, rb := find(l.A), find(l.B)
			if ra == rb {
				return fmt.Errorf("ethlab: link %d (%s-%s) closes a loop: L2 bridges without STP need a tree (set stp: true)", i, l.A, l.B)
			}
			parent[ra] = rb
		}
	}
	for n, k := range kind {
		if k == "host" && ports[n] > 1 && (l3 || !d.STP) {
			return fmt.Errorf("ethlab: host %s has %d data links: a host takes one (without STP, or in mode l3)", n, ports[n])
		}
		if ports[n] > 999 {
			return fmt.Errorf("ethlab: node %s: too many links", n)
		}
	}
	return nil
}

// Presets lists the built-in descriptions' names.
func Presets() []string {
	names := []string{"two-leaf", "leaf-spine", "single", "ecmp"}
	sort.Strings(names)
	return names
}

// Preset returns a built-in description:
//
//   - "single": one leaf, two hosts.
//   - "two-leaf": two leaves under one spine, two hosts per leaf (h1,h2 on
//     leaf1; h3,h4 on leaf2).
//   - "leaf-spine": four leaves under one spine, four hosts per leaf (h1..h16).
//   - "ecmp": mode l3, two spines, two leaves each linked to both spines,
//     two hosts per leaf (h1,h2 on leaf1; h3,h4 on leaf2): two equal-cost
//     paths between the leaves.
//
// Without STP an L2 fabric must be a tree, so the L2 leaf-spine presets
// have one spine. It panics on an unknown name; see Presets.
func Preset(name string) Desc {
	switch name {
	case "single":
		return leafSpine(name, 1, 2, 0)
	case "two-leaf":
		return leafSpine(name, 2, 2, 1)
	case "leaf-spine":
		return leafSpine(name, 4, 4, 1)
	case "ecmp":
		d := leafSpine(name, 2, 2, 2)
		d.Mode = "l3"
		return d
	}
	panic("ethlab: unknown preset " + name)
}

// PresetOK is Preset without the panic.
func PresetOK(name string) (Desc, bool) {
	for _, p := range Presets() {
		if p == name {
			return Preset(name), true
		}
	}
	return Desc{}, false
}

func leafSpine(name string, leaves, hostsPerLeaf, spines int) Desc {
	d := Desc{Name: name}
	for s := 1; s <= spines; s++ {
		d.Switches = append(d.Switches, Switch{Name: fmt.Sprintf("spine%d", s), Role: "spine"})
	}
	h := 1
	for l := 1; l <= leaves; l++ {
		leaf := fmt.Sprintf("leaf%d", l)
		d.Switches = append(d.Switches, Switch{Name: leaf, Role: "leaf"})
		for i := 0; i < hostsPerLeaf; i++ {
			host := fmt.Sprintf("h%d", h)
			h++
			d.Hosts = append(d.Hosts, host)
			d.Links = append(d.Links, Link{A: host, B: leaf})
		}
		for s := 1; s <= spines; s++ {
			d.Links = append(d.Links, Link{A: leaf, B: fmt.Sprintf("spine%d", s)})
		}
	}
	return d
}
