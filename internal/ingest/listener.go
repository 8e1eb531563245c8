package ingest

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// DefaultListen is the agents' default UDP address.
const DefaultListen = "0.0.0.0:8467"

// ListenOptions tune a Listener; the zero value is good.
type ListenOptions struct {
	// ReadBuffer is the socket receive buffer asked for (SO_RCVBUF, or
	// SO_RCVBUFFORCE when allowed). Default 256 MiB, so that the reader may
	// be held up for a while without the kernel dropping any: at eight
	// times Stampede's load on 2 cores (the load generator on them too),
	// 64 MiB overflowed during each garbage collection (about 4 s of
	// marking a 5 GB heap) and 256 MiB did not.
	ReadBuffer int
	// Queue bounds decoded datagrams waiting for the aggregators (shared
	// evenly among them). Default 65536.
	Queue int
	// Aggregators is the number of queues, one for each goroutine that
	// keeps job state (a Tracker): each job's datagrams go to one of them.
	// Default: one per CPU, at most 4. One Tracker at ten times Stampede's
	// load needed most of a core, and fell behind whenever it got less.
	Aggregators int
	// Decoders is the number of goroutines that decode and verify
	// datagrams while one reads the socket (default: one per CPU, at most
	// 4). Each rank's datagrams go to one of them, in the order received.
	// 1 decodes on the reader.
	Decoders int
	Limits   Limits
	// Auth says which datagrams are accepted (default: any).
	Auth AuthOptions
}

// Item is one decoded, validated datagram.
type Item struct {
	D    *Datagram
	Size int
	At   time.Time
	// Verified: the datagram carried a valid MUNGE credential of UID,
	// whose login name is User (and D.Process.User, when present, was set
	// to it).
	Verified bool
	UID      uint32
	User     string
}

// Listener reads agent datagrams from a UDP socket, decodes and validates
// them, and queues them for the aggregators, each job's for one. It never
// blocks on an aggregator: when its queue is full the datagram is dropped
// and counted.
type Listener struct {
	conn    *net.UDPConn
	opt     ListenOptions
	m       *Metrics
	out     []chan Item
	rcvbuf  int
	invalid func(err error) // optional, for logging; called from the reader and decode workers
	v       *verifier       // nil: no credentials required
}

// Listen opens the UDP socket at addr.
func Listen(addr string, opt ListenOptions, m *Metrics) (*Listener, error) {
	if opt.ReadBuffer <= 0 {
		opt.ReadBuffer = 256 << 20
	}
	if opt.Queue <= 0 {
		opt.Queue = 65536
	}
	if opt.Decoders <= 0 {
		opt.Decoders = min(runtime.GOMAXPROCS(0), 4)
	}
	if opt.Aggregators <= 0 {
		opt.Aggregators = min(runtime.GOMAXPROCS(0), 4)
	}
	opt.Limits = opt.Limits.WithDefaults()
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("agent listen address %q: %w", addr, err)
	}
	conn, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, fmt.Errorf("agent listen %s: %w", addr, err)
	}
	l := &Listener{conn: conn, opt: opt, m: m, out: make([]chan Item, opt.Aggregators)}
	for i := range l.out {
		l.out[i] = make(chan Item, max(opt.Queue/opt.Aggregators, 1))
	}
	if opt.Auth.Decode != nil {
		l.v = newVerifier(opt.Auth, m, 4096)
	}
	l.rcvbuf = setReadBuffer(conn, opt.ReadBuffer)
	return l, nil
}

// Addr is the bound address.
func (l *Listener) Addr() *net.UDPAddr { return l.conn.LocalAddr().(*net.UDPAddr) }

// ReadBuffer is the receive buffer the kernel granted, in bytes.
func (l *Listener) ReadBuffer() int { return l.rcvbuf }

// Queues are the aggregators' queues, one each.
func (l *Listener) Queues() []<-chan Item {
	q := make([]<-chan Item, len(l.out))
	for i, c := range l.out {
		q[i] = c
	}
	return q
}

// QueueLen is how many datagrams wait for the aggregator that has the
// most waiting.
func (l *Listener) QueueLen() int {
	n := 0
	for _, c := range l.out {
		n = max(n, len(c))
	}
	return n
}

// QueueCap is how many datagrams may wait for one aggregator.
func (l *Listener) QueueCap() int { return cap(l.out[0]) }

// OnInvalid sets a function called with each rejected datagram's error
// (for rate-limited logging), possibly from several goroutines at once;
// set it before Run.
func (l *Listener) OnInvalid(f func(error)) { l.invalid = f }

