package ingest

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/ingest/agentpb"
	"github.com/netloom/netloom/internal/store"
)

// addFrom adds d as a Listener would hand it on, from address from.
func addFrom(t *testing.T, tr *Tracker, d *agentpb.Datagram, from string, now time.Time) error {
	t.Helper()
	b := encode(t, d)
	dd, err := Decode(b, tr.Limits())
	if err != nil {
		return err
	}
	var a netip.Addr
	if from != "" {
		a = netip.MustParseAddr(from)
	}
	dd.from = a
	return tr.AddItem(Item{D: dd, Size: len(b), At: now})
}

// claiming is d with its process's user set to user.
func claiming(d *agentpb.Datagram, user string) *agentpb.Datagram {
	d.Process.User = user
	return d
}

// TestRankNotTakenOver: without authentication, a datagram claiming
// another user than a job's owner is dropped (job_mismatch) whatever it
// says, a later start included: the rank keeps its own snapshots and the
// job its owner. The owner's own re-run (a later start) is accepted.
func TestRankNotTakenOver(t *testing.T) {
	tr, sk, m, _ := newTracker(Options{Linger: time.Minute, JobTimeout: 10 * time.Second})
	now := t0
	for r := range 2 {
		if err := add(t, tr, snapshot("7", r, 2, 0, false), now); err != nil {
			t.Fatal(err)
		}
	}
	later := func(d *agentpb.Datagram, by time.Duration) *agentpb.Datagram {
		d.StartUnixNs += int64(by)
		d.TimeUnixNs += int64(by)
		return d
	}
	for i, d := range []*agentpb.Datagram{
		claiming(later(snapshot("7", 0, 2, 0, false), time.Minute), "mallory"), // rank 0 "restarted" by another user
		claiming(snapshot("7", 0, 2, 1, false), "mallory"),                     // the next snapshot of the same run
		claiming(snapshot("7", 1, 2, 5, true), "mallory"),                      // a final report for the job
	} {
		if err := add(t, tr, d, now); reasonOf(err) != ReasonJobMismatch {
			t.Errorf("forgery %d: %v, want %s", i, err, ReasonJobMismatch)
		}
	}
	if got := dropped(m, ReasonJobMismatch); got != 3 {
		t.Errorf("job_mismatch = %g, want 3", got)
	}
	// The real rank 0 goes on: nothing of it was replaced.
	if err := add(t, tr, snapshot("7", 0, 2, 1, false), now); err != nil {
		t.Fatalf("the real rank's next snapshot: %v", err)
	}
	j := tr.Publish(now).Jobs["7"].Full()
	if j.User != "alice" || j.State != store.JobRunning || j.Processes[0].User != "alice" || j.Processes[0].Seq != 1 ||
		!j.Processes[0].Start.Equal(t0) {
		t.Errorf("job after forgeries: user %q state %s rank 0 %+v", j.User, j.State, j.Processes[0])
	}
	// A datagram naming no user (a later chunk) is no claim.
	noUser := snapshot("7", 1, 2, 1, false)
	noUser.Process.User = ""
	if err := add(t, tr, noUser, now); err != nil {
		t.Errorf("datagram naming no user: %v", err)
	}
	// The owner's re-run of rank 0 under the same id.
	if err := add(t, tr, later(snapshot("7", 0, 2, 0, false), time.Minute), now); err != nil {
		t.Errorf("owner's re-run: %v", err)
	}
	// Finished and still shown, the job is not replaced by another user's
	// launch under its id either; after the linger it is gone, and a new
	// job may use the id.
	now = now.Add(31 * time.Second) // 6 intervals of 5 s
	tr.Tick(now)
	if err := add(t, tr, claiming(later(snapshot("7", 0, 2, 0, false), time.Hour), "mallory"), now); reasonOf(err) != ReasonJobMismatch {
		t.Errorf("another user's launch of a finished job's id: %v", err)
	}
	for _, s := range sk.saved {
		if s.User != "alice" {
			t.Errorf("job saved as %q's", s.User)
		}
	}
	now = now.Add(2 * time.Minute)
	tr.Tick(now)
	if err := add(t, tr, claiming(later(snapshot("7", 0, 2, 0, false), time.Hour), "bob"), now); err != nil {
		t.Errorf("a new job under an id gone from the live view: %v", err)
	}
}

