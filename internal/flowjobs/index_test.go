package flowjobs

import (
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/ingest"
	"github.com/netloom/netloom/internal/sflow"
)

var (
	h1 = netip.MustParseAddr("10.0.1.1")
	h3 = netip.MustParseAddr("10.0.3.1")
	t0 = time.Unix(1_800_000_000, 0)
)

func tcp(local, remote string) ingest.Conn {
	return ingest.Conn{Kind: "tcp", Local: netip.MustParseAddrPort(local), Remote: netip.MustParseAddrPort(remote), Peer: ingest.NoPeer}
}

func key(src, dst string) sflow.FlowKey {
	s, d := netip.MustParseAddrPort(src), netip.MustParseAddrPort(dst)
	return sflow.FlowKey{Src: s.Addr(), Dst: d.Addr(), Proto: 6, SrcPort: s.Port(), DstPort: d.Port()}
}

// clock is a settable Now.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// TestPairs: rank 0 and rank 1 report the two ends of one connection; a
// sample of either direction names both ranks, the right one at each end;
// a connection only one rank reported (to its launcher's daemon) names
// the other end -1; a flow nobody reported is not matched; a sample before
// the job started is not either.
func TestPairs(t *testing.T) {
	c := &clock{t0}
	x := New(Options{Now: c.now})
	x.Report(ingest.ConnReport{Job: "j1", User: "alice", Rank: 0, Start: t0, At: t0.Add(time.Second),
		Conns: []ingest.Conn{tcp("10.0.1.1:40000", "10.0.3.1:1024"), tcp("10.0.1.1:40001", "10.0.1.1:5000")}})
	// Before the far rank reports: the near end is known.
	if m, ok := x.Lookup(key("10.0.3.1:1024", "10.0.1.1:40000"), t0.Add(2*time.Second)); !ok || m.SrcRank != -1 || m.DstRank != 0 {
		t.Errorf("before rank 1 reported: %+v %v", m, ok)
	}
	x.Report(ingest.ConnReport{Job: "j1", Rank: 1, Start: t0.Add(time.Millisecond), At: t0.Add(2 * time.Second),
		Conns: []ingest.Conn{tcp("10.0.3.1:1024", "10.0.1.1:40000")}})
	for _, tc := range []struct {
		k        sflow.FlowKey
		src, dst int
	}{
		{key("10.0.1.1:40000", "10.0.3.1:1024"), 0, 1},
		{key("10.0.3.1:1024", "10.0.1.1:40000"), 1, 0},
		{key("10.0.1.1:40001", "10.0.1.1:5000"), 0, -1},
		{key("10.0.1.1:5000", "10.0.1.1:40001"), -1, 0},
	} {
		m, ok := x.Lookup(tc.k, t0.Add(time.Minute))
		if want := (Match{Job: "j1", User: "alice", SrcRank: tc.src, DstRank: tc.dst}); !ok || m != want {
			t.Errorf("%v: %+v %v, want %+v", tc.k, m, ok, want)
		}
	}
	if m, ok := x.Lookup(key("10.0.1.1:40000", "10.0.3.1:1025"), t0.Add(time.Minute)); ok {
		t.Errorf("a flow nobody reported: %+v", m)
	}
	if m, ok := x.Lookup(key("10.0.1.1:40000", "10.0.3.1:1024"), t0.Add(-time.Hour)); ok {
		t.Errorf("an hour before the job: %+v", m)
	}
	// An IPv4-mapped key is the IPv4 one.
	k := key("10.0.1.1:40000", "10.0.3.1:1024")
	k.Src = netip.AddrFrom16(k.Src.As16())
	if _, ok := x.Lookup(k, t0.Add(time.Minute)); !ok {
		t.Error("IPv4-mapped source: no match")
	}
	if s := x.Stats(); s.Keys != 4 || s.Jobs != 1 {
		t.Errorf("stats %+v, want 4 keys (two connections, two directions) of one job", s)
	}
	// Listed once a connection, from the end that sorts first.
	jc, ok := x.Connections("j1", 10)
	want := []Conn{{key("10.0.1.1:5000", "10.0.1.1:40001"), -1, 0, true}, {key("10.0.1.1:40000", "10.0.3.1:1024"), 0, 1, true}}
	if !ok || jc.Total != 2 || jc.User != "alice" || !jc.Start.Equal(t0) || !jc.End.IsZero() || !slices.Equal(jc.Conns, want) {
		t.Errorf("connections %+v %v, want %+v", jc, ok, want)
	}
	if jc, _ := x.Connections("j1", 1); len(jc.Conns) != 1 || jc.Total != 2 {
		t.Errorf("limit 1: %+v", jc)
	}
	if _, ok := x.Connections("j2", 10); ok {
		t.Error("connections of a job never reported")
	}
	// Rank 0's next report lacks the connection to its launcher: it was
	// closed, no longer current, and still matches samples of its time.
	x.Report(ingest.ConnReport{Job: "j1", Rank: 0, Start: t0, At: t0.Add(3 * time.Second),
		Conns: []ingest.Conn{tcp("10.0.1.1:40000", "10.0.3.1:1024")}})
	want[0].Current = false
	if jc, _ := x.Connections("j1", 10); !slices.Equal(jc.Conns, want) {
		t.Errorf("after rank 0's connection to 5000 closed: %+v, want %+v", jc.Conns, want)
	}
	if _, ok := x.Lookup(key("10.0.1.1:40001", "10.0.1.1:5000"), t0.Add(time.Second)); !ok {
		t.Error("a closed connection no longer matches samples of its time")
	}
	// A report with none: rank 1's connection is still rank 0's.
	x.Report(ingest.ConnReport{Job: "j1", Rank: 1, Start: t0, At: t0.Add(4 * time.Second)})
	if jc, _ := x.Connections("j1", 10); !jc.Conns[1].Current {
		t.Errorf("a connection rank 0 still reports: %+v", jc.Conns)
	}
	x.Report(ingest.ConnReport{Job: "j1", Rank: 0, Start: t0, At: t0.Add(5 * time.Second)})
	if jc, _ := x.Connections("j1", 10); jc.Conns[1].Current {
		t.Errorf("a connection neither rank reports: %+v", jc.Conns)
	}
	// Named again, twice (the second the same list as the first): current.
	for _, sec := range []time.Duration{6, 7} {
		x.Report(ingest.ConnReport{Job: "j1", Rank: 0, Start: t0, At: t0.Add(sec * time.Second),
			Conns: []ingest.Conn{tcp("10.0.1.1:40000", "10.0.3.1:1024")}})
		if jc, _ := x.Connections("j1", 10); !jc.Conns[1].Current || jc.Conns[0].Current {
			t.Errorf("rank 0 names its connection to rank 1 again (%v): %+v", sec, jc.Conns)
		}
	}
	x.Report(ingest.ConnReport{Job: "j3", Rank: 0, Start: t0, At: t0})
	if _, ok := x.Connections("j3", 10); ok {
		t.Error("a job whose ranks reported no connection is held")
	}
}

