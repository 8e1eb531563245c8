package e2e

// A finished job's id reused by another user (issue 41, item 3): two real
// local users' signed Open MPI runs under one job id, against a daemon with
// accounts and a real munged.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/ingest"
	slurmtest "github.com/netloom/netloom/test/slurm"
)

// TestAgentJobIDNeverChangesOwner: user A's job J finishes and, two
// minutes later, leaves the live view; user B's signed run under J is then
// refused (job_mismatch), A's history of J stays A's (in A's list, the
// administrator sees it as A's, B gets 404), and A's own re-run under J is
// a new run of A's job, as before.
func TestAgentJobIDNeverChangesOwner(t *testing.T) {
	if m := slurmtest.MungeMissing(); m != "" {
		t.Skip(m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const userA, userB = "nltest-a", "nltest-b"
	m, _ := localUsers(t, ctx, userA, userB)
	mu, err := slurmtest.StartMunge(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mu.Stop)

	dir := t.TempDir()
	pw := map[string]string{"root-admin": "admin-pass-1", userA: "a-pass-123", userB: "b-pass-123"}
	cfg := addAccounts(t, dir, pw, "")
	d, agent := serve(t, dir, []string{"NETLOOM_MUNGE_SOCKET=" + mu.Socket}, "--config", cfg, "--anonymous", "none",
		"--fabric", "sim:fat-tree:hosts=8,radix=8", "--db", filepath.Join(dir, "netloom.db"),
		"--agent-listen", "127.0.0.1:0", "--agent-address-file", "-", "--agent-auth", "munge", "--job-timeout", "10s")
	admin, a, b := newClient(t, d.base, "admin"), newClient(t, d.base, userA), newClient(t, d.base, userB)
	admin.login("root-admin", pw["root-admin"])
	a.login(userA, pw[userA])
	b.login(userB, pw[userB])

	share, prog := ringForAll(t, m)
	job := fmt.Sprintf("reused-%d", time.Now().UnixNano())
	// run runs 2 ranks of the ring as user under the agent, job id job,
	// signing with MUNGE (only the daemon's uid may decode).
	run := func(user string) {
		t.Helper()
		env := []string{"LD_PRELOAD=" + m.lib, "NETLOOM_DAEMON=" + agent, "NETLOOM_INTERVAL=0.2", "NETLOOM_JOB_ID=" + job,
			"NETLOOM_MUNGE_SOCKET=" + mu.Socket, "NETLOOM_MUNGE_UID=" + strconv.Itoa(os.Getuid())}
		args := append([]string{"runuser", "-u", user, "--", "env", "HOME=/tmp"}, env...)
		args = append(args, m.launcher, "--oversubscribe", "-np", "2")
		for _, kv := range env {
			k, _, _ := strings.Cut(kv, "=")
			args = append(args, "-x", k)
		}
		args = append(args, prog, "5")
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = share
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("job %s as %s: %v\n%s", job, user, err, out)
		}
	}
	type summary struct {
		User      string
		State     string
		Start     time.Time
		Finalized int
	}
	jobOf := func(c *apiClient) (int, summary) {
		var v struct{ Job summary }
		code := c.get("/api/v1/jobs/"+job, &v)
		return code, v.Job
	}
	listed := func(c *apiClient) map[string]string {
		var l struct{ Jobs []struct{ ID, User string } }
		if code := c.get("/api/v1/jobs?limit=1000", &l); code != 200 {
			t.Fatalf("%s's job list: HTTP %d", c.name, code)
		}
		out := map[string]string{}
		for _, j := range l.Jobs {
			out[j.ID] = j.User
		}
		return out
	}
	finished := func(what string, after time.Time) summary {
		t.Helper()
		var s summary
		d.waitFor(func() bool {
			code, got := jobOf(admin)
			s = got
			return code == 200 && got.State == "finished" && got.Finalized == 2 && got.Start.After(after)
		}, what+"; drops:\n"+d.dropped())
		return s
	}
	mismatches := func() float64 {
		_, body := admin.do("GET", "/metrics", nil)
		for _, l := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(l, `netloom_ingest_datagrams_dropped_total{reason="`+ingest.ReasonJobMismatch+`"} `); ok {
				f, _ := strconv.ParseFloat(v, 64)
				return f
			}
		}
		t.Fatal("no job_mismatch count in /metrics")
		return 0
	}
	// whose checks that the job is A's to everyone, started at start.
	whose := func(when string, start time.Time) {
		t.Helper()
		if code, s := jobOf(admin); code != 200 || s.User != userA || !s.Start.Equal(start) {
			t.Errorf("%s: the administrator sees job %s as %q's, started %v (HTTP %d); want %s's, started %v", when, job, s.User, s.Start, code, userA, start)
		}
		if code, s := jobOf(a); code != 200 || s.User != userA {
			t.Errorf("%s: %s's own job %s: HTTP %d, user %q", when, userA, job, code, s.User)
		}
		if code, _ := jobOf(b); code != 404 {
			t.Errorf("%s: %s's GET of %s's job: HTTP %d, want 404", when, userB, userA, code)
		}
		if u, ok := listed(a)[job]; !ok || u != userA {
			t.Errorf("%s: job %s not in %s's list (%q)", when, job, userA, u)
		}
		if _, ok := listed(b)[job]; ok {
			t.Errorf("%s: job %s in %s's list", when, job, userB)
		}
	}

	began := time.Now().Add(-time.Minute)
	run(userA)
	first := finished("A's job to finish", began)
	whose("A's job finished", first.Start)
	before := mismatches()

	// Two minutes after it ended the job leaves the live view (the
	// tracker's linger); its history stays in the store.
	time.Sleep(2*time.Minute + 5*time.Second)
	run(userB)
	// B's datagrams were all sent when its run ended; the daemon has
	// taken them a moment later.
	for deadline := time.Now().Add(10 * time.Second); mismatches() <= before && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(time.Second)
	whose("after B's run under the id", first.Start)
	if mismatches() <= before {
		t.Errorf("B's datagrams under A's job id were not dropped as %s", ingest.ReasonJobMismatch)
	}
	if code, s := jobOf(admin); code == 200 && s.Start.After(first.Start) {
		t.Errorf("B's run became job %s: %+v", job, s)
	}

	// A's own re-run under the id: a new run of A's job, as before.
	run(userA)
	again := finished("A's re-run to finish", first.Start)
	whose("after A's re-run", again.Start)
	if got := listed(admin)[job]; got != userA {
		t.Errorf("the administrator's list: job %s is %q's", job, got)
	}
	t.Logf("job %s: A's run started %v, A's re-run %v; %g of B's datagrams refused", job, first.Start, again.Start, mismatches()-before)
}

// localUsers skips the test unless it can run Open MPI jobs as other local
// users (as root, with runuser), builds the agent and makes the users; it
// returns Open MPI and the users' uids.
func localUsers(t *testing.T, ctx context.Context, users ...string) (jobMPI, map[string]int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: jobs run as other local users")
	}
	m := jobMPIs(t)[0] // Open MPI
	for _, tool := range []string{m.cc, m.launcher, "runuser"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	buildAgent(t)
	uids := map[string]int{}
	for _, u := range users {
		uid, err := slurmtest.EnsureUser(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		uids[u] = int(uid)
	}
	return m, uids
}

// ringForAll compiles authRing with m into a folder every user can read.
func ringForAll(t *testing.T, m jobMPI) (share, prog string) {
	t.Helper()
	share, err := os.MkdirTemp("", "netloom-ring-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(share) })
	os.Chmod(share, 0o755)
	src, prog := filepath.Join(share, "ring.c"), filepath.Join(share, "ring")
	os.WriteFile(src, []byte(authRing), 0o644)
	if out, err := exec.Command(m.cc, "-o", prog, src).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", m.cc, err, out)
	}
	return share, prog
}
