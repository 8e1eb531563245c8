package e2e

// Unauthenticated agent datagrams (issue 33): anyone who can send UDP to
// the daemon can forge them. By default (agent_auth auto) a daemon without
// munged refuses them all, and says so; where an administrator chose
// agent_auth none, a forger still cannot take over another user's rank or
// job, nor fill the live-job table so that real jobs are refused.

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/netloom/netloom/internal/ingest/agentpb"
)

// snap is a one-datagram snapshot of a rank as an agent sends it, claiming
// user: every snapshot of a run has the run's start, a later seq and time,
// and counters that grow.
func snap(t *testing.T, job string, rank, world uint32, seq uint64, start time.Time, user string) []byte {
	t.Helper()
	k := seq + 1
	d := &agentpb.Datagram{Version: 1, JobId: job, Rank: rank, WorldSize: world, Seq: seq, Chunks: 1,
		StartUnixNs: start.UnixNano(), TimeUnixNs: start.Add(time.Duration(k) * 100 * time.Millisecond).UnixNano(),
		IntervalNs: uint64(100 * time.Millisecond),
		Process: &agentpb.Process{Node: fmt.Sprint("n", rank), Host: fmt.Sprint(user, "-n", rank), Pid: 100 + rank, User: user,
			Program: "prog-" + user, WallSeconds: 0.1 * float64(k)},
		Functions: []*agentpb.FunctionStat{{Name: "MPI_Send", Calls: k, BytesSent: 1000 * k}}}
	b, err := proto.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sender is a UDP socket bound to a local address, sending to the agent
// address: each sender is another source address to the daemon.
func sender(t *testing.T, from, to string) *net.UDPConn {
	t.Helper()
	dst, err := net.ResolveUDPAddr("udp", to)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP(from)}, dst)
	if err != nil {
		t.Fatalf("a socket on %s: %v", from, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

type floodJob struct {
	Job struct {
		User, Program string
		Reporting     int
	}
	Processes []struct {
		Rank int
		Seq  uint64
		Host string
		Time time.Time
	}
}

// bearer fetches path from the daemon with an API token, into v when it
// is not nil (JSON), and returns the status and body.
func bearer(t *testing.T, d *daemon, token, path string, v any) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", d.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if v != nil && resp.StatusCode == 200 {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("GET %s: %v in %s", path, err, b)
		}
	}
	return resp.StatusCode, string(b)
}

// TestAgentAuthDefaultRefuses: a daemon started with no agent_auth and no
// munged answering refuses a forged datagram (unauthenticated) and shows
// no job; it says which way it went in /api/v1/status to an
// administrator (not to a user, whose status stays reduced) and, loudly,
// in its log with how to fix it.
func TestAgentAuthDefaultRefuses(t *testing.T) {
	dir := t.TempDir()
	// Accounts in the daemon's working directory, where it looks by
	// default: ops an administrator, bob a user (a token is enough).
	add := exec.Command(netloomBin, "user", "add", "ops", "--admin", "--password-stdin")
	add.Dir, add.Stdin = dir, strings.NewReader("ops-password-for-tests\n")
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("netloom user add: %v\n%s", err, out)
	}
	tokens := map[string]string{}
	for _, u := range []string{"ops", "bob"} {
		tok := exec.Command(netloomBin, "token", "add", u)
		tok.Dir = dir
		out, err := tok.Output()
		if err != nil {
			t.Fatalf("netloom token add %s: %v", u, err)
		}
		tokens[u] = strings.TrimSpace(string(out))
	}
	d, agent := serveBare(t, dir, []string{"NETLOOM_MUNGE_SOCKET=" + filepath.Join(dir, "no-munged.sock")},
		"--fabric", "sim:fat-tree:hosts=8,radix=8", "--db", filepath.Join(dir, "netloom.db"),
		"--agent-listen", "127.0.0.1:0", "--agent-address-file", "-")
	c := sender(t, "127.0.0.1", agent)
	c.Write(snap(t, "forged-1", 0, 1, 0, time.Now().Add(-time.Second), "bob"))
	unauthenticated := regexp.MustCompile(`(?m)^netloom_ingest_datagrams_dropped_total\{reason="unauthenticated"\} 1$`)
	d.waitFor(func() bool {
		code, metrics := bearer(t, d, tokens["ops"], "/metrics", nil)
		return code == 200 && unauthenticated.MatchString(metrics)
	}, "the forged datagram to be refused (unauthenticated)")
	var list struct{ Total int }
	if code, _ := bearer(t, d, tokens["ops"], "/api/v1/jobs?state=all", &list); code != 200 || list.Total != 0 {
		t.Errorf("jobs list: %d, %d jobs from a forged datagram", code, list.Total)
	}
	var st struct {
		AgentAuth *struct{ Mode, Reason string } `json:"agent_auth"`
	}
	if code, _ := bearer(t, d, tokens["ops"], "/api/v1/status", &st); code != 200 || st.AgentAuth == nil || st.AgentAuth.Mode != "refusing" ||
		!strings.Contains(st.AgentAuth.Reason, "munged") || !strings.Contains(st.AgentAuth.Reason, "agent_auth: none") {
		t.Errorf("administrator's status: %d, agent_auth %+v", code, st.AgentAuth)
	}
	if code, body := bearer(t, d, tokens["bob"], "/api/v1/status", nil); code != 200 || strings.Contains(body, "agent_auth") {
		t.Errorf("user's status: %d %s", code, body)
	}
	var warned bool
	for _, l := range strings.Split(d.log.String(), "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, "REFUSING ALL AGENT DATAGRAMS") &&
			strings.Contains(l, "start munged") && strings.Contains(l, "agent_auth: none") {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no warning naming the fixes in the log:\n%s", tailString(d.log.String(), 30))
	}
}

