package ingest

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/netloom/netloom/internal/ingest/agentpb"
	"github.com/netloom/netloom/internal/store"
)

// gpuSection is a rank's GPU section after k intervals: MPI_Send from
// device memory to rank 2, MPI_Recv into pinned memory from rank 0, and
// one NCCL all-reduce row.
func gpuSection(k uint64) *agentpb.Gpu {
	dev := &agentpb.Traffic{Bytes: 4096 * k, Msgs: 4 * k}
	pin := &agentpb.Traffic{Bytes: 1000 * k, Msgs: k}
	return &agentpb.Gpu{Probed: true,
		Functions: []*agentpb.GpuFunction{{Name: "MPI_Send", Send: &agentpb.BufferKinds{Device: dev}},
			{Name: "MPI_Recv", Recv: &agentpb.BufferKinds{Pinned: pin}}},
		// Out of order: the daemon keeps them by peer.
		Peers: []*agentpb.GpuPeer{{Peer: 2, SentFrom: &agentpb.BufferKinds{Device: dev}}, {Peer: 0, ReceivedInto: &agentpb.BufferKinds{Pinned: pin}}},
		NcclOps: []*agentpb.NcclOp{{Comm: 0xfedcba9876543210, CommRank: 1, CommSize: 4, Name: "AllReduce", Algorithm: "RING", Protocol: "SIMPLE",
			Calls: 10 * k, Bytes: 1 << 20 * k, TimeNs: 3e6 * k}},
		NcclVersion: "2.28.9", NcclProfilerInterface: 5,
		NcclPeers: []*agentpb.NcclPeer{{Comm: 0xfedcba9876543210, Peer: 2, Sent: &agentpb.Traffic{Bytes: 1 << 19 * k, Msgs: 8 * k}}}}
}

func marshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func withGPU(d *agentpb.Datagram, k uint64) *agentpb.Datagram {
	d.Gpu = gpuSection(k)
	return d
}

