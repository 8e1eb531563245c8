package ingest

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/netloom/netloom/internal/ingest/agentpb"
	"github.com/netloom/netloom/internal/store"
)

// lgSnapshot is a rank's snapshot shaped like netloom loadgen's: 16 ranks
// a node, a halo-like pattern with the top 32 peers (18-bin histograms),
// their destination nodes, four MPI functions and the process block.
func lgSnapshot(job string, rank, world int, seq uint64) *agentpb.Datagram {
	const ppn = 16
	k := seq + 1
	elapsed := 45 * float64(k)
	at := t0.Add(time.Duration(k) * 45 * time.Second)
	node := func(r int) string { return benchNode(r / ppn) }
	d := &agentpb.Datagram{Version: 1, JobId: job, Rank: uint32(rank), WorldSize: uint32(world), Seq: seq, Chunks: 1,
		TimeUnixNs: at.UnixNano(), StartUnixNs: t0.UnixNano(), IntervalNs: uint64(45 * time.Second), PeersTruncated: world > 64}
	nodes := map[string]*agentpb.NodeTraffic{}
	var order []string
	for i := 1; i <= 32 && i < world; i++ {
		peer := (rank + i*(1+i%3)) % world
		if peer == rank {
			continue
		}
		b := uint64(1e6*elapsed) / uint64(i)
		t := &agentpb.Traffic{Bytes: b, Msgs: b / 65536}
		hist := make([]uint64, 18)
		hist[17] = t.Msgs
		d.Peers = append(d.Peers, &agentpb.PeerTraffic{Peer: uint32(peer), P2P: t, SizeHistogram: hist})
		n := node(peer)
		nt := nodes[n]
		if nt == nil {
			nt = &agentpb.NodeTraffic{Node: n, P2P: &agentpb.Traffic{}, Coll: &agentpb.Traffic{}, Rma: &agentpb.Traffic{}}
			nodes[n] = nt
			order = append(order, n)
		}
		nt.P2P.Bytes += t.Bytes
		nt.P2P.Msgs += t.Msgs
	}
	for _, n := range order {
		d.Nodes = append(d.Nodes, nodes[n])
	}
	// Peers must be unique.
	seen := map[uint32]bool{}
	kept := d.Peers[:0]
	for _, p := range d.Peers {
		if !seen[p.Peer] {
			seen[p.Peer] = true
			kept = append(kept, p)
		}
	}
	d.Peers = kept
	mpi := 0.1 * elapsed
	d.Process = &agentpb.Process{Node: node(rank), Host: node(rank), Pid: uint32(10000 + rank%ppn), Cpu: int32(rank % ppn),
		MpiLibrary: "loadgen", Program: "halo", User: "loadgen",
		CpuUserSeconds: 0.85 * elapsed, CpuSystemSeconds: 0.05 * elapsed, WallSeconds: elapsed, MpiSeconds: mpi,
		VmSize: 2 << 30, VmPeak: 2 << 30, VmRss: 1 << 30, VmHwm: 1 << 30,
		IntraNode: &agentpb.Traffic{Bytes: uint64(elapsed * 1e6), Msgs: uint64(elapsed * 10)},
		InterNode: &agentpb.Traffic{Bytes: uint64(elapsed * 2e6), Msgs: uint64(elapsed * 20)}}
	calls := uint64(elapsed * 1000)
	d.Functions = []*agentpb.FunctionStat{
		{Name: "MPI_Isend", Calls: calls, TimeNs: uint64(mpi * 0.2e9)},
		{Name: "MPI_Irecv", Calls: calls, TimeNs: uint64(mpi * 0.1e9)},
		{Name: "MPI_Waitall", Calls: calls / 2, TimeNs: uint64(mpi * 0.5e9)},
		{Name: "MPI_Allreduce", Calls: calls / 10, TimeNs: uint64(mpi * 0.2e9)},
	}
	return d
}

// a2aSnapshot is a rank's snapshot in a 1,024-node all-to-all job as
// netloom loadgen sends it: a collective row to every node of the job, the
// top 32 peers, four MPI functions and the process block.
func a2aSnapshot(job string, rank, world int, seq uint64) *agentpb.Datagram {
	d := lgSnapshot(job, rank, world, seq)
	elapsed := 45 * float64(seq+1)
	d.Nodes = d.Nodes[:0]
	for k := range world / 16 {
		b := uint64(400e6 * elapsed / float64(world))
		d.Nodes = append(d.Nodes, &agentpb.NodeTraffic{Node: benchNode(k), Coll: &agentpb.Traffic{Bytes: b, Msgs: b / 65536}})
	}
	return d
}

// benchNode names node k (made once: formatting them was most of the
// benchmark's time between its timed parts, and its garbage in them).
func benchNode(k int) string {
	for len(benchNodes) <= k {
		n := len(benchNodes)
		benchNodes = append(benchNodes, fmt.Sprintf("c%03d-%03d", n/100, n%100))
	}
	return benchNodes[k]
}

var benchNodes []string

