package e2e

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
	pgstore "github.com/netloom/netloom/internal/store/postgres"
	pgserver "github.com/netloom/netloom/test/postgres"
)

// collectorsFabric is the simulated system of the collector tests, for
// the daemon and for loadgen alike.
const collectorsFabric = "fat-tree:hosts=16,radix=8"

func startPostgres(t *testing.T, ctx context.Context) *pgserver.Server {
	t.Helper()
	if m := pgserver.Missing(); m != "" {
		if testing.Short() {
			t.Skip(m)
		}
		t.Fatal(m)
	}
	pg, err := pgserver.Start(ctx, pgserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pg.Stop)
	return pg
}

// TestCollectorsOutage stops the database for 15 s while a collector
// sweeps a simulated fabric twice a second and loadgen's MPI jobs report
// to it, then starts it again: the daemon holds its writes meanwhile
// (metrics say so, memory stays within the bound), writes them once the
// database is back, and after a clean stop the database holds every sweep
// the daemon took and, for every rank, an unbroken chain of process
// samples (each sample's interval starts where the previous one ended).
func TestCollectorsOutage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	pg := startPostgres(t, ctx)
	url, err := pg.CreateDB(ctx, "outage")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	d, agent := serve(t, dir, nil, "--fabric", "sim:"+collectorsFabric, "--db", url,
		"--agent-listen", "127.0.0.1:0", "--agent-address-file", "-",
		"--sweep-interval", "500ms", "--discover-interval", "2s", "--job-timeout", "60s", "--store-backlog", "64")
	lg := exec.CommandContext(ctx, netloomBin, "loadgen", "--system", collectorsFabric, "--target", agent,
		"--duration", "30s", "--interval", "500ms", "--ranks-per-node", "2", "--max-job-nodes", "4")
	lgOut := &strings.Builder{}
	lg.Stdout, lg.Stderr = lgOut, lgOut
	if err := lg.Start(); err != nil {
		t.Fatal(err)
	}
	d.waitFor(func() bool {
		var l struct{ Total int }
		return d.get("/api/v1/jobs?state=running", &l) == 200 && l.Total > 0
	}, "jobs from loadgen")
	time.Sleep(3 * time.Second)

	outage := time.Now()
	pg.Halt()
	var peak, rss float64
	for time.Since(outage) < 15*time.Second {
		peak = max(peak, d.metric("netloom_store_backlog_bytes", ""))
		rss = max(rss, d.metric("process_resident_memory_bytes", ""))
		time.Sleep(250 * time.Millisecond)
	}
	if d.metric("netloom_store_unreachable", "") != 1 || d.metric("netloom_store_backlog_writes", "") == 0 {
		t.Errorf("during the outage: unreachable %g, %g writes held",
			d.metric("netloom_store_unreachable", ""), d.metric("netloom_store_backlog_writes", ""))
	}
	var st struct {
		Behind *struct{ Reasons []string }
	}
	if d.get("/api/v1/status", &st); st.Behind == nil || !strings.Contains(strings.Join(st.Behind.Reasons, ";"), "database unreachable") {
		t.Errorf("status during the outage: %+v", st.Behind)
	}
	if err := pg.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	d.waitFor(func() bool {
		return d.metric("netloom_store_unreachable", "") == 0 && d.metric("netloom_store_backlog_writes", "") == 0
	}, "the backlog written")
	t.Logf("outage %s: backlog peaked at %.1f MiB (bound 64), RSS at most %.0f MiB; written %s after the database was back",
		back.Sub(outage).Round(time.Millisecond), peak/(1<<20), rss/(1<<20), time.Since(back).Round(time.Millisecond))
	if peak == 0 || peak > 64<<20 {
		t.Errorf("backlog peaked at %g bytes, want within 0 < peak <= 64 MiB", peak)
	}
	for _, r := range []string{"queue_full", "backlog_full", "shutdown"} {
		if v := d.metric("netloom_store_writes_dropped_total", `reason="`+r+`"`); v != 0 {
			t.Errorf("%g writes dropped (%s)", v, r)
		}
	}
	// A write whose commit the server took just as it stopped is refused as a
	// duplicate when tried again (its rows are there): counted, not lost.
	t.Logf("%g writes refused after the outage (reason error), %g retries",
		d.metric("netloom_store_writes_dropped_total", `reason="error"`), d.metric("netloom_store_write_retries_total", ""))
	if err := lg.Wait(); err != nil {
		t.Fatalf("loadgen: %v\n%s", err, lgOut)
	}
	// A clean stop writes what is queued; the log then counts every sweep.
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	if err := d.cmd.Wait(); err != nil {
		t.Fatalf("daemon: %v\n%s", err, tailString(d.log.String(), 30))
	}
	log := d.log.String()
	sweeps := strings.Count(log, "msg=sweep ")
	if n := strings.Count(log, "database unreachable: holding writes"); n != 1 {
		t.Errorf("the log says %d times that writes are held, want 1", n)
	}

	s, err := pgstore.Open(ctx, url, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	samples, err := s.LatestSamples(ctx, time.Now(), time.Hour)
	if err != nil || len(samples) == 0 {
		t.Fatalf("latest samples: %d, %v", len(samples), err)
	}
	series, err := s.PortSamples(ctx, []fabric.PortRef{samples[0].Port}, time.Unix(0, 0), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	stored := len(series[samples[0].Port])
	// The first sweep has no previous reading, hence no samples.
	if stored != sweeps-1 {
		t.Errorf("%d sweeps logged, %d stored for port %s: want every sweep but the first", sweeps, stored, samples[0].Port)
	}
	inOutage := 0
	for _, p := range series[samples[0].Port] {
		if p.Time.After(outage) && p.Time.Before(back) {
			inOutage++
		}
	}
	if inOutage < 20 {
		t.Errorf("%d sweeps stored from the outage, want about 30", inOutage)
	}

	jobs, _, err := s.Jobs(ctx, store.JobQuery{Limit: 1000})
	if err != nil || len(jobs) == 0 {
		t.Fatalf("jobs: %d, %v", len(jobs), err)
	}
	var checked, spanning, total int
	for _, j := range jobs {
		ps, err := s.ProcessSamples(ctx, j.ID, nil, time.Unix(0, 0), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if j.Start.Before(outage) && j.Updated.After(back) {
			spanning++
		}
		for rank, list := range ps {
			checked++
			total += len(list)
			for i := 1; i < len(list); i++ {
				if gap := list[i].Time.Add(-list[i].Span).Sub(list[i-1].Time); gap > time.Millisecond || gap < -time.Millisecond {
					t.Errorf("job %s rank %d: sample at %s covers from %s, the previous ended at %s: %s missing",
						j.ID, rank, list[i].Time.Format(time.RFC3339Nano), list[i].Time.Add(-list[i].Span).Format(time.RFC3339Nano),
						list[i-1].Time.Format(time.RFC3339Nano), gap)
				}
			}
		}
	}
	if spanning == 0 || checked == 0 {
		t.Errorf("%d jobs spanning the outage, %d ranks checked", spanning, checked)
	}
	t.Logf("%d sweeps; %d jobs (%d spanning the outage), %d ranks, %d process samples, chains unbroken", sweeps, len(jobs), spanning, checked, total)
}

// TestCollectorsAPIRole runs a collector (a simulated fabric, loadgen's
// MPI jobs) and a `netloom serve --role api` daemon on one PostgreSQL
// database: the API daemon lists the running jobs, streams the map's
// sweeps as the collector stores them, and, once the jobs have ended,
// answers every page's questions about the run exactly as the collector
// does.
func TestCollectorsAPIRole(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	pg := startPostgres(t, ctx)
	dbURL, err := pg.CreateDB(ctx, "api")
	if err != nil {
		t.Fatal(err)
	}
	col, agent := serve(t, t.TempDir(), nil, "--fabric", "sim:"+collectorsFabric, "--db", dbURL,
		"--agent-listen", "127.0.0.1:0", "--agent-address-file", "-",
		"--sweep-interval", "500ms", "--discover-interval", "2s", "--job-timeout", "2s")
	apid, _ := serve(t, t.TempDir(), nil, "--role", "api", "--db", dbURL, "--agent-listen", "off",
		"--sweep-interval", "500ms", "--poll-interval", "500ms")
	if strings.Contains(apid.log.String(), "MPI agents") {
		t.Errorf("the API daemon listens for agents:\n%s", apid.log)
	}
	lg := exec.CommandContext(ctx, netloomBin, "loadgen", "--system", collectorsFabric, "--target", agent,
		"--duration", "8s", "--interval", "300ms", "--ranks-per-node", "2", "--max-job-nodes", "4", "--job-lifetime", "3s")
	lgOut := &strings.Builder{}
	lg.Stdout, lg.Stderr = lgOut, lgOut
	if err := lg.Start(); err != nil {
		t.Fatal(err)
	}

	// Running jobs, from the jobs' saves.
	apid.waitFor(func() bool {
		var l struct{ Total int }
		return apid.get("/api/v1/jobs?state=running", &l) == 200 && l.Total > 0
	}, "running jobs on the API daemon")
	// The live map: the API daemon's stream sends the collector's sweeps.
	var colFabric struct{ Version int64 }
	col.get("/api/v1/fabric", &colFabric)
	msgs := streamSweeps(t, apid, 3, 20*time.Second)
	for i, m := range msgs {
		if m.Version != colFabric.Version || m.Links == 0 || !measured(t, m.Util) {
			t.Errorf("stream message %d: %+v; want version %d with measured links", i, m, colFabric.Version)
		}
		if i > 0 && (m.Sweep <= msgs[i-1].Sweep || m.Time <= msgs[i-1].Time) {
			t.Errorf("stream message %d: sweep %d at %g after sweep %d at %g", i, m.Sweep, m.Time, msgs[i-1].Sweep, msgs[i-1].Time)
		}
	}

	if err := lg.Wait(); err != nil {
		t.Fatalf("loadgen: %v\n%s", err, lgOut)
	}
	col.waitFor(func() bool {
		var l struct{ Total int }
		return col.get("/api/v1/jobs?state=running", &l) == 200 && l.Total == 0
	}, "every job to end")
	time.Sleep(2 * time.Second) // the last jobs' final saves and attribution
	end := time.Now()
	want, got := uiAnswers(t, col, end), uiAnswers(t, apid, end)
	for _, p := range []string{"/api/v1/fabric/nodes?at=" + url.QueryEscape(end.Format(time.RFC3339Nano)), "/api/v1/links/top?n=5&at=" + url.QueryEscape(end.Format(time.RFC3339Nano))} {
		want[p], got[p] = rawGet(t, col, p), rawGet(t, apid, p)
	}
	size := 0
	for path, w := range want {
		size += len(w)
		if got[path] != w {
			t.Errorf("GET %s differs:\n api %s\n collector %s", path, clip(got[path]), clip(w))
		}
	}
	t.Logf("compared %d answers (%d bytes of JSON); %d stream messages", len(want), size, len(msgs))
	var e struct{ Reason string }
	if code := apid.get("/api/v1/alerts", &e); code != http.StatusNotImplemented || e.Reason != "not_on_api_daemon" {
		t.Errorf("alerts on the API daemon: %d %+v, want 501 not_on_api_daemon", code, e)
	}
}

func rawGet(t *testing.T, d *daemon, path string) string {
	t.Helper()
	var v json.RawMessage
	if code := d.get(path, &v); code != 200 {
		t.Fatalf("GET %s: %d %s", path, code, v)
	}
	return string(v)
}

// sweepMessage is the part of a stream "sweep" event the tests read.
type sweepMessage struct {
	Version int64
	Sweep   int64
	Time    float64
	Links   int
	Util    string
}

// streamSweeps reads n "sweep" events from d's live stream, skipping the
// state before the first sweep (no samples yet).
func streamSweeps(t *testing.T, d *daemon, n int, within time.Duration) []sweepMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", d.base+"/api/v1/fabric/stream", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("stream: %s", resp.Status)
	}
	var out []sweepMessage
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	event := ""
	for len(out) < n && sc.Scan() {
		line := sc.Text()
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			event = e
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok && event == "sweep" {
			var m sweepMessage
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				t.Fatalf("stream data %q: %v", data, err)
			}
			if m.Sweep > 0 {
				out = append(out, m)
			}
		}
	}
	if len(out) < n {
		t.Fatalf("%d of %d sweep events in %s: %v", len(out), n, within, sc.Err())
	}
	return out
}

// measured tells whether a stream message's util has a measured link.
func measured(t *testing.T, util string) bool {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(util)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range b {
		if u != 255 {
			return true
		}
	}
	return false
}
