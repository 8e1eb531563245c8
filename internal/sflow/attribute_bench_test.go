package sflow_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/flowjobs"
	"github.com/netloom/netloom/internal/ingest"
	"github.com/netloom/netloom/internal/sflow"
)

// BenchmarkDecodeAttribute is what the daemon does with each flow sample,
// decoded and attributed, on one core (bench/sflow/run.sh): the datagram
// decoded and its samples kept per link direction and flow
// (Store.Ingest), then each sample's flow mapped as the API maps a
// tracked flow when it splits a job's bytes by what was seen
// (internal/api/ecmp.go): its job and ranks looked up in the flows-to-jobs
// index (the ranks' reported connections), its hosts by address, and its
// bytes and sample added to the job's host pair on that direction. The API
// does the mapping once per tracked flow and query, not per sample: per
// sample it is an upper bound.
func BenchmarkDecodeAttribute(b *testing.B) {
	agent := netip.MustParseAddr("10.99.0.2")
	sw := &sflow.Switch{GUID: 0xabc, Ports: map[uint32]int{3: 1, 5: 2}}
	known := func(a netip.Addr) (*sflow.Switch, bool) { return sw, a == agent }
	const flows = 8
	idx := flowjobs.New(flowjobs.Options{})
	start := time.Unix(1_700_000_000, 0)
	hostOf := map[netip.Addr]fabric.LID{}
	var samples [][]byte
	for i := range flows {
		src := netip.AddrFrom4([4]byte{10, 0, 1, byte(1 + i)})
		dst := netip.AddrFrom4([4]byte{10, 0, 3, byte(1 + i)})
		hostOf[src], hostOf[dst] = fabric.LID(100+i), fabric.LID(200+i)
		sport := uint16(40000 + i)
		samples = append(samples, sflow.FlowSampleForTest(uint32(i), 5, 1000, 7000, 0, 3, 5, sflow.FrameForTest(0, src, dst, 6, sport, 5201), 1518))
		idx.Report(ingest.ConnReport{Job: "j1", User: "u", Rank: i, Start: start, At: start,
			Conns: []ingest.Conn{{Kind: "tcp", Local: netip.AddrPortFrom(src, sport), Remote: netip.AddrPortFrom(dst, 5201), Peer: ingest.NoPeer}}})
	}
	dg := sflow.DatagramForTest(agent, samples...)
	s := sflow.NewStore(sflow.StoreOptions{MaxFlows: 1000})
	var d sflow.Datagram
	at := start.Add(time.Minute)
	type pairDir struct {
		job      string
		src, dst fabric.LID
		dir      fabric.PortRef
	}
	type weight struct{ bytes, samples uint64 }
	seen := map[pairDir]weight{}
	matched := 0
	b.ReportAllocs()
	for b.Loop() {
		if why, err := s.Ingest(dg, &d, known, at, func(sflow.Refusal) {}); why != "" {
			b.Fatal(why, err)
		}
		for i := range d.Flows {
			f := &d.Flows[i]
			h := &f.Header
			k := sflow.FlowKey{Src: h.Src, Dst: h.Dst, Proto: h.Proto, SrcPort: h.SrcPort, DstPort: h.DstPort}
			m, ok := idx.Lookup(k, at)
			if !ok {
				continue
			}
			matched++
			pd := pairDir{job: m.Job, src: hostOf[k.Src], dst: hostOf[k.Dst], dir: fabric.PortRef{GUID: sw.GUID, Port: sw.Ports[f.Output]}}
			w := seen[pd]
			w.bytes += uint64(h.FrameLength) * uint64(f.SamplingRate)
			w.samples++
			seen[pd] = w
		}
	}
	if matched != flows*b.N {
		b.Fatalf("%d of %d samples matched a job", matched, flows*b.N)
	}
	b.ReportMetric(float64(flows*b.N)/b.Elapsed().Seconds(), "samples/s")
}
