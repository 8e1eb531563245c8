package sim

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/netloom/netloom/internal/fabric"
)

func TestParseSpec(t *testing.T) {
	good := map[string]Spec{
		"fat-tree:hosts=100":                         {Kind: KindFatTree, Hosts: 100},
		"sim:fat-tree:hosts=16,radix=8,levels=2":     {Kind: KindFatTree, Hosts: 16, Radix: 8, Levels: 2},
		"fat-tree:hosts=5,speed=hdr,width=4x,seed=9": {Kind: KindFatTree, Hosts: 5, Speed: "HDR", Width: "4X", Seed: 9},
		"stampede":            {Kind: KindStampede},
		"stampede:seed=3":     {Kind: KindStampede, Seed: 3},
		"10x-stampede":        {Kind: KindStampede10x},
		"file:/tmp/x,y:z.net": {Kind: KindFile, Path: "/tmp/x,y:z.net"},
		"sim:file:net":        {Kind: KindFile, Path: "net"},
		"fat-tree:hosts=648,radix=36,levels=3,seed=-1": {Kind: KindFatTree, Hosts: 648, Radix: 36, Levels: 3, Seed: -1},
		"fat-tree:hosts=4,prefix=east-":                {Kind: KindFatTree, Hosts: 4, Prefix: "east-"},
		"stampede:prefix=s":                            {Kind: KindStampede, Prefix: "s"},
	}
	for in, want := range good {
		got, err := ParseSpec(in)
		if err != nil {
			t.Errorf("ParseSpec(%q): %v", in, err)
			continue
		}
		if got != want {
			t.Errorf("ParseSpec(%q) = %+v, want %+v", in, got, want)
		}
		back, err := ParseSpec(got.String())
		if err != nil || back != got {
			t.Errorf("ParseSpec(%q.String() = %q) = %+v, %v", in, got.String(), back, err)
		}
	}
	bad := map[string]string{
		"":                            "unknown kind",
		"torus:x=3":                   "unknown kind",
		"fat-tree":                    "hosts=N",
		"fat-tree:hosts=0":            "hosts=N",
		"fat-tree:hosts=x":            "not an integer",
		"fat-tree:hosts=5,radix=7":    "even",
		"fat-tree:hosts=5,levels=4":   "levels 4",
		"fat-tree:hosts=5,speed=fast": "speed",
		"fat-tree:hosts=5,width=3x":   "width",
		"fat-tree:hosts=5,color=red":  "unknown option",
		"fat-tree:hosts=5,radix":      "key=value",
		"stampede:hosts=5":            "only fat-tree",
		"file:":                       "path",
		"fat-tree:hosts=5,prefix=a/b": "prefix",
	}
	for in, want := range bad {
		_, err := ParseSpec(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSpec(%q) error = %v, want one containing %q", in, err, want)
		}
	}
	if !strings.Contains(SpecHelp, "fat-tree:hosts=N") || !strings.Contains(SpecHelp, "stampede") {
		t.Error("SpecHelp does not document the grammar")
	}
}

func TestStampede(t *testing.T) {
	topo, ft, err := Generate(context.Background(), Spec{Kind: KindStampede})
	if err != nil {
		t.Fatal(err)
	}
	c := topo.Counts()
	want := fabric.Counts{Switches: 764, CAs: 6541, SwitchPorts: 27504, Links: 16893}
	if c != want {
		t.Fatalf("counts %+v, want %+v", c, want)
	}
	perLineDown := map[fabric.GUID]int{}
	for _, l := range topo.Links {
		a, _ := topo.Node(l.A.GUID)
		b, _ := topo.Node(l.B.GUID)
		if strings.HasPrefix(a.Description, "leaf") && strings.Contains(b.Description, "-line") {
			perLineDown[b.GUID]++
		}
		if strings.HasPrefix(b.Description, "leaf") && strings.Contains(a.Description, "-line") {
			perLineDown[a.GUID]++
		}
		if l.Width != "4X" || l.Speed != "EDR" {
			t.Fatalf("link %s is %s %s, want 4X EDR", l.ID(), l.Width, l.Speed)
		}
	}
	if len(perLineDown) != 8*36 {
		t.Errorf("%d line chips have leaf links, want %d", len(perLineDown), 8*36)
	}
	for g, n := range perLineDown {
		if n < 17 || n > 18 {
			t.Errorf("line chip %s has %d leaf links, want 17..18 (even spread)", g, n)
		}
	}
	n17, err := topo.FindNode("n17")
	if err != nil || n17.Description != "n17 HCA-1" || n17.LID != 17 {
		t.Errorf("n17: %+v, %v", n17, err)
	}
	if _, err := topo.FindNode("core8-spine18"); err != nil {
		t.Error(err)
	}
	checkRoutes(t, topo, ft, 20000)
	checkBalance(t, topo, ft, 1.25)
}

