package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
)

// Rollups are made lazily, when samples pass their raw retention: one
// transaction reads a bounded run of expired rows, adds them into the
// rollup rows of their buckets (merging with what a bucket already holds)
// and deletes them. Each step is therefore atomic and idempotent: a crash
// or a stop between steps leaves every sample counted exactly once, in a
// raw row or in a rollup, and the next step carries on. Rows that arrive
// late for a bucket already rolled up are merged into it the same way.
//
// Levels: 0 raw, 1 5-minute rollups, 2 1-hour rollups. A row's key is
// its time (raw) or its bucket start (rollups).
const (
	levelRaw = iota
	level5m
	level1h
	numLevels
)

var levelWidth = [numLevels]int64{0, int64(store.Rollup5m), int64(store.Rollup1h)}

// widthS is level l's bucket width in seconds, as the tables keep it.
func widthS(l int) int64 { return levelWidth[l] / int64(time.Second) }

// keepAll is the cutoff of a level that keeps everything.
const keepAll = math.MinInt64

// cutoffs are per level the aligned time before which that level's rows
// have expired: raw cutoffs are rounded down to 5 minutes and rollup
// cutoffs to 1 hour, so that an expired row never shares its target
// bucket with a row that has not expired.
type cutoffs [numLevels]int64

func newCutoffs(raw, r5m, r1h time.Time) cutoffs {
	return cutoffs{align(raw, store.Rollup5m), align(r5m, store.Rollup1h), align(r1h, store.Rollup1h)}
}

func align(t time.Time, w time.Duration) int64 {
	if t.IsZero() {
		return keepAll
	}
	return floorTo(t.UnixNano(), int64(w))
}

// floorTo rounds v down to a multiple of w (also for negative v).
func floorTo(v, w int64) int64 {
	q := v / w
	if v%w != 0 && v < 0 {
		q--
	}
	return q * w
}

// target returns the level and bucket that an expired row of level l
// with key k is folded into: the finest coarser level that still keeps
// the bucket. ok is false when none does (the row is only deleted).
func (c cutoffs) target(l int, k int64) (level int, bucket int64, ok bool) {
	for t := l + 1; t < numLevels; t++ {
		b := floorTo(k, levelWidth[t])
		if b >= c[t] {
			return t, b, true
		}
	}
	return 0, 0, false
}

// rollupKey names a target row.
type rollupKey struct {
	level  int
	bucket int64
}

// foldCursor remembers where a fold phase stopped, so the next step goes
// on from there instead of revisiting entities without expired rows. It
// is only a hint: any position gives correct results. For ports, rank
// holds the start of the slice being folded.
type foldCursor struct {
	node int64
	job  string
	rank int64
	open bool
}

// Rollup blobs of port samples:
//
//	byte     formatRollup
//	uvarint  length of the sums body
//	sums     a port_samples body (codec.go, without its format byte): per
//	         port the summed span, deltas, and Reset/Saturated if any
//	peaks    a port_samples body over the same ports whose span column
//	         holds the number of samples and whose XmitData, RcvData and
//	         XmitWait columns (store.PeakCounters) the peak per-second rates
const formatRollup = 0x02

// encodeRollup appends the rollup blob of pts, one switch's points sorted
// by port, to dst.
func (e *encoder) encodeRollup(dst []byte, pts []store.PortPoint) ([]byte, error) {
	sums := make([]fabric.PortSample, len(pts))
	peaks := make([]fabric.PortSample, len(pts))
	for i := range pts {
		p := &pts[i]
		sums[i] = p.PortSample
		peaks[i] = fabric.PortSample{Port: p.Port, Span: time.Duration(p.Samples)}
		for j, c := range store.PeakCounters {
			peaks[i].Delta[c] = peakUnits(p.Peak[j])
		}
	}
	a, err := e.encodeSwitch(nil, sums)
	if err != nil {
		return nil, fmt.Errorf("rollup sums: %w", err)
	}
	b, err := e.encodeSwitch(nil, peaks)
	if err != nil {
		return nil, fmt.Errorf("rollup peaks: %w", err)
	}
	dst = append(dst, formatRollup)
	dst = binary.AppendUvarint(dst, uint64(len(a)-1))
	dst = append(dst, a[1:]...)
	return append(dst, b[1:]...), nil
}

