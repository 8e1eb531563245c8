package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
)

// addAccounts writes a daemon config naming account files in dir (and
// authExtra, more lines of its auth block) and adds an administrator
// "root-admin" and the users named, with the passwords given, through the
// CLI; it returns the config's path.
func addAccounts(t *testing.T, dir string, passwords map[string]string, authExtra string) string {
	t.Helper()
	cfg := filepath.Join(dir, "netloom.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("auth:\n  users_file: %s/htpasswd\n  groups_file: %s/groups\n  tokens_file: %s/tokens\n%s",
		dir, dir, dir, authExtra)), 0o600); err != nil {
		t.Fatal(err)
	}
	for u, p := range passwords {
		args := []string{"user", "add", u, "--config", cfg, "--password-stdin"}
		if u == "root-admin" {
			args = append(args, "--admin")
		}
		cmd := exec.Command(netloomBin, args...)
		cmd.Stdin = strings.NewReader(p + "\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("netloom user add %s: %v\n%s", u, err, out)
		}
	}
	return cfg
}

// procStatusKB reads a kB field (VmRSS, VmHWM) of /proc/PID/status.
func procStatusKB(t *testing.T, pid int, field string) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q", field, l)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// roundTwoDigits is two significant digits, half up, as the daemon
// rounds other users' bytes (docs/security.md).
func roundTwoDigits(b uint64) uint64 {
	p := uint64(1)
	for b/p >= 100 {
		p *= 10
	}
	q := b / p
	if b%p >= p/2 && p > 1 {
		q++
	}
	return q * p
}

