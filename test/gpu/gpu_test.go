// Package gpu holds the GPU check (issue 32): tests that read what
// test/gpu/run.sh left on a machine with a GPU and compare it with what its
// programs did. Without a GPU run (NETLOOM_GPU_CHECK unset, as in CI) each
// test is skipped with a message saying so; nothing is faked.
package gpu

import (
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/netloom/netloom/internal/gpupath"
	"github.com/netloom/netloom/internal/ingest"
	"github.com/netloom/netloom/internal/ingest/agentpb"
	"github.com/netloom/netloom/internal/store"
)

// checkDir is the folder run.sh wrote: paths/ (the MPI program's profile),
// cpu/ (a CPU-only job's), nccl/ (the PyTorch NCCL job's).
func checkDir(t *testing.T, sub string) string {
	d := os.Getenv("NETLOOM_GPU_CHECK")
	if d == "" {
		t.Skip("no GPU check run here: test/gpu/run.sh runs these tests on a machine with a GPU (NETLOOM_GPU_CHECK=DIR)")
	}
	return filepath.Join(d, sub)
}

// ranks reads every rank-N.pb under dir (one job folder below it).
func ranks(t *testing.T, dir string) map[uint32]*agentpb.Datagram {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*", "rank-*.pb"))
	if len(files) == 0 {
		t.Fatalf("no profile under %s", dir)
	}
	out := map[uint32]*agentpb.Datagram{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		l, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < l {
			t.Fatalf("%s: bad length prefix", f)
		}
		d := new(agentpb.Datagram)
		if err := proto.Unmarshal(b[n:n+int(l)], d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[d.Rank] = d
	}
	return out
}

func kind(b *agentpb.BufferKinds, k string) *agentpb.Traffic {
	var t *agentpb.Traffic
	if b != nil {
		t = map[string]*agentpb.Traffic{"pageable": b.Pageable, "pinned": b.Pinned, "device": b.Device, "managed": b.Managed}[k]
	}
	if t == nil {
		t = &agentpb.Traffic{}
	}
	return t
}

func gpuPeer(d *agentpb.Datagram, peer uint32) *agentpb.GpuPeer {
	for _, p := range d.GetGpu().GetPeers() {
		if p.Peer == peer {
			return p
		}
	}
	return &agentpb.GpuPeer{Peer: peer}
}

func gpuFn(d *agentpb.Datagram, name string) *agentpb.GpuFunction {
	for _, f := range d.GetGpu().GetFunctions() {
		if f.Name == name {
			return f
		}
	}
	return &agentpb.GpuFunction{Name: name}
}

func fn(d *agentpb.Datagram, name string) *agentpb.FunctionStat {
	for _, f := range d.Functions {
		if f.Name == name {
			return f
		}
	}
	return &agentpb.FunctionStat{Name: name}
}

// kinds prints a BufferKinds for messages.
func kinds(b *agentpb.BufferKinds) string {
	var s []string
	for _, k := range []string{"pageable", "pinned", "device", "managed"} {
		if t := kind(b, k); t.Bytes != 0 || t.Msgs != 0 {
			s = append(s, fmt.Sprintf("%s %d B/%d", k, t.Bytes, t.Msgs))
		}
	}
	return "{" + strings.Join(s, ", ") + "}"
}

// TestBufferPaths: paths.cu's bytes per pair and buffer kind, exactly.
func TestBufferPaths(t *testing.T) {
	r := ranks(t, checkDir(t, "paths"))
	if len(r) != 3 {
		t.Fatalf("%d ranks, want 3", len(r))
	}
	for rank, d := range r {
		if !d.GetGpu().GetProbed() {
			t.Fatalf("rank %d: buffers not probed (gpu section %v, probe error %q)", rank, d.Gpu != nil, d.GetGpu().GetProbeError())
		}
	}
	type side struct {
		from, to   uint32
		sent       bool // the sender's sent_from, else the receiver's received_into
		kind       string
		bytes, msg uint64
	}
	const k = 4
	want := []side{
		{0, 1, true, "pageable", k * 1000, k}, {0, 1, false, "pinned", k * 1000, k}, // H->H
		{2, 0, true, "pinned", k * 5000, k}, {2, 0, false, "managed", k * 5000, k}, // H->D
		{1, 2, true, "managed", k * 3000, k}, {1, 2, false, "pageable", k * 3000, k}, // D->H
		{0, 2, true, "managed", k * 7000, k}, {0, 2, false, "managed", k * 7000, k}, // D->D
		{1, 0, true, "device", 0, 1}, {1, 0, false, "device", 0, 1}, // D->D: the zero-count message, device memory
	}
	for _, w := range want {
		var got *agentpb.Traffic
		var where string
		b, m := w.bytes, w.msg
		if w.sent {
			got = kind(gpuPeer(r[w.from], w.to).SentFrom, w.kind)
			where = fmt.Sprintf("rank %d sent to %d from %s", w.from, w.to, w.kind)
		} else {
			got = kind(gpuPeer(r[w.to], w.from).ReceivedInto, w.kind)
			where = fmt.Sprintf("rank %d received from %d into %s", w.to, w.from, w.kind)
		}
		if got.Bytes != b || got.Msgs != m {
			t.Errorf("%s: %d bytes in %d messages, want %d in %d", where, got.Bytes, got.Msgs, b, m)
		}
	}
	for from, d := range r {
		for _, p := range d.GetGpu().GetPeers() {
			t.Logf("rank %d peer %d: sent_from %s received_into %s", from, p.Peer, kinds(p.SentFrom), kinds(p.ReceivedInto))
		}
	}
	var total uint64
	for _, d := range r {
		for _, p := range d.GetGpu().GetPeers() {
			for _, k := range []string{"pageable", "pinned", "device", "managed"} {
				total += kind(p.SentFrom, k).Bytes
			}
		}
	}
	// point-to-point only: the collectives count by function
	if want := uint64(k * (1000 + 5000 + 3000 + 7000)); total != want {
		t.Errorf("bytes sent over all pairs and kinds: %d, want %d", total, want)
	}

	// per function: buffers named and bytes by kind, against the
	// function's own counters
	fcheck := func(rank uint32, name string, sendKind, recvKind string, calls uint64) {
		t.Helper()
		g, f := gpuFn(r[rank], name), fn(r[rank], name)
		if sendKind != "" {
			if s := kind(g.Send, sendKind); s.Msgs != calls || s.Bytes != f.BytesSent {
				t.Errorf("rank %d %s: send buffers %s, want %d %s buffers of %d bytes (the function's bytes sent)", rank, name, kinds(g.Send), calls, sendKind, f.BytesSent)
			}
		}
		if recvKind != "" {
			if s := kind(g.Recv, recvKind); s.Msgs != calls || s.Bytes != f.BytesReceived {
				t.Errorf("rank %d %s: receive buffers %s, want %d %s buffers of %d bytes (the function's bytes received)", rank, name, kinds(g.Recv), calls, recvKind, f.BytesReceived)
			}
		}
	}
	fcheck(0, "MPI_Allreduce", "pageable", "pageable", 1)
	fcheck(1, "MPI_Allreduce", "pageable", "pageable", 1)
	fcheck(2, "MPI_Isend", "pinned", "", k)
	fcheck(2, "MPI_Irecv", "", "pageable", k)
	fcheck(1, "MPI_Recv", "", "pinned", k)
	if g := gpuFn(r[1], "MPI_Send"); kind(g.Send, "device").Msgs != 1 || kind(g.Send, "device").Bytes != 0 ||
		kind(g.Send, "managed").Msgs != k || kind(g.Send, "managed").Bytes != k*3000 {
		t.Errorf("rank 1 MPI_Send buffers %s, want 1 device of 0 bytes, %d managed of %d", kinds(g.Send), k, k*3000)
	}
	if g := gpuFn(r[0], "MPI_Send"); kind(g.Send, "pageable").Msgs != k || kind(g.Send, "managed").Msgs != k || kind(g.Send, "device").Msgs != 0 {
		t.Errorf("rank 0 MPI_Send buffers %s, want %d pageable, %d managed", kinds(g.Send), k, k)
	}
	if g := gpuFn(r[0], "MPI_Recv"); kind(g.Recv, "device").Msgs != 1 || kind(g.Recv, "managed").Msgs != k {
		t.Errorf("rank 0 MPI_Recv buffers %s, want 1 device, %d managed", kinds(g.Recv), k)
	}

	// the daemon's pairing of the two ends into paths, on this profile:
	// every pair exact, each path what paths.cu sent
	job, errs, err := ingest.ReadProfile(filepath.Join(checkDir(t, "paths"), "paths"))
	if err != nil || len(errs) > 0 {
		t.Fatalf("reading the profile: %v %v", err, errs)
	}
	got := map[string]store.Traffic{}
	for _, p := range gpupath.Summarize(job, -1).Buffers.PathTotals {
		if !p.Exact {
			t.Errorf("path %s %s: %s, want every pair exact", p.Path, p.Locality, p.Split)
		}
		got[p.Path] = p.Traffic
	}
	wantPaths := map[string]store.Traffic{
		gpupath.HH: {Bytes: k * 1000, Msgs: k}, gpupath.HD: {Bytes: k * 5000, Msgs: k},
		gpupath.DH: {Bytes: k * 3000, Msgs: k}, gpupath.DD: {Bytes: k * 7000, Msgs: k + 1},
	}
	if !maps.Equal(got, wantPaths) {
		t.Errorf("paths %v, want %v", got, wantPaths)
	}
}

// TestCPUOnly: a job without CUDA has no GPU section at all.
func TestCPUOnly(t *testing.T) {
	r := ranks(t, checkDir(t, "cpu"))
	for rank, d := range r {
		if d.Gpu != nil {
			t.Errorf("rank %d of a CPU-only job has a GPU section: %v", rank, d.Gpu)
		}
	}
}

// TestNCCL: the single-rank PyTorch job's NCCL operations (nccl_ops.py):
// each collective it issued, with its bytes, as far as NCCL tells the
// plugin. NCCL's own log (NCCL_DEBUG_SUBSYS=COLL, a line per call) is the
// independent count. NCCL 2.28.9 starts no profiler event at all for a
// one-rank communicator (it runs its collectives as a local copy): the
// plugin's NETLOOM_DEBUG line says how many events NCCL started; with none,
// the profile must hold no operation (nothing made up), and the operations
// are checked where NCCL sends events (e2e TestNCCLPlugin drives the plugin
// through NCCL's interface, in CI).
func TestNCCL(t *testing.T) {
	dir := checkDir(t, "nccl")
	r := ranks(t, dir)
	d, ok := r[0]
	if !ok || d.Gpu == nil {
		t.Fatalf("no rank 0 with a GPU section in the NCCL profile")
	}
	if d.Gpu.NcclVersion == "" || d.Gpu.NcclProfilerInterface != 5 {
		t.Errorf("NCCL version %q, profiler interface v%d; want the version and v5 (NCCL 2.28)", d.Gpu.NcclVersion, d.Gpu.NcclProfilerInterface)
	}
	log, err := os.ReadFile(filepath.Join(dir, "log.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// NCCL's count of the job's calls: 3 AllReduce of 1 Mi elements, 2
	// Broadcast of 256 Ki, 1 AllGather of 64 Ki (datatype 7: float32)
	for op, w := range map[string]struct{ calls, count int }{"AllReduce": {3, 1 << 20}, "Broadcast": {2, 1 << 18}, "AllGather": {1, 1 << 16}} {
		if n := strings.Count(string(log), fmt.Sprintf("NCCL INFO %s: opCount", op)); n != w.calls {
			t.Errorf("NCCL logged %d %s calls, want %d", n, op, w.calls)
		}
		if !strings.Contains(string(log), fmt.Sprintf("count %d datatype 7", w.count)) {
			t.Errorf("NCCL logged no %s of %d float32", op, w.count)
		}
	}
	_, events, found := strings.Cut(string(log), "netloom: NCCL events started, by type bit:")
	if !found {
		t.Fatal("no NETLOOM_DEBUG line of the plugin in the job's output")
	}
	events, _, _ = strings.Cut(events, "\n")
	if strings.TrimSpace(events) == "" {
		if len(d.Gpu.NcclOps) != 0 || len(d.Gpu.NcclPeers) != 0 {
			t.Errorf("NCCL started no event, yet the profile has %d operations and %d peers", len(d.Gpu.NcclOps), len(d.Gpu.NcclPeers))
		}
		t.Logf("NCCL %s (profiler v%d) ran the job's 6 collectives on a one-rank communicator and started no profiler event: the profile rightly has no operation", d.Gpu.NcclVersion, d.Gpu.NcclProfilerInterface)
		return
	}
	t.Logf("events NCCL started, by type bit:%s", events)
	got := map[string][2]uint64{} // op: calls, bytes
	var names []string
	for _, op := range d.Gpu.NcclOps {
		c := got[op.Name]
		got[op.Name] = [2]uint64{c[0] + op.Calls, c[1] + op.Bytes}
		t.Logf("comm %x rank %d/%d %s algo %q proto %q: %d calls, %d bytes, %d ns", op.Comm, op.CommRank, op.CommSize, op.Name, op.Algorithm, op.Protocol, op.Calls, op.Bytes, op.TimeNs)
	}
	for n := range got {
		names = append(names, n)
	}
	sort.Strings(names)
	t.Logf("NCCL %s, profiler interface v%d, ops %v", d.Gpu.NcclVersion, d.Gpu.NcclProfilerInterface, names)
	// nccl_ops.py: 3 all_reduce of 1 Mi float32, 2 broadcast of 256 Ki
	// float32, 1 all_gather of 64 Ki float32 per rank (one rank)
	want := map[string][2]uint64{
		"AllReduce": {3, 3 << 22},
		"Broadcast": {2, 2 << 20},
		"AllGather": {1, 1 << 18},
	}
	for op, w := range want {
		if g := got[op]; g != w {
			t.Errorf("%s: %d calls, %d bytes; want %d calls, %d bytes", op, g[0], g[1], w[0], w[1])
		}
	}
	for op, w := range want {
		if f := fn(d, "nccl"+op); f.Calls != w[0] || f.BytesSent != w[1] {
			t.Errorf("function nccl%s: %d calls, %d bytes; want %d, %d", op, f.Calls, f.BytesSent, w[0], w[1])
		}
	}
}
