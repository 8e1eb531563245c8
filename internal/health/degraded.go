package health

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
)

// Degraded is a link up narrower or slower than its peers: the links of
// the same kind (between switches, or between a switch and a host
// adapter), whose most common active width and speed are what the fabric
// runs at. A link whose MaxWidth/MaxSpeed (what both ends support) are
// known and above its active ones is degraded too, whatever its peers.
type Degraded struct {
	Link     string         `json:"link"`
	A        fabric.PortRef `json:"a"`
	B        fabric.PortRef `json:"b"`
	ANode    string         `json:"a_node"`
	BNode    string         `json:"b_node"`
	AName    string         `json:"a_name,omitempty"` // the ports' names where the fabric gives them
	BName    string         `json:"b_name,omitempty"`
	Kind     string         `json:"kind"` // "switch-switch" or "switch-host"
	Width    string         `json:"width"`
	Speed    string         `json:"speed"`
	Expected struct {
		Width string `json:"width"`
		Speed string `json:"speed"`
		// Peers is how many links of the kind run at it, of Links.
		Peers int `json:"peers"`
		Links int `json:"links"`
	} `json:"expected"`
	Narrower bool `json:"narrower"`
	Slower   bool `json:"slower"`
	// CapacityBytes and ExpectedBytes: one direction's data rate now and
	// at the expected width and speed (bytes/s); Fraction their ratio.
	Capacity         float64 `json:"capacity_bytes_per_second"`
	ExpectedCapacity float64 `json:"expected_capacity_bytes_per_second"`
	Fraction         float64 `json:"fraction"`
	Reason           string  `json:"reason"`
	// Jobs are the running jobs whose routes cross it (filled by the
	// caller).
	Jobs []JobImpact `json:"jobs"`
}

func lanes(width string) int {
	n, err := strconv.Atoi(strings.TrimSuffix(strings.ToUpper(width), "X"))
	if err != nil {
		return 0
	}
	return n
}

// laneRate is a speed's data rate per lane (bytes/s), 0 when unknown.
func laneRate(speed string) float64 { return fabric.LinkCapacity("1X", speed) }

func linkKind(t *fabric.Topology, l *fabric.Link) string {
	a, _ := t.Node(l.A.GUID)
	b, _ := t.Node(l.B.GUID)
	if a != nil && b != nil && a.Type == fabric.Switch && b.Type == fabric.Switch {
		return "switch-switch"
	}
	return "switch-host"
}

// peerGroup is the links a link is compared with: its kind, and its
// family (an InfiniBand link is never held to an Ethernet one's rate in a
// view of several fabrics).
func peerGroup(t *fabric.Topology, l *fabric.Link) string {
	if fabric.IsEthernetSpeed(l.Speed) {
		return "ethernet " + linkKind(t, l)
	}
	return linkKind(t, l)
}

// speedName is a speed as reports name it: InfiniBand's upper case
// ("EDR"), Ethernet's as its source writes it ("100GbE").
func speedName(speed string) string {
	if fabric.IsEthernetSpeed(speed) {
		return speed
	}
	return strings.ToUpper(speed)
}