// TestOwnerFromLaterChunk: a job whose first datagram names no user (a
// snapshot's chunk 0 came after another) gets its owner from the first
// that does, and is counted for that user from then on.
func TestOwnerFromLaterChunk(t *testing.T) {
	adm := NewAdmission(AdmitOptions{MaxJobsPerUser: 5})
	tr, _, _, _ := newTracker(Options{Admit: adm})
	parts := split(snapshot("c", 0, 4, 0, false), 1)
	for i := len(parts) - 1; i >= 0; i-- {
		if i == 0 && adm.UserJobs("") != 1 {
			t.Errorf("before chunk 0: %d jobs of no user, want 1", adm.UserJobs(""))
		}
		if err := add(t, tr, parts[i], t0); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
	}
	if adm.UserJobs("") != 0 || adm.UserJobs("alice") != 1 {
		t.Errorf("after chunk 0: %d jobs of no user, %d of alice", adm.UserJobs(""), adm.UserJobs("alice"))
	}
	if err := add(t, tr, claiming(snapshot("c", 1, 4, 0, false), "bob"), t0); reasonOf(err) != ReasonJobMismatch {
		t.Errorf("bob's rank in alice's job: %v", err)
	}
	if u := tr.Publish(t0).Jobs["c"].User; u != "alice" {
		t.Errorf("job user %q", u)
	}
}

// TestNewJobRatePerSource: a sender that starts jobs faster than its
// bucket allows is refused new jobs (new_job_rate) while other senders,
// and its own jobs already live, are not; its bucket refills with time.
func TestNewJobRatePerSource(t *testing.T) {
	tr, _, m, _ := newTracker(Options{Admit: NewAdmission(AdmitOptions{SourceRate: 10, SourceBurst: 5})})
	now := t0
	for i := range 5 {
		if err := addFrom(t, tr, snapshot(fmt.Sprint("a", i), 0, 2, 0, false), "10.0.0.1", now); err != nil {
			t.Fatalf("job %d of the burst: %v", i, err)
		}
	}
	if err := addFrom(t, tr, snapshot("a5", 0, 2, 0, false), "10.0.0.1", now); reasonOf(err) != ReasonNewJobRate {
		t.Errorf("job past the burst: %v", err)
	}
	if err := addFrom(t, tr, snapshot("b0", 0, 2, 0, false), "10.0.0.2", now); err != nil {
		t.Errorf("another sender's job: %v", err)
	}
	if err := addFrom(t, tr, snapshot("a0", 1, 2, 0, false), "10.0.0.1", now); err != nil {
		t.Errorf("a live job's next rank: %v", err)
	}
	if err := addFrom(t, tr, snapshot("x", 0, 2, 0, false), "", now); err != nil {
		t.Errorf("a datagram from no socket (offline report): %v", err)
	}
	now = now.Add(110 * time.Millisecond) // one token
	if err := addFrom(t, tr, snapshot("a5", 0, 2, 0, false), "10.0.0.1", now); err != nil {
		t.Errorf("after a token came back: %v", err)
	}
	if err := addFrom(t, tr, snapshot("a6", 0, 2, 0, false), "10.0.0.1", now); reasonOf(err) != ReasonNewJobRate {
		t.Errorf("the next at once: %v", err)
	}
	if got := dropped(m, ReasonNewJobRate); got != 2 {
		t.Errorf("new_job_rate = %g, want 2", got)
	}
}