// TestShared: a socket two ranks both report (inherited from their
// launcher's proxy) is neither's; the other end stays known.
func TestShared(t *testing.T) {
	x := New(Options{})
	c := []ingest.Conn{tcp("10.0.1.1:47674", "10.0.0.1:36995")}
	for _, r := range []int{0, 1, 0} {
		x.Report(ingest.ConnReport{Job: "j", Rank: r, Start: t0, At: t0, Conns: c})
	}
	if m, ok := x.Lookup(key("10.0.1.1:47674", "10.0.0.1:36995"), t0); !ok || m.SrcRank != -1 || m.DstRank != -1 {
		t.Errorf("a socket ranks 0 and 1 hold: %+v %v", m, ok)
	}
	x.Report(ingest.ConnReport{Job: "j", Rank: 2, Start: t0, At: t0, Conns: []ingest.Conn{tcp("10.0.0.1:36995", "10.0.1.1:47674")}})
	if m, _ := x.Lookup(key("10.0.0.1:36995", "10.0.1.1:47674"), t0); m.SrcRank != 2 || m.DstRank != -1 {
		t.Errorf("its far end reported by rank 2: %+v", m)
	}
}

// TestEnd: after its end (and Slack) a job's connections match nothing;
// Retention after it they are gone; a new run under the same job id, and
// another job reusing the 5-tuple later, are told apart by time.
func TestEnd(t *testing.T) {
	c := &clock{t0}
	x := New(Options{Now: c.now, Slack: time.Second, Retention: time.Minute})
	conn := []ingest.Conn{tcp("10.0.1.1:40000", "10.0.3.1:1024")}
	x.Report(ingest.ConnReport{Job: "j1", Rank: 0, Start: t0, At: t0, Conns: conn})
	x.End("j1", t0.Add(10*time.Second))
	k := key("10.0.1.1:40000", "10.0.3.1:1024")
	if _, ok := x.Lookup(k, t0.Add(10*time.Second)); !ok {
		t.Error("at its end: no match")
	}
	if m, ok := x.Lookup(k, t0.Add(12*time.Second)); ok {
		t.Errorf("after its end: %+v", m)
	}
	// The same 5-tuple in another job, and j1 run again.
	x.Report(ingest.ConnReport{Job: "j2", Rank: 3, Start: t0.Add(20 * time.Second), At: t0.Add(21 * time.Second), Conns: conn})
	x.Report(ingest.ConnReport{Job: "j1", Rank: 5, Start: t0.Add(30 * time.Second), At: t0.Add(31 * time.Second),
		Conns: []ingest.Conn{tcp("10.0.1.1:40002", "10.0.3.1:1024")}})
	if m, ok := x.Lookup(k, t0.Add(5*time.Second)); !ok || m.Job != "j1" || m.SrcRank != 0 {
		t.Errorf("during j1: %+v %v", m, ok)
	}
	if m, ok := x.Lookup(k, t0.Add(25*time.Second)); !ok || m.Job != "j2" || m.SrcRank != 3 {
		t.Errorf("during j2: %+v %v", m, ok)
	}
	if m, ok := x.Lookup(key("10.0.1.1:40002", "10.0.3.1:1024"), t0.Add(35*time.Second)); !ok || m.Job != "j1" || m.SrcRank != 5 {
		t.Errorf("j1's second run: %+v %v", m, ok)
	}
	if s := x.Stats(); s.Jobs != 3 || s.Keys != 6 {
		t.Errorf("stats %+v, want 3 runs and 6 keys", s)
	}
	// Past the first run's retention it is gone, the others stay.
	c.t = t0.Add(10*time.Second + time.Minute + time.Second)
	x.End("j2", t0.Add(40*time.Second))
	if s := x.Stats(); s.Jobs != 2 || s.Keys != 4 {
		t.Errorf("after the first run's retention: %+v, want 2 runs and 4 keys", s)
	}
	if m, ok := x.Lookup(k, t0.Add(5*time.Second)); ok {
		t.Errorf("the pruned run still matches: %+v", m)
	}
	if m, ok := x.Lookup(k, t0.Add(25*time.Second)); !ok || m.Job != "j2" {
		t.Errorf("j2 after j1's first run went: %+v %v", m, ok)
	}
}

