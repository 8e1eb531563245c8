package e2e

// End-to-end tests of the MPI agent (agent/): real MPI programs with known
// communication patterns (testdata/mpi/patterns.c and patterns.f90) run under
// Open MPI and MPICH with the agent preloaded, on 4 ranks spread over two
// named "nodes"; the profiles the agent writes are checked exactly against
// what the patterns send, point-to-point matrices against Open MPI's own
// monitoring output, and the live UDP reports against a Go listener.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	"github.com/netloom/netloom/internal/ingest"
	"github.com/netloom/netloom/internal/ingest/agentpb"
	"github.com/netloom/netloom/internal/store"
)

const (
	agentRanks = 4
	agentPPN   = 2 // ranks per fake node: node0 = ranks 0,1; node1 = ranks 2,3
)

// mpiImpl is one MPI library with its compilers, launcher and agent library.
type mpiImpl struct {
	name    string
	cc, fc  string
	launch  string
	lib     string
	library string // prefix of Process.mpi_library
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

var (
	agentBuildOnce sync.Once
	agentBuildErr  error
)

// buildAgent builds both agent libraries once (make -C agent).
func buildAgent(t *testing.T) {
	t.Helper()
	root := repoRoot(t)
	agentBuildOnce.Do(func() {
		out, err := exec.Command("make", "-C", filepath.Join(root, "agent")).CombinedOutput()
		if err != nil {
			agentBuildErr = fmt.Errorf("make -C agent: %v\n%s", err, out)
		}
	})
	if agentBuildErr != nil {
		t.Fatal(agentBuildErr)
	}
}

func impls(t *testing.T) []mpiImpl {
	root := repoRoot(t)
	return []mpiImpl{
		{name: "openmpi", cc: "mpicc", fc: "mpif90", launch: "mpirun",
			lib: filepath.Join(root, "bin/lib/libnetloom-ompi.so"), library: "Open MPI 4."},
		{name: "mpich", cc: "mpicc.mpich", fc: "mpif90.mpich", launch: "mpirun.mpich",
			lib: filepath.Join(root, "bin/lib/libnetloom-mpich.so"), library: "MPICH 4."},
	}
}

func needMPI(t *testing.T, m mpiImpl) {
	t.Helper()
	for _, tool := range []string{m.cc, m.fc, m.launch} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
}

// compile builds one test program with the MPI's compiler wrapper.
func compile(t *testing.T, m mpiImpl, src string) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, strings.TrimSuffix(filepath.Base(src), filepath.Ext(src)))
	comp := m.cc
	inc, _ := filepath.Abs("../../agent/include") // netloom.h
	args := []string{"-O2", "-w", "-I" + inc, "-o", bin, src}
	if strings.HasSuffix(src, ".f90") {
		comp = m.fc
	}
	out, err := exec.Command(comp, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", comp, src, err, out)
	}
	return bin
}

// compileSource writes text to a temporary file called name and compiles
// it as compile does.
func compileSource(t *testing.T, m mpiImpl, name, text string) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(src, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return compile(t, m, src)
}

// runJob runs np ranks of prog through testdata/mpi/nodewrap.sh, which preloads
// lib (when not empty) and names each rank's node. env is added to the ranks'
// environment; mca are Open MPI "--mca name value" pairs.
func runJob(t *testing.T, m mpiImpl, np int, lib string, env []string, mca []string, prog string, args ...string) string {
	t.Helper()
	return runRanks(t, m, np, agentPPN, lib, env, mca, 3*time.Minute, prog, args...)
}

// runRanks runs np ranks of prog through nodewrap.sh with ppn ranks per fake
// node, the agent preloaded when lib is set; it fails the test on a non-zero
// exit or after limit (a hang).
func runRanks(t *testing.T, m mpiImpl, np, ppn int, lib string, env, mca []string, limit time.Duration, prog string, args ...string) string {
	t.Helper()
	wrap, err := filepath.Abs("testdata/mpi/nodewrap.sh")
	if err != nil {
		t.Fatal(err)
	}
	env = append(env, "NL_TEST_LIB="+lib, "NL_TEST_PPN="+strconv.Itoa(ppn))
	var cmdArgs []string
	if m.name == "openmpi" {
		cmdArgs = []string{"--allow-run-as-root", "--oversubscribe", "-np", strconv.Itoa(np)}
		for i := 0; i+1 < len(mca); i += 2 {
			cmdArgs = append(cmdArgs, "--mca", mca[i], mca[i+1])
		}
		for _, kv := range env {
			k, _, _ := strings.Cut(kv, "=")
			cmdArgs = append(cmdArgs, "-x", k)
		}
	} else {
		cmdArgs = []string{"-np", strconv.Itoa(np)}
		// Every rank runs on this host: shared memory only. MPICH's UCX
		// otherwise probes the network devices at MPI_Init and fails
		// ("init_worker ... No such device") when another session's
		// namespaces add or remove interfaces meanwhile.
		if os.Getenv("UCX_TLS") == "" {
			env = append(env, "UCX_TLS=self,sm")
		}
	}
	cmdArgs = append(cmdArgs, "sh", wrap, prog)
	cmdArgs = append(cmdArgs, args...)
	cmd := exec.Command(m.launch, cmdArgs...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", m.launch, strings.Join(cmdArgs, " "), err, out.String())
		}
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s: no exit after %v (a hang)\n%s", m.launch, limit, out.String())
	}
	return out.String()
}

