package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/netloom/netloom/internal/store"
)

// ProcessRollup adds up one rank's samples of a bucket: sums, and for memory
// the sum (for the mean) and the maximum.
type ProcessRollup struct {
	Time                                   int64 // newest sample
	span                                   time.Duration
	n                                      uint64
	cpuUser, cpuSystem, mpi                float64
	cpuPeak, bytesPeak                     float64
	wait                                   float64 // NETLOOM_WAITS' seconds, summed
	rssSum, sizeSum, rssMax, sizeMax       uint64
	ioRead, ioWrite, mpiioRead, mpiioWrite uint64
	traffic                                store.Classes
	intra, inter                           store.Traffic
	extra                                  rollupExtra // the fields declared after the frozen one (record.gen.go)
}

func (a *ProcessRollup) AddRaw(t int64, x *store.ProcessSample) {
	b := ProcessRollup{Time: t, span: x.Span, n: 1, cpuUser: x.CPUUser, cpuSystem: x.CPUSystem, mpi: x.MPI, wait: x.Wait,
		rssSum: x.VmRSS, sizeSum: x.VmSize, rssMax: x.VmRSS, sizeMax: x.VmSize,
		ioRead: x.IORead, ioWrite: x.IOWrite, mpiioRead: x.MPIIORead, mpiioWrite: x.MPIIOWrite,
		traffic: x.Traffic, intra: x.IntraNode, inter: x.InterNode, extra: rollupExtra{sum: x.SampleExtra}}
	if x.Span > 0 {
		b.cpuPeak = (x.CPUUser + x.CPUSystem) / x.Span.Seconds()
		b.bytesPeak = float64(x.Traffic.Total().Bytes) / x.Span.Seconds()
	}
	a.Add(&b)
}

func (a *ProcessRollup) Add(b *ProcessRollup) {
	a.Time = max(a.Time, b.Time)
	a.span += b.span
	a.n += b.n
	a.cpuUser += b.cpuUser
	a.cpuSystem += b.cpuSystem
	a.mpi += b.mpi
	a.wait += b.wait
	a.cpuPeak = max(a.cpuPeak, b.cpuPeak)
	a.bytesPeak = max(a.bytesPeak, b.bytesPeak)
	a.rssMax = max(a.rssMax, b.rssMax)
	a.sizeMax = max(a.sizeMax, b.sizeMax)
	a.extra.add(&b.extra)
	sums, more := a.sums(), b.sums()
	for i, p := range sums {
		*p = AddSat(*p, *more[i])
	}
}

// sums are the fields that add up.
func (a *ProcessRollup) sums() []*uint64 {
	return []*uint64{&a.rssSum, &a.sizeSum, &a.ioRead, &a.ioWrite, &a.mpiioRead, &a.mpiioWrite,
		&a.traffic.P2P.Bytes, &a.traffic.P2P.Msgs, &a.traffic.Coll.Bytes, &a.traffic.Coll.Msgs, &a.traffic.RMA.Bytes, &a.traffic.RMA.Msgs,
		&a.intra.Bytes, &a.intra.Msgs, &a.inter.Bytes, &a.inter.Msgs}
}

// Sample is the rollup point the accumulator stands for.
func (a *ProcessRollup) Sample(job string, rank int, width time.Duration) store.ProcessSample {
	x := store.ProcessSample{Job: job, Rank: rank, Time: FromNS(a.Time), Span: a.span, Resolution: width, Samples: int(min(a.n, math.MaxInt32)),
		CPUUser: a.cpuUser, CPUSystem: a.cpuSystem, MPI: a.mpi, Wait: a.wait, CPUPeak: a.cpuPeak, BytesPeak: a.bytesPeak,
		VmRSSMax: a.rssMax, VmSizeMax: a.sizeMax,
		IORead: a.ioRead, IOWrite: a.ioWrite, MPIIORead: a.mpiioRead, MPIIOWrite: a.mpiioWrite,
		Traffic: a.traffic, IntraNode: a.intra, InterNode: a.inter}
	if a.n > 0 {
		x.VmRSS, x.VmSize = a.rssSum/a.n, a.sizeSum/a.n
	}
	a.extra.point(&x.SampleExtra, a.n)
	return x
}

