package e2e

// What the daemon reads for GET /jobs/{job}/model (docs/security.md, "What
// the daemon reads"), probed as two real local users whose real Open MPI
// jobs wrote their traces under the daemon's trace root: every file an
// agent can name that is not the job owner's own, every file that is too
// big or never ends, and every flood of requests, is refused quickly with
// the daemon's memory bounded, while other users keep being served.

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestTraceReadingIsBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const userA, userB = "nltrace-a", "nltrace-b"
	m, uids := localUsers(t, ctx, userA, userB)

	// The program, the agent and the node-naming wrapper where both users
	// can read them; the trace root with a folder of each user's.
	share, err := os.MkdirTemp("", "netloom-tracesec-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(share) })
	os.Chmod(share, 0o755)
	src, prog, wrap, lib := filepath.Join(share, "ring.c"), filepath.Join(share, "ring"), filepath.Join(share, "wrap.sh"), filepath.Join(share, "libnetloom.so")
	os.WriteFile(src, []byte(authRing), 0o644)
	os.WriteFile(wrap, []byte(modelWrap), 0o755)
	if out, err := exec.Command(m.cc, "-o", prog, src).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", m.cc, err, out)
	}
	if out, err := exec.Command("cp", m.lib, lib).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	root := filepath.Join(share, "traces")
	for _, u := range []string{userA, userB} {
		dir := filepath.Join(root, u)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o700)
		os.Chown(dir, uids[u], uids[u])
	}

	// The daemon, with accounts for both users and an administrator.
	dir := t.TempDir()
	cfg := addAccounts(t, dir, map[string]string{"root-admin": "admin-pass-1", userA: "a-pass-123", userB: "b-pass-123"}, "")
	tokens := map[string]string{}
	for _, u := range []string{"root-admin", userA, userB} {
		out, err := exec.Command(netloomBin, "token", "add", u, "--config", cfg, "--label", "t").Output()
		if err != nil {
			t.Fatal(err)
		}
		tokens[u] = strings.TrimSpace(string(out))
	}
	d, agent := serve(t, dir, nil, "--config", cfg, "--anonymous", "none", "--fabric", "sim:fat-tree:hosts=8,radix=8",
		"--db", filepath.Join(dir, "netloom.db"), "--agent-listen", "127.0.0.1:0", "--agent-address-file", "-", "--job-timeout", "10s",
		"--agent-auth", "none", "--trace-root", root)
	d = d.in(t)
	client := func(u string) *apiClient {
		c := newClient(t, d.base, u)
		c.token = tokens[u]
		c.http.Timeout = 3 * time.Minute
		return c
	}
	admin, a, b := client("root-admin"), client(userA), client(userB)
	pid := d.cmd.Process.Pid

	// run runs a traced 2-rank ring as user on nodes n1 and n2 and waits
	// until the daemon has it finished; it returns the job's folder.
	run := func(as, job string, rounds int) string {
		t.Helper()
		env := []string{"LD_PRELOAD=" + lib, "NETLOOM_DAEMON=" + agent, "NETLOOM_INTERVAL=0.2", "NETLOOM_JOB_ID=" + job,
			"NETLOOM_TRACE=1", "NETLOOM_OUTPUT=" + filepath.Join(root, as)}
		args := []string{"runuser", "-u", as, "--", "env", "HOME=/tmp"}
		args = append(append(args, env...), m.launcher, "--oversubscribe", "-np", "2")
		for _, kv := range env {
			k, _, _ := strings.Cut(kv, "=")
			args = append(args, "-x", k)
		}
		args = append(args, "sh", wrap, "n1,n2", prog, strconv.Itoa(rounds))
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = share
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s's job %s: %v\n%s", as, job, err, out)
		}
		d.waitFor(func() bool {
			var v authJob
			return admin.get("/api/v1/jobs/"+job, &v) == 200 && v.Job.State == "finished" && v.Job.Finalized == 2
		}, "job "+job+" to finish")
		return filepath.Join(root, as, job)
	}
	type answer struct {
		code int
		body string
		took time.Duration
	}
	model := func(c *apiClient, job, query string) answer {
		t.Helper()
		start := time.Now()
		code, body := c.do("GET", "/api/v1/jobs/"+job+"/model"+query, nil)
		return answer{code, string(body), time.Since(start)}
	}

	jobA := run(userA, "tsec-a", 5)
	jobB := run(userB, "tsec-b", 5)
	var okA struct {
		AsRan struct {
			Elapsed float64 `json:"elapsed_seconds"`
		} `json:"as_ran"`
	}
	var first answer
	d.waitFor(func() bool {
		first = model(a, "tsec-a", "")
		return !strings.Contains(first.body, "no_node_map")
	}, "the node map")
	if got := first; got.code != 200 {
		t.Fatalf("A's own traced job: %d %s", got.code, got.body)
	} else {
		json.Unmarshal([]byte(got.body), &okA)
	}
	base := int(procStatusKB(t, pid, "VmRSS"))
	t.Logf("daemon RSS after the first prediction: %d KiB", base)

	// Each attack is made by user A on their own job's folder (they own
	// it), then undone. The answer names no content and no other job.
	secret := filepath.Join(share, "root-only.gz")
	{
		var buf bytes.Buffer
		z := gzip.NewWriter(&buf)
		z.Write([]byte("TOP-SECRET-LINE root's data\n"))
		z.Close()
		os.WriteFile(secret, buf.Bytes(), 0o600)
	}
	asA := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("runuser", append([]string{"-u", userA, "--"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("as %s: %v: %v\n%s", userA, args, err, out)
		}
	}
	swap := func(name string, make func(path string)) func() {
		path := filepath.Join(jobA, name)
		asA("mv", path, path+".orig")
		make(path)
		return func() { os.Remove(path); asA("mv", path+".orig", path) }
	}
	// A gzip bomb: 50 million actions in about a megabyte.
	bomb := filepath.Join(share, "bomb.gz")
	{
		f, _ := os.Create(bomb)
		z, _ := gzip.NewWriterLevel(f, gzip.BestCompression)
		line := bytes.Repeat([]byte("0 compute 1\n"), 100_000)
		for range 500 {
			z.Write(line)
		}
		z.Close()
		f.Close()
		os.Chmod(bomb, 0o644)
	}
	cases := []struct {
		name   string
		attack func() (undo func())
		want   string // in the error
	}{
		{"a trace linked to a root-only gzip file", func() func() {
			return swap("rank-0.ti.gz", func(p string) { asA("ln", "-s", secret, p) })
		}, "not a folder or file of the job's user"},
		{"a trace description linked to /dev/zero", func() func() {
			return swap("rank-0.ti.json", func(p string) { asA("ln", "-s", "/dev/zero", p) })
		}, "not a folder or file of the job's user"},
		{"a trace description that is a FIFO", func() func() {
			return swap("rank-0.ti.json", func(p string) { asA("mkfifo", p) })
		}, "not a folder or file of the job's user"},
		{"a trace of 50 million actions in a megabyte", func() func() {
			return swap("rank-0.ti.gz", func(p string) { asA("cp", bomb, p) })
		}, "model_max_actions"},
		{"a profile with a 1 GiB length prefix", func() func() {
			return swap("rank-0.pb", func(p string) {
				var rec [binary.MaxVarintLen64]byte
				n := binary.PutUvarint(rec[:], 1<<30)
				tmp := filepath.Join(share, "sparse.pb")
				os.WriteFile(tmp, append(rec[:n], make([]byte, 4096)...), 0o644)
				asA("cp", tmp, p)
			})
		}, ""},
		{"the job folder linked to another user's job folder", func() func() {
			asA("mv", jobA, jobA+".orig")
			os.Symlink(jobB, jobA) // as root: A could not read B's folder to check the link, but may make it
			os.Lchown(jobA, uids[userA], uids[userA])
			return func() { os.Remove(jobA); asA("mv", jobA+".orig", jobA) }
		}, "not a folder or file of the job's user"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			undo := c.attack()
			defer undo()
			// a new question each time: the cache must not answer it
			got := model(a, "tsec-a", "?network=x"+strconv.Itoa(3+len(c.name)))
			if got.code == 200 {
				t.Fatalf("answered 200: %.300s", got.body)
			}
			if strings.Contains(got.body, "TOP-SECRET") || strings.Contains(got.body, "tsec-b") || strings.Contains(got.body, userB) {
				t.Errorf("the answer shows another's data: %.500s", got.body)
			}
			if c.want != "" && !strings.Contains(got.body, c.want) {
				t.Errorf("answer %d %.300s: want it to say %q", got.code, got.body, c.want)
			}
			if len(got.body) > 4096 {
				t.Errorf("answer of %d bytes", len(got.body))
			}
			if got.took > 30*time.Second {
				t.Errorf("answered after %s", got.took)
			}
			if grew := int(procStatusKB(t, pid, "VmRSS")) - base; grew > 400<<10 {
				t.Errorf("the daemon's memory grew by %d MiB", grew>>10)
			}
			t.Logf("%d in %s: %.200s (RSS %d KiB)", got.code, got.took.Round(time.Millisecond), got.body, int(procStatusKB(t, pid, "VmRSS")))
		})
	}

	// A forged trace folder: A's agent names B's output folder. The job is
	// A's, but B's folder is not A's to read, nor even to list.
	t.Run("a trace folder naming another user's folder", func(t *testing.T) {
		env := []string{"LD_PRELOAD=" + lib, "NETLOOM_DAEMON=" + agent, "NETLOOM_INTERVAL=0.2", "NETLOOM_JOB_ID=tsec-forged",
			"NETLOOM_TRACE=1", "NETLOOM_OUTPUT=" + filepath.Join(root, userB)}
		args := append([]string{"runuser", "-u", userA, "--", "env", "HOME=/tmp"}, env...)
		args = append(args, m.launcher, "--oversubscribe", "-np", "2")
		for _, kv := range env {
			k, _, _ := strings.Cut(kv, "=")
			args = append(args, "-x", k)
		}
		args = append(args, "sh", wrap, "n1,n2", prog, "3")
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = share
		out, _ := cmd.CombinedOutput() // the agent cannot write there; the job runs on
		d.waitFor(func() bool {
			var v authJob
			return admin.get("/api/v1/jobs/tsec-forged", &v) == 200 && v.Job.State == "finished"
		}, "the forged job to finish; its output:\n"+string(out))
		got := model(a, "tsec-forged", "")
		if got.code == 200 || strings.Contains(got.body, "tsec-b") {
			t.Errorf("A read B's folder: %d %.300s", got.code, got.body)
		}
	})

	// Floods: one user's many questions hold no slot the others need.
	t.Run("a flood of predictions from one user", func(t *testing.T) {
		undo := swap("rank-0.ti.json", func(p string) { asA("mkfifo", p) })
		defer undo()
		var wg sync.WaitGroup
		start := time.Now()
		codes := make(chan int, 300)
		for i := range 300 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, _ := a.do("GET", fmt.Sprintf("/api/v1/jobs/tsec-a/model?network=x%d", i+2), nil)
				codes <- code
			}()
		}
		// Meanwhile the administrator and the other user are served.
		for range 5 {
			for _, c := range []struct {
				who  *apiClient
				path string
			}{{admin, "/api/v1/status"}, {b, "/api/v1/jobs"}, {admin, "/metrics"}} {
				start := time.Now()
				if code, body := c.who.do("GET", c.path, nil); code != 200 {
					t.Errorf("%s GET %s during the flood: %d %.200s", c.who.name, c.path, code, body)
				} else if took := time.Since(start); took > 5*time.Second {
					t.Errorf("%s GET %s during the flood took %s", c.who.name, c.path, took)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		wg.Wait()
		if took := time.Since(start); took > time.Minute {
			t.Errorf("300 requests answered in %s", took)
		}
		close(codes)
		byCode := map[int]int{}
		for c := range codes {
			byCode[c]++
		}
		t.Logf("the flood's answers by status: %v", byCode)
		if byCode[404]+byCode[429] != 300 {
			t.Errorf("answers %v: want each refused at once, as a bad trace (404) or past the user's bound (429)", byCode)
		}
		if got := model(b, "tsec-b", "?network=perfect&network=x3&network=x4&network=x5&network=x6&network=x7&network=x8&network=x9&network=x10"); got.code != 400 {
			t.Errorf("nine scenarios in one request: %d %.200s", got.code, got.body)
		}
	})

	// Identical questions share one replay; a re-run is a new question.
	t.Run("answers follow the job and its files", func(t *testing.T) {
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if got := model(b, "tsec-b", "?network=perfect"); got.code != 200 {
					t.Errorf("B's job: %d %.300s", got.code, got.body)
				}
			}()
		}
		wg.Wait()
		if n := metricValue(t, admin, `netloom_model_predictions_total{result="computed"}`); n < 1 {
			t.Errorf("no prediction counted as computed")
		}
		before := metricValue(t, admin, `netloom_model_predictions_total{result="computed"}`)
		run(userA, "tsec-a", 15) // the same id, three times the rounds
		var again struct {
			AsRan struct {
				Elapsed float64 `json:"elapsed_seconds"`
			} `json:"as_ran"`
		}
		got := model(a, "tsec-a", "")
		json.Unmarshal([]byte(got.body), &again)
		if got.code != 200 || again.AsRan.Elapsed < 2*okA.AsRan.Elapsed {
			t.Errorf("the re-run's prediction %d: as ran %.3f s, the first run's %.3f s: want the new run's, about 3 times longer (%.200s)",
				got.code, again.AsRan.Elapsed, okA.AsRan.Elapsed, got.body)
		}
		if after := metricValue(t, admin, `netloom_model_predictions_total{result="computed"}`); after != before+1 {
			t.Errorf("computed predictions %v -> %v: want one more for the re-run", before, after)
		}
	})
}

// metricValue reads one sample of /metrics.
func metricValue(t *testing.T, c *apiClient, series string) float64 {
	t.Helper()
	code, body := c.do("GET", "/metrics", nil)
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}
