package e2e

// What a second user can learn by probing the API (docs/security.md, "Roles"),
// asked as two real local users whose real Open MPI jobs ran under the
// daemon: link ids answered alike whatever lies behind them, another user's
// job indistinguishable from none (by status, body and time), and
// parameters that are not numbers refused.

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

const probeA, probeB = "nlprobe-a", "nlprobe-b"

// probeBench is a daemon on a simulated fat tree with accounts for an
// administrator and two local users, each with an API token, whose jobs
// run as those users and may write replay traces under the daemon's trace
// root.
type probeBench struct {
	t           *testing.T
	d           *daemon
	agent       string
	args        []string
	dir, share  string
	root        string // the trace root, a folder of each user's under it
	prog, wrap  string
	lib         string
	launcher    string
	tokens      map[string]string
	admin, a, b *apiClient
}

func startProbeBench(t *testing.T) *probeBench {
	t.Helper()
	m, uids := localUsers(t, context.Background(), probeA, probeB)
	p := &probeBench{t: t, launcher: m.launcher, dir: t.TempDir(), tokens: map[string]string{}}
	// The program, the agent and the node-naming wrapper where both users
	// can read them.
	share, prog := ringForAll(t, m)
	p.share, p.prog, p.wrap, p.lib = share, prog, filepath.Join(share, "wrap.sh"), filepath.Join(share, "libnetloom.so")
	os.WriteFile(p.wrap, []byte(modelWrap), 0o755)
	if out, err := exec.Command("cp", m.lib, p.lib).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	p.root = filepath.Join(share, "traces")
	for _, u := range []string{probeA, probeB} {
		dir := filepath.Join(p.root, u)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o700)
		os.Chown(dir, uids[u], uids[u])
	}
	// No rate limit: the probes are thousands of requests, their timing
	// measured.
	cfg := addAccounts(t, p.dir, map[string]string{"root-admin": "admin-pass-1", probeA: "a-pass-123", probeB: "b-pass-123"}, "  rate_limit: -1\n")
	for _, u := range []string{"root-admin", probeA, probeB} {
		out, err := exec.Command(netloomBin, "token", "add", u, "--config", cfg, "--label", "probe").Output()
		if err != nil {
			t.Fatal(err)
		}
		p.tokens[u] = strings.TrimSpace(string(out))
	}
	p.args = []string{"--config", cfg, "--anonymous", "none", "--fabric", "sim:fat-tree:hosts=8,radix=8",
		"--db", filepath.Join(p.dir, "netloom.db"), "--agent-listen", "127.0.0.1:0", "--agent-address-file", "-",
		"--job-timeout", "10s", "--sweep-interval", "300ms", "--agent-auth", "none", "--trace-root", p.root}
	p.start()
	return p
}

// start starts the daemon on the bench's database and signs everyone in.
func (p *probeBench) start() {
	p.d, p.agent = serve(p.t, p.dir, nil, p.args...)
	client := func(u string) *apiClient {
		c := newClient(p.t, p.d.base, u)
		c.token = p.tokens[u]
		return c
	}
	p.admin, p.a, p.b = client("root-admin"), client(probeA), client(probeB)
}

// restart stops the daemon as a service manager does and starts it again:
// the jobs it held live are then in its store alone.
func (p *probeBench) restart() {
	p.d.stop()
	p.start()
}

// run runs a traced 2-rank ring as user on the nodes named ("n1,n2") and
// waits until the daemon has it finished with its links attributed.
func (p *probeBench) run(as, job, nodes string, rounds int) {
	t := p.t
	t.Helper()
	env := []string{"LD_PRELOAD=" + p.lib, "NETLOOM_DAEMON=" + p.agent, "NETLOOM_INTERVAL=0.2", "NETLOOM_JOB_ID=" + job,
		"NETLOOM_TRACE=1", "NETLOOM_OUTPUT=" + filepath.Join(p.root, as)}
	args := append([]string{"runuser", "-u", as, "--", "env", "HOME=/tmp"}, env...)
	args = append(args, p.launcher, "--oversubscribe", "-np", "2")
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		args = append(args, "-x", k)
	}
	args = append(args, "sh", p.wrap, nodes, p.prog, strconv.Itoa(rounds))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = p.share
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s's job %s: %v\n%s", as, job, err, out)
	}
	p.d.waitFor(func() bool {
		var v authJob
		var l struct{ Links []struct{} }
		return p.admin.get("/api/v1/jobs/"+job, &v) == 200 && v.Job.State == "finished" && v.Job.Finalized == 2 &&
			p.admin.get("/api/v1/jobs/"+job+"/links", &l) == 200 && len(l.Links) > 0
	}, "job "+job+" to finish with its links attributed")
}

