package gpupath

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/netloom/netloom/internal/store"
)

func tr(b, m uint64) store.Traffic { return store.Traffic{Bytes: b, Msgs: m} }

// pathJob is five ranks: 0 and 1 on node a, 2 and 3 on node b, 4 on a
// node not reported. Ranks 0-3 were probed; 4 has no GPU section.
//
//	0 -> 1  device 1000/10           into device 1000/10            exact D->D 1000/10, intra
//	0 -> 2  pinned 600/6 + pageable 400/4 (all H)
//	                                 into pageable 750/8 + managed 250/2
//	                                 exact (the receiver's split): H->H 750/8, H->D 250/2, inter
//	0 -> 3  pageable 700/7 + device 300/3
//	                                 into pinned 500/5 + device 500/5  mixed, inter
//	1 -> 2  device 64/1              into pinned 60/1               exact (the sender's count) D->H 64/1, inter
//	3 -> 0  pinned 30/3 + device 70/7
//	                                 into device 100/10             exact (the sender's split): H->D 30/3, D->D 70/7, inter
//	2 -> 3  pageable 50/5            (3 has no row for 2: ANY_SOURCE) receiver unknown, intra
//	2 -> 4  device 10/1              (4 not probed)                 receiver unknown, locality unknown
//	1 -> 3  (1 has no row for 3)     into pinned 80/1               sender unknown, inter
func pathJob() *store.Job {
	kinds := func(pageable, pinned, device, managed store.Traffic) store.BufferKinds {
		return store.BufferKinds{Pageable: pageable, Pinned: pinned, Device: device, Managed: managed}
	}
	var z store.Traffic
	procs := []store.Process{
		{Rank: 0, Node: "a", GPU: &store.GPU{Probed: true, Peers: []store.GPUPeer{
			{Peer: 1, SentFrom: kinds(z, z, tr(1000, 10), z)},
			{Peer: 2, SentFrom: kinds(tr(400, 4), tr(600, 6), z, z)},
			{Peer: 3, SentFrom: kinds(tr(700, 7), z, tr(300, 3), z), ReceivedInto: kinds(z, z, tr(100, 10), z)},
		}}},
		{Rank: 1, Node: "a", GPU: &store.GPU{Probed: true, Peers: []store.GPUPeer{
			{Peer: 0, ReceivedInto: kinds(z, z, tr(1000, 10), z)},
			{Peer: 2, SentFrom: kinds(z, z, tr(64, 1), z)},
		}}},
		// Rows out of order: found all the same.
		{Rank: 2, Node: "b", GPU: &store.GPU{Probed: true, Peers: []store.GPUPeer{
			{Peer: 4, SentFrom: kinds(z, z, tr(10, 1), z)},
			{Peer: 0, ReceivedInto: kinds(tr(750, 8), z, z, tr(250, 2))},
			{Peer: 1, ReceivedInto: kinds(z, tr(60, 1), z, z)},
			{Peer: 3, SentFrom: kinds(tr(50, 5), z, z, z)},
		}}},
		{Rank: 3, Node: "b", GPU: &store.GPU{Probed: true, Peers: []store.GPUPeer{
			{Peer: 0, SentFrom: kinds(z, tr(30, 3), tr(70, 7), z), ReceivedInto: kinds(z, tr(500, 5), tr(500, 5), z)},
			{Peer: 1, ReceivedInto: kinds(z, tr(80, 1), z, z)},
		}}},
		{Rank: 4},
	}
	return &store.Job{JobSummary: store.JobSummary{ID: "g", Ranks: 5}, Processes: procs}
}