// TestPlacementBounds runs real MPI jobs of two local users through Slurm
// on an ibsim fat tree under a daemon with accounts, and checks what the
// placement endpoint gives a user: a hostlist of a million names is
// refused by its count with a short 400 (eight at once leave the daemon's
// memory as it was); the advice names no switch and no GUID, while the
// administrator's names the spine; out-of-range times are a 400; and other
// users' bytes on a shared link are rounded, the direction's total summed
// from what is shown.
func TestPlacementBounds(t *testing.T) {
	const userA, userB = "nltest-a", "nltest-b"
	f, c, ctx, lib, prog := slurmOnFabric(t, userA, userB)
	bin, sharedLib := shareTools(t, c, lib)
	dir := t.TempDir()
	pw := map[string]string{"root-admin": "admin-pass-1", userA: "a-pass-123", userB: "b-pass-123"}
	cfg := addAccounts(t, dir, pw, "")
	d, agent := serve(t, f.Dir, append(f.Env(), c.Env()...), "--config", cfg, "--anonymous", "none",
		"--fabric", "ib", "--db", filepath.Join(dir, "netloom.db"), "--agent-listen", "127.0.0.1:0", "--agent-address-file", "-",
		"--scheduler", "slurm", "--scheduler-interval", "500ms", "--sweep-interval", "300ms", "--discover-interval", "5s",
		"--job-timeout", "20s")
	admin, a, b := newClient(t, d.base, "admin"), newClient(t, d.base, userA), newClient(t, d.base, userB)
	admin.login("root-admin", pw["root-admin"])
	a.login(userA, pw[userA])
	b.login(userB, pw[userB])
	waitAPI(t, d, 60*time.Second, "routes", func() bool {
		var st struct{ Routes bool }
		return admin.get("/api/v1/status", &st) == 200 && st.Routes
	})

	// n1, n2 hang off one leaf switch, n3 off the other: A's job on n1,n3
	// crosses the spine, B's on n2,n3 too, and both reach n3 over its host
	// link. The bases make byte counts that two digits do not hold.
	run := func(base int) string {
		return fmt.Sprintf("%s run --daemon %s --interval 200ms --lib %s -- srun --mpi=pmix %s %d", bin, agent, sharedLib, prog, base)
	}
	idA, err := c.Sbatch(ctx, userA, "-J", "nl-place-a", "-N2", "-n2", "-w", "n1,n3", "-o", filepath.Join(c.Shared, "pa-%j.out"), "--wrap", run(123457))
	if err != nil {
		t.Fatal(err)
	}
	idB, err := c.Sbatch(ctx, userB, "-J", "nl-place-b", "-N2", "-n2", "-w", "n2,n3", "-o", filepath.Join(c.Shared, "pb-%j.out"), "--wrap", run(345679))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{idA, idB} {
		if err := c.WaitState(ctx, id, "COMPLETED", "FAILED", "CANCELLED"); err != nil {
			t.Fatal(err)
		}
		if st, _ := c.JobState(ctx, id); st != "COMPLETED" {
			o, _ := os.ReadFile(filepath.Join(c.Shared, map[string]string{idA: "pa", idB: "pb"}[id]+"-"+id+".out"))
			t.Fatalf("job %s: %s\n%s", id, st, o)
		}
	}

	// One rank per node: every placement crosses the spine.
	place := "/api/v1/jobs/" + idA + "/placement?nodes=n1,n3&cores_per_node=1"
	type advice struct {
		Advice *struct {
			ByteHops     uint64          `json:"byte_hops"`
			HeaviestLink json.RawMessage `json:"heaviest_link"`
		}
		AsRan        json.RawMessage `json:"as_ran"`
		FabricHidden bool            `json:"fabric_hidden"`
		Mapping      []struct {
			Rank int
			Node string
		}
	}
	var adminAdv advice
	var adminBody []byte
	waitAPI(t, d, 60*time.Second, "job "+idA+" with its ranks' traffic", func() bool {
		code, body := admin.do("GET", place, nil)
		adminBody = body
		return code == 200 && json.Unmarshal(body, &adminAdv) == nil && adminAdv.Advice != nil && adminAdv.Advice.ByteHops > 0
	})

	// The fabric's switches as ibnetdiscover sees them.
	topo := discoverWithTool(t, f)
	var secrets []string
	for _, n := range topo.Nodes {
		if n.Type == fabric.Switch {
			secrets = append(secrets, n.GUID.String(), strconv.Quote(n.Description))
		}
	}
	named := func(body []byte) []string {
		var out []string
		for _, s := range secrets {
			if strings.Contains(string(body), s) {
				out = append(out, s)
			}
		}
		return out
	}

	// Visibility. The clients fail the test that made them, so these
	// checks run in it rather than in subtests.
	{
		// The administrator's advice names the switches its loads cross.
		if len(named(adminBody)) == 0 || adminAdv.FabricHidden {
			t.Errorf("the administrator's advice names no switch (%v): %.800s", secrets, adminBody)
		}
		code, body := a.do("GET", place, nil)
		var got advice
		if code != 200 || json.Unmarshal(body, &got) != nil {
			t.Fatalf("A's placement: %d %.300s", code, body)
		}
		if l := named(body); len(l) > 0 {
			t.Errorf("A's placement names switches %v: %.800s", l, body)
		}
		// No GUID at all: not the switches', not the hosts' on the routes.
		if strings.Contains(string(body), "0x") || strings.Contains(string(body), `"links"`) || !got.FabricHidden {
			t.Errorf("A's placement shows fabric detail: %.800s", body)
		}
		// The figures and the mapping are the administrator's.
		if got.Advice == nil || got.Advice.ByteHops != adminAdv.Advice.ByteHops || len(got.Mapping) != 2 ||
			fmt.Sprint(got.Mapping) != fmt.Sprint(adminAdv.Mapping) || !strings.Contains(string(got.Advice.HeaviestLink), `"bytes"`) {
			t.Errorf("A's advice %+v differs from the administrator's %+v", got, adminAdv)
		}
		if code, body := b.do("GET", place, nil); code != 404 {
			t.Errorf("B's placement of A's job: %d %.200s", code, body)
		}
	}

	// A hostlist of a million names, eight times at once.
	{
		huge := "/api/v1/jobs/" + idA + "/placement?nodes=n%5B1-1048576%5D"
		pid := d.cmd.Process.Pid
		// Reset the peak (VmHWM) to the present, so that it shows what the
		// requests below cost even if the memory was returned after.
		_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
		before := procStatusKB(t, pid, "VmRSS")
		type answer struct {
			code int
			body []byte
			took time.Duration
			err  error
		}
		answers := make([]answer, 8)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				resp, err := a.http.Get(d.base + huge)
				if err != nil {
					answers[i].err = err
					return
				}
				defer resp.Body.Close()
				// Read at most 1 MiB: the old answer was 104 MB.
				body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
				answers[i] = answer{code: resp.StatusCode, body: body, took: time.Since(start)}
			}()
		}
		wg.Wait()
		peak := procStatusKB(t, pid, "VmHWM")
		for i, x := range answers {
			var e struct{ Error string }
			if x.err != nil || x.code != 400 || len(x.body) > 4<<10 || json.Unmarshal(x.body, &e) != nil ||
				!strings.Contains(e.Error, "nodes") || !strings.Contains(e.Error, "1048576") {
				t.Errorf("request %d: %v, %d, %d bytes: %.300s", i, x.err, x.code, len(x.body), x.body)
			}
			t.Logf("request %d: %d in %v, %d bytes: %s", i, x.code, x.took, len(x.body), x.body)
		}
		if peak > before && peak-before > 50<<10 {
			t.Errorf("eight requests for a million nodes took the daemon from %d kB to a peak of %d kB", before, peak)
		}
		t.Logf("daemon memory: %d kB before, peak %d kB", before, peak)
	}

	// Times nothing can have been recorded at.
	{
		for _, q := range []string{"at=99999999999", "at=NaN", "at=1969-07-20T20:17:00Z", "at=9999-01-01T00:00:00Z"} {
			code, body := a.do("GET", "/api/v1/jobs/"+idA+"/placement?"+q, nil)
			var e struct{ Error string }
			if code != 400 || json.Unmarshal(body, &e) != nil || !strings.HasPrefix(e.Error, "parameter at: ") {
				t.Errorf("placement?%s: %d %.300s; want a 400 naming at", q, code, body)
			}
		}
		if code, body := a.do("GET", "/api/v1/jobs/"+idA+"/links?from=99999999999", nil); code != 400 || !strings.Contains(string(body), "parameter from") {
			t.Errorf("links?from=99999999999: %d %.300s", code, body)
		}
	}

	// Other users' bytes on a shared link, as A sees them.
	{
		// The link both jobs crossed the same way: into n3.
		var shared fabric.PortRef
		waitAPI(t, d, 60*time.Second, "a link direction both jobs crossed", func() bool {
			dirs := map[fabric.PortRef]int{}
			for _, id := range []string{idA, idB} {
				var l struct {
					Links []struct{ From fabric.PortRef }
				}
				if admin.get("/api/v1/jobs/"+id+"/links?limit=1000", &l) != 200 {
					return false
				}
				for _, x := range l.Links {
					dirs[x.From]++
				}
			}
			for p, n := range dirs {
				if n == 2 {
					shared = p
					return true
				}
			}
			return false
		})
		type split struct {
			Directions []struct {
				From      fabric.PortRef
				Monitored uint64 `json:"monitored_bytes"`
				Rounded   bool   `json:"monitored_rounded"`
				Jobs      []struct {
					Job          string
					Bytes        uint64
					Anonymized   bool
					BytesRounded bool `json:"bytes_rounded"`
				}
			}
		}
		path := "/api/v1/links/" + shared.String() + "/jobs?from=-1h"
		var all, mine split
		if code := admin.get(path, &all); code != 200 {
			t.Fatalf("admin %s: %d", path, code)
		}
		if code := a.get(path, &mine); code != 200 {
			t.Fatalf("A %s: %d", path, code)
		}
		exact := map[string]uint64{}
		for _, dir := range all.Directions {
			if dir.From == shared {
				for _, j := range dir.Jobs {
					exact[j.Job] = j.Bytes
				}
			}
		}
		if exact[idB] == 0 || exact[idA] == 0 || roundTwoDigits(exact[idB]) == exact[idB] {
			t.Fatalf("the administrator's split of %s: %v; want both jobs, B's bytes not already two digits", shared, exact)
		}
		found := false
		for _, dir := range mine.Directions {
			if dir.From != shared {
				continue
			}
			var sum uint64
			for _, j := range dir.Jobs {
				sum += j.Bytes
				switch {
				case j.Job == idA && (j.Bytes != exact[idA] || j.BytesRounded):
					t.Errorf("A's own job on %s: %+v, want its exact %d bytes", shared, j, exact[idA])
				case j.Job == idB:
					t.Errorf("A sees B's job by id on %s", shared)
				case j.Anonymized:
					found = true
					if j.Bytes != roundTwoDigits(exact[idB]) || !j.BytesRounded {
						t.Errorf("B's job as A sees it: %+v; want %d (rounded from %d)", j, roundTwoDigits(exact[idB]), exact[idB])
					}
				}
			}
			if dir.Monitored != sum || !dir.Rounded {
				t.Errorf("A's direction %s: monitored %d (rounded %v), the jobs shown sum to %d", shared, dir.Monitored, dir.Rounded, sum)
			}
		}
		if !found {
			t.Errorf("A's split of %s shows no other job: %+v", shared, mine)
		}
		// The administrator sees exact bytes and nothing rounded.
		if raw := rawGetAs(admin, path); strings.Contains(raw, "rounded") {
			t.Errorf("the administrator's split is rounded: %.400s", raw)
		}
	}
}

// rawGetAs is the body of a GET by c.
func rawGetAs(c *apiClient, path string) string {
	c.t.Helper()
	code, body := c.do("GET", path, nil)
	if code != 200 {
		c.t.Fatalf("%s GET %s: %d %.200s", c.name, path, code, body)
	}
	return string(body)
}
