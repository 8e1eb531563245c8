package place

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/netloom/netloom/internal/store"
)

// fourOnVM is a 4-rank job that ran on one node, vm.
func fourOnVM() *store.Job {
	j := &store.Job{JobSummary: store.JobSummary{ID: "j4", Ranks: 4}}
	for r := range 4 {
		j.Processes = append(j.Processes, store.Process{Rank: r, Node: "vm"})
	}
	return j
}

// vmHas is a NodeCores that knows vm's cores only.
func vmHas(cores int) func(string) (int, string) {
	return func(n string) (int, string) {
		if n == "vm" {
			return cores, "vm's topology"
		}
		return 0, ""
	}
}

// TestJobRequestCores: each node's cores and where they came from; a node
// may hold as many ranks as the job ran with on it.
func TestJobRequestCores(t *testing.T) {
	for _, c := range []struct {
		name  string
		opt   Options
		want  []Node
		noErr bool
	}{
		{"the node's own, oversubscribed as it ran", Options{NodeCores: vmHas(2)},
			[]Node{{Name: "vm", Cores: 2, Slots: 4, CoresFrom: "vm's topology"}}, true},
		{"given", Options{CoresPerNode: 8, NodeCores: vmHas(2)},
			[]Node{{Name: "vm", Cores: 8, CoresFrom: CoresGiven}}, true},
		{"other nodes assumed as the job's known node", Options{Hostlist: "n1,n2", NodeCores: vmHas(2)},
			[]Node{{Name: "n1", Cores: 2, CoresFrom: coresAs("vm")}, {Name: "n2", Cores: 2, CoresFrom: coresAs("vm")}}, true},
		{"nothing known: the most ranks on one node", Options{Hostlist: "n1,n2"},
			[]Node{{Name: "n1", Cores: 4, CoresFrom: CoresMostRanks}, {Name: "n2", Cores: 4, CoresFrom: CoresMostRanks}}, true},
		{"the job's node and another", Options{Hostlist: "vm,n1", NodeCores: vmHas(2)},
			[]Node{{Name: "vm", Cores: 2, Slots: 4, CoresFrom: "vm's topology"}, {Name: "n1", Cores: 2, CoresFrom: coresAs("vm")}}, true},
	} {
		req, err := JobRequest(fourOnVM(), c.opt)
		if err != nil || !slices.Equal(req.Nodes, c.want) {
			t.Errorf("%s: %v\n got %+v\nwant %+v", c.name, err, req.Nodes, c.want)
		}
	}
	// Slurm's CPUs per node come before the node's own.
	j := fourOnVM()
	j.Scheduler = &store.SchedInfo{Nodes: []string{"vm"}, CPUs: 3}
	req, err := JobRequest(j, Options{NodeCores: vmHas(2)})
	if err != nil || !slices.Equal(req.Nodes, []Node{{Name: "vm", Cores: 3, Slots: 4, CoresFrom: CoresSlurm}}) {
		t.Errorf("Slurm: %v %+v", err, req.Nodes)
	}
}

// TestOversubscribed: 4 ranks on a 2-core node that ran them all: every
// slot a core the node has, and the advice says the node is
// oversubscribed; on two such nodes, the cores are used before any is
// shared.
func TestOversubscribed(t *testing.T) {
	f := smallFabric(t)
	a, err := Advise(f, Request{Traffic: ring(4, 100), AsRan: []string{"n3", "n3", "n3", "n3"},
		Nodes: []Node{{Name: "n3", Cores: 2, Slots: 4}}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range a.Mapping {
		if m.Node != "n3" || m.Core < 0 || m.Core >= 2 {
			t.Errorf("rank %d: %s slot %d, want n3 slot 0 or 1", m.Rank, m.Node, m.Core)
		}
	}
	if !slices.Equal(a.Oversubscribed, []Oversubscribed{{Node: "n3", Ranks: 4, Cores: 2}}) {
		t.Errorf("oversubscribed: %+v", a.Oversubscribed)
	}
	// Two nodes of 2 cores, one that ran all 4: no core shared.
	a, err = Advise(f, Request{Traffic: ring(4, 100), AsRan: []string{"n3", "n3", "n3", "n3"},
		Nodes: []Node{{Name: "n3", Cores: 2, Slots: 4}, {Name: "n4", Cores: 2}}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Oversubscribed) != 0 || a.NothingToGain ||
		!slices.Equal(a.AsRanOversubscribed, []Oversubscribed{{Node: "n3", Ranks: 4, Cores: 2}}) {
		t.Errorf("two nodes of 2 cores for 4 ranks: oversubscribed %+v (as ran %+v), nothing to gain %v; mapping %+v",
			a.Oversubscribed, a.AsRanOversubscribed, a.NothingToGain, a.Mapping)
	}
	for _, c := range []*Cost{a.Block, a.RoundRobin, a.Random} {
		if c.NodesUsed != 2 {
			t.Errorf("a baseline on %d nodes, want both: %+v", c.NodesUsed, c)
		}
	}
	seen := map[RankPlace]bool{}
	for _, m := range a.Mapping {
		k := RankPlace{Node: m.Node, Core: m.Core}
		if seen[k] || m.Core >= 2 {
			t.Errorf("mapping %+v: a core twice or beyond 2", a.Mapping)
		}
		seen[k] = true
	}
	// Too few slots still says so.
	_, err = Advise(f, Request{Traffic: ring(8, 1), Nodes: []Node{{Name: "n1", Cores: 2, Slots: 4}, {Name: "n2", Cores: 2}}})
	if err == nil || !strings.Contains(err.Error(), "4 cores, and room for 6 ranks as the job ran, for 8 ranks") {
		t.Errorf("too few slots: %v", err)
	}
}

// TestHostCores: cores are distinct (package, core) pairs of the online
// CPUs: hardware threads of a core count once, offline CPUs not at all.
func TestHostCores(t *testing.T) {
	dir := t.TempDir()
	write := func(path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, path), []byte(text+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// 2 packages x 2 cores x 2 threads; CPUs 0-4 online, 5-7 offline.
	for cpu := range 8 {
		write(filepath.Join("cpu"+itoa(cpu), "topology", "physical_package_id"), itoa(cpu/4))
		write(filepath.Join("cpu"+itoa(cpu), "topology", "core_id"), itoa(cpu%2))
	}
	write("online", "0-3,4")
	if n, from := HostCores(dir); n != 3 || from != HostCoresTopology {
		t.Errorf("HostCores: %d (%s), want 3 from the topology", n, from)
	}
	write("online", "0-x")
	if n, from := HostCores(dir); n < 1 || from != HostCoresCPUs {
		t.Errorf("an unreadable list: %d (%s), want the runtime's CPUs", n, from)
	}
	if got, err := parseCPUList("0,2-4,7"); err != nil || !slices.Equal(got, []int{0, 2, 3, 4, 7}) {
		t.Errorf("parseCPUList: %v %v", got, err)
	}
	for _, bad := range []string{"", "3-1", "a", "0-99999999"} {
		if _, err := parseCPUList(bad); err == nil {
			t.Errorf("parseCPUList(%q) accepted", bad)
		}
	}
	// ThisHost knows this host by its name, and no other node.
	host, _ := os.Hostname()
	if n, from := ThisHost()(host); n < 1 || from == "" {
		t.Errorf("ThisHost(%q): %d %q", host, n, from)
	}
	if n, _ := ThisHost()("no-such-node-" + host); n != 0 {
		t.Errorf("ThisHost of another node: %d", n)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
