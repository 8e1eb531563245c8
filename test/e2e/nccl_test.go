package e2e

// End-to-end tests of the NCCL profiler plugin (agent/nccl,
// bin/lib/libnetloom-nccl.so) without a GPU or NCCL: agent/nccl/test/driver.c
// stands in for NCCL 2.28, loading the plugin and calling its
// ncclProfiler_v5 or ncclProfiler_v4 with descriptors laid out as NCCL passes
// them, for a known set of operations, proxy steps and network events on two
// ranks. What the plugin reports is checked exactly: in the profile files
// (NETLOOM_OUTPUT) and in a daemon's API, where the operations show as
// "ncclAllReduce" & co. beside MPI functions.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protodelim"

	"github.com/netloom/netloom/internal/ingest/agentpb"
)

// buildNCCLDriver compiles agent/nccl/test/driver.c (plain C: libc and
// libdl) and returns the binary.
func buildNCCLDriver(t *testing.T) string {
	t.Helper()
	root := repoRoot(t)
	bin := filepath.Join(t.TempDir(), "driver")
	cmd := exec.Command("gcc", "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-I"+filepath.Join(root, "agent/nccl"),
		"-rdynamic", "-o", bin, filepath.Join(root, "agent/nccl/test/driver.c"), "-ldl", "-lpthread")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gcc driver.c: %v\n%s", err, out)
	}
	return bin
}

// ncclEnv is this process's environment without what would name another
// job, rank or daemon to the plugin, plus env.
func ncclEnv(env ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "NETLOOM_"), strings.HasPrefix(k, "SLURM"), k == "RANK", k == "WORLD_SIZE",
			k == "TORCHELASTIC_RUN_ID", k == "XDG_RUNTIME_DIR":
			continue
		}
		out = append(out, kv)
	}
	return append(append(out, "NETLOOM_MUNGE=0"), env...)
}

// runDriver runs one driver process and returns its stderr; it fails the
// test when the driver fails or the plugin said anything.
func runDriver(t *testing.T, drv, lib string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(drv, append([]string{lib}, args...)...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("driver %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "netloom:") {
			t.Errorf("driver %s: the plugin said %q", strings.Join(args, " "), line)
		}
	}
	return string(out)
}

// ncclRanks runs ranks 0 and 1 of the driver at once.
func ncclRanks(t *testing.T, drv, lib string, env []string, args ...string) {
	t.Helper()
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runDriver(t, drv, lib, append(ncclEnv(env...), fmt.Sprintf("RANK=%d", r), "WORLD_SIZE=2"), args...)
		}()
	}
	wg.Wait()
}

type ncclFn struct{ calls, sent, received uint64 }

