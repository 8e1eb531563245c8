package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netloom/netloom/internal/fabric"
)

// DefaultEpoch is when simulated counters start from zero unless
// Options.Epoch says otherwise (2025-01-01 UTC): a fixed instant, so a
// restarted simulation reads the same counters at the same wall-clock time.
func DefaultEpoch() time.Time { return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) }

// Options tune a simulated Source.
type Options struct {
	// Seed picks the synthetic traffic; 0 takes the spec's seed, or 1.
	Seed int64
	// Epoch is when every counter was zero; zero means DefaultEpoch.
	Epoch time.Time
	// Now is the clock sweeps read; nil means time.Now.
	Now func() time.Time
}

// ErrNoRoutes is returned by ForwardingTables for a fabric too large for
// one subnet's LIDs (10x-stampede).
var ErrNoRoutes = errors.New("fabric has no LIDs (more endpoints than one subnet's unicast LIDs), so no forwarding tables")

// Source is a simulated fabric implementing fabric.Source. Counters are a
// pure function of (seed, port, time) plus injected events: each port's
// transmit rate is a per-port base load (most moderate, some near capacity,
// some idle) modulated by two slow waves, and the counters are its exact
// integral, so they only go up and any two readings agree. A port's
// receive counters are its peer's transmit counters. Error counters read
// zero except on a few ports of bad links (badPortShare), which count one
// error every 5 minutes to 2 hours since the epoch and stick at their
// field's maximum, as real ports do. It is safe for concurrent use.
type Source struct {
	epoch time.Time
	now   func() time.Time

	base   *fabric.Topology
	baseFT fabric.ForwardingTables

	index map[fabric.PortRef]int32 // every linked port
	refs  []fabric.PortRef         // index -> port
	// hint remembers the last sweep's port indices: daemons sweep the same
	// list every time, and comparing is cheaper than hashing.
	hint   atomic.Pointer[[]int32]
	peer   []int32
	link   []int32 // index into base.Links
	models []portModel

	mu      sync.RWMutex
	down    []bool // per port: link down (both ends)
	nDown   int
	adjust  map[int32]*portAdjust
	cur     *fabric.Topology // base minus downed links; nil = rebuild
	curFT   fabric.ForwardingTables
	ftDirty bool
}

// portModel is one port's transmit traffic.
type portModel struct {
	rate       float64 // mean bytes/s
	a1, w1, c1 float64 // wave 1: relative amplitude, rad/s, phase
	a2, w2, c2 float64
	k1, k2     float64 // a/w * rate, precomputed
	cos1, cos2 float64 // cos(phase)
	pktBytes   float64
	mcast      float64 // share of packets that are multicast
	waitPerB   float64 // XmitWait ticks per byte sent
	errEvery   float64 // seconds between errors on a bad link's port; 0 = none
	errKind    fabric.Counter
}

// badPortShare is the share of ports on a bad link: real fabrics read
// zero errors on almost every port and a steady trickle on a few bad
// cables or transceivers (Stampede's 33,786 ports have ~70).
const badPortShare = 0.002

// portAdjust holds what tests and demos injected into a port.
type portAdjust struct {
	extra [fabric.NumCounters]uint64 // AddErrors
	base  [fabric.NumCounters]uint64 // subtracted: values at the last reset
}

// NewSource generates the fabric sp describes and simulates it.
func NewSource(ctx context.Context, sp Spec, opt Options) (*Source, error) {
	t, ft, err := Generate(ctx, sp)
	if err != nil {
		return nil, err
	}
	if opt.Seed == 0 {
		opt.Seed = sp.Seed
	}
	return NewSourceFrom(t, ft, opt), nil
}

