package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protodelim"

	"github.com/netloom/netloom/internal/gpupath"
	"github.com/netloom/netloom/internal/ingest/agentpb"
)

// writeProfile writes one final snapshot per rank as the agent writes its
// offline profile: DIR/rank-N.pb, varint-length-prefixed Datagrams.
func writeProfile(t *testing.T, dir string, ranks []*agentpb.Datagram) {
	t.Helper()
	for _, d := range ranks {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("rank-%d.pb", d.Rank)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := protodelim.MarshalTo(f, d); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// rankSnapshot is rank's final snapshot of a job of world ranks, on node.
func rankSnapshot(job string, rank, world int, node string, fns []*agentpb.FunctionStat, gpu *agentpb.Gpu) *agentpb.Datagram {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return &agentpb.Datagram{Version: 1, JobId: job, Rank: uint32(rank), WorldSize: uint32(world), Chunks: 1, Final: true,
		StartUnixNs: start.UnixNano(), TimeUnixNs: start.Add(10 * time.Second).UnixNano(),
		Process:   &agentpb.Process{Node: node, Host: node, Pid: uint32(100 + rank), User: "alice", Program: "gpuapp", WallSeconds: 10, MpiSeconds: 1},
		Functions: fns, Gpu: gpu}
}

// fieldsOf returns the fields of the first line of out whose fields start
// with prefix, or nil.
func fieldsOf(out string, prefix ...string) []string {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= len(prefix) && slices.Equal(f[:len(prefix)], prefix) {
			return f
		}
	}
	return nil
}

// TestReportGPU: the report of a GPU job's profile prints exactly the
// bytes, messages, calls and times its ranks' GPU sections carried.
//
// Ranks 0 and 1 on node g1, rank 2 on g2. Rank 0 sends 8192 B in 2
// messages from device memory to rank 1, which receives them into device
// memory (D->D, intra-node); and 3000 B in 3 messages from pinned memory
// to rank 2, which receives 1000 B (1) into pageable and 2000 B (2) into
// managed memory (the sender used host memory alone, so H->H 1000 B and
// H->D 2000 B exactly, inter-node). Ranks 0 and 1 ran ten 1 MiB NCCL
// all-reduces (5 ms and 7 ms in all).
func TestReportGPU(t *testing.T) {
	dir := t.TempDir()
	traffic := func(b, m uint64) *agentpb.Traffic { return &agentpb.Traffic{Bytes: b, Msgs: m} }
	const comm = 0xfedcba9876543210
	allreduce := func(rank uint32, ns uint64) []*agentpb.NcclOp {
		return []*agentpb.NcclOp{{Comm: comm, CommRank: rank, CommSize: 2, Name: "AllReduce", Algorithm: "RING", Protocol: "SIMPLE", Calls: 10, Bytes: 10 << 20, TimeNs: ns}}
	}
	writeProfile(t, dir, []*agentpb.Datagram{
		rankSnapshot("gpujob", 0, 3, "g1", []*agentpb.FunctionStat{
			{Name: "MPI_Send", Calls: 5, TimeNs: 1e6, BytesSent: 11192},
			{Name: "ncclAllReduce", Calls: 10, TimeNs: 5e6, BytesSent: 10 << 20},
		}, &agentpb.Gpu{Probed: true,
			Functions: []*agentpb.GpuFunction{{Name: "MPI_Send", Send: &agentpb.BufferKinds{Pinned: traffic(3000, 3), Device: traffic(8192, 2)}}},
			Peers: []*agentpb.GpuPeer{{Peer: 1, SentFrom: &agentpb.BufferKinds{Device: traffic(8192, 2)}},
				{Peer: 2, SentFrom: &agentpb.BufferKinds{Pinned: traffic(3000, 3)}}},
			NcclOps: allreduce(0, 5e6), NcclVersion: "2.28.9", NcclProfilerInterface: 5}),
		rankSnapshot("gpujob", 1, 3, "g1", []*agentpb.FunctionStat{
			{Name: "MPI_Recv", Calls: 2, TimeNs: 2e6, BytesReceived: 8192},
			{Name: "ncclAllReduce", Calls: 10, TimeNs: 7e6, BytesSent: 10 << 20},
		}, &agentpb.Gpu{Probed: true,
			Functions: []*agentpb.GpuFunction{{Name: "MPI_Recv", Recv: &agentpb.BufferKinds{Device: traffic(8192, 2)}}},
			Peers:     []*agentpb.GpuPeer{{Peer: 0, ReceivedInto: &agentpb.BufferKinds{Device: traffic(8192, 2)}}},
			NcclOps:   allreduce(1, 7e6), NcclVersion: "2.28.9", NcclProfilerInterface: 5}),
		rankSnapshot("gpujob", 2, 3, "g2", []*agentpb.FunctionStat{{Name: "MPI_Recv", Calls: 3, TimeNs: 3e6, BytesReceived: 3000}},
			&agentpb.Gpu{Probed: true,
				Functions: []*agentpb.GpuFunction{{Name: "MPI_Recv", Recv: &agentpb.BufferKinds{Pageable: traffic(1000, 1), Managed: traffic(2000, 2)}}},
				Peers:     []*agentpb.GpuPeer{{Peer: 0, ReceivedInto: &agentpb.BufferKinds{Pageable: traffic(1000, 1), Managed: traffic(2000, 2)}}}}),
	})
	out, errOut, code := netloom(t, "report", dir)
	if code != 0 {
		t.Fatalf("netloom report: exit %d: %s", code, errOut)
	}
	for _, want := range []struct{ prefix, rest []string }{
		// The paths table: path, where, bytes, messages, split.
		{[]string{"D->D", "intra-node"}, []string{"8192", "2", "exact"}},
		{[]string{"H->H", "inter-node"}, []string{"1000", "1", "exact"}},
		{[]string{"H->D", "inter-node"}, []string{"2000", "2", "exact"}},
		// Buffer kinds per function: ranks, then bytes/buffers sent from
		// pageable, pinned, device, managed memory, then received into them.
		{[]string{"MPI_Send", "1", "0/0"}, []string{"3000/3", "8192/2", "0/0", "0/0", "0/0", "0/0", "0/0"}},
		{[]string{"MPI_Recv", "2", "0/0"}, []string{"0/0", "0/0", "0/0", "1000/1", "0/0", "8192/2", "2000/2"}},
		// The NCCL operations: communicator, size, operation, algorithm,
		// protocol, ranks, calls, bytes, seconds.
		{[]string{"fedcba9876543210"}, []string{"2", "AllReduce", "RING", "SIMPLE", "2", "20", fmt.Sprint(20 << 20), "0.012000"}},
		// The functions list has the NCCL ranks' rows as they came.
		{[]string{"ncclAllReduce"}, []string{"20", "0.0120"}},
	} {
		f := fieldsOf(out, want.prefix...)
		got := f[min(len(f), len(want.prefix)):]
		if f == nil || !slices.Equal(got[:min(len(got), len(want.rest))], want.rest) {
			t.Errorf("report line %v: got %v, want %v", want.prefix, f, want.rest)
		}
	}
	for _, want := range []string{
		"GPU buffers (agent buffer probe (cuPointerGetAttributes); 3 of 3 ranks probed)",
		"NCCL operations (NCCL profiler plugin (libnetloom-nccl.so); 2 ranks; NCCL 2.28.9; profiler interface v5)",
		"network bytes per peer: none reported; link attribution: not reported by NCCL's transport: links not attributed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "-> receiver's\n"); n != 1 || fieldsOf(out, "H->?") != nil || fieldsOf(out, "D->H") != nil {
		t.Errorf("paths that carried nothing are listed:\n%s", out)
	}

	// --json: the same figures in the API's shape.
	out, errOut, code = netloom(t, "report", dir, "--json")
	if code != 0 {
		t.Fatalf("netloom report --json: exit %d: %s", code, errOut)
	}
	var rep struct {
		GPU gpupath.Summary `json:"gpu"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	b := rep.GPU.Buffers
	if len(b.PathTotals) != 3 || b.PathTotals[0].Path != gpupath.HH || b.PathTotals[0].Bytes != 1000 || b.PathTotals[2].Path != gpupath.DD ||
		b.PathTotals[2].Msgs != 2 || b.PairsTotal != 2 || b.Pairs[0].From != 0 || b.Pairs[0].To != 1 || !b.Pairs[1].Exact {
		t.Errorf("report JSON's buffers: %+v", b)
	}
	if ops := rep.GPU.NCCL.Ops; len(ops) != 1 || ops[0].Bytes != 20<<20 || ops[0].TimeNS != 12e6 || ops[0].Calls != 20 {
		t.Errorf("report JSON's NCCL ops: %+v", ops)
	}
}

// A job without CUDA: one line saying its buffers were not probed, and no
// NCCL section.
func TestReportNoGPU(t *testing.T) {
	dir := t.TempDir()
	writeProfile(t, dir, []*agentpb.Datagram{
		rankSnapshot("cpujob", 0, 2, "c1", []*agentpb.FunctionStat{{Name: "MPI_Send", Calls: 1, BytesSent: 8}}, nil),
		rankSnapshot("cpujob", 1, 2, "c1", []*agentpb.FunctionStat{{Name: "MPI_Recv", Calls: 1, BytesReceived: 8}}, nil),
	})
	out, errOut, code := netloom(t, "report", dir)
	if code != 0 {
		t.Fatalf("netloom report: exit %d: %s", code, errOut)
	}
	if strings.Count(out, "GPU buffers not probed: no rank had CUDA loaded\n") != 1 || strings.Contains(out, "NCCL operations") || strings.Contains(out, "H->") {
		t.Errorf("report of a CPU-only job:\n%s", out)
	}
}

// Both sides mixed: the report gives each side's figures and says the
// paths are not determined; a receiver that resolved no receive from its
// sender is "receiver unknown".
func TestReportGPUMixed(t *testing.T) {
	dir := t.TempDir()
	traffic := func(b, m uint64) *agentpb.Traffic { return &agentpb.Traffic{Bytes: b, Msgs: m} }
	writeProfile(t, dir, []*agentpb.Datagram{
		rankSnapshot("mixed", 0, 2, "m1", nil, &agentpb.Gpu{Probed: true, Peers: []*agentpb.GpuPeer{
			{Peer: 1, SentFrom: &agentpb.BufferKinds{Pageable: traffic(100, 1), Device: traffic(300, 3)}}}}),
		rankSnapshot("mixed", 1, 2, "m2", nil, &agentpb.Gpu{Probed: true, Peers: []*agentpb.GpuPeer{
			{Peer: 0, SentFrom: &agentpb.BufferKinds{Pinned: traffic(64, 1)}, ReceivedInto: &agentpb.BufferKinds{Pinned: traffic(200, 2), Managed: traffic(200, 2)}}}}),
	})
	out, errOut, code := netloom(t, "report", dir)
	if code != 0 {
		t.Fatalf("netloom report: exit %d: %s", code, errOut)
	}
	for _, want := range [][]string{
		{"H->?", "inter-node", "100", "1", "mixed:", "not", "determined"},
		{"H->?", "inter-node", "64", "1", "receiver", "unknown"},
		{"D->?", "inter-node", "300", "3", "mixed:", "not", "determined"},
		{"?->H", "inter-node", "200", "2", "mixed:", "not", "determined"},
		{"?->D", "inter-node", "200", "2", "mixed:", "not", "determined"},
	} {
		if f := fieldsOf(out, want...); f == nil {
			t.Errorf("report lacks the row %v:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "the paths are not determined") || fieldsOf(out, "H->H") != nil {
		t.Errorf("report:\n%s", out)
	}
}

// A bad rank file: netloom report names it and what is wrong on standard
// error and in the report, exits 0 and reports the other ranks; --json
// always has "warnings" ([] when none). No file readable: exit status 1,
// the error naming each file.
func TestReportBadRankFile(t *testing.T) {
	dir := t.TempDir()
	fns := []*agentpb.FunctionStat{{Name: "MPI_Barrier", Calls: 1}}
	writeProfile(t, dir, []*agentpb.Datagram{rankSnapshot("bad", 0, 2, "c1", fns, nil), rankSnapshot("bad", 1, 2, "c1", fns, nil)})

	out, errOut, code := netloom(t, "report", dir, "--json")
	var rep struct {
		Ranks    int
		Warnings []string `json:"warnings"`
	}
	if code != 0 || errOut != "" || json.Unmarshal([]byte(out), &rep) != nil || rep.Warnings == nil || len(rep.Warnings) != 0 ||
		!strings.Contains(out, `"warnings": []`) {
		t.Errorf("report --json of a good profile: exit %d, %q, warnings %#v", code, errOut, rep.Warnings)
	}

	file := filepath.Join(dir, "rank-1.pb")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b[:len(b)-10], 0o644); err != nil {
		t.Fatal(err)
	}
	if int(b[0]) != len(b)-1 {
		t.Fatalf("rank 1's record of %d bytes: not a 1-byte length prefix then the record", len(b))
	}
	bad := fmt.Sprintf("%s: cut short: the record says %d bytes, %d are there", file, len(b)-1, len(b)-11)
	missing := "1 of 2 ranks have no profile: rank 1 (bad file)"
	wantErr := "netloom report: warning: " + bad + "\nnetloom report: warning: " + missing + "\n"
	out, errOut, code = netloom(t, "report", dir)
	if code != 0 || errOut != wantErr || !strings.Contains(out, "\nwarning: "+bad+"\nwarning: "+missing+"\n") || fieldsOf(out, "0", "c1") == nil {
		t.Errorf("report: exit %d, stderr %q, want %q; stdout:\n%s", code, errOut, wantErr, out)
	}
	out, errOut, code = netloom(t, "report", dir, "--json")
	rep.Warnings = nil
	err = json.Unmarshal([]byte(out), &rep)
	if code != 0 || errOut != wantErr || err != nil || !slices.Equal(rep.Warnings, []string{bad, missing}) || rep.Ranks != 2 {
		t.Errorf("report --json: exit %d, stderr %q, warnings %q (%v)", code, errOut, rep.Warnings, err)
	}

	if err := os.Remove(filepath.Join(dir, "rank-0.pb")); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = netloom(t, "report", dir)
	if want := "netloom report: " + dir + ": no rank's profile could be read: " + bad + "\n"; code != 1 || out != "" || errOut != want {
		t.Errorf("report of no readable file: exit %d, stdout %q, stderr %q, want %q", code, out, errOut, want)
	}
}

// TestReportWall: the report's wall time is the job's (the longest rank),
// not the sum over ranks, which it gives apart as rank-seconds; the MPI
// share is the mean of each rank's (issue 28: "Wall 169.6 s" for a 21 s
// job).
func TestReportWall(t *testing.T) {
	dir := t.TempDir()
	var ranks []*agentpb.Datagram
	for r, wall := range []float64{19.5, 21.25, 20, 18} {
		d := rankSnapshot("walljob", r, 4, "w1", []*agentpb.FunctionStat{{Name: "MPI_Barrier", Calls: 1}}, nil)
		d.Process.WallSeconds, d.Process.MpiSeconds = wall, wall/4
		ranks = append(ranks, d)
	}
	writeProfile(t, dir, ranks)
	out, errOut, code := netloom(t, "report", dir)
	if code != 0 {
		t.Fatalf("netloom report: exit %d: %s", code, errOut)
	}
	// 19.5 + 21.25 + 20 + 18 = 78.75 rank-seconds, MPI a quarter of each
	want := "Wall 21.250s (the longest rank; 78.750 rank-seconds over 4 ranks), MPI 19.688s in all ranks (25.0% of their wall time, the mean over ranks)"
	if !strings.Contains(out, want) {
		t.Errorf("report's wall line, want %q in:\n%s", want, out)
	}
}
