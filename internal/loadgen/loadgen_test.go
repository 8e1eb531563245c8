package loadgen

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/netloom/netloom/internal/ingest/agentpb"
)

// TestRunSendsValidCumulativeSnapshots receives everything a short run
// sends on loopback and checks it is what an agent would send.
func TestRunSendsValidCumulativeSnapshots(t *testing.T) {
	addr, received := listen(t)
	rep, err := Run(context.Background(), Config{System: "fat-tree:hosts=16,radix=8", Target: addr,
		Duration: 1500 * time.Millisecond, Interval: 300 * time.Millisecond, RanksPerNode: 4, MaxJobNodes: 8,
		JobLifetime: 400 * time.Millisecond, Seed: 7, FinishAtEnd: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw := received(200 * time.Millisecond)
	type key struct {
		job  string
		rank uint32
	}
	lastBytes := map[key]uint64{}
	lastSeq := map[key]uint64{}
	finals := map[key]bool{}
	for i, b := range raw {
		var d agentpb.Datagram
		if err := proto.Unmarshal(b, &d); err != nil {
			t.Errorf("datagram %d: %v", i+1, err)
		}
		if len(b) > 64<<10 || d.Version != 1 || d.Chunk >= d.Chunks || d.Rank >= d.WorldSize {
			t.Errorf("bad datagram: %d bytes, %v", len(b), &d)
		}
		peers := map[uint32]bool{}
		for _, pt := range d.Peers {
			if peers[pt.Peer] || pt.Peer >= d.WorldSize {
				t.Errorf("%s rank %d: peer %d twice or out of range", d.JobId, d.Rank, pt.Peer)
			}
			peers[pt.Peer] = true
		}
		k := key{d.JobId, d.Rank}
		if d.Chunk == 0 && d.Process != nil {
			b := d.Process.InterNode.GetBytes() + d.Process.IntraNode.GetBytes()
			if s, ok := lastSeq[k]; ok && d.Seq <= s {
				t.Errorf("%v: seq %d after %d", k, d.Seq, s)
			}
			if b < lastBytes[k] {
				t.Errorf("%v: cumulative bytes went down %d -> %d", k, lastBytes[k], b)
			}
			lastSeq[k], lastBytes[k] = d.Seq, b
			if d.Final {
				finals[k] = true
			}
		}
	}
	got := len(raw)
	if rep.Processes != 64 || rep.DatagramsSent == 0 || rep.SendErrors != 0 {
		t.Fatalf("report %+v", rep)
	}
	if uint64(got) != rep.DatagramsSent {
		t.Errorf("received %d datagrams, report says %d sent", got, rep.DatagramsSent)
	}
	if rep.JobsFinished == 0 || rep.Jobs <= 2 {
		t.Errorf("no churn: %+v", rep)
	}
	if len(finals) < 64 {
		t.Errorf("final reports from %d ranks, want at least 64", len(finals))
	}
}

// snapshot is the reference for the encoder: a rank's snapshot after
// elapsed seconds as one protobuf message, before chunking.
func snapshot(j *job, rank int, elapsed float64, cfg Config) *agentpb.Datagram {
	n := j.ranks()
	d := &agentpb.Datagram{Version: 1, JobId: j.id, Rank: uint32(rank), WorldSize: uint32(n), Chunks: 1}
	limit := n
	if n > cfg.PeerLimit {
		limit = cfg.TopPeers
	}
	peers, nodes, truncated := flowsInto(nil, nil, j, rank, rankJitter(rank), limit)
	var intra, inter agentpb.Traffic
	for _, f := range nodes {
		bytes := uint64(f.rate * elapsed)
		nt := &agentpb.NodeTraffic{Node: j.nodes[f.to]}
		if bytes > 0 {
			t := &agentpb.Traffic{Bytes: bytes, Msgs: bytes / 65536}
			if f.coll {
				nt.Coll = t
			} else {
				nt.P2P = t
			}
		}
		d.Nodes = append(d.Nodes, nt)
		side := &inter
		if f.to == rank/j.ppn {
			side = &intra
		}
		side.Bytes += bytes
		side.Msgs += bytes / 65536
	}
	for _, f := range peers {
		bytes := uint64(f.rate * elapsed)
		t := &agentpb.Traffic{Bytes: bytes, Msgs: bytes / 65536}
		pt := &agentpb.PeerTraffic{Peer: uint32(f.to)}
		if f.coll {
			pt.Coll = t
		} else {
			pt.P2P = t
			pt.SizeHistogram = make([]uint64, histBins)
			pt.SizeHistogram[histBins-1] = t.Msgs
		}
		d.Peers = append(d.Peers, pt)
	}
	d.PeersTruncated = truncated
	d.Process = new(agentpb.Process)
	fillProcess(d.Process, j, rank, elapsed, &intra, &inter)
	var fs [4]agentpb.FunctionStat
	d.Functions = fillFunctions(nil, &fs, elapsed, intra.Bytes+inter.Bytes)
	return d
}

func testJob(pattern string, nodes int) *job {
	j := &job{id: pattern, pattern: pattern, ppn: 16, start: time.Now()}
	for i := range nodes {
		j.nodes = append(j.nodes, fmt.Sprintf("c%04d", i))
	}
	j.seq = make([]uint64, j.ranks())
	return j
}

// TestProcessBlockMatchesProto: the hand-written process block and
// function rows are proto.Marshal's, whichever fields are set.
func TestProcessBlockMatchesProto(t *testing.T) {
	for _, p := range []*agentpb.Process{{}, {Node: "n", Cpu: -1, CpuSystemSeconds: 0.5, IoReadBytes: 1, MpiioWriteBytes: 1 << 40,
		InterNode: &agentpb.Traffic{}, DatagramsDropped: 3}, {Host: "h", Pid: 7, User: "u", WallSeconds: 1e9, VmHwm: 9,
		IntraNode: &agentpb.Traffic{Bytes: 5}, InterNode: &agentpb.Traffic{Msgs: 6}}} {
		want, _ := proto.Marshal(&agentpb.Datagram{Process: p})
		if got, _ := appendProcess(nil, nil, fProcess, p); !bytes.Equal(got, want) {
			t.Errorf("process %v: %x, want %x", p, got, want)
		}
	}
	for _, f := range []*agentpb.FunctionStat{{}, {Name: "MPI_Send", Calls: 1, BytesReceived: 1 << 50}, {TimeNs: 3, BytesSent: 4}} {
		want, _ := proto.Marshal(&agentpb.Datagram{Functions: []*agentpb.FunctionStat{f}})
		if got := appendFunction(nil, fFunctions, f); !bytes.Equal(got, want) {
			t.Errorf("function %v: %x, want %x", f, got, want)
		}
	}
}

// The encoder writes what proto.Marshal writes for the reference snapshot,
// byte for byte when it fits one datagram; a larger one is split into
// chunks under maxDatagram that carry every row once, in order, with the
// process block and functions in chunk 0 only.
func TestEncoderMatchesProto(t *testing.T) {
	cfg := Config{}.withDefaults()
	det := proto.MarshalOptions{Deterministic: true}
	var e encoder
	for _, j := range []*job{testJob("alltoall", 4096), testJob("alltoall", 2048), testJob("halo", 8), testJob("alltoall", 4),
		testJob("reduce", 2), testJob("idle", 1), testJob("halo", 1)} {
		for _, rank := range []int{0, 5, j.ranks() - 1} {
			for _, elapsed := range []float64{0, 0.001, 90} {
				s := snap{job: j, rank: rank, seq: uint64(rank % 3), time: 1e18 + int64(rank), start: 1e18 - 5e9,
					interval: uint64(cfg.Interval), final: rank == 5, elapsed: elapsed, peerLimit: cfg.PeerLimit, peerCount: cfg.TopPeers}
				want := snapshot(j, rank, elapsed, cfg)
				want.Seq, want.TimeUnixNs, want.StartUnixNs, want.IntervalNs, want.Final = s.seq, s.time, s.start, s.interval, s.final
				chunks := e.encode(s)
				if chunks == 1 {
					wb, err := det.Marshal(want)
					if err != nil {
						t.Fatal(err)
					}
					if got := e.datagram(0, 1); !bytes.Equal(got, wb) {
						t.Fatalf("%s rank %d at %gs: encoded %d bytes differ from proto's %d", j.id, rank, elapsed, len(got), len(wb))
					}
					continue
				}
				merged := &agentpb.Datagram{}
				for i := range chunks {
					b := e.datagram(i, chunks)
					var c agentpb.Datagram
					if err := proto.Unmarshal(b, &c); err != nil {
						t.Fatal(err)
					}
					if len(b) > maxDatagram || c.Chunk != uint32(i) || c.Chunks != uint32(chunks) || (c.Process != nil) != (i == 0) ||
						(len(c.Functions) > 0) != (i == 0) || len(c.Nodes)+len(c.Peers) == 0 {
						t.Fatalf("%s rank %d chunk %d/%d: %d bytes, header %d/%d, %d rows", j.id, rank, i, chunks, len(b), c.Chunk, c.Chunks, len(c.Nodes)+len(c.Peers))
					}
					if i == 0 {
						proto.Merge(merged, &c)
					} else {
						merged.Nodes = append(merged.Nodes, c.Nodes...)
						merged.Peers = append(merged.Peers, c.Peers...)
					}
				}
				merged.Chunk, merged.Chunks = 0, 1
				if !proto.Equal(merged, want) {
					t.Fatalf("%s rank %d at %gs: %d chunks do not add up to the snapshot", j.id, rank, elapsed, chunks)
				}
			}
		}
	}
}

func BenchmarkSnapshot(b *testing.B) {
	for _, bc := range []struct {
		pattern string
		nodes   int
	}{{"halo", 64}, {"alltoall", 1024}} {
		b.Run(fmt.Sprintf("%s-%d", bc.pattern, bc.nodes), func(b *testing.B) {
			j := testJob(bc.pattern, bc.nodes)
			cfg := Config{}.withDefaults()
			var e encoder
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				s := snap{job: j, rank: i % j.ranks(), elapsed: 100, interval: uint64(cfg.Interval), peerLimit: cfg.PeerLimit, peerCount: cfg.TopPeers}
				chunks := e.encode(s)
				for c := range chunks {
					e.datagram(c, chunks)
				}
			}
		})
	}
}

// Ranks report spread over the interval as the agent spreads them: rank r
// of n (r + 1/2) / n of an interval after its job started, then every
// interval.
func TestRanksSpreadOverInterval(t *testing.T) {
	addr, received := listen(t)
	const interval = 400 * time.Millisecond
	rep, err := Run(context.Background(), Config{System: "fat-tree:hosts=16,radix=8", Target: addr,
		Duration: 1100 * time.Millisecond, Interval: interval, RanksPerNode: 4, MaxJobNodes: 8, Seed: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ds []*agentpb.Datagram
	for _, b := range received(100 * time.Millisecond) {
		d := &agentpb.Datagram{}
		if proto.Unmarshal(b, d) == nil && d.Chunk == 0 {
			ds = append(ds, d)
		}
	}
	if len(ds) < rep.Processes*2 {
		t.Fatalf("%d snapshots of %d processes: %+v", len(ds), rep.Processes, rep)
	}
	late := 0
	for _, d := range ds {
		want := time.Duration(d.Seq)*interval + interval*time.Duration(2*d.Rank+1)/time.Duration(2*d.WorldSize)
		got := time.Duration(d.TimeUnixNs - d.StartUnixNs)
		if got < want-time.Millisecond || got > want+interval/2 {
			t.Fatalf("job %s rank %d of %d snapshot %d at %v after start, want %v", d.JobId, d.Rank, d.WorldSize, d.Seq, got, want)
		}
		if got > want+30*time.Millisecond {
			late++
		}
	}
	// A loaded machine may be late now and then, not usually.
	if late > len(ds)/10 {
		t.Errorf("%d of %d snapshots more than 30 ms late", late, len(ds))
	}
}

// listen receives datagrams on a loopback socket; received waits linger
// for the last ones, closes it and returns them all, in order.
func listen(t *testing.T) (addr string, received func(linger time.Duration) [][]byte) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	var got [][]byte
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			got = append(got, bytes.Clone(buf[:n]))
		}
	}()
	return pc.LocalAddr().String(), func(linger time.Duration) [][]byte {
		time.Sleep(linger)
		pc.Close()
		<-done
		return got
	}
}

