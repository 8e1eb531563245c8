package e2e

// Authenticated agent data (docs/agent-auth.md) against a real munged:
// real Open MPI jobs of two local users report through a UDP relay that
// keeps copies, while forged, replayed and oversized datagrams go straight
// to `netloom serve --agent-auth munge` and are each dropped and counted.

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/netloom/netloom/internal/ingest"
	"github.com/netloom/netloom/internal/ingest/agentpb"
	slurmtest "github.com/netloom/netloom/test/slurm"
)

// authRing is a ring of `rounds` (argv[1]) 1000-byte Sendrecvs, 100 ms
// apart.
const authRing = `#include <mpi.h>
#include <stdlib.h>
#include <time.h>
int main(int argc, char **argv)
{
	int rank, n, rounds = argc > 1 ? atoi(argv[1]) : 10;
	static char buf[1000], rbuf[1000];
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	for (int i = 0; i < rounds; i++) {
		MPI_Sendrecv(buf, 1000, MPI_BYTE, (rank + 1) % n, 1, rbuf, 1000, MPI_BYTE, (rank + n - 1) % n, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		struct timespec ts = {0, 100 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	MPI_Finalize();
	return 0;
}
`

// relay forwards UDP datagrams to the daemon and keeps a copy of each.
type relay struct {
	conn *net.UDPConn
	mu   sync.Mutex
	got  [][]byte
}

func startRelay(t *testing.T, to string) *relay {
	t.Helper()
	dst, err := net.ResolveUDPAddr("udp", to)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	out, err := net.DialUDP("udp", nil, dst)
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{conn: conn}
	go func() {
		buf := make([]byte, 1<<16)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			b := bytes.Clone(buf[:n])
			r.mu.Lock()
			r.got = append(r.got, b)
			r.mu.Unlock()
			out.Write(b)
		}
	}()
	t.Cleanup(func() { conn.Close(); out.Close() })
	return r
}

func (r *relay) addr() string { return r.conn.LocalAddr().String() }

// captured returns the relayed datagrams of job so far, decoded.
func (r *relay) captured(job string) (raws [][]byte, ds []*agentpb.Datagram) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.got {
		d := &agentpb.Datagram{}
		if proto.Unmarshal(b, d) == nil && d.JobId == job {
			raws, ds = append(raws, b), append(ds, d)
		}
	}
	return raws, ds
}

