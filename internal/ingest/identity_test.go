package ingest

import (
	"bytes"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netloom/netloom/internal/ingest/agentpb"
)

// TestControlCharactersRefused: a datagram whose process names itself
// with a control character or bytes that are not UTF-8 (user, node, host,
// program, MPI library) is refused at the socket, unverified (agent_auth
// none) as it would be verified, and counted as bad_string; the same
// datagram with a plain name is taken.
func TestControlCharactersRefused(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	l, conn, stop := runListener(t, ListenOptions{Queue: 1024, Limits: Limits{MaxBytes: 60000}}, m)
	items := queued(l)
	bad := []func(p *agentpb.Process){
		func(p *agentpb.Process) { p.User = "alice\x00root" },
		func(p *agentpb.Process) { p.User = "\x1b[31malice" },
		func(p *agentpb.Process) { p.User = "alice\n" },
		func(p *agentpb.Process) { p.User = "ali\x7fce" },
		func(p *agentpb.Process) { p.User = "ali\u0085ce" }, // C1 NEL
		func(p *agentpb.Process) { p.Node = "node0\x00" },
		func(p *agentpb.Process) { p.Host = "host\r" },
		func(p *agentpb.Process) { p.Program = "ring\tx" },
		func(p *agentpb.Process) { p.MpiLibrary = "Open MPI\x00" },
	}
	for i, f := range bad {
		d := snapshot("ctl", 0, 1, uint64(i), false)
		f(d.Process)
		conn.Write(encode(t, d))
	}
	// Bytes that are not UTF-8, which proto.Marshal will not write: a
	// placeholder of the same length swapped in the encoded datagram (the
	// decoder refuses them already, as malformed).
	d := snapshot("ctl", 0, 1, 50, false)
	d.Process.User = "ali\u00a4ce"
	conn.Write(bytes.Replace(encode(t, d), []byte("\u00a4"), []byte{0xff, 0xfe}, 1))
	good := snapshot("ctl", 0, 1, 99, false)
	good.Process.User, good.Process.Program = "ålice", "/home/ålice/ring"
	conn.Write(encode(t, good))
	select {
	case it := <-items:
		if it.D.Seq != 99 || it.D.Process.User != "ålice" {
			t.Errorf("taken: seq %d user %q; want the plain one alone", it.D.Seq, it.D.Process.User)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the plain datagram was not taken")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got, bytes := dropped(m, ReasonString), dropped(m, ReasonMalformed); got != float64(len(bad)) || bytes != 1 {
		t.Errorf("bad_string %v, malformed %v; want %d and 1", got, bytes, len(bad))
	}
	for it := range items {
		t.Errorf("taken too: seq %d user %q", it.D.Seq, it.D.Process.User)
	}
}