// readProfiles reads DIR/<job>/rank-*.pb, one Datagram per rank, by rank.
func readProfiles(t *testing.T, dir string, np int) []*agentpb.Datagram {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*", "rank-*.pb"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != np {
		t.Fatalf("%d profile files in %s, want %d: %v", len(files), dir, np, files)
	}
	out := make([]*agentpb.Datagram, np)
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(fh)
		d := &agentpb.Datagram{}
		if err := protodelim.UnmarshalFrom(r, d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
			t.Errorf("%s: data after the one Datagram", f)
		}
		fh.Close()
		if int(d.Rank) >= np || out[d.Rank] != nil {
			t.Fatalf("%s: rank %d unexpected", f, d.Rank)
		}
		if want := fmt.Sprintf("rank-%d.pb", d.Rank); filepath.Base(f) != want {
			t.Errorf("%s holds rank %d", f, d.Rank)
		}
		// no CUDA on this machine: no buffer probed, no GPU section
		// (test/gpu checks the probe where there is a GPU)
		if d.Gpu != nil {
			t.Errorf("%s: a GPU section in a process without CUDA: %v", f, d.Gpu)
		}
		out[d.Rank] = d
	}
	return out
}

// joinProfiles joins DIR/<job>/rank-*.pb into one job as `netloom report`
// does.
func joinProfiles(t *testing.T, dir string) *store.Job {
	t.Helper()
	j, warnings, err := ingest.ReadProfile(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range warnings {
		t.Errorf("reading %s: %v", dir, w)
	}
	return j
}

// traffic is bytes and messages of one class to one peer.
type traffic struct{ bytes, msgs uint64 }

func (a *traffic) add(b uint64) { a.bytes += b; a.msgs++ }

// expectation is what one rank must report.
type expectation struct {
	p2p, coll, rma map[int]*traffic
	hist           map[int]map[int]uint64 // peer -> bin -> messages
	calls          map[string]uint64
	sent           map[string]uint64
	recvd          map[string]uint64 // checked for the functions listed
	ringBytes      uint64
	ringMsgs       uint64
	ioWrite        uint64
}

func newExpectation() expectation {
	return expectation{p2p: map[int]*traffic{}, coll: map[int]*traffic{}, rma: map[int]*traffic{},
		hist: map[int]map[int]uint64{}, calls: map[string]uint64{}, sent: map[string]uint64{}, recvd: map[string]uint64{}}
}

// collTo adds a collective message of b bytes from function fn to peer p.
func (e *expectation) collTo(fn string, p int, b uint64) {
	if e.coll[p] == nil {
		e.coll[p] = &traffic{}
	}
	e.coll[p].add(b)
	e.sent[fn] += b
}

func bin(s uint64) int {
	b := 0
	for s > 0 {
		b++
		s >>= 1
	}
	return b
}

var ringSizes = []uint64{0, 1, 8, 100, 1000, 4096, 65536}

// expectPatterns computes what rank r of n sends in patterns.c/.f90 under
// the agent's accounting rules (agent/README.md). full adds the parts only
// patterns.c has (one-sided, MPI-IO).
func expectPatterns(n, r int, full, io bool) expectation {
	e := newExpectation()
	get := func(m map[int]*traffic, p int) *traffic {
		if m[p] == nil {
			m[p] = &traffic{}
		}
		return m[p]
	}
	send := func(fn string, p int, b uint64) {
		get(e.p2p, p).add(b)
		if e.hist[p] == nil {
			e.hist[p] = map[int]uint64{}
		}
		e.hist[p][bin(b)]++
		e.sent[fn] += b
	}
	coll := func(fn string, p int, b uint64) {
		if p == r {
			return
		}
		get(e.coll, p).add(b)
		e.sent[fn] += b
	}
	right, left := (r+1)%n, (r+n-1)%n
	for _, s := range ringSizes {
		send("MPI_Send", right, s)
		e.ringBytes += s
		e.ringMsgs++
	}
	for i := 0; i < 5; i++ {
		send("MPI_Isend", right, 1024)
		send("MPI_Isend", left, 1024)
	}
	for i := 0; i < 3; i++ {
		send("MPI_Sendrecv", right, 40)
	}
	for i := 0; i < 4; i++ {
		send("MPI_Startall", right, 300)
	}
	if r != n-1 {
		send("MPI_Send", n-1, 50)
	}
	e.calls["MPI_Send"] = uint64(len(ringSizes))
	if r != n-1 {
		e.calls["MPI_Send"]++
	}
	e.calls["MPI_Isend"] = 10
	e.calls["MPI_Startall"] = 4
	e.calls["MPI_Bcast"] = 1
	e.calls["MPI_Alltoall"] = 1
	e.calls["MPI_Reduce"] = 1
	e.calls["MPI_Allreduce"] = 1
	e.calls["MPI_Pcontrol"] = 2
	for p := 0; p < n; p++ {
		if r == 1%n {
			coll("MPI_Bcast", p, 4000)
		}
		coll("MPI_Alltoall", p, 64)
		if r != 0 && p == 0 {
			coll("MPI_Reduce", p, 256)
		}
		coll("MPI_Allreduce", p, 64)
	}
	if full {
		get(e.rma, right).add(40)
		get(e.rma, left).add(20)
		get(e.rma, 0).add(12)
		e.sent["MPI_Put"] = 40
		e.sent["MPI_Accumulate"] = 12
		e.calls["MPI_Put"] = 1
		e.calls["MPI_Get"] = 1
		e.calls["MPI_Accumulate"] = 1
		if io {
			e.ioWrite = 4096
			e.calls["MPI_File_write_at_all"] = 1
		}
	}
	return e
}

func tr(t *agentpb.Traffic) traffic {
	return traffic{t.GetBytes(), t.GetMsgs()}
}

func nodeOf(r int) string { return fmt.Sprintf("node%d", r/agentPPN) }

// checkProfiles compares the rank profiles of patterns.c/.f90 with the expectations.
func checkProfiles(t *testing.T, m mpiImpl, ds []*agentpb.Datagram, job *store.Job, full, io bool) {
	t.Helper()
	checkProfilesAgainst(t, m, ds, job, full, func(n, r int) expectation { return expectPatterns(n, r, full, io) })
}

// checkProfilesAgainst compares the rank profiles with what expect says rank
// r of n must report: per peer traffic by class, histograms, function calls
// and bytes, the pcontrol-1 region when the ring ran, and with full the C
// program's halo region; and the per-node traffic of each rank in job, the
// profiles joined as `netloom report` joins them (the agent knows no other
// rank's node: the join places each peer's traffic on the node that peer
// reported).
func checkProfilesAgainst(t *testing.T, m mpiImpl, ds []*agentpb.Datagram, job *store.Job, full bool, expect func(n, r int) expectation) {
	t.Helper()
	n := len(ds)
	if len(job.Processes) != n {
		t.Fatalf("the joined job has %d processes, want %d", len(job.Processes), n)
	}
	for r, d := range ds {
		jp := &job.Processes[r]
		if len(d.Nodes) != 0 || d.GetProcess().GetIntraNode() != nil || d.GetProcess().GetInterNode() != nil {
			t.Errorf("rank %d: the agent sent node rows or intra/inter-node totals, which it cannot know", r)
		}
		e := expect(n, r)
		if d.Version != 1 || !d.Final || d.Chunk != 0 || d.Chunks != 1 || int(d.WorldSize) != n || d.PeersTruncated {
			t.Errorf("rank %d: header version=%d final=%v chunk=%d/%d world=%d truncated=%v", r, d.Version, d.Final, d.Chunk, d.Chunks, d.WorldSize, d.PeersTruncated)
		}
		if d.JobId == "" || d.JobId != ds[0].JobId {
			t.Errorf("rank %d: job id %q, rank 0 has %q", r, d.JobId, ds[0].JobId)
		}
		p := d.GetProcess()
		if p.GetNode() != nodeOf(r) || p.GetPid() == 0 || !strings.HasPrefix(p.GetMpiLibrary(), m.library) || p.GetVmRss() == 0 || p.GetVmHwm() < p.GetVmRss() || p.GetVmPeak() < p.GetVmSize() {
			t.Errorf("rank %d: process %v", r, p)
		}
		if p.GetWallSeconds() <= 0 || p.GetMpiSeconds() <= 0 || p.GetMpiSeconds() > p.GetWallSeconds() { // measured over one span; a sampled estimate past it is capped
			t.Errorf("rank %d: wall %v s, mpi %v s", r, p.GetWallSeconds(), p.GetMpiSeconds())
		}
		if p.GetMpiioWriteBytes() != e.ioWrite {
			t.Errorf("rank %d: MPI-IO written %d, want %d", r, p.GetMpiioWriteBytes(), e.ioWrite)
		}
		peers := map[int]*agentpb.PeerTraffic{}
		for _, pt := range d.Peers {
			peers[int(pt.Peer)] = pt
		}
		var intra, inter traffic
		nodes := map[string][3]traffic{}
		for q := 0; q < n; q++ {
			pt := peers[q]
			for c, pair := range []struct {
				name string
				want map[int]*traffic
				got  *agentpb.Traffic
			}{{"p2p", e.p2p, pt.GetP2P()}, {"coll", e.coll, pt.GetColl()}, {"rma", e.rma, pt.GetRma()}} {
				var want traffic
				if w := pair.want[q]; w != nil {
					want = *w
				}
				if got := tr(pair.got); got != want {
					t.Errorf("%s rank %d -> %d %s: got %d bytes %d msgs, want %d bytes %d msgs", m.name, r, q, pair.name, got.bytes, got.msgs, want.bytes, want.msgs)
				}
				side := &inter
				if nodeOf(q) == nodeOf(r) {
					side = &intra
				}
				side.bytes += want.bytes
				side.msgs += want.msgs
				nt := nodes[nodeOf(q)]
				nt[c].bytes += want.bytes
				nt[c].msgs += want.msgs
				nodes[nodeOf(q)] = nt
			}
			wantHist := make([]uint64, 0)
			for b, c := range e.hist[q] {
				for len(wantHist) <= b {
					wantHist = append(wantHist, 0)
				}
				wantHist[b] = c
			}
			if got := pt.GetSizeHistogram(); fmt.Sprint(got) != fmt.Sprint(wantHist) && !(len(got) == 0 && len(wantHist) == 0) {
				t.Errorf("%s rank %d -> %d histogram %v, want %v", m.name, r, q, got, wantHist)
			}
		}
		if got := (traffic{jp.IntraNode.Bytes, jp.IntraNode.Msgs}); got != intra {
			t.Errorf("rank %d: intra-node %+v, want %+v", r, got, intra)
		}
		if got := (traffic{jp.InterNode.Bytes, jp.InterNode.Msgs}); got != inter {
			t.Errorf("rank %d: inter-node %+v, want %+v", r, got, inter)
		}
		if jp.ToNodes.Len() != n/agentPPN {
			t.Errorf("rank %d: %d nodes, want %d", r, jp.ToNodes.Len(), n/agentPPN)
		}
		for nt := range jp.ToNodes.All() {
			want := nodes[nt.Node]
			st := func(x store.Traffic) traffic { return traffic{x.Bytes, x.Msgs} }
			if got := [3]traffic{st(nt.P2P), st(nt.Coll), st(nt.RMA)}; got != want {
				t.Errorf("rank %d: node %s traffic %+v, want %+v", r, nt.Node, got, want)
			}
		}
		fns := map[string]*agentpb.FunctionStat{}
		for _, f := range d.Functions {
			fns[f.Name] = f
		}
		for name, calls := range e.calls {
			if got := fns[name].GetCalls(); got != calls {
				t.Errorf("%s rank %d: %s called %d times, want %d", m.name, r, name, got, calls)
			}
		}
		for name, b := range e.sent {
			if got := fns[name].GetBytesSent(); got != b {
				t.Errorf("%s rank %d: %s sent %d bytes, want %d", m.name, r, name, got, b)
			}
		}
		for name, b := range e.recvd {
			if got := fns[name].GetBytesReceived(); got != b {
				t.Errorf("%s rank %d: %s received %d bytes, want %d", m.name, r, name, got, b)
			}
		}
		if e.calls["MPI_Send"] > 0 && fns["MPI_Send"].GetTimeNs() == 0 {
			t.Errorf("rank %d: no time in MPI_Send", r)
		}
		regions := map[string]*agentpb.Region{}
		for _, rg := range d.Regions {
			regions[rg.Name] = rg
		}
		if rg := regions["pcontrol-1"]; e.ringMsgs > 0 && (rg == nil || rg.Entries != 1 || tr(rg.P2P) != (traffic{e.ringBytes, e.ringMsgs}) || rg.TimeNs == 0 || rg.MpiTimeNs == 0 || rg.MpiTimeNs > rg.TimeNs) {
			t.Errorf("rank %d: region pcontrol-1 %v, want 1 entry and %d bytes in %d messages", r, rg, e.ringBytes, e.ringMsgs)
		}
		// NETLOOM_REGION_BEGIN/END (netloom.h) around each halo iteration:
		// 2 Isends of 128 doubles, 5 times.
		if full { // the C program
			if rg := regions["halo"]; rg == nil || rg.Entries != 5 || tr(rg.P2P) != (traffic{5 * 2 * 1024, 10}) || rg.MpiTimeNs > rg.TimeNs {
				t.Errorf("rank %d: region halo %v, want 5 entries and 10240 bytes in 10 messages", r, rg)
			}
		}
	}
}

// profileEachMPI compiles src under each MPI, runs it on agentRanks ranks
// under the agent (program arguments args), checks that it printed done
// ("" for nothing) and hands the ranks' offline profiles to check.
func profileEachMPI(t *testing.T, src, done string, args []string, check func(t *testing.T, m mpiImpl, ds []*agentpb.Datagram, job *store.Job)) {
	buildAgent(t)
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			needMPI(t, m)
			prog := compile(t, m, src)
			out := t.TempDir()
			stdout := runJob(t, m, agentRanks, m.lib, []string{"NETLOOM_OUTPUT=" + out}, nil, prog, args...)
			if done != "" && !strings.Contains(stdout, done) {
				t.Fatalf("program output: %s", stdout)
			}
			check(t, m, readProfiles(t, out, agentRanks), joinProfiles(t, out))
		})
	}
}