// Run reads until ctx ends, then closes the socket and the queue.
func (l *Listener) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { l.conn.Close() })
	defer stop()
	defer func() {
		for _, c := range l.out {
			close(c)
		}
	}()
	if l.v != nil {
		// Credentials new to the daemon are decoded off the reader (each
		// is a round trip to munged); their datagrams wait for it.
		var wg sync.WaitGroup
		for range l.v.opt.Workers {
			wg.Go(func() {
				for s := range l.v.queue {
					l.v.resolve(s, time.Now(), func(r result) {
						if r.err != nil {
							l.reject(r.err)
						} else {
							l.push(r.it)
						}
					})
				}
			})
		}
		defer wg.Wait()
		defer close(l.v.queue)
	}
	source := l.opt.Auth.Source
	// One byte more than the limit tells an oversized datagram from a full one.
	size := max(l.opt.Limits.MaxBytes+1, 64<<10)
	var (
		pool    = sync.Pool{New: func() any { b := make([]byte, size); return &b }}
		workers []chan received
		wg      sync.WaitGroup
		own     macState
	)
	if l.opt.Decoders > 1 {
		// The reader only reads, so the socket is drained while datagrams
		// are decoded: at ten times Stampede's load decoding was half a
		// core, and a reader that also decoded fell behind the kernel.
		// A worker's queue is short; when it is full the reader waits, and
		// datagrams wait in the socket's buffer (bounded memory either way).
		workers = make([]chan received, l.opt.Decoders)
		for i := range workers {
			workers[i] = make(chan received, 256)
			wg.Go(func() {
				var ms macState
				for r := range workers[i] {
					l.handle((*r.buf)[:r.n], r.from, &ms)
					pool.Put(r.buf)
				}
			})
		}
		defer wg.Wait()
		defer func() {
			for _, w := range workers {
				close(w)
			}
		}()
	}
	for {
		buf := pool.Get().(*[]byte)
		n, from, err := l.conn.ReadFromUDPAddrPort(*buf)
		if err != nil {
			pool.Put(buf)
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			// ICMP errors and the like: keep reading.
			continue
		}
		l.m.receive(n)
		if source != nil && !source(from.Addr().Unmap()) {
			pool.Put(buf)
			l.reject(reject(ReasonSourceNetwork, "datagram from %s, outside agent_networks", from.Addr().Unmap()))
			continue
		}
		addr := from.Addr().Unmap()
		if workers == nil {
			l.handle((*buf)[:n], addr, &own)
			pool.Put(buf)
			continue
		}
		workers[shard((*buf)[:n], len(workers))] <- received{buf, n, addr}
	}
}

// received is a datagram read, for a decode worker.
type received struct {
	buf  *[]byte
	n    int
	from netip.Addr
}

// handle decodes, validates and verifies one datagram that came from
// from, and queues it for the aggregator. b is not kept.
func (l *Listener) handle(b []byte, from netip.Addr, ms *macState) {
	d, err := Decode(b, l.opt.Limits)
	if err != nil {
		l.reject(err)
		return
	}
	d.from = from
	if err := checkIdentity(d); err != nil {
		l.reject(err)
		return
	}
	if why := l.opt.Auth.Refuse; why != "" {
		if len(d.Credential) == 0 {
			l.reject(reject(ReasonUnauthenticated, "job %s rank %d: no credential, and %s", d.JobId, d.Rank, why))
		} else {
			l.reject(reject(ReasonMungeUnavailable, "job %s rank %d: its credential cannot be checked: %s", d.JobId, d.Rank, why))
		}
		return
	}
	now := time.Now()
	if l.v == nil {
		l.push(Item{D: d, Size: len(b), At: now})
		return
	}
	switch v, it, rerr := l.v.check(ms, d, b, now); v {
	case accepted:
		l.push(it)
	case rejected:
		l.reject(rerr)
	}
}

// shard picks a datagram's decode worker from its job id and rank, so
// that each rank's datagrams are decoded in the order they came (a
// datagram too broken to tell goes to the first, which rejects it).
func shard(b []byte, n int) int {
	var (
		job  []byte
		rank uint64
	)
	for off := 0; off < len(b); {
		num, typ, m := protowire.ConsumeTag(b[off:])
		if m < 0 {
			return 0
		}
		off += m
		switch {
		case num == 2 && typ == protowire.BytesType:
			job, m = protowire.ConsumeBytes(b[off:])
		case num == 3 && typ == protowire.VarintType:
			rank, m = protowire.ConsumeVarint(b[off:])
		default:
			m = protowire.ConsumeFieldValue(num, typ, b[off:])
		}
		if m < 0 {
			return 0
		}
		off += m
		if job != nil && num >= 3 {
			break
		}
	}
	return int((maphash.Bytes(shardSeed, job) ^ rank*0x9e3779b97f4a7c15) % uint64(n))
}

var shardSeed = maphash.MakeSeed()

func (l *Listener) push(it Item) {
	q := l.out[0]
	if len(l.out) > 1 {
		q = l.out[maphash.String(shardSeed, it.D.JobId)%uint64(len(l.out))]
	}
	select {
	case q <- it:
	default:
		l.m.drop(ReasonQueueFull, 1)
	}
}

func (l *Listener) reject(err error) {
	var re *RejectError
	if errors.As(err, &re) {
		l.m.drop(re.Reason, 1)
	}
	if l.invalid != nil {
		l.invalid(err)
	}
}

// Close closes the socket (Run also does when its context ends).
func (l *Listener) Close() error { return l.conn.Close() }
