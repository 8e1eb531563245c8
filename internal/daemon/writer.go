package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/postgres"
)

// writeOp is one unit of work for the writer goroutine. done, when set,
// receives the outcome; such a write (topology, prune) is never held
// through an outage: its caller gets the error and tries again later.
type writeOp struct {
	kind string
	// bytes is about what the batch holds in memory: what it costs to
	// keep it through an outage (backlog).
	bytes int64
	apply func(ctx context.Context, st store.Store) error
	done  chan error
}

// writeQueueLen bounds the work waiting for the store: a stalled disk drops
// and counts samples instead of growing memory.
const writeQueueLen = 256

// Retrying the oldest held write while the database is unreachable: the
// wait doubles from retryMin up to retryMax.
const (
	retryMin = 250 * time.Millisecond
	retryMax = 5 * time.Second
	// shutdownGrace is how long a stopping daemon keeps trying to write
	// its backlog before it drops what is left.
	shutdownGrace = 10 * time.Second
)

// Reasons store writes are dropped (netloom_store_writes_dropped_total).
const (
	dropQueueFull   = "queue_full"   // the writer's queue was full: the store is slower than the data
	dropBacklogFull = "backlog_full" // the database was unreachable and the backlog reached store_backlog_mib
	dropError       = "error"        // the database refused the write for its content: retrying cannot help
	dropShutdown    = "shutdown"     // the daemon stopped while the database was unreachable
)

// errUnreachable answers a synchronous write while writes are held.
var errUnreachable = errors.New("the database is unreachable; writes are held until it answers")

type writerMetrics struct {
	backlogBytes, backlogWrites, unreachable, limit prometheus.Gauge
	retries, outages                                prometheus.Counter
}

func newWriterMetrics(reg *prometheus.Registry) writerMetrics {
	g := func(name, help string) prometheus.Gauge {
		x := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
		reg.MustRegister(x)
		return x
	}
	c := func(name, help string) prometheus.Counter {
		x := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		reg.MustRegister(x)
		return x
	}
	return writerMetrics{
		backlogBytes:  g("netloom_store_backlog_bytes", "Estimated memory held by store writes waiting for an unreachable database."),
		backlogWrites: g("netloom_store_backlog_writes", "Store writes held for an unreachable database."),
		limit:         g("netloom_store_backlog_limit_bytes", "The backlog's bound (store_backlog_mib); beyond it the oldest held writes are dropped."),
		unreachable:   g("netloom_store_unreachable", "1 while the database is unreachable and writes are held, else 0."),
		retries:       c("netloom_store_write_retries_total", "Writes tried again after failing for an unreachable database."),
		outages:       c("netloom_store_outages_total", "Times the database became unreachable for writes."),
	}
}

// enqueue hands work to the writer without ever blocking the caller.
func (d *Daemon) enqueue(op writeOp) bool {
	select {
	case d.writes <- op:
		return true
	default:
		d.m.writeDropped.WithLabelValues(dropQueueFull).Inc()
		d.log.Warn("store is falling behind: write dropped", "kind", op.kind, "queue", len(d.writes))
		return false
	}
}

