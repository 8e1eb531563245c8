package ingest

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/netloom/netloom/internal/ingest/agentpb"
)

// These tests sign datagrams with session keys directly; credentials are
// decoded by fakeMunge, which knows the ones the test made. The real
// munged is in internal/munge's tests and test/e2e/agentauth_test.go.

type fakeMunge struct {
	mu    sync.Mutex
	creds map[string]Credential
	calls map[string]int
	down  bool
}

type unavailableErr struct{}

func (unavailableErr) Error() string     { return "munged: connection refused" }
func (unavailableErr) Unavailable() bool { return true }

func newFakeMunge() *fakeMunge {
	return &fakeMunge{creds: map[string]Credential{}, calls: map[string]int{}}
}

// issue makes a credential of uid for job with a fresh key, valid from at
// for ttl.
func (f *fakeMunge) issue(uid uint32, job string, at time.Time, ttl time.Duration) (cred, key []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key = make([]byte, SessionKeyLen)
	for i := range key {
		key[i] = byte(len(f.creds)*7 + i + 1)
	}
	cred = []byte("MUNGE:" + base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "cred-%d-%d", len(f.creds), uid)) + ":")
	f.creds[string(cred)] = Credential{Payload: CredentialPayload(key, job), UID: uid, Encoded: at, TTL: ttl}
	return cred, key
}

func (f *fakeMunge) Decode(cred []byte) (Credential, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[string(cred)]++
	if f.down {
		return Credential{}, fmt.Errorf("decode: %w", unavailableErr{})
	}
	c, ok := f.creds[string(cred)]
	if !ok {
		return Credential{}, errors.New("munge: invalid credential")
	}
	if f.calls[string(cred)] > 1 {
		return Credential{}, errors.New("munge: replayed credential")
	}
	return c, nil
}

func users(uid uint32) (string, error) {
	switch uid {
	case 1001:
		return "alice", nil
	case 1002:
		return "bob", nil
	}
	return "", errors.New("unknown user")
}

func newTestVerifier(f *fakeMunge) (*verifier, *Metrics) {
	m := NewMetrics(prometheus.NewRegistry())
	return newVerifier(AuthOptions{Decode: f.Decode, UserName: users}, m, 64), m
}

// signed serializes d with cred and signs it with key.
func signed(t testing.TB, d *agentpb.Datagram, cred, key []byte) []byte {
	c := proto.Clone(d).(*agentpb.Datagram)
	c.Credential = cred
	return Sign(encode(t, c), key)
}

// run passes raw through Decode and the verifier, resolving credentials
// at once as the listener's workers would.
func run(t *testing.T, v *verifier, raw []byte, now time.Time) ([]Item, []string) {
	t.Helper()
	d, err := Decode(raw, Limits{}.WithDefaults())
	if err != nil {
		return nil, []string{reasonOf(err)}
	}
	var items []Item
	var reasons []string
	var ms macState
	switch vd, it, rerr := v.check(&ms, d, raw, now); vd {
	case accepted:
		items = append(items, it)
	case rejected:
		reasons = append(reasons, rerr.Reason)
	case heldBack:
		for {
			select {
			case s := <-v.queue:
				v.resolve(s, now, func(r result) {
					if r.err != nil {
						reasons = append(reasons, r.err.Reason)
					} else {
						items = append(items, r.it)
					}
				})
				continue
			default:
			}
			break
		}
	}
	return items, reasons
}

func expect(t *testing.T, what string, items []Item, reasons []string, want string) {
	t.Helper()
	got := "accepted"
	if len(reasons) > 0 {
		got = reasons[0]
	}
	if len(items)+len(reasons) != 1 || got != want {
		t.Errorf("%s: %d items, reasons %v; want %s", what, len(items), reasons, want)
	}
}

