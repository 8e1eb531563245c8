package eth

import (
	"slices"
	"strings"
	"testing"

	"github.com/netloom/netloom/internal/fabric"
)

// switchNames lists a topology's switches as "name: why", sorted.
func switchNames(topo *fabric.Topology, lay *layout) []string {
	var out []string
	for _, n := range topo.Nodes {
		if n.Type != fabric.Switch {
			continue
		}
		l := lay.switches[n.GUID]
		if l.name.Name != n.Description {
			out = append(out, "layout and topology differ on "+n.Description)
		}
		out = append(out, n.Description+": "+l.name.Why)
	}
	slices.Sort(out)
	return out
}

// TestSwitchesSharingASysName: switches whose agents all answer one
// sysName (a default host name) are told apart by the LLDP system names
// their neighbours see, else their own LLDP system name, their configured
// name, or last their sysName and address; every link names them so, and
// each name says why it was chosen.
func TestSwitchesSharingASysName(t *testing.T) {
	want := []string{"h1:eth0-leaf1:swp1", "h2:eth0-leaf1:swp2", "h3:eth0-leaf2:swp1", "h4:eth0-leaf2:swp2",
		"leaf1:swp3-spine1:swp1", "leaf1:swp4-spine2:swp1", "leaf2:swp3-spine1:swp2", "leaf2:swp4-spine2:swp2"}
	shared := func() *fakeFabric {
		f := leafSpine(2, 2, 2)
		for _, s := range f.sw {
			s.sysName = "vm"
		}
		return f
	}

	t.Run("LLDP names", func(t *testing.T) {
		f := shared()
		topo, lay, errs := f.build(t)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		if got := linkNames(topo, lay); !slices.Equal(got, want) {
			t.Errorf("links\n got %v\nwant %v", got, want)
		}
		got := switchNames(topo, lay)
		for i, w := range []string{
			`leaf1: sysName "vm" is shared by 4 polled switches; named by its LLDP system name as its 2 neighbours see it (lldpRemSysName)`,
			`leaf2: sysName "vm" is shared by 4 polled switches; named by its LLDP system name as its 2 neighbours see it (lldpRemSysName)`,
			`spine1: sysName "vm" is shared by 4 polled switches; named by its LLDP system name as its 2 neighbours see it (lldpRemSysName)`,
			`spine2: sysName "vm" is shared by 4 polled switches; named by its LLDP system name as its 2 neighbours see it (lldpRemSysName)`,
		} {
			if i >= len(got) || got[i] != w {
				t.Errorf("switch names\n got %q\nwant %q", got, w)
			}
		}
		// Routes name them too.
		r := fabric.NewRoutes(topo, forwardingTables(topo))
		h1, _ := topo.FindNode("h1")
		h3, _ := topo.FindNode("h3")
		rt, err := r.Path(h1.LID, h3.LID)
		if err != nil {
			t.Fatal(err)
		}
		var hops []string
		for _, h := range rt.Hops {
			hops = append(hops, h.Description)
		}
		if strings.Join(hops, ",") != "h1,leaf1,spine1,leaf2" {
			t.Errorf("route h1 -> h3 through %v", hops)
		}
	})

	t.Run("own LLDP name", func(t *testing.T) {
		// Two leaves and no spine: no polled switch sees another.
		f := leafSpine(2, 0, 1)
		for _, s := range f.sw {
			s.sysName = "vm"
		}
		topo, lay, errs := f.build(t)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		got := switchNames(topo, lay)
		w := `sysName "vm" is shared by 2 polled switches; named by its own LLDP system name (lldpLocSysName; no polled neighbour sees it)`
		if !slices.Equal(got, []string{"leaf1: " + w, "leaf2: " + w}) {
			t.Errorf("switch names %q", got)
		}
	})

	t.Run("LLDP names shared too", func(t *testing.T) {
		f := leafSpine(2, 0, 1)
		for _, s := range f.sw {
			s.sysName, s.lldpName = "vm", "sw"
		}
		topo, lay, errs := f.build(t)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		w := `sysName "vm" is shared by 2 polled switches; named by its own LLDP system name (lldpLocSysName; no polled neighbour sees it), but "sw" names another switch too; named by it and its management address`
		if got := switchNames(topo, lay); !slices.Equal(got, []string{"vm@192.0.2.101: " + w, "vm@192.0.2.102: " + w}) {
			t.Errorf("switch names %q", got)
		}
	})

	// LLDP names that do not tell them apart either: every switch's
	// lldpd says "vm" too.
	sameLLDP := func() *fakeFabric {
		f := shared()
		for _, s := range f.sw {
			s.lldpName = "vm"
			for i := range s.rems {
				if _, isSwitch := f.sw[s.rems[i].sys]; isSwitch {
					s.rems[i].sys = "vm"
				}
			}
		}
		return f
	}
	t.Run("address", func(t *testing.T) {
		topo, lay, errs := sameLLDP().build(t)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		got := switchNames(topo, lay)
		w := `sysName "vm" is shared by 4 polled switches; its LLDP system name is the same; named by it and its management address`
		if !slices.Equal(got, []string{"vm@192.0.2.101: " + w, "vm@192.0.2.102: " + w, "vm@192.0.2.201: " + w, "vm@192.0.2.202: " + w}) {
			t.Errorf("switch names %q", got)
		}
		if l := linkNames(topo, lay); !slices.Contains(l, "h1:eth0-vm@192.0.2.101:swp1") || !slices.Contains(l, "vm@192.0.2.101:swp3-vm@192.0.2.201:swp1") {
			t.Errorf("links %v", l)
		}
	})

	t.Run("configured name", func(t *testing.T) {
		f := sameLLDP()
		var vs []*view
		for _, name := range f.order {
			s := f.sw[name]
			v, errs := readView(&session{a: s.agent(), label: s.addr, reps: 7}, &SwitchConfig{Address: s.addr, Name: name, Community: "public"})
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			vs = append(vs, v)
		}
		topo, lay, errs := build(vs)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		if got := linkNames(topo, lay); !slices.Equal(got, want) {
			t.Errorf("links\n got %v\nwant %v", got, want)
		}
		for _, n := range switchNames(topo, lay) {
			if !strings.HasSuffix(n, `: sysName "vm" is shared by 4 polled switches; its LLDP system name is the same; named as the configuration names it`) {
				t.Errorf("switch %s", n)
			}
		}
	})

	t.Run("errors", func(t *testing.T) {
		// An error found while building names the switch as the
		// topology does, not by the sysName it shares.
		f := shared()
		f.sw["leaf1"].rems[2].port = "swp9" // spine1 has no swp9
		_, _, errs := f.build(t)
		if !errorsMention(errs, "switch leaf1: lldpRemPortId: neighbour spine1 on swp3 names port \"swp9\"") {
			t.Errorf("errors %v", errs)
		}
	})

	t.Run("unique sysNames unchanged", func(t *testing.T) {
		topo, lay, errs := leafSpine(2, 2, 2).build(t)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		got := switchNames(topo, lay)
		if !slices.Equal(got, []string{"leaf1: its sysName", "leaf2: its sysName", "spine1: its sysName", "spine2: its sysName"}) {
			t.Errorf("switch names %q", got)
		}
	})
}