// writeSync queues work and waits for it; for rare writes whose result the
// caller needs (topology versions).
func (d *Daemon) writeSync(ctx context.Context, kind string, f func(ctx context.Context, st store.Store) error) error {
	op := writeOp{kind: kind, apply: f, done: make(chan error, 1)}
	select {
	case d.writes <- op:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-op.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// backlog is the writes held while the database is unreachable, oldest
// first, and the memory they hold.
type backlog struct {
	ops   []writeOp
	bytes int64
	since time.Time // when the database became unreachable
	// dropped counts what the bound dropped in this outage, for the log.
	dropped int
}

// writer applies queued writes in order. A write that fails because the
// database cannot be reached starts an outage: that write and every
// later one are held in a backlog bounded by store_backlog_mib (the
// oldest dropped first beyond it), the oldest is tried again with a
// doubling wait, and once it succeeds the backlog is written in order as
// fast as the database takes it, new writes queued behind it. Writes
// that fail for their content are dropped and counted at once, as are
// synchronous writes (topology, prune) during an outage: their callers
// try again on their own schedule. When the queue is closed (the daemon
// stops), the backlog gets shutdownGrace more to be written.
func (d *Daemon) writer(ctx context.Context) {
	var b backlog
	in := d.writes
	var stopBy time.Time // set once in is closed with a backlog left
	wait := retryMin
	headFailed := false // the oldest held write failed when last tried
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		if len(b.ops) == 0 {
			if in == nil {
				return
			}
			op, ok := <-in
			if !ok {
				return
			}
			if err := d.apply(ctx, op); err != nil && op.done == nil && d.retryable(err) {
				b.since, b.dropped, wait = time.Now(), 0, retryMin
				d.m.w.outages.Inc()
				d.m.w.unreachable.Set(1)
				d.log.Error("database unreachable: holding writes until it answers", "kind", op.kind, "err", err,
					"backlog_limit_mib", d.cfg.StoreBacklogMiB)
				d.hold(&b, op)
				headFailed = true
				timer.Reset(wait)
			}
			continue
		}
		// An outage: take new writes into the backlog until the oldest
		// held one is due again.
		select {
		case op, ok := <-in:
			switch {
			case !ok:
				in, stopBy = nil, time.Now().Add(shutdownGrace)
			case op.done != nil:
				op.done <- fmt.Errorf("%s: %w", op.kind, errUnreachable)
			default:
				d.hold(&b, op)
			}
			continue
		case <-timer.C:
		}
		if !stopBy.IsZero() && time.Now().After(stopBy) {
			d.m.writeDropped.WithLabelValues(dropShutdown).Add(float64(len(b.ops)))
			d.log.Error("stopping with the database unreachable: held writes dropped", "writes", len(b.ops),
				"mib", float64(b.bytes)/(1<<20), "unreachable_since", b.since)
			b.ops, b.bytes = nil, 0
			d.publishBacklog(&b)
			return
		}
		op := b.ops[0]
		if headFailed {
			d.m.w.retries.Inc()
		}
		err := d.apply(ctx, op)
		headFailed = err != nil && d.retryable(err)
		if headFailed {
			wait = min(2*wait, retryMax)
			timer.Reset(wait)
			continue
		}
		// Written, or refused for its content (counted by apply): either
		// way it leaves the backlog, and the next is tried at once.
		b.ops[0] = writeOp{}
		b.ops = b.ops[1:]
		b.bytes -= op.bytes
		wait = retryMin
		timer.Reset(0)
		d.publishBacklog(&b)
		if len(b.ops) == 0 {
			d.m.w.unreachable.Set(0)
			d.log.Info("database reachable again: held writes written", "unreachable_since", b.since,
				"outage", time.Since(b.since).Round(time.Millisecond), "dropped_by_bound", b.dropped)
			b = backlog{}
		}
	}
}

// apply runs one write and counts its failure; a failure that retrying
// cannot fix drops the write.
func (d *Daemon) apply(ctx context.Context, op writeOp) error {
	err := op.apply(ctx, d.st)
	if err != nil {
		d.m.writeErrors.WithLabelValues(op.kind).Inc()
		if !d.retryable(err) {
			d.m.writeDropped.WithLabelValues(dropError).Inc()
			d.log.Error("store write failed", "kind", op.kind, "err", err)
		}
	}
	if op.done != nil {
		op.done <- err
	}
	return err
}

// retryable tells a failure to reach the database from a refusal of the
// write itself.
func (d *Daemon) retryable(err error) bool {
	if d.unreachable != nil {
		return d.unreachable(err)
	}
	return postgres.Unreachable(err)
}

// hold adds op to the backlog, dropping the oldest held writes while the
// bound would be passed.
func (d *Daemon) hold(b *backlog, op writeOp) {
	limit := int64(d.cfg.StoreBacklogMiB) << 20
	for len(b.ops) > 0 && b.bytes+op.bytes > limit {
		old := b.ops[0]
		b.ops[0] = writeOp{}
		b.ops = b.ops[1:]
		b.bytes -= old.bytes
		d.dropHeld(b, old)
	}
	if op.bytes > limit {
		d.dropHeld(b, op)
		return
	}
	b.ops = append(b.ops, op)
	b.bytes += op.bytes
	d.publishBacklog(b)
}

func (d *Daemon) dropHeld(b *backlog, op writeOp) {
	d.m.writeDropped.WithLabelValues(dropBacklogFull).Inc()
	if b.dropped == 0 {
		d.log.Warn("database unreachable and the backlog is full: dropping the oldest held writes",
			"kind", op.kind, "backlog_limit_mib", d.cfg.StoreBacklogMiB, "unreachable_since", b.since)
	}
	b.dropped++
}

func (d *Daemon) publishBacklog(b *backlog) {
	d.m.w.backlogBytes.Set(float64(b.bytes))
	d.m.w.backlogWrites.Set(float64(len(b.ops)))
	info := &backlogInfo{writes: len(b.ops), bytes: b.bytes, since: b.since}
	d.publish(func(p *published) { p.backlog = info })
}

// backlogInfo is what watchBehind reports of an outage.
type backlogInfo struct {
	writes int
	bytes  int64
	since  time.Time
}

// Estimated memory of batches, for the backlog's bound: the rows' structs
// and what they point to that the batch alone keeps alive.
var (
	sizePortSample    = int64(unsafe.Sizeof(fabric.PortSample{}))
	sizeProcessSample = int64(unsafe.Sizeof(store.ProcessSample{}))
	sizeLinkJobSample = int64(unsafe.Sizeof(store.LinkJobSample{}))
	sizeEvent         = int64(unsafe.Sizeof(fabric.Event{}))
	sizeJob           = int64(unsafe.Sizeof(store.Job{}))
	sizeProcess       = int64(unsafe.Sizeof(store.Process{}))
	sizeFunction      = int64(unsafe.Sizeof(store.Function{}))
	sizeRegion        = int64(unsafe.Sizeof(store.Region{}))
)

// packedRowBytes is about one packed per-node or per-peer row.
const packedRowBytes = 24

func portSamplesBytes(s []fabric.PortSample) int64 { return int64(len(s)) * sizePortSample }

func processSamplesBytes(s []store.ProcessSample) int64 {
	n := int64(len(s)) * sizeProcessSample
	for i := range s {
		n += int64(len(s[i].Job))
	}
	return n
}

func linkJobSamplesBytes(s []store.LinkJobSample) int64 {
	n := int64(len(s)) * sizeLinkJobSample
	for i := range s {
		n += int64(len(s[i].Job))
	}
	return n
}

func eventsBytes(ev []fabric.Event) int64 {
	n := int64(len(ev)) * sizeEvent
	for i := range ev {
		n += int64(len(ev[i].Detail))
	}
	return n
}

func jobsBytes(jobs []*store.Job) int64 {
	var n int64
	for _, j := range jobs {
		n += sizeJob + 512 // the summary's strings and lists
		j.EachProcess(func(p *store.Process) {
			n += sizeProcess + int64(len(p.Functions))*sizeFunction + int64(len(p.Regions))*sizeRegion +
				int64(p.ToNodes.Len()+p.Peers.Len())*packedRowBytes
		})
	}
	return n
}

func forwardingBytes(ft fabric.ForwardingTables) int64 {
	n := int64(len(ft)) * 48
	for _, t := range ft {
		n += int64(len(t))
	}
	return n
}
