package e2e

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestTraceFortran records the replay trace (NETLOOM_TRACE=1) of the same
// programs written in C and in Fortran (use mpi) under each MPI: patterns
// (nonblocking halo exchanges completed by MPI_Waitall, MPI_Sendrecv,
// blocking sends and receives, collectives, an in-place allreduce) and
// latesend (MPI_Send, MPI_Recv with MPI_STATUS_IGNORE). Open MPI's Fortran
// bindings call the library directly, so its Fortran calls are traced by the
// agent's own Fortran wrappers; MPICH's go through the C ones. Every rank's
// actions, compute gaps and tags aside (the Fortran programs number some
// tags from 1), must be the C program's, complete (not truncated, nothing
// left untraced that the C trace traced). patterns_f08.f90 (use mpi_f08),
// whose f08 calls the agent's f08 wrappers trace under Open MPI (and under
// MPICH those without a choice buffer, MPI_Waitall's among them), must
// give patterns.f90's actions and its one more allgather.
func TestTraceFortran(t *testing.T) {
	buildAgent(t)
	for _, m := range impls(t) {
		for _, prog := range []struct {
			name string
			args func(t *testing.T, lang string) []string
		}{
			{"patterns", func(t *testing.T, lang string) []string { // patterns.c's MPI-IO file
				if lang == "c" {
					return []string{filepath.Join(t.TempDir(), "io.dat")}
				}
				return nil
			}},
			{"latesend", func(*testing.T, string) []string { return []string{"5", "3", "70000"} }},
		} {
			t.Run(m.name+"/"+prog.name, func(t *testing.T) {
				needMPI(t, m)
				traces := map[string][][]string{}
				langs := []string{"c", "f90"}
				if prog.name == "patterns" {
					langs = append(langs, "f08")
				}
				for _, lang := range langs {
					src := "testdata/mpi/" + prog.name + "." + lang
					if lang == "f08" {
						src = "testdata/mpi/" + prog.name + "_f08.f90"
					}
					bin := compile(t, m, src)
					out := t.TempDir()
					runJob(t, m, agentRanks, m.lib, []string{"NETLOOM_OUTPUT=" + out, "NETLOOM_TRACE=1"}, nil, bin, prog.args(t, lang)...)
					traces[lang] = readActions(t, out)
				}
				for r := range agentRanks {
					c, f := traces["c"][r], traces["f90"][r]
					if len(c) < 5 {
						t.Fatalf("rank %d: the C trace has %d actions: %v", r, len(c), c)
					}
					if !slices.Equal(c, f) {
						t.Errorf("rank %d: the Fortran trace differs from the C one:\nC:       %s\nFortran: %s", r, strings.Join(c, " | "), strings.Join(f, " | "))
					}
					if f08, ok := traces["f08"]; ok && len(f) >= 2 {
						// patterns_f08.f90: patterns.f90's traffic, then an
						// in-place allgather of 6 integers on MPI_COMM_WORLD
						// and calls the replay does not express, before the
						// closing barrier
						want := slices.Concat(f[:len(f)-2], []string{fmt.Sprintf("%d allgather 24 24", r)}, f[len(f)-2:])
						if !slices.Equal(f08[r], want) {
							t.Errorf("rank %d: the use mpi_f08 trace is not use mpi's and an allgather:\nuse mpi: %s\nmpi_f08: %s", r, strings.Join(f, " | "), strings.Join(f08[r], " | "))
						}
					}
				}
			})
		}
	}
}

// readActions reads every rank's trace in DIR/<job>/rank-N.ti.gz: its
// actions but compute, each with its tag left out, after checking the
// rank's rank-N.ti.json says the trace is whole.
func readActions(t *testing.T, dir string) [][]string {
	t.Helper()
	jobs, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil || len(jobs) != 1 {
		t.Fatalf("%s: want one job folder, got %v (%v)", dir, jobs, err)
	}
	out := make([][]string, agentRanks)
	for r := range agentRanks {
		var meta struct {
			Events        int  `json:"events"`
			Truncated     bool `json:"truncated"`
			UntracedCalls int  `json:"untraced_calls"`
		}
		b, err := os.ReadFile(filepath.Join(jobs[0], fmt.Sprintf("rank-%d.ti.json", r)))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &meta); err != nil || meta.Truncated || meta.Events == 0 {
			t.Fatalf("rank %d: %s (%v)", r, b, err)
		}
		f, err := os.Open(filepath.Join(jobs[0], fmt.Sprintf("rank-%d.ti.gz", r)))
		if err != nil {
			t.Fatal(err)
		}
		z, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		text, err := io.ReadAll(z)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(text)), "\n") {
			w := strings.Fields(line)
			if len(w) < 2 || w[1] == "compute" {
				continue
			}
			switch w[1] {
			case "send", "isend", "recv", "irecv": // RANK OP PEER TAG BYTES
				if len(w) > 3 {
					w[3] = "tag"
				}
			case "wait": // RANK wait SRC DST TAG
				if len(w) > 4 {
					w[4] = "tag"
				}
			}
			out[r] = append(out[r], strings.Join(w, " "))
		}
	}
	return out
}
