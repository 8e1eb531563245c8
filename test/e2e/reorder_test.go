package e2e

// End-to-end tests of the online matrix and netloom_reorder (agent/src/reorder.c,
// docs/reorder.md): testdata/mpi/reorder.c and reorder.f90 run a ring scrambled
// over four fake nodes (12 ranks, 3 per node: every ring neighbour on another
// node), reorder it after a phase of rounds and run the same phase on the new
// communicator. Open MPI's own monitoring files are the oracle, phase by phase
// by two runs (phase 1 alone; phase 1, the reordering and phase 2): its E lines
// (point-to-point, tags >= 0) of the first run are phase 1, the difference of
// the two runs' E lines is phase 2 (the reordering's own messages are
// collectives, internal tags, I lines). Under MPICH, which has no monitoring,
// the matrix is checked against the program's own known messages.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/ingest"
)

const (
	reorderRanks  = 12
	reorderPPN    = 3 // node<w/3>: four nodes
	reorderRounds = 20
	reorderSize   = 4096
)

func reorderNode(w int) int { return w / reorderPPN }

// compileAgainstAgent builds a Fortran program linked with the agent library
// (Fortran has no weak symbols): the agent then needs no LD_PRELOAD.
func compileAgainstAgent(t *testing.T, m mpiImpl, src string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(src), filepath.Ext(src)))
	dir := filepath.Dir(m.lib)
	lib := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(m.lib), "lib"), ".so")
	out, err := exec.Command(m.fc, "-O2", "-o", bin, src, "-L"+dir, "-l"+lib, "-Wl,-rpath,"+dir).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", m.fc, src, err, out)
	}
	return bin
}

// ringOut is what reorder.c/.f90 printed.
type ringOut struct {
	rows, phys map[[2]int]traffic // ROW, PHYS: world rank -> peer
	rows1      map[[2]int]traffic // ROW1: from MPI_Init to the mark "p2"
	all        map[[2]int]uint64  // ALL
	newrank    map[int]int        // world rank -> rank in the new communicator
	info       []uint64           // INFO before after [total moved method nodes]
	lines      []string
}

func parseRing(t *testing.T, out string) ringOut {
	t.Helper()
	r := ringOut{rows: map[[2]int]traffic{}, phys: map[[2]int]traffic{}, rows1: map[[2]int]traffic{}, all: map[[2]int]uint64{}, newrank: map[int]int{}}
	num := func(s string) uint64 {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%q in the program's output: %v", s, err)
		}
		return v
	}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		r.lines = append(r.lines, l)
		switch {
		case (f[0] == "ROW" || f[0] == "PHYS" || f[0] == "ROW1") && len(f) == 5:
			k := [2]int{int(num(f[1])), int(num(f[2]))}
			v := traffic{num(f[3]), num(f[4])}
			switch f[0] {
			case "ROW":
				r.rows[k] = v
			case "ROW1":
				r.rows1[k] = v
			default:
				r.phys[k] = v
			}
		case f[0] == "ALL" && len(f) == 4:
			r.all[[2]int{int(num(f[1])), int(num(f[2]))}] = num(f[3])
		case f[0] == "NEWRANK" && len(f) == 3:
			r.newrank[int(num(f[1]))] = int(num(f[2]))
		case f[0] == "INFO":
			for _, s := range f[1:] {
				r.info = append(r.info, num(s))
			}
		case f[0] == "ERR":
			t.Errorf("program: %s", l)
		}
	}
	return r
}

// interNode sums the bytes of a matrix between ranks on different nodes.
func interNode[T traffic | uint64](mat map[[2]int]T) uint64 {
	var s uint64
	for k, v := range mat {
		if reorderNode(k[0]) != reorderNode(k[1]) {
			switch x := any(v).(type) {
			case traffic:
				s += x.bytes
			case uint64:
				s += x
			}
		}
	}
	return s
}

// ringTraffic is what a ring of the ranks in order (ring[k] = world rank at
// position k) sends in reorderRounds rounds: SIZE bytes right and left.
func ringTraffic(ring []int) map[[2]int]traffic {
	n := len(ring)
	out := map[[2]int]traffic{}
	for k, w := range ring {
		for _, q := range []int{ring[(k+1)%n], ring[(k+n-1)%n]} {
			v := out[[2]int{w, q}]
			v.bytes += reorderRounds * reorderSize
			v.msgs += reorderRounds
			out[[2]int{w, q}] = v
		}
	}
	return out
}

// scrambled is the first phase's ring: position k is world rank (k % nodes) * ppn + k / nodes.
func scrambled() []int {
	nodes := reorderRanks / reorderPPN
	ring := make([]int, reorderRanks)
	for k := range ring {
		ring[k] = (k%nodes)*reorderPPN + k/nodes
	}
	return ring
}

