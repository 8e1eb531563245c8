package ingest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/netloom/netloom/internal/ingest/agentpb"
	"github.com/netloom/netloom/internal/store"
)

var t0 = time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)

// snapshot builds rank's seq-th snapshot of a ring job of n ranks on
// nodes of two ranks each: every interval of 5s, rank r sends 1000 bytes
// (10 messages) to r+1, plus 100 bytes of collective traffic to rank 0.
func snapshot(job string, rank, n int, seq uint64, final bool) *agentpb.Datagram {
	k := seq + 1
	node := func(r int) string { return fmt.Sprintf("node%d", r/2) }
	now := t0.Add(time.Duration(k) * 5 * time.Second)
	peer := (rank + 1) % n
	d := &agentpb.Datagram{Version: 1, JobId: job, Rank: uint32(rank), WorldSize: uint32(n), Seq: seq, Chunks: 1,
		TimeUnixNs: now.UnixNano(), StartUnixNs: t0.UnixNano(), Final: final,
		Process: &agentpb.Process{Node: node(rank), Host: "host" + node(rank), Pid: uint32(1000 + rank), MpiLibrary: "Open MPI 4.1.4",
			Program: "ring", User: "alice", CpuUserSeconds: 4 * float64(k), CpuSystemSeconds: 0.5 * float64(k),
			WallSeconds: 5 * float64(k), MpiSeconds: float64(k), VmRss: 100 << 20, VmHwm: 120 << 20,
			IoWriteBytes: 4096 * k},
		Functions: []*agentpb.FunctionStat{
			{Name: "MPI_Send", Calls: 10 * k, TimeNs: 400e6 * k, BytesSent: 1000 * k},
			{Name: "MPI_Recv", Calls: 10 * k, TimeNs: 500e6 * k, BytesReceived: 1000 * k},
			{Name: "MPI_Reduce", Calls: k, TimeNs: 100e6 * k, WaitNs: 250e6 * k},
		},
		Regions: []*agentpb.Region{{Name: "solve", Entries: k, TimeNs: 4e9 * k, MpiTimeNs: 1e9 * k,
			P2P: &agentpb.Traffic{Bytes: 1000 * k, Msgs: 10 * k}}},
	}
	p2p := &agentpb.Traffic{Bytes: 1000 * k, Msgs: 10 * k}
	hist := make([]uint64, 11)
	hist[8] = 10 * k // 100-byte messages: 2^7 <= 100 < 2^8
	pt := &agentpb.PeerTraffic{Peer: uint32(peer), P2P: p2p, SizeHistogram: hist}
	coll := &agentpb.Traffic{Bytes: 100 * k, Msgs: k}
	if rank != 0 {
		if peer == 0 {
			pt.Coll = coll
		} else {
			d.Peers = append(d.Peers, &agentpb.PeerTraffic{Peer: 0, Coll: coll})
		}
	}
	d.Peers = append(d.Peers, pt)
	// Per node.
	byNode := map[string]*agentpb.NodeTraffic{}
	for _, p := range d.Peers {
		nt := byNode[node(int(p.Peer))]
		if nt == nil {
			nt = &agentpb.NodeTraffic{Node: node(int(p.Peer)), P2P: &agentpb.Traffic{}, Coll: &agentpb.Traffic{}}
			byNode[node(int(p.Peer))] = nt
			d.Nodes = append(d.Nodes, nt)
		}
		if p.P2P != nil {
			nt.P2P.Bytes += p.P2P.Bytes
			nt.P2P.Msgs += p.P2P.Msgs
		}
		if p.Coll != nil {
			nt.Coll.Bytes += p.Coll.Bytes
			nt.Coll.Msgs += p.Coll.Msgs
		}
		tr := &d.Process.InterNode
		if node(int(p.Peer)) == node(rank) {
			tr = &d.Process.IntraNode
		}
		if *tr == nil {
			*tr = &agentpb.Traffic{}
		}
		for _, c := range []*agentpb.Traffic{p.P2P, p.Coll} {
			if c != nil {
				(*tr).Bytes += c.Bytes
				(*tr).Msgs += c.Msgs
			}
		}
	}
	return d
}