func TestAgentPatternsC(t *testing.T) {
	profileEachMPI(t, "testdata/mpi/patterns.c", "patterns done on 4 ranks", []string{filepath.Join(t.TempDir(), "io.dat")},
		func(t *testing.T, m mpiImpl, ds []*agentpb.Datagram, job *store.Job) {
			checkProfiles(t, m, ds, job, true, true)
		})
}

func TestAgentPatternsFortran(t *testing.T) {
	profileEachMPI(t, "testdata/mpi/patterns.f90", "", nil,
		func(t *testing.T, m mpiImpl, ds []*agentpb.Datagram, job *store.Job) {
			checkProfiles(t, m, ds, job, false, false)
		})
}

// monLine is an "E src dst N bytes M msgs sent" line of Open MPI's monitoring output.
var monLine = regexp.MustCompile(`^([EISRC])\s+(\d+)\s+(\d+)\s+(\d+) bytes\s+(\d+) msgs sent`)

// monitoringOutput parses Open MPI's monitoring output files prof.<rank>.prof:
// for each line kind the traffic from rank to peer. E: point-to-point messages
// the PML sent, I: the PML messages of collectives (internal tags, with
// pml_monitoring_enable 2), S: one-sided data sent, R: one-sided data
// received (gets), C: collectives as the application called them.
func monitoringOutput(t *testing.T, dir string, np int) map[string]map[[2]int]traffic {
	t.Helper()
	out := map[string]map[[2]int]traffic{}
	for r := 0; r < np; r++ {
		for _, line := range monitoringLines(t, dir, r) {
			f := monLine.FindStringSubmatch(line)
			if f == nil {
				continue
			}
			src, _ := strconv.Atoi(f[2])
			dst, _ := strconv.Atoi(f[3])
			b, _ := strconv.ParseUint(f[4], 10, 64)
			c, _ := strconv.ParseUint(f[5], 10, 64)
			if out[f[1]] == nil {
				out[f[1]] = map[[2]int]traffic{}
			}
			out[f[1]][[2]int{src, dst}] = traffic{b, c}
		}
	}
	return out
}