func TestVerifyAcceptsAndBinds(t *testing.T) {
	f := newFakeMunge()
	v, m := newTestVerifier(f)
	cred, key := f.issue(1001, "42", t0, 300*time.Second)
	now := t0.Add(time.Second)
	for seq := range uint64(3) {
		items, reasons := run(t, v, signed(t, snapshot("42", 1, 4, seq, false), cred, key), now)
		expect(t, fmt.Sprint("snapshot ", seq), items, reasons, "accepted")
		if len(items) == 1 {
			it := items[0]
			if !it.Verified || it.UID != 1001 || it.User != "alice" || it.D.Process.User != "alice" || it.D.Seq != seq {
				t.Errorf("item %+v", it)
			}
		}
	}
	if f.calls[string(cred)] != 1 || value(m.decodes) != 1 {
		t.Errorf("credential decoded %d times (metric %g), want once", f.calls[string(cred)], value(m.decodes))
	}
	// A uid without a name here: bound to its number, the claim unchecked.
	cred, key = f.issue(4242, "43", t0, 300*time.Second)
	items, reasons := run(t, v, signed(t, snapshot("43", 0, 1, 0, false), cred, key), now)
	expect(t, "nameless uid", items, reasons, "accepted")
	if len(items) == 1 && (items[0].User != "4242" || items[0].D.Process.User != "4242") {
		t.Errorf("nameless uid bound to %q / %q", items[0].User, items[0].D.Process.User)
	}
}

func TestVerifyRejects(t *testing.T) {
	f := newFakeMunge()
	v, _ := newTestVerifier(f)
	now := t0.Add(time.Second)
	cred, key := f.issue(1001, "42", t0, 300*time.Second)
	seq := uint64(0)
	next := func() *agentpb.Datagram { seq++; return snapshot("42", 0, 2, seq, false) }
	good := signed(t, next(), cred, key)
	items, reasons := run(t, v, good, now)
	expect(t, "good", items, reasons, "accepted")

	unsigned := encode(t, next())
	items, reasons = run(t, v, unsigned, now)
	expect(t, "no credential", items, reasons, ReasonUnauthenticated)

	c := proto.Clone(next()).(*agentpb.Datagram)
	c.Credential = cred
	items, reasons = run(t, v, encode(t, c), now)
	expect(t, "credential without mac", items, reasons, ReasonBadMAC)

	raw := signed(t, next(), cred, key)
	raw[10] ^= 0x01 // a byte of the signed prefix: still a valid datagram?
	if _, err := Decode(raw, Limits{}.WithDefaults()); err == nil {
		items, reasons = run(t, v, raw, now)
		expect(t, "changed byte", items, reasons, ReasonBadMAC)
	}
	items, reasons = run(t, v, signed(t, next(), cred, make([]byte, SessionKeyLen)), now)
	expect(t, "wrong key", items, reasons, ReasonBadMAC)

	// mac not last: a field after it.
	raw = signed(t, next(), cred, key)
	raw = append(raw, 0x08, 0x01) // version = 1 again
	items, reasons = run(t, v, raw, now)
	expect(t, "mac not last", items, reasons, ReasonBadMAC)

	// Replays: the same datagram again, and an old one.
	items, reasons = run(t, v, good, now)
	expect(t, "replay", items, reasons, ReasonReplayed)

	// The credential of job 42 used for job 7.
	items, reasons = run(t, v, signed(t, snapshot("7", 0, 2, 0, false), cred, key), now)
	expect(t, "other job", items, reasons, ReasonJobMismatch)

	// bob's credential claiming alice.
	credB, keyB := f.issue(1002, "42", t0, 300*time.Second)
	items, reasons = run(t, v, signed(t, snapshot("42", 1, 2, 0, false), credB, keyB), now)
	expect(t, "claimed user", items, reasons, ReasonUserMismatch)

	// Expired: the session is remembered, but not past its TTL.
	items, reasons = run(t, v, signed(t, next(), cred, key), t0.Add(301*time.Second))
	expect(t, "expired", items, reasons, ReasonBadCredential)

	// Credentials munged refuses, and text that is not one (not sent to munged).
	bogus := []byte("MUNGE:AAAAbogus:")
	items, reasons = run(t, v, signed(t, next(), bogus, key), now)
	expect(t, "unknown credential", items, reasons, ReasonBadCredential)
	items, reasons = run(t, v, signed(t, next(), bogus, key), now)
	expect(t, "unknown credential again", items, reasons, ReasonBadCredential)
	if f.calls[string(bogus)] != 1 {
		t.Errorf("a refused credential was sent to munged %d times, want once", f.calls[string(bogus)])
	}
	items, reasons = run(t, v, signed(t, next(), []byte("not munge"), key), now)
	expect(t, "not a credential", items, reasons, ReasonBadCredential)
	if f.calls["not munge"] != 0 {
		t.Error("text that is no credential was sent to munged")
	}

	// A credential whose payload is not a netloom session.
	other := []byte("MUNGE:b3RoZXI=:")
	f.creds[string(other)] = Credential{Payload: []byte("hello"), UID: 1001, Encoded: t0, TTL: time.Hour}
	items, reasons = run(t, v, signed(t, next(), other, key), now)
	expect(t, "foreign payload", items, reasons, ReasonBadCredential)
}

