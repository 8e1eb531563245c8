package sflow

import (
	"math"
	"time"

	"github.com/netloom/netloom/internal/fabric"
)

// DirFlow is a flow sampled leaving one link direction (the sending
// switch port) over a time range.
type DirFlow struct {
	Dir fabric.PortRef
	Flow
}

// All returns the flows sampled leaving every direction whose samples
// fall in [from, to] (at the bucket's resolution, as Flows), in no order:
// one pass over the store for what attribution by observed shares and
// ECMP collisions need.
func (s *Store) All(from, to time.Time) []DirFlow {
	step := int64(s.opt.Bucket / time.Second)
	if step < 1 {
		step = 1
	}
	lo, hi := from.Unix(), to.Unix()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]DirFlow, 0, min(len(s.flows), 1024))
	for df, el := range s.flows {
		if f := el.Value.(*entry).flow(lo, hi, step); f.Samples > 0 {
			out = append(out, DirFlow{Dir: df.dir, Flow: f})
		}
	}
	return out
}

// RelError95 is sFlow's bound on the relative error of a total estimated
// from n samples, at 95% confidence: 1.96·sqrt(1/n) (sFlow.org, "Packet
// Sampling Basics"); +Inf for no sample.
func RelError95(n uint64) float64 {
	if n == 0 {
		return math.Inf(1)
	}
	return 1.96 / math.Sqrt(float64(n))
}