// encodeLoad encodes snapshots seq 0..seqs-1 of jobs×ranks ranks, in the
// order they arrive: every rank's seq 0, then every rank's seq 1...
func encodeLoad(tb testing.TB, snap snapshotFunc, jobs, ranks, world, seqs int) [][]byte {
	var out [][]byte
	for s := 0; s < seqs; s++ {
		for j := 0; j < jobs; j++ {
			for r := 0; r < ranks; r++ {
				b, err := proto.Marshal(snap(fmt.Sprintf("bench-%d", j), r, world, uint64(s)))
				if err != nil {
					tb.Fatal(err)
				}
				out = append(out, b)
			}
		}
	}
	return out
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

type snapshotFunc func(job string, rank, world int, seq uint64) *agentpb.Datagram

// BenchmarkTracker decodes and applies loadgen-shaped datagrams (the
// daemon's reader and aggregator paths without the socket), publishing
// the live view every 250 ms of datagrams as the daemon does, and reports
// datagrams/s and the live heap per tracked process: halo-like jobs, and
// 256 ranks of a 1,024-node all-to-all job (1,024 node rows a datagram).
func BenchmarkTracker(b *testing.B) {
	b.Run("halo", func(b *testing.B) { benchTracker(b, lgSnapshot, 4, 4096, 4096) })
	b.Run("alltoall-1024", func(b *testing.B) { benchTracker(b, a2aSnapshot, 1, 256, 16384) })
}

func benchTracker(b *testing.B, snap snapshotFunc, jobs, ranks, world int) {
	lim := Limits{}.WithDefaults()
	seqs := 3
	load := encodeLoad(b, snap, jobs, ranks, world, seqs)
	perSeq := jobs * ranks
	var samples int
	tr := NewTracker(Options{Samples: func(s []store.ProcessSample) { samples += len(s) }, SaveJob: func(*store.Job) {}}, nil)
	before := heapInUse()
	// Warm up: two snapshots of every rank, so that every rank has state
	// and a previous snapshot.
	now := t0
	for _, raw := range load[:2*perSeq] {
		d, err := Decode(raw, lim)
		if err != nil {
			b.Fatal(err)
		}
		if err := tr.Add(d, len(raw), now); err != nil {
			b.Fatal(err)
		}
	}
	tr.Tick(now)
	tr.Publish(now)
	after := heapInUse()

	// Steady state: later snapshots, re-encoded with increasing seq.
	next := make([][]byte, perSeq)
	seq := uint64(2)
	refill := func() {
		for j := 0; j < jobs; j++ {
			for r := 0; r < ranks; r++ {
				next[j*ranks+r], _ = proto.Marshal(snap(fmt.Sprintf("bench-%d", j), r, world, seq))
			}
		}
		seq++
	}
	refill()
	b.ResetTimer()
	i := 0
	for n := 0; n < b.N; n++ {
		if i == perSeq {
			b.StopTimer()
			refill()
			runtime.GC() // not the timed part's garbage
			i = 0
			b.StartTimer()
		}
		raw := next[i]
		d, err := Decode(raw, lim)
		if err != nil {
			b.Fatal(err)
		}
		if err := tr.Add(d, len(raw), now); err != nil {
			b.Fatal(err)
		}
		i++
		if n%5800 == 0 { // 250 ms at 10x Stampede's 23,300 datagrams/s
			now = now.Add(250 * time.Millisecond)
			tr.Tick(now)
			tr.Publish(now)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "datagrams/s")
	b.ReportMetric(float64(after-before)/float64(perSeq), "heap-B/process")
	b.ReportMetric(float64(len(load[0])), "B/datagram")
}

// BenchmarkTrackerMark fills a tracker with 262,144 halo-like ranks (two
// snapshots each, published as the daemon does) and reports the CPU time
// the collector spends marking it, per process: at ten times Stampede the
// daemon marks a million of them every 20 s or so, in bursts that the
// reader and aggregators must absorb. Each iteration is one forced
// collection.
func BenchmarkTrackerMark(b *testing.B) {
	const jobs, ranks = 64, 4096
	lim := Limits{}.WithDefaults()
	tr := NewTracker(Options{Samples: func([]store.ProcessSample) {}, SaveJob: func(*store.Job) {}}, nil)
	idle := markTime(1)
	before := heapInUse()
	now := t0
	for seq := range uint64(2) {
		for j := range jobs {
			job := fmt.Sprintf("bench-%d", j)
			for r := range ranks {
				raw, err := proto.Marshal(lgSnapshot(job, r, ranks, seq))
				if err != nil {
					b.Fatal(err)
				}
				d, err := Decode(raw, lim)
				if err != nil {
					b.Fatal(err)
				}
				if err := tr.Add(d, len(raw), now); err != nil {
					b.Fatal(err)
				}
			}
		}
		now = now.Add(time.Second)
		tr.Tick(now)
		tr.Publish(now)
	}
	heap := heapInUse() - before
	b.ResetTimer()
	mark := markTime(b.N) - idle
	b.StopTimer()
	b.ReportMetric(float64(mark.Nanoseconds())/(jobs*ranks), "mark-ns/process")
	b.ReportMetric(float64(heap)/(jobs*ranks), "heap-B/process")
	runtime.KeepAlive(tr)
}

// markTime is the least CPU time the collector spent marking in n forced
// collections.
func markTime(n int) time.Duration {
	read := func() time.Duration {
		s := []metrics.Sample{{Name: "/cpu/classes/gc/mark/dedicated:cpu-seconds"},
			{Name: "/cpu/classes/gc/mark/assist:cpu-seconds"}, {Name: "/cpu/classes/gc/mark/idle:cpu-seconds"}}
		metrics.Read(s)
		return time.Duration((s[0].Value.Float64() + s[1].Value.Float64() + s[2].Value.Float64()) * 1e9)
	}
	best := time.Duration(1<<63 - 1)
	for range max(n, 1) {
		start := read()
		runtime.GC()
		best = min(best, read()-start)
	}
	return best
}