// sameMatrix compares two matrices of traffic on every pair of ranks.
func sameMatrix(t *testing.T, what string, got, want map[[2]int]traffic) {
	t.Helper()
	bad := 0
	for a := range reorderRanks {
		for b := range reorderRanks {
			k := [2]int{a, b}
			if got[k] != want[k] {
				if bad++; bad <= 8 {
					t.Errorf("%s: rank %d -> %d: %+v, want %+v", what, a, b, got[k], want[k])
				}
			}
		}
	}
}

// monitoringE is the E lines (p2p the PML sent) of Open MPI's monitoring files.
func monitoringE(t *testing.T, dir string) map[[2]int]traffic {
	t.Helper()
	e := monitoringOutput(t, dir, reorderRanks)["E"]
	if len(e) == 0 {
		t.Fatalf("Open MPI's monitoring files in %s have no E lines", dir)
	}
	return e
}

func diff(b, a map[[2]int]traffic) map[[2]int]traffic {
	out := map[[2]int]traffic{}
	for k, v := range b {
		w := a[k]
		if v.bytes < w.bytes || v.msgs < w.msgs {
			return nil
		}
		if d := (traffic{v.bytes - w.bytes, v.msgs - w.msgs}); d != (traffic{}) {
			out[k] = d
		}
	}
	return out
}

func nonzero(m map[[2]int]traffic) map[[2]int]traffic {
	out := map[[2]int]traffic{}
	for k, v := range m {
		if v != (traffic{}) {
			out[k] = v
		}
	}
	return out
}

// newRing is the second phase's ring from the NEWRANK lines.
func newRing(t *testing.T, r ringOut) []int {
	t.Helper()
	ring := make([]int, reorderRanks)
	seen := map[int]bool{}
	for w := range reorderRanks {
		nr, ok := r.newrank[w]
		if !ok || nr < 0 || nr >= reorderRanks || seen[nr] {
			t.Fatalf("new ranks are not a permutation: %v", r.newrank)
		}
		seen[nr] = true
		ring[nr] = w
	}
	return ring
}