// peakUnits stores a peak rate as a whole number per second.
func peakUnits(v float64) uint64 {
	switch {
	case !(v > 0): // also NaN
		return 0
	case v >= math.MaxUint64:
		return math.MaxUint64
	}
	return uint64(math.Round(v))
}

// decodeRollup appends the points of a rollup blob of node g to dst.
func (d *decoder) decodeRollup(dst []store.PortPoint, blob []byte, g fabric.GUID, t time.Time, width time.Duration, want func(port int) bool) ([]store.PortPoint, error) {
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

// portAcc adds up one port's samples or points into a rollup point.
type portAcc struct{ p store.PortPoint }

func (a *portAcc) add(x *store.PortPoint) {
	s, y := &a.p.PortSample, &x.PortSample
	s.Span += y.Span
	for c := range s.Delta {
		s.Delta[c] = addSat(s.Delta[c], y.Delta[c])
	}
	s.Reset = s.Reset || y.Reset
	s.Saturated = s.Saturated || y.Saturated
	a.p.Samples += x.Samples
	for i := range a.p.Peak {
		a.p.Peak[i] = max(a.p.Peak[i], x.Peak[i])
	}
}

func addSat(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxUint64
}

// portBucket is one target rollup row being built.
type portBucket struct {
	time  int64
	ports map[int]*portAcc
}

func (b *portBucket) add(x *store.PortPoint) {
	a := b.ports[x.Port.Port]
	if a == nil {
		a = &portAcc{p: store.PortPoint{PortSample: fabric.PortSample{Port: fabric.PortRef{Port: x.Port.Port}}}}
		b.ports[x.Port.Port] = a
	}
	a.add(x)
}

func (b *portBucket) points() []store.PortPoint {
	out := make([]store.PortPoint, 0, len(b.ports))
	for _, a := range b.ports {
		out = append(out, a.p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Port.Port < out[j].Port.Port })
	return out
}

// portStmts are a level's statements for port rows, prepared once per
// step: the oldest expired key, the next switch, one switch's rows in a
// key range and their deletion, and a stored rollup row and its upsert.
type portStmts struct {
	oldest, nextNode, rows, del, target, put *sql.Stmt
}

func (s *Store) preparePorts(ctx context.Context, tx *sql.Tx, l int) (*portStmts, func(), error) {
	var q [6]string
	if l == levelRaw {
		q[0] = `SELECT time_ns FROM port_samples WHERE time_ns < ? ORDER BY time_ns LIMIT 1`
		q[2] = `SELECT time_ns, time_ns, ports, data FROM port_samples WHERE node_id = ? AND time_ns >= ? AND time_ns < ? ORDER BY time_ns LIMIT ?`
		q[3] = `DELETE FROM port_samples WHERE node_id = ? AND time_ns >= ? AND time_ns <= ?`
	} else {
		w := widthS(l)
		q[0] = fmt.Sprintf(`SELECT bucket_ns FROM port_rollups WHERE width_s = %d AND bucket_ns < ? ORDER BY bucket_ns LIMIT 1`, w)
		q[2] = fmt.Sprintf(`SELECT bucket_ns, time_ns, ports, data FROM port_rollups WHERE node_id = ? AND width_s = %d AND bucket_ns >= ? AND bucket_ns < ? ORDER BY bucket_ns LIMIT ?`, w)
		q[3] = fmt.Sprintf(`DELETE FROM port_rollups WHERE node_id = ? AND width_s = %d AND bucket_ns >= ? AND bucket_ns <= ?`, w)
	}
	q[1] = `SELECT id FROM nodes WHERE id > ? ORDER BY id LIMIT 1`
	q[4] = `SELECT time_ns, ports, data FROM port_rollups WHERE node_id = ? AND width_s = ? AND bucket_ns = ?`
	q[5] = `INSERT INTO port_rollups(node_id, width_s, bucket_ns, time_ns, ports, data) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT(node_id, width_s, bucket_ns) DO UPDATE SET time_ns = excluded.time_ns, ports = excluded.ports, data = excluded.data`
	st, closeAll, err := prepareAll(ctx, tx, q[:])
	if err != nil {
		return nil, nil, err
	}
	return &portStmts{oldest: st[0], nextNode: st[1], rows: st[2], del: st[3], target: st[4], put: st[5]}, closeAll, nil
}

// prepareAll prepares queries in tx; closeAll closes them.
func prepareAll(ctx context.Context, tx *sql.Tx, queries []string) (st []*sql.Stmt, closeAll func(), err error) {
	st = make([]*sql.Stmt, len(queries))
	closeAll = func() {
		for _, x := range st {
			if x != nil {
				x.Close()
			}
		}
	}
	for i, q := range queries {
		if st[i], err = tx.PrepareContext(ctx, q); err != nil {
			closeAll()
			return nil, nil, err
		}
	}
	return st, closeAll, nil
}

// portSlice is how much time one pass over the switches folds: the
// oldest expired slice first, all switches, then the next. Rows of one
// sweep are stored side by side, so folding a slice of every switch
// rewrites each page of the table about once, where folding switch by
// switch would rewrite it once per switch on it.
func portSlice(l int) int64 {
	if l == levelRaw {
		return levelWidth[level5m]
	}
	return levelWidth[level1h]
}

// portCounts are the changes to the sample and rollup point totals.
type portCounts struct{ samples, rollups int64 }

// foldPortsStep does one transaction of folding level l's expired port
// rows into coarser levels. It reports whether there was any to fold.
func (s *Store) foldPortsStep(ctx context.Context, c cutoffs, l int) (bool, error) {
	if c[l] == keepAll {
		return false, nil
	}
	what := fmt.Sprintf("roll up port samples (%s) before %s", levelName(l), fromNS(c[l]).Format(time.RFC3339))
	found := false
	err := s.writeTx(ctx, what, func(tx *sql.Tx) error {
		st, done, err := s.preparePorts(ctx, tx, l)
		if err != nil {
			return err
		}
		defer done()
		var first int64
		switch err := st.oldest.QueryRowContext(ctx, c[l]).Scan(&first); {
		case errors.Is(err, sql.ErrNoRows):
			return nil
		case err != nil:
			return err
		}
		found = true
		from := floorTo(first, portSlice(l))
		to := min(from+portSlice(l), c[l])
		cur := &s.cursors[cursorPorts+l]
		if !cur.open || cur.rank != from {
			*cur = foldCursor{open: true, rank: from, node: math.MinInt64}
		}
		var counts portCounts
		for budget := s.opt.RollupPortRows; budget > 0; {
			var node int64
			err := st.nextNode.QueryRowContext(ctx, cur.node).Scan(&node)
			if errors.Is(err, sql.ErrNoRows) {
				cur.open = false // the slice is done; the next step finds the next
				break
			}
			if err != nil {
				return err
			}
			n, err := s.foldPortNode(ctx, st, c, l, node, from, to, budget, &counts)
			if err != nil {
				return fmt.Errorf("node id %d: %w", node, err)
			}
			if n == budget {
				cur.node = node - 1 // it may have more
				break
			}
			cur.node = node
			budget -= max(n, 1)
		}
		_, err = tx.ExecContext(ctx, `UPDATE totals SET value = value + CASE name WHEN 'port_samples' THEN ? ELSE ? END
			WHERE name IN ('port_samples', 'port_rollups')`, counts.samples, counts.rollups)
		return err
	})
	return found, err
}

// foldPortNode folds at most limit of one switch's rows with keys in
// [from, to) and returns how many it folded.
func (s *Store) foldPortNode(ctx context.Context, st *portStmts, c cutoffs, l int, node, from, to int64, limit int, counts *portCounts) (int, error) {
	rows, err := st.rows.QueryContext(ctx, node, from, to, limit)
	if err != nil {
		return 0, err
	}
	d := s.decoders.Get().(*decoder)
	defer s.decoders.Put(d)
	targets := map[rollupKey]*portBucket{}
	var n, ports int
	var lastKey int64
	var samples []fabric.PortSample
	var pts []store.PortPoint
	for rows.Next() {
		var key, t int64
		var np int
		var data sql.RawBytes
		if err := rows.Scan(&key, &t, &np, &data); err != nil {
			rows.Close()
			return 0, err
		}
		n, ports, lastKey = n+1, ports+np, key
		tl, tb, ok := c.target(l, key)
		if !ok {
			continue
		}
		b := targets[rollupKey{tl, tb}]
		if b == nil {
			b = &portBucket{time: t, ports: map[int]*portAcc{}}
			targets[rollupKey{tl, tb}] = b
		}
		b.time = max(b.time, t)
		if l == levelRaw {
			if samples, err = d.decodeSwitch(samples[:0], data, 0, fromNS(t), nil); err != nil {
				rows.Close()
				return 0, err
			}
			for i := range samples {
				p := store.RawPoint(samples[i])
				b.add(&p)
			}
		} else {
			if pts, err = d.decodeRollup(pts[:0], data, 0, fromNS(t), time.Duration(levelWidth[l]), nil); err != nil {
				rows.Close()
				return 0, err
			}
			for i := range pts {
				b.add(&pts[i])
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	if _, err := st.del.ExecContext(ctx, node, from, lastKey); err != nil {
		return 0, fmt.Errorf("delete folded rows: %w", err)
	}
	if l == levelRaw {
		counts.samples -= int64(ports)
	} else {
		counts.rollups -= int64(ports)
	}
	for k, b := range targets {
		if err := s.mergePortRollup(ctx, st, d, node, k, b, counts); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// mergePortRollup adds b to the stored rollup row k of node (if any) and
// writes the result.
func (s *Store) mergePortRollup(ctx context.Context, st *portStmts, d *decoder, node int64, k rollupKey, b *portBucket, counts *portCounts) error {
	width := levelWidth[k.level]
	var t int64
	var old int
	var data []byte
	err := st.target.QueryRowContext(ctx, node, widthS(k.level), k.bucket).Scan(&t, &old, &data)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return err
	default:
		pts, err := d.decodeRollup(nil, data, 0, fromNS(t), time.Duration(width), nil)
		if err != nil {
			return err
		}
		for i := range pts {
			b.add(&pts[i])
		}
		b.time = max(b.time, t)
	}
	pts := b.points()
	blob, err := s.enc.encodeRollup(nil, pts)
	if err != nil {
		return fmt.Errorf("bucket %s: %w", fromNS(k.bucket).Format(time.RFC3339), err)
	}
	if _, err := st.put.ExecContext(ctx, node, widthS(k.level), k.bucket, b.time, len(pts), blob); err != nil {
		return fmt.Errorf("bucket %s: %w", fromNS(k.bucket).Format(time.RFC3339), err)
	}
	counts.rollups += int64(len(pts) - old)
	return nil
}

func levelName(l int) string {
	switch l {
	case level5m:
		return "5-minute rollups"
	case level1h:
		return "1-hour rollups"
	}
	return "raw"
}

// Offsets into Store.cursors.
const (
	cursorPorts     = 0
	cursorProcesses = numLevels
)