// NewSourceFrom simulates an existing topology with the given tables (nil
// when it has none).
func NewSourceFrom(t *fabric.Topology, ft fabric.ForwardingTables, opt Options) *Source {
	if opt.Seed == 0 {
		opt.Seed = 1
	}
	if opt.Epoch.IsZero() {
		opt.Epoch = DefaultEpoch()
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	n := 2 * len(t.Links)
	s := &Source{
		epoch: opt.Epoch, now: opt.Now, base: t, baseFT: ft,
		index:  make(map[fabric.PortRef]int32, n),
		refs:   make([]fabric.PortRef, n),
		peer:   make([]int32, n),
		link:   make([]int32, n),
		models: make([]portModel, n),
		down:   make([]bool, n),
		adjust: map[int32]*portAdjust{},
		cur:    t, curFT: ft,
	}
	for li, l := range t.Links {
		a, b := int32(2*li), int32(2*li+1)
		s.index[l.A], s.index[l.B] = a, b
		s.refs[a], s.refs[b] = l.A, l.B
		s.peer[a], s.peer[b] = b, a
		s.link[a], s.link[b] = int32(li), int32(li)
		capB := l.Capacity()
		s.models[a] = newPortModel(opt.Seed, l.A, capB)
		s.models[b] = newPortModel(opt.Seed, l.B, capB)
	}
	return s
}

// splitmix64 is a tiny, good-enough hash for per-port random draws.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

func newPortModel(seed int64, p fabric.PortRef, capB float64) portModel {
	h := splitmix64(uint64(seed) ^ splitmix64(uint64(p.GUID)^uint64(p.Port)<<56))
	draw := func() float64 { // uniform [0,1)
		h = splitmix64(h)
		return float64(h>>11) / (1 << 53)
	}
	var m portModel
	var base float64
	switch u := draw(); {
	case u < 0.05: // hot: near capacity
		base = 0.80 + 0.06*draw()
		m.a1, m.a2 = 0.06, 0.04
	case u < 0.80: // moderate
		base = 0.05 + 0.35*draw()
		m.a1, m.a2 = 0.5*draw(), 0.3*draw()
	default: // idle
		base = 0.0001 + 0.002*draw()
		m.a1, m.a2 = 0.5, 0.2
	}
	m.rate = capB * base
	m.w1 = 2 * math.Pi / (600 + 3000*draw()) // 10..60 minute swings
	m.w2 = 2 * math.Pi / (20 + 100*draw())   // 20..120 s bursts
	m.c1, m.c2 = 2*math.Pi*draw(), 2*math.Pi*draw()
	m.k1, m.k2 = m.a1/m.w1*m.rate, m.a2/m.w2*m.rate
	m.cos1, m.cos2 = math.Cos(m.c1), math.Cos(m.c2)
	m.pktBytes = 1024 + 3072*draw() // average around 2 KiB
	m.mcast = 0.002 * draw()
	// Ticks spent waiting grow steeply with load: a port at 90% waits a
	// good fraction of the time, one at 10% almost never.
	if capB > 0 {
		m.waitPerB = 4e8 * base * base * base / capB
	}
	if draw() < badPortShare {
		m.errEvery = 300 + 7200*draw()
		m.errKind = []fabric.Counter{fabric.SymbolErrors, fabric.SymbolErrors, fabric.LinkIntegrityErrors, fabric.RcvErrors}[int(draw()*4)]
	}
	return m
}

// bytesAt is the exact integral of the port's rate from the epoch to ts.
func (m *portModel) bytesAt(ts float64) float64 {
	return m.rate*ts + m.k1*(m.cos1-math.Cos(m.w1*ts+m.c1)) + m.k2*(m.cos2-math.Cos(m.w2*ts+m.c2))
}

// fill computes port i's raw counters at ts seconds past the epoch.
func (s *Source) fill(i int32, ts float64, v *[fabric.NumCounters]uint64) {
	m := &s.models[i]
	pm := &s.models[s.peer[i]]
	tx := m.bytesAt(ts)
	rx := pm.bytesAt(ts)
	txp := uint64(tx / m.pktBytes)
	rxp := uint64(rx / pm.pktBytes)
	txm := uint64(float64(txp) * m.mcast)
	rxm := uint64(float64(rxp) * pm.mcast)
	*v = [fabric.NumCounters]uint64{}
	v[fabric.XmitData] = uint64(tx)
	v[fabric.RcvData] = uint64(rx)
	v[fabric.XmitPkts] = txp
	v[fabric.RcvPkts] = rxp
	v[fabric.UnicastXmitPkts] = txp - txm
	v[fabric.UnicastRcvPkts] = rxp - rxm
	v[fabric.MulticastXmitPkts] = txm
	v[fabric.MulticastRcvPkts] = rxm
	v[fabric.XmitWait] = uint64(tx * m.waitPerB)
	if m.errEvery > 0 {
		v[m.errKind] = uint64(ts / m.errEvery)
	}
}

// saturate holds the error counters at the largest value their
// PortCounters field holds (IBA 16.1.3.5: they stick there, they do not
// wrap), as a real port's do: a bad link's 4-bit LocalLinkIntegrityErrors
// reads 15 after its 15th error.
func saturate(v *[fabric.NumCounters]uint64) {
	for c := fabric.FirstError; c < fabric.NumCounters; c++ {
		if w := fabric.Width32[c]; w > 0 && v[c] > 1<<w-1 {
			v[c] = 1<<w - 1
		}
	}
}

func (s *Source) seconds(t time.Time) float64 {
	ts := t.Sub(s.epoch).Seconds()
	if ts < 0 {
		return 0
	}
	return ts
}

// Discover returns the fabric as it is now: the generated topology minus
// links set down.
func (s *Source) Discover(ctx context.Context) (*fabric.Topology, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sim discover: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil {
		return s.cur, nil
	}
	links := make([]fabric.Link, 0, len(s.base.Links))
	for li, l := range s.base.Links {
		if !s.down[2*li] {
			links = append(links, l)
		}
	}
	nodes := append([]fabric.Node(nil), s.base.Nodes...)
	t, err := fabric.NewTopology(nodes, links)
	if err != nil {
		return nil, fmt.Errorf("sim discover: %w", err)
	}
	s.cur = t
	return t, nil
}

// Sweep returns the counters of the given ports at the clock's now. Ports
// on a downed link, or not in the fabric, have Err set.
func (s *Source) Sweep(ctx context.Context, _ *fabric.Topology, ports []fabric.PortRef, _ fabric.SweepOptions) ([]fabric.PortReading, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sim sweep: %w", err)
	}
	now := s.now()
	ts := s.seconds(now)
	out := make([]fabric.PortReading, len(ports))
	var hint, fresh []int32
	if h := s.hint.Load(); h != nil && len(*h) == len(ports) {
		hint = *h
	} else {
		fresh = make([]int32, len(ports))
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for k, p := range ports {
		if k&4095 == 4095 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("sim sweep: %w", err)
			}
		}
		r := &out[k]
		r.Port, r.Time = p, now
		var i int32
		ok := false
		if hint != nil {
			// -1: a port with no link last time; look it up again.
			if h := hint[k]; h >= 0 && s.refs[h] == p {
				i, ok = h, true
			} else if h >= 0 {
				hint = nil
			}
		}
		if !ok {
			i, ok = s.index[p]
			if fresh != nil {
				fresh[k] = -1
				if ok {
					fresh[k] = i
				}
			}
		}
		if !ok {
			// A switch answers for its unlinked ports too, all zeros.
			if n, ok := s.base.Node(p.GUID); ok && n.Type == fabric.Switch && p.Port >= 1 && p.Port <= n.Ports {
				r.Extended = true
				continue
			}
			r.Err = fmt.Errorf("port %s: no such port in the simulated fabric", p)
			continue
		}
		if s.nDown > 0 && s.down[i] {
			r.Err = fmt.Errorf("port %s: link down, port not responding", p)
			continue
		}
		r.Extended = true
		s.fill(i, ts, &r.V)
		if len(s.adjust) > 0 {
			if a := s.adjust[i]; a != nil {
				for c := range r.V {
					v := r.V[c] + a.extra[c]
					if v < a.base[c] {
						v = 0
					} else {
						v -= a.base[c]
					}
					r.V[c] = v
				}
			}
		}
		saturate(&r.V)
	}
	if fresh != nil {
		learned := fresh
		s.hint.Store(&learned)
	} else if hint == nil {
		s.hint.Store(nil) // the list changed; learn it next time
	}
	return out, nil
}

