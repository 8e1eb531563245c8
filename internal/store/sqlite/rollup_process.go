package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/netloom/netloom/internal/store"
)

// procAcc adds up one rank's samples of a bucket: sums, and for memory
// the sum (for the mean) and the maximum.
type procAcc struct {
	time                                   int64 // newest sample
	span                                   time.Duration
	n                                      uint64
	cpuUser, cpuSystem, mpi                float64
	cpuPeak, bytesPeak                     float64
	rssSum, sizeSum, rssMax, sizeMax       uint64
	ioRead, ioWrite, mpiioRead, mpiioWrite uint64
	traffic                                store.Classes
	intra, inter                           store.Traffic
}

func (a *procAcc) addRaw(t int64, x *store.ProcessSample) {
	b := procAcc{time: t, span: x.Span, n: 1, cpuUser: x.CPUUser, cpuSystem: x.CPUSystem, mpi: x.MPI,
		rssSum: x.VmRSS, sizeSum: x.VmSize, rssMax: x.VmRSS, sizeMax: x.VmSize,
		ioRead: x.IORead, ioWrite: x.IOWrite, mpiioRead: x.MPIIORead, mpiioWrite: x.MPIIOWrite,
		traffic: x.Traffic, intra: x.IntraNode, inter: x.InterNode}
	if x.Span > 0 {
		b.cpuPeak = (x.CPUUser + x.CPUSystem) / x.Span.Seconds()
		b.bytesPeak = float64(x.Traffic.Total().Bytes) / x.Span.Seconds()
	}
	a.add(&b)
}

func (a *procAcc) add(b *procAcc) {
	a.time = max(a.time, b.time)
	a.span += b.span
	a.n += b.n
	a.cpuUser += b.cpuUser
	a.cpuSystem += b.cpuSystem
	a.mpi += b.mpi
	a.cpuPeak = max(a.cpuPeak, b.cpuPeak)
	a.bytesPeak = max(a.bytesPeak, b.bytesPeak)
	a.rssMax = max(a.rssMax, b.rssMax)
	a.sizeMax = max(a.sizeMax, b.sizeMax)
	sums, more := a.sums(), b.sums()
	for i, p := range sums {
		*p = addSat(*p, *more[i])
	}
}

// sums are the fields that add up.
func (a *procAcc) sums() []*uint64 {
	return []*uint64{&a.rssSum, &a.sizeSum, &a.ioRead, &a.ioWrite, &a.mpiioRead, &a.mpiioWrite,
		&a.traffic.P2P.Bytes, &a.traffic.P2P.Msgs, &a.traffic.Coll.Bytes, &a.traffic.Coll.Msgs, &a.traffic.RMA.Bytes, &a.traffic.RMA.Msgs,
		&a.intra.Bytes, &a.intra.Msgs, &a.inter.Bytes, &a.inter.Msgs}
}

// sample is the rollup point the accumulator stands for.
func (a *procAcc) sample(job string, rank int, width time.Duration) store.ProcessSample {
	x := store.ProcessSample{Job: job, Rank: rank, Time: fromNS(a.time), Span: a.span, Resolution: width, Samples: int(min(a.n, math.MaxInt32)),
		CPUUser: a.cpuUser, CPUSystem: a.cpuSystem, MPI: a.mpi, CPUPeak: a.cpuPeak, BytesPeak: a.bytesPeak,
		VmRSSMax: a.rssMax, VmSizeMax: a.sizeMax,
		IORead: a.ioRead, IOWrite: a.ioWrite, MPIIORead: a.mpiioRead, MPIIOWrite: a.mpiioWrite,
		Traffic: a.traffic, IntraNode: a.intra, InterNode: a.inter}
	if a.n > 0 {
		x.VmRSS, x.VmSize = a.rssSum/a.n, a.sizeSum/a.n
	}
	return x
}