// metric reads one sample of the daemon's /metrics ("" labels: none).
func (d *daemon) metric(name, labels string) float64 {
	d.t.Helper()
	resp, err := http.Get(d.base + "/metrics")
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	key := name
	if labels != "" {
		key += "{" + labels + "}"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

func (d *daemon) dropCount(reason string) float64 {
	return d.metric("netloom_ingest_datagrams_dropped_total", `reason="`+reason+`"`)
}

// mungeAs makes a credential holding payload as a local user ("" for this
// process) with munge(1).
func mungeAs(t *testing.T, socket, as string, payload []byte) []byte {
	t.Helper()
	args := []string{"munge", "--socket", socket}
	if as != "" {
		args = append([]string{"runuser", "-u", as, "--"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin = bytes.NewReader(payload)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	return bytes.TrimSpace(out)
}

// forge builds a datagram of job claiming user, with cred and signed with
// key (no signature when key is nil).
func forge(t *testing.T, job, claimed string, seq uint64, cred, key []byte) []byte {
	t.Helper()
	now := time.Now()
	d := &agentpb.Datagram{Version: 1, JobId: job, Rank: 0, WorldSize: 1, Seq: seq, Chunks: 1,
		TimeUnixNs: now.UnixNano(), StartUnixNs: now.Add(-time.Second).UnixNano(), IntervalNs: uint64(200 * time.Millisecond),
		Process:    &agentpb.Process{Node: "forged", Host: "forged", Pid: 1, User: claimed, Program: "forged"},
		Functions:  []*agentpb.FunctionStat{{Name: "MPI_Send", Calls: 1e6, BytesSent: 1 << 40}},
		Credential: cred}
	b, err := proto.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if key != nil {
		b = ingest.Sign(b, key)
	}
	return b
}

type authJob struct {
	Job struct {
		State     string
		User      string
		Ranks     int
		Finalized int
	}
	Processes []struct{ Rank int }
}

func TestAgentAuthMunge(t *testing.T) {
	if m := slurmtest.MungeMissing(); m != "" {
		t.Skip(m)
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: a job runs as a second local user")
	}
	m := jobMPIs(t)[0] // Open MPI
	for _, tool := range []string{m.cc, m.launcher, "munge", "runuser"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	buildAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const userB = "nltest-b"
	uidB, err := slurmtest.EnsureUser(ctx, userB)
	if err != nil {
		t.Fatal(err)
	}
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	mu, err := slurmtest.StartMunge(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mu.Stop)
	mungeEnv := []string{"NETLOOM_MUNGE_SOCKET=" + mu.Socket}

	dir := t.TempDir()
	d, agent := serve(t, dir, mungeEnv, "--fabric", "sim:fat-tree:hosts=8,radix=8", "--db", filepath.Join(dir, "netloom.db"),
		"--agent-listen", "127.0.0.1:0", "--agent-address-file", "-", "--job-timeout", "10s",
		"--agent-auth", "munge", "--anonymous", "admin")
	d = d.in(t)
	rl := startRelay(t, agent)

	// A directory every user can read, for the program.
	share, prog := ringForAll(t, m)

	// runJob runs 2 ranks of the ring under the agent as user ("" for
	// this process), through the relay, and returns its output.
	agentEnv := func(job string, extra ...string) []string {
		return append([]string{"LD_PRELOAD=" + m.lib, "NETLOOM_DAEMON=" + rl.addr(), "NETLOOM_INTERVAL=0.2", "NETLOOM_JOB_ID=" + job,
			"NETLOOM_MUNGE_SOCKET=" + mu.Socket, "NETLOOM_MUNGE_REFRESH=0.5", "NETLOOM_DEBUG=1",
			"NETLOOM_MUNGE_UID=" + strconv.Itoa(os.Getuid())}, extra...) // only the daemon's uid may decode
	}
	runJob := func(as, job string, rounds int, extra ...string) (string, error) {
		env := agentEnv(job, extra...)
		launch := []string{m.launcher, "--oversubscribe", "-np", "2"}
		if as == "" {
			launch = append(launch, "--allow-run-as-root")
		}
		for _, kv := range env {
			k, _, _ := strings.Cut(kv, "=")
			launch = append(launch, "-x", k)
		}
		launch = append(launch, prog, strconv.Itoa(rounds))
		args := []string{"env"}
		if as != "" {
			args = []string{"runuser", "-u", as, "--", "env", "HOME=/tmp"}
		}
		args = append(append(args, env...), launch...)
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = share
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	waitJob := func(job string, v *authJob) {
		t.Helper()
		d.waitFor(func() bool {
			return d.get("/api/v1/jobs/"+job, v) == 200 && v.Job.State == "finished" && v.Job.Finalized == 2
		}, "job "+job+" to finish with both ranks; drops:\n"+d.dropped())
	}

	// Job A, this process's user, runs while forgeries arrive.
	jobA := fmt.Sprintf("auth-a-%d", time.Now().UnixNano())
	doneA := make(chan string, 1)
	go func() {
		out, err := runJob("", jobA, 25, "NETLOOM_DGRAM_LIMIT=256") // chunked snapshots, each chunk signed
		if err != nil {
			out = fmt.Sprintf("%v\n%s", err, out)
		} else {
			out = ""
		}
		doneA <- out
	}()
	var raws [][]byte
	var captured []*agentpb.Datagram
	chunked := func() bool { // a snapshot with peer rows (not a rank's start report, one chunk)
		for _, c := range captured {
			if c.Chunks > 1 {
				return true
			}
		}
		return false
	}
	d.waitFor(func() bool {
		raws, captured = rl.captured(jobA)
		return len(raws) >= 2 && chunked()
	}, "job A's first chunked datagrams at the relay")
	for i, c := range captured {
		if len(c.Credential) == 0 || len(c.Mac) != 32 {
			t.Fatalf("job A datagram %d: credential of %d bytes, mac of %d (%d chunks): the agent did not sign", i,
				len(c.Credential), len(c.Mac), c.Chunks)
		}
	}

	// A captured credential is of no use to another user: only the
	// daemon's uid may decode it (and learn the session key).
	unmunge := exec.Command("runuser", "-u", userB, "--", "unmunge", "--socket", mu.Socket)
	unmunge.Stdin = bytes.NewReader(captured[0].Credential)
	if out, err := unmunge.CombinedOutput(); err == nil || !strings.Contains(string(out), "Unauthorized") {
		t.Errorf("user %s decoded job A's credential: %v\n%s", userB, err, out)
	}

	// Forgeries, straight to the daemon.
	conn, err := net.Dial("udp", agent)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	before := map[string]float64{}
	reasons := []string{ingest.ReasonUnauthenticated, ingest.ReasonBadMAC, ingest.ReasonUserMismatch, ingest.ReasonJobMismatch,
		ingest.ReasonReplayed, ingest.ReasonOversized, ingest.ReasonBadCredential}
	for _, r := range reasons {
		before[r] = d.dropCount(r)
	}
	key := func() []byte { k := make([]byte, ingest.SessionKeyLen); rand.Read(k); return k }
	send := func(b []byte) {
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	// 1. no credential
	send(forge(t, jobA, me.Username, 1000, nil, nil))
	// 2. a captured datagram changed after signing (its mac no longer fits)
	tampered := bytes.Clone(raws[len(raws)-1])
	tampered[len(tampered)-1] ^= 0xff
	send(tampered)
	// 3. user B's real credential, claiming to be user A
	kB := key()
	credB := mungeAs(t, mu.Socket, userB, ingest.CredentialPayload(kB, "auth-forged-y"))
	send(forge(t, "auth-forged-y", me.Username, 0, credB, kB))
	// 4. user B's credential for job X, used for job Y
	kX := key()
	credX := mungeAs(t, mu.Socket, userB, ingest.CredentialPayload(kX, "auth-forged-x"))
	send(forge(t, "auth-forged-y", userB, 0, credX, kX))
	// 5. a replay of a captured valid datagram
	send(raws[0])
	// 6. an oversized credential
	send(forge(t, jobA, me.Username, 1001, bytes.Repeat([]byte("A"), 5000), key()))
	// 7. a credential munged never made
	fake := bytes.Clone(credB)
	fake[len(fake)/2] ^= 0x01
	send(forge(t, "auth-forged-z", userB, 0, fake, kB))

	want := map[string]float64{ingest.ReasonUnauthenticated: 1, ingest.ReasonBadMAC: 1, ingest.ReasonUserMismatch: 1,
		ingest.ReasonJobMismatch: 1, ingest.ReasonReplayed: 1, ingest.ReasonOversized: 1, ingest.ReasonBadCredential: 1}
	d.waitFor(func() bool {
		for _, r := range reasons {
			if d.dropCount(r)-before[r] < want[r] {
				return false
			}
		}
		return true
	}, "every forgery dropped and counted; drops now:\n"+d.dropped())

	if out := <-doneA; out != "" {
		t.Fatalf("job A: %s", out)
	}
	var a authJob
	waitJob(jobA, &a)
	if a.Job.User != me.Username || a.Job.Ranks != 2 || len(a.Processes) != 2 {
		t.Errorf("job A: %+v", a)
	}
	var mx struct{ Matrix [][]uint64 }
	if d.get("/api/v1/jobs/"+jobA+"/matrix?level=rank&class=p2p&metric=bytes", &mx) != 200 || fmt.Sprint(mx.Matrix) != "[[0 25000] [25000 0]]" {
		t.Errorf("job A's p2p matrix %v: its data did not all arrive; drops:\n%s", mx.Matrix, d.dropped())
	}
	for _, job := range []string{"auth-forged-x", "auth-forged-y", "auth-forged-z"} {
		if code := d.get("/api/v1/jobs/"+job, nil); code != 404 {
			t.Errorf("forged job %s: HTTP %d, want 404", job, code)
		}
	}
	// The credentials rotated (NETLOOM_MUNGE_REFRESH=0.5 over 2.5 s), each
	// decoded once.
	_, all := rl.captured(jobA)
	creds := map[string]bool{}
	for _, c := range all {
		creds[string(c.Credential)] = true
	}
	if len(creds) < 4 {
		t.Errorf("job A's 2 ranks used %d credentials in 2.5 s, want a new one every 0.5 s", len(creds))
	}

	// User B's own job is bound to user B; then B's credential for A's
	// (finished, still live) job id is refused: the job is A's.
	jobB := fmt.Sprintf("auth-b-%d", time.Now().UnixNano())
	if out, err := runJob(userB, jobB, 3); err != nil {
		t.Fatalf("job as %s: %v\n%s", userB, err, out)
	}
	var b authJob
	waitJob(jobB, &b)
	if b.Job.User != userB || len(b.Processes) != 2 {
		t.Errorf("job B: %+v, want user %s (uid %d)", b, userB, uidB)
	}
	jm := d.dropCount(ingest.ReasonJobMismatch)
	kA := key()
	credBA := mungeAs(t, mu.Socket, userB, ingest.CredentialPayload(kA, jobA))
	send(forge(t, jobA, userB, 5000, credBA, kA))
	d.waitFor(func() bool { return d.dropCount(ingest.ReasonJobMismatch) > jm }, "user B's datagram for user A's job dropped")

	// An agent told not to sign (NETLOOM_MUNGE=0) is refused by this
	// daemon, and says why when asked to.
	un := d.dropCount(ingest.ReasonUnauthenticated)
	jobC := fmt.Sprintf("auth-c-%d", time.Now().UnixNano())
	out, err := runJob("", jobC, 2, "NETLOOM_MUNGE=0")
	if err != nil {
		t.Fatalf("job C: %v\n%s", err, out)
	}
	if !strings.Contains(out, "datagrams unauthenticated: NETLOOM_MUNGE=0") {
		t.Errorf("job C did not say it sends unauthenticated:\n%s", out)
	}
	d.waitFor(func() bool { return d.dropCount(ingest.ReasonUnauthenticated) >= un+2 }, "job C's datagrams refused as unauthenticated")
	if code := d.get("/api/v1/jobs/"+jobC, nil); code != 404 {
		t.Errorf("unauthenticated job C: HTTP %d, want 404", code)
	}
	if logged := d.log.String(); strings.Contains(logged, string(credB)) || regexp.MustCompile(`MUNGE:[A-Za-z0-9+/=]{20,}`).MatchString(logged) {
		t.Error("the daemon logged a credential")
	}
	// The log said which mode the daemon is in, and (the forgers' munge(1)
	// credentials were not restricted) warned of credentials anyone can
	// decode.
	d.waitFor(func() bool {
		l := d.log.String()
		return strings.Contains(l, "agent authentication: munge") && strings.Contains(l, "any local user can decode")
	}, "the log to say agent authentication: munge, and warn of unrestricted credentials")
	if n := d.metric("netloom_ingest_credentials_decoded_total", ""); n < 6 {
		t.Errorf("%g credentials decoded", n)
	}
}

// TestAgentAuthNone: agents without munged (no socket, or NETLOOM_MUNGE=0)
// still report to a daemon that does not require MUNGE, and a daemon told
// to require it does not start without munged.
func TestAgentAuthNone(t *testing.T) {
	m := jobMPIs(t)[0]
	for _, tool := range []string{m.cc, m.launcher} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	buildAgent(t)
	dir := t.TempDir()
	noMunge := []string{"NETLOOM_MUNGE_SOCKET=" + filepath.Join(dir, "no-munged.sock")}

	cmd := exec.Command(netloomBin, "serve", "--listen", "127.0.0.1:0", "--fabric", "sim:fat-tree:hosts=8,radix=8",
		"--db", filepath.Join(dir, "refused.db"), "--agent-listen", "127.0.0.1:0", "--agent-address-file", "-", "--agent-auth", "munge")
	cmd.Env = append(os.Environ(), noMunge...)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "munged") {
		t.Errorf("serve --agent-auth munge without munged: %v\n%s", err, out)
	}

	d, agent := serve(t, dir, noMunge, "--fabric", "sim:fat-tree:hosts=8,radix=8", "--db", filepath.Join(dir, "netloom.db"),
		"--agent-listen", "127.0.0.1:0", "--agent-address-file", "-", "--job-timeout", "10s", "--agent-auth", "none", "--anonymous", "admin")
	d = d.in(t)
	src, prog := filepath.Join(dir, "ring.c"), filepath.Join(dir, "ring")
	os.WriteFile(src, []byte(authRing), 0o644)
	if out, err := exec.Command(m.cc, "-o", prog, src).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", m.cc, err, out)
	}
	for i, extra := range [][]string{noMunge, {"NETLOOM_MUNGE=0"}} {
		job := fmt.Sprintf("auth-none-%d-%d", i, time.Now().UnixNano())
		args := []string{"run", "--daemon", agent, "--interval", "200ms", "--job-id", job, "--", m.launcher}
		args = append(append(args, m.launchArgs...), prog, "3")
		run := exec.Command(netloomBin, args...)
		run.Env = append(append(os.Environ(), "NETLOOM_LIB_DIR="+filepath.Dir(m.lib)), extra...)
		if out, err := run.CombinedOutput(); err != nil {
			t.Fatalf("netloom run: %v\n%s", err, out)
		}
		var j authJob
		d.waitFor(func() bool {
			return d.get("/api/v1/jobs/"+job, &j) == 200 && j.Job.State == "finished" && j.Job.Finalized == 4
		}, "job "+job+" to finish; drops:\n"+d.dropped())
	}
}