func TestVerifyMungeDown(t *testing.T) {
	f := newFakeMunge()
	v, _ := newTestVerifier(f)
	cred, key := f.issue(1001, "42", t0, 300*time.Second)
	f.down = true
	now := t0.Add(time.Second)
	items, reasons := run(t, v, signed(t, snapshot("42", 0, 2, 0, false), cred, key), now)
	expect(t, "munged down", items, reasons, ReasonMungeUnavailable)
	f.down = false
	items, reasons = run(t, v, signed(t, snapshot("42", 0, 2, 1, false), cred, key), now.Add(time.Second))
	expect(t, "before the retry", items, reasons, ReasonMungeUnavailable)
	f.calls[string(cred)] = 0 // munged never decoded it
	items, reasons = run(t, v, signed(t, snapshot("42", 0, 2, 2, false), cred, key), now.Add(retryUnavailable+time.Second))
	expect(t, "after the retry", items, reasons, "accepted")
}

// TestVerifySessionsForgotten: a rank's older credential still verifies
// late chunks for a while after a newer one arrived, then is forgotten (a
// datagram carrying it is decoded again, and munged refuses the replay);
// expired ones are forgotten too.
func TestVerifySessionsForgotten(t *testing.T) {
	f := newFakeMunge()
	v, _ := newTestVerifier(f)
	now := t0.Add(time.Second)
	old, oldKey := f.issue(1001, "42", t0, 300*time.Second)
	items, reasons := run(t, v, signed(t, snapshot("42", 0, 2, 0, false), old, oldKey), now)
	expect(t, "first credential", items, reasons, "accepted")
	cur, curKey := f.issue(1001, "42", t0.Add(60*time.Second), 300*time.Second)
	now = t0.Add(61 * time.Second)
	items, reasons = run(t, v, signed(t, snapshot("42", 0, 2, 2, false), cur, curKey), now)
	expect(t, "next credential", items, reasons, "accepted")
	items, reasons = run(t, v, signed(t, snapshot("42", 0, 2, 1, false), old, oldKey), now.Add(time.Second))
	expect(t, "late datagram under the older credential", items, reasons, "accepted")
	if len(v.sessions) != 2 {
		t.Errorf("%d sessions, want 2", len(v.sessions))
	}
	now = now.Add(supersededFor + sweepEvery)
	items, reasons = run(t, v, signed(t, snapshot("42", 0, 2, 3, false), cur, curKey), now)
	expect(t, "current credential", items, reasons, "accepted")
	if len(v.sessions) != 1 || v.sessions[string(cur)] == nil || len(v.byRank) != 1 {
		t.Errorf("after the sweep: %d sessions, %d ranks; want the current one", len(v.sessions), len(v.byRank))
	}
	items, reasons = run(t, v, signed(t, snapshot("42", 0, 2, 4, false), old, oldKey), now)
	expect(t, "forgotten credential", items, reasons, ReasonBadCredential)
	// Expiry.
	now = t0.Add(60*time.Second + 300*time.Second + sweepEvery)
	items, reasons = run(t, v, signed(t, snapshot("42", 0, 2, 5, false), cur, curKey), now)
	expect(t, "expired", items, reasons, ReasonBadCredential)
	if s := v.sessions[string(cur)]; (s != nil && s.state != sessionFailed) || len(v.byRank) != 0 {
		t.Errorf("expired session kept: %d sessions, %d ranks", len(v.sessions), len(v.byRank))
	}
}