// TestUserJobsCapped: one user's live jobs are bounded across all the
// trackers sharing an Admission; a job leaving the live view frees room.
func TestUserJobsCapped(t *testing.T) {
	adm := NewAdmission(AdmitOptions{MaxJobsPerUser: 3})
	opt := Options{Admit: adm, JobTimeout: 10 * time.Second, Linger: time.Minute}
	tr1, _, _, _ := newTracker(opt)
	tr2, _, m, _ := newTracker(opt)
	now := t0
	for i, tr := range []*Tracker{tr1, tr2, tr1} {
		if err := add(t, tr, snapshot(fmt.Sprint("u", i), 0, 2, 0, false), now); err != nil {
			t.Fatalf("alice's job %d: %v", i, err)
		}
	}
	if err := add(t, tr2, snapshot("u3", 0, 2, 0, false), now); reasonOf(err) != ReasonUserJobs {
		t.Errorf("alice's fourth job: %v", err)
	}
	if err := add(t, tr2, claiming(snapshot("v0", 0, 2, 0, false), "bob"), now); err != nil {
		t.Errorf("bob's job: %v", err)
	}
	if got := dropped(m, ReasonUserJobs); got != 1 {
		t.Errorf("too_many_user_jobs = %g, want 1", got)
	}
	// u1 times out, then leaves the live view after the linger.
	now = now.Add(11 * time.Second)
	tr2.Tick(now)
	if err := add(t, tr2, snapshot("u3", 0, 2, 0, false), now); reasonOf(err) != ReasonUserJobs {
		t.Errorf("a finished job still shown counts: %v", err)
	}
	now = now.Add(2 * time.Minute)
	tr2.Tick(now)
	if err := add(t, tr2, snapshot("u3", 0, 2, 0, false), now); err != nil {
		t.Errorf("alice's job once one left: %v", err)
	}
	if adm.UserJobs("alice") != 3 || adm.UserJobs("bob") != 0 {
		t.Errorf("counted: alice %d bob %d, want 3 and 0 (bob's job timed out and left)", adm.UserJobs("alice"), adm.UserJobs("bob"))
	}
}

// TestAdmissionSourcesBounded: a flood from ever new (spoofed) addresses
// keeps at most MaxSources buckets; the others share one, which refuses
// once empty; full buckets are forgotten.
func TestAdmissionSourcesBounded(t *testing.T) {
	a := NewAdmission(AdmitOptions{SourceRate: 1, SourceBurst: 2, MaxSources: 4})
	now := t0
	refused := 0
	for i := range 100 {
		if a.admit("j", netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), "u", now) != nil {
			refused++
		}
	}
	if len(a.sources) != 4 || refused != 100-4-2 {
		t.Errorf("%d buckets, %d refused; want 4 and %d", len(a.sources), refused, 100-4-2)
	}
	now = now.Add(time.Minute)
	if a.admit("j", netip.MustParseAddr("10.9.9.9"), "u", now) != nil || len(a.sources) != 1 {
		t.Errorf("full buckets not forgotten: %d left", len(a.sources))
	}
}

// TestListenerRefuses: with AuthOptions.Refuse (agent_auth auto without
// munged) nothing is queued: datagrams without a credential are dropped as
// unauthenticated, those with one as munge_unavailable. Without it, items
// carry their source address.
func TestListenerRefuses(t *testing.T) {
	m := NewMetrics(nil)
	l, conn, stop := runListener(t, ListenOptions{Auth: AuthOptions{Refuse: "no munged"}}, m)
	items := queued(l)
	signed := snapshot("s", 0, 2, 0, false)
	signed.Credential = []byte("MUNGE:AAAA:")
	conn.Write(encode(t, snapshot("r", 0, 2, 0, false)))
	conn.Write(encode(t, signed))
	deadline := time.Now().Add(5 * time.Second)
	for dropped(m, ReasonUnauthenticated)+dropped(m, ReasonMungeUnavailable) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if dropped(m, ReasonUnauthenticated) != 1 || dropped(m, ReasonMungeUnavailable) != 1 {
		t.Errorf("unauthenticated %g, munge_unavailable %g; want 1 each", dropped(m, ReasonUnauthenticated), dropped(m, ReasonMungeUnavailable))
	}
	stop()
	for it := range items {
		t.Errorf("queued job %s", it.D.JobId)
	}

	l, conn, stop = runListener(t, ListenOptions{}, NewMetrics(nil))
	items = queued(l)
	conn.Write(encode(t, snapshot("r", 0, 2, 0, false)))
	select {
	case it := <-items:
		if it.D.from != netip.MustParseAddr("127.0.0.1") {
			t.Errorf("item from %v", it.D.from)
		}
	case <-time.After(5 * time.Second):
		t.Error("nothing queued")
	}
	stop()
}