// linksOf is the ids of the links job crossed, by the administrator's view.
func (p *probeBench) linksOf(job string) map[string]bool {
	var l struct {
		Links []struct{ Link struct{ ID string } }
	}
	if code := p.admin.get("/api/v1/jobs/"+job+"/links?limit=1000", &l); code != 200 {
		p.t.Fatalf("links of %s: %d", job, code)
	}
	out := map[string]bool{}
	for _, x := range l.Links {
		out[x.Link.ID] = true
	}
	return out
}

// TestLinkProbes: as a user, every link-scoped endpoint answers every link
// id they may not see (a real link their jobs did not cross, a port without
// a link, a port or node that does not exist, a link with a wrong far end,
// no id at all) with one answer, byte for byte, naming nothing; their own
// links are answered.
func TestLinkProbes(t *testing.T) {
	p := startProbeBench(t)
	p.run(probeA, "probe-a", "n1,n2", 3)
	p.run(probeB, "probe-b", "n5,n7", 3)
	mine := p.linksOf("probe-a")
	theirs := p.linksOf("probe-b")

	var fab struct {
		Links []struct {
			ID   string
			A, B struct {
				GUID string
				Port int
			}
		}
	}
	if code := p.admin.get("/api/v1/fabric/links", &fab); code != 200 {
		t.Fatalf("fabric links: %d", code)
	}
	var nodes struct {
		Nodes []struct {
			GUID        string
			Description string
			Ports       int
		}
	}
	if code := p.admin.get("/api/v1/fabric/nodes", &nodes); code != 200 {
		t.Fatalf("fabric nodes: %d", code)
	}
	linked := map[string]bool{}
	visible := map[string]bool{} // ids that name one of A's links
	var probes []string
	for _, l := range fab.Links {
		a, b := fmt.Sprintf("%s:%d", l.A.GUID, l.A.Port), fmt.Sprintf("%s:%d", l.B.GUID, l.B.Port)
		linked[a], linked[b] = true, true
		for _, id := range []string{l.ID, a, b, b + "-" + a} {
			probes = append(probes, id)
			visible[id] = mine[l.ID]
		}
		probes = append(probes, a+"-0x00000000deadbeef:1") // a real port, a far end that is not its peer
	}
	for _, n := range nodes.Nodes {
		for port := 0; port <= n.Ports+1; port++ {
			if id := fmt.Sprintf("%s:%d", n.GUID, port); !linked[id] {
				probes = append(probes, id) // a port without a link, or no such port
			}
		}
		probes = append(probes, n.GUID+":254")
	}
	for i := range 8 {
		probes = append(probes, fmt.Sprintf("0x00000000deadbe%02x:1", i)) // no such node
	}
	probes = append(probes, "nonsense", "0x1234", "n1", "n1:1", "0x00000000deadbe00:1-0x00000000deadbe01:1")
	seenTheirs := 0
	for id := range theirs {
		if !mine[id] {
			seenTheirs++
		}
	}
	if len(mine) == 0 || seenTheirs == 0 {
		t.Fatalf("A's job crossed %d links, B's %d that A's did not: want some of each", len(mine), seenTheirs)
	}

	routes := []string{"/api/v1/links/%s", "/api/v1/links/%s/counters", "/api/v1/links/%s/jobs", "/api/v1/links/%s/jobs/probe-a/pairs"}
	var descriptions []string
	for _, n := range nodes.Nodes {
		descriptions = append(descriptions, n.Description)
	}
	type answer struct {
		code int
		body string
	}
	hidden := map[answer][]string{}
	ownSeen := 0
	for _, route := range routes {
		for _, id := range probes {
			path := fmt.Sprintf(route, id)
			code, body := p.a.do("GET", path, nil)
			if visible[id] {
				if code != 200 {
					t.Errorf("A's own link: GET %s: %d %.300s", path, code, body)
				}
				ownSeen++
				continue
			}
			hidden[answer{code, string(body)}] = append(hidden[answer{code, string(body)}], path)
			if len(hidden) == 1 {
				for _, word := range append([]string{"0x", id}, descriptions...) {
					if strings.Contains(string(body), word) {
						t.Errorf("GET %s names %q: %s", path, word, body)
					}
				}
			}
		}
	}
	if len(hidden) != 1 {
		for a, paths := range hidden {
			t.Errorf("%d answers %d %.200s, e.g. for %s", len(paths), a.code, a.body, paths[0])
		}
		t.Fatalf("%d different answers to the links A may not see; want one", len(hidden))
	}
	for a, paths := range hidden {
		if a.code != 404 {
			t.Errorf("the answer is %d; want 404", a.code)
		}
		t.Logf("%d probes of links A may not see, on %d endpoints, all answered %d %s (and %d of A's own links answered)",
			len(paths), len(routes), a.code, strings.TrimSpace(a.body), ownSeen)
	}
	// The probes of real links are real: the administrator sees each one.
	for _, l := range fab.Links {
		if code, body := p.admin.do("GET", "/api/v1/links/"+l.ID, nil); code != 200 {
			t.Errorf("the administrator's GET /links/%s: %d %.200s", l.ID, code, body)
		}
	}
}

