package sqlstore

import (
	"context"
	"sort"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/codec"
)

// ReadPorts hands the given ports' rollup points and raw samples in
// [from, to] to the callbacks, switch by switch: 1-hour rollups, then
// 5-minute ones, then raw samples, each oldest first. Normally their
// times do not overlap (rollups hold what raw rows no longer do); samples
// stored late for a bucket already rolled up can, until the next prune
// folds them in.
type ReadPorts func(ctx context.Context, ports []fabric.PortRef, from, to time.Time,
	raw func([]fabric.PortSample), rolled func([]store.PortPoint)) error

// PortSamples implements store.Store's PortSamples over an engine's
// ReadPorts.
func PortSamples(ctx context.Context, read ReadPorts, ports []fabric.PortRef, from, to time.Time) (map[fabric.PortRef][]fabric.PortSample, error) {
	out := map[fabric.PortRef][]fabric.PortSample{}
	rolled := map[fabric.PortRef]bool{}
	err := read(ctx, ports, from, to,
		func(smp []fabric.PortSample) {
			for _, x := range smp {
				out[x.Port] = append(out[x.Port], x)
			}
		},
		func(pts []store.PortPoint) {
			for _, p := range pts {
				out[p.Port] = append(out[p.Port], p.PortSample)
				rolled[p.Port] = true
			}
		})
	if err != nil {
		return nil, err
	}
	for p := range rolled {
		l := out[p]
		if !sort.SliceIsSorted(l, func(i, j int) bool { return l[i].Time.Before(l[j].Time) }) {
			sort.SliceStable(l, func(i, j int) bool { return l[i].Time.Before(l[j].Time) })
		}
	}
	return out, nil
}

// PortSeries implements store.Store's PortSeries over an engine's
// ReadPorts.
func PortSeries(ctx context.Context, read ReadPorts, ports []fabric.PortRef, from, to time.Time) (map[fabric.PortRef][]store.PortPoint, error) {
	out := map[fabric.PortRef][]store.PortPoint{}
	err := read(ctx, ports, from, to,
		func(smp []fabric.PortSample) {
			for _, x := range smp {
				out[x.Port] = append(out[x.Port], store.RawPoint(x))
			}
		},
		func(pts []store.PortPoint) {
			for _, p := range pts {
				out[p.Port] = append(out[p.Port], p)
			}
		})
	if err != nil {
		return nil, err
	}
	for _, l := range out {
		if !sort.SliceIsSorted(l, func(i, j int) bool { return l[i].Time.Before(l[j].Time) }) {
			sort.SliceStable(l, func(i, j int) bool { return l[i].Time.Before(l[j].Time) })
		}
	}
	return out, nil
}

// GroupPorts lists the switches of ports in first-seen order, with the
// ports wanted of each.
func GroupPorts(ports []fabric.PortRef) ([]fabric.GUID, map[fabric.GUID]map[int]bool) {
	byNode := map[fabric.GUID]map[int]bool{}
	var guids []fabric.GUID
	for _, p := range ports {
		if byNode[p.GUID] == nil {
			byNode[p.GUID] = map[int]bool{}
			guids = append(guids, p.GUID)
		}
		byNode[p.GUID][p.Port] = true
	}
	return guids, byNode
}

// Latest gathers LatestSamples' answer from rows read newest first: each
// port's first sample wins.
type Latest struct {
	dec   *codec.Decoder
	seen  map[fabric.PortRef]bool
	out   []fabric.PortSample
	ports []int
	pts   []store.PortPoint
}

// NewLatest starts an answer, decoding with dec.
func NewLatest(dec *codec.Decoder) *Latest {
	return &Latest{dec: dec, seen: map[fabric.PortRef]bool{}}
}

// AddRaw adds the ports of a raw row not seen yet.
func (l *Latest) AddRaw(g fabric.GUID, t int64, data []byte) error {
	var ok bool
	if l.ports, ok = codec.BlobPorts(data, l.ports[:0]); ok {
		fresh := false
		for _, p := range l.ports {
			if !l.seen[fabric.PortRef{GUID: g, Port: p}] {
				fresh = true
				break
			}
		}
		if !fresh {
			return nil
		}
	}
	n := len(l.out)
	var err error
	l.out, err = l.dec.DecodeSwitch(l.out, data, g, codec.FromNS(t), func(p int) bool { return !l.seen[fabric.PortRef{GUID: g, Port: p}] })
	if err != nil {
		return err
	}
	for _, smp := range l.out[n:] {
		l.seen[smp.Port] = true
	}
	return nil
}

// AddRollup adds the ports of a rollup row not seen yet.
func (l *Latest) AddRollup(g fabric.GUID, t int64, width time.Duration, data []byte) error {
	var err error
	if l.pts, err = l.dec.DecodeRollup(l.pts[:0], data, g, codec.FromNS(t), width, func(p int) bool { return !l.seen[fabric.PortRef{GUID: g, Port: p}] }); err != nil {
		return err
	}
	for _, p := range l.pts {
		l.seen[p.Port] = true
		l.out = append(l.out, p.PortSample)
	}
	return nil
}

// Samples returns the answer sorted by port.
func (l *Latest) Samples() []fabric.PortSample {
	sort.Slice(l.out, func(i, j int) bool { return l.out[i].Port.Less(l.out[j].Port) })
	return l.out
}