// TestAgentVersusOpenMPIMonitoring runs the patterns with the agent and Open
// MPI's monitoring on together (pml_monitoring_enable 2, textual output), and
// compares with the monitoring's own output, which Open MPI still writes:
//   - the agent's point-to-point matrix (the application's calls) with the E
//     lines. Open MPI's pml monitoring does not see persistent requests
//     (MPI_Start), which the agent counts: that part is taken out.
//   - the physical counts (what the library sent, which the agent takes from
//     the monitoring's own calls) with every E, I, S and R line: p2p, the
//     messages collectives were decomposed into, one-sided puts, and gets.
//
// MPI-IO is left out of the first (its aggregators send internal messages).
func TestAgentVersusOpenMPIMonitoring(t *testing.T) {
	buildAgent(t)
	m := impls(t)[0]
	needMPI(t, m)
	prog := compile(t, m, "testdata/mpi/patterns.c")
	out, mon := t.TempDir(), t.TempDir()
	runJob(t, m, agentRanks, m.lib, []string{"NETLOOM_OUTPUT=" + out},
		[]string{"pml_monitoring_enable", "2", "pml_monitoring_enable_output", "3", "pml_monitoring_filename", filepath.Join(mon, "prof")}, prog)
	ds := readProfiles(t, out, agentRanks)
	oracle := monitoringOutput(t, mon, agentRanks)
	for _, kind := range []string{"E", "I", "S", "R", "C"} {
		if len(oracle[kind]) == 0 {
			t.Fatalf("Open MPI's monitoring output lacks %s lines: %v", kind, oracle)
		}
	}
	for r, d := range ds {
		peers := map[int]*agentpb.PeerTraffic{}
		for _, p := range d.Peers {
			peers[int(p.Peer)] = p
		}
		right, left := (r+1)%agentRanks, (r+agentRanks-1)%agentRanks
		for q := 0; q < agentRanks; q++ {
			p := peers[q]
			got := tr(p.GetP2P())
			if q == right { // persistent sends: counted by the agent only
				got.bytes -= 4 * 300
				got.msgs -= 4
			}
			if want := oracle["E"][[2]int{r, q}]; got != want {
				t.Errorf("rank %d -> %d p2p: agent %+v, Open MPI monitoring %+v", r, q, got, want)
			}
			// one-sided: Open MPI counts what the origin sent (a get sends
			// a request of 0 bytes), the agent the bytes moved either way
			rma := tr(p.GetRma())
			if q == left {
				rma.bytes -= 20
			}
			if want := oracle["S"][[2]int{r, q}]; rma != want {
				t.Errorf("rank %d -> %d rma: agent %+v, Open MPI monitoring %+v", r, q, rma, want)
			}
			for _, c := range []struct {
				kind string
				got  *agentpb.Traffic
			}{{"E", p.GetMonitoredP2P()}, {"I", p.GetMonitoredColl()}, {"S", p.GetMonitoredRma()}, {"R", p.GetMonitoredFetched()}} {
				if got, want := tr(c.got), oracle[c.kind][[2]int{r, q}]; got != want {
					t.Errorf("rank %d -> %d physical %s: agent %+v, Open MPI monitoring %+v", r, q, c.kind, got, want)
				}
			}
		}
	}
}