// timed is one answer with the time it took.
type timed struct {
	code int
	body string
	took time.Duration
}

func (c *apiClient) timedGet(path string) timed {
	c.t.Helper()
	start := time.Now()
	code, body := c.do("GET", path, nil)
	return timed{code, string(body), time.Since(start)}
}

// aboveShare is the share of pairs (x from xs, y from ys) with x > y, ties
// counting half (the Mann-Whitney U over n·m): 0.5 when neither tends to
// take longer.
func aboveShare(xs, ys []time.Duration) float64 {
	type v struct {
		d time.Duration
		x bool
	}
	all := make([]v, 0, len(xs)+len(ys))
	for _, d := range xs {
		all = append(all, v{d, true})
	}
	for _, d := range ys {
		all = append(all, v{d, false})
	}
	slices.SortFunc(all, func(a, b v) int { return cmp.Compare(a.d, b.d) })
	// rank sum of xs, ties given their mean rank
	var rx float64
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].d == all[i].d {
			j++
		}
		mean := float64(i+j+1) / 2 // ranks i+1..j
		for k := i; k < j; k++ {
			if all[k].x {
				rx += mean
			}
		}
		i = j
	}
	n, m := float64(len(xs)), float64(len(ys))
	return (rx - n*(n+1)/2) / (n * m)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestJobProbeTiming: as a user, every job endpoint answers another user's
