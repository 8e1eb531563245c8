package ingest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netloom/netloom/internal/ingest/agentpb"
)

// TestListener sends hostile and valid datagrams over a real UDP socket:
// the bad ones are counted by reason, the good ones all arrive, each
// rank's in the order sent (a reordered one would be rejected as stale),
// whether decoded on the reader or on several workers, and queued for one
// aggregator or several.
func TestListener(t *testing.T) {
	for _, n := range []struct{ decoders, aggregators int }{{1, 1}, {4, 3}} {
		t.Run(fmt.Sprintf("decoders=%d,aggregators=%d", n.decoders, n.aggregators), func(t *testing.T) {
			testListener(t, n.decoders, n.aggregators)
		})
	}
}

// queuedItem is an item and the index of the queue it came from.
type queuedItem struct {
	Item
	queue int
}

// queued receives what a listener queues for its aggregators, each
// queue's in order, and closes when they all are.
func queued(l *Listener) <-chan queuedItem {
	out := make(chan queuedItem)
	var wg sync.WaitGroup
	for i, q := range l.Queues() {
		wg.Go(func() {
			for it := range q {
				out <- queuedItem{it, i}
			}
		})
	}
	go func() { wg.Wait(); close(out) }()
	return out
}

func testListener(t *testing.T, decoders, aggregators int) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	l, conn, stop := runListener(t, ListenOptions{Queue: 1 << 16, Limits: Limits{MaxBytes: 60000}, Decoders: decoders,
		Aggregators: aggregators}, m)
	if len(l.Queues()) != aggregators {
		t.Fatalf("%d queues for %d aggregators", len(l.Queues()), aggregators)
	}
	items := queued(l)
	queueOf := map[string]int{} // each job's
	good := encode(t, snapshot("1", 0, 2, 0, false))
	bad := [][]byte{{}, good[:len(good)/2], encode(t, &agentpb.Datagram{Version: 9, JobId: "x", WorldSize: 1, Chunks: 1, TimeUnixNs: 1}),
		make([]byte, 65000), []byte("GET / HTTP/1.1\r\n\r\n")}
	const rounds, ranks = 200, 6 // three jobs of two ranks
	for i := range rounds {
		for _, b := range bad {
			conn.Write(b)
		}
		for k := range ranks {
			conn.Write(encode(t, snapshot(strconv.Itoa(k%3), k/3, 2, uint64(i), false)))
		}
		if i%20 == 0 {
			time.Sleep(time.Millisecond) // stay within the socket buffer
		}
	}
	got := 0
	deadline := time.After(5 * time.Second)
	tr := NewTracker(Options{}, m)
loop:
	for got < rounds*ranks {
		select {
		case it := <-items:
			if q, ok := queueOf[it.D.JobId]; ok && q != it.queue {
				t.Errorf("job %s queued for aggregators %d and %d", it.D.JobId, q, it.queue)
			}
			queueOf[it.D.JobId] = it.queue
			if err := tr.Add(it.D, it.Size, it.At); err != nil {
				t.Errorf("valid datagram of job %s rank %d seq %d rejected: %v", it.D.JobId, it.D.Rank, it.D.Seq, err)
			}
			got++
		case <-deadline:
			break loop
		}
	}
	if got != rounds*ranks {
		t.Errorf("received %d valid datagrams of %d", got, rounds*ranks)
	}
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	if _, ok := <-items; ok {
		t.Error("queues not closed after Run")
	}
	if dropped(m, ReasonMalformed) < rounds || dropped(m, ReasonVersion) != rounds || dropped(m, ReasonOversized) != rounds || dropped(m, ReasonEmpty) != rounds {
		t.Errorf("drops: malformed %g version %g oversized %g empty %g", dropped(m, ReasonMalformed), dropped(m, ReasonVersion),
			dropped(m, ReasonOversized), dropped(m, ReasonEmpty))
	}
	if l.ReadBuffer() <= 0 {
		t.Errorf("read buffer %d", l.ReadBuffer())
	}
}

// Datagrams of one rank always go to one decode worker; ranks spread.
func TestShard(t *testing.T) {
	counts := make([]int, 4)
	for job := range 8 {
		for rank := range 64 {
			b := encode(t, snapshot(strconv.Itoa(job), rank, 64, 0, false))
			w := shard(b, 4)
			if again := shard(encode(t, snapshot(strconv.Itoa(job), rank, 64, 9, true)), 4); again != w {
				t.Fatalf("job %d rank %d: worker %d, then %d", job, rank, w, again)
			}
			counts[w]++
		}
	}
	for w, c := range counts {
		if c < 512/4/2 {
			t.Errorf("worker %d got %d of 512 ranks: %v", w, c, counts)
		}
	}
	if shard([]byte{0xff}, 4) != 0 {
		t.Error("a broken datagram not on the first worker")
	}
}

// runListener starts a listener on a loopback port with a client socket
// to it; stop ends Run and returns its error.
func runListener(t *testing.T, opt ListenOptions, m *Metrics) (l *Listener, conn *net.UDPConn, stop func() error) {
	t.Helper()
	l, err := Listen("127.0.0.1:0", opt, m)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	if conn, err = net.DialUDP("udp", nil, l.Addr()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return l, conn, func() error { cancel(); return <-done }
}

// TestQueueFull: a stalled aggregator makes the reader drop, not block.
func TestQueueFull(t *testing.T) {
	m := NewMetrics(nil)
	// Two aggregators' queues of 2; one job's datagrams all go to one.
	_, conn, stop := runListener(t, ListenOptions{Queue: 4, Aggregators: 2}, m)
	b := encode(t, snapshot("1", 0, 2, 0, false))
	for range 20 {
		conn.Write(b)
	}
	deadline := time.Now().Add(5 * time.Second)
	for dropped(m, ReasonQueueFull) < 18 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := dropped(m, ReasonQueueFull); got != 18 {
		t.Errorf("queue_full = %g, want 18", got)
	}
	stop()
}