// checkNCCLProfile checks rank r's profile against the driver's figures:
// net says whether its network events were sent (else the per-peer bytes
// come from the proxy's steps).
func checkNCCLProfile(t *testing.T, d *agentpb.Datagram, job string, r int, iface uint32, net bool) {
	t.Helper()
	peer := uint32(1 - r)
	if d.JobId != job || d.Rank != uint32(r) || d.WorldSize != 2 || !d.Final || d.Chunk != 0 || d.Chunks != 1 || d.Version != 1 {
		t.Errorf("rank %d: header job %q rank %d of %d final %v chunk %d/%d version %d", r, d.JobId, d.Rank, d.WorldSize,
			d.Final, d.Chunk, d.Chunks, d.Version)
	}
	p := d.GetProcess()
	if p.GetMpiLibrary() != "NCCL 2.28.9" || p.GetProgram() != "driver" || p.GetPid() == 0 || p.GetNode() == "" || p.GetWallSeconds() <= 0 {
		t.Errorf("rank %d: process %v", r, p)
	}

	fns := map[string]ncclFn{}
	var allReduceNS uint64
	for _, f := range d.Functions {
		fns[f.Name] = ncclFn{f.Calls, f.BytesSent, f.BytesReceived}
		if f.Name == "ncclAllReduce" {
			allReduceNS = f.TimeNs
		}
	}
	want := map[string]ncclFn{
		"ncclAllReduce": {3, 3 << 20, 0}, // 3 x 262144 float
		"ncclBroadcast": {2, 2000, 0},
		"ncclSend":      {2, 32768, 0},
		"ncclRecv":      {2, 0, 32768},
		"ncclAllGather": {1, 4096, 0},
	}
	if fmt.Sprint(fns) != fmt.Sprint(want) {
		t.Errorf("rank %d: functions %v, want %v", r, fns, want)
	}
	// the first AllReduce's kernel channel stopped 20 ms after it started
	if allReduceNS < 20e6 || allReduceNS > 5e9 {
		t.Errorf("rank %d: ncclAllReduce took %d ns, want 20 ms and more", r, allReduceNS)
	}

	g := d.GetGpu()
	if g.GetNcclVersion() != "2.28.9" || g.GetNcclProfilerInterface() != iface || g.GetNcclNetEvents() != net || g.GetProbed() {
		t.Errorf("rank %d: gpu version %q interface %d net events %v probed %v", r, g.GetNcclVersion(),
			g.GetNcclProfilerInterface(), g.GetNcclNetEvents(), g.GetProbed())
	}
	var ops []string
	for _, o := range g.GetNcclOps() {
		ops = append(ops, fmt.Sprintf("%x/%d/%d %s %s %s: %d calls %d bytes", o.Comm, o.CommRank, o.CommSize, o.Name,
			o.Algorithm, o.Protocol, o.Calls, o.Bytes))
		if o.Name == "AllReduce" && o.TimeNs != allReduceNS {
			t.Errorf("rank %d: AllReduce row took %d ns, the function %d", r, o.TimeNs, allReduceNS)
		}
	}
	sort.Strings(ops)
	wantOps := []string{
		fmt.Sprintf("a11ce/%d/2 AllReduce RING SIMPLE: 3 calls 3145728 bytes", r),
		fmt.Sprintf("a11ce/%d/2 Broadcast TREE LL: 2 calls 2000 bytes", r),
		fmt.Sprintf("a11ce/%d/2 Recv  : 2 calls 32768 bytes", r),
		fmt.Sprintf("a11ce/%d/2 Send  : 2 calls 32768 bytes", r),
		"b0b/0/1 AllGather RING LL: 1 calls 4096 bytes",
	}
	sort.Strings(wantOps)
	if strings.Join(ops, "\n") != strings.Join(wantOps, "\n") {
		t.Errorf("rank %d: nccl_ops\n%s\nwant\n%s", r, strings.Join(ops, "\n"), strings.Join(wantOps, "\n"))
	}

	// Per peer. Network events: each AllReduce sends 4 steps of 2 IB
	// work requests of 32 KiB and receives 4 socket events of 64 KiB; each
	// Send one IB request of 16 KiB, each Recv one socket event of 16 KiB.
	// Proxy steps: 4 of 64 KiB each way per AllReduce, one of 16 KiB per
	// Send and Recv. Nothing from the ignored events (another process's
	// proxy operation, a peer outside the communicator, payloads missing
	// or unknown, forged handles).
	sent, recv, collMsgs := traffic{819200, 14}, traffic{819200, 14}, uint64(12)
	if net {
		sent, collMsgs = traffic{819200, 26}, 24
	}
	var peers []string
	for _, np := range g.GetNcclPeers() {
		peers = append(peers, fmt.Sprintf("%x/%d sent %v received %v", np.Comm, np.Peer, tr(np.Sent), tr(np.Received)))
	}
	if want := fmt.Sprintf("a11ce/%d sent %v received %v", peer, sent, recv); strings.Join(peers, "; ") != want {
		t.Errorf("rank %d: nccl_peers %q, want %q", r, peers, want)
	}
	// the 2-rank communicator numbers its ranks as the job: peer rows, by
	// the operation each transfer was for
	if len(d.Peers) != 1 || d.Peers[0].Peer != peer || tr(d.Peers[0].Coll) != (traffic{786432, collMsgs}) ||
		tr(d.Peers[0].P2P) != (traffic{32768, 2}) || d.Peers[0].Rma != nil {
		t.Errorf("rank %d: peer rows %v", r, d.Peers)
	}
}

