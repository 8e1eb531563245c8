package place

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/netloom/netloom/internal/store"
)

func twoRankJob() *store.Job {
	return &store.Job{JobSummary: store.JobSummary{ID: "j1", Ranks: 2},
		Processes: []store.Process{{Rank: 0, Node: "n1"}, {Rank: 1, Node: "n2"}}}
}

// TestJobRequestCountsNodes: a hostlist naming more nodes than the fabric
// has hosts (or than MaxNodes) is refused by its count, naming the field
// and the count, without its names being made.
func TestJobRequestCountsNodes(t *testing.T) {
	var ie *InputError
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := JobRequest(twoRankJob(), Options{Hostlist: "n[1-1048576]", FabricHosts: 16})
	runtime.ReadMemStats(&after)
	if !errors.As(err, &ie) || err.Error() != `nodes: "n[1-1048576]" names 1048576 nodes, more than the fabric's 16 hosts` {
		t.Errorf("n[1-1048576] on 16 hosts: %v", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<10 {
		t.Errorf("refusing a million names allocated %d bytes", got)
	}
	// Without the fabric's count, MaxNodes bounds it.
	_, err = JobRequest(twoRankJob(), Options{Hostlist: fmt.Sprintf("n[1-%d]", MaxNodes+1), CoresPerNode: 1})
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), fmt.Sprintf("names %d nodes, more than %d", MaxNodes+1, MaxNodes)) {
		t.Errorf("MaxNodes+1 names: %v", err)
	}
	_, err = JobRequest(twoRankJob(), Options{Hostlist: "a[0-999999999999999999]b[0-999999999999999999]"})
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "more than 18446744073709551614 nodes") {
		t.Errorf("an overflowing hostlist: %v", err)
	}
	// At the limit it is expanded.
	req, err := JobRequest(twoRankJob(), Options{Hostlist: "n[1-16]", FabricHosts: 16, CoresPerNode: 1})
	if err != nil || len(req.Nodes) != 16 {
		t.Errorf("n[1-16] on 16 hosts: %v, %d nodes", err, len(req.Nodes))
	}
	// Bad syntax names the field and quotes a bounded prefix.
	long := "n[" + strings.Repeat("1,", 20000) + "x]"
	_, err = JobRequest(twoRankJob(), Options{Hostlist: long})
	if !errors.As(err, &ie) || !strings.HasPrefix(err.Error(), "nodes: ") || len(err.Error()) > 500 {
		t.Errorf("a 40 kB bad hostlist: %d bytes: %.600s", len(err.Error()), err)
	}
	_, err = JobRequest(twoRankJob(), Options{Hostlist: strings.Repeat(",", 30000)})
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "names no node") || len(err.Error()) > 300 {
		t.Errorf("a hostlist of commas: %d bytes: %.400s", len(err.Error()), err)
	}
}

// TestNotOnFabricBounded: thousands of unknown names come back as a few,
// and how many more.
func TestNotOnFabricBounded(t *testing.T) {
	f := smallFabric(t)
	var names []string
	for i := range 5000 {
		names = append(names, fmt.Sprintf("x%d", i))
	}
	_, err := Advise(f, Request{Traffic: ring(4, 1), Nodes: nodes(2, names...)})
	var ie *InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), `"x0"`) || !strings.Contains(err.Error(), "(and 4995 more nodes not on the fabric)") ||
		strings.Contains(err.Error(), `"x5"`) || len(err.Error()) > 1000 {
		t.Errorf("5000 unknown nodes: %d bytes: %.1200s", len(err.Error()), err)
	}
	// As ran on unknown nodes: the reason is bounded too.
	asRan := make([]string, 2000)
	for i := range asRan {
		asRan[i] = fmt.Sprintf("y%d", i)
	}
	a, err := Advise(f, Request{Traffic: ring(2000, 1), AsRan: asRan, Nodes: nodes(200, "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9", "n10")})
	if err != nil || a.AsRan != nil || !strings.Contains(a.AsRanUnknown, "1995 more nodes") || len(a.AsRanUnknown) > 1000 {
		t.Errorf("as ran on 2000 unknown nodes: %v, %d bytes: %.1200s", err, len(a.AsRanUnknown), a.AsRanUnknown)
	}
}

// TestHideFabric: the advice as a user gets it names no switch, GUID or
// link, but keeps every figure and the mapping.
func TestHideFabric(t *testing.T) {
	f := smallFabric(t)
	asRan := []string{"n1", "n5", "n2", "n6", "n1", "n5", "n2", "n6"}
	a, err := Advise(f, Request{Traffic: ring(8, 1000), AsRan: asRan, Nodes: nodes(2, "n1", "n5", "n2", "n6"), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	full, _ := json.Marshal(a)
	topo := f.Routes.Topology()
	var switches []string
	for _, n := range topo.Nodes {
		if n.Type.String() == "switch" {
			switches = append(switches, n.GUID.String(), n.Description)
		}
	}
	leaks := func(b []byte) []string {
		var out []string
		for _, s := range switches {
			if strings.Contains(string(b), s) {
				out = append(out, s)
			}
		}
		return out
	}
	// The test can see what it looks for: the full advice names switches.
	if len(leaks(full)) == 0 || a.Advice.HeaviestLink == nil || a.Advice.HeaviestLink.Link == "" {
		t.Fatalf("the full advice names no switch: %s", full)
	}
	want := *a.Advice
	mapping := a.Mapping
	a.HideFabric()
	hidden, _ := json.Marshal(a)
	if l := leaks(hidden); len(l) > 0 {
		t.Errorf("hidden advice names %v: %s", l, hidden)
	}
	for _, key := range []string{`"links"`, `"from"`, `"to"`, `"link"`, `"from_description"`, `"to_description"`, "0x"} {
		if strings.Contains(string(hidden), key) {
			t.Errorf("hidden advice has %s: %s", key, hidden)
		}
	}
	got := a.Advice
	if !a.FabricHidden || got.ByteHops != want.ByteHops || got.InterNodeBytes != want.InterNodeBytes || got.HeaviestLink == nil ||
		got.HeaviestLink.Bytes != want.HeaviestLink.Bytes || len(a.Mapping) != len(mapping) || !strings.Contains(string(hidden), `"fabric_hidden":true`) {
		t.Errorf("hidden advice lost figures: %s", hidden)
	}
}
