package loadgen

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/netloom/netloom/internal/ingest/agentpb"
)

// TestRunSendsValidCumulativeSnapshots receives everything a short run
// sends on loopback and checks it is what an agent would send.
func TestRunSendsValidCumulativeSnapshots(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	type key struct {
		job  string
		rank uint32
	}
	var mu sync.Mutex
	got := 0
	lastBytes := map[key]uint64{}
	lastSeq := map[key]uint64{}
	finals := map[key]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var d agentpb.Datagram
			mu.Lock()
			got++
			if err := proto.Unmarshal(buf[:n], &d); err != nil {
				t.Errorf("datagram %d: %v", got, err)
			}
			if n > 64<<10 || d.Version != 1 || d.Chunk >= d.Chunks || d.Rank >= d.WorldSize {
				t.Errorf("bad datagram: %d bytes, %v", n, &d)
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
			mu.Unlock()
		}
	}()
	rep, err := Run(context.Background(), Config{System: "fat-tree:hosts=16,radix=8", Target: pc.LocalAddr().String(),
		Duration: 1500 * time.Millisecond, Interval: 300 * time.Millisecond, RanksPerNode: 4, MaxJobNodes: 8,
		JobLifetime: 400 * time.Millisecond, Seed: 7, FinishAtEnd: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	pc.Close()
	<-done
	mu.Lock()
	defer mu.Unlock()
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

func TestChunkKeepsDatagramsSmall(t *testing.T) {
	j := &job{id: "big", pattern: "alltoall", ppn: 16, start: time.Now()}
	for i := 0; i < 4096; i++ {
		j.nodes = append(j.nodes, fmt.Sprintf("node%05d", i))
	}
	d := snapshot(j, 5, 10, Config{}.withDefaults())
	chunks := chunk(d)
	if len(chunks) < 2 {
		t.Fatalf("a 4,096-node all-to-all snapshot fit in %d datagram", len(chunks))
	}
	nodes := 0
	for i, c := range chunks {
		if sz := proto.Size(c); sz > 64<<10 {
			t.Errorf("chunk %d is %d bytes", i, sz)
		}
		if c.Chunk != uint32(i) || c.Chunks != uint32(len(chunks)) || (i > 0 && c.Process != nil) {
			t.Errorf("chunk %d header %d/%d process %v", i, c.Chunk, c.Chunks, c.Process != nil)
		}
		nodes += len(c.Nodes)
	}
	if nodes != len(d.Nodes) {
		t.Errorf("%d node rows over chunks, want %d", nodes, len(d.Nodes))
	}
}

func BenchmarkSnapshot(b *testing.B) {
	j := &job{id: "bench", pattern: "halo", ppn: 16, start: time.Now()}
	for i := 0; i < 64; i++ {
		j.nodes = append(j.nodes, fmt.Sprintf("n%d", i))
	}
	j.seq = make([]uint64, j.ranks())
	cfg := Config{}.withDefaults()
	var buf []byte
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		d := snapshot(j, i%j.ranks(), 100, cfg)
		for _, c := range chunk(d) {
			buf, _ = proto.MarshalOptions{}.MarshalAppend(buf[:0], c)
		}
	}
}

// Snapshots built in a reused arena encode exactly as freshly allocated
// ones, and a chunked snapshot's chunks carry all its rows once.
func TestArenaSnapshots(t *testing.T) {
	cfg := Config{}.withDefaults()
	mk := func(pattern string, nodes int) *job {
		j := &job{id: pattern, pattern: pattern, ppn: 16, start: time.Now()}
		for i := range nodes {
			j.nodes = append(j.nodes, fmt.Sprintf("c%04d", i))
		}
		j.seq = make([]uint64, j.ranks())
		return j
	}
	det := proto.MarshalOptions{Deterministic: true}
	var a arena
	for _, j := range []*job{mk("alltoall", 2048), mk("halo", 8), mk("alltoall", 4), mk("reduce", 2)} {
		for _, rank := range []int{0, 5, j.ranks() - 1} {
			a.reset()
			got, err := det.Marshal(snapshotIn(&a, j, rank, 90, cfg))
			if err != nil {
				t.Fatal(err)
			}
			want, err := det.Marshal(snapshot(j, rank, 90, cfg))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s rank %d: arena snapshot differs", j.id, rank)
			}
		}
	}
	d := snapshot(mk("alltoall", 4096), 3, 90, cfg)
	chunks := chunk(d)
	if len(chunks) < 2 {
		t.Fatalf("a 4096-node all-to-all rank in %d chunk(s)", len(chunks))
	}
	var nodes int
	for i, c := range chunks {
		if sz := proto.Size(c); sz > maxDatagram || c.Chunk != uint32(i) || c.Chunks != uint32(len(chunks)) || c.TimeUnixNs != d.TimeUnixNs {
			t.Fatalf("chunk %d: %d bytes, %d/%d", i, sz, c.Chunk, c.Chunks)
		}
		if (c.Process != nil) != (i == 0) || (len(c.Functions) > 0) != (i == 0) {
			t.Fatalf("chunk %d: process block or functions misplaced", i)
		}
		nodes += len(c.Nodes)
	}
	if nodes != len(d.Nodes) {
		t.Fatalf("chunks carry %d node rows, snapshot %d", nodes, len(d.Nodes))
	}
}