// A process rollup blob is formatRollup, then uvarints: summed span in
// nanoseconds, number of samples, CPU user, CPU system and MPI seconds in
// microseconds (zig-zag), the CPU peak in thousandths of a CPU, the send
// rate peak in bytes per second, the maxima of VmRSS and VmSize, then the
// sums in the order of procAcc.sums. Rollups are summaries: microseconds
// are plenty, and keep the row ~30 bytes shorter than float64 bits.
func encodeProcessRollup(dst []byte, a *procAcc) []byte {
	dst = append(dst, formatRollup)
	dst = binary.AppendUvarint(dst, uint64(max(a.span, 0)))
	dst = binary.AppendUvarint(dst, a.n)
	for _, f := range []float64{a.cpuUser, a.cpuSystem, a.mpi} {
		dst = binary.AppendUvarint(dst, zigzag(int64(math.Round(clampF(f*1e6)))))
	}
	dst = binary.AppendUvarint(dst, peakUnits(a.cpuPeak*1000))
	dst = binary.AppendUvarint(dst, peakUnits(a.bytesPeak))
	dst = binary.AppendUvarint(dst, a.rssMax)
	dst = binary.AppendUvarint(dst, a.sizeMax)
	for _, p := range a.sums() {
		dst = binary.AppendUvarint(dst, *p)
	}
	return dst
}

// clampF keeps v within what an int64 holds.
func clampF(v float64) float64 {
	if v != v {
		return 0
	}
	return max(min(v, math.MaxInt64/2), math.MinInt64/2)
}

func decodeProcessRollup(b []byte, t int64) (procAcc, error) {
	a := procAcc{time: t}
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
	if r.off != len(r.b) {
		return a, fmt.Errorf("%d trailing bytes", len(r.b)-r.off)
	}
	return a, nil
}

// processStmts are a level's statements for process rows, prepared once
// per step: the job of the oldest expired row, the next rank of a job, a
// rank's expired rows (key, time, data), their deletion up to a key, and
// the stored rollup rows of a rank and width in a bucket range.
type processStmts struct {
	oldest, nextRank, rows, del, targets, put *sql.Stmt
}

func (s *Store) prepareProcess(ctx context.Context, tx *sql.Tx, l int) (*processStmts, func(), error) {
	var q [6]string
	if l == levelRaw {
		q[0] = `SELECT job FROM job_samples WHERE time_ns < ? ORDER BY time_ns LIMIT 1`
		q[1] = `SELECT rank FROM job_samples WHERE job = ? AND rank > ? ORDER BY rank LIMIT 1`
		q[2] = `SELECT time_ns, time_ns, data FROM job_samples WHERE job = ? AND rank = ? AND time_ns < ? ORDER BY time_ns LIMIT ?`
		q[3] = `DELETE FROM job_samples WHERE job = ? AND rank = ? AND time_ns <= ?`
	} else {
		w := widthS(l)
		q[0] = fmt.Sprintf(`SELECT job FROM job_rollups WHERE width_s = %d AND bucket_ns < ? ORDER BY bucket_ns LIMIT 1`, w)
		q[1] = `SELECT rank FROM job_rollups WHERE job = ? AND rank > ? ORDER BY rank LIMIT 1`
		q[2] = fmt.Sprintf(`SELECT bucket_ns, time_ns, data FROM job_rollups WHERE job = ? AND rank = ? AND width_s = %d AND bucket_ns < ? ORDER BY bucket_ns LIMIT ?`, w)
		q[3] = fmt.Sprintf(`DELETE FROM job_rollups WHERE job = ? AND rank = ? AND width_s = %d AND bucket_ns <= ?`, w)
	}
	q[4] = `SELECT bucket_ns, time_ns, data FROM job_rollups WHERE job = ? AND rank = ? AND width_s = ? AND bucket_ns BETWEEN ? AND ?`
	q[5] = `INSERT OR REPLACE INTO job_rollups(job, rank, width_s, bucket_ns, time_ns, data) VALUES (?, ?, ?, ?, ?, ?)`
	st, closeAll, err := prepareAll(ctx, tx, q[:])
	if err != nil {
		return nil, nil, err
	}
	return &processStmts{oldest: st[0], nextRank: st[1], rows: st[2], del: st[3], targets: st[4], put: st[5]}, closeAll, nil
}

