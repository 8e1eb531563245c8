package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/netloom/netloom/internal/store"
)

// EncodeProcessSample and DecodeProcessSample: a process sample is a format byte, then uvarints: span in nanoseconds,
// the three float64 seconds as their bits, then the byte and message
// counters in the order of sampleUints, then, only when not zero, the wait
// seconds (NETLOOM_WAITS) as their bits (rows written before it end there),
// then, only when one is not zero, the sampled fields declared after the
// frozen one (appendSampleTail, generated; the wait is then written even
// when zero) to the row's end.
const formatSample = 0x01

func sampleUints(x *store.ProcessSample) []*uint64 {
	return []*uint64{&x.VmRSS, &x.VmSize, &x.IORead, &x.IOWrite, &x.MPIIORead, &x.MPIIOWrite,
		&x.Traffic.P2P.Bytes, &x.Traffic.P2P.Msgs, &x.Traffic.Coll.Bytes, &x.Traffic.Coll.Msgs, &x.Traffic.RMA.Bytes, &x.Traffic.RMA.Msgs,
		&x.IntraNode.Bytes, &x.IntraNode.Msgs, &x.InterNode.Bytes, &x.InterNode.Msgs}
}

func EncodeProcessSample(dst []byte, x *store.ProcessSample) []byte {
	dst = append(dst, formatSample)
	dst = binary.AppendUvarint(dst, uint64(max(x.Span, 0)))
	for _, f := range []float64{x.CPUUser, x.CPUSystem, x.MPI} {
		dst = binary.AppendUvarint(dst, math.Float64bits(f))
	}
	for _, v := range sampleUints(x) {
		dst = binary.AppendUvarint(dst, *v)
	}
	tail := appendSampleTail(nil, &x.SampleExtra)
	if x.Wait != 0 || len(tail) > 0 {
		dst = binary.AppendUvarint(dst, math.Float64bits(x.Wait))
	}
	return append(dst, tail...)
}

func DecodeProcessSample(b []byte) (store.ProcessSample, error) {
	var x store.ProcessSample
	if len(b) == 0 || b[0] != formatSample {
		return x, errors.New("unknown sample format")
	}
	b = b[1:]
	next := func() (uint64, error) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, errTruncated
		}
		b = b[n:]
		return v, nil
	}
	span, err := next()
	if err != nil {
		return x, err
	}
	x.Span = time.Duration(span)
	for _, f := range []*float64{&x.CPUUser, &x.CPUSystem, &x.MPI} {
		v, err := next()
		if err != nil {
			return x, err
		}
		*f = math.Float64frombits(v)
	}
	for _, p := range sampleUints(&x) {
		if *p, err = next(); err != nil {
			return x, err
		}
	}
	if len(b) > 0 {
		v, err := next()
		if err != nil {
			return x, err
		}
		x.Wait = math.Float64frombits(v)
	}
	if err := readSampleTail(b, &x.SampleExtra); err != nil {
		return x, fmt.Errorf("process sample's tail: %w", err)
	}
	return x, nil
}