func TestFatTrees(t *testing.T) {
	for _, tc := range []struct {
		hosts, radix, levels    int
		switches, links, maxLen int // maxLen: longest CA-to-CA path in links
	}{
		{16, 8, 2, 4 + 4, 16 + 16, 4},
		{1, 8, 0, 1 + 4, 1 + 4, 2},
		{32, 8, 0, 8 + 4, 32 + 32, 4},
		{33, 8, 0, 9 + 3*4 + 16, 33 + 9*4 + 3*16, 6},
		{128, 8, 3, 32 + 32 + 16, 128 + 128 + 128, 6},
		{648, 36, 0, 36 + 18, 648 + 36*18, 4},
		{700, 36, 0, 39 + 3*18 + 18*18, 700 + 39*18 + 3*18*18, 6},
	} {
		name := fmt.Sprintf("hosts=%d,radix=%d,levels=%d", tc.hosts, tc.radix, tc.levels)
		t.Run(name, func(t *testing.T) {
			topo, err := GenerateFatTree(tc.hosts, tc.radix, tc.levels)
			if err != nil {
				t.Fatal(err)
			}
			c := topo.Counts()
			if c.CAs != tc.hosts || c.Switches != tc.switches || c.Links != tc.links {
				t.Fatalf("counts %+v, want %d CAs, %d switches, %d links", c, tc.hosts, tc.switches, tc.links)
			}
			ft, algo, err := ComputeRoutes(context.Background(), topo)
			if err != nil {
				t.Fatal(err)
			}
			if algo != AlgoUpDown {
				t.Errorf("algorithm %s, want %s", algo, AlgoUpDown)
			}
			longest := checkRoutes(t, topo, ft, 0)
			if tc.hosts > 1 && longest != tc.maxLen {
				t.Errorf("longest path %d links, want %d", longest, tc.maxLen)
			}
		})
	}
	for _, tc := range []struct {
		hosts, radix, levels int
		want                 string
	}{
		{33, 8, 2, "too many hosts for 2 levels"},
		{129, 8, 3, "too many hosts for 3 levels"},
		{129, 8, 0, "at most 128"},
		{0, 8, 0, "at least one host"},
		{5, 9, 0, "even"},
		{5, 8, 1, "levels"},
	} {
		if _, err := GenerateFatTree(tc.hosts, tc.radix, tc.levels); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("GenerateFatTree(%d, %d, %d) error = %v, want %q", tc.hosts, tc.radix, tc.levels, err, tc.want)
		}
	}
}

func Test10xStampede(t *testing.T) {
	if testing.Short() {
		t.Skip("large fabric")
	}
	topo, ft, err := Generate(context.Background(), Spec{Kind: KindStampede10x})
	if err != nil {
		t.Fatal(err)
	}
	c := topo.Counts()
	if c.CAs != 65410 || c.SwitchPorts < 10*27504 {
		t.Errorf("counts %+v, want 65,410 CAs and at least 275,040 switch ports", c)
	}
	if ft != nil {
		t.Error("10x-stampede got forwarding tables though its LIDs cannot fit one subnet")
	}
}