// TestVerifyMaxSessions: past the bound, new credentials are refused,
// remembered ones still verify.
func TestVerifyMaxSessions(t *testing.T) {
	f := newFakeMunge()
	m := NewMetrics(nil)
	v := newVerifier(AuthOptions{Decode: f.Decode, UserName: users, MaxSessions: 2}, m, 64)
	now := t0.Add(time.Second)
	var creds, keys [][]byte
	for i := range 3 {
		c, k := f.issue(1001, "42", t0, 300*time.Second)
		creds, keys = append(creds, c), append(keys, k)
		items, reasons := run(t, v, signed(t, snapshot("42", i, 4, 0, false), c, k), now)
		want := "accepted"
		if i == 2 {
			want = ReasonQueueFull
		}
		expect(t, fmt.Sprint("credential ", i), items, reasons, want)
	}
	items, reasons := run(t, v, signed(t, snapshot("42", 0, 4, 1, false), creds[0], keys[0]), now)
	expect(t, "a remembered credential", items, reasons, "accepted")
}

// TestReplayWindow: chunks of the newest and the previous snapshot pass in
// any order, once; anything older or repeated does not.
func TestReplayWindow(t *testing.T) {
	var w replayWindow
	steps := []struct {
		seq   uint64
		chunk uint32
		ok    bool
	}{
		{5, 1, true}, {5, 0, true}, {5, 1, false}, {6, 2, true}, {5, 2, true}, {6, 0, true}, {5, 2, false},
		{4, 0, false}, {6, 2, false}, {7, 0, true}, {5, 3, false}, {6, 1, true}, {6, 1, false}, {9, 100, true},
		{8, 0, true}, {7, 0, false}, {9, 100, false}, {9, 4095, true}, {10, 0, true}, {9, 4095, false}, {9, 0, true},
	}
	for i, s := range steps {
		if got := w.accept(s.seq, s.chunk); got != s.ok {
			t.Errorf("step %d: accept(%d, %d) = %v, want %v", i, s.seq, s.chunk, got, s.ok)
		}
	}
}

// TestVerifyHeldChunks: chunks arriving while their credential is being
// decoded are held and all verified once it is, with one decode.
func TestVerifyHeldChunks(t *testing.T) {
	f := newFakeMunge()
	v, _ := newTestVerifier(f)
	cred, key := f.issue(1001, "42", t0, 300*time.Second)
	big := snapshot("42", 0, 64, 0, false)
	for p := 2; p < 64; p++ {
		big.Peers = append(big.Peers, &agentpb.PeerTraffic{Peer: uint32(p), P2P: &agentpb.Traffic{Bytes: 1, Msgs: 1}})
	}
	chunks := split(big, 8)
	now := t0.Add(time.Second)
	lim := Limits{}.WithDefaults()
	var ms macState
	for i, c := range chunks {
		raw := signed(t, c, cred, key)
		d, err := Decode(raw, lim)
		if err != nil {
			t.Fatal(err)
		}
		if vd, _, rerr := v.check(&ms, d, raw, now); vd != heldBack {
			t.Fatalf("chunk %d: verdict %d %v, want held", i, vd, rerr)
		}
	}
	if len(v.queue) != 1 {
		t.Fatalf("%d decodes queued, want 1", len(v.queue))
	}
	var res []result
	v.resolve(<-v.queue, now, func(r result) { res = append(res, r) })
	tr := NewTracker(Options{}, nil)
	for _, r := range res {
		if r.err != nil {
			t.Fatalf("held chunk rejected: %v", r.err)
		}
		if err := tr.AddItem(r.it); err != nil {
			t.Fatal(err)
		}
	}
	if len(res) != len(chunks) || v.heldBytes != 0 {
		t.Errorf("%d results for %d chunks, %d bytes still held", len(res), len(chunks), v.heldBytes)
	}
	j := tr.Publish(now).Jobs["42"]
	if j == nil || j.User != "alice" || j.Reporting != 1 || j.Full().Processes[0].Peers.Len() != 63 {
		t.Errorf("job after held chunks: %+v", j)
	}
}