func encode(t testing.TB, d *agentpb.Datagram) []byte {
	t.Helper()
	b, err := proto.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// split cuts a snapshot into chunks of at most per peer rows each.
func split(d *agentpb.Datagram, per int) []*agentpb.Datagram {
	head := proto.Clone(d).(*agentpb.Datagram)
	head.Peers = nil
	out := []*agentpb.Datagram{head}
	for i := 0; i < len(d.Peers); i += per {
		c := &agentpb.Datagram{Version: 1, JobId: d.JobId, Rank: d.Rank, WorldSize: d.WorldSize, Seq: d.Seq,
			TimeUnixNs: d.TimeUnixNs, StartUnixNs: d.StartUnixNs, Final: d.Final}
		c.Peers = d.Peers[i:min(i+per, len(d.Peers))]
		out = append(out, c)
	}
	for i, c := range out {
		c.Chunk, c.Chunks = uint32(i), uint32(len(out))
	}
	return out
}

func reasonOf(err error) string {
	var re *RejectError
	if errors.As(err, &re) {
		return re.Reason
	}
	return ""
}

func TestDecodeRejects(t *testing.T) {
	lim := Limits{}.WithDefaults()
	valid := snapshot("42", 1, 4, 0, false)
	if _, err := Decode(encode(t, valid), lim); err != nil {
		t.Fatalf("valid datagram rejected: %v", err)
	}
	mod := func(f func(d *agentpb.Datagram)) []byte {
		d := proto.Clone(valid).(*agentpb.Datagram)
		f(d)
		return encode(t, d)
	}
	full := encode(t, valid)
	for _, c := range []struct {
		name, reason string
		b            []byte
	}{
		{"empty", ReasonEmpty, nil},
		{"truncated", ReasonMalformed, full[:len(full)-3]},
		{"garbage", ReasonMalformed, []byte{0xff, 0xff, 0xff, 0xff, 0xff}},
		{"oversized", ReasonOversized, make([]byte, 70000)},
		{"version 2", ReasonVersion, mod(func(d *agentpb.Datagram) { d.Version = 2 })},
		{"version 0", ReasonVersion, mod(func(d *agentpb.Datagram) { d.Version = 0 })},
		{"no job", ReasonJobID, mod(func(d *agentpb.Datagram) { d.JobId = "" })},
		{"job with slash", ReasonJobID, mod(func(d *agentpb.Datagram) { d.JobId = "../etc" })},
		{"long job", ReasonJobID, mod(func(d *agentpb.Datagram) { d.JobId = strings.Repeat("j", 200) })},
		{"world 0", ReasonWorldSize, mod(func(d *agentpb.Datagram) { d.WorldSize, d.Rank = 0, 0 })},
		{"huge world", ReasonWorldSize, mod(func(d *agentpb.Datagram) { d.WorldSize = 1 << 30 })},
		{"rank out of world", ReasonRank, mod(func(d *agentpb.Datagram) { d.Rank = 4 })},
		{"chunk out of chunks", ReasonChunk, mod(func(d *agentpb.Datagram) { d.Chunk = 1 })},
		{"no chunks", ReasonChunk, mod(func(d *agentpb.Datagram) { d.Chunks = 0 })},
		{"too many chunks", ReasonChunk, mod(func(d *agentpb.Datagram) { d.Chunks = 1 << 20 })},
		{"process in chunk 1", ReasonChunk, mod(func(d *agentpb.Datagram) { d.Chunk, d.Chunks = 1, 2 })},
		{"no time", ReasonTime, mod(func(d *agentpb.Datagram) { d.TimeUnixNs = 0 })},
		{"start after time", ReasonTime, mod(func(d *agentpb.Datagram) { d.StartUnixNs = d.TimeUnixNs + 1 })},
		{"peer out of world", ReasonPeer, mod(func(d *agentpb.Datagram) { d.Peers[0].Peer = 99 })},
		{"peer twice", ReasonPeer, mod(func(d *agentpb.Datagram) {
			d.Peers = append(d.Peers, &agentpb.PeerTraffic{Peer: d.Peers[0].Peer, Rma: &agentpb.Traffic{Bytes: 1}})
		})},
		{"long histogram", ReasonHistogram, mod(func(d *agentpb.Datagram) { d.Peers[0].SizeHistogram = make([]uint64, 66) })},
		{"long node name", ReasonString, mod(func(d *agentpb.Datagram) { d.Process.Node = strings.Repeat("n", 300) })},
		{"empty function", ReasonString, mod(func(d *agentpb.Datagram) { d.Functions[0].Name = "" })},
		{"NaN seconds", ReasonValue, mod(func(d *agentpb.Datagram) { d.Process.WallSeconds = nan() })},
		{"negative seconds", ReasonValue, mod(func(d *agentpb.Datagram) { d.Process.CpuUserSeconds = -1 })},
		{"too many peers", ReasonTooMany, mod(func(d *agentpb.Datagram) {
			for range 4 {
				d.Peers = append(d.Peers, &agentpb.PeerTraffic{Peer: 2})
			}
		})},
	} {
		_, err := Decode(c.b, lim)
		if got := reasonOf(err); got != c.reason {
			t.Errorf("%s: rejected as %q (%v), want %q", c.name, got, err, c.reason)
		}
	}
}

func nan() float64 { var z float64; return z / z }

type sink struct {
	saved   []*store.Job
	samples []store.ProcessSample
}

func newTracker(opt Options) (*Tracker, *sink, *Metrics, *prometheus.Registry) {
	s := &sink{}
	opt.SaveJob = func(j *store.Job) { s.saved = append(s.saved, j) }
	opt.Samples = func(x []store.ProcessSample) { s.samples = append(s.samples, x...) }
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	return NewTracker(opt, m), s, m, reg
}

func add(t *testing.T, tr *Tracker, d *agentpb.Datagram, now time.Time) error {
	t.Helper()
	b := encode(t, d)
	dd, err := Decode(b, tr.Limits())
	if err != nil {
		return err
	}
	return tr.Add(dd, len(b), now)
}

func value(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

func dropped(m *Metrics, reason string) float64 { return value(m.dropped.WithLabelValues(reason)) }

func TestTrackerJob(t *testing.T) {
	tr, sk, m, _ := newTracker(Options{})
	now := t0
	const n = 4
	for seq := uint64(0); seq < 3; seq++ {
		for r := range n {
			for _, c := range split(snapshot("7", r, n, seq, seq == 2), 1) {
				if err := add(t, tr, c, now); err != nil {
					t.Fatalf("seq %d rank %d chunk %d: %v", seq, r, c.Chunk, err)
				}
			}
		}
		now = now.Add(5 * time.Second)
		tr.Tick(now)
	}
	live := tr.Publish(now)
	j := live.Jobs["7"]
	if j == nil {
		t.Fatal("job not live")
	}
	if j.State != store.JobFinished || j.EndReason != store.EndFinal || j.Finalized != n || j.Reporting != n || j.Nodes != 2 {
		t.Errorf("summary %+v", j.JobSummary)
	}
	// 3 intervals: each rank sent 3000 bytes p2p; ranks 1..3 300 bytes coll.
	if j.Traffic.P2P.Bytes != 4*3000 || j.Traffic.Coll.Bytes != 3*300 || j.Traffic.P2P.Msgs != 4*30 {
		t.Errorf("traffic %+v", j.Traffic)
	}
	if j.IntraNode.Bytes+j.InterNode.Bytes != j.Total.Bytes {
		t.Errorf("intra %d + inter %d != total %d", j.IntraNode.Bytes, j.InterNode.Bytes, j.Total.Bytes)
	}
	if !j.Start.Equal(t0) || !j.End.Equal(t0.Add(15*time.Second)) || j.Duration != 15 {
		t.Errorf("start %s end %s duration %g", j.Start, j.End, j.Duration)
	}
	if j.CPUPercent != 90 || j.MPIPercent != 20 {
		t.Errorf("cpu %g%% mpi %g%%", j.CPUPercent, j.MPIPercent)
	}
	// Deltas: 2 per rank (seq 1 and 2 against the one before).
	if len(sk.samples) != 2*n {
		t.Fatalf("%d samples, want %d", len(sk.samples), 2*n)
	}
	for _, s := range sk.samples {
		if s.Span != 5*time.Second || s.Traffic.P2P.Bytes != 1000 || s.CPUUser != 4 || s.IOWrite != 4096 || s.Wait != 0.25 {
			t.Errorf("sample %+v", s)
		}
	}
	// Saved when it finished, with all ranks.
	last := sk.saved[len(sk.saved)-1]
	if last.State != store.JobFinished || len(last.Processes) != n {
		t.Errorf("last save: state %s, %d processes", last.State, len(last.Processes))
	}
	mx, err := RankMatrix(j, "p2p", "bytes")
	if err != nil {
		t.Fatal(err)
	}
	for r := range n {
		for c := range n {
			want := uint64(0)
			if c == (r+1)%n {
				want = 3000
			}
			if mx.Values[r][c] != want {
				t.Errorf("p2p[%d][%d] = %d, want %d", r, c, mx.Values[r][c], want)
			}
		}
	}
	nm, _ := NodeMatrix(j, "all", "bytes")
	// node0 = ranks 0,1; node1 = ranks 2,3. p2p 0->1 intra, 1->2 inter, 2->3 intra, 3->0 inter;
	// collectives 1->0 intra, 2->0 and 3->0 inter.
	want := [][]uint64{{3000 + 300, 3000}, {300 + 3000 + 300, 3000}}
	if fmt.Sprint(nm.Values) != fmt.Sprint(want) || fmt.Sprint(nm.Labels) != "[node0 node1]" {
		t.Errorf("node matrix %v %v, want %v", nm.Labels, nm.Values, want)
	}
	pr := BuildProfile(j)
	if pr.Functions[0] != "MPI_Recv" || pr.Totals[0].Calls != 4*30 || pr.TimeNS[0][0] != 1500e6 {
		t.Errorf("profile %+v", pr)
	}
	h := BuildHistogram(j, 1)
	if h.Job[8] != 4*30 || h.Peers[2][8] != 30 {
		t.Errorf("histogram %+v", h)
	}
	if rg := BuildRegions(j); len(rg) != 1 || rg[0].Entries != 12 || len(rg[0].Ranks) != n {
		t.Errorf("regions %+v", rg)
	}
	// Chunks per snapshot: a head, then one per peer row (ranks 1 and 2
	// have two peers).
	if got := value(m.accepted); got != 3*10 {
		t.Errorf("accepted %g, want %d", got, 3*10)
	}
	// Late datagrams of the finished job are stale.
	if err := add(t, tr, snapshot("7", 0, n, 1, false), now); reasonOf(err) != ReasonStale {
		t.Errorf("late datagram: %v", err)
	}
}

func TestTrackerRejects(t *testing.T) {
	tr, _, m, _ := newTracker(Options{ReassemblyTimeout: time.Second})
	now := t0
	must := func(d *agentpb.Datagram) {
		t.Helper()
		if err := add(t, tr, d, now); err != nil {
			t.Fatal(err)
		}
	}
	must(snapshot("9", 0, 4, 0, false))
	must(snapshot("9", 0, 4, 1, false))
	// Same snapshot again, and an older one.
	if err := add(t, tr, snapshot("9", 0, 4, 1, false), now); reasonOf(err) != ReasonStale {
		t.Errorf("repeat: %v", err)
	}
	// A counter going backwards within the run.
	back := snapshot("9", 0, 4, 2, false)
	back.Process.CpuUserSeconds = 1
	if err := add(t, tr, back, now); reasonOf(err) != ReasonBackwards {
		t.Errorf("backwards: %v", err)
	}
	// Times may wobble a little (agent clock conversion), counts may not.
	jitter := snapshot("9", 0, 4, 2, false)
	jitter.Functions[0].TimeNs = 400e6*2 - 500
	jitter.Process.MpiSeconds = 1.9999
	if err := add(t, tr, jitter, now); err != nil {
		t.Errorf("time jitter rejected: %v", err)
	}
	back = snapshot("9", 0, 4, 3, false)
	back.Functions[0].Calls = 1
	if err := add(t, tr, back, now); reasonOf(err) != ReasonBackwards {
		t.Errorf("calls backwards: %v", err)
	}
	back = snapshot("9", 0, 4, 3, false)
	back.Functions[0].TimeNs = 100e6
	if err := add(t, tr, back, now); reasonOf(err) != ReasonBackwards {
		t.Errorf("time far backwards: %v", err)
	}
	back = snapshot("9", 0, 4, 3, false)
	back.Peers[0].P2P.Bytes = 10
	if err := add(t, tr, back, now); reasonOf(err) != ReasonBackwards {
		t.Errorf("peer backwards: %v", err)
	}
	// A destination node's traffic going backwards, whichever row it is
	// (the rows arrive unsorted; a node new in this snapshot is no decrease).
	for i := range snapshot("9", 0, 4, 3, false).Nodes {
		back = snapshot("9", 0, 4, 3, false)
		back.Nodes = append([]*agentpb.NodeTraffic{{Node: "node9", P2P: &agentpb.Traffic{Bytes: 1, Msgs: 1}}}, back.Nodes...)
		slices.Reverse(back.Nodes)
		n := back.Nodes[i]
		if n.P2P.Bytes == 0 {
			continue
		}
		n.P2P.Bytes = 1
		if err := add(t, tr, back, now); reasonOf(err) != ReasonBackwards || !strings.Contains(err.Error(), "node "+n.Node) {
			t.Errorf("node %s backwards: %v", n.Node, err)
		}
	}
	// A new run (later start) may begin from zero.
	restart := snapshot("9", 0, 4, 0, false)
	restart.StartUnixNs += int64(time.Minute)
	restart.TimeUnixNs += int64(time.Minute)
	if err := add(t, tr, restart, now); err != nil {
		t.Errorf("new run rejected: %v", err)
	}
	// World size changes.
	if err := add(t, tr, snapshot("9", 1, 8, 0, false), now); reasonOf(err) != ReasonWorldChanged {
		t.Errorf("world change: %v", err)
	}
	// Chunks: duplicate, then a snapshot that never completes.
	parts := split(snapshot("9", 2, 4, 0, false), 1)
	must(parts[0])
	if err := add(t, tr, parts[0], now); reasonOf(err) != ReasonDuplicate {
		t.Errorf("duplicate chunk: %v", err)
	}
	now = now.Add(2 * time.Second)
	tr.Tick(now)
	if got := dropped(m, ReasonIncomplete); got != 1 {
		t.Errorf("incomplete = %g, want 1", got)
	}
	// Duplicate peers across chunks.
	d := snapshot("9", 3, 4, 0, false)
	d.Peers = append(d.Peers, proto.Clone(d.Peers[0]).(*agentpb.PeerTraffic))
	var last error
	for _, c := range split(d, 1) {
		last = add(t, tr, c, now)
	}
	if reasonOf(last) != ReasonPeer {
		t.Errorf("duplicate peer: %v", last)
	}
	for _, r := range []string{ReasonStale, ReasonBackwards, ReasonWorldChanged, ReasonDuplicate, ReasonPeer} {
		if dropped(m, r) == 0 {
			t.Errorf("reason %s not counted", r)
		}
	}
}

func TestTrackerTimeoutAndBounds(t *testing.T) {
	tr, sk, m, _ := newTracker(Options{JobTimeout: 10 * time.Second, MaxJobs: 2, Linger: time.Minute})
	now := t0
	for _, id := range []string{"a", "b"} {
		if err := add(t, tr, snapshot(id, 0, 2, 0, false), now); err != nil {
			t.Fatal(err)
		}
	}
	if err := add(t, tr, snapshot("c", 0, 2, 0, false), now); reasonOf(err) != ReasonTooManyJobs {
		t.Errorf("third job: %v", err)
	}
	now = now.Add(11 * time.Second)
	tr.Tick(now)
	j := tr.Publish(now).Jobs["a"]
	if j == nil || j.State != store.JobFinished || j.EndReason != store.EndTimeout {
		t.Fatalf("job a after timeout: %+v", j)
	}
	if len(sk.saved) < 2 {
		t.Errorf("timed-out jobs not saved: %d saves", len(sk.saved))
	}
	now = now.Add(2 * time.Minute)
	tr.Tick(now)
	if l := tr.Publish(now); len(l.Jobs) != 0 {
		t.Errorf("finished jobs still live after linger: %v", l.Jobs)
	}
	if err := add(t, tr, snapshot("c", 0, 2, 0, false), now); err != nil {
		t.Errorf("room again: %v", err)
	}
	_ = m
}

// TestListener sends hostile and valid datagrams over a real UDP socket:
// the bad ones are counted by reason, the good ones all arrive, each
// rank's in the order sent (a reordered one would be rejected as stale),
// whether decoded on the reader or on several workers, and queued for one
// aggregator or several.
func TestListener(t *testing.T) {
	for _, n := range []struct{ decoders, aggregators int }{{1, 1}, {4, 3}} {
		t.Run(fmt.Sprintf("decoders=%d,aggregators=%d", n.decoders, n.aggregators), func(t *testing.T) {
			testListener(t, n.decoders, n.aggregators)
		})
	}
}

// queuedItem is an item and the index of the queue it came from.
type queuedItem struct {
	Item
	queue int
}

// queued receives what a listener queues for its aggregators, each
// queue's in order, and closes when they all are.
func queued(l *Listener) <-chan queuedItem {
	out := make(chan queuedItem)
	var wg sync.WaitGroup
	for i, q := range l.Queues() {
		wg.Go(func() {
			for it := range q {
				out <- queuedItem{it, i}
			}
		})
	}
	go func() { wg.Wait(); close(out) }()
	return out
}

func testListener(t *testing.T, decoders, aggregators int) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	l, conn, stop := runListener(t, ListenOptions{Queue: 1 << 16, Limits: Limits{MaxBytes: 60000}, Decoders: decoders,
		Aggregators: aggregators}, m)
	if len(l.Queues()) != aggregators {
		t.Fatalf("%d queues for %d aggregators", len(l.Queues()), aggregators)
	}
	items := queued(l)
	queueOf := map[string]int{} // each job's
	good := encode(t, snapshot("1", 0, 2, 0, false))
	bad := [][]byte{{}, good[:len(good)/2], encode(t, &agentpb.Datagram{Version: 9, JobId: "x", WorldSize: 1, Chunks: 1, TimeUnixNs: 1}),
		make([]byte, 65000), []byte("GET / HTTP/1.1\r\n\r\n")}
	const rounds, ranks = 200, 6 // three jobs of two ranks
	for i := range rounds {
		for _, b := range bad {
			conn.Write(b)
		}
		for k := range ranks {
			conn.Write(encode(t, snapshot(strconv.Itoa(k%3), k/3, 2, uint64(i), false)))
		}
		if i%20 == 0 {
			time.Sleep(time.Millisecond) // stay within the socket buffer
		}
	}
	got := 0
	deadline := time.After(5 * time.Second)
	tr := NewTracker(Options{}, m)
loop:
	for got < rounds*ranks {
		select {
		case it := <-items:
			if q, ok := queueOf[it.D.JobId]; ok && q != it.queue {
				t.Errorf("job %s queued for aggregators %d and %d", it.D.JobId, q, it.queue)
			}
			queueOf[it.D.JobId] = it.queue
			if err := tr.Add(it.D, it.Size, it.At); err != nil {
				t.Errorf("valid datagram of job %s rank %d seq %d rejected: %v", it.D.JobId, it.D.Rank, it.D.Seq, err)
			}
			got++
		case <-deadline:
			break loop
		}
	}
	if got != rounds*ranks {
		t.Errorf("received %d valid datagrams of %d", got, rounds*ranks)
	}
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	if _, ok := <-items; ok {
		t.Error("queues not closed after Run")
	}
	if dropped(m, ReasonMalformed) < rounds || dropped(m, ReasonVersion) != rounds || dropped(m, ReasonOversized) != rounds || dropped(m, ReasonEmpty) != rounds {
		t.Errorf("drops: malformed %g version %g oversized %g empty %g", dropped(m, ReasonMalformed), dropped(m, ReasonVersion),
			dropped(m, ReasonOversized), dropped(m, ReasonEmpty))
	}
	if l.ReadBuffer() <= 0 {
		t.Errorf("read buffer %d", l.ReadBuffer())
	}
}

// Datagrams of one rank always go to one decode worker; ranks spread.
func TestShard(t *testing.T) {
	counts := make([]int, 4)
	for job := range 8 {
		for rank := range 64 {
			b := encode(t, snapshot(strconv.Itoa(job), rank, 64, 0, false))
			w := shard(b, 4)
			if again := shard(encode(t, snapshot(strconv.Itoa(job), rank, 64, 9, true)), 4); again != w {
				t.Fatalf("job %d rank %d: worker %d, then %d", job, rank, w, again)
			}
			counts[w]++
		}
	}
	for w, c := range counts {
		if c < 512/4/2 {
			t.Errorf("worker %d got %d of 512 ranks: %v", w, c, counts)
		}
	}
	if shard([]byte{0xff}, 4) != 0 {
		t.Error("a broken datagram not on the first worker")
	}
}

// runListener starts a listener on a loopback port with a client socket
// to it; stop ends Run and returns its error.
func runListener(t *testing.T, opt ListenOptions, m *Metrics) (l *Listener, conn *net.UDPConn, stop func() error) {
	t.Helper()
	l, err := Listen("127.0.0.1:0", opt, m)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	if conn, err = net.DialUDP("udp", nil, l.Addr()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return l, conn, func() error { cancel(); return <-done }
}

// TestQueueFull: a stalled aggregator makes the reader drop, not block.
func TestQueueFull(t *testing.T) {
	m := NewMetrics(nil)
	// Two aggregators' queues of 2; one job's datagrams all go to one.
	_, conn, stop := runListener(t, ListenOptions{Queue: 4, Aggregators: 2}, m)
	b := encode(t, snapshot("1", 0, 2, 0, false))
	for range 20 {
		conn.Write(b)
	}
	deadline := time.Now().Add(5 * time.Second)
	for dropped(m, ReasonQueueFull) < 18 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := dropped(m, ReasonQueueFull); got != 18 {
		t.Errorf("queue_full = %g, want 18", got)
	}
	stop()
}

func FuzzDecodeDatagram(f *testing.F) {
	f.Add(encode(f, snapshot("42", 1, 4, 0, false)))
	f.Add(encode(f, snapshot("42", 3, 4, 7, true)))
	for _, c := range split(snapshot("j", 2, 4, 1, false), 1) {
		f.Add(encode(f, c))
	}
	f.Add([]byte{})
	f.Add([]byte{0x08, 0x01})
	// With a GPU section (field 22): as an agent with CUDA sends it, one
	// with its section only, and one in chunk 1 (refused).
	f.Add(encode(f, withGPU(snapshot("42", 1, 4, 0, false), 1)))
	f.Add(encode(f, &agentpb.Datagram{Version: 1, JobId: "g", Rank: 0, WorldSize: 2, Chunks: 1, TimeUnixNs: 1, Gpu: gpuSection(3)}))
	f.Add(encode(f, &agentpb.Datagram{Version: 1, JobId: "g", Rank: 0, WorldSize: 2, Chunk: 1, Chunks: 2, TimeUnixNs: 1, Gpu: &agentpb.Gpu{Probed: true}}))
	lim := Limits{}.WithDefaults()
	tr := NewTracker(Options{MaxJobs: 64, MaxPendingBytes: 1 << 20}, nil)
	now := t0
	// The verification path: each input also goes through a verifier as
	// sent, and signed under a session it knows (credential appended, mac
	// last), so that what is accepted reaches a tracker of verified jobs.
	fm := newFakeMunge()
	cred, key := fm.issue(1001, "42", t0, 1<<20*time.Hour)
	v := newVerifier(AuthOptions{Decode: fm.Decode, UserName: users}, nil, 64)
	vtr := NewTracker(Options{MaxJobs: 64, MaxPendingBytes: 1 << 20}, nil)
	credField := protowire.AppendBytes(protowire.AppendTag(nil, 20, protowire.BytesType), cred)
	f.Add(signed(f, snapshot("42", 0, 2, 0, false), cred, key))
	f.Fuzz(func(t *testing.T, b []byte) {
		sameAsProto(t, b)
		fuzzVerify(t, v, vtr, b, lim, now)
		fuzzVerify(t, v, vtr, Sign(append(slices.Clip(b), credField...), key), lim, now)
		d, err := Decode(b, lim)
		if err != nil {
			if reasonOf(err) == "" {
				t.Fatalf("error without a reason: %v", err)
			}
			return
		}
		if d.Rank >= d.WorldSize || d.Chunk >= d.Chunks || d.Version != WireVersion {
			t.Fatalf("accepted an invalid datagram: %v", d)
		}
		if g := d.Gpu; g != nil {
			if d.Chunk != 0 || len(g.Functions) > lim.MaxFunctions || len(g.Peers) > int(d.WorldSize) || len(g.NcclOps) > lim.MaxNCCLOps || len(g.NcclPeers) > lim.MaxNCCLPeers {
				t.Fatalf("accepted a bad gpu section: %v", g)
			}
			for _, p := range g.Peers {
				if p.Peer >= d.WorldSize {
					t.Fatalf("accepted gpu peer %d of world size %d", p.Peer, d.WorldSize)
				}
			}
		}
		last := -1
		for p := range d.peers.rows.All() {
			if p.Peer >= int(d.WorldSize) || p.Peer <= last || len(p.Histogram) > lim.MaxBins {
				t.Fatalf("accepted a bad peer, or one out of order: %+v after peer %d", p, last)
			}
			last = p.Peer
		}
		now = now.Add(time.Millisecond)
		if err := tr.Add(d, len(b), now); err != nil && reasonOf(err) == "" {
			t.Fatalf("tracker error without a reason: %v", err)
		}
		tr.Tick(now)
		l := tr.Publish(now)
		for _, j := range l.Jobs {
			if j.Ranks <= lim.MaxWorldSize && j.Ranks <= 64 {
				if _, err := RankMatrix(j, "all", "bytes"); err != nil {
					t.Fatal(err)
				}
			}
			NodeMatrix(j, "p2p", "msgs")
			BuildProfile(j)
			BuildHistogram(j, 0)
			BuildRegions(j)
		}
	})
}

func fuzzVerify(t *testing.T, v *verifier, tr *Tracker, raw []byte, lim Limits, now time.Time) {
	d, err := Decode(raw, lim)
	if err != nil {
		return
	}
	check := func(it Item, rerr *RejectError) {
		if rerr != nil {
			if rerr.Reason == "" {
				t.Fatalf("verifier error without a reason: %v", rerr)
			}
			return
		}
		if !it.Verified || it.UID != 1001 || it.User != "alice" || it.D.JobId != "42" || (it.D.Process != nil && it.D.Process.User != "alice") {
			t.Fatalf("accepted %+v", it)
		}
		if err := tr.AddItem(it); err != nil && reasonOf(err) == "" {
			t.Fatalf("tracker error without a reason: %v", err)
		}
	}
	var ms macState
	switch vd, it, rerr := v.check(&ms, d, raw, now); vd {
	case accepted:
		check(it, nil)
	case rejected:
		check(it, rerr)
	}
	for len(v.queue) > 0 {
		v.resolve(<-v.queue, now, func(r result) { check(r.it, r.err) })
	}
	tr.Tick(now)
}

// TestPublishAfterFinal: the view published after the last rank's final
// report shows the job finished (a save rebuilding the view must not hide
// it from Publish).
func TestPublishAfterFinal(t *testing.T) {
	tr, _, _, _ := newTracker(Options{})
	for seq := uint64(0); seq < 2; seq++ {
		for r := range 2 {
			if err := add(t, tr, snapshot("f", r, 2, seq, seq == 1), t0); err != nil {
				t.Fatal(err)
			}
		}
		if seq == 0 {
			tr.Publish(t0)
		}
	}
	j := tr.Publish(t0).Jobs["f"].Full()
	if j.State != store.JobFinished || j.Finalized != 2 || j.Processes[0].Seq != 1 {
		t.Errorf("published %+v", j.JobSummary)
	}
}

// A job whose agent says it reports every 45 s is not timed out between
// its first and second snapshots, however short --job-timeout is.
func TestAgentIntervalSetsTimeout(t *testing.T) {
	tr, _, _, _ := newTracker(Options{JobTimeout: 10 * time.Second, JobTimeoutIntervals: 6, Linger: time.Minute})
	d := snapshot("slow", 0, 2, 0, false)
	d.IntervalNs = uint64(45 * time.Second)
	now := t0
	if err := add(t, tr, d, now); err != nil {
		t.Fatal(err)
	}
	now = now.Add(50 * time.Second)
	tr.Tick(now)
	if j := tr.Publish(now).Jobs["slow"]; j == nil || j.State == store.JobFinished {
		t.Fatalf("job timed out within one agent interval: %+v", j)
	}
	now = now.Add(6 * 45 * time.Second)
	tr.Tick(now)
	if j := tr.Publish(now).Jobs["slow"]; j == nil || j.State != store.JobFinished {
		t.Fatalf("job not timed out after 6 intervals of silence: %+v", j)
	}
}

// A large job's view is rebuilt at most every ViewEvery (a rebuild copies
// every rank); a small one's on every Publish; a finished large job's at
// once.
func TestLargeJobViewThrottled(t *testing.T) {
	tr, _, _, _ := newTracker(Options{LargeJob: 4, ViewEvery: time.Second})
	const big, small = 4, 2
	now := t0
	for r := range big {
		if err := add(t, tr, snapshot("big", r, big, 0, false), now); err != nil {
			t.Fatal(err)
		}
	}
	for r := range small {
		if err := add(t, tr, snapshot("small", r, small, 0, false), now); err != nil {
			t.Fatal(err)
		}
	}
	if l := tr.Publish(now); l.Jobs["big"].Reporting != big || l.Jobs["small"].Reporting != small {
		t.Fatalf("first publish: big %+v small %+v", l.Jobs["big"], l.Jobs["small"])
	}
	now = now.Add(250 * time.Millisecond)
	if err := add(t, tr, snapshot("big", 0, big, 1, false), now); err != nil {
		t.Fatal(err)
	}
	if err := add(t, tr, snapshot("small", 0, small, 1, false), now); err != nil {
		t.Fatal(err)
	}
	l := tr.Publish(now)
	if got := l.Jobs["small"].Full().Processes[0].Seq; got != 1 {
		t.Errorf("small job not republished at once: rank 0 seq %d", got)
	}
	if got := l.Jobs["big"].Full().Processes[0].Seq; got != 0 {
		t.Errorf("large job republished within ViewEvery: rank 0 seq %d", got)
	}
	now = now.Add(time.Second)
	if got := tr.Publish(now).Jobs["big"].Full().Processes[0].Seq; got != 1 {
		t.Errorf("large job not republished after ViewEvery: rank 0 seq %d", got)
	}
	// Ranks stay in rank order however they arrive.
	for i, p := range tr.Publish(now).Jobs["big"].Full().Processes {
		if p.Rank != i {
			t.Fatalf("process %d is rank %d", i, p.Rank)
		}
	}
	now = now.Add(100 * time.Millisecond)
	for r := range big {
		if err := add(t, tr, snapshot("big", r, big, 2, true), now); err != nil {
			t.Fatal(err)
		}
	}
	if j := tr.Publish(now).Jobs["big"]; j.State != store.JobFinished || j.Finalized != big {
		t.Errorf("finished large job not republished at once: %+v", j.JobSummary)
	}
}

// Ranks share one copy of the strings they repeat.
func TestTrackerInternsStrings(t *testing.T) {
	tr, _, _, _ := newTracker(Options{})
	for r := range 4 {
		if err := add(t, tr, snapshot("i", r, 4, 0, false), t0); err != nil {
			t.Fatal(err)
		}
	}
	ps := tr.Publish(t0).Jobs["i"].Full().Processes
	same := func(a, b string) bool { return len(a) > 0 && unsafe.StringData(a) == unsafe.StringData(b) }
	if !same(ps[0].User, ps[3].User) || !same(ps[0].Node, ps[1].Node) || !same(ps[0].Functions[0].Name, ps[2].Functions[0].Name) {
		t.Errorf("strings not interned: %q %q %q", ps[0].User, ps[0].Node, ps[0].Functions[0].Name)
	}
	if ps[0].Node != "node0" || ps[2].Node != "node1" || ps[0].Program != "ring" {
		t.Errorf("wrong strings: %q %q %q", ps[0].Node, ps[2].Node, ps[0].Program)
	}
	// Later snapshots keep sharing them, also when a rank's functions come
	// in another order and one of its strings changes.
	for r := range 4 {
		d := snapshot("i", r, 4, 1, false)
		if r == 2 {
			slices.Reverse(d.Functions)
			d.Process.Program = "ring2"
		}
		if err := add(t, tr, d, t0); err != nil {
			t.Fatal(err)
		}
	}
	ps = tr.Publish(t0.Add(time.Second)).Jobs["i"].Full().Processes
	last := len(ps[2].Functions) - 1
	if !same(ps[0].User, ps[2].User) || !same(ps[1].Node, ps[0].Node) || ps[2].Program != "ring2" ||
		ps[2].Functions[last].Name != ps[0].Functions[0].Name || !same(ps[2].Functions[last].Name, ps[0].Functions[0].Name) {
		t.Errorf("second snapshots: %q %q %q %q", ps[2].User, ps[2].Program, ps[2].Functions[last].Name, ps[0].Functions[0].Name)
	}
}

// Every applied snapshot is observed once in the visible-delay histogram,
// when the first published view shows it: a throttled large job's at its
// next rebuild, not before.
func TestVisibleDelayObserved(t *testing.T) {
	tr, _, m, _ := newTracker(Options{LargeJob: 4, ViewEvery: time.Second})
	count := func() uint64 {
		var pb dto.Metric
		if err := m.visibleRecv.(prometheus.Metric).Write(&pb); err != nil {
			t.Fatal(err)
		}
		return pb.GetHistogram().GetSampleCount()
	}
	now := t0
	for r := range 4 {
		if err := add(t, tr, snapshot("big", r, 4, 0, false), now); err != nil {
			t.Fatal(err)
		}
	}
	if err := add(t, tr, snapshot("small", 0, 2, 0, false), now); err != nil {
		t.Fatal(err)
	}
	if got := count(); got != 0 {
		t.Fatalf("%d observed before any publish", got)
	}
	tr.Publish(now)
	if got := count(); got != 5 {
		t.Fatalf("first publish: %d observed, want 5", got)
	}
	now = now.Add(250 * time.Millisecond)
	if err := add(t, tr, snapshot("big", 0, 4, 1, false), now); err != nil {
		t.Fatal(err)
	}
	if err := add(t, tr, snapshot("small", 1, 2, 0, false), now); err != nil {
		t.Fatal(err)
	}
	tr.Publish(now)
	if got := count(); got != 6 {
		t.Fatalf("throttled big job: %d observed, want 6 (the small job's only)", got)
	}
	tr.Publish(now.Add(time.Second))
	if got := count(); got != 7 {
		t.Fatalf("after the big job's rebuild: %d observed, want 7", got)
	}
	tr.Publish(now.Add(2 * time.Second))
	if got := count(); got != 7 {
		t.Fatalf("republishing counted again: %d", got)
	}
}

// A running job's summary is saved every SaveEvery, its changed processes
// every ProcessSaveEvery (the first time within ProcessSaveEvery of its
// first snapshot, at a point that differs from job to job), and every
// process again when it ends.
func TestProcessesSavedLessOften(t *testing.T) {
	tr, sk, _, _ := newTracker(Options{SaveEvery: time.Second, ProcessSaveEvery: 10 * time.Second})
	const jobs = 20
	first := map[string]int{} // each job's first tick with processes
	// Ticks at 3, 6, ... 24 s.
	now := saveTicks(t, tr, sk, "s", jobs, 8, func(tick int, _ time.Time, j *store.Job) {
		if f, ok := first[j.ID]; !ok {
			if tick > 3 || len(j.Processes) != 2 {
				t.Errorf("job %s: first processes saved at tick %d: %d", j.ID, tick, len(j.Processes))
			}
			first[j.ID] = tick
		} else if tick != f+4 { // 10 s later: the fourth tick after
			t.Errorf("job %s: processes saved at ticks %d and %d", j.ID, f, tick)
		}
	})
	if len(first) != jobs {
		t.Fatalf("%d of %d jobs saved their processes", len(first), jobs)
	}
	spread := map[int]bool{}
	for _, tick := range first {
		spread[tick] = true
	}
	if len(spread) < 2 {
		t.Errorf("every job saved its processes first at tick %v", first)
	}
	for r := range 2 {
		if err := add(t, tr, snapshot("s0", r, 2, 8, true), now); err != nil {
			t.Fatal(err)
		}
	}
	if len(sk.saved) != 1 || len(sk.saved[0].Processes) != 2 {
		t.Fatalf("processes saved when the job ended: %v", sk.saved)
	}
}

// Ranks' destination nodes are packed against a name table per job; a
// job whose agents keep inventing node names gets a new table past a
// bound, and every rank's rows still read back as sent.
func TestNodeNameTableBounded(t *testing.T) {
	tr, _, _, _ := newTracker(Options{Limits: Limits{MaxNodes: 4}})
	now := t0
	for seq := uint64(0); seq < 20; seq++ {
		for r := range 4 {
			d := snapshot("names", r, 4, seq, false)
			d.Nodes = d.Nodes[:0]
			for k := range 3 {
				d.Nodes = append(d.Nodes, &agentpb.NodeTraffic{Node: fmt.Sprintf("n%d-%d-%d", seq, r, k), P2P: &agentpb.Traffic{Bytes: 1}})
			}
			if err := add(t, tr, d, now); err != nil {
				t.Fatalf("seq %d rank %d: %v", seq, r, err)
			}
		}
		now = now.Add(5 * time.Second)
		j := tr.jobs["names"]
		if n := j.nodes.Len(); n > 16+3 {
			t.Fatalf("seq %d: name table of %d", seq, n)
		}
		for r := range 4 {
			rows := j.ranks[r].cur.ToNodes.Slice()
			if len(rows) != 3 || rows[2].Node != fmt.Sprintf("n%d-%d-2", seq, r) || rows[2].P2P.Bytes != 1 {
				t.Fatalf("seq %d rank %d: rows %+v", seq, r, rows)
			}
		}
	}
}

// A published view keeps the ranks as they were: a newer snapshot of a
// rank replaces it without changing what earlier views show.
func TestPublishedViewsImmutable(t *testing.T) {
	tr, _, _, _ := newTracker(Options{})
	if err := add(t, tr, snapshot("v", 0, 2, 0, false), t0); err != nil {
		t.Fatal(err)
	}
	old := tr.Publish(t0).Jobs["v"]
	if err := add(t, tr, snapshot("v", 0, 2, 1, false), t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	cur := tr.Publish(t0.Add(time.Second)).Jobs["v"]
	if o, c := old.Full().Processes[0], cur.Full().Processes[0]; o.Seq != 0 || c.Seq != 1 || o.CPUUser >= c.CPUUser {
		t.Fatalf("old view shows seq %d (cpu %g), new one seq %d (cpu %g)", o.Seq, o.CPUUser, c.Seq, c.CPUUser)
	}
}

// A destination node reported twice in one snapshot, even far apart in an
// unsorted list, is refused.
func TestDuplicateNodeRefused(t *testing.T) {
	tr, _, _, _ := newTracker(Options{})
	d := snapshot("dup", 0, 4, 0, false)
	d.Nodes = append(d.Nodes, &agentpb.NodeTraffic{Node: "other", P2P: &agentpb.Traffic{Bytes: 1}}, proto.Clone(d.Nodes[0]).(*agentpb.NodeTraffic))
	if err := add(t, tr, d, t0); reasonOf(err) != ReasonPeer || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("a node twice: %v", err)
	}
}

// A live view keeps its ranks in order and its summary equal to one summed
// from its processes, however the ranks' first snapshots arrive: in order,
// out of order, or after a rank restarted.
func TestViewMatchesProcesses(t *testing.T) {
	tr, _, _, _ := newTracker(Options{})
	// Ranks in three of the view's chunks.
	const world = 2*viewChunk + 8
	now := t0
	sent := map[int]uint64{} // each rank's last snapshot
	send := func(d *agentpb.Datagram) {
		t.Helper()
		if err := add(t, tr, d, now); err != nil {
			t.Fatal(err)
		}
		sent[int(d.Rank)] = d.Seq
	}
	check := func(step string) {
		t.Helper()
		now = now.Add(time.Second)
		v := tr.Publish(now).Jobs["v"]
		if v == nil {
			t.Fatalf("%s: no view", step)
		}
		full := v.Full()
		summed := &store.Job{JobSummary: full.JobSummary, Processes: full.Processes}
		Summarize(summed)
		if !reflect.DeepEqual(v.JobSummary, summed.JobSummary) {
			t.Errorf("%s: view summary\n %+v\nsummed from its processes\n %+v", step, v.JobSummary, summed.JobSummary)
		}
		var got []string
		for _, p := range full.Processes {
			got = append(got, fmt.Sprintf("%d:%d", p.Rank, p.Seq))
		}
		var want []string
		for _, r := range slices.Sorted(maps.Keys(sent)) {
			want = append(want, fmt.Sprintf("%d:%d", r, sent[r]))
		}
		if !slices.Equal(got, want) {
			i := 0
			for i < min(len(got), len(want)) && got[i] == want[i] {
				i++
			}
			t.Errorf("%s: view has %d ranks, want %d; from the %dth: rank:snapshot %v, want %v", step, len(got), len(want), i,
				got[i:min(i+3, len(got))], want[i:min(i+3, len(want))])
		}
	}
	for rank := range 2*viewChunk + 2 { // in order, as the agents' phases send them
		if rank != 3 && rank != 100 {
			send(snapshot("v", rank, world, 0, false))
		}
	}
	check("in order")
	for _, rank := range []int{2*viewChunk + 6, 3, 100, 2*viewChunk + 7} { // stragglers
		send(snapshot("v", rank, world, 0, false))
		check(fmt.Sprintf("rank %d late", rank))
	}
	for _, rank := range []int{0, 2*viewChunk + 6, viewChunk + 1, 1} { // later snapshots update in place
		send(snapshot("v", rank, world, 1, false))
	}
	check("second snapshots")
	// Views share the chunks that did not change.
	before := slices.Clone(tr.jobs["v"].chunks)
	send(snapshot("v", viewChunk+1, world, 2, false))
	check("one rank changed")
	after := tr.jobs["v"].chunks
	if len(after) != 3 || &after[0][0] != &before[0][0] || &after[2][0] != &before[2][0] || &after[1][0] == &before[1][0] {
		t.Error("a view copied chunks that did not change, or shared one that did")
	}
	restart := snapshot("v", 3, world, 0, false)
	restart.StartUnixNs += int64(time.Minute)
	restart.TimeUnixNs += int64(time.Minute)
	send(restart)
	check("rank 3 restarted")
	send(snapshot("v", 2*viewChunk+4, world, 0, false))
	send(snapshot("v", 2*viewChunk+6, world, 2, false))
	check("a new rank after the restart")
	nodes := map[int]bool{}
	for r := range sent {
		nodes[r/2] = true // snapshot's nodes
	}
	if v := tr.Publish(now.Add(time.Second)).Jobs["v"]; v.Reporting != len(sent) || v.Nodes != len(nodes) {
		t.Errorf("%d ranks on %d nodes reporting, want %d on %d", v.Reporting, v.Nodes, len(sent), len(nodes))
	}
	// Ranks that report from another node: node2 loses its ranks.
	for _, rank := range []int{5, 4} {
		moved := snapshot("v", rank, world, 1, false)
		moved.Process.Node = "elsewhere"
		send(moved)
		check(fmt.Sprintf("rank %d moved", rank))
	}
	if v := tr.Publish(now.Add(time.Second)).Jobs["v"]; v.Nodes != len(nodes) {
		t.Errorf("%d nodes after two ranks moved, want %d", v.Nodes, len(nodes))
	}
}

// saveTicks sends snapshot tick of every rank of jobs PREFIX0... and ticks
// 3 s later, ticks times from t0, calling f with each job saved with its
// processes at a tick; it returns the time of the last tick.
func saveTicks(t *testing.T, tr *Tracker, sk *sink, prefix string, jobs, ticks int, f func(tick int, now time.Time, j *store.Job)) time.Time {
	t.Helper()
	now := t0
	for tick := range ticks {
		addJobs(t, tr, prefix, jobs, uint64(tick), now)
		now = now.Add(3 * time.Second)
		tr.Tick(now)
		for _, j := range sk.saved {
			if len(j.Processes) > 0 {
				f(tick, now, j)
			}
		}
		sk.saved = nil
	}
	return now
}

// addJobs adds snapshot seq of both ranks of jobs PREFIX0...
func addJobs(t *testing.T, tr *Tracker, prefix string, jobs int, seq uint64, now time.Time) {
	t.Helper()
	for k := range jobs {
		for r := range 2 {
			if err := add(t, tr, snapshot(fmt.Sprint(prefix, k), r, 2, seq, false), now); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// With many ranks tracked, processes are saved less often, at about
// ProcessRowsPerSecond.
func TestProcessSavesFollowBudget(t *testing.T) {
	tr, sk, _, _ := newTracker(Options{SaveEvery: time.Second, ProcessSaveEvery: 10 * time.Second, ProcessRowsPerSecond: 2})
	const jobs, ticks = 20, 24 // 40 ranks at 2 rows/s: every 20 s
	rows := 0
	last := map[string]time.Time{}
	saveTicks(t, tr, sk, "b", jobs, ticks, func(_ int, now time.Time, j *store.Job) {
		rows += len(j.Processes)
		if l, ok := last[j.ID]; ok && now.Sub(l) < 20*time.Second {
			t.Errorf("job %s: processes saved %v apart", j.ID, now.Sub(l))
		}
		last[j.ID] = now
	})
	if secs := float64(ticks * 3); float64(rows) > 2*secs+2*jobs || rows < jobs*2 {
		t.Errorf("%d process rows saved in %g s at 2 rows/s", rows, secs)
	}
}
