package sflow

import (
	"container/list"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/netloom/netloom/internal/fabric"
)

// Switch is an agent the collector accepts: the switch it is in the
// fabric model and its ports by ifIndex (the Ethernet source's numbering).
type Switch struct {
	GUID  fabric.GUID
	Ports map[uint32]int // ifIndex -> port number
}

// Refusal is why a datagram or a sample was not kept.
type Refusal string

const (
	// Whole datagrams.
	Malformed    Refusal = "malformed"     // Decode refused it
	RateZero     Refusal = "rate_zero"     // a sample claimed a sampling rate of 0
	UnknownAgent Refusal = "unknown_agent" // its agent is no switch of the fabric
	// One flow sample.
	UnknownIfIndex Refusal = "unknown_ifindex" // its output ifIndex maps to no port of its switch
	NotForwarded   Refusal = "not_forwarded"   // discarded, or sent to several ports: no one output port
	NoHeader       Refusal = "no_header"       // no sampled Ethernet header: no frame length
)

// FlowKey is a flow as a sampled header tells it: addresses, protocol and
// ports (zero for a frame that is not IP: ARP, LLDP, ...); for RoCEv2 the
// destination queue pair, its source port 0 (Header.Key, roce.go).
type FlowKey struct {
	Src, Dst         netip.Addr
	Proto            uint8
	SrcPort, DstPort uint16
	QP               uint32
}

// Flow is one flow's samples over one link direction within a time range.
type Flow struct {
	FlowKey
	InPort  int    // the switch port it came in on, as last sampled (0: unknown)
	Bytes   uint64 // estimated: each sample's frame length times its sampling rate
	Samples uint64
}

// StoreOptions bound a Store.
type StoreOptions struct {
	Window   time.Duration // how long samples are kept (default 15 min)
	Bucket   time.Duration // their time resolution (default 10 s)
	MaxFlows int           // flows tracked at most (default 100,000): the least recently sampled go first
}

// Store keeps, per link direction (the sending switch port) and per flow,
// the estimated bytes and the samples of a recent window, bounded in the
// flows it tracks. It is safe for concurrent use.
type Store struct {
	opt StoreOptions

	mu      sync.Mutex
	flows   map[dirFlow]*list.Element
	lru     *list.List // of *entry, most recently sampled first
	evicted uint64
}

type dirFlow struct {
	dir fabric.PortRef
	key FlowKey
}

type bucket struct {
	start          int64 // unix seconds, a multiple of the bucket's length
	bytes, samples uint64
}

type entry struct {
	dirFlow
	inPort  int
	buckets []bucket // oldest first
}

// NewStore makes an empty store.
func NewStore(opt StoreOptions) *Store {
	if opt.Window <= 0 {
		opt.Window = 15 * time.Minute
	}
	if opt.Bucket <= 0 {
		opt.Bucket = 10 * time.Second
	}
	if opt.MaxFlows <= 0 {
		opt.MaxFlows = 100_000
	}
	return &Store{opt: opt, flows: map[dirFlow]*list.Element{}, lru: list.New()}
}

// Add records one sample of a flow leaving dir, at.
func (s *Store) Add(dir fabric.PortRef, inPort int, k FlowKey, bytes uint64, at time.Time) {
	step := int64(s.opt.Bucket / time.Second)
	if step < 1 {
		step = 1
	}
	start := at.Unix() / step * step
	oldest := at.Add(-s.opt.Window).Unix()
	s.mu.Lock()
	defer s.mu.Unlock()
	df := dirFlow{dir, k}
	el := s.flows[df]
	if el == nil {
		if s.lru.Len() >= s.opt.MaxFlows {
			last := s.lru.Back()
			delete(s.flows, last.Value.(*entry).dirFlow)
			s.lru.Remove(last)
			s.evicted++
		}
		el = s.lru.PushFront(&entry{dirFlow: df})
		s.flows[df] = el
	} else {
		s.lru.MoveToFront(el)
	}
	e := el.Value.(*entry)
	e.inPort = inPort
	// Buckets past the window go.
	drop := 0
	for drop < len(e.buckets) && e.buckets[drop].start+step <= oldest {
		drop++
	}
	if drop > 0 {
		e.buckets = append(e.buckets[:0], e.buckets[drop:]...)
	}
	if n := len(e.buckets); n > 0 && e.buckets[n-1].start == start {
		e.buckets[n-1].bytes += bytes
		e.buckets[n-1].samples++
		return
	}
	e.buckets = append(e.buckets, bucket{start: start, bytes: bytes, samples: 1})
}

// Flows returns the flows sampled leaving dir whose samples fall in
// [from, to] (at the bucket's resolution: a bucket counts when it
// overlaps the range), most bytes first.
func (s *Store) Flows(dir fabric.PortRef, from, to time.Time) []Flow {
	step := int64(s.opt.Bucket / time.Second)
	if step < 1 {
		step = 1
	}
	lo, hi := from.Unix(), to.Unix()
	s.mu.Lock()
	var out []Flow
	for df, el := range s.flows {
		if df.dir != dir {
			continue
		}
		if f := el.Value.(*entry).flow(lo, hi, step); f.Samples > 0 {
			out = append(out, f)
		}
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Bytes != out[j].Bytes {
			return out[i].Bytes > out[j].Bytes
		}
		return out[i].Src.Compare(out[j].Src) < 0 || out[i].Src == out[j].Src && out[i].SrcPort < out[j].SrcPort
	})
	return out
}

// flow is e's samples in the buckets that overlap [lo, hi] (unix
// seconds; buckets step seconds long).
func (e *entry) flow(lo, hi, step int64) Flow {
	f := Flow{FlowKey: e.key, InPort: e.inPort}
	for _, b := range e.buckets {
		if b.start+step > lo && b.start <= hi {
			f.Bytes += b.bytes
			f.Samples += b.samples
		}
	}
	return f
}

// Tracked is how many flows the store holds; Evicted how many it let go
// for room.
func (s *Store) Tracked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lru.Len()
}

func (s *Store) Evicted() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.evicted
}

// Ingest decodes one datagram into d (reused) and records its flow
// samples in s: each mapped onto the switch its agent is and the port its
// output ifIndex is. It returns why the datagram was refused ("" when it
// was read), the error of a malformed one, and calls drop for each flow
// sample not kept.
func (s *Store) Ingest(b []byte, d *Datagram, switches func(netip.Addr) (*Switch, bool), at time.Time, drop func(Refusal)) (Refusal, error) {
	if err := Decode(b, d); err != nil {
		if e, ok := err.(*Error); ok && strings.HasSuffix(e.Field, "sampling rate") && strings.HasPrefix(e.Reason, "0:") {
			return RateZero, err
		}
		return Malformed, err
	}
	sw, ok := switches(d.Agent.Unmap())
	if !ok {
		return UnknownAgent, nil
	}
	for i := range d.Flows {
		f := &d.Flows[i]
		if f.OutputFormat != 0 {
			drop(NotForwarded)
			continue
		}
		out, ok := sw.Ports[f.Output]
		if !ok {
			drop(UnknownIfIndex)
			continue
		}
		if !f.HasHeader {
			drop(NoHeader)
			continue
		}
		h := &f.Header
		n := uint64(h.FrameLength)
		if uint64(h.Stripped) <= n {
			n -= uint64(h.Stripped)
		}
		s.Add(fabric.PortRef{GUID: sw.GUID, Port: out}, sw.Ports[f.Input],
			h.Key(), n*uint64(f.SamplingRate), at)
	}
	return "", nil
}
