package analysis

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/netloom/netloom/internal/fabric"
)

// NodeMap maps the node names that agents and the scheduler use ("n17") to
// fabric endpoints (the LID of the node's host adapter port). By default a
// name is the first word of an adapter's node description, as production
// fabrics name their HCAs ("n17 HCA-1"); a mapping file can name the
// adapter for nodes whose descriptions do not follow that. Names that map
// to nothing are reported, never guessed.
type NodeMap struct {
	lid       map[string]fabric.LID
	ambiguous map[string][]string // name -> candidate descriptions
	// names lists, per endpoint, the names mapped to it, sorted; byFile
	// the names the mapping file gave.
	names  map[fabric.LID][]string
	byFile map[string]bool
}

// NewNodeMap builds the map for topology t. overrides maps node names to a
// node GUID, a port GUID, or a full node description; it wins over the
// default rule.
func NewNodeMap(t *fabric.Topology, overrides map[string]string) (*NodeMap, error) {
	m := &NodeMap{lid: map[string]fabric.LID{}, ambiguous: map[string][]string{}, names: map[fabric.LID][]string{}, byFile: map[string]bool{}}
	for i := range t.Nodes {
		n := &t.Nodes[i]
		if n.Type == fabric.Switch {
			continue
		}
		lid := firstLinkedLID(t, n)
		if lid == 0 {
			continue
		}
		name := n.Name()
		if prev, dup := m.lid[name]; dup && prev != lid {
			m.ambiguous[name] = append(m.ambiguous[name], n.Description)
			continue
		}
		m.lid[name] = lid
	}
	for name := range m.ambiguous {
		delete(m.lid, name)
	}
	names := make([]string, 0, len(overrides))
	for name := range overrides {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		target := overrides[name]
		n, err := t.FindNode(target)
		if err != nil {
			return nil, fmt.Errorf("node map: %s -> %s: %w", name, target, err)
		}
		lid := firstLinkedLID(t, n)
		if n.Type == fabric.Switch || lid == 0 {
			return nil, fmt.Errorf("node map: %s -> %s: not a linked host adapter", name, target)
		}
		// A port GUID names that very port.
		if g, err := fabric.ParseGUID(target); err == nil {
			for p, pg := range n.PortGUIDs {
				if pg == g && n.PortLID(p) != 0 {
					lid = n.PortLID(p)
				}
			}
		}
		m.lid[name] = lid
		m.byFile[name] = true
		delete(m.ambiguous, name)
	}
	for name, lid := range m.lid {
		m.names[lid] = append(m.names[lid], name)
	}
	for _, l := range m.names {
		sort.Strings(l)
	}
	return m, nil
}

// NamesOf returns the node names mapped to endpoint lid, each with how
// it was mapped (ByMappingFile, ByDescription), sorted by name.
func (m *NodeMap) NamesOf(lid fabric.LID) []MappedName {
	var out []MappedName
	for _, n := range m.names[lid] {
		by := ByDescription
		if m.byFile[n] {
			by = ByMappingFile
		}
		out = append(out, MappedName{Name: n, By: by})
	}
	return out
}

func firstLinkedLID(t *fabric.Topology, n *fabric.Node) fabric.LID {
	for p := 1; p <= n.Ports; p++ {
		if _, ok := t.LinkAt(fabric.PortRef{GUID: n.GUID, Port: p}); ok && n.PortLID(p) != 0 {
			return n.PortLID(p)
		}
	}
	return 0
}

// LID returns the endpoint of a node name.
func (m *NodeMap) LID(name string) (fabric.LID, error) {
	if lid, ok := m.lid[name]; ok {
		return lid, nil
	}
	if c := m.ambiguous[name]; len(c) > 0 {
		return 0, fmt.Errorf("node %q: several adapters are named so (%s); map it in the node mapping file", name, strings.Join(c, ", "))
	}
	return 0, fmt.Errorf("node %q: no host adapter's description starts with that name; map it in the node mapping file", name)
}

// ParseMapping reads a node mapping file: one "NAME TARGET" per line, where
// TARGET is a node GUID, a port GUID, or a quoted node description;
// blank lines and # comments are ignored. Errors name the line.
func ParseMapping(r io.Reader, file string) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		name, target, ok := strings.Cut(s, " ")
		target = strings.TrimSpace(target)
		if !ok || target == "" {
			return nil, fmt.Errorf("%s:%d: want NAME TARGET (a GUID or a quoted node description)", file, line)
		}
		if strings.HasPrefix(target, `"`) {
			if len(target) < 2 || !strings.HasSuffix(target, `"`) {
				return nil, fmt.Errorf("%s:%d: unterminated quoted description", file, line)
			}
			target = target[1 : len(target)-1]
		} else if _, err := fabric.ParseGUID(target); err != nil {
			return nil, fmt.Errorf("%s:%d: %v (quote a node description)", file, line, err)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s:%d: node %q mapped twice", file, line, name)
		}
		out[name] = target
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", file, line+1, err)
	}
	return out, nil
}