// EncodeProcessRollup appends a process rollup blob:  formatRollup, then uvarints: summed span in
// nanoseconds, number of samples, CPU user, CPU system and MPI seconds in
// microseconds (zig-zag), the CPU peak in thousandths of a CPU, the send
// rate peak in bytes per second, the maxima of VmRSS and VmSize, then the
// sums in the order of ProcessRollup.sums, then, only when not zero, the
// wait seconds (NETLOOM_WAITS) in microseconds (zig-zag; rollups written
// before them end with the sums), then, only when one is not zero, the
// sums of the sampled fields declared after the frozen one
// (appendSampleTail, generated; the wait is then written even when zero)
// to the row's end. Rollups are summaries: microseconds
// are plenty, and keep the row ~30 bytes shorter than float64 bits.
func EncodeProcessRollup(dst []byte, a *ProcessRollup) []byte {
	dst = append(dst, formatRollup)
	dst = binary.AppendUvarint(dst, uint64(max(a.span, 0)))
	dst = binary.AppendUvarint(dst, a.n)
	for _, f := range []float64{a.cpuUser, a.cpuSystem, a.mpi} {
		dst = binary.AppendUvarint(dst, zigzag(int64(math.Round(clampF(f*1e6)))))
	}
	dst = binary.AppendUvarint(dst, PeakUnits(a.cpuPeak*1000))
	dst = binary.AppendUvarint(dst, PeakUnits(a.bytesPeak))
	dst = binary.AppendUvarint(dst, a.rssMax)
	dst = binary.AppendUvarint(dst, a.sizeMax)
	for _, p := range a.sums() {
		dst = binary.AppendUvarint(dst, *p)
	}
	tail := appendSampleTail(nil, &a.extra.sum)
	if a.wait != 0 || len(tail) > 0 {
		dst = binary.AppendUvarint(dst, zigzag(int64(math.Round(clampF(a.wait*1e6)))))
	}
	return append(dst, tail...)
}

// clampF keeps v within what an int64 holds.
func clampF(v float64) float64 {
	if v != v {
		return 0
	}
	return max(min(v, math.MaxInt64/2), math.MinInt64/2)
}

func DecodeProcessRollup(b []byte, t int64) (ProcessRollup, error) {
	a := ProcessRollup{Time: t}
	if len(b) == 0 || b[0] != formatRollup {
		return a, errors.New("not a process rollup")
	}
	r := &reader{b: b[1:]}
	span, err := r.uvarint()
	if err != nil {
		return a, err
	}
	if span > math.MaxInt64 {
		return a, fmt.Errorf("span %d out of range", span)
	}
	a.span = time.Duration(span)
	if a.n, err = r.uvarint(); err != nil {
		return a, err
	}
	for _, f := range []*float64{&a.cpuUser, &a.cpuSystem, &a.mpi} {
		v, err := r.uvarint()
		if err != nil {
			return a, err
		}
		*f = float64(unzigzag(v)) / 1e6
	}
	for i, f := range []*float64{&a.cpuPeak, &a.bytesPeak} {
		v, err := r.uvarint()
		if err != nil {
			return a, err
		}
		*f = float64(v)
		if i == 0 {
			*f /= 1000
		}
	}
	for _, p := range append([]*uint64{&a.rssMax, &a.sizeMax}, a.sums()...) {
		if *p, err = r.uvarint(); err != nil {
			return a, err
		}
	}
	if r.off < len(r.b) { // the waits, when not zero (rollups before them end above)
		v, err := r.uvarint()
		if err != nil {
			return a, err
		}
		a.wait = float64(unzigzag(v)) / 1e6
	}
	// the sums of the sampled fields declared after the frozen one, to the end
	if err := readSampleTail(r.b[r.off:], &a.extra.sum); err != nil {
		return a, fmt.Errorf("rollup's tail: %w", err)
	}
	return a, nil
}
