package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
)

// Rollup blobs of port samples:
//
//	byte     formatRollup
//	uvarint  length of the sums body
//	sums     a port_samples body (ports.go, without its format byte): per
//	         port the summed span, deltas, and Reset/Saturated if any
//	peaks    a port_samples body over the same ports whose span column
//	         holds the number of samples and whose XmitData, RcvData and
//	         XmitWait columns (store.PeakCounters) the peak per-second rates
const formatRollup = 0x02

// EncodeRollup appends the rollup blob of pts, one switch's points sorted
// by port, to dst.
func (e *Encoder) EncodeRollup(dst []byte, pts []store.PortPoint) ([]byte, error) {
	sums := make([]fabric.PortSample, len(pts))
	peaks := make([]fabric.PortSample, len(pts))
	for i := range pts {
		p := &pts[i]
		sums[i] = p.PortSample
		peaks[i] = fabric.PortSample{Port: p.Port, Span: time.Duration(p.Samples)}
		for j, c := range store.PeakCounters {
			peaks[i].Delta[c] = PeakUnits(p.Peak[j])
		}
	}
	a, err := e.EncodeSwitch(nil, sums)
	if err != nil {
		return nil, fmt.Errorf("rollup sums: %w", err)
	}
	b, err := e.EncodeSwitch(nil, peaks)
	if err != nil {
		return nil, fmt.Errorf("rollup peaks: %w", err)
	}
	dst = append(dst, formatRollup)
	dst = binary.AppendUvarint(dst, uint64(len(a)-1))
	dst = append(dst, a[1:]...)
	return append(dst, b[1:]...), nil
}

// PeakUnits stores a peak rate as a whole number per second.
func PeakUnits(v float64) uint64 {
	switch {
	case !(v > 0): // also NaN
		return 0
	case v >= math.MaxUint64:
		return math.MaxUint64
	}
	return uint64(math.Round(v))
}

// DecodeRollup appends the points of a rollup blob of node g to dst.
func (d *Decoder) DecodeRollup(dst []store.PortPoint, blob []byte, g fabric.GUID, t time.Time, width time.Duration, want func(port int) bool) ([]store.PortPoint, error) {
	fail := func(err error) ([]store.PortPoint, error) {
		return dst, fmt.Errorf("decode rollup of %s at %s: %w", g, t.Format(time.RFC3339Nano), err)
	}
	if len(blob) == 0 || blob[0] != formatRollup {
		return fail(errors.New("not a rollup blob"))
	}
	r := &reader{b: blob[1:]}
	n, err := r.uvarint()
	if err != nil {
		return fail(fmt.Errorf("sums length: %w", err))
	}
	sumsBody, err := r.bytes(int(min(n, math.MaxInt32)))
	if err != nil {
		return fail(fmt.Errorf("sums: %w", err))
	}
	peaksBody := r.b[r.off:]
	sums, err := d.decodeBody(nil, sumsBody, g, t, want)
	if err != nil {
		return fail(fmt.Errorf("sums: %w", err))
	}
	peaks, err := d.decodeBody(nil, peaksBody, g, t, want)
	if err != nil {
		return fail(fmt.Errorf("peaks: %w", err))
	}
	if len(peaks) != len(sums) {
		return fail(fmt.Errorf("%d peaks for %d sums", len(peaks), len(sums)))
	}
	for i := range sums {
		if peaks[i].Port != sums[i].Port {
			return fail(fmt.Errorf("peak of port %d beside sum of port %d", peaks[i].Port.Port, sums[i].Port.Port))
		}
		p := store.PortPoint{PortSample: sums[i], Resolution: width, Samples: int(min(uint64(peaks[i].Span), math.MaxInt32))}
		for j, c := range store.PeakCounters {
			p.Peak[j] = float64(peaks[i].Delta[c])
		}
		dst = append(dst, p)
	}
	return dst, nil
}

// AddSat adds, saturating at the largest uint64.
func AddSat(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxUint64
}