// TestRoCE: a queue pair's packets toward each end carry that end's QPN,
// whatever their entropy source port.
func TestRoCE(t *testing.T) {
	x := New(Options{})
	q := func(local, remote netip.Addr, lq, rq uint32) ingest.Conn {
		return ingest.Conn{Kind: "roce", Local: netip.AddrPortFrom(local, 4791), Remote: netip.AddrPortFrom(remote, 4791), LocalQPN: lq, RemoteQPN: rq}
	}
	x.Report(ingest.ConnReport{Job: "r", Rank: 0, Start: t0, At: t0, Conns: []ingest.Conn{q(h1, h3, 0x11, 0x22)}})
	x.Report(ingest.ConnReport{Job: "r", Rank: 1, Start: t0, At: t0, Conns: []ingest.Conn{q(h3, h1, 0x22, 0x11)}})
	toH3 := sflow.FlowKey{Src: h1, Dst: h3, Proto: 17, SrcPort: 51234, DstPort: sflow.RoCEv2Port, QP: 0x22}
	toH1 := sflow.FlowKey{Src: h3, Dst: h1, Proto: 17, SrcPort: 0, DstPort: sflow.RoCEv2Port, QP: 0x11}
	if m, ok := x.Lookup(toH3, t0); !ok || m.SrcRank != 0 || m.DstRank != 1 {
		t.Errorf("toward rank 1: %+v %v", m, ok)
	}
	if m, ok := x.Lookup(toH1, t0); !ok || m.SrcRank != 1 || m.DstRank != 0 {
		t.Errorf("toward rank 0: %+v %v", m, ok)
	}
	toH3.QP = 0x23
	if m, ok := x.Lookup(toH3, t0); ok {
		t.Errorf("another QP: %+v", m)
	}
}