// checkRoutes follows the tables between CA pairs (all of them when limit
// is 0, else about limit spread over the fabric) and checks each path
// against breadth-first shortest distances. It returns the longest path.
func checkRoutes(t *testing.T, topo *fabric.Topology, ft fabric.ForwardingTables, limit int) int {
	t.Helper()
	r := fabric.NewRoutes(topo, ft)
	lids := r.CALIDs()
	// switch adjacency, and the switch each CA LID hangs off
	adj := map[fabric.GUID][]fabric.GUID{}
	for _, l := range topo.Links {
		a, _ := topo.Node(l.A.GUID)
		b, _ := topo.Node(l.B.GUID)
		if a.Type == fabric.Switch && b.Type == fabric.Switch {
			adj[a.GUID] = append(adj[a.GUID], b.GUID)
			adj[b.GUID] = append(adj[b.GUID], a.GUID)
		}
	}
	attach := map[fabric.LID]fabric.GUID{}
	for _, lid := range lids {
		p, _ := topo.PortByLID(lid)
		peer, _ := topo.Peer(p)
		attach[lid] = peer.GUID
	}
	distCache := map[fabric.GUID]map[fabric.GUID]int{}
	dist := func(from, to fabric.GUID) int {
		d, ok := distCache[to]
		if !ok {
			d = map[fabric.GUID]int{to: 0}
			q := []fabric.GUID{to}
			for len(q) > 0 {
				x := q[0]
				q = q[1:]
				for _, y := range adj[x] {
					if _, seen := d[y]; !seen {
						d[y] = d[x] + 1
						q = append(q, y)
					}
				}
			}
			distCache[to] = d
		}
		return d[from]
	}
	step := 1
	if limit > 0 && len(lids)*len(lids) > limit {
		step = len(lids) * len(lids) / limit
	}
	longest, checked := 0, 0
	for k := 0; k < len(lids)*len(lids); k += step {
		src, dst := lids[k/len(lids)], lids[(k*7+k/len(lids))%len(lids)]
		if limit == 0 {
			dst = lids[k%len(lids)]
		}
		rt, err := r.Path(src, dst)
		if err != nil {
			t.Fatalf("path %d -> %d: %v", src, dst, err)
		}
		want := 0
		if src != dst {
			want = dist(attach[src], attach[dst]) + 2
		}
		if len(rt.Hops) != want {
			t.Fatalf("path %d -> %d has %d links, shortest is %d: %+v", src, dst, len(rt.Hops), want, rt.Hops)
		}
		longest = max(longest, want)
		checked++
	}
	if checked == 0 {
		t.Fatal("no pairs checked")
	}
	return longest
}

// checkBalance checks that every leaf spreads the CA destinations it sends
// upward over its uplinks within ratio (busiest/quietest).
func checkBalance(t *testing.T, topo *fabric.Topology, ft fabric.ForwardingTables, ratio float64) {
	t.Helper()
	r := fabric.NewRoutes(topo, ft)
	for i := range topo.Nodes {
		n := &topo.Nodes[i]
		if n.Type != fabric.Switch {
			continue
		}
		up := map[int]int{}
		leaf := false
		for p := 1; p <= n.Ports; p++ {
			peer, ok := topo.Peer(fabric.PortRef{GUID: n.GUID, Port: p})
			if !ok {
				continue
			}
			pn, _ := topo.Node(peer.GUID)
			if pn.Type == fabric.Switch {
				up[p] = 0
			} else {
				leaf = true
			}
		}
		if !leaf || len(up) == 0 {
			continue
		}
		tbl := ft[n.GUID]
		for _, lid := range r.CALIDs() {
			if p := int(tbl[lid]); p < len(tbl) {
				if _, isUp := up[p]; isUp {
					up[p]++
				}
			}
		}
		lo, hi := -1, 0
		for _, c := range up {
			hi = max(hi, c)
			if lo < 0 || c < lo {
				lo = c
			}
		}
		if lo == 0 || float64(hi)/float64(lo) > ratio {
			t.Fatalf("leaf %q spreads destinations unevenly over its uplinks: %v", n.Description, up)
		}
	}
}

// TestPrefix builds two fabrics of one site: their hosts, switches and
// GUIDs differ, so one view shows both, and each routes as before.
func TestPrefix(t *testing.T) {
	ctx := context.Background()
	plain, pft, err := Generate(ctx, Spec{Kind: KindFatTree, Hosts: 8, Radix: 4})
	if err != nil {
		t.Fatal(err)
	}
	parts := map[string]*fabric.Topology{}
	for _, p := range []string{"a", "b"} {
		topo, ft, err := Generate(ctx, Spec{Kind: KindFatTree, Hosts: 8, Radix: 4, Prefix: p})
		if err != nil {
			t.Fatal(err)
		}
		if len(topo.Nodes) != len(plain.Nodes) || len(ft) != len(pft) {
			t.Fatalf("prefix %s: %d nodes, %d tables; want %d, %d", p, len(topo.Nodes), len(ft), len(plain.Nodes), len(pft))
		}
		if _, err := topo.FindNode(p + "3"); err != nil {
			t.Errorf("prefix %s: host %s3: %v", p, p, err)
		}
		if _, err := fabric.NewRoutes(topo, ft).Path(1, 8); err != nil {
			t.Errorf("prefix %s: route from host 1 to 8: %v", p, err)
		}
		parts[p] = topo
	}
	m, err := fabric.Merge(parts)
	if err != nil {
		t.Fatalf("merging fabrics a and b: %v", err)
	}
	if len(m.Nodes) != 2*len(plain.Nodes) {
		t.Errorf("merged: %d nodes", len(m.Nodes))
	}
	if parts["a"].Nodes[0].Description == parts["b"].Nodes[0].Description {
		t.Errorf("switch named %q in both fabrics", parts["a"].Nodes[0].Description)
	}
}