func TestPaths(t *testing.T) {
	b := Summarize(pathJob(), -1).Buffers
	row := func(path, loc, split string, t store.Traffic) PathRow {
		return PathRow{Path: path, Locality: loc, Split: split, Exact: split == Exact, Traffic: t}
	}
	wantPaths := []PathRow{
		row(HH, InterNode, Exact, tr(750, 8)),
		row(HD, InterNode, Exact, tr(280, 5)), // 250/2 of 0->2 and 30/3 of 3->0
		row(DD, IntraNode, Exact, tr(1000, 10)),
		row(DD, InterNode, Exact, tr(70, 7)),
		row(HAny, IntraNode, ReceiverUnknown, tr(50, 5)),
		row(HAny, InterNode, Mixed, tr(700, 7)),
		row(DAny, InterNode, CountsDiffer, tr(64, 1)), // 1->2: 64 B sent, a 60 B receive posted
		row(DAny, InterNode, Mixed, tr(300, 3)),
		row(DAny, NodeUnknown, ReceiverUnknown, tr(10, 1)),
		row(AnyH, InterNode, CountsDiffer, tr(60, 1)),
		row(AnyH, InterNode, Mixed, tr(500, 5)),
		row(AnyH, InterNode, SenderUnknown, tr(80, 1)),
		row(AnyD, InterNode, Mixed, tr(500, 5)),
	}
	if !reflect.DeepEqual(b.Paths, wantPaths) {
		t.Errorf("paths:\n got %+v\nwant %+v", b.Paths, wantPaths)
	}
	wantTotals := []PathRow{
		row(HH, AllNodes, Exact, tr(750, 8)),
		row(HD, AllNodes, Exact, tr(280, 5)),
		row(DD, AllNodes, Exact, tr(1070, 17)),
		row(HAny, AllNodes, Mixed, tr(700, 7)),
		row(HAny, AllNodes, ReceiverUnknown, tr(50, 5)),
		row(DAny, AllNodes, CountsDiffer, tr(64, 1)),
		row(DAny, AllNodes, Mixed, tr(300, 3)),
		row(DAny, AllNodes, ReceiverUnknown, tr(10, 1)),
		row(AnyH, AllNodes, CountsDiffer, tr(60, 1)),
		row(AnyH, AllNodes, Mixed, tr(500, 5)),
		row(AnyH, AllNodes, SenderUnknown, tr(80, 1)),
		row(AnyD, AllNodes, Mixed, tr(500, 5)),
	}
	if !reflect.DeepEqual(b.PathTotals, wantTotals) {
		t.Errorf("path totals:\n got %+v\nwant %+v", b.PathTotals, wantTotals)
	}
	side := func(h, d store.Traffic) *Side { return &Side{Host: h, Device: d} }
	var z store.Traffic
	wantPairs := []Pair{
		{From: 0, To: 1, Locality: IntraNode, Sender: side(z, tr(1000, 10)), Receiver: side(z, tr(1000, 10)), Split: Exact, Exact: true, Paths: &PathTraffic{DD: tr(1000, 10)}},
		{From: 0, To: 2, Locality: InterNode, Sender: side(tr(1000, 10), z), Receiver: side(tr(750, 8), tr(250, 2)), Split: Exact, Exact: true, Paths: &PathTraffic{HH: tr(750, 8), HD: tr(250, 2)}},
		{From: 0, To: 3, Locality: InterNode, Sender: side(tr(700, 7), tr(300, 3)), Receiver: side(tr(500, 5), tr(500, 5)), Split: Mixed},
		{From: 3, To: 0, Locality: InterNode, Sender: side(tr(30, 3), tr(70, 7)), Receiver: side(z, tr(100, 10)), Split: Exact, Exact: true, Paths: &PathTraffic{HD: tr(30, 3), DD: tr(70, 7)}},
		{From: 1, To: 3, Locality: InterNode, Receiver: side(tr(80, 1), z), Split: SenderUnknown},
		{From: 1, To: 2, Locality: InterNode, Sender: side(z, tr(64, 1)), Receiver: side(tr(60, 1), z), Split: CountsDiffer},
		{From: 2, To: 3, Locality: IntraNode, Sender: side(tr(50, 5), z), Split: ReceiverUnknown},
		{From: 2, To: 4, Locality: NodeUnknown, Sender: side(z, tr(10, 1)), Split: ReceiverUnknown},
	}
	if !reflect.DeepEqual(b.Pairs, wantPairs) || b.PairsTotal != 8 {
		t.Errorf("pairs (%d):", b.PairsTotal)
		for i := range max(len(b.Pairs), len(wantPairs)) {
			if i >= len(b.Pairs) || i >= len(wantPairs) || !reflect.DeepEqual(b.Pairs[i], wantPairs[i]) {
				j1, _ := json.Marshal(b.Pairs[min(i, len(b.Pairs)-1)])
				j2, _ := json.Marshal(wantPairs[min(i, len(wantPairs)-1)])
				t.Errorf("pair %d:\n got %s\nwant %s", i, j1, j2)
			}
		}
	}
	if b.Ranks != 5 || b.ProbedRanks != 4 || b.NotProbed != "" || b.Source != Source {
		t.Errorf("ranks %d, probed %d, not probed %q, source %q", b.Ranks, b.ProbedRanks, b.NotProbed, b.Source)
	}
	if c := Summarize(pathJob(), 0).Buffers; len(c.Pairs) != 0 || c.Pairs == nil || c.PairsTotal != 8 {
		t.Errorf("no pairs asked: %+v of %d", c.Pairs, c.PairsTotal)
	}
	// At most two pairs: the largest.
	if c := Summarize(pathJob(), 2).Buffers; len(c.Pairs) != 2 || c.PairsTotal != 8 || c.Pairs[1].To != 2 || len(c.Paths) != len(wantPaths) {
		t.Errorf("two pairs: %+v of %d", c.Pairs, c.PairsTotal)
	}
	// The JSON states what each figure is.
	js, err := json.Marshal(b.Pairs[0])
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Paths map[string]store.Traffic `json:"paths"`
	}
	if err := json.Unmarshal(js, &back); err != nil || len(back.Paths) != 4 || back.Paths["D->D"] != tr(1000, 10) || back.Paths["H->H"] != tr(0, 0) {
		t.Errorf("pair JSON %s: paths %v (%v)", js, back.Paths, err)
	}
	js, _ = json.Marshal(b.Pairs[4])
	if !strings.Contains(string(js), `"sender":null`) || !strings.Contains(string(js), `"split":"sender unknown","exact":false`) || strings.Contains(string(js), `"paths"`) {
		t.Errorf("sender-unknown pair JSON %s", js)
	}
}