func TestReorderRing(t *testing.T) {
	buildAgent(t)
	args := []string{strconv.Itoa(reorderRounds), strconv.Itoa(reorderSize)}
	mon := []string{"pml_monitoring_enable", "2", "pml_monitoring_enable_output", "3"}
	for _, m := range impls(t) {
		for _, lang := range []string{"c", "fortran"} {
			t.Run(m.name+"/"+lang, func(t *testing.T) {
				needMPI(t, m)
				var prog, lib string
				if lang == "c" {
					prog, lib = compile(t, m, "testdata/mpi/reorder.c"), m.lib
				} else {
					prog = compileAgainstAgent(t, m, "testdata/mpi/reorder.f90")
				}
				monA, monB, out := t.TempDir(), t.TempDir(), t.TempDir()
				var mcaA, mcaB []string
				if m.name == "openmpi" {
					mcaA = append(slicesClone(mon), "pml_monitoring_filename", filepath.Join(monA, "prof"))
					mcaB = append(slicesClone(mon), "pml_monitoring_filename", filepath.Join(monB, "prof"))
				}
				env := []string{"NETLOOM_OUTPUT=" + out, "NETLOOM_JOB_ID=reorder-" + m.name + "-" + lang}
				a := parseRing(t, runRanks(t, m, reorderRanks, reorderPPN, lib, nil, mcaA, 3*time.Minute, prog, append([]string{"1"}, args...)...))
				b := parseRing(t, runRanks(t, m, reorderRanks, reorderPPN, lib, env, mcaB, 3*time.Minute, prog, append([]string{"2"}, args...)...))
				phase1, phase2 := ringTraffic(scrambled()), ringTraffic(newRing(t, b))
				if m.name == "openmpi" {
					// the oracle: Open MPI's monitoring, phase by phase
					eA, eB := monitoringE(t, monA), monitoringE(t, monB)
					mon2 := diff(eB, eA)
					if mon2 == nil {
						t.Fatalf("the second run's monitoring counts less than the first's: %v vs %v", eB, eA)
					}
					sameMatrix(t, "phase 1: Open MPI's monitoring vs the program's messages", nonzero(eA), phase1)
					sameMatrix(t, "phase 2: Open MPI's monitoring vs the program's messages", mon2, phase2)
					sameMatrix(t, "phase 1: online matrix vs Open MPI's monitoring", nonzero(a.rows), eA)
					sameMatrix(t, "phase 2 (since the mark): online matrix vs Open MPI's monitoring", nonzero(b.rows), mon2)
					if lang == "c" {
						sameMatrix(t, "phase 1 (MPI_Init to the mark): online matrix vs Open MPI's monitoring", nonzero(b.rows1), eA)
					}
					sameMatrix(t, "phase 1: online physical matrix vs Open MPI's monitoring", nonzero(a.phys), eA)
					sameMatrix(t, "phase 2: online physical matrix vs Open MPI's monitoring", nonzero(b.phys), mon2)
					phase1, phase2 = eA, mon2
				} else {
					sameMatrix(t, "phase 1: online matrix vs the program's messages", nonzero(a.rows), phase1)
					sameMatrix(t, "phase 2: online matrix vs the program's messages", nonzero(b.rows), phase2)
					if lang == "c" {
						sameMatrix(t, "phase 1 (MPI_Init to the mark): online matrix vs the program's messages", nonzero(b.rows1), phase1)
					}
					if len(a.phys) != 0 {
						t.Errorf("MPICH: physical rows, though it reports none: %v", a.phys)
					}
				}
				in1, in2 := interNode(phase1), interNode(phase2)
				t.Logf("%s %s: inter-node bytes phase 1 %d, phase 2 %d (%.2f); predicted %v", m.name, lang, in1, in2, float64(in2)/float64(in1), b.info)
				if in1 == 0 || 2*in2 > in1 {
					t.Errorf("phase 2's inter-node bytes %d are more than half of phase 1's %d", in2, in1)
				}
				if len(b.info) < 2 || b.info[0] != in1 || b.info[1] != in2 {
					t.Errorf("predicted inter-node bytes %v, measured %d before and %d after", b.info, in1, in2)
				}
				if lang == "c" {
					// the collective form, on WORLD, equals the rows
					for k, v := range a.rows {
						if a.all[k] != v.bytes {
							t.Errorf("netloom_matrix_all %v: %d, the rank's own row %d", k, a.all[k], v.bytes)
						}
					}
					if len(a.all) != reorderRanks*reorderRanks {
						t.Errorf("netloom_matrix_all gave %d entries", len(a.all))
					}
				}
				checkReorderProfiles(t, out, b, phase1, phase2)
			})
		}
	}
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// TestReorderMisuse: the documented return codes, on every rank, and no hang.
func TestReorderMisuse(t *testing.T) {
	buildAgent(t)
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			needMPI(t, m)
			prog := compile(t, m, "testdata/mpi/reorder.c")
			const np = 4
			out := runRanks(t, m, np, 2, m.lib, []string{"NETLOOM_SCOTCH_LIB=/nonexistent/libscotch-test.so"}, nil, time.Minute, prog, "3")
			want := map[string]int{"before-init": 2, "null": 4, "reorder-null": 4, "classes": 3, "mark": 6, "mark-some": 6,
				"intercomm": 5, "intercomm-matrix": 5}
			got := map[string]int{}
			all := map[string]int{}
			for _, l := range strings.Split(out, "\n") {
				f := strings.Fields(l)
				if len(f) >= 3 && f[0] == "MISUSE" {
					got[f[1]], _ = strconv.Atoi(f[2])
				}
				if len(f) >= 5 && f[0] == "MISUSE-ALL" {
					code, _ := strconv.Atoi(f[3])
					if f[4] != "1" {
						t.Errorf("%s: newcomm is not MPI_COMM_NULL after an error", l)
					}
					all[f[1]+" "+f[2]] = code
					if f[1] == "reorder" && !strings.Contains(l, "/nonexistent/libscotch-test.so") {
						t.Errorf("the message does not say which Scotch was missing: %s", l)
					}
				}
			}
			for k, v := range want {
				if g, ok := got[k]; !ok || g != v {
					t.Errorf("%s: code %d (present %v), want %d\n%s", k, g, ok, v, out)
				}
			}
			for r := range np {
				if c := all[fmt.Sprintf("reorder-mark-some %d", r)]; c != 6 {
					t.Errorf("rank %d: netloom_reorder with a mark only rank 0 has: %d, want 6 (NETLOOM_ERR_MARK)", r, c)
				}
				if c := all[fmt.Sprintf("reorder %d", r)]; c != 8 {
					t.Errorf("rank %d: netloom_reorder without Scotch: %d, want 8 (NETLOOM_ERR_NO_SCOTCH)", r, c)
				}
			}
			// Fortran, through its bindings: the same codes
			fprog := compileAgainstAgent(t, m, "testdata/mpi/reorder.f90")
			out = runRanks(t, m, np, 2, "", []string{"NETLOOM_SCOTCH_LIB=/nonexistent/libscotch-test.so"}, nil, time.Minute, fprog, "3")
			for _, w := range []string{"MISUSE null 4 netloom: a communicator the agent does not know", "MISUSE mark 6 netloom: no such mark: \"never\"",
				"MISUSE blank-mark 3"} {
				if !strings.Contains(out, w) {
					t.Errorf("Fortran: no %q in\n%s", w, out)
				}
			}
			for r := range np {
				if w := fmt.Sprintf("MISUSE-ALL reorder %d 8 T netloom: Scotch cannot be loaded", r); !strings.Contains(out, w) {
					t.Errorf("Fortran: no %q in\n%s", w, out)
				}
			}
			// without the agent: NETLOOM_CALL says so, the program runs as before
			out = runRanks(t, m, np, 2, "", nil, nil, time.Minute, prog, "2", "3", "64")
			if !strings.Contains(out, "MISUSE before-init 1 netloom: the agent is not loaded") || !strings.Contains(out, "NOREORDER 1 ") {
				t.Errorf("without the agent:\n%s", out)
			}
		})
	}
}