// TestAgentRankNotTakenOver: under agent_auth none, a datagram for a
// running job's rank 0 that claims another user, with a later start (a
// "re-run" that would make the real rank's snapshots stale and move the
// job to its sender), is dropped as job_mismatch: the rank goes on with
// its own snapshots and the job stays its owner's.
func TestAgentRankNotTakenOver(t *testing.T) {
	dir := t.TempDir()
	d, agent := serve(t, dir, nil, "--fabric", "sim:fat-tree:hosts=8,radix=8", "--db", filepath.Join(dir, "netloom.db"),
		"--agent-listen", "127.0.0.1:0", "--agent-address-file", "-", "--job-timeout", "60s")
	owner, forger := sender(t, "127.0.0.1", agent), sender(t, "127.0.0.3", agent)
	job := fmt.Sprint("victim-", time.Now().UnixNano())
	start := time.Now().Add(-10 * time.Second).Truncate(time.Microsecond)
	for r := range uint32(2) {
		owner.Write(snap(t, job, r, 2, 0, start, "alice"))
	}
	var j floodJob
	d.waitFor(func() bool { return d.get("/api/v1/jobs/"+job, &j) == 200 && j.Job.Reporting == 2 }, "the job; drops:\n"+d.dropped())

	forger.Write(snap(t, job, 0, 2, 0, start.Add(5*time.Second), "mallory"))
	d.waitFor(func() bool { return d.dropCount("job_mismatch") == 1 }, "the forged re-run to be dropped; drops:\n"+d.dropped())
	owner.Write(snap(t, job, 0, 2, 1, start, "alice"))
	d.waitFor(func() bool {
		return d.get("/api/v1/jobs/"+job, &j) == 200 && len(j.Processes) == 2 && j.Processes[0].Seq == 1
	}, "the real rank's next snapshot; drops:\n"+d.dropped())
	p := j.Processes[0]
	if j.Job.User != "alice" || j.Job.Program != "prog-alice" || p.Host != "alice-n0" || !p.Time.Equal(start.Add(200*time.Millisecond)) {
		t.Errorf("after the forgery: job %+v, rank 0 %+v", j.Job, p)
	}
	if n := d.dropCount("stale"); n != 0 {
		t.Errorf("%g of the real rank's snapshots dropped as stale", n)
	}
}