// job exactly as a job that does not exist, in status and body, and in
// time: over interleaved requests in random order, neither takes longer
// than the other more often than chance allows, while B's job is held live
// and once it is in the store alone.
func TestJobProbeTiming(t *testing.T) {
	p := startProbeBench(t)
	p.run(probeA, "probe-a", "n1,n2", 3)
	p.run(probeB, "probe-b", "n3,n5", 3)
	routes := []string{"", "/processes", "/processes/0", "/processes/0/series", "/nodes", "/nodes/n3/series", "/series",
		"/matrix", "/histogram", "/profile", "/regions", "/gpu", "/links", "/why", "/model", "/placement"}
	const rounds = 120
	check := func(t *testing.T) {
		// A's own job is answered: the routes are real.
		for _, r := range []string{"", "/links", "/placement"} {
			if got := p.a.timedGet("/api/v1/jobs/probe-a" + r); got.code != 200 {
				t.Errorf("A's own job%s: %d %.200s", r, got.code, got.body)
			}
		}
		rng := rand.New(rand.NewPCG(1, 2))
		var allHidden, allNone []time.Duration
		type row struct {
			route        string
			hidden, none time.Duration
			share        float64
		}
		var rows []row
		for _, r := range routes {
			var hidden, none []time.Duration
			for i := range rounds {
				// a different id each time, none of them a job
				missing := fmt.Sprintf("probe-%c", 'c'+i%20)
				order := []string{"probe-b", missing}
				if rng.IntN(2) == 1 {
					order[0], order[1] = order[1], order[0]
				}
				var got [2]timed
				for k, id := range order {
					got[k] = p.a.timedGet("/api/v1/jobs/" + id + r)
				}
				if order[0] != "probe-b" {
					got[0], got[1] = got[1], got[0]
				}
				if got[0].code != 404 || got[0].code != got[1].code || got[0].body != got[1].body {
					t.Fatalf("GET /jobs/{id}%s: B's job %d %.200s; no job %d %.200s: want one 404", r, got[0].code, got[0].body, got[1].code, got[1].body)
				}
				if i > 0 { // the first of each route warms its path
					hidden, none = append(hidden, got[0].took), append(none, got[1].took)
				}
			}
			allHidden, allNone = append(allHidden, hidden...), append(allNone, none...)
			rows = append(rows, row{r, median(hidden), median(none), aboveShare(hidden, none)})
		}
		sort.Slice(rows, func(i, j int) bool { return rows[i].share > rows[j].share })
		for _, x := range rows {
			t.Logf("/jobs/{id}%-22s median %6.0f µs for B's job, %6.0f µs for none; B's slower in %.0f%% of pairs",
				x.route, float64(x.hidden.Nanoseconds())/1e3, float64(x.none.Nanoseconds())/1e3, 100*x.share)
			// With 119 of each, chance alone moves the share by about 4
			// points (one standard deviation); the 0.94 against
			// 0.68 ms made it about 90%.
			if x.share > 0.7 || x.share < 0.3 {
				t.Errorf("/jobs/{id}%s: B's job slower in %.0f%% of pairs: its existence shows in the time", x.route, 100*x.share)
			}
		}
		share := aboveShare(allHidden, allNone)
		t.Logf("all routes: median %.0f µs for B's job, %.0f µs for none; B's slower in %.1f%% of pairs",
			float64(median(allHidden).Nanoseconds())/1e3, float64(median(allNone).Nanoseconds())/1e3, 100*share)
		if share > 0.6 || share < 0.4 {
			t.Errorf("over all routes B's job is slower in %.1f%% of pairs: its existence shows in the time", 100*share)
		}
	}
	t.Run("live", check)
	p.restart()
	p.d.waitFor(func() bool {
		var v authJob
		return p.admin.get("/api/v1/jobs/probe-b", &v) == 200 && v.Job.State == "finished"
	}, "B's job in the store")
	p.d.waitFor(func() bool {
		code, _ := p.a.do("GET", "/api/v1/jobs/probe-a/placement", nil)
		return code == 200
	}, "the node map")
	t.Run("stored", check)
}

