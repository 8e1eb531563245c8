package ingest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
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