func TestFunctionKinds(t *testing.T) {
	j := &store.Job{Processes: []store.Process{
		{Rank: 0, GPU: &store.GPU{Probed: true, Functions: []store.GPUFunction{{Name: "MPI_Send", Send: store.BufferKinds{Device: tr(100, 1)}}}}},
		{Rank: 1, GPU: &store.GPU{Probed: true, Functions: []store.GPUFunction{{Name: "MPI_Recv", Recv: store.BufferKinds{Managed: tr(20, 2)}},
			{Name: "MPI_Send", Send: store.BufferKinds{Pinned: tr(50, 1)}}}}},
		// Not probed: its rows (there are none) count nowhere.
		{Rank: 2, GPU: &store.GPU{ProbeError: "cuPointerGetAttributes: CUDA_ERROR_INVALID_CONTEXT"}},
	}}
	b := Summarize(j, -1).Buffers
	want := []FunctionKinds{
		{Name: "MPI_Send", Ranks: 2, Send: store.BufferKinds{Pinned: tr(50, 1), Device: tr(100, 1)}},
		{Name: "MPI_Recv", Ranks: 1, Recv: store.BufferKinds{Managed: tr(20, 2)}},
	}
	if !reflect.DeepEqual(b.Functions, want) {
		t.Errorf("functions:\n got %+v\nwant %+v", b.Functions, want)
	}
	if b.ProbedRanks != 2 || b.NotProbed != "" || len(b.ProbeErrors) != 1 || b.ProbeErrors[0] != (ProbeError{Error: "cuPointerGetAttributes: CUDA_ERROR_INVALID_CONTEXT", Ranks: 1, FirstRank: 2}) {
		t.Errorf("probed %d, not probed %q, errors %+v", b.ProbedRanks, b.NotProbed, b.ProbeErrors)
	}
	if len(b.Paths) != 0 || len(b.Pairs) != 0 || b.Paths == nil || b.Pairs == nil {
		t.Errorf("paths %v, pairs %v: want empty lists", b.Paths, b.Pairs)
	}
}

func TestNotProbed(t *testing.T) {
	for _, c := range []struct {
		name string
		gpu  []*store.GPU
		want string
	}{
		{"CPU-only job", []*store.GPU{nil, nil}, NoCUDA},
		{"probe failed", []*store.GPU{{ProbeError: "no cuPointerGetAttributes in libcuda.so.1"}, nil}, "CUDA was loaded but the probe failed: no cuPointerGetAttributes in libcuda.so.1"},
		{"NCCL ranks", []*store.GPU{{NCCLOps: []store.NCCLOp{{Name: "AllReduce"}}}, {}}, NCCLOnly},
	} {
		j := &store.Job{}
		for r, g := range c.gpu {
			j.Processes = append(j.Processes, store.Process{Rank: r, GPU: g})
		}
		if b := Summarize(j, -1).Buffers; b.NotProbed != c.want || b.ProbedRanks != 0 {
			t.Errorf("%s: not probed %q (%d probed), want %q", c.name, b.NotProbed, b.ProbedRanks, c.want)
		}
	}
}

