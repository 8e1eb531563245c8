package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// fakeSSHNode is fakeSSH with the node's own shared-memory directory:
// Open MPI's shared-memory transport names its segments by job and local
// rank, so two fake nodes on one host would share (and corrupt) them in
// /dev/shm, as two real nodes never do.
const fakeSSHNode = `#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in -*) shift;; *) break;; esac; done
TMPDIR="$(dirname "$0")/tmp-$1"
OMPI_MCA_btl_vader_backing_directory=$TMPDIR
export TMPDIR OMPI_MCA_btl_vader_backing_directory
mkdir -p "$TMPDIR"
shift
exec sh -c "$*"
`

// placeRealJSON is netloom place --json's document, as much as the
// summary's sentences claim.
type placeRealJSON struct {
	Job   string
	Ranks int
	Nodes []struct {
		Name      string
		Cores     int
		Slots     int
		CoresFrom string `json:"cores_from"`
	}
	Method        string
	NothingToGain bool `json:"nothing_to_gain"`
	Reason        string
	Advice        *placeRealCost
	AsRan         *placeRealCost `json:"as_ran"`
	AsRanUnknown  string         `json:"as_ran_unknown"`
	RoundRobin    *placeRealCost `json:"round_robin"`
	Block         *placeRealCost
	Random        *placeRealCost
	Gain          map[string]*struct {
		InterNodeBytes float64 `json:"inter_node_bytes_pct"`
		ByteHops       float64 `json:"byte_hops_pct"`
		HeaviestLink   float64 `json:"heaviest_link_pct"`
	}
	TrafficBytes   uint64 `json:"traffic_bytes"`
	PeersTruncated bool   `json:"peers_truncated"`
	Seconds        float64
	Mapping        []struct {
		Rank int
		Node string
		Core int
	}
	Oversubscribed      []placeRealOver
	AsRanOversubscribed []placeRealOver `json:"as_ran_oversubscribed"`
	Format              string
	File                string
	Predicted           *struct {
		Measured float64  `json:"measured_seconds"`
		AsRan    float64  `json:"as_ran_seconds"`
		Advice   float64  `json:"advice_seconds"`
		Warnings []string `json:"warnings"`
	}
	PredictionSkipped string `json:"prediction_skipped"`
}

type placeRealCost struct {
	InterNodeBytes uint64                  `json:"inter_node_bytes"`
	ByteHops       uint64                  `json:"byte_hops"`
	HeaviestLink   *struct{ Bytes uint64 } `json:"heaviest_link"`
	NodesUsed      int                     `json:"nodes_used"`
}

func (c *placeRealCost) heaviest() uint64 {
	if c.HeaviestLink == nil {
		return 0
	}
	return c.HeaviestLink.Bytes
}

type placeRealOver struct {
	Node  string
	Ranks int
	Cores int
}

// hostCores is this host's cores as hwloc counts them (Open MPI numbers
// a rankfile's slots so), else its CPUs.
func hostCores(t *testing.T) int {
	t.Helper()
	if out, err := exec.Command("hwloc-calc", "--number-of", "core", "all").Output(); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil && n > 0 {
			return n
		}
	}
	out, err := exec.Command("nproc", "--all").Output()
	n, err2 := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || err2 != nil || n <= 0 {
		t.Fatalf("this host's cores: hwloc-calc and nproc failed: %v %v", err, err2)
	}
	return n
}