// TestTrackerJobOwner: a job belongs to the uid of its first verified
// datagram; another uid's datagrams for it, or unverified ones, are
// job_mismatch.
func TestTrackerJobOwner(t *testing.T) {
	tr, _, m, _ := newTracker(Options{})
	it := func(d *agentpb.Datagram, verified bool, uid uint32, user string) Item {
		if d.Process != nil {
			d.Process.User = user
		}
		return Item{D: FromProto(d), Size: 100, At: t0, Verified: verified, UID: uid, User: user}
	}
	if err := tr.AddItem(it(snapshot("42", 0, 2, 0, false), true, 1001, "alice")); err != nil {
		t.Fatal(err)
	}
	if err := tr.AddItem(it(snapshot("42", 1, 2, 0, false), true, 1002, "bob")); reasonOf(err) != ReasonJobMismatch {
		t.Errorf("bob's datagram for alice's job: %v", err)
	}
	if err := tr.AddItem(it(snapshot("42", 1, 2, 0, false), false, 0, "alice")); reasonOf(err) != ReasonJobMismatch {
		t.Errorf("unverified datagram for a verified job: %v", err)
	}
	if err := tr.AddItem(it(snapshot("42", 1, 2, 0, false), true, 1001, "alice")); err != nil {
		t.Errorf("alice's second rank: %v", err)
	}
	if dropped(m, ReasonJobMismatch) != 2 {
		t.Errorf("job_mismatch = %g", dropped(m, ReasonJobMismatch))
	}
	if j := tr.Publish(t0).Jobs["42"]; j == nil || j.User != "alice" || j.Reporting != 2 {
		t.Errorf("job %+v", j)
	}
}

// TestListenerAuth runs the verification on a real socket: signed
// datagrams pass (their credential decoded once), forged ones are counted
// by reason, and a source outside the networks is refused.
func TestListenerAuth(t *testing.T) {
	f := newFakeMunge()
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	allowed := netip.MustParsePrefix("127.0.0.0/8")
	l, conn, stop := runListener(t, ListenOptions{Auth: AuthOptions{Decode: f.Decode, UserName: users,
		Source: func(a netip.Addr) bool { return allowed.Contains(a) }}}, m)
	items := queued(l)
	now := time.Now()
	cred, key := f.issue(1001, "42", now, 300*time.Second)
	const rounds = 50
	for i := range rounds {
		d := snapshot("42", 0, 2, uint64(i), false)
		d.TimeUnixNs, d.StartUnixNs = now.UnixNano()+int64(i), now.UnixNano()
		raw := signed(t, d, cred, key)
		conn.Write(raw)
		conn.Write(raw)                                  // replayed
		conn.Write(encode(t, d))                         // unauthenticated
		conn.Write(raw[:len(raw)-1])                     // malformed or bad mac
		conn.Write(signed(t, d, cred, make([]byte, 32))) // bad mac
		if i%10 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	got := 0
	deadline := time.After(5 * time.Second)
	tr := NewTracker(Options{}, m)
loop:
	for got < rounds {
		select {
		case it := <-items:
			if !it.Verified || it.User != "alice" {
				t.Errorf("item %+v", it)
			}
			if err := tr.AddItem(it.Item); err != nil {
				t.Errorf("verified datagram %d rejected: %v", it.D.Seq, err)
			}
			got++
		case <-deadline:
			break loop
		}
	}
	if got != rounds {
		t.Errorf("received %d verified datagrams of %d", got, rounds)
	}
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end) &&
		dropped(m, ReasonBadMAC)+dropped(m, ReasonMalformed) < 2*rounds; {
		time.Sleep(10 * time.Millisecond)
	}
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	if f.calls[string(cred)] != 1 {
		t.Errorf("credential decoded %d times", f.calls[string(cred)])
	}
	if dropped(m, ReasonReplayed) != rounds || dropped(m, ReasonUnauthenticated) != rounds ||
		dropped(m, ReasonBadMAC)+dropped(m, ReasonMalformed) != 2*rounds {
		t.Errorf("drops: replayed %g unauthenticated %g bad_mac %g malformed %g", dropped(m, ReasonReplayed),
			dropped(m, ReasonUnauthenticated), dropped(m, ReasonBadMAC), dropped(m, ReasonMalformed))
	}
}

// TestSourceNetworks: datagrams from outside agent_networks are dropped
// before anything else, with or without MUNGE.
func TestSourceNetworks(t *testing.T) {
	m := NewMetrics(nil)
	only := netip.MustParsePrefix("10.0.0.0/8")
	l, conn, stop := runListener(t, ListenOptions{Auth: AuthOptions{Source: func(a netip.Addr) bool { return only.Contains(a) }}}, m)
	for i := range 10 {
		conn.Write(encode(t, snapshot("1", 0, 2, uint64(i), false)))
	}
	deadline := time.Now().Add(5 * time.Second)
	for dropped(m, ReasonSourceNetwork) < 10 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if got := dropped(m, ReasonSourceNetwork); got != 10 || l.QueueLen() != 0 {
		t.Errorf("source_network = %g, %d queued", got, l.QueueLen())
	}
}