func TestDecodeGPU(t *testing.T) {
	lim := Limits{}.WithDefaults()
	valid := withGPU(snapshot("42", 1, 4, 0, false), 1)
	b := encode(t, valid)
	sameAsProto(t, b)
	d, err := Decode(b, lim)
	if err != nil {
		t.Fatalf("valid datagram with a GPU section rejected: %v", err)
	}
	if !proto.Equal(d.Gpu, valid.Gpu) {
		t.Fatalf("gpu section decoded as %v, want %v", d.Gpu, valid.Gpu)
	}
	// Sent as two fields 22, the sections merge, as proto.Unmarshal does.
	two := append(encode(t, snapshot("42", 1, 4, 0, false)),
		protowire.AppendBytes(protowire.AppendTag(nil, 22, protowire.BytesType), marshal(t, &agentpb.Gpu{Probed: true}))...)
	two = protowire.AppendBytes(protowire.AppendTag(two, 22, protowire.BytesType), marshal(t, &agentpb.Gpu{NcclVersion: "2.28.9"}))
	sameAsProto(t, two)
	if d, err := Decode(two, lim); err != nil || !d.Gpu.Probed || d.Gpu.NcclVersion != "2.28.9" {
		t.Fatalf("two gpu fields: %v, %v", d, err)
	}

	mod := func(f func(g *agentpb.Gpu, d *agentpb.Datagram)) []byte {
		d := proto.Clone(valid).(*agentpb.Datagram)
		f(d.Gpu, d)
		return encode(t, d)
	}
	// A malformed section: its bytes are not a Gpu message.
	bad := append(encode(t, snapshot("42", 1, 4, 0, false)), protowire.AppendBytes(protowire.AppendTag(nil, 22, protowire.BytesType), []byte{0x1a, 0x05, 0x0a})...)
	badUTF8 := append(encode(t, snapshot("42", 1, 4, 0, false)),
		protowire.AppendBytes(protowire.AppendTag(nil, 22, protowire.BytesType), protowire.AppendString(protowire.AppendTag(nil, 6, protowire.BytesType), "\xff"))...)
	for _, c := range []struct {
		name, reason, field string
		b                   []byte
	}{
		{"malformed", ReasonMalformed, "gpu (field 22)", bad},
		{"invalid UTF-8", ReasonMalformed, "gpu (field 22)", badUTF8},
		{"in chunk 1", ReasonChunk, "gpu", mod(func(g *agentpb.Gpu, d *agentpb.Datagram) {
			d.Process, d.Functions, d.Regions, d.Chunk, d.Chunks = nil, nil, nil, 1, 2
		})},
		{"too many functions", ReasonTooMany, "gpu.functions", mod(func(g *agentpb.Gpu, _ *agentpb.Datagram) {
			for range 1025 {
				g.Functions = append(g.Functions, &agentpb.GpuFunction{Name: "MPI_Send"})
			}
		})},
		{"function without a name", ReasonString, "gpu.functions[1].name", mod(func(g *agentpb.Gpu, _ *agentpb.Datagram) { g.Functions[1].Name = "" })},
		{"long function name", ReasonString, "gpu.functions[0].name", mod(func(g *agentpb.Gpu, _ *agentpb.Datagram) { g.Functions[0].Name = strings.Repeat("f", 257) })},
		{"long probe error", ReasonString, "gpu.probe_error", mod(func(g *agentpb.Gpu, _ *agentpb.Datagram) { g.ProbeError = strings.Repeat("e", 257) })},
		{"long NCCL version", ReasonString, "gpu.nccl_version", mod(func(g *agentpb.Gpu, _ *agentpb.Datagram) { g.NcclVersion = strings.Repeat("2", 257) })},
		{"more peers than ranks", ReasonTooMany, "gpu.peers", mod(func(g *agentpb.Gpu, _ *agentpb.Datagram) {
			g.Peers = append(g.Peers, &agentpb.GpuPeer{Peer: 1}, &agentpb.GpuPeer{Peer: 3}, &agentpb.GpuPeer{Peer: 3})
		})},
		{"peer out of world", ReasonPeer, "gpu.peers[1].peer 4", mod(func(g *agentpb.Gpu, _ *agentpb.Datagram) { g.Peers[1].Peer = 4 })},
		{"peer twice", ReasonPeer, "gpu.peers: peer 2 twice", mod(func(g *agentpb.Gpu, _ *agentpb.Datagram) { g.Peers[1].Peer = 2 })},
		{"too many NCCL ops", ReasonTooMany, "gpu.nccl_ops", mod(func(g *agentpb.Gpu, _ *agentpb.Datagram) {
			for range 4096 {
				g.NcclOps = append(g.NcclOps, &agentpb.NcclOp{Name: "Send"})
			}
		})},
		{"NCCL op without a name", ReasonString, "gpu.nccl_ops[0].name", mod(func(g *agentpb.Gpu, _ *agentpb.Datagram) { g.NcclOps[0].Name = "" })},
		{"long NCCL protocol", ReasonString, "gpu.nccl_ops[0]", mod(func(g *agentpb.Gpu, _ *agentpb.Datagram) { g.NcclOps[0].Protocol = strings.Repeat("p", 257) })},
		{"NCCL rank out of its communicator", ReasonValue, "gpu.nccl_ops[0]: comm_rank 4 of comm_size 4", mod(func(g *agentpb.Gpu, _ *agentpb.Datagram) { g.NcclOps[0].CommRank = 4 })},
	} {
		_, err := Decode(c.b, Limits{MaxBytes: 1 << 20}.WithDefaults())
		if got := reasonOf(err); got != c.reason || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: rejected as %q (%v), want %q naming %q", c.name, got, err, c.reason, c.field)
		}
	}
	// NCCL peer rows: bounded by their own limit, not by the world size.
	many := proto.Clone(valid).(*agentpb.Datagram)
	for range 100 {
		many.Gpu.NcclPeers = append(many.Gpu.NcclPeers, &agentpb.NcclPeer{Peer: 1000})
	}
	if _, err := Decode(encode(t, many), lim); err != nil {
		t.Errorf("100 NCCL peers of a 4-rank job: %v", err)
	}
	if _, err := Decode(encode(t, many), Limits{MaxNCCLPeers: 100}.WithDefaults()); reasonOf(err) != ReasonTooMany || !strings.Contains(err.Error(), "gpu.nccl_peers") {
		t.Errorf("101 NCCL peers, limit 100: %v", err)
	}
}