// listen receives datagrams on a loopback UDP port until stop is closed.
func listen(t *testing.T) (addr string, got func() [][]byte, stop func()) {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadBuffer(8 << 20)
	var mu sync.Mutex
	var dgrams [][]byte
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1<<17)
		for {
			n, _, err := conn.ReadFromUDP(buf)
			if err != nil {
				return
			}
			mu.Lock()
			dgrams = append(dgrams, append([]byte(nil), buf[:n]...))
			mu.Unlock()
		}
	}()
	return conn.LocalAddr().String(), func() [][]byte {
			mu.Lock()
			defer mu.Unlock()
			return append([][]byte(nil), dgrams...)
		}, func() {
			conn.Close()
			<-done
		}
}

// runPatterns runs testdata/mpi/patterns.c on agentRanks ranks of m with
// the agent and env, and returns the datagrams its agents sent.
func runPatterns(t *testing.T, m mpiImpl, env ...string) [][]byte {
	t.Helper()
	prog := compile(t, m, "testdata/mpi/patterns.c")
	addr, got, stop := listen(t)
	runJob(t, m, agentRanks, m.lib, append([]string{"NETLOOM_DAEMON=" + addr}, env...), nil, prog)
	time.Sleep(200 * time.Millisecond)
	stop()
	return got()
}

// decodeAll decodes the datagrams listen received; one that is not an
// agent datagram fails the test.
func decodeAll(t *testing.T, raw [][]byte) []*agentpb.Datagram {
	t.Helper()
	out := make([]*agentpb.Datagram, 0, len(raw))
	for _, b := range raw {
		d := &agentpb.Datagram{}
		if err := proto.Unmarshal(b, d); err != nil {
			t.Fatalf("undecodable datagram: %v", err)
		}
		out = append(out, d)
	}
	return out
}