// TestNonNumbersAndNames: parameters that are not numbers (NaN, Inf) or
// lie beyond what a replay computes with are a 400 naming the parameter,
// never a 200 without a body or the replay's own words; a login is one
// JSON object; an agent's user name with a control character is refused
// and counted; a trace file the daemon will not read is logged with why.
func TestNonNumbersAndNames(t *testing.T) {
	p := startProbeBench(t)
	p.run(probeA, "probe-a", "n1,n2", 3)
	for _, c := range []struct {
		who   *apiClient
		path  string
		param string
	}{
		{p.admin, "/api/v1/hotspots?min_utilization=NaN", "min_utilization"},
		{p.admin, "/api/v1/hotspots?min_utilization=Inf", "min_utilization"},
		{p.admin, "/api/v1/hotspots?min_xmit_wait=NaN", "min_xmit_wait"},
		{p.admin, "/api/v1/hotspots?min_xmit_wait=-Inf", "min_xmit_wait"},
		{p.admin, "/api/v1/hotspots?min_xmit_wait=1e400", "min_xmit_wait"},
		{p.admin, "/api/v1/health?ber_limit=NaN", "ber_limit"},
		{p.admin, "/api/v1/health?ber_limit=%2BInf", "ber_limit"},
		{p.admin, "/api/v1/fabric/errors?from=NaN", "from"},
		{p.admin, "/api/v1/links/top?at=Inf", "at"},
		{p.a, "/api/v1/jobs/probe-a/links?from=NaN", "from"},
		{p.a, "/api/v1/jobs/probe-a/model?network=xNaN", "network"},
		{p.a, "/api/v1/jobs/probe-a/model?network=xInf", "network"},
		{p.a, "/api/v1/jobs/probe-a/model?network=x1e300", "network"},
		{p.a, "/api/v1/jobs/probe-a/model?network=x1e-300", "network"},
		{p.a, "/api/v1/jobs/probe-a/model?network=bandwidth=NaNGB/s", "network"},
		{p.a, "/api/v1/jobs/probe-a/model?network=bandwidth=1e300GB/s", "network"},
		{p.a, "/api/v1/jobs/probe-a/model?network=latency=1000h", "network"},
	} {
		code, body := c.who.do("GET", c.path, nil)
		if code != 400 || !strings.Contains(string(body), "parameter "+c.param+":") {
			t.Errorf("%s GET %s: %d %.300s; want a 400 naming %s", c.who.name, c.path, code, body, c.param)
		}
		for _, word := range []string{"smpi", "simgrid", "xbt", "/tmp", p.share} {
			if strings.Contains(strings.ToLower(string(body)), strings.ToLower(word)) {
				t.Errorf("%s GET %s: the answer holds %q: %.300s", c.who.name, c.path, word, body)
			}
		}
	}
	// The bounds leave the scenarios people ask for: answered.
	if code, body := p.a.do("GET", "/api/v1/jobs/probe-a/model?network=x1000&network=x0.001&network=bandwidth=1GB/s,latency=10s", nil); code != 200 {
		t.Errorf("A's model at the bounds: %d %.300s", code, body)
	}

	// A login is exactly one JSON object.
	for _, body := range []string{`{"user":"nlprobe-a","password":"a-pass-123"} trailing`, `{"user":"nlprobe-a","password":"a-pass-123"}{}`,
		`[{"user":"nlprobe-a","password":"a-pass-123"}]`, `null`} {
		c := newClient(t, p.d.base, "login")
		code, got := c.do("POST", "/api/v1/auth/login", []byte(body))
		if code != 400 || !strings.Contains(string(got), "bad_body") {
			t.Errorf("login %s: %d %s; want a 400 bad_body", body, code, got)
		}
	}
	if n := metricValue(t, p.admin, `netloom_auth_failures_total{reason="bad_body"}`); n != 4 {
		t.Errorf("bad_body refusals counted: %v; want 4", n)
	}
	newClient(t, p.d.base, probeA).login(probeA, "a-pass-123") // one object signs in

	// Unverified agents (agent_auth none) claim a user name with a NUL.
	before := metricValue(t, p.admin, `netloom_ingest_datagrams_dropped_total{reason="bad_string"}`)
	conn := sender(t, "127.0.0.1", p.agent)
	start := time.Now()
	for seq := range uint64(3) {
		conn.Write(snap(t, "probe-nul", 0, 1, seq, start, probeA+"\x00root"))
	}
	p.d.waitFor(func() bool {
		return metricValue(t, p.admin, `netloom_ingest_datagrams_dropped_total{reason="bad_string"}`) >= before+3
	}, "the datagrams refused as bad_string")
	if code, body := p.admin.do("GET", "/api/v1/jobs/probe-nul", nil); code != 404 {
		t.Errorf("the job of a user with a NUL: %d %.300s", code, body)
	}
	if !strings.Contains(p.d.log.String(), `bad_string`) {
		t.Errorf("the refusal is not in the daemon's log:\n%s", tailString(p.d.log.String(), 20))
	}

	// A trace file that is a FIFO, another that is a link: refused, and
	// logged with why.
	job := filepath.Join(p.root, probeA, "probe-a")
	asA := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("runuser", append([]string{"-u", probeA, "--"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("as %s: %v: %v\n%s", probeA, args, err, out)
		}
	}
	for _, c := range []struct{ file, why string }{{"rank-0.ti.json", "not a regular file"}, {"rank-1.ti.gz", "too many levels of symbolic links"}} {
		path := filepath.Join(job, c.file)
		asA("mv", path, path+".orig")
		if c.why == "not a regular file" {
			asA("mkfifo", path)
		} else {
			asA("ln", "-s", "/etc/shadow", path)
		}
		code, body := p.a.do("GET", "/api/v1/jobs/probe-a/model?network=x3", nil)
		os.Remove(path)
		asA("mv", path+".orig", path)
		if code != 404 || !strings.Contains(string(body), "no_trace") {
			t.Errorf("%s swapped: %d %.300s; want 404 no_trace", c.file, code, body)
		}
		var logged string
		for _, line := range strings.Split(p.d.log.String(), "\n") {
			if strings.Contains(line, "trace file refused") && strings.Contains(line, c.file) {
				logged = line
			}
		}
		if !strings.Contains(logged, c.why) {
			t.Errorf("%s swapped: no log line of its refusal saying %q:\n%s", c.file, c.why, tailString(p.d.log.String(), 20))
		}
		t.Logf("logged: %s", logged)
	}
}
