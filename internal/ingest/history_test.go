package ingest

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netloom/netloom/internal/ingest/agentpb"
	"github.com/netloom/netloom/internal/store"
)

// TestHistoryNeverChangesOwner: once a finished job has left the live
// view (Linger), another user's run under its id is refused against the
// job's stored history (Options.PastOwner), which stays its owner's; the
// owner's own re-run is a new run as before. (Issue 41, item 3: two
// minutes after a job left the live view another user's signed run made
// it theirs.)
func TestHistoryNeverChangesOwner(t *testing.T) {
	stored := map[string]store.JobSummary{} // what SaveJob saved, by id
	asked := 0
	var storeErr error
	opt := Options{
		SaveJob: func(j *store.Job) { stored[j.ID] = j.JobSummary },
		PastOwner: func(job string) (string, error) {
			asked++
			if storeErr != nil {
				return "", storeErr
			}
			if js, ok := stored[job]; ok {
				return js.Owner(), nil
			}
			return "", nil
		},
	}
	m := NewMetrics(prometheus.NewRegistry())
	tr := NewTracker(opt, m)
	item := func(d *agentpb.Datagram, verified bool, uid uint32, user string, start time.Duration, at time.Time) Item {
		d.StartUnixNs += int64(start)
		d.TimeUnixNs += int64(start)
		if d.Process != nil {
			d.Process.User = user
		}
		return Item{D: FromProto(d), Size: 100, At: at, Verified: verified, UID: uid, User: user}
	}
	// run adds a two-rank run of job 42 whose ranks end at once.
	run := func(verified bool, uid uint32, user string, start time.Duration, at time.Time) error {
		for rank := range 2 {
			if err := tr.AddItem(item(snapshot("42", rank, 2, 0, true), verified, uid, user, start, at)); err != nil {
				return err
			}
		}
		return nil
	}

	now := t0.Add(time.Minute)
	if err := run(true, 1001, "alice", 0, now); err != nil {
		t.Fatal(err)
	}
	if js := stored["42"]; js.User != "alice" || js.State != store.JobFinished {
		t.Fatalf("alice's job saved as %+v", js)
	}
	if asked != 1 {
		t.Errorf("history asked %d times for a new job, want 1", asked)
	}
	// Two minutes after it ended, the job leaves the live view.
	now = now.Add(3 * time.Minute)
	tr.Tick(now)
	if j := tr.Publish(now).Jobs["42"]; j != nil {
		t.Fatalf("job still live: %+v", j.JobSummary)
	}

	// Bob's signed run under the id, started later: refused, history and
	// live view unchanged.
	if err := run(true, 1002, "bob", time.Hour, now); reasonOf(err) != ReasonJobMismatch {
		t.Fatalf("bob's run under alice's job id: %v, want %s", err, ReasonJobMismatch)
	}
	if err := run(true, 1002, "bob", time.Hour, now.Add(time.Second)); reasonOf(err) != ReasonJobMismatch {
		t.Errorf("bob's next datagram: %v, want %s", err, ReasonJobMismatch)
	}
	if asked != 2 {
		t.Errorf("history asked %d times, want 2 (bob's refusal kept)", asked)
	}
	// Unsigned claims: another user's, or none (a datagram naming no user
	// cannot open a named user's history either).
	if err := run(false, 0, "mallory", time.Hour, now); reasonOf(err) != ReasonJobMismatch {
		t.Errorf("mallory's claim: %v", err)
	}
	anon := snapshot("42", 0, 2, 0, false)
	anon.Process = nil
	if err := tr.AddItem(item(anon, false, 0, "", time.Hour, now)); reasonOf(err) != ReasonJobMismatch {
		t.Errorf("a datagram naming no user: %v", err)
	}
	if js := stored["42"]; js.User != "alice" || !js.Start.Equal(t0) {
		t.Errorf("alice's history now %q's, started %v", js.User, js.Start)
	}
	if j := tr.Publish(now).Jobs["42"]; j != nil {
		t.Errorf("refused run shown: %+v", j.JobSummary)
	}
	if got := dropped(m, ReasonJobMismatch); got != 4 {
		t.Errorf("job_mismatch drops %g, want 4", got)
	}

	// A history the store cannot read opens to no one.
	storeErr = errors.New("database is locked")
	if err := run(true, 1003, "carol", 2*time.Hour, now.Add(2*time.Minute)); reasonOf(err) != ReasonJobMismatch {
		t.Errorf("run while the history is unknown: %v", err)
	}
	storeErr = nil

	// Alice's own re-run under the id: a new run, as before.
	now = now.Add(time.Minute)
	if err := run(true, 1001, "alice", 3*time.Hour, now); err != nil {
		t.Fatalf("alice's re-run: %v", err)
	}
	j := tr.Publish(now).Jobs["42"]
	if j == nil || j.User != "alice" || !j.Start.Equal(t0.Add(3*time.Hour)) {
		t.Fatalf("alice's re-run live as %+v", j)
	}
	if js := stored["42"]; js.User != "alice" || !js.Start.Equal(t0.Add(3*time.Hour)) {
		t.Errorf("alice's re-run saved as %q's, started %v", js.User, js.Start)
	}

	// A job id with no history, or one naming no user, is anyone's.
	if err := tr.AddItem(item(snapshot("43", 0, 1, 0, false), true, 1002, "bob", 0, now)); err != nil {
		t.Errorf("bob's new job: %v", err)
	}
	stored["44"] = store.JobSummary{ID: "44", State: store.JobFinished}
	if err := tr.AddItem(item(snapshot("44", 0, 1, 0, false), true, 1002, "bob", 0, now)); err != nil {
		t.Errorf("bob's run under an unowned history: %v", err)
	}
}