// TestAgentUDP receives the live reports of a running job: several snapshots
// per rank, chunked under 64 KiB (chunking forced with a small limit), whose
// chunks reassemble into complete node and peer lists, then the final report.
func TestAgentUDP(t *testing.T) {
	buildAgent(t)
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			needMPI(t, m)
			raw := runPatterns(t, m, "NETLOOM_INTERVAL=0.2", "NETLOOM_DGRAM_LIMIT=300", "PATTERNS_LINGER_MS=1500")
			type key struct {
				rank uint32
				seq  uint64
			}
			snaps := map[key][]*agentpb.Datagram{}
			for _, b := range raw {
				if len(b) >= 64*1024 {
					t.Errorf("datagram of %d bytes", len(b))
				}
			}
			for _, d := range decodeAll(t, raw) {
				k := key{d.Rank, d.Seq}
				snaps[k] = append(snaps[k], d)
			}
			finals := map[uint32]int{}
			live := map[uint32]int{}
			chunked := 0
			for k, ds := range snaps {
				sort.Slice(ds, func(i, j int) bool { return ds[i].Chunk < ds[j].Chunk })
				if int(ds[0].Chunks) != len(ds) {
					t.Errorf("rank %d seq %d: %d of %d chunks arrived", k.rank, k.seq, len(ds), ds[0].Chunks)
					continue
				}
				if len(ds) > 1 {
					chunked++
				}
				nodes, peers := 0, map[uint32]bool{}
				for i, d := range ds {
					if int(d.Chunk) != i || (i == 0) != (d.Process != nil) || (i > 0 && len(d.Functions) > 0) {
						t.Errorf("rank %d seq %d chunk %d: process %v, %d functions", k.rank, k.seq, d.Chunk, d.Process != nil, len(d.Functions))
					}
					nodes += len(d.Nodes)
					for _, p := range d.Peers {
						peers[p.Peer] = true
					}
				}
				// A live snapshot may be taken before a rank met all its
				// peers (a loaded machine delays the job); the final one not.
				// The start report (seq 0) may come before any traffic. No
				// node rows: the agent knows no other rank's node.
				if nodes != 0 || (ds[0].Final && len(peers) < 2) || (k.seq > 0 && len(peers) < 1) {
					t.Errorf("rank %d seq %d: %d nodes, %d peers over the chunks", k.rank, k.seq, nodes, len(peers))
				}
				if ds[0].Final {
					finals[k.rank]++
				} else {
					live[k.rank]++
				}
			}
			for r := uint32(0); r < agentRanks; r++ {
				if finals[r] != 1 || live[r] < 2 {
					t.Errorf("rank %d: %d final and %d live snapshots", r, finals[r], live[r])
				}
			}
			if chunked == 0 {
				t.Error("no snapshot was chunked")
			}
		})
	}
}

// TestAgentReportPhase: each rank reports once at its start (the daemon
// learns every rank's node before it places traffic to it), then the ranks
// of a job spread their live reports over the interval, rank r of n
// reporting (r + 1/2) / n of an interval after MPI_Init, then every
// interval, instead of all at once.
func TestAgentReportPhase(t *testing.T) {
	buildAgent(t)
	m := impls(t)[0]
	needMPI(t, m)
	const interval = 4 * time.Second
	raw := runPatterns(t, m, "NETLOOM_INTERVAL=4", "PATTERNS_LINGER_MS=8000")
	first := map[uint32]time.Duration{} // each rank's first live snapshot, after its MPI_Init
	start := map[uint32]time.Duration{} // its start report, after its MPI_Init
	reports := map[uint32][]time.Duration{}
	for _, d := range decodeAll(t, raw) {
		if d.Final || d.Chunk != 0 {
			continue
		}
		at := time.Duration(d.TimeUnixNs - d.StartUnixNs)
		if d.Seq == 0 { // the start report: at once (after at most 0.5 s for a MUNGE credential)
			if at > time.Second || d.GetProcess().GetNode() != nodeOf(int(d.Rank)) {
				t.Errorf("rank %d: start report %v after MPI_Init, node %q", d.Rank, at, d.GetProcess().GetNode())
			}
			start[d.Rank] = at
			continue
		}
		reports[d.Rank] = append(reports[d.Rank], at)
		if f, ok := first[d.Rank]; !ok || at < f {
			first[d.Rank] = at
		}
	}
	for r := range uint32(agentRanks) {
		// The phase runs from the start report, sent as the agent starts
		// (MPI_Init's return, which a loaded machine delays).
		want := interval * time.Duration(2*r+1) / (2 * agentRanks)
		s, started := start[r]
		// Late by at most the time a loaded machine takes to wake a thread.
		if f, ok := first[r]; !ok || !started || f-s < want-50*time.Millisecond || f-s > want+400*time.Millisecond {
			t.Errorf("rank %d: first live report %v after its start report (%v after MPI_Init), want %v (all: %v)", r, f-s, s, want, reports[r])
		}
		if len(reports[r]) < 2 {
			t.Errorf("rank %d: live reports at %v, want one every %v", r, reports[r], interval)
		}
	}
}