// A rank's GPU section is kept like its function rows: the latest
// snapshot's stands; a snapshot without one keeps the last; a bad one is
// dropped and counted.
func TestTrackerGPU(t *testing.T) {
	tr, _, _, _ := newTracker(Options{})
	now := t0
	for seq := uint64(0); seq < 3; seq++ {
		for r := range 4 {
			d := snapshot("g", r, 4, seq, false)
			if r == 1 && seq < 2 {
				withGPU(d, seq+1) // rank 1's last snapshot has none
			}
			if err := add(t, tr, d, now); err != nil {
				t.Fatal(err)
			}
		}
		now = now.Add(5 * time.Second)
	}
	j := tr.Publish(now).Jobs["g"].Full()
	for _, p := range j.Processes {
		if (p.GPU != nil) != (p.Rank == 1) {
			t.Fatalf("rank %d: gpu %+v", p.Rank, p.GPU)
		}
	}
	got := j.Processes[1].GPU
	dev, pin := store.Traffic{Bytes: 8192, Msgs: 8}, store.Traffic{Bytes: 2000, Msgs: 2}
	want := &store.GPU{Probed: true,
		Functions: []store.GPUFunction{{Name: "MPI_Send", Send: store.BufferKinds{Device: dev}}, {Name: "MPI_Recv", Recv: store.BufferKinds{Pinned: pin}}},
		Peers:     []store.GPUPeer{{Peer: 0, ReceivedInto: store.BufferKinds{Pinned: pin}}, {Peer: 2, SentFrom: store.BufferKinds{Device: dev}}},
		NCCLOps: []store.NCCLOp{{Comm: 0xfedcba9876543210, CommRank: 1, CommSize: 4, Name: "AllReduce", Algorithm: "RING", Protocol: "SIMPLE",
			Calls: 20, Bytes: 2 << 20, TimeNS: 6e6}},
		NCCLVersion: "2.28.9", NCCLProfilerInterface: 5,
		NCCLPeers: []store.NCCLPeer{{Comm: 0xfedcba9876543210, Peer: 2, Sent: store.Traffic{Bytes: 1 << 20, Msgs: 16}}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("rank 1's gpu section:\n got %+v\nwant %+v", got, want)
	}
}

// A datagram with a bad GPU section is dropped by the listener and counted
// under its reason, as every other decode error.
func TestListenerCountsBadGPU(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	l, conn, stop := runListener(t, ListenOptions{Queue: 64}, m)
	items := queued(l)
	twice := withGPU(snapshot("g", 0, 4, 0, false), 1)
	twice.Gpu.Peers[1].Peer = 2
	malformed := append(encode(t, snapshot("g", 0, 4, 0, false)), protowire.AppendBytes(protowire.AppendTag(nil, 22, protowire.BytesType), []byte{0x1a, 0x05})...)
	conn.Write(encode(t, twice))
	conn.Write(malformed)
	conn.Write(encode(t, withGPU(snapshot("g", 1, 4, 0, false), 1)))
	select {
	case it := <-items:
		if it.D.Rank != 1 || it.D.Gpu == nil {
			t.Errorf("queued %+v", it.D)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the valid datagram did not come through")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if dropped(m, ReasonPeer) != 1 || dropped(m, ReasonMalformed) != 1 {
		t.Errorf("drops: bad_peer %g, malformed %g; want 1 and 1", dropped(m, ReasonPeer), dropped(m, ReasonMalformed))
	}
}