// ResetCounters zeroes the given ports' counters as of the clock's now.
func (s *Source) ResetCounters(ctx context.Context, _ *fabric.Topology, ports []fabric.PortRef) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sim reset: %w", err)
	}
	ts := s.seconds(s.now())
	s.mu.Lock()
	defer s.mu.Unlock()
	var raw [fabric.NumCounters]uint64
	for _, p := range ports {
		i, ok := s.index[p]
		if !ok {
			return fmt.Errorf("sim reset: port %s: no such linked port", p)
		}
		if s.down[i] {
			return fmt.Errorf("sim reset: port %s: link down, port not responding", p)
		}
		a := s.adj(i)
		s.fill(i, ts, &raw)
		for c := range raw {
			a.base[c] = raw[c] + a.extra[c]
		}
	}
	return nil
}

func (s *Source) adj(i int32) *portAdjust {
	a := s.adjust[i]
	if a == nil {
		a = &portAdjust{}
		s.adjust[i] = a
	}
	return a
}

// ForwardingTables returns the switches' forwarding tables: the generated
// ones, or ones recomputed for the links still up after SetLinkDown (as a
// subnet manager would reroute).
func (s *Source) ForwardingTables(ctx context.Context, _ *fabric.Topology) (fabric.ForwardingTables, error) {
	t, err := s.Discover(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.baseFT == nil {
		return nil, fmt.Errorf("sim forwarding tables: %w", ErrNoRoutes)
	}
	if s.ftDirty {
		ft, _, err := ComputeRoutes(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("sim forwarding tables: %w", err)
		}
		s.curFT, s.ftDirty = ft, false
	}
	return s.curFT, nil
}

// Close releases nothing; a simulation holds no resources.
func (s *Source) Close() error { return nil }

// SetLinkDown takes the link at port p down (or back up): the next
// Discover leaves it out, both its ports stop answering sweeps, and the
// forwarding tables are recomputed around it.
func (s *Source) SetLinkDown(p fabric.PortRef, down bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.index[p]
	if !ok {
		return fmt.Errorf("sim set link down: port %s: no link there", p)
	}
	j := s.peer[i]
	if s.down[i] == down {
		return nil
	}
	s.down[i], s.down[j] = down, down
	if down {
		s.nDown += 2
	} else {
		s.nDown -= 2
	}
	s.cur, s.ftDirty = nil, true
	if s.nDown == 0 {
		s.cur, s.curFT, s.ftDirty = s.base, s.baseFT, false
	}
	return nil
}

// AddErrors adds n to counter c of port p, as if the port had seen errors
// (or any other counted event).
func (s *Source) AddErrors(p fabric.PortRef, c fabric.Counter, n uint64) error {
	if c < 0 || c >= fabric.NumCounters {
		return fmt.Errorf("sim add errors: port %s: counter %d out of range", p, c)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.index[p]
	if !ok {
		return fmt.Errorf("sim add errors: port %s: no such linked port", p)
	}
	s.adj(i).extra[c] += n
	return nil
}

// Topology returns the generated topology, whatever is down.
func (s *Source) Topology() *fabric.Topology { return s.base }

var _ fabric.Source = (*Source)(nil)
