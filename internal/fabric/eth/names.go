package eth

import (
	"fmt"
	"sort"
	"strings"

	"github.com/netloom/netloom/internal/fabric"
)

// SwitchName is the name a polled switch goes by in the topology (its
// description, so every map, link and route), and why it was chosen.
type SwitchName struct {
	GUID    fabric.GUID
	Name    string
	SysName string // what its agent answered for sysName
	Why     string
}

// ownName is a view's own name (view.name) and what it is: its sysName,
// else its LLDP system name, its configured name or its address.
func (v *view) ownName() (name, kind string) {
	switch {
	case v.SysName != "":
		return v.SysName, "sysName"
	case v.LocSysName != "":
		return v.LocSysName, "LLDP system name (lldpLocSysName; no sysName)"
	case v.cfg != nil && v.cfg.Name != "":
		return v.cfg.Name, "configured name (no sysName or LLDP system name)"
	}
	return v.name(), "address (no sysName, LLDP system name or configured name)"
}

// nameSwitches gives every polled switch a name no other one has. A
// switch's own name (its sysName) where it is its alone; where several
// share one (agents left with a default host name), what tells them
// apart, in order: the LLDP system name its neighbours see
// (lldpRemSysName, from switches that know it by its chassis ID or
// management address; its own lldpLocSysName where no polled neighbour
// sees it), the name the configuration gives it, and last its own name
// with its management address (NAME@ADDRESS). A name two switches would
// still share, or one that is another switch's own name, is not used.
// seenAs tells which polled switch a neighbour entry is, by chassis ID or
// management address only (never by name, the thing in question).
func nameSwitches(guids []fabric.GUID, byGUID map[fabric.GUID]*view, seenAs func(*Remote) (fabric.GUID, bool)) map[fabric.GUID]SwitchName {
	out := make(map[fabric.GUID]SwitchName, len(guids))
	own := map[string]int{} // own name -> switches that have it
	for _, g := range guids {
		n, _ := byGUID[g].ownName()
		own[n]++
	}
	// What the polled neighbours call each switch: name -> who says so.
	called := map[fabric.GUID]map[string]map[fabric.GUID]bool{}
	for _, g := range guids {
		for _, r := range byGUID[g].Remotes {
			og, ok := seenAs(r)
			if !ok || og == g || r.SysName == "" {
				continue
			}
			if called[og] == nil {
				called[og] = map[string]map[fabric.GUID]bool{}
			}
			if called[og][r.SysName] == nil {
				called[og][r.SysName] = map[fabric.GUID]bool{}
			}
			called[og][r.SysName][g] = true
		}
	}
	type pick struct{ name, why string }
	picks := map[fabric.GUID]pick{}
	var shared []fabric.GUID
	for _, g := range guids {
		v := byGUID[g]
		n, kind := v.ownName()
		if own[n] == 1 {
			picks[g] = pick{n, "its " + kind}
			continue
		}
		shared = append(shared, g)
		base := fmt.Sprintf("%s %q is shared by %d polled switches", kind, n, own[n])
		var p pick
		names := called[g]
		switch {
		case len(names) == 1:
			for ln, by := range names {
				p = pick{ln, fmt.Sprintf("%s; named by its LLDP system name as %s (lldpRemSysName)", base, neighbours(by))}
			}
		case len(names) > 1:
			p = pick{"", fmt.Sprintf("%s; its neighbours give it %d LLDP system names (%s)", base, len(names), strings.Join(sortedKeys(names), ", "))}
		case v.LocSysName != "":
			p = pick{v.LocSysName, fmt.Sprintf("%s; named by its own LLDP system name (lldpLocSysName; no polled neighbour sees it)", base)}
		default:
			p = pick{"", base + "; it has no LLDP system name"}
		}
		if p.name == n {
			p = pick{"", fmt.Sprintf("%s; its LLDP system name is the same", base)}
		}
		if p.name == "" && v.cfg != nil && v.cfg.Name != "" && v.cfg.Name != n {
			p = pick{v.cfg.Name, p.why + "; named as the configuration names it"}
		}
		picks[g] = p
	}
	// A distinguishing name must be its switch's alone, and no switch's
	// own name.
	taken := map[string]int{}
	for _, g := range guids {
		taken[picks[g].name]++
	}
	for _, g := range shared {
		p := picks[g]
		if p.name == "" || taken[p.name] > 1 || own[p.name] > 0 {
			if p.name != "" {
				p.why += fmt.Sprintf(", but %q names another switch too", p.name)
			}
			n, _ := byGUID[g].ownName()
			p = pick{n + "@" + byGUID[g].addressOf(guids, byGUID), p.why + "; named by it and its management address"}
		}
		picks[g] = p
	}
	for _, g := range guids {
		out[g] = SwitchName{GUID: g, Name: picks[g].name, SysName: byGUID[g].SysName, Why: picks[g].why}
	}
	return out
}

// addressOf is the switch's management address as the configuration gives
// it: its host, or host and port where another polled switch has the same
// host.
func (v *view) addressOf(guids []fabric.GUID, byGUID map[fabric.GUID]*view) string {
	if v.cfg == nil {
		return v.host
	}
	for _, g := range guids {
		if o := byGUID[g]; o != v && o.host == v.host {
			return v.cfg.Address
		}
	}
	if v.host == "" {
		return v.cfg.Address
	}
	return v.host
}

// neighbours says how many polled neighbours report a name.
func neighbours(by map[fabric.GUID]bool) string {
	if len(by) == 1 {
		return "its neighbour sees it"
	}
	return fmt.Sprintf("its %d neighbours see it", len(by))
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