// TestAgentFloodBounded: under agent_auth none, one sender's 10,000
// datagrams of random job ids and users in a second start at most its
// burst of new jobs (the rest new_job_rate), so that real jobs reporting
// from another address are accepted: one running throughout, one new
// after the flood; the live table stays small and the daemon's memory
// bounded. Before the limits the flood started 9,963 jobs, a new real job
// was refused (too_many_jobs) for minutes and the daemon grew by 130 MB.
func TestAgentFloodBounded(t *testing.T) {
	dir := t.TempDir()
	d, agent := serve(t, dir, nil, "--fabric", "sim:fat-tree:hosts=8,radix=8", "--db", filepath.Join(dir, "netloom.db"),
		"--agent-listen", "127.0.0.1:0", "--agent-address-file", "-", "--job-timeout", "60s")
	flood, good := sender(t, "127.0.0.1", agent), sender(t, "127.0.0.2", agent)
	time.Sleep(2 * time.Second) // past the start's allocations
	before := int64(procStatusKB(t, d.cmd.Process.Pid, "VmRSS")) << 10

	// Job "running" reports before, during and after the flood; ten "new"
	// jobs start after it, as real jobs whose first datagrams come while
	// the flood's jobs are still live (they were for 2.5 minutes). Ten, so
	// that some go to each aggregator: a flood that filled the table
	// filled some aggregators' shares and left a little room in others.
	running := fmt.Sprint("running-", time.Now().UnixNano())
	start := time.Now().Add(-time.Second).Truncate(time.Microsecond)
	seq := uint64(0)
	report := func(job string, seq uint64) {
		for r := range uint32(2) {
			good.Write(snap(t, job, r, 2, seq, start, "alice"))
		}
	}
	reported := func(job string, seq uint64) {
		t.Helper()
		var j floodJob
		d.waitFor(func() bool {
			return d.get("/api/v1/jobs/"+job, &j) == 200 && len(j.Processes) == 2 && j.Processes[0].Seq == seq && j.Processes[1].Seq == seq
		}, fmt.Sprintf("job %s's snapshots %d; drops:\n%s", job, seq, d.dropped()))
	}
	report(running, seq)
	reported(running, seq)
	const n = 10000
	rng := rand.New(rand.NewPCG(1, 2))
	began := time.Now()
	for i := range n {
		flood.Write(snap(t, fmt.Sprintf("fake-%016x", rng.Uint64()), 0, 1, 0, start, fmt.Sprintf("user%d", rng.IntN(100))))
		if i%100 == 99 { // 10,000 in about a second
			time.Sleep(10 * time.Millisecond)
		}
		if i%1000 == 999 {
			seq++
			report(running, seq)
		}
	}
	t.Logf("%d datagrams in %s", n, time.Since(began).Round(time.Millisecond))
	d.waitFor(func() bool { return d.metric("netloom_ingest_datagrams_received_total", "") >= 2+n+2*float64(seq) }, "the flood to be read")
	seq++
	report(running, seq)
	reported(running, seq)
	var fresh []string
	for i := range 10 {
		fresh = append(fresh, fmt.Sprint("new-", i, "-", time.Now().UnixNano()))
	}
	for k := range uint64(3) {
		for _, job := range fresh {
			report(job, k)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, job := range fresh {
		reported(job, 2)
	}
	elapsed := time.Since(began).Seconds()
	time.Sleep(time.Second) // the live view and the store writes settle

	var list struct{ Total int }
	if d.get("/api/v1/jobs?state=all", &list) != 200 {
		t.Fatal("jobs list")
	}
	limited, refused := d.dropCount("new_job_rate"), d.dropCount("too_many_jobs")
	// The default burst of 200 and 10 a second, the real jobs besides.
	if bound := 200 + 10*elapsed + 11; float64(list.Total) > bound || limited < n-float64(list.Total) || refused != 0 {
		t.Errorf("%d live jobs (at most %.0f) after %.1f s, %g new_job_rate, %g too_many_jobs; drops:\n%s",
			list.Total, bound, elapsed, limited, refused, d.dropped())
	}
	after := int64(procStatusKB(t, d.cmd.Process.Pid, "VmRSS")) << 10
	t.Logf("RSS %d MB -> %d MB; %d live jobs, %g new_job_rate", before>>20, after>>20, list.Total, limited)
	if after-before > 50<<20 {
		t.Errorf("the daemon's RSS grew by %d MB (from %d MB), want under 50 MB", (after-before)>>20, before>>20)
	}
}