// checkPlaceSummary compares every line netloom place printed with the
// same question's JSON document: each sentence that claims a figure is
// read back and compared. want lists line kinds that must appear.
func checkPlaceSummary(t *testing.T, text string, a *placeRealJSON, file string, want ...string) {
	t.Helper()
	cost := func(name string) *placeRealCost {
		return map[string]*placeRealCost{"as ran": a.AsRan, "advice": a.Advice, "round-robin": a.RoundRobin, "block": a.Block, "random": a.Random}[name]
	}
	seen := map[string]int{}
	coresLines := map[string]bool{}
	var rx = []struct {
		kind string
		re   *regexp.Regexp
		chk  func(m []string) string // "" when the line agrees
	}{
		{"header", regexp.MustCompile(`^job (\S+): (\d+ ranks?) on (\d+ nodes?)(?: \((\d+ cores?) each\))?; advice from (\S+) in ([\d.]+) s$`), func(m []string) string {
			cores := map[int]bool{}
			for _, n := range a.Nodes {
				cores[n.Cores] = true
			}
			each := ""
			if len(cores) == 1 {
				each = count(a.Nodes[0].Cores, "core")
			}
			secs, _ := strconv.ParseFloat(m[6], 64)
			if m[1] != a.Job || m[2] != count(a.Ranks, "rank") || m[3] != count(len(a.Nodes), "node") || m[4] != each || m[5] != a.Method || secs > 60 {
				return fmt.Sprintf("JSON: job %s, %d ranks, %d nodes, cores each %q, method %s", a.Job, a.Ranks, len(a.Nodes), each, a.Method)
			}
			return ""
		}},
		{"cores", regexp.MustCompile(`^cores: (\d+) on (.+) \((.+)\)$`), func(m []string) string {
			var names []string
			for _, n := range a.Nodes {
				if strconv.Itoa(n.Cores) == m[1] && n.CoresFrom == m[3] {
					names = append(names, n.Name)
				}
			}
			if strings.Join(names, ", ") != m[2] {
				return fmt.Sprintf("JSON nodes %+v", a.Nodes)
			}
			for _, n := range names {
				coresLines[n] = true
			}
			return ""
		}},
		{"table", regexp.MustCompile(`^\s*placement\s+inter-node bytes\s+bytes x hops\s+heaviest link bytes\s+nodes used\s*$`), func([]string) string { return "" }},
		{"row", regexp.MustCompile(`^\s*(as ran|advice|round-robin|block|random)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$`), func(m []string) string {
			c := cost(m[1])
			got := strings.Join(m[2:6], " ")
			if c == nil {
				if got != "- - - -" {
					return "JSON: null"
				}
				return ""
			}
			var hl uint64
			if c.HeaviestLink != nil {
				hl = c.HeaviestLink.Bytes
			}
			if w := fmt.Sprintf("%d %d %d %d", c.InterNodeBytes, c.ByteHops, hl, c.NodesUsed); got != w {
				return "JSON: " + w
			}
			return ""
		}},
		{"legend", regexp.MustCompile(`^bytes x hops: every inter-node byte counted once for each link its route crosses \(the load the placement puts on the fabric\)$`), func([]string) string { return "" }},
		{"as ran unknown", regexp.MustCompile(`^as ran: unknown: (.+)$`), func(m []string) string {
			if m[1] != a.AsRanUnknown || a.AsRan != nil {
				return fmt.Sprintf("JSON: %q, as ran %+v", a.AsRanUnknown, a.AsRan)
			}
			return ""
		}},
		{"as ran oversubscribed", regexp.MustCompile(`^as ran: oversubscribed: (\S+) held (\d+) ranks? on (\d+) cores?$`), func(m []string) string {
			r, _ := strconv.Atoi(m[2])
			c, _ := strconv.Atoi(m[3])
			if !slices.Contains(a.AsRanOversubscribed, placeRealOver{m[1], r, c}) || !strings.Contains(m[0], " "+count(r, "rank")+" on "+count(c, "core")) {
				return fmt.Sprintf("JSON: %+v", a.AsRanOversubscribed)
			}
			return ""
		}},
		{"oversubscribed", regexp.MustCompile(`^oversubscribed: (\S+) holds (\d+) ranks? on (\d+) cores?, as the job ran there \(its ranks share cores; the rankfile names only cores it has\)$`), func(m []string) string {
			r, _ := strconv.Atoi(m[2])
			c, _ := strconv.Atoi(m[3])
			if !strings.Contains(m[0], " "+count(r, "rank")+" on "+count(c, "core")+",") {
				return "plural wrong"
			}
			held := 0
			for _, mp := range a.Mapping {
				if mp.Node == m[1] {
					held++
				}
			}
			if !slices.Contains(a.Oversubscribed, placeRealOver{m[1], r, c}) || held != r {
				return fmt.Sprintf("JSON: %+v; the mapping puts %d ranks there", a.Oversubscribed, held)
			}
			return ""
		}},
		{"truncated", regexp.MustCompile(`^note: some ranks reported only their top peers; the traffic is a lower bound$`), func([]string) string {
			if !a.PeersTruncated {
				return "JSON: peers not truncated"
			}
			return ""
		}},
		{"nothing to gain", regexp.MustCompile(`^nothing to gain: (.+)$`), func(m []string) string {
			if !a.NothingToGain || m[1] != a.Reason {
				return fmt.Sprintf("JSON: %v %q", a.NothingToGain, a.Reason)
			}
			return ""
		}},
		{"gain", regexp.MustCompile(`^advice against (as ran|round-robin): inter-node bytes (.+), bytes x hops (.+), heaviest link (.+)$`), func(m []string) string {
			than, adv := cost(m[1]), a.Advice
			if than == nil || adv == nil || a.NothingToGain {
				return fmt.Sprintf("JSON: %s %+v, advice %+v, nothing to gain %v", m[1], than, adv, a.NothingToGain)
			}
			// The figures read back from the sentence, and the word of
			// the change checked against the JSON's gain sign.
			g := a.Gain[map[string]string{"as ran": "as_ran", "round-robin": "round_robin"}[m[1]]]
			if g == nil {
				return "JSON: no gain over " + m[1]
			}
			for i, f := range []struct {
				before, after uint64
				gain          float64
			}{{than.InterNodeBytes, adv.InterNodeBytes, g.InterNodeBytes}, {than.ByteHops, adv.ByteHops, g.ByteHops}, {than.heaviest(), adv.heaviest(), g.HeaviestLink}} {
				if why := checkChange(m[2+i], f.before, f.after, f.gain); why != "" {
					return why
				}
			}
			return ""
		}},
		{"predicted", regexp.MustCompile(`^predicted elapsed \(the trace replayed by SimGrid on the fabric, docs/model\.md\): as ran (\S+) s, advice (\S+) s \((\S+)%\); measured (\S+) s$`), func(m []string) string {
			p := a.Predicted
			if p == nil || m[1] != fmt.Sprintf("%.4f", p.AsRan) || m[2] != fmt.Sprintf("%.4f", p.Advice) ||
				m[3] != fmt.Sprintf("%+.1f", 100*(p.Advice-p.AsRan)/p.AsRan) || m[4] != fmt.Sprintf("%.4f", p.Measured) {
				return fmt.Sprintf("JSON: %+v", p)
			}
			return ""
		}},
		{"prediction warning", regexp.MustCompile(`^predicted elapsed: warning: (.+)$`), func(m []string) string {
			if a.Predicted == nil || !slices.Contains(a.Predicted.Warnings, m[1]) {
				return fmt.Sprintf("JSON: predicted %+v", a.Predicted)
			}
			return ""
		}},
		{"skipped", regexp.MustCompile(`^predicted elapsed: skipped: (.+)$`), func(m []string) string {
			if m[1] != a.PredictionSkipped || a.Predicted != nil {
				return fmt.Sprintf("JSON: %q, predicted %+v", a.PredictionSkipped, a.Predicted)
			}
			return ""
		}},
		{"wrote", regexp.MustCompile(`^wrote rankfile \(openmpi\) to (.+)$`), func(m []string) string {
			if m[1] != file {
				return "want " + file
			}
			return ""
		}},
	}
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		matched := false
		for _, r := range rx {
			if m := r.re.FindStringSubmatch(line); m != nil {
				matched = true
				seen[r.kind]++
				if why := r.chk(m); why != "" {
					t.Errorf("netloom place printed %q; %s", line, why)
				}
				break
			}
		}
		if !matched {
			t.Errorf("netloom place printed %q, a line this test does not know", line)
		}
	}
	for _, k := range want {
		if seen[k] == 0 {
			t.Errorf("netloom place printed no %q line:\n%s", k, text)
		}
	}
	if seen["row"] != 5 {
		t.Errorf("netloom place printed %d table rows, want 5:\n%s", seen["row"], text)
	}
	for _, n := range a.Nodes {
		if !coresLines[n.Name] {
			t.Errorf("netloom place did not say where node %s's %d cores came from:\n%s", n.Name, n.Cores, text)
		}
	}
	for k, g := range a.Gain {
		if g != nil && (math.IsNaN(g.ByteHops) || math.IsInf(g.ByteHops, 0)) {
			t.Errorf("gain over %s: %+v", k, g)
		}
	}
}