func TestNCCL(t *testing.T) {
	const c1, c2 = store.CommHash(0xfedcba9876543210), store.CommHash(7)
	j := &store.Job{Processes: []store.Process{
		{Rank: 0, GPU: &store.GPU{NCCLVersion: "2.28.9", NCCLProfilerInterface: 5, NCCLOps: []store.NCCLOp{
			{Comm: c1, CommRank: 0, CommSize: 2, Name: "AllReduce", Algorithm: "RING", Protocol: "SIMPLE", Calls: 10, Bytes: 1000, TimeNS: 5000},
			{Comm: c1, CommRank: 0, CommSize: 2, Name: "Broadcast", Algorithm: "TREE", Protocol: "LL", Calls: 1, Bytes: 64, TimeNS: 100},
		}, NCCLPeers: []store.NCCLPeer{{Comm: c1, Peer: 1, Sent: tr(500, 2), Received: tr(400, 2)}}}},
		{Rank: 1, GPU: &store.GPU{NCCLVersion: "2.28.9", NCCLProfilerInterface: 5, NCCLOps: []store.NCCLOp{
			{Comm: c1, CommRank: 1, CommSize: 2, Name: "AllReduce", Algorithm: "RING", Protocol: "SIMPLE", Calls: 10, Bytes: 1000, TimeNS: 7000},
			{Comm: c2, CommRank: 0, CommSize: 1, Name: "AllReduce", Calls: 3, Bytes: 30, TimeNS: 300},
		}}},
		{Rank: 2}, // an MPI rank of the job
	}}
	n := Summarize(j, -1).NCCL
	want := []NCCLOpTotal{
		{Comm: c1, CommSize: 2, Name: "AllReduce", Algorithm: "RING", Protocol: "SIMPLE", Ranks: 2, Calls: 20, Bytes: 2000, TimeNS: 12000},
		{Comm: c2, CommSize: 1, Name: "AllReduce", Ranks: 1, Calls: 3, Bytes: 30, TimeNS: 300},
		{Comm: c1, CommSize: 2, Name: "Broadcast", Algorithm: "TREE", Protocol: "LL", Ranks: 1, Calls: 1, Bytes: 64, TimeNS: 100},
	}
	if !reflect.DeepEqual(n.Ops, want) {
		t.Errorf("ops:\n got %+v\nwant %+v", n.Ops, want)
	}
	if n.Ranks != 2 || !reflect.DeepEqual(n.Versions, []string{"2.28.9"}) || !reflect.DeepEqual(n.ProfilerInterfaces, []uint32{5}) || n.Source != NCCLSource {
		t.Errorf("ranks %d, versions %v, interfaces %v, source %q", n.Ranks, n.Versions, n.ProfilerInterfaces, n.Source)
	}
	// Peer rows without network events: from the proxy operations, and
	// the links are not attributed from them.
	wantPeers := []NCCLPeerRow{{Rank: 0, Comm: c1, Peer: 1, Sent: tr(500, 2), Received: tr(400, 2)}}
	if n.PeersFrom != PeersFromProxy || n.LinkAttribution != LinksFromProxy || !reflect.DeepEqual(n.Peers, wantPeers) || n.PeersTotal != 1 {
		t.Errorf("peers from %q, links %q, peers %+v", n.PeersFrom, n.LinkAttribution, n.Peers)
	}
	j.Processes[1].GPU.NCCLNetEvents = true
	if n := Summarize(j, -1).NCCL; n.PeersFrom != PeersFromNetEvents || n.LinkAttribution != LinksFromNetEvents {
		t.Errorf("with network events: peers from %q, links %q", n.PeersFrom, n.LinkAttribution)
	}
	j.Processes[0].GPU.NCCLPeers, j.Processes[1].GPU.NCCLNetEvents = nil, false
	if n := Summarize(j, -1).NCCL; n.PeersFrom != PeersNone || n.LinkAttribution != LinksNotAttributed || len(n.Peers) != 0 || n.Peers == nil {
		t.Errorf("no peers: peers from %q, links %q, peers %v", n.PeersFrom, n.LinkAttribution, n.Peers)
	}
	js, err := json.Marshal(want[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(js), `"comm":"fedcba9876543210"`) {
		t.Errorf("op JSON %s: want the communicator as 16 hex digits", js)
	}
}
