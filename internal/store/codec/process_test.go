package codec

import (
	"bytes"
	"compress/flate"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/storetest"
)

// bigProcess is a rank of a 1,024-node all-to-all: every destination node,
// 32 peers with histograms, a few functions and a region.
func bigProcess(nodes int) store.Process {
	p := store.Process{Rank: 4711, Node: "c401-101", Host: "c401-101.stampede", PID: 12345, CPU: -1, MPILibrary: "Open MPI 4.1.4",
		Program: "a.out", User: "alice", Start: storetest.T0, Time: storetest.T0.Add(90 * time.Second), Seq: 3, Final: true,
		ProcessUsage: store.ProcessUsage{CPUUser: 88.5, CPUSystem: 1.25, Wall: 90, MPI: 40.125, VmSize: 1 << 32, VmPeak: 1 << 33, VmRSS: 1 << 30, VmHWM: 3 << 29,
			IORead: 7, IOWrite: 1 << 40, MPIIORead: 0, MPIIOWrite: 99, IntraNode: store.Traffic{Bytes: 1e9, Msgs: 1e5},
			InterNode: store.Traffic{Bytes: 5e10, Msgs: 3e6}, AgentDrops: 2}, PeersTruncated: true,
		Functions: []store.Function{{Name: "MPI_Alltoall", Calls: 90, TimeNS: 4e10, BytesSent: 5e10, BytesReceived: 5e10}, {Name: "MPI_Barrier", Calls: 3}},
		Regions:   []store.Region{{Name: "solve", Entries: 9, TimeNS: 8e10, MPITimeNS: 4e10, Classes: store.Classes{Coll: store.Traffic{Bytes: 5e10, Msgs: 9e4}}}},
	}
	to := make([]store.NodeTraffic, nodes)
	for i := range to {
		to[i] = store.NodeTraffic{Node: fmt.Sprintf("c%03d-%03d", 401+i/96, 101+i%96),
			Classes: store.Classes{Coll: store.Traffic{Bytes: uint64(48e6 + i*1000), Msgs: uint64(1440 + i%3)}}}
	}
	p.ToNodes = store.NewNodeRows(to)
	var peers []store.PeerTraffic
	for i := range 32 {
		peers = append(peers, store.PeerTraffic{Peer: 4711 + (i-16)*16, Classes: store.Classes{P2P: store.Traffic{Bytes: uint64(i) << 20, Msgs: uint64(i)}},
			Histogram: []uint64{0, 1, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, uint64(i)}})
	}
	peers[3].Monitored = &store.Physical{Classes: store.Classes{P2P: store.Traffic{Bytes: 3 << 20, Msgs: 3}}}
	peers[5].Monitored = &store.Physical{Classes: store.Classes{Coll: store.Traffic{Bytes: 1 << 20, Msgs: 2}}, Fetched: store.Traffic{Bytes: 4096, Msgs: 1}}
	peers[4].Histogram = nil
	p.Peers = store.NewPeerRows(peers)
	return p
}

func TestProcessRowRoundTrip(t *testing.T) {
	waits := bigProcess(3) // NETLOOM_WAITS: functions with wait times (flag 4)
	waits.Functions = []store.Function{{Name: "MPI_Allreduce", Calls: 9, TimeNS: 7e6, WaitNS: 3e9}, {Name: "MPI_Send", Calls: 1}}
	regionWaits := waits // and regions with theirs (flag 8)
	regionWaits.Regions = []store.Region{{Name: "solve", Entries: 9, TimeNS: 8e10, MPITimeNS: 4e10, WaitNS: 3e9}, {Name: "io", Entries: 1, TimeNS: 5}}
	gpu := bigProcess(3) // a GPU section (flag 16)
	gpu.GPU = gpuSection()
	probedOnly := bigProcess(0)
	probedOnly.GPU = &store.GPU{ProbeError: "cuPointerGetAttributes: CUDA_ERROR_NOT_INITIALIZED"}
	for _, p := range []store.Process{bigProcess(1024), bigProcess(0), waits, regionWaits, gpu, probedOnly, {Rank: 0, Functions: []store.Function{}, Regions: []store.Region{},
		Peers: store.PeerRows{}}} {
		b := EncodeProcess(nil, &p)
		got, err := DecodeProcess(b)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !reflect.DeepEqual(got, p) {
			t.Fatalf("round trip of rank %d with %d nodes differs:\n got %+v\nwant %+v", p.Rank, p.ToNodes.Len(), got, p)
		}
		for cut := 1; cut < len(b); cut += 1 + cut/8 {
			if _, err := DecodeProcess(b[:cut]); err == nil {
				t.Fatalf("a row cut to %d of %d bytes decoded", cut, len(b))
			}
		}
		if _, err := DecodeProcess(append(b, 0)); err == nil {
			t.Fatal("a row with a byte after it decoded")
		}
	}
}

