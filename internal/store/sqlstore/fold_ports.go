package sqlstore

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/codec"
)

// PortRows is an engine's access to port rows inside one write
// transaction. Level l's rows are raw rows (key: sample time) or rollup
// rows of that width (key: bucket start); both hold one switch's ports.
type PortRows interface {
	// Oldest returns the smallest key of level l below before.
	Oldest(ctx context.Context, l int, before int64) (key int64, ok bool, err error)
	// NextNode returns the smallest switch id above after.
	NextNode(ctx context.Context, after int64) (node int64, ok bool, err error)
	// Rows calls fn with up to limit of node's rows of level l with keys
	// in [from, to), by key; data is valid only during the call.
	Rows(ctx context.Context, l int, node, from, to int64, limit int, fn func(key, t int64, ports int, data []byte) error) error
	// Delete deletes node's rows of level l with keys in [from, last].
	Delete(ctx context.Context, l int, node, from, last int64) error
	// Rollup reads node's rollup row of level l and bucket.
	Rollup(ctx context.Context, l int, node, bucket int64) (t int64, ports int, data []byte, ok bool, err error)
	// PutRollup inserts or replaces node's rollup row of level l and bucket.
	PutRollup(ctx context.Context, l int, node, bucket, t int64, ports int, data []byte) error
}

// PortCounts are the changes a fold made to the sample and rollup point
// totals.
type PortCounts struct{ Samples, Rollups int64 }

// Folder folds expired rows into rollups. It keeps per kind and level
// where the last step stopped and reusable codec buffers: one per store,
// used under the store's writer lock.
type Folder struct {
	enc     codec.Encoder
	dec     codec.Decoder
	ports   [NumLevels]foldCursor
	process [NumLevels]foldCursor
}

// portSlice is how much time one pass over the switches folds: the
// oldest expired slice first, all switches, then the next. Rows of one
// sweep are stored side by side, so folding a slice of every switch
// rewrites each page of the table about once, where folding switch by
// switch would rewrite it once per switch on it.
func portSlice(l int) int64 {
	if l == LevelRaw {
		return LevelWidth[Level5m]
	}
	return LevelWidth[Level1h]
}

// FoldPorts does one step of folding level l's expired port rows into
// coarser levels, at most budget rows, through rows (one transaction).
// It reports whether there was any to fold and how the totals change.
func (f *Folder) FoldPorts(ctx context.Context, rows PortRows, c Cutoffs, l, budget int) (found bool, counts PortCounts, err error) {
	if c[l] == KeepAll {
		return false, counts, nil
	}
	first, ok, err := rows.Oldest(ctx, l, c[l])
	if err != nil || !ok {
		return false, counts, err
	}
	from := FloorTo(first, portSlice(l))
	to := min(from+portSlice(l), c[l])
	cur := &f.ports[l]
	if !cur.open || cur.rank != from {
		*cur = foldCursor{open: true, rank: from, node: math.MinInt64}
	}
	for budget > 0 {
		node, ok, err := rows.NextNode(ctx, cur.node)
		if err != nil {
			return true, counts, err
		}
		if !ok {
			cur.open = false // the slice is done; the next step finds the next
			break
		}
		n, err := f.foldPortNode(ctx, rows, c, l, node, from, to, budget, &counts)
		if err != nil {
			return true, counts, fmt.Errorf("node id %d: %w", node, err)
		}
		if n == budget {
			cur.node = node - 1 // it may have more
			break
		}
		cur.node = node
		budget -= max(n, 1)
	}
	return true, counts, nil
}

// foldPortNode folds at most limit of one switch's rows with keys in
// [from, to) and returns how many it folded.
func (f *Folder) foldPortNode(ctx context.Context, rows PortRows, c Cutoffs, l int, node, from, to int64, limit int, counts *PortCounts) (int, error) {
	targets := map[rollupKey]*portBucket{}
	var n, ports int
	var lastKey int64
	var samples []fabric.PortSample
	var pts []store.PortPoint
	err := rows.Rows(ctx, l, node, from, to, limit, func(key, t int64, np int, data []byte) (err error) {
		n, ports, lastKey = n+1, ports+np, key
		tl, tb, ok := c.Target(l, key)
		if !ok {
			return nil
		}
		b := targets[rollupKey{tl, tb}]
		if b == nil {
			b = &portBucket{time: t, ports: map[int]*portAcc{}}
			targets[rollupKey{tl, tb}] = b
		}
		b.time = max(b.time, t)
		if l == LevelRaw {
			if samples, err = f.dec.DecodeSwitch(samples[:0], data, 0, codec.FromNS(t), nil); err != nil {
				return err
			}
			for i := range samples {
				p := store.RawPoint(samples[i])
				b.add(&p)
			}
			return nil
		}
		if pts, err = f.dec.DecodeRollup(pts[:0], data, 0, codec.FromNS(t), time.Duration(LevelWidth[l]), nil); err != nil {
			return err
		}
		for i := range pts {
			b.add(&pts[i])
		}
		return nil
	})
	if err != nil || n == 0 {
		return 0, err
	}
	if err := rows.Delete(ctx, l, node, from, lastKey); err != nil {
		return 0, fmt.Errorf("delete folded rows: %w", err)
	}
	if l == LevelRaw {
		counts.Samples -= int64(ports)
	} else {
		counts.Rollups -= int64(ports)
	}
	for k, b := range targets {
		if err := f.mergePortRollup(ctx, rows, node, k, b, counts); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// mergePortRollup adds b to the stored rollup row k of node (if any) and
// writes the result.
func (f *Folder) mergePortRollup(ctx context.Context, rows PortRows, node int64, k rollupKey, b *portBucket, counts *PortCounts) error {
	t, old, data, ok, err := rows.Rollup(ctx, k.level, node, k.bucket)
	if err != nil {
		return err
	}
	if ok {
		pts, err := f.dec.DecodeRollup(nil, data, 0, codec.FromNS(t), time.Duration(LevelWidth[k.level]), nil)
		if err != nil {
			return err
		}
		for i := range pts {
			b.add(&pts[i])
		}
		b.time = max(b.time, t)
	}
	pts := b.points()
	blob, err := f.enc.EncodeRollup(nil, pts)
	if err != nil {
		return fmt.Errorf("bucket %s: %w", codec.FromNS(k.bucket).Format(time.RFC3339), err)
	}
	if err := rows.PutRollup(ctx, k.level, node, k.bucket, b.time, len(pts), blob); err != nil {
		return fmt.Errorf("bucket %s: %w", codec.FromNS(k.bucket).Format(time.RFC3339), err)
	}
	counts.Rollups += int64(len(pts) - old)
	return nil
}

// portAcc adds up one port's samples or points into a rollup point.
type portAcc struct{ p store.PortPoint }

func (a *portAcc) add(x *store.PortPoint) {
	s, y := &a.p.PortSample, &x.PortSample
	s.Span += y.Span
	for c := range s.Delta {
		s.Delta[c] = codec.AddSat(s.Delta[c], y.Delta[c])
	}
	s.Reset = s.Reset || y.Reset
	s.Saturated = s.Saturated || y.Saturated
	a.p.Samples += x.Samples
	for i := range a.p.Peak {
		a.p.Peak[i] = max(a.p.Peak[i], x.Peak[i])
	}
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