// TestAgentDaemonAbsent runs a job whose daemon address is unreachable or
// unresolvable: it finishes normally, prints the same, and its profile has
// the same traffic as with no daemon at all.
func TestAgentDaemonAbsent(t *testing.T) {
	buildAgent(t)
	m := impls(t)[0]
	needMPI(t, m)
	prog := compile(t, m, "testdata/mpi/patterns.c")
	plain := runJob(t, m, agentRanks, "", nil, nil, prog)
	var profiles [][]*agentpb.Datagram
	for _, daemon := range []string{"", "127.0.0.1:9", "no-such-host.invalid:9"} {
		out := t.TempDir()
		env := []string{"NETLOOM_OUTPUT=" + out, "NETLOOM_INTERVAL=0.1", "PATTERNS_LINGER_MS=300", "NETLOOM_DAEMON_FILE=/nonexistent"}
		if daemon != "" {
			env = append(env, "NETLOOM_DAEMON="+daemon)
		}
		stdout := runJob(t, m, agentRanks, m.lib, env, nil, prog)
		if stdout != plain {
			t.Errorf("daemon %q: output %q, without the agent %q", daemon, stdout, plain)
		}
		profiles = append(profiles, readProfiles(t, out, agentRanks))
	}
	for i := 1; i < len(profiles); i++ {
		for r := range profiles[i] {
			a, b := profiles[0][r], profiles[i][r]
			for j := range a.Peers {
				if j >= len(b.Peers) || !proto.Equal(a.Peers[j], b.Peers[j]) {
					// the linger loop's broadcasts depend on timing: compare point-to-point only
					if j >= len(b.Peers) || tr(a.Peers[j].P2P) != tr(b.Peers[j].P2P) || tr(a.Peers[j].Rma) != tr(b.Peers[j].Rma) {
						t.Errorf("run %d rank %d: peers differ: %v vs %v", i, r, a.Peers, b.Peers)
						break
					}
				}
			}
		}
	}
}

// TestAgentTopPeers runs a job whose ranks have traffic with more peers than
// NETLOOM_PEER_LIMIT: the live reports carry only the top NETLOOM_TOP_PEERS
// peers, marked truncated (and no node rows: the agent knows no other
// rank's node); the offline profile keeps every peer.
func TestAgentTopPeers(t *testing.T) {
	buildAgent(t)
	m := impls(t)[0]
	needMPI(t, m)
	out := t.TempDir()
	raw := runPatterns(t, m, "NETLOOM_OUTPUT="+out, "NETLOOM_PEER_LIMIT=2", "NETLOOM_TOP_PEERS=1")
	finals := 0
	for _, d := range decodeAll(t, raw) {
		if !d.Final {
			continue
		}
		finals++
		right := (d.Rank + 1) % agentRanks // the ring's bytes make it the top peer
		if !d.PeersTruncated || len(d.Peers) != 1 || d.Peers[0].Peer != right || len(d.Nodes) != 0 {
			t.Errorf("rank %d: truncated=%v peers=%v nodes=%d", d.Rank, d.PeersTruncated, d.Peers, len(d.Nodes))
		}
	}
	if finals != agentRanks {
		t.Errorf("%d final reports, want %d", finals, agentRanks)
	}
	for _, d := range readProfiles(t, out, agentRanks) {
		if d.PeersTruncated || len(d.Peers) < 3 {
			t.Errorf("rank %d profile: truncated=%v, %d peers", d.Rank, d.PeersTruncated, len(d.Peers))
		}
	}
}

// TestAgentThreadMultiple counts messages sent concurrently by 4 threads per
// rank under MPI_THREAD_MULTIPLE (relaxed atomic increments, communicator
// translations created concurrently): nothing may be lost.
func TestAgentThreadMultiple(t *testing.T) {
	buildAgent(t)
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			needMPI(t, m)
			prog := compile(t, m, "testdata/mpi/threads.c")
			out := t.TempDir()
			runJob(t, m, agentRanks, m.lib, []string{"NETLOOM_OUTPUT=" + out}, nil, prog)
			const msgs = 4 * 500
			for r, d := range readProfiles(t, out, agentRanks) {
				var right *agentpb.PeerTraffic
				for _, p := range d.Peers {
					if int(p.Peer) == (r+1)%agentRanks {
						right = p
					}
				}
				if got := tr(right.GetP2P()); got != (traffic{8 * msgs, msgs}) || len(right.GetSizeHistogram()) != 5 || right.GetSizeHistogram()[4] != msgs {
					t.Errorf("rank %d -> right: %+v, histogram %v; want %d messages of 8 bytes", r, got, right.GetSizeHistogram(), msgs)
				}
				for _, f := range d.Functions {
					if f.Name == "MPI_Isend" && f.Calls != msgs {
						t.Errorf("rank %d: MPI_Isend called %d times, want %d", r, f.Calls, msgs)
					}
				}
			}
		})
	}
}

// monitoringFiles reads Open MPI's monitoring output files prof.<rank>.prof
// of np ranks, each as its lines sorted (the order of its sections is Open
// MPI's, the order of lines within one follows hash tables).
func monitoringFiles(t *testing.T, dir string, np int) []string {
	t.Helper()
	out := make([]string, np)
	for r := range np {
		// Open MPI writes the communicators' sections (a D line, then its
		// O2A, A2O and A2A lines) in its hash table's order, which varies
		// from run to run: each section is compared whole, in sorted order.
		var items []string
		for _, l := range monitoringLines(t, dir, r) {
			if k := len(items) - 1; k >= 0 && strings.HasPrefix(items[k], "D\t") &&
				(strings.HasPrefix(l, "O2A") || strings.HasPrefix(l, "A2O") || strings.HasPrefix(l, "A2A")) {
				items[k] += "\n" + l
				continue
			}
			items = append(items, l)
		}
		sort.Strings(items)
		out[r] = strings.Join(items, "\n")
	}
	return out
}