// TestBound: past MaxKeys new connections are refused and counted; the
// ones held still match.
func TestBound(t *testing.T) {
	x := New(Options{MaxKeys: 3})
	x.Report(ingest.ConnReport{Job: "j", Rank: 0, Start: t0, At: t0,
		Conns: []ingest.Conn{tcp("10.0.1.1:1", "10.0.3.1:2"), tcp("10.0.1.1:3", "10.0.3.1:4"), {Kind: "udp"}}})
	if s := x.Stats(); s.Keys != 3 || s.Refused != 1 {
		t.Errorf("stats %+v, want 3 keys and 1 refused (an unknown kind is not indexed)", s)
	}
	if _, ok := x.Lookup(key("10.0.1.1:1", "10.0.3.1:2"), t0); !ok {
		t.Error("a held key does not match")
	}
}

// BenchmarkLookup: one look-up of a sampled flow among 100,000 connections.
func BenchmarkLookup(b *testing.B) {
	x := New(Options{})
	var conns []ingest.Conn
	for i := range 100_000 {
		conns = append(conns, ingest.Conn{Kind: "tcp", Local: netip.AddrPortFrom(h1, uint16(1024+i%60000)),
			Remote: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i / 60000), 3}), 5000)})
	}
	x.Report(ingest.ConnReport{Job: "j", Rank: 0, Start: t0, At: t0, Conns: conns})
	k := sflow.FlowKey{Src: h1, Dst: netip.AddrFrom4([4]byte{10, 0, 0, 3}), Proto: 6, SrcPort: 2000, DstPort: 5000}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := x.Lookup(k, t0); !ok {
			b.Fatal("no match")
		}
	}
}

// TestMemory measures the heap the index holds per flow key (two a TCP
// connection) with 100,000 connections of one job, and bounds it.
func TestMemory(t *testing.T) {
	var conns []ingest.Conn
	for i := range 100_000 {
		conns = append(conns, ingest.Conn{Kind: "tcp", Local: netip.AddrPortFrom(h1, uint16(1024+i%60000)),
			Remote: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i / 60000), 3}), 5000)})
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	x := New(Options{})
	for r := range 100 { // 100 ranks of 1,000 connections each
		x.Report(ingest.ConnReport{Job: "j", Rank: r, Start: t0, At: t0, Conns: conns[r*1000 : (r+1)*1000]})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	keys := x.Stats().Keys
	per := float64(after.HeapAlloc-before.HeapAlloc) / float64(keys)
	t.Logf("%d keys: %.0f bytes of heap each", keys, per)
	if keys != 200_000 || per > 400 {
		t.Errorf("%d keys, %.0f bytes each (want 200,000, at most 400)", keys, per)
	}
	runtime.KeepAlive(x)
}

// BenchmarkReport: one rank's snapshot of 64 connections, the same as
// its last (every snapshot of a rank whose connections did not change), in
// a job of 1,000 such ranks; BenchmarkReportChanged: one that differs
// from its last by one connection, all of whose keys the index holds.
func BenchmarkReport(b *testing.B) {
	x := New(Options{})
	conns := make([][]ingest.Conn, 1000)
	for r := range conns {
		for i := range 64 {
			conns[r] = append(conns[r], ingest.Conn{Kind: "tcp", Local: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(r >> 8), byte(r)}), uint16(1024+i)),
				Remote: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 2, byte(i), 1}), 5000)})
		}
		x.Report(ingest.ConnReport{Job: "j", Rank: r, Start: t0, At: t0, Conns: conns[r]})
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r := i % len(conns)
		x.Report(ingest.ConnReport{Job: "j", Rank: r, Start: t0, At: t0.Add(time.Duration(i) * time.Millisecond), Conns: conns[r]})
		i++
	}
}

func BenchmarkReportChanged(b *testing.B) {
	x := New(Options{})
	conns := make([]ingest.Conn, 65)
	for i := range conns {
		conns[i] = ingest.Conn{Kind: "tcp", Local: netip.AddrPortFrom(h1, uint16(1024+i)), Remote: netip.AddrPortFrom(h3, 5000)}
	}
	x.Report(ingest.ConnReport{Job: "j", Rank: 0, Start: t0, At: t0, Conns: conns})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		x.Report(ingest.ConnReport{Job: "j", Rank: 0, Start: t0, At: t0.Add(time.Duration(i) * time.Millisecond), Conns: conns[i%2 : 64+i%2]})
		i++
	}
}
