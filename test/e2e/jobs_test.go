package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// jobRing is the MPI program of the job tests: 10 rounds of a 1000-byte
// Sendrecv to the right neighbour and a 64-byte Bcast from rank 0, 100 ms
// apart, so the agent sends several live snapshots.
const jobRing = `#include <mpi.h>
#include <time.h>
int main(int argc, char **argv)
{
	int rank, n;
	static char buf[4096], rbuf[4096];
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	int right = (rank + 1) % n, left = (rank + n - 1) % n;
	for (int i = 0; i < 10; i++) {
		MPI_Sendrecv(buf, 1000, MPI_BYTE, right, 1, rbuf, 1000, MPI_BYTE, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		MPI_Bcast(buf, 64, MPI_BYTE, 0, MPI_COMM_WORLD);
		struct timespec ts = {0, 100 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	MPI_Finalize();
	return 0;
}
`

// jobNodeWrap names each rank's node (two ranks per node) so that one
// machine looks like two nodes.
const jobNodeWrap = `r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
NETLOOM_NODE="node$((r / 2))"
export NETLOOM_NODE
exec "$@"
`

// jobsRoot is the repository root (two levels above this package).
func jobsRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

type jobMPI struct {
	name, cc, launcher string
	lib                string
	launchArgs         []string
}

func jobMPIs(t *testing.T) []jobMPI {
	root := jobsRoot(t)
	return []jobMPI{
		{"openmpi", "mpicc", "mpirun", filepath.Join(root, "bin/lib/libnetloom-ompi.so"), []string{"--oversubscribe", "--allow-run-as-root", "-np", "4"}},
		{"mpich", "mpicc.mpich", "mpirun.mpich", filepath.Join(root, "bin/lib/libnetloom-mpich.so"), []string{"-n", "4"}},
	}
}

// startJobsDaemon runs `netloom serve` on a simulated fabric with the agent
// socket on a free local port; it returns the daemon and the agent address.
func startJobsDaemon(t *testing.T) (*daemon, string) {
	t.Helper()
	dir := t.TempDir()
	d, agent := serve(t, dir, nil, "--fabric", "sim:fat-tree:hosts=8,radix=8", "--db", filepath.Join(dir, "netloom.db"),
		"--agent-listen", "127.0.0.1:0", "--agent-address-file", filepath.Join(dir, "agent-address"),
		"--sweep-interval", "500ms", "--job-timeout", "10s")
	if b, err := os.ReadFile(filepath.Join(dir, "agent-address")); err != nil || strings.TrimSpace(string(b)) != agent {
		t.Errorf("agent address file: %q %v, want %s", b, err, agent)
	}
	return d, agent
}

