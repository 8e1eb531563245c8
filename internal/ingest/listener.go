package ingest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/netloom/netloom/internal/ingest/agentpb"
)

// DefaultListen is the agents' default UDP address.
const DefaultListen = "0.0.0.0:8467"

// ListenOptions tune a Listener; the zero value is good.
type ListenOptions struct {
	// ReadBuffer is the socket receive buffer asked for (SO_RCVBUF, or
	// SO_RCVBUFFORCE when allowed). Default 64 MiB: about two seconds of
	// ten Stampedes' datagrams, so that the reader may be descheduled for a
	// while on busy cores without the kernel dropping any.
	ReadBuffer int
	// Queue bounds decoded datagrams waiting for the aggregator. Default 65536.
	Queue  int
	Limits Limits
}

// Item is one decoded, validated datagram.
type Item struct {
	D    *agentpb.Datagram
	Size int
	At   time.Time
}

// Listener reads agent datagrams from a UDP socket, decodes and validates
// them, and queues them for one aggregator. It never blocks on the
// aggregator: when the queue is full the datagram is dropped and counted.
type Listener struct {
	conn    *net.UDPConn
	opt     ListenOptions
	m       *Metrics
	out     chan Item
	rcvbuf  int
	invalid func(err error) // optional, for logging; called from the reader
}

// Listen opens the UDP socket at addr.
func Listen(addr string, opt ListenOptions, m *Metrics) (*Listener, error) {
	if opt.ReadBuffer <= 0 {
		opt.ReadBuffer = 64 << 20
	}
	if opt.Queue <= 0 {
		opt.Queue = 65536
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
	l := &Listener{conn: conn, opt: opt, m: m, out: make(chan Item, opt.Queue)}
	l.rcvbuf = setReadBuffer(conn, opt.ReadBuffer)
	return l, nil
}

// Addr is the bound address.
func (l *Listener) Addr() *net.UDPAddr { return l.conn.LocalAddr().(*net.UDPAddr) }

// ReadBuffer is the receive buffer the kernel granted, in bytes.
func (l *Listener) ReadBuffer() int { return l.rcvbuf }

// Datagrams is the queue the aggregator reads.
func (l *Listener) Datagrams() <-chan Item { return l.out }

// QueueLen is how many datagrams wait for the aggregator.
func (l *Listener) QueueLen() int { return len(l.out) }

// OnInvalid sets a function called with each rejected datagram's error
// (for rate-limited logging); set it before Run.
func (l *Listener) OnInvalid(f func(error)) { l.invalid = f }

// Run reads until ctx ends, then closes the socket and the queue.
func (l *Listener) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { l.conn.Close() })
	defer stop()
	defer close(l.out)
	// One buffer, reused: proto.Unmarshal copies what it keeps. One byte
	// more than the limit tells an oversized datagram from a full one.
	buf := make([]byte, max(l.opt.Limits.MaxBytes+1, 64<<10))
	for {
		n, _, err := l.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			// ICMP errors and the like: keep reading.
			continue
		}
		l.m.receive(n)
		d, err := Decode(buf[:n], l.opt.Limits)
		if err != nil {
			var re *RejectError
			if errors.As(err, &re) {
				l.m.drop(re.Reason, 1)
			}
			if l.invalid != nil {
				l.invalid(err)
			}
			continue
		}
		select {
		case l.out <- Item{D: d, Size: n, At: time.Now()}:
		default:
			l.m.drop(ReasonQueueFull, 1)
		}
	}
}

// Close closes the socket (Run also does when its context ends).
func (l *Listener) Close() error { return l.conn.Close() }