// BenchmarkVerify is the cost a remembered credential adds to a datagram:
// one map lookup, one HMAC-SHA256 over the datagram, the replay window.
func BenchmarkVerify(b *testing.B) {
	for _, peers := range []int{1, 64, 512} {
		b.Run(fmt.Sprintf("peers=%d", peers), func(b *testing.B) {
			f := newFakeMunge()
			v := newVerifier(AuthOptions{Decode: f.Decode, UserName: users}, nil, 64)
			cred, key := f.issue(1001, "42", t0, 300*time.Second)
			now := t0.Add(time.Second)
			lim := Limits{}.WithDefaults()
			d := snapshot("42", 0, peers+1, 0, false)
			for p := 2; p <= peers; p++ {
				d.Peers = append(d.Peers, &agentpb.PeerTraffic{Peer: uint32(p), P2P: &agentpb.Traffic{Bytes: 1 << 20, Msgs: 1000},
					SizeHistogram: []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}})
			}
			// A ring of signed snapshots; the session's replay window is
			// cleared each time round.
			const ring = 256
			raws := make([][]byte, ring)
			ds := make([]*Datagram, ring)
			for i := range raws {
				d.Seq = uint64(i)
				raws[i] = signed(b, d, cred, key)
				var err error
				if ds[i], err = Decode(raws[i], lim); err != nil {
					b.Fatal(err)
				}
			}
			var ms macState
			if vd, _, _ := v.check(&ms, ds[0], raws[0], now); vd != heldBack {
				b.Fatal("first datagram not held")
			}
			s := <-v.queue
			v.resolve(s, now, func(result) {})
			b.Run("verify", func(b *testing.B) {
				b.SetBytes(int64(len(raws[1])))
				b.ReportAllocs()
				for i := range b.N {
					k := i % ring
					if k == 0 {
						s.win = replayWindow{}
					}
					if vd, _, err := v.check(&ms, ds[k], raws[k], now); vd != accepted {
						b.Fatal(err)
					}
				}
			})
			// What every datagram costs anyway, for comparison.
			b.Run("decode", func(b *testing.B) {
				b.SetBytes(int64(len(raws[1])))
				b.ReportAllocs()
				for i := range b.N {
					if _, err := Decode(raws[i%ring], lim); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// A datagram that arrives while the datagrams held for its credential are
// handed on waits behind them: a rank's snapshots are never reordered
// around its credential's decoding.
func TestVerifyReleaseKeepsOrder(t *testing.T) {
	f := newFakeMunge()
	v, _ := newTestVerifier(f)
	cred, key := f.issue(1001, "42", t0, 300*time.Second)
	now := t0.Add(time.Second)
	lim := Limits{}.WithDefaults()
	datagram := func(seq uint64) (*Datagram, []byte) {
		raw := signed(t, snapshot("42", 0, 2, seq, false), cred, key)
		d, err := Decode(raw, lim)
		if err != nil {
			t.Fatal(err)
		}
		return d, raw
	}
	var ms macState
	d0, raw0 := datagram(0)
	if vd, _, rerr := v.check(&ms, d0, raw0, now); vd != heldBack {
		t.Fatalf("first datagram: verdict %d %v, want held", vd, rerr)
	}
	var seqs []uint64
	v.resolve(<-v.queue, now, func(r result) {
		if r.err != nil {
			t.Fatalf("held datagram rejected: %v", r.err)
		}
		seqs = append(seqs, r.it.D.Seq)
		if len(seqs) == 1 { // snapshot 1 comes while snapshot 0 is handed on
			d1, raw1 := datagram(1)
			if vd, _, rerr := v.check(&ms, d1, raw1, now); vd != heldBack {
				t.Errorf("datagram during the release: verdict %d %v, want held", vd, rerr)
			}
		}
	})
	if !slices.Equal(seqs, []uint64{0, 1}) {
		t.Errorf("handed on snapshots %v, want [0 1]", seqs)
	}
	d2, raw2 := datagram(2)
	if vd, _, rerr := v.check(&ms, d2, raw2, now); vd != accepted {
		t.Errorf("after the release: verdict %d %v, want accepted", vd, rerr)
	}
}