// gpuSection has every field of a GPU section set, peers out of order
// and a communicator hash above 2^63.
func gpuSection() *store.GPU {
	k := func(n uint64) store.BufferKinds {
		return store.BufferKinds{Pageable: store.Traffic{Bytes: n, Msgs: 1}, Pinned: store.Traffic{Bytes: 2 * n}, Device: store.Traffic{Bytes: 1 << 40, Msgs: n},
			Managed: store.Traffic{Msgs: 7}}
	}
	return &store.GPU{Probed: true, ProbeError: "", Functions: []store.GPUFunction{{Name: "MPI_Send", Send: k(100)}, {Name: "MPI_Recv", Recv: k(5)}},
		Peers:       []store.GPUPeer{{Peer: 3, SentFrom: k(1)}, {Peer: 1, ReceivedInto: k(9)}, {Peer: 4711, SentFrom: k(2), ReceivedInto: k(3)}},
		NCCLOps:     []store.NCCLOp{{Comm: 0xfedcba9876543210, CommRank: 1, CommSize: 8, Name: "AllReduce", Algorithm: "RING", Protocol: "SIMPLE", Calls: 10, Bytes: 1 << 30, TimeNS: 5e9}, {Comm: 1, Name: "Send"}},
		NCCLVersion: "2.28.9", NCCLProfilerInterface: 5, NCCLNetEvents: true,
		NCCLPeers: []store.NCCLPeer{{Comm: 0xfedcba9876543210, Peer: 7, Sent: store.Traffic{Bytes: 1 << 33, Msgs: 4}, Received: store.Traffic{Bytes: 9}}}}
}

// A row written before GPU sections (flag 16) existed still decodes: this
// one is rank 2's of a small job, as EncodeProcess wrote it then.
func TestProcessRowBeforeGPU(t *testing.T) {
	p := store.Process{Rank: 2, Node: "n1", Host: "h1", PID: 7, MPILibrary: "Open MPI", Start: storetest.T0, Time: storetest.T0.Add(time.Second), Seq: 1,
		Functions: []store.Function{{Name: "MPI_Send", Calls: 3, BytesSent: 300}}, Regions: []store.Region{},
		ToNodes: store.NewNodeRows([]store.NodeTraffic{{Node: "n2", Classes: store.Classes{P2P: store.Traffic{Bytes: 300, Msgs: 3}}}}),
		Peers:   store.NewPeerRows([]store.PeerTraffic{{Peer: 3, Classes: store.Classes{P2P: store.Traffic{Bytes: 300, Msgs: 3}}}})}
	const old = "0704026e310268310700084f70656e204d5049000080808489eb8cd1b82f80a8dac2f28cd1b82f010000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000001084d50495f53656e640300ac0200000100026e3203ac0203010603ac02030000"
	b, err := hex.DecodeString(old)
	if err != nil {
		t.Fatal(err)
	}
	if enc := EncodeProcess(nil, &p); !bytes.Equal(enc, b) {
		t.Errorf("a process without a GPU section is written differently now:\n%x", enc)
	}
	got, err := DecodeProcess(b)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if got.GPU != nil || got.Rank != 2 || len(got.Functions) != 1 || got.Functions[0].BytesSent != 300 || got.Peers.Len() != 1 {
		t.Fatalf("decoded %+v", got)
	}
}

func FuzzDecodeProcess(f *testing.F) {
	p := bigProcess(5)
	f.Add(EncodeProcess(nil, &p))
	p.GPU = gpuSection()
	f.Add(EncodeProcess(nil, &p))
	f.Add(EncodeProcess(nil, &store.Process{}))
	f.Add([]byte{formatProcess})
	f.Add([]byte{0x01, 0x02})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodeProcess(b)
		if err != nil || len(b) == 0 || b[0] != formatProcess {
			return
		}
		enc := EncodeProcess(nil, &p)
		again, err := DecodeProcess(enc)
		if err != nil {
			t.Fatalf("re-encoded row: %v", err)
		}
		// Compared encoded: a NaN read back is not equal to itself.
		if !bytes.Equal(EncodeProcess(nil, &again), enc) {
			t.Fatalf("round trip differs:\n got %+v\nwant %+v", again, p)
		}
		// The peer rows are read without checks after this one: every way
		// of reading them must agree with it.
		rows := p.Peers.Slice()
		n := 0
		for peer, cl := range p.Peers.Traffic() {
			if n >= len(rows) || rows[n].Peer != peer || rows[n].Classes != cl {
				t.Fatalf("peer row %d read two ways: %d %+v, %+v", n, peer, cl, rows)
			}
			n++
		}
		// Packed again they read the same (not byte for byte: a stored
		// row may spell a zero counter out, which packing leaves out).
		if n != len(rows) || n != p.Peers.Len() || !reflect.DeepEqual(store.NewPeerRows(rows).Slice(), rows) {
			t.Fatalf("%d and %d peer rows of %d, or packed again they differ", n, len(rows), p.Peers.Len())
		}
	})
}

// BenchmarkProcessRow compares the row encodings for one rank of a
// 1,024-node all-to-all: go test -bench ProcessRow ./internal/store/codec
func BenchmarkProcessRow(b *testing.B) {
	p := bigProcess(1024)
	b.Run("binary", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf = EncodeProcess(buf[:0], &p)
		}
		b.ReportMetric(float64(len(buf)), "bytes/row")
	})
	b.Run("json+deflate", func(b *testing.B) {
		var z []byte
		for b.Loop() {
			raw, err := json.Marshal(&p)
			if err != nil {
				b.Fatal(err)
			}
			if z, err = Deflate(raw, flate.BestSpeed); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(z)), "bytes/row")
	})
	row := EncodeProcess(nil, &p)
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			if _, err := DecodeProcess(row); err != nil {
				b.Fatal(err)
			}
		}
	})
}