// foldProcessesStep does one transaction of folding level l's expired
// process rows into coarser levels, job by job and rank by rank (a rank's
// rows are stored side by side). It reports whether there was any to
// fold.
func (s *Store) foldProcessesStep(ctx context.Context, c cutoffs, l int) (bool, error) {
	if c[l] == keepAll {
		return false, nil
	}
	what := fmt.Sprintf("roll up process samples (%s) before %s", levelName(l), fromNS(c[l]).Format(time.RFC3339))
	found := false
	err := s.writeTx(ctx, what, func(tx *sql.Tx) error {
		st, done, err := s.prepareProcess(ctx, tx, l)
		if err != nil {
			return err
		}
		defer done()
		cur := &s.cursors[cursorProcesses+l]
		oldest := func() (bool, error) {
			var job string
			switch err := st.oldest.QueryRowContext(ctx, c[l]).Scan(&job); {
			case errors.Is(err, sql.ErrNoRows):
				cur.open = false
				return false, nil
			case err != nil:
				return false, err
			}
			*cur = foldCursor{job: job, rank: math.MinInt64, open: true}
			return true, nil
		}
		if !cur.open {
			ok, err := oldest()
			if err != nil || !ok {
				return err
			}
		}
		found = true
		budget := s.opt.RollupProcessRows
		for budget > 0 {
			var rank int64
			err := st.nextRank.QueryRowContext(ctx, cur.job, cur.rank).Scan(&rank)
			if errors.Is(err, sql.ErrNoRows) {
				budget--
				if ok, err := oldest(); err != nil || !ok {
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
			n, err := s.foldProcessRank(ctx, st, c, l, cur.job, rank, budget)
			if err != nil {
				return fmt.Errorf("job %s rank %d: %w", cur.job, rank, err)
			}
			if n == budget {
				cur.rank = rank - 1 // it may have more
				return nil
			}
			cur.rank = rank
			budget -= max(n, 1)
		}
		return nil
	})
	return found, err
}

// foldProcessRank folds at most limit expired rows of one rank and
// returns how many it folded.
func (s *Store) foldProcessRank(ctx context.Context, st *processStmts, c cutoffs, l int, job string, rank int64, limit int) (int, error) {
	rows, err := st.rows.QueryContext(ctx, job, rank, c[l], limit)
	if err != nil {
		return 0, err
	}
	targets := map[rollupKey]*procAcc{}
	n := 0
	var lastKey int64
	for rows.Next() {
		var key, t int64
		var data sql.RawBytes
		if err := rows.Scan(&key, &t, &data); err != nil {
			rows.Close()
			return 0, err
		}
		n, lastKey = n+1, key
		tl, tb, ok := c.target(l, key)
		if !ok {
			continue
		}
		a := targets[rollupKey{tl, tb}]
		if a == nil {
			a = &procAcc{}
			targets[rollupKey{tl, tb}] = a
		}
		if l == levelRaw {
			x, err := decodeProcessSample(data)
			if err != nil {
				rows.Close()
				return 0, fmt.Errorf("sample at %s: %w", fromNS(t).Format(time.RFC3339Nano), err)
			}
			a.addRaw(t, &x)
		} else {
			b, err := decodeProcessRollup(data, t)
			if err != nil {
				rows.Close()
				return 0, fmt.Errorf("rollup at %s: %w", fromNS(key).Format(time.RFC3339), err)
			}
			a.add(&b)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	if _, err := st.del.ExecContext(ctx, job, rank, lastKey); err != nil {
		return 0, fmt.Errorf("delete folded rows: %w", err)
	}
	// Merge with what the target buckets already hold: one range query
	// per level.
	for level := level5m; level < numLevels; level++ {
		lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
		for k := range targets {
			if k.level == level {
				lo, hi = min(lo, k.bucket), max(hi, k.bucket)
			}
		}
		if lo > hi {
			continue
		}
		if err := func() error {
			rows, err := st.targets.QueryContext(ctx, job, rank, widthS(level), lo, hi)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var b, t int64
				var data sql.RawBytes
				if err := rows.Scan(&b, &t, &data); err != nil {
					return err
				}
				a := targets[rollupKey{level, b}]
				if a == nil {
					continue
				}
				old, err := decodeProcessRollup(data, t)
				if err != nil {
					return fmt.Errorf("rollup at %s: %w", fromNS(b).Format(time.RFC3339), err)
				}
				a.add(&old)
			}
			return rows.Err()
		}(); err != nil {
			return 0, err
		}
	}
	var buf []byte
	for k, a := range targets {
		buf = encodeProcessRollup(buf[:0], a)
		if _, err := st.put.ExecContext(ctx, job, rank, widthS(k.level), k.bucket, a.time, buf); err != nil {
			return 0, fmt.Errorf("rollup at %s: %w", fromNS(k.bucket).Format(time.RFC3339), err)
		}
	}
	return n, nil
}
