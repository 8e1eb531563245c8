package ingest

import (
	"github.com/netloom/netloom/internal/store"
)

// Deltas: what a rank did between two snapshots (a store.ProcessSample
// per snapshot after the first), collected and handed on in batches.

// addClasses adds c to sum in place (Classes.Add copies both, and this is
// done for every node row of every snapshot).
func addClasses(sum, c *store.Classes) {
	sum.P2P.Bytes += c.P2P.Bytes
	sum.P2P.Msgs += c.P2P.Msgs
	sum.Coll.Bytes += c.Coll.Bytes
	sum.Coll.Msgs += c.Coll.Msgs
	sum.RMA.Bytes += c.RMA.Bytes
	sum.RMA.Msgs += c.RMA.Msgs
}

func subUint(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// waitNS is a rank's waits (NETLOOM_WAITS) so far, all functions.
func waitNS(p *store.Process) uint64 {
	var w uint64
	for i := range p.Functions {
		w += p.Functions[i].WaitNS
	}
	return w
}

// delta is what a rank did between two snapshots; sa and sb are what
// they sent.
func delta(job string, a, b *store.Process, sa, sb store.Classes) store.ProcessSample {
	s := store.ProcessSample{Job: job, Rank: b.Rank, Time: b.Time, Span: b.Time.Sub(a.Time),
		Wait: float64(subUint(waitNS(b), waitNS(a))) / 1e9}
	// The process block's sampled fields (record.gen.go).
	sampleOf(&s, &a.ProcessUsage, &b.ProcessUsage)
	// Class totals come from destination nodes; a node absent before
	// counts from zero, so a decrease cannot happen here, but be safe.
	s.Traffic = store.Classes{
		P2P:  store.Traffic{Bytes: subUint(sb.P2P.Bytes, sa.P2P.Bytes), Msgs: subUint(sb.P2P.Msgs, sa.P2P.Msgs)},
		Coll: store.Traffic{Bytes: subUint(sb.Coll.Bytes, sa.Coll.Bytes), Msgs: subUint(sb.Coll.Msgs, sa.Coll.Msgs)},
		RMA:  store.Traffic{Bytes: subUint(sb.RMA.Bytes, sa.RMA.Bytes), Msgs: subUint(sb.RMA.Msgs, sa.RMA.Msgs)},
	}
	return s
}

func (t *Tracker) flushSamples() {
	if len(t.samples) == 0 {
		return
	}
	if t.opt.Samples != nil {
		t.opt.Samples(t.samples)
	}
	// The next batch is likely as large: grown from nothing by append, the
	// batches' copies were 1.5% of the daemon's CPU at ten times Stampede.
	t.samples = make([]store.ProcessSample, 0, min(len(t.samples), maxSamples))
}

// maxSamples is the most samples handed on at once.
const maxSamples = 4096
