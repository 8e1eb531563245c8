package e2e

// `use mpi_f08` programs (testdata/mpi/patterns_f08.f90) under Open MPI and
// MPICH: every call counted exactly once, whichever path the MPI's f08
// bindings take to PMPI (agent/README.md, "Fortran").

import (
	"bufio"
	"bytes"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/netloom/netloom/internal/ingest/agentpb"
	"github.com/netloom/netloom/internal/store"
)

// expectF08 is what rank r of n reports for patterns_f08.f90: the traffic of
// patterns.f90, an in-place allgather, a neighbourhood all-to-all on a 2 x 2
// torus, and the calls that move nothing.
func expectF08(n, r int) expectation {
	e := expectPatterns(n, r, false, false)
	for p := 0; p < n; p++ {
		if p != r { // MPI_IN_PLACE: the receive block (6 integers) to each other rank
			e.collTo("MPI_Allgather", p, 24)
		}
	}
	for _, p := range []int{r ^ 2, r ^ 2, r ^ 1, r ^ 1} { // 3 doubles to each neighbour
		e.collTo("MPI_Neighbor_alltoall", p, 24)
	}
	e.recvd["MPI_Neighbor_alltoall"] = 4 * 24
	e.recvd["MPI_Allgather"] = uint64(n-1) * 24
	recvs := uint64(len(ringSizes))
	if r == n-1 { // sub-rank 0 of the reversed communicator
		recvs += uint64(n - 1)
	}
	for fn, c := range map[string]uint64{"MPI_Init": 1, "MPI_Finalize": 1, "MPI_Allgather": 1, "MPI_Neighbor_alltoall": 1,
		"MPI_Test": 3, "MPI_Ibarrier": 1, "MPI_Wait": 1, "MPI_Barrier": 1, "MPI_Comm_free": 2, "MPI_Request_free": 2,
		"MPI_Waitall": 9, "MPI_Irecv": 10, "MPI_Sendrecv": 3, "MPI_Send_init": 1, "MPI_Recv_init": 1, "MPI_Recv": recvs} {
		e.calls[fn] = c
	}
	return e
}

func TestAgentFortranF08(t *testing.T) {
	profileEachMPI(t, "testdata/mpi/patterns_f08.f90", "patterns_f08 done on 4 ranks", nil,
		func(t *testing.T, m mpiImpl, ds []*agentpb.Datagram, job *store.Job) {
			checkProfilesAgainst(t, m, ds, job, false, expectF08)
		})
}

// definedSymbols is the set of dynamic symbols a shared object defines.
func definedSymbols(t *testing.T, lib string) map[string]bool {
	t.Helper()
	out, err := exec.Command("nm", "-D", "--defined-only", lib).Output()
	if err != nil {
		t.Fatalf("nm -D %s: %v", lib, err)
	}
	syms := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 {
			syms[f[2]] = true
		}
	}
	return syms
}

// linkedLibrary returns the path of the shared library matching name that
// the dynamic linker resolves for prog.
func linkedLibrary(t *testing.T, prog, name string) string {
	t.Helper()
	out, err := exec.Command("ldd", prog).Output()
	if err != nil {
		t.Fatalf("ldd %s: %v", prog, err)
	}
	re := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(name) + `\S*\s+=>\s+(\S+)`)
	f := re.FindSubmatch(out)
	if f == nil {
		t.Fatalf("%s not linked by %s:\n%s", name, prog, out)
	}
	return string(f[1])
}

// TestAgentF08Symbols checks the f08 entry points the agent interposes
// against the ones the MPI library defines, for every function of
// agent/mpi.list: Open MPI's f08 bindings of all of them reach PMPI without
// the C wrappers, so the agent must define every mpi_x_f08_ the library
// does; MPICH's f08 bindings of functions with a choice buffer are named
// mpi_x_f08ts_ and call the C MPI_X (counted there), the others mpi_x_f08_
// and call PMPI_X: the agent must define exactly the library's mpi_x_f08_
// (one more would be dead, one less a function missed).
func TestAgentF08Symbols(t *testing.T) {
	buildAgent(t)
	list, err := exec.Command("sed", "-n", `s/^int \(MPI_[A-Za-z_]*\)(.*/\1/p`, filepath.Join(repoRoot(t), "agent/mpi.list")).Output()
	if err != nil {
		t.Fatal(err)
	}
	fns := strings.Fields(string(list))
	if len(fns) < 100 {
		t.Fatalf("%d functions in agent/mpi.list", len(fns))
	}
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			needMPI(t, m)
			prog := compile(t, m, "testdata/mpi/patterns_f08.f90")
			name := "libmpi_usempif08"
			if m.name == "mpich" {
				name = "libmpichfort"
			}
			mpi := definedSymbols(t, linkedLibrary(t, prog, name))
			agent := definedSymbols(t, m.lib)
			ts := 0
			for _, fn := range fns {
				sym := strings.ToLower(fn) + "_f08_"
				if mpi[sym] != agent[sym] {
					t.Errorf("%s: %s defines %s: %v, the agent: %v", fn, name, sym, mpi[sym], agent[sym])
				}
				if mpi[strings.ToLower(fn)+"_f08ts_"] {
					ts++
					if agent[sym] {
						t.Errorf("%s: the agent interposes %s, %s binds it as %s_f08ts_ (to the C MPI_X: counted twice?)", fn, sym, name, strings.ToLower(fn))
					}
				}
			}
			if m.name == "mpich" && ts < 50 {
				t.Errorf("only %d f08ts bindings in %s", ts, name)
			}
		})
	}
}