// TestSystemsReportToTheirDaemons runs a site of two fabrics: each rank
// reports to its own node's daemon, and the job on the hosts where the
// first fabric's list ends has ranks reporting to both.
func TestSystemsReportToTheirDaemons(t *testing.T) {
	addrA, gotA := listen(t)
	addrB, gotB := listen(t)
	_, err := Run(context.Background(), Config{System: "fat-tree:hosts=6,radix=4,prefix=a", Target: addrA,
		More:     []System{{Spec: "fat-tree:hosts=6,radix=4,prefix=b", Target: addrB}},
		Duration: 300 * time.Millisecond, Interval: 100 * time.Millisecond, RanksPerNode: 2, MaxJobNodes: 4, Seed: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	jobsAt := func(raw [][]byte, prefix byte) map[string]int {
		ranks := map[string]int{}
		for _, b := range raw {
			var d agentpb.Datagram
			if err := proto.Unmarshal(b, &d); err != nil {
				t.Fatal(err)
			}
			if d.Process == nil {
				continue
			}
			if d.Process.Node[0] != prefix {
				t.Errorf("rank %d of %s on node %s reported to fabric %c's daemon", d.Rank, d.JobId, d.Process.Node, prefix)
			}
			ranks[d.JobId] = max(ranks[d.JobId], int(d.Rank)+1)
		}
		return ranks
	}
	a, b := jobsAt(gotA(100*time.Millisecond), 'a'), jobsAt(gotB(100*time.Millisecond), 'b')
	spanning := 0
	for id := range a {
		if _, ok := b[id]; ok {
			spanning++
		}
	}
	if len(a) == 0 || len(b) == 0 || spanning != 1 {
		t.Errorf("jobs heard by a: %v, by b: %v; want exactly one in both (the one across the boundary)", a, b)
	}
	if _, err := Run(context.Background(), Config{System: "fat-tree:hosts=2", Target: addrA,
		More: []System{{Spec: "fat-tree:hosts=2", Target: addrB}}, Duration: time.Millisecond}, nil); err == nil || !strings.Contains(err.Error(), "host n1 is in an earlier system") {
		t.Errorf("two systems with the same host names: %v", err)
	}
}