// ringCosts is what a ring halo exchange (placeProg "ring": each rank
// sends bytes to each neighbour per iteration) costs placed as mapping
// on two nodes hops apart: inter-node bytes, bytes x hops, the heaviest
// direction (the more either node sends the other) and nodes used.
func ringCosts(mapping []string, perEdge uint64, hops uint64) (inter, byteHops, heaviest uint64, used int) {
	n := len(mapping)
	sent := map[[2]string]uint64{}
	for r := range n {
		for _, peer := range []int{(r + 1) % n, (r + n - 1) % n} {
			if mapping[r] != mapping[peer] {
				inter += perEdge
				sent[[2]string{mapping[r], mapping[peer]}] += perEdge
			}
		}
	}
	for _, b := range sent {
		heaviest = max(heaviest, b)
	}
	nodes := map[string]bool{}
	for _, m := range mapping {
		nodes[m] = true
	}
	return inter, inter * hops, heaviest, len(nodes)
}

// TestPlaceReal: issue 29's placement on a real run. An Open MPI ring of 4
// ranks on this host (more ranks than it has cores on a small machine) is
// traced (netloom run --trace), then placed on a fabric that lacks this
// host:
//   - on two nodes of the fabric: the answer prints its summary, every
//     figure in it the JSON's and the ring's own, says the prediction was
//     skipped and why (the job's node is not on the fabric), exits 0, and
//     the rankfile's slots are cores these nodes have (assumed as this
//     host's, and said so): the same program re-run with it under Open
//     MPI passes;
//   - on its own node (mapped onto the fabric with --node-map): the
//     node's real cores (this host's topology, said so); beyond them the
//     answer says the node is oversubscribed, no slot names a core the
//     node lacks, and the re-run with the rankfile passes.
func TestPlaceReal(t *testing.T) {
	buildAgent(t)
	m := impls(t)[0]
	needMPI(t, m)
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	cores := hostCores(t)
	const np, bytes, iter = 4, 100000, 5
	work := t.TempDir()
	src := filepath.Join(work, "ring.c")
	ssh := filepath.Join(work, "fakessh")
	for path, text := range map[string]string{src: placeProg, ssh: fakeSSHNode} {
		if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	prog := compile(t, m, src)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NETLOOM_NODE=") {
			env = append(env, kv)
		}
	}
	env = append(env, "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	run := func(name string, args ...string) (stdout, stderr string, code int) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = work, env
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		if err != nil {
			code = -1
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
		}
		return o.String(), e.String(), code
	}
	progArgs := []string{prog, "ring", strconv.Itoa(bytes), strconv.Itoa(iter)}
	dir := filepath.Join(work, "traced")
	if out, errs, code := run(netloomBin, append([]string{"run", "--quiet", "--trace", "--output", dir, "--job-id", "place-real", "--lib", m.lib,
		"--daemon", "127.0.0.1:9", "--", "mpirun", "--oversubscribe", "-np", strconv.Itoa(np)}, progArgs...)...); code != 0 {
		t.Fatalf("netloom run --trace: exit status %d\n%s%s", code, out, errs)
	}
	if traces, _ := filepath.Glob(filepath.Join(dir, "*", "rank-*.ti.gz")); len(traces) != np {
		t.Fatalf("traces: %v, want %d", traces, np)
	}
	const fabricSpec = "sim:fat-tree:hosts=16,radix=8" // n1-n16, four to a leaf switch; not this host
	perEdge := uint64(bytes * iter)

	// place runs netloom place twice, as text and as JSON, and checks
	// that they agree line by line; it returns the JSON and the rankfile.
	place := func(t *testing.T, name string, args []string, want ...string) (*placeRealJSON, string) {
		t.Helper()
		rf := filepath.Join(work, name+".rankfile")
		text, errs, code := run(netloomBin, append([]string{"place", dir, "--fabric", fabricSpec, "-o", rf}, args...)...)
		if code != 0 || text == "" {
			t.Fatalf("netloom place %s: exit status %d, %d bytes of summary\n%s%s", strings.Join(args, " "), code, len(text), text, errs)
		}
		rfJSON := rf + ".json-run"
		js, errs, code := run(netloomBin, append([]string{"place", dir, "--fabric", fabricSpec, "-o", rfJSON, "--json"}, args...)...)
		var a placeRealJSON
		if code != 0 || json.Unmarshal([]byte(js), &a) != nil {
			t.Fatalf("netloom place --json %s: exit status %d\n%s%s", strings.Join(args, " "), code, js, errs)
		}
		t.Logf("netloom place %s:\n%s", strings.Join(args, " "), text)
		if a.File != rfJSON {
			t.Errorf("JSON file %q, want %q", a.File, rfJSON)
		}
		a.File = rf
		checkPlaceSummary(t, text, &a, rf, want...)
		file, err := os.ReadFile(rf)
		if err != nil {
			t.Fatal(err)
		}
		if other, _ := os.ReadFile(rfJSON); string(other) != string(file) {
			t.Errorf("the text and JSON runs wrote different rankfiles:\n%s\n%s", file, other)
		}
		// The rankfile is the JSON's mapping, and names only cores the
		// node has (the fabric's nodes stand for this host here).
		lines := regexp.MustCompile(`(?m)^rank (\d+)=(\S+) slot=(\d+)$`).FindAllStringSubmatch(string(file), -1)
		if len(lines) != np || len(a.Mapping) != np {
			t.Fatalf("rankfile:\n%s\nmapping %+v", file, a.Mapping)
		}
		for i, l := range lines {
			slot, _ := strconv.Atoi(l[3])
			mp := a.Mapping[i]
			if l[1] != strconv.Itoa(i) || l[2] != mp.Node || slot != mp.Core {
				t.Errorf("rankfile line %q, mapping %+v", l[0], mp)
			}
			if slot >= cores {
				t.Errorf("rankfile line %q: slot %d, this host has %d cores", l[0], slot, cores)
			}
		}
		// The ring's own figures.
		if a.Ranks != np || a.TrafficBytes != uint64(np)*2*perEdge {
			t.Errorf("%d ranks, %d bytes of traffic; the ring sent %d", a.Ranks, a.TrafficBytes, uint64(np)*2*perEdge)
		}
		return &a, string(file)
	}
	// rerun runs the program again placed by the rankfile.
	rerun := func(t *testing.T, rankfile string, extra ...string) {
		t.Helper()
		args := append([]string{"--mca", "plm_rsh_agent", ssh, "--rankfile", rankfile}, extra...)
		args = append(append(args, "-np", strconv.Itoa(np)), progArgs...)
		if out, errs, code := run("mpirun", args...); code != 0 {
			body, _ := os.ReadFile(rankfile)
			t.Errorf("mpirun %s: exit status %d\n%s%s\nrankfile:\n%s", strings.Join(args, " "), code, out, errs, body)
		}
	}

	t.Run("OffTheFabric", func(t *testing.T) {
		a, _ := place(t, "off", []string{"--nodes", "n1,n2"}, "header", "cores", "row", "as ran unknown", "gain", "skipped", "wrote")
		// The job's node is not on the fabric: as ran unknown, the
		// prediction skipped, both saying so and naming the node.
		if a.AsRan != nil || !strings.Contains(a.AsRanUnknown, "not all on the fabric") || !strings.Contains(a.AsRanUnknown, strconv.Quote(host)) {
			t.Errorf("as ran %+v, unknown %q: want unknown, naming node %q", a.AsRan, a.AsRanUnknown, host)
		}
		if a.Predicted != nil || !strings.Contains(a.PredictionSkipped, "not all on the fabric") || !strings.Contains(a.PredictionSkipped, strconv.Quote(host)) {
			t.Errorf("predicted %+v, skipped %q: want skipped, naming node %q", a.Predicted, a.PredictionSkipped, host)
		}
		// n1 and n2 have no cores Netloom can read: assumed as this
		// host's (where the job ran), and said so.
		for _, n := range a.Nodes {
			if n.Cores != cores || !strings.Contains(n.CoresFrom, "assumed: as on "+host) {
				t.Errorf("node %+v: want %d cores, assumed as on %s", n, cores, host)
			}
		}
		// The figures are the ring's: n1 and n2 share a leaf switch (2 hops).
		mapping := make([]string, np)
		for _, mp := range a.Mapping {
			mapping[mp.Rank] = mp.Node
		}
		inter, bh, hl, used := ringCosts(mapping, perEdge, 2)
		if a.Advice.InterNodeBytes != inter || a.Advice.ByteHops != bh || a.Advice.HeaviestLink == nil || a.Advice.HeaviestLink.Bytes != hl || a.Advice.NodesUsed != used {
			t.Errorf("advice %+v; the ring placed %v costs %d, %d, %d, %d nodes", a.Advice, mapping, inter, bh, hl, used)
		}
		rr := make([]string, np)
		for r := range np {
			rr[r] = []string{"n1", "n2"}[r%2]
		}
		if inter, bh, _, _ := ringCosts(rr, perEdge, 2); a.RoundRobin.InterNodeBytes != inter || a.RoundRobin.ByteHops != bh {
			t.Errorf("round-robin %+v; the ring dealt to n1, n2 in turn costs %d, %d", a.RoundRobin, inter, bh)
		}
		if want := 100 * float64(a.RoundRobin.ByteHops-a.Advice.ByteHops) / float64(a.RoundRobin.ByteHops); a.Gain["round_robin"] == nil || a.Gain["round_robin"].ByteHops != want {
			t.Errorf("gain over round-robin %+v, want bytes x hops %.1f%%", a.Gain["round_robin"], want)
		}
		if np <= 2*cores && len(a.Oversubscribed) != 0 {
			t.Errorf("%d ranks on 2 nodes of %d cores oversubscribed: %+v", np, cores, a.Oversubscribed)
		}
		rerun(t, a.File)
	})

	t.Run("OwnNode", func(t *testing.T) {
		nodeMap := filepath.Join(work, "node-map")
		if err := os.WriteFile(nodeMap, []byte(host+` "n9 HCA-1"`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		want := []string{"header", "cores", "row", "nothing to gain", "wrote"}
		if np > cores {
			want = append(want, "oversubscribed", "as ran oversubscribed")
		}
		a, _ := place(t, "own", []string{"--node-map", nodeMap}, want...)
		if len(a.Nodes) != 1 || a.Nodes[0].Name != host || a.Nodes[0].Cores != cores || !strings.HasPrefix(a.Nodes[0].CoresFrom, "this host's CPU topology") {
			t.Errorf("nodes %+v: want %s with its %d cores, from this host's CPU topology", a.Nodes, host, cores)
		}
		over := []placeRealOver(nil)
		if np > cores {
			over = []placeRealOver{{host, np, cores}}
		}
		if !slices.Equal(a.Oversubscribed, over) || !slices.Equal(a.AsRanOversubscribed, over) {
			t.Errorf("oversubscribed %+v, as ran %+v; want %+v", a.Oversubscribed, a.AsRanOversubscribed, over)
		}
		// One node: nothing crosses the fabric.
		if a.Advice.InterNodeBytes != 0 || a.AsRan == nil || a.AsRan.InterNodeBytes != 0 || !a.NothingToGain {
			t.Errorf("one node: advice %+v, as ran %+v, nothing to gain %v", a.Advice, a.AsRan, a.NothingToGain)
		}
		// Whether SimGrid replays it or not, the answer says which.
		if (a.Predicted == nil) == (a.PredictionSkipped == "") {
			t.Errorf("predicted %+v, skipped %q: want one", a.Predicted, a.PredictionSkipped)
		}
		// The measured run was oversubscribed: the prediction says what it
		// is worth, as netloom model does.
		if a.Predicted != nil && np > cores && !slices.ContainsFunc(a.Predicted.Warnings, func(w string) bool { return strings.Contains(w, "oversubscribed") }) {
			t.Errorf("an oversubscribed run's prediction without its warning: %+v", a.Predicted)
		}
		// Open MPI runs a rankfile naming a core twice as it is.
		rerun(t, a.File)
	})
}

// count writes n and the noun, in the plural unless n is 1.
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// checkChange reads "BEFORE -> AFTER (P% more|P% less|the same)" back:
// both figures within the rounding of their three significant digits of
// the JSON's, and the word and percentage those of the JSON's gain
// (positive: the advice costs less).
func checkChange(text string, before, after uint64, gain float64) string {
	m := regexp.MustCompile(`^(\d+(?:\.\d+)?)( [KMGTP]?B)? -> (\d+(?:\.\d+)?)( [KMGTP]?B)? \((?:(\d+\.\d)% (more|less)|(the same)|(more))\)$`).FindStringSubmatch(text)
	if m == nil {
		return fmt.Sprintf("%q: not BEFORE -> AFTER (CHANGE)", text)
	}
	scale := map[string]float64{"": 1, " B": 1, " KB": 1e3, " MB": 1e6, " GB": 1e9, " TB": 1e12, " PB": 1e15}
	near := func(num, unit string, want uint64) bool {
		v, _ := strconv.ParseFloat(num, 64)
		return math.Abs(v*scale[unit]-float64(want)) <= 0.006*float64(want)+0.5
	}
	if !near(m[1], m[2], before) || !near(m[3], m[4], after) {
		return fmt.Sprintf("%q: want %d -> %d", text, before, after)
	}
	switch {
	case m[7] != "":
		if before != after {
			return fmt.Sprintf("%q: %d -> %d is not the same", text, before, after)
		}
	case m[8] != "":
		if before != 0 || after == 0 {
			return fmt.Sprintf("%q: more than 0 only from 0", text)
		}
	default:
		p, _ := strconv.ParseFloat(m[5], 64)
		if (m[6] == "more") != (after > before) || (m[6] == "more") != (gain < 0) || math.Abs(p-math.Abs(gain)) > 0.051 {
			return fmt.Sprintf("%q: %d -> %d, JSON gain %.2f%%", text, before, after, gain)
		}
	}
	return ""
}
