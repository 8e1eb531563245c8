package sflow

import (
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
)

// TestIngest: samples from a known switch land on the port their output
// ifIndex is, with frame length (less the stripped FCS) times the rate;
// an unknown agent, an unknown ifIndex, a rate of 0 and a truncated
// datagram are refused with their reason.
func TestIngest(t *testing.T) {
	sw := &Switch{GUID: 0xabc, Ports: map[uint32]int{3: 1, 5: 2}}
	known := func(a netip.Addr) (*Switch, bool) { return sw, a == agent }
	s := NewStore(StoreOptions{})
	var d Datagram
	drops := map[Refusal]int{}
	drop := func(r Refusal) { drops[r]++ }
	at := time.Unix(1_700_000_000, 0)
	tcp := frame(0, h1, h3, 6, 40000, 5201)
	b := datagram(agent,
		flowSample(1, 5, 100, 7000, 0, 3, 5, tcp, 1518),
		flowSample(2, 5, 100, 7100, 0, 3, 5, tcp, 1518),
		flowSample(3, 9, 100, 7200, 0, 3, 9, tcp, 1518), // ifIndex 9: no port
	)
	if why, err := s.Ingest(b, &d, known, at, drop); why != "" || err != nil {
		t.Fatalf("refused: %q %v", why, err)
	}
	if drops[UnknownIfIndex] != 1 {
		t.Errorf("drops %v, want one unknown_ifindex", drops)
	}
	dir := fabric.PortRef{GUID: 0xabc, Port: 2}
	got := s.Flows(dir, at.Add(-time.Minute), at)
	want := []Flow{{FlowKey: FlowKey{Src: h1, Dst: h3, Proto: 6, SrcPort: 40000, DstPort: 5201}, InPort: 1, Bytes: 2 * 1514 * 100, Samples: 2}}
	if len(got) != 1 || got[0] != want[0] {
		t.Errorf("flows %+v, want %+v", got, want)
	}
	if f := s.Flows(dir, at.Add(time.Hour), at.Add(2*time.Hour)); len(f) != 0 {
		t.Errorf("flows an hour later: %+v", f)
	}
	if why, _ := s.Ingest(datagram(netip.MustParseAddr("10.1.2.3"), flowSample(4, 5, 100, 1, 0, 3, 5, tcp, 100)), &d, known, at, drop); why != UnknownAgent {
		t.Errorf("unknown agent: %q", why)
	}
	if why, err := s.Ingest(datagram(agent, flowSample(5, 5, 0, 1, 0, 3, 5, tcp, 100)), &d, known, at, drop); why != RateZero || err == nil {
		t.Errorf("rate 0: %q %v", why, err)
	}
	if why, err := s.Ingest(b[:len(b)-7], &d, known, at, drop); why != Malformed || err == nil {
		t.Errorf("truncated: %q %v", why, err)
	}
}

// TestStoreBound: past MaxFlows the least recently sampled flow goes, and
// is counted.
func TestStoreBound(t *testing.T) {
	s := NewStore(StoreOptions{MaxFlows: 3})
	dir := fabric.PortRef{GUID: 1, Port: 1}
	at := time.Unix(1_700_000_000, 0)
	for p := range uint16(5) {
		s.Add(dir, 0, FlowKey{Src: h1, Dst: h3, Proto: 6, SrcPort: 1000 + p}, 100, at)
	}
	if s.Tracked() != 3 || s.Evicted() != 2 {
		t.Fatalf("tracked %d evicted %d, want 3 and 2", s.Tracked(), s.Evicted())
	}
	f := s.Flows(dir, at, at)
	if len(f) != 3 || f[0].SrcPort != 1002 || f[2].SrcPort != 1004 {
		t.Errorf("kept %+v, want ports 1002..1004", f)
	}
}

// TestStoreMemory measures the heap a tracked flow costs (one sample, one
// bucket; each further 10-second bucket adds 24 bytes) and holds it under
// 512 bytes: sflow_max_flows' default of 100,000 stays under 50 MiB.
func TestStoreMemory(t *testing.T) {
	const n = 100_000
	s := NewStore(StoreOptions{MaxFlows: n})
	at := time.Unix(1_700_000_000, 0)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		s.Add(fabric.PortRef{GUID: 1, Port: 1 + i%8}, 2, FlowKey{Src: h1, Dst: h3, Proto: 6, SrcPort: uint16(i), DstPort: uint16(i >> 16)}, 1500, at)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%.0f bytes of heap per tracked flow (%d flows)", per, s.Tracked())
	if s.Tracked() != n || per > 512 {
		t.Errorf("%d flows tracked, %.0f bytes each: want %d under 512", s.Tracked(), per, n)
	}
	runtime.KeepAlive(s)
}

// BenchmarkIngest decodes a datagram of 8 flow samples of known ports and
// keeps them (one store of 1,000 flows): per sample, reported as
// samples/s.
func BenchmarkIngest(b *testing.B) {
	sw := &Switch{GUID: 0xabc, Ports: map[uint32]int{3: 1, 5: 2}}
	known := func(a netip.Addr) (*Switch, bool) { return sw, a == agent }
	var samples []xdr
	for i := range 8 {
		samples = append(samples, flowSample(uint32(i), 5, 1000, 7000, 0, 3, 5, frame(0, h1, h3, 6, 40000+uint16(i), 5201), 1518))
	}
	dg := datagram(agent, samples...)
	s := NewStore(StoreOptions{MaxFlows: 1000})
	var d Datagram
	at := time.Unix(1_700_000_000, 0)
	b.ReportAllocs()
	for b.Loop() {
		if why, err := s.Ingest(dg, &d, known, at, func(Refusal) {}); why != "" {
			b.Fatal(why, err)
		}
	}
	b.ReportMetric(float64(8*b.N)/b.Elapsed().Seconds(), "samples/s")
}