// TestReorderDocExample compiles docs/reorder.md's C example verbatim and
// runs it on 8 ranks over four fake nodes under Open MPI and MPICH.
func TestReorderDocExample(t *testing.T) {
	buildAgent(t)
	doc, err := os.ReadFile("../../docs/reorder.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i := strings.Index(s, "```c\n")
	j := strings.Index(s[i+5:], "```")
	if i < 0 || j < 0 {
		t.Fatal("docs/reorder.md has no C example")
	}
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			needMPI(t, m)
			prog := compileSource(t, m, "example.c", s[i+5:i+5+j])
			out := runRanks(t, m, 8, 2, m.lib, nil, nil, 2*time.Minute, prog)
			var before, after uint64
			var rank0 string
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "inter-node bytes") {
					rank0 = l
					if _, err := fmt.Sscanf(l, "inter-node bytes: %d before, %d after", &before, &after); err != nil {
						t.Fatalf("%q: %v", l, err)
					}
				}
			}
			if rank0 == "" || before == 0 || 2*after > before {
				t.Errorf("the example's output:\n%s", out)
			}
		})
	}
}

// checkReorderProfiles: every rank's profile records the reordering (the
// wire format's reorders, field 23) as the program saw it; the report joins
// them; and the per-peer counts, in world ranks, follow the new
// communicator's traffic: the profile's p2p rows are both phases' messages,
// and the job's inter-node bytes (the daemon's placement of the rows on
// nodes, which the link attribution starts from) are both phases'.
func checkReorderProfiles(t *testing.T, dir string, r ringOut, phase1, phase2 map[[2]int]traffic) {
	t.Helper()
	ds := readProfiles(t, dir, reorderRanks)
	scr := scrambled()
	oldRank := map[int]int{}
	for k, w := range scr {
		oldRank[w] = k
	}
	want := map[[2]int]traffic{}
	for _, m := range []map[[2]int]traffic{phase1, phase2} {
		for k, v := range m {
			w := want[k]
			want[k] = traffic{w.bytes + v.bytes, w.msgs + v.msgs}
		}
	}
	got := map[[2]int]traffic{}
	for w, d := range ds {
		if len(d.Reorders) != 1 {
			t.Fatalf("rank %d's profile has %d reorders, want 1: %v", w, len(d.Reorders), d.Reorders)
		}
		o := d.Reorders[0]
		if o.Ranks != reorderRanks || o.Nodes != 4 || o.Method != "scotch" || o.OldRank != uint32(oldRank[w]) ||
			o.NewRank != uint32(r.newrank[w]) || o.CommWorld || o.TimeUnixNs < d.StartUnixNs || o.TimeUnixNs > d.TimeUnixNs {
			t.Errorf("rank %d's reorder record %v: want %d ranks on 4 nodes by Scotch, old rank %d, new rank %d", w, o, reorderRanks, oldRank[w], r.newrank[w])
		}
		if len(r.info) >= 2 && (o.InterNodeBefore != r.info[0] || o.InterNodeAfter != r.info[1]) {
			t.Errorf("rank %d's reorder record predicts %d -> %d, the program got %v", w, o.InterNodeBefore, o.InterNodeAfter, r.info)
		}
		for _, p := range d.Peers {
			if v := tr(p.GetP2P()); v != (traffic{}) {
				got[[2]int{w, int(p.Peer)}] = v
			}
		}
	}
	sameMatrix(t, "the profile's p2p rows vs both phases", got, want)
	job := joinProfiles(t, dir)
	rep, err := ingest.BuildReport(job, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Reorders) != 1 || rep.Reorders[0].Reported != reorderRanks || len(rep.Reorders[0].Mapping) != reorderRanks {
		t.Fatalf("the report's reorders: %+v", rep.Reorders)
	}
	var text bytes.Buffer
	if err := ingest.WriteText(&text, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "Reordered ranks") || !strings.Contains(text.String(), fmt.Sprintf("Scotch's order, %d of 12 ranks moved", rep.Reorders[0].Moved)) {
		t.Errorf("netloom report does not say the job reordered itself:\n%s", text.String())
	}
	if in := interNode(want); job.InterNode.Bytes != in {
		t.Errorf("the job's inter-node bytes %d, both phases' %d", job.InterNode.Bytes, in)
	}
}