// FindDegraded lists the degraded links of t, the slowest share first.
func FindDegraded(t *fabric.Topology) []Degraded {
	type ws struct{ w, s string }
	counts := map[string]map[ws]int{}
	totals := map[string]int{}
	for i := range t.Links {
		l := &t.Links[i]
		if lanes(l.Width) == 0 || laneRate(l.Speed) == 0 {
			continue
		}
		k := peerGroup(t, l)
		if counts[k] == nil {
			counts[k] = map[ws]int{}
		}
		counts[k][ws{strings.ToUpper(l.Width), speedName(l.Speed)}]++
		totals[k]++
	}
	mode := map[string]ws{}
	modeN := map[string]int{}
	for k, m := range counts {
		for v, n := range m {
			best, ok := mode[k]
			// The most common; on a tie the faster (a tie between a
			// healthy and a degraded half is read as half degraded).
			if !ok || n > modeN[k] || n == modeN[k] && fabric.LinkCapacity(v.w, v.s) > fabric.LinkCapacity(best.w, best.s) {
				mode[k], modeN[k] = v, n
			}
		}
	}
	out := []Degraded{}
	for i := range t.Links {
		l := &t.Links[i]
		if lanes(l.Width) == 0 || laneRate(l.Speed) == 0 {
			continue
		}
		k := peerGroup(t, l)
		exp := mode[k]
		ew, es := exp.w, exp.s
		// What the ends support, where known, is expected too.
		if lanes(l.MaxWidth) > lanes(ew) {
			ew = strings.ToUpper(l.MaxWidth)
		}
		if laneRate(l.MaxSpeed) > laneRate(es) {
			es = speedName(l.MaxSpeed)
		}
		narrower := lanes(l.Width) < lanes(ew)
		slower := laneRate(l.Speed) < laneRate(es)
		if !narrower && !slower {
			continue
		}
		d := Degraded{Link: l.ID(), A: l.A, B: l.B, ANode: describeNode(t, l.A.GUID), BNode: describeNode(t, l.B.GUID), AName: t.PortName(l.A), BName: t.PortName(l.B), Kind: linkKind(t, l),
			Width: l.Width, Speed: l.Speed, Narrower: narrower, Slower: slower, Capacity: l.Capacity(),
			ExpectedCapacity: fabric.LinkCapacity(ew, es), Jobs: []JobImpact{}}
		d.Expected.Width, d.Expected.Speed, d.Expected.Peers, d.Expected.Links = ew, es, modeN[k], totals[k]
		if d.ExpectedCapacity > 0 {
			d.Fraction = d.Capacity / d.ExpectedCapacity
		}
		var why []string
		if narrower {
			why = append(why, fmt.Sprintf("%s wide where %s is expected", l.Width, ew))
		}
		if slower {
			why = append(why, fmt.Sprintf("at %s where %s is expected", l.Speed, es))
		}
		d.Reason = fmt.Sprintf("%s (%d of %d %s links run %s %s): %.0f%% of the expected rate", strings.Join(why, " and "),
			modeN[k], totals[k], k, exp.w, exp.s, 100*d.Fraction)
		out = append(out, d)
	}
	slices.SortFunc(out, func(x, y Degraded) int {
		if c := cmp.Compare(x.Fraction, y.Fraction); c != 0 {
			return c
		}
		return cmp.Compare(x.Link, y.Link)
	})
	return out
}

// DegradedJobs fills each degraded link's Jobs: the running jobs of jobs
// whose routes (by routes) cross it either way, with their bytes
// attributed to it in load.
func DegradedJobs(ds []Degraded, routes *fabric.Routes, jobs []ImpactJob, load []store.LinkJobBytes) {
	if routes == nil {
		return
	}
	idx := map[fabric.PortRef]int{}
	ports := map[fabric.PortRef]bool{}
	for i := range ds {
		idx[ds[i].A], idx[ds[i].B] = i, i
		ports[ds[i].A], ports[ds[i].B] = true, true
	}
	cross := newCrossing(routes, ports)
	for k := range jobs {
		j := &jobs[k]
		found := map[int]*JobImpact{}
		affected := map[int]map[string]bool{}
		n := len(j.Matrix.LIDs)
		for a := range n {
			for b := range n {
				if a == b || !cross.crosses(j.Matrix.LIDs[a], j.Matrix.LIDs[b]) {
					continue
				}
				rt, err := routes.Path(j.Matrix.LIDs[a], j.Matrix.LIDs[b])
				if err != nil {
					continue
				}
				for _, h := range rt.Hops {
					i, ok := idx[fabric.PortRef{GUID: h.GUID, Port: h.Port}]
					if !ok {
						continue
					}
					ji := found[i]
					if ji == nil {
						ji = &JobImpact{Job: j.Summary.ID, User: j.Summary.User, Ranks: j.Summary.Ranks, Nodes: jobNodes(j), Start: j.Summary.Start}
						found[i], affected[i] = ji, map[string]bool{}
					}
					ji.PairsCrossing++
					affected[i][j.Names[a]], affected[i][j.Names[b]] = true, true
				}
			}
		}
		for _, x := range load {
			if x.Job != j.Summary.ID {
				continue
			}
			if i, ok := idx[x.Port]; ok {
				if found[i] == nil {
					found[i] = &JobImpact{Job: j.Summary.ID, User: j.Summary.User, Ranks: j.Summary.Ranks, Nodes: jobNodes(j), Start: j.Summary.Start}
					affected[i] = map[string]bool{}
				}
				found[i].Bytes += x.Bytes
			}
		}
		for i, ji := range found {
			for name := range affected[i] {
				ji.RanksAffected += j.RanksOn[name]
			}
			ds[i].Jobs = append(ds[i].Jobs, *ji)
		}
	}
	for i := range ds {
		slices.SortFunc(ds[i].Jobs, func(x, y JobImpact) int {
			if c := cmp.Compare(y.Bytes, x.Bytes); c != 0 {
				return c
			}
			return cmp.Compare(x.Job, y.Job)
		})
	}
}