// monitoringLines reads rank r's monitoring output file, prof.<r>.prof.
func monitoringLines(t *testing.T, dir string, r int) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("prof.%d.prof", r)))
	if err != nil {
		t.Fatalf("Open MPI wrote no monitoring file for rank %d: %v", r, err)
	}
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

// TestAgentLeavesMonitoringAlone runs the patterns with Open MPI's own
// monitoring writing its files, without the agent and with it (live and
// offline, its defaults: MPI_T reading is off when the output is asked
// for, since Open MPI writes none with the agent's pvar handles): every line of every rank's file (E, I, S, R,
// C, D, O2A, A2O, A2A) must be the same. The agent makes no MPI call that
// moves data: not in MPI_Init (node names and the job id come from the
// environment), not later.
func TestAgentLeavesMonitoringAlone(t *testing.T) {
	buildAgent(t)
	m := impls(t)[0]
	needMPI(t, m)
	prog := compile(t, m, "testdata/mpi/patterns.c")
	addr, got, stop := listen(t)
	defer stop()
	run := func(lib string, env ...string) []string {
		mon := t.TempDir()
		runJob(t, m, agentRanks, lib, env, []string{"pml_monitoring_enable", "2", "pml_monitoring_enable_output", "3",
			"pml_monitoring_filename", filepath.Join(mon, "prof")}, prog, filepath.Join(t.TempDir(), "io.dat"))
		return monitoringFiles(t, mon, agentRanks)
	}
	without := run("")
	with := run(m.lib, "NETLOOM_DAEMON="+addr, "NETLOOM_INTERVAL=0.2", "NETLOOM_OUTPUT="+t.TempDir()) // the defaults
	if !strings.Contains(without[0], "E\t") && !strings.Contains(without[0], "E ") {
		t.Fatalf("rank 0's monitoring file has no E lines:\n%s", without[0])
	}
	for r := range agentRanks {
		if with[r] != without[r] {
			t.Errorf("rank %d: Open MPI's monitoring differs with the agent:\nwithout:\n%s\nwith:\n%s", r, without[r], with[r])
		}
	}
	if len(got()) == 0 {
		t.Error("the agent sent no datagram: it did not run")
	}
}

// skewedLine is skewed.c's own timing of its calls.
var skewedLine = regexp.MustCompile(`skewed rank (\d+) wait ([0-9.]+) recv ([0-9.]+) allreduce ([0-9.]+)`)

// TestAgentTimesSkewedCalls runs skewed.c (many short waits, a few long ones)
// under each MPI while two busy loops load both cores, with the default
// sampling and with every call timed: the agent's time in MPI_Wait, MPI_Recv
// and MPI_Allreduce must be within 10% (or 1 ms) of what the program measured
// around the same calls with MPI_Wtime, and each rank's MPI time at most its
// wall time. A sample of heavy-tailed waits scaled up (the old default)
// multiplied one long wait by 32.
func TestAgentTimesSkewedCalls(t *testing.T) {
	buildAgent(t)
	for i := 0; i < 2; i++ { // CPU stress: a busy loop per core
		busy := exec.Command("sh", "-c", "while :; do :; done")
		if err := busy.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = busy.Process.Kill(); _ = busy.Wait() })
	}
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			needMPI(t, m)
			prog := compile(t, m, "testdata/mpi/skewed.c")
			for _, sample := range []string{"", "1"} {
				out := t.TempDir()
				env := []string{"NETLOOM_OUTPUT=" + out}
				if sample != "" {
					env = append(env, "NETLOOM_TIME_SAMPLE="+sample)
				}
				stdout := runJob(t, m, agentRanks, m.lib, env, nil, prog, "1000")
				own := map[int][3]float64{}
				for _, f := range skewedLine.FindAllStringSubmatch(stdout, -1) {
					r, _ := strconv.Atoi(f[1])
					var v [3]float64
					for k := range v {
						v[k], _ = strconv.ParseFloat(f[2+k], 64)
					}
					own[r] = v
				}
				if len(own) != agentRanks {
					t.Fatalf("program output: %s", stdout)
				}
				for r, d := range readProfiles(t, out, agentRanks) {
					p := d.GetProcess()
					if p.GetMpiSeconds() > p.GetWallSeconds() {
						t.Errorf("NETLOOM_TIME_SAMPLE=%q rank %d: MPI %.6f s > wall %.6f s", sample, r, p.GetMpiSeconds(), p.GetWallSeconds())
					}
					fns := map[string]float64{}
					for _, f := range d.Functions {
						fns[f.Name] = float64(f.TimeNs) / 1e9
					}
					for k, name := range []string{"MPI_Wait", "MPI_Recv", "MPI_Allreduce"} {
						want, got := own[r][k], fns[name]
						if diff := math.Abs(got - want); diff > 0.1*want && diff > 1e-3 {
							t.Errorf("NETLOOM_TIME_SAMPLE=%q rank %d: %s %.6f s, the program measured %.6f s", sample, r, name, got, want)
						}
					}
				}
			}
		})
	}
}
