package store

import (
	"fmt"
	"time"

	"github.com/netloom/netloom/internal/fabric"
)

// DefaultFabric is the fabric name of a collector that is given none, and
// the name rows written before fabrics had names are migrated to.
const DefaultFabric = "default"

// CheckFabricName reports a fabric name that cannot be used: it must be 1
// to 64 letters, digits, '.', '_' or '-' (it appears in URLs, logs and
// metric labels). field names the setting for the error.
func CheckFabricName(field, name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("%s %q: want 1 to 64 characters", field, name)
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !ok {
			return fmt.Errorf("%s %q: %q is not allowed (letters, digits, '.', '_', '-')", field, name, r)
		}
	}
	return nil
}

// FabricVersion is one fabric's topology version as an engine read it.
type FabricVersion struct {
	Version  Version
	Topology *fabric.Topology
}

// MergeVersions makes the view TopologyAt returns from the versions in
// force of every fabric, by fabric name. One fabric is returned as it
// is. Several are merged (fabric.Merge), with a version that changes
// whenever any of them does: the highest id among them (ids grow with
// every version saved), the latest start, the earliest end, and the nodes
// and links summed.
func MergeVersions(parts []FabricVersion) (*fabric.Topology, Version, error) {
	switch len(parts) {
	case 0:
		return nil, Version{}, ErrNotFound
	case 1:
		return parts[0].Topology, parts[0].Version, nil
	}
	var v Version
	tops := make(map[string]*fabric.Topology, len(parts))
	for _, p := range parts {
		pv := p.Version
		tops[pv.Fabric] = p.Topology
		v.ID = max(v.ID, pv.ID)
		if pv.From.After(v.From) {
			v.From = pv.From
		}
		if !pv.Until.IsZero() && (v.Until.IsZero() || pv.Until.Before(v.Until)) {
			v.Until = pv.Until
		}
		v.Nodes += pv.Nodes
		v.Links += pv.Links
	}
	t, err := fabric.Merge(tops)
	if err != nil {
		return nil, Version{}, err
	}
	return t, v, nil
}

// MergeTables joins the forwarding tables of several fabrics (their
// switches are distinct) and returns the newest start time among them.
func MergeTables(parts []fabric.ForwardingTables, from []time.Time) (fabric.ForwardingTables, time.Time) {
	if len(parts) == 1 {
		return parts[0], from[0]
	}
	out := fabric.ForwardingTables{}
	var newest time.Time
	for i, ft := range parts {
		for sw, t := range ft {
			out[sw] = t
		}
		if from[i].After(newest) {
			newest = from[i]
		}
	}
	return out, newest
}