// ncclJob is what the daemon's API says of a job, ncclProcess of a rank.
type ncclJob struct {
	Job struct {
		State        string
		Ranks        int
		Finalized    int
		MPILibrary   string `json:"mpi_library"`
		TrafficModel string `json:"traffic_model"`
	}
}

type ncclProcess struct {
	Process struct {
		Rank       int
		MPILibrary string `json:"mpi_library"`
		Functions  []struct {
			Name          string
			Calls         uint64
			TimeNS        uint64 `json:"time_ns"`
			BytesSent     uint64 `json:"bytes_sent"`
			BytesReceived uint64 `json:"bytes_received"`
		}
	}
}

// readNCCLProfiles reads DIR/<job>/rank-N.pb, N < np, by rank.
func readNCCLProfiles(t *testing.T, dir, job string, np int) []*agentpb.Datagram {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*", "rank-*.pb"))
	if len(files) != np {
		t.Fatalf("profile files %v, want %d", files, np)
	}
	out := make([]*agentpb.Datagram, np)
	for r := range np {
		f := filepath.Join(dir, job, fmt.Sprintf("rank-%d.pb", r))
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(fh)
		d := &agentpb.Datagram{}
		if err := protodelim.UnmarshalFrom(br, d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
			t.Errorf("%s: data after the one Datagram", f)
		}
		fh.Close()
		out[r] = d
	}
	return out
}

