package sflow

import (
	"net/netip"
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
