package e2e

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"strings"
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

// TestCollectorsOutage stops the database for 30 s while a collector
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
		"--duration", "45s", "--interval", "500ms", "--ranks-per-node", "2", "--max-job-nodes", "4")
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
	for time.Since(outage) < 30*time.Second {
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
	d.stop()
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
	if inOutage < 45 {
		t.Errorf("%d sweeps stored from the outage, want about 60", inOutage)
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
	// The links' consistency check reads the counters two sweeps past the
	// range's end (analysis.WidenAfter): the daemons answer alike once
	// those sweeps are stored.
	time.Sleep(3 * time.Second)
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

// TestCollectorsFabrics runs two collectors, each owning one simulated
// fabric (east and west, hosts a1..a8 and b1..b8), and a `netloom serve
// --role api` daemon on one PostgreSQL database, with loadgen's jobs
// reporting to the collector of their nodes' fabric and one job whose
// ranks report to both. Every daemon shows both fabrics (map, nodes,
// links, versions, events, port history), each fabric's jobs attributed
// on its own links, and the spanning job joined by its id; the three
// answer the pages' questions about the run alike.
func TestCollectorsFabrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	pg := startPostgres(t, ctx)
	dbURL, err := pg.CreateDB(ctx, "fabrics")
	if err != nil {
		t.Fatal(err)
	}
	const east, west = "fat-tree:hosts=8,radix=4,prefix=a", "fat-tree:hosts=8,radix=4,prefix=b"
	collector := func(spec, name string) (*daemon, string) {
		return serve(t, t.TempDir(), nil, "--fabric", "sim:"+spec, "--fabric-name", name, "--db", dbURL,
			"--agent-listen", "127.0.0.1:0", "--agent-address-file", "-", "--poll-interval", "500ms",
			"--sweep-interval", "500ms", "--discover-interval", "2s", "--job-timeout", "2s")
	}
	colE, agentE := collector(east, "east")
	colW, agentW := collector(west, "west")
	apid, _ := serve(t, t.TempDir(), nil, "--role", "api", "--db", dbURL, "--agent-listen", "off",
		"--sweep-interval", "500ms", "--poll-interval", "500ms")
	lg := exec.CommandContext(ctx, netloomBin, "loadgen", "--system", east, "--target", agentE, "--system", west, "--target", agentW,
		"--duration", "8s", "--interval", "300ms", "--ranks-per-node", "2", "--max-job-nodes", "4", "--job-lifetime", "3s")
	lgOut := &strings.Builder{}
	lg.Stdout, lg.Stderr = lgOut, lgOut
	if err := lg.Start(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()

	// The live views: every daemon's map and node list hold both fabrics,
	// measured (each sweep's samples of both, one poll later at most).
	type node struct {
		GUID                      fabric.GUID
		Type, Description, Fabric string
	}
	for _, d := range []*daemon{colE, colW, apid} {
		var nodes struct{ Nodes []node }
		d.waitFor(func() bool {
			return d.get("/api/v1/fabric/nodes", &nodes) == 200 && len(nodes.Nodes) == 2*(8+6)
		}, "both fabrics' nodes")
		by := map[string]int{}
		for _, n := range nodes.Nodes {
			by[n.Fabric+" "+n.Type+" "+n.Description[:1]]++
		}
		if by["east ca a"] != 8 || by["west ca b"] != 8 || by["east switch a"] != 6 || by["west switch b"] != 6 {
			t.Errorf("%s: nodes by fabric, type and first letter %v; want a* in east, b* in west", d.base, by)
		}
		var lay struct {
			GUID, Name, Fabrics []string
			Fabric              []int
		}
		if d.get("/api/v1/fabric/layout", &lay); len(lay.GUID) != len(nodes.Nodes) {
			t.Errorf("%s: the map lays out %d nodes, want %d", d.base, len(lay.GUID), len(nodes.Nodes))
		} else if !slices.Equal(lay.Fabrics, []string{"east", "west"}) || len(lay.Fabric) != len(lay.GUID) {
			t.Errorf("%s: the map's fabrics %v, %d node indexes; want [east west] and one per node", d.base, lay.Fabrics, len(lay.Fabric))
		} else {
			for i, name := range lay.Name {
				if want := map[byte]string{'a': "east", 'b': "west"}[name[0]]; lay.Fabrics[lay.Fabric[i]] != want {
					t.Errorf("%s: the map puts %s in fabric %s, want %s", d.base, name, lay.Fabrics[lay.Fabric[i]], want)
				}
			}
		}
		d.waitFor(func() bool {
			var top struct {
				Links []struct{ Link struct{ A fabric.PortRef } }
			}
			if d.get("/api/v1/links/top?n=100", &top) != 200 {
				return false
			}
			seen := map[string]bool{}
			for _, l := range top.Links {
				for _, n := range nodes.Nodes {
					if n.GUID == l.Link.A.GUID {
						seen[n.Fabric] = true
					}
				}
			}
			return seen["east"] && seen["west"]
		}, "measured links of both fabrics")
	}
	// The job across the fabrics runs on a8 (east) and b1 (west): its
	// ranks report to both collectors, and the API daemon shows it joined.
	var span json.RawMessage
	apid.waitFor(func() bool {
		var j struct{ Job struct{ Reporting int } }
		ok := apid.get("/api/v1/jobs/lg-1-1", &span) == 200 && json.Unmarshal(span, &j) == nil && j.Job.Reporting == 4
		if !ok && time.Since(start) > 25*time.Second {
			t.Logf("the spanning job on the API daemon: %s\neast: %s\nwest: %s", clip(string(span)),
				tailString(colE.log.String(), 20), tailString(colW.log.String(), 20))
		}
		return ok
	}, "the spanning job's ranks from both collectors")

	if err := lg.Wait(); err != nil {
		t.Fatalf("loadgen: %v\n%s", err, lgOut)
	}
	for _, d := range []*daemon{colE, colW} {
		d.waitFor(func() bool {
			var l struct {
				Total int
				Jobs  []json.RawMessage
			}
			ok := d.get("/api/v1/jobs?state=running", &l) == 200 && l.Total == 0
			if !ok && time.Since(start) > 35*time.Second {
				t.Logf("%s: running: %d %s", d.base, l.Total, l.Jobs)
			}
			return ok
		}, "every job to end")
	}
	time.Sleep(2 * time.Second) // the last jobs' final saves and attribution
	end := time.Now()
	// The links' consistency check reads the counters two sweeps past the
	// range's end (analysis.WidenAfter): the daemons answer alike once
	// those sweeps are stored.
	time.Sleep(3 * time.Second)

	var j struct {
		Job struct {
			Ranks, Reporting, Finalized, Nodes int
			State                              string
			Traffic                            struct{ P2P, Coll struct{ Bytes uint64 } }
		}
		Processes []struct {
			Rank int
			Node string
		}
	}
	apid.get("/api/v1/jobs/lg-1-1", &j)
	nodes := map[string]bool{}
	for _, p := range j.Processes {
		nodes[p.Node] = true
	}
	if js := j.Job; js.State != "finished" || js.Ranks != 4 || js.Reporting != 4 || js.Finalized != 4 || js.Nodes != 2 || len(j.Processes) != 4 || !nodes["a8"] || !nodes["b1"] {
		t.Errorf("the spanning job: %+v; want 4 ranks on a8 and b1, all finalized", j)
	}
	// Once ended, the collectors read it from the database: joined too.
	var parts [2]struct{ Job struct{ Reporting int } }
	for i, d := range []*daemon{colE, colW} {
		d.get("/api/v1/jobs/lg-1-1", &parts[i])
	}
	if parts[0].Job.Reporting != 4 || parts[1].Job.Reporting != 4 {
		t.Errorf("the spanning job on the collectors: %+v, want it joined on both", parts)
	}

	// The pages' answers: the same on every daemon, and both fabrics in
	// them; each single-fabric job's links are on its own fabric. (A
	// collector shows its own jobs from memory for two minutes after they
	// end, as TestCollectorsAPIRole checks; the joined job it leaves to the
	// database.)
	want := uiAnswers(t, apid, end)
	compared := 0
	for _, d := range []*daemon{colE, colW} {
		got := uiAnswers(t, d, end)
		for path, w := range want {
			if strings.HasPrefix(path, "/api/v1/jobs") && !strings.HasPrefix(path, "/api/v1/jobs/lg-1-1/") && !strings.HasSuffix(path, "/lg-1-1") {
				continue
			}
			compared++
			if got[path] != w {
				i := firstDiff(got[path], w)
				t.Errorf("GET %s differs at byte %d:\n %s: …%s\n api: …%s", path, i, d.base, clip(got[path][max(0, i-200):]), clip(w[max(0, i-200):]))
			}
		}
	}
	at := url.QueryEscape(end.Format(time.RFC3339Nano))
	rng := "from=" + url.QueryEscape(end.Add(-10*time.Minute).Format(time.RFC3339Nano)) + "&to=" + at
	var vs struct{ Versions []struct{ Fabric string } }
	apid.get("/api/v1/fabric/versions?"+rng, &vs)
	var ev struct {
		Events []struct{ Kind, Fabric string }
	}
	apid.get("/api/v1/events?"+rng, &ev)
	fabrics := map[string]int{}
	for _, v := range vs.Versions {
		fabrics["version "+v.Fabric]++
	}
	for _, e := range ev.Events {
		if e.Kind == fabric.EventDiscovered {
			fabrics["discovered "+e.Fabric]++
		}
	}
	if fabrics["version east"] != 1 || fabrics["version west"] != 1 || fabrics["discovered east"] != 1 || fabrics["discovered west"] != 1 {
		t.Errorf("versions and first-discovery events by fabric: %v; want one of each per fabric", fabrics)
	}
	var all struct{ Nodes []node }
	apid.get("/api/v1/fabric/nodes?at="+at, &all)
	fabricOf := map[fabric.GUID]string{}
	for _, n := range all.Nodes {
		fabricOf[n.GUID] = n.Fabric
	}
	var list struct {
		Jobs []struct {
			ID    string
			Nodes int
		}
	}
	apid.get("/api/v1/jobs?limit=1000", &list)
	linked := map[string]int{}
	for _, lj := range list.Jobs {
		var jj struct {
			Processes []struct{ Node string }
		}
		apid.get("/api/v1/jobs/"+lj.ID, &jj)
		var links struct {
			Links []struct{ From fabric.PortRef }
		}
		apid.get("/api/v1/jobs/"+lj.ID+"/links", &links)
		if lj.ID == "lg-1-1" || len(jj.Processes) == 0 {
			continue
		}
		want := map[byte]string{'a': "east", 'b': "west"}[jj.Processes[0].Node[0]]
		for _, l := range links.Links {
			if f := fabricOf[l.From.GUID]; f != want {
				t.Errorf("job %s on %s's nodes has traffic on link %s of fabric %q", lj.ID, want, l.From, f)
			}
			linked[want]++
		}
	}
	if linked["east"] == 0 || linked["west"] == 0 {
		t.Errorf("links of single-fabric jobs by fabric: %v; want some on each", linked)
	}
	// Routes by node name answer within each fabric (both number their
	// LIDs from 1), and none joins two fabrics.
	var rt struct {
		Hops []struct{ Description string }
	}
	if code := apid.get("/api/v1/routes?src=b1&dst=b8", &rt); code != 200 || len(rt.Hops) < 3 || !strings.HasPrefix(rt.Hops[1].Description, "b-") {
		t.Errorf("route b1 -> b8 on the API daemon: %d %+v", code, rt)
	}
	var e struct{ Error string }
	if code := apid.get("/api/v1/routes?src=a1&dst=b1", &e); code != 404 || !strings.Contains(e.Error, "no route joins fabrics") {
		t.Errorf("route a1 -> b1: %d %+v", code, e)
	}
	// A switch port's history on each fabric (a host's leaf port), from
	// the API daemon.
	for _, name := range []string{"a1", "b1"} {
		var n struct {
			Node  struct{ Fabric string }
			Ports []struct{ Peer *fabric.PortRef }
		}
		if code := apid.get("/api/v1/nodes/"+name, &n); code != 200 || len(n.Ports) == 0 || n.Ports[0].Peer == nil {
			t.Fatalf("node %s: %d %+v", name, code, n)
		}
		var c struct {
			Series struct{ Time []float64 }
		}
		if code := apid.get(fmt.Sprintf("/api/v1/ports/%s/counters?%s", n.Ports[0].Peer, rng), &c); code != 200 || len(c.Series.Time) < 5 {
			t.Errorf("the history of %s's leaf port %s (fabric %s): %d, %d samples", name, n.Ports[0].Peer, n.Node.Fabric, code, len(c.Series.Time))
		}
	}
	t.Logf("%d jobs, %d answers compared; spanning job %+v", len(list.Jobs), compared, j.Job)
}

// firstDiff is the index of the first byte where a and b differ.
func firstDiff(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}