func TestNCCLPlugin(t *testing.T) {
	buildAgent(t)
	root := repoRoot(t)
	lib := filepath.Join(root, "bin/lib/libnetloom-nccl.so")
	drv := buildNCCLDriver(t)

	t.Run("exports", func(t *testing.T) {
		syms := definedSymbols(t, lib)
		if !syms["ncclProfiler_v5"] || !syms["ncclProfiler_v4"] {
			t.Errorf("ncclProfiler_v5/v4 not exported: %v", syms)
		}
		for s := range syms {
			if !strings.HasPrefix(s, "ncclProfiler_v") {
				t.Errorf("%s exported", s)
			}
		}
	})

	dir := t.TempDir()
	d, agent := serve(t, dir, nil, "--fabric", "sim:fat-tree:hosts=8,radix=8", "--db", filepath.Join(dir, "netloom.db"),
		"--agent-listen", "127.0.0.1:0", "--agent-address-file", "-")

	for _, tc := range []struct {
		name  string
		iface uint32
		mode  string
	}{{"v5", 5, "net"}, {"v4", 4, "proxy"}} {
		t.Run(tc.name, func(t *testing.T) {
			d := d.in(t)
			job := fmt.Sprintf("nccl-%s-%d", tc.name, time.Now().UnixNano())
			out := t.TempDir()
			ncclRanks(t, drv, lib, []string{"NETLOOM_DAEMON=" + agent, "NETLOOM_OUTPUT=" + out, "NETLOOM_JOB_ID=" + job,
				"NETLOOM_INTERVAL=0.1", "DRIVER_WAIT_MS=300"}, tc.name, tc.mode)
			for r, p := range readNCCLProfiles(t, out, job, 2) {
				checkNCCLProfile(t, p, job, r, tc.iface, tc.mode == "net")
			}

			// the daemon: the job, its ranks' NCCL operations beside MPI
			// functions, and their network bytes in the rank matrix
			var j ncclJob
			d.waitFor(func() bool {
				return d.get("/api/v1/jobs/"+job, &j) == 200 && j.Job.State == "finished" && j.Job.Finalized == 2
			}, "job "+job+" to finish with both ranks; drops:\n"+d.dropped())
			// the network bytes are what crossed the links: the daemon
			// attributes them as physical traffic
			if j.Job.Ranks != 2 || !strings.HasPrefix(j.Job.MPILibrary, "NCCL 2.28.9") || j.Job.TrafficModel != "physical" {
				t.Errorf("job %+v", j.Job)
			}
			for r := range 2 {
				var p ncclProcess
				if code := d.get(fmt.Sprintf("/api/v1/jobs/%s/processes/%d", job, r), &p); code != 200 {
					t.Fatalf("rank %d: %d", r, code)
				}
				got := map[string]string{}
				for _, f := range p.Process.Functions {
					got[f.Name] = fmt.Sprintf("%d calls %d sent %d received", f.Calls, f.BytesSent, f.BytesReceived)
					if f.Name == "ncclAllReduce" && f.TimeNS < 20e6 {
						t.Errorf("rank %d: ncclAllReduce %d ns", r, f.TimeNS)
					}
				}
				want := map[string]string{
					"ncclAllReduce": "3 calls 3145728 sent 0 received",
					"ncclBroadcast": "2 calls 2000 sent 0 received",
					"ncclSend":      "2 calls 32768 sent 0 received",
					"ncclRecv":      "2 calls 0 sent 32768 received",
					"ncclAllGather": "1 calls 4096 sent 0 received",
				}
				if fmt.Sprint(got) != fmt.Sprint(want) || p.Process.MPILibrary != "NCCL 2.28.9" || p.Process.Rank != r {
					t.Errorf("rank %d (%s): functions %v, want %v", p.Process.Rank, p.Process.MPILibrary, got, want)
				}
			}
			for class, want := range map[string]string{"coll": "[[0 786432] [786432 0]]", "p2p": "[[0 32768] [32768 0]]"} {
				var mx struct{ Matrix [][]uint64 }
				if d.get("/api/v1/jobs/"+job+"/matrix?level=rank&class="+class+"&metric=bytes", &mx) != 200 || fmt.Sprint(mx.Matrix) != want {
					t.Errorf("%s matrix %v, want %s", class, mx.Matrix, want)
				}
			}
		})
	}

	// A program that never finalizes its communicators: the plugin's
	// final report and profile come at exit.
	t.Run("exit", func(t *testing.T) {
		out := t.TempDir()
		job := fmt.Sprintf("nccl-exit-%d", time.Now().UnixNano())
		ncclRanks(t, drv, lib, []string{"NETLOOM_OUTPUT=" + out, "NETLOOM_JOB_ID=" + job, "DRIVER_NO_FINALIZE=1"}, "v5", "net")
		for r, p := range readNCCLProfiles(t, out, job, 2) {
			checkNCCLProfile(t, p, job, r, 5, true)
		}
	})

	// Four threads at once, then rings of event slots wrapped: every
	// operation, byte and network event counted.
	t.Run("stress", func(t *testing.T) {
		out := t.TempDir()
		job := fmt.Sprintf("nccl-stress-%d", time.Now().UnixNano())
		said := runDriver(t, drv, lib, ncclEnv("NETLOOM_OUTPUT="+out, "NETLOOM_JOB_ID="+job, "RANK=0", "WORLD_SIZE=2"), "v5", "stress")
		t.Log(strings.TrimSpace(said))
		p := readNCCLProfiles(t, out, job, 1)[0]
		const n = 82000
		if len(p.Functions) != 1 || p.Functions[0].Name != "ncclAllReduce" || p.Functions[0].Calls != n || p.Functions[0].BytesSent != n*1024 {
			t.Errorf("functions %v", p.Functions)
		}
		g := p.GetGpu()
		if len(g.GetNcclPeers()) != 1 || tr(g.NcclPeers[0].Sent) != (traffic{n * 1024, n}) || g.NcclPeers[0].Received != nil {
			t.Errorf("nccl_peers %v", g.GetNcclPeers())
		}
		if len(p.Peers) != 1 || p.Peers[0].Peer != 1 || tr(p.Peers[0].Coll) != (traffic{n * 1024, n}) {
			t.Errorf("peer rows %v", p.Peers)
		}
	})
}