// TestJobsRunReport runs a real MPI job with `netloom run` against a live
// daemon, under Open MPI and MPICH, and checks the job, its ranks and
// nodes, matrices and profile through the API, then `netloom report` on
// the offline profile of the same run.
func TestJobsRunReport(t *testing.T) {
	d, agent := startJobsDaemon(t)
	for _, m := range jobMPIs(t) {
		t.Run(m.name, func(t *testing.T) {
			for _, tool := range []string{m.cc, m.launcher} {
				if _, err := exec.LookPath(tool); err != nil {
					t.Skipf("%s not installed", tool)
				}
			}
			if _, err := os.Stat(m.lib); err != nil {
				t.Skipf("agent library %s missing (build it with make build): %v", m.lib, err)
			}
			dir := t.TempDir()
			src := filepath.Join(dir, "ring.c")
			wrap := filepath.Join(dir, "nodewrap.sh")
			prog := filepath.Join(dir, "ring")
			os.WriteFile(src, []byte(jobRing), 0o644)
			os.WriteFile(wrap, []byte(jobNodeWrap), 0o755)
			if out, err := exec.Command(m.cc, "-o", prog, src).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", m.cc, err, out)
			}
			jobID := "e2e-" + m.name + "-" + fmt.Sprint(time.Now().UnixNano())
			outDir := filepath.Join(dir, "profiles")
			args := []string{"run", "--daemon", agent, "--output", outDir, "--interval", "200ms", "--job-id", jobID, "--", m.launcher}
			args = append(append(args, m.launchArgs...), "sh", wrap, prog)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			run := exec.CommandContext(ctx, netloomBin, args...)
			// No library directory in the environment: --mpi auto must pick
			// the flavour; the library is found through NETLOOM_LIB_DIR.
			run.Env = append(os.Environ(), "NETLOOM_LIB_DIR="+filepath.Dir(m.lib))
			out, err := run.CombinedOutput()
			if err != nil {
				t.Fatalf("netloom %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			if !strings.Contains(string(out), "netloom: job "+jobID) {
				t.Errorf("netloom run did not name the job:\n%s", out)
			}
			d := d.in(t)
			var detail struct {
				Job struct {
					State     string
					Ranks     int
					Nodes     int
					Finalized int
					Total     struct{ Bytes uint64 }
				}
				Nodes []struct {
					Node  string
					Ranks []int
				}
				Processes []struct {
					Rank int
					Node string
					PID  int
				}
			}
			d.waitFor(func() bool {
				return d.get("/api/v1/jobs/"+jobID, &detail) == 200 && detail.Job.State == "finished"
			}, "the job to finish in the API")
			if detail.Job.Ranks != 4 || detail.Job.Nodes != 2 || detail.Job.Finalized != 4 || len(detail.Processes) != 4 {
				t.Errorf("job %+v; daemon drops:\n%s\nrun output:\n%s", detail.Job, d.dropped(), out)
			}
			for i, p := range detail.Processes {
				if p.Rank != i || p.Node != fmt.Sprintf("node%d", i/2) || p.PID == 0 {
					t.Errorf("process %+v", p)
				}
			}
			if len(detail.Nodes) != 2 || fmt.Sprint(detail.Nodes[0].Ranks) != "[0 1]" || fmt.Sprint(detail.Nodes[1].Ranks) != "[2 3]" {
				t.Errorf("nodes %+v", detail.Nodes)
			}
			var mx struct{ Matrix [][]uint64 }
			if d.get("/api/v1/jobs/"+jobID+"/matrix?level=rank&class=p2p&metric=bytes", &mx) != 200 {
				t.Fatal("matrix")
			}
			apiP2P := mx.Matrix
			mx.Matrix = nil // decode the next matrices into new arrays
			for r := range 4 {
				for c := range 4 {
					want := uint64(0)
					if c == (r+1)%4 {
						want = 10000
					}
					if apiP2P[r][c] != want {
						t.Errorf("p2p bytes [%d][%d] = %d, want %d", r, c, apiP2P[r][c], want)
					}
				}
			}
			// The sparse form holds the same non-zero cells.
			var sp struct {
				Format   string
				Size     int
				Src, Dst []int
				Values   []uint64
			}
			if d.get("/api/v1/jobs/"+jobID+"/matrix?level=rank&class=p2p&metric=bytes&format=sparse", &sp) != 200 || sp.Format != "sparse" ||
				sp.Size != 4 || len(sp.Values) != 4 || len(sp.Src) != 4 || len(sp.Dst) != 4 {
				t.Errorf("sparse matrix %+v", sp)
			}
			for k := range sp.Values {
				if sp.Dst[k] != (sp.Src[k]+1)%4 || sp.Values[k] != apiP2P[sp.Src[k]][sp.Dst[k]] {
					t.Errorf("sparse cell %d: %d -> %d = %d", k, sp.Src[k], sp.Dst[k], sp.Values[k])
				}
			}
			if d.get("/api/v1/jobs/"+jobID+"/matrix?level=rank&class=p2p&metric=msgs", &mx) != 200 || mx.Matrix[3][0] != 10 {
				t.Errorf("p2p msgs %v", mx.Matrix)
			}
			// Bcast: the root sends 64 bytes to each other rank 10 times.
			if d.get("/api/v1/jobs/"+jobID+"/matrix?level=rank&class=coll&metric=bytes", &mx) != 200 ||
				fmt.Sprint(mx.Matrix[0]) != "[0 640 640 640]" || fmt.Sprint(mx.Matrix[1]) != "[0 0 0 0]" {
				t.Errorf("coll bytes %v", mx.Matrix)
			}
			var nm struct {
				Labels []string
				Matrix [][]uint64
			}
			if d.get("/api/v1/jobs/"+jobID+"/matrix?level=node&class=p2p", &nm) != 200 ||
				fmt.Sprint(nm.Labels) != "[node0 node1]" || fmt.Sprint(nm.Matrix) != "[[10000 10000] [10000 10000]]" {
				t.Errorf("node matrix %v %v", nm.Labels, nm.Matrix)
			}
			var prof struct {
				Profile struct {
					Functions []string
					Calls     [][]uint64
				}
			}
			if d.get("/api/v1/jobs/"+jobID+"/profile", &prof) != 200 {
				t.Fatal("profile")
			}
			col := -1
			for i, f := range prof.Profile.Functions {
				if f == "MPI_Sendrecv" {
					col = i
				}
			}
			if col < 0 || len(prof.Profile.Calls) != 4 {
				t.Fatalf("profile %+v", prof)
			}
			for r := range 4 {
				if prof.Profile.Calls[r][col] != 10 {
					t.Errorf("rank %d MPI_Sendrecv calls %d, want 10", r, prof.Profile.Calls[r][col])
				}
			}
			var series struct {
				Series struct {
					Time   []float64
					Values map[string][]float64
				}
			}
			if d.get("/api/v1/jobs/"+jobID+"/processes/1/series", &series) != 200 || len(series.Series.Time) == 0 {
				t.Errorf("no process samples: %+v", series)
			}
			var sent float64
			for _, v := range series.Series.Values["p2p_bytes"] {
				sent += v
			}
			if sent > 10000 {
				t.Errorf("rank 1 sent %g p2p bytes over its samples, more than the 10000 it sent", sent)
			}
			// Several series in one request equal the one-by-one ones.
			var many struct {
				Series []struct {
					Rank   *int
					Node   string
					Series json.RawMessage
				}
			}
			oneBy := func(path string) string {
				var one struct{ Series json.RawMessage }
				d.get(path, &one)
				return string(one.Series)
			}
			if d.get("/api/v1/jobs/"+jobID+"/series?ranks=1,2", &many) != 200 || len(many.Series) != 2 || *many.Series[0].Rank != 1 ||
				string(many.Series[0].Series) != oneBy("/api/v1/jobs/"+jobID+"/processes/1/series") ||
				string(many.Series[1].Series) != oneBy("/api/v1/jobs/"+jobID+"/processes/2/series") {
				t.Errorf("series of ranks 1,2: %+v", many)
			}
			if d.get("/api/v1/jobs/"+jobID+"/series?nodes=node1,node0", &many) != 200 || len(many.Series) != 2 || many.Series[0].Node != "node1" ||
				string(many.Series[0].Series) != oneBy("/api/v1/jobs/"+jobID+"/nodes/node1/series") {
				t.Errorf("series of nodes node1,node0: %+v", many)
			}
			if code := d.get("/api/v1/jobs/"+jobID+"/series?ranks=1,99", nil); code != 404 {
				t.Errorf("series of a rank that did not report: %d", code)
			}
			var list struct {
				Jobs []struct{ ID string }
			}
			if d.get("/api/v1/jobs?state=all&sort=p2p_bytes", &list) != 200 || len(list.Jobs) == 0 {
				t.Errorf("job list %+v", list)
			}

			// The offline profile of the same run.
			rep := exec.Command(netloomBin, "report", "--json", "--csv", filepath.Join(dir, "csv"), outDir)
			b, err := rep.Output()
			if err != nil {
				t.Fatalf("netloom report: %v\n%s", err, b)
			}
			var doc struct {
				Ranks  int
				Matrix map[string]map[string][][]uint64
			}
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatalf("report JSON: %v\n%s", err, b)
			}
			if doc.Ranks != 4 || fmt.Sprint(doc.Matrix["p2p"]["bytes"]) != fmt.Sprint(apiP2P) ||
				doc.Matrix["coll"]["msgs"][0][2] != 10 || len(doc.Matrix["rma"]["bytes"]) != 4 {
				t.Errorf("report: ranks %d matrix %v", doc.Ranks, doc.Matrix)
			}
			if _, err := os.Stat(filepath.Join(dir, "csv", "matrix-p2p-bytes.csv")); err != nil {
				t.Error(err)
			}
			text, err := exec.Command(netloomBin, "report", outDir).Output()
			if err != nil || !bytes.Contains(text, []byte("SIZE (bytes) matrix, point-to-point")) || !bytes.Contains(text, []byte("MPI_Sendrecv")) {
				t.Errorf("report text: %v\n%s", err, text)
			}
		})
	}
	// A failing job's status comes back.
	t.Run("exit status", func(t *testing.T) {
		m := jobMPIs(t)[0]
		if _, err := exec.LookPath(m.launcher); err != nil {
			t.Skip("mpirun not installed")
		}
		if _, err := os.Stat(m.lib); err != nil {
			t.Skipf("agent library %s missing: %v", m.lib, err)
		}
		cmd := exec.Command(netloomBin, "run", "--quiet", "--lib", m.lib, "--", m.launcher, "--allow-run-as-root", "-np", "1", "sh", "-c", "exit 3")
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
			t.Errorf("exit status: %v, want 3", err)
		}
	})
}
