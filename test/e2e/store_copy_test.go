package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	pgserver "github.com/netloom/netloom/test/postgres"
)

// copyFabric is the simulated system of TestStoreCopy, for the daemon and
// for loadgen alike.
const copyFabric = "fat-tree:hosts=16,radix=8"

// TestStoreCopy fills a SQLite store with a real daemon run (a simulated
// fabric swept twice a second, loadgen's MPI jobs that start, finish and
// are attributed to links), copies it SQLite → PostgreSQL → SQLite with
// netloom store copy, serves all three with netloom serve --db, and
// compares every answer the UI uses: the jobs list, each job, its matrix
// and links, link history and the jobs on a link, topology, events.
func TestStoreCopy(t *testing.T) {
	if m := pgserver.Missing(); m != "" {
		if testing.Short() {
			t.Skip(m)
		}
		t.Fatal(m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	pg, err := pgserver.Start(ctx, pgserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Stop()
	dir := t.TempDir()
	orig := filepath.Join(dir, "orig.db")

	// A daemon run: jobs come and go; all have ended (timed out) before the
	// daemon stops, so serving the stores later changes no job.
	d, agent := serve(t, dir, nil, "--fabric", "sim:"+copyFabric, "--db", orig,
		"--agent-listen", "127.0.0.1:0", "--agent-address-file", "-",
		"--sweep-interval", "500ms", "--discover-interval", "2s", "--job-timeout", "2s")
	lg := exec.CommandContext(ctx, netloomBin, "loadgen", "--system", copyFabric, "--target", agent,
		"--duration", "6s", "--interval", "300ms", "--ranks-per-node", "2", "--max-job-nodes", "4", "--job-lifetime", "2s")
	if out, err := lg.CombinedOutput(); err != nil {
		t.Fatalf("loadgen: %v\n%s", err, out)
	}
	d.waitFor(func() bool {
		var l struct{ Total int }
		return d.get("/api/v1/jobs?state=running", &l) == 200 && l.Total == 0
	}, "every job to end")
	time.Sleep(time.Second) // the last jobs' final attribution, at the next sweeps
	// A clean stop: its writer flushes the jobs that ended last. Killed, it
	// could leave one "running" in the store, whose default link range then
	// ran to each serving daemon's now (CI failed so, twice).
	d.stop()
	end := time.Now()

	// SQLite → PostgreSQL → SQLite.
	pgURL, err := pg.CreateDB(ctx, "copy")
	if err != nil {
		t.Fatal(err)
	}
	back := filepath.Join(dir, "back.db")
	stderr := storeCopy(t, "--from", "sqlite:"+orig, "--to", pgURL)
	t.Logf("SQLite to PostgreSQL:\n%s", stderr)
	for _, table := range []string{"topology_versions", "events", "port_samples", "jobs", "job_processes", "job_samples", "link_job_samples", "job_link_totals"} {
		if !strings.Contains(stderr, "netloom store copy: "+table+": ") {
			t.Errorf("no progress for %s:\n%s", table, stderr)
		}
	}
	storeCopy(t, "--from", pgURL, "--to", back)
	// A second copy into a store that holds data is refused.
	cmd := exec.Command(netloomBin, "store", "copy", "--from", orig, "--to", back)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "not empty") || !strings.Contains(string(out), "--force") {
		t.Errorf("copy into a non-empty store: %v\n%s", err, out)
	}

	// Serve the three stores (without new jobs) and compare what they say
	// about the time of the run.
	stores := map[string]string{"sqlite original": orig, "postgres copy": pgURL, "sqlite copy of the copy": back}
	answers := map[string]map[string]string{}
	for name, db := range stores {
		sd, _ := serve(t, t.TempDir(), nil, "--fabric", "sim:"+copyFabric, "--db", db, "--agent-listen", "off", "--agent-address-file", "-",
			"--sweep-interval", "1h", "--discover-interval", "1h")
		sd.waitFor(func() bool { return sd.get("/api/v1/fabric", nil) == 200 }, "discovery")
		var running struct{ Total int }
		if sd.get("/api/v1/jobs?state=running", &running); running.Total != 0 {
			t.Errorf("%s: %d jobs stored as running after a clean stop", name, running.Total)
		}
		answers[name] = uiAnswers(t, sd, end)
		sd.kill()
	}
	want := answers["sqlite original"]
	if len(want) < 10 {
		t.Fatalf("only %d answers from the original: %v", len(want), keys(want))
	}
	size := 0
	for _, v := range want {
		size += len(v)
	}
	t.Logf("compared %d answers (%d bytes of JSON) of %d stores", len(want), size, len(answers))
	for name, got := range answers {
		for path, w := range want {
			if got[path] != w {
				t.Errorf("%s: GET %s differs:\n got %s\nwant %s", name, path, clip(got[path]), clip(w))
			}
		}
	}
}

// storeCopy runs netloom store copy and returns its standard error.
func storeCopy(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(netloomBin, append([]string{"store", "copy"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("netloom store copy %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "copied ") {
		t.Errorf("netloom store copy printed %q", stdout.String())
	}
	return stderr.String()
}

// uiAnswers fetches what the UI's pages ask about the past up to end, by
// path.
func uiAnswers(t *testing.T, d *daemon, end time.Time) map[string]string {
	t.Helper()
	rng := "from=" + url.QueryEscape(end.Add(-10*time.Minute).Format(time.RFC3339Nano)) + "&to=" + url.QueryEscape(end.Format(time.RFC3339Nano))
	at := "at=" + url.QueryEscape(end.Format(time.RFC3339Nano))
	out := map[string]string{}
	raw := func(path string) []byte {
		var v json.RawMessage
		if code := d.get(path, &v); code != 200 {
			t.Fatalf("GET %s: %d %s", path, code, v)
		}
		out[path] = string(v)
		return v
	}
	var list struct {
		Total int
		Jobs  []struct{ ID string }
	}
	json.Unmarshal(raw("/api/v1/jobs?limit=1000&"+rng), &list)
	raw("/api/v1/jobs?limit=5&sort=bytes")
	if list.Total == 0 || len(list.Jobs) == 0 {
		t.Fatalf("no jobs in %s", out["/api/v1/jobs?limit=1000&"+rng])
	}
	ports := map[string]bool{}
	for _, j := range list.Jobs {
		p := "/api/v1/jobs/" + url.PathEscape(j.ID)
		raw(p)
		raw(p + "/matrix")
		raw(p + "/matrix?level=node")
		var links struct {
			Links []struct{ From fabric.PortRef }
		}
		json.Unmarshal(raw(p+"/links"), &links)
		for _, l := range links.Links {
			ports[l.From.String()] = true
		}
	}
	if len(ports) == 0 {
		t.Fatalf("no job crossed a link: %v", out)
	}
	// A few links' history and jobs.
	var ps []string
	for p := range ports {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	for _, p := range ps[:min(len(ps), 4)] {
		raw("/api/v1/links/" + p + "/counters?" + rng)
		raw("/api/v1/links/" + p + "/jobs?" + rng)
	}
	raw("/api/v1/fabric?" + at)
	raw("/api/v1/fabric/links?" + at)
	raw("/api/v1/fabric/versions?" + rng)
	raw("/api/v1/events?" + rng)
	return out
}

func keys(m map[string]string) []string {
	var k []string
	for x := range m {
		k = append(k, x)
	}
	sort.Strings(k)
	return k
}

func clip(s string) string {
	if len(s) > 600 {
		return s[:600] + fmt.Sprintf("… (%d bytes)", len(s))
	}
	return s
}
