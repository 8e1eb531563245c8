package daemon

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/netloom/netloom/internal/ingest"
	"github.com/netloom/netloom/internal/ingest/agentpb"
	"github.com/netloom/netloom/internal/store"
)

// startAgentDaemon runs a daemon whose agent socket is on a free local
// port, accepting unverified datagrams; it returns the daemon, a connection to that socket and a sender of
// datagrams over it.
func startAgentDaemon(t *testing.T, db string) (*simDaemon, net.Conn, func(*agentpb.Datagram)) {
	t.Helper()
	addrFile := filepath.Join(t.TempDir(), "agent-address")
	s := startDaemon(t, db, "fat-tree:hosts=8,radix=8", func(c *Config) {
		c.AgentListen, c.AgentAddressFile, c.JobTimeout = "127.0.0.1:0", addrFile, 2*time.Second
		c.AgentAuth = "none" // these datagrams carry no credentials
	})
	b, err := os.ReadFile(addrFile)
	if err != nil {
		t.Fatalf("agent address file: %v", err)
	}
	if got := strings.TrimSpace(string(b)); got != s.d.AgentAddr() || !strings.HasPrefix(got, "127.0.0.1:") {
		t.Fatalf("agent address file says %q, daemon %q", got, s.d.AgentAddr())
	}
	conn, err := net.Dial("udp", s.d.AgentAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return s, conn, func(d *agentpb.Datagram) {
		b, err := proto.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
	}
}

// ringSnapshot is rank's cumulative snapshot k (from 1) of a ring job:
// each interval it sends 1 MiB in 4 messages to the next rank, and ranks
// live two per node.
func ringSnapshot(job string, rank, n int, k uint64, start time.Time, final bool) *agentpb.Datagram {
	node := func(r int) string { return fmt.Sprintf("n%d", r/2+1) }
	peer := (rank + 1) % n
	p2p := &agentpb.Traffic{Bytes: k << 20, Msgs: 4 * k}
	d := &agentpb.Datagram{Version: 1, JobId: job, Rank: uint32(rank), WorldSize: uint32(n), Seq: k - 1, Chunks: 1,
		StartUnixNs: start.UnixNano(), TimeUnixNs: start.Add(time.Duration(k) * 200 * time.Millisecond).UnixNano(), Final: final,
		Process: &agentpb.Process{Node: node(rank), Host: "h" + node(rank), Pid: uint32(100 + rank), CpuUserSeconds: 0.15 * float64(k),
			WallSeconds: 0.2 * float64(k), MpiSeconds: 0.05 * float64(k), VmRss: 50 << 20, VmHwm: 60 << 20},
		Functions: []*agentpb.FunctionStat{{Name: "MPI_Sendrecv", Calls: 4 * k, TimeNs: 50e6 * k, BytesSent: k << 20, BytesReceived: k << 20}},
		Regions:   []*agentpb.Region{{Name: "exchange", Entries: k, TimeNs: 100e6 * k, P2P: p2p}},
		Nodes:     []*agentpb.NodeTraffic{{Node: node(peer), P2P: p2p}},
		Peers:     []*agentpb.PeerTraffic{{Peer: uint32(peer), P2P: p2p, SizeHistogram: make([]uint64, 22)}},
	}
	d.Peers[0].SizeHistogram[21] = 4 * k // 256 KiB messages: 2^20 > s >= 2^18? bin i holds 2^(i-1) <= s < 2^i
	if node(peer) == node(rank) {
		d.Process.IntraNode = p2p
	} else {
		d.Process.InterNode = p2p
	}
	return d
}

func TestDaemonIngestsJobs(t *testing.T) {
	db := filepath.Join(t.TempDir(), "netloom.db")
	s, conn, send := startAgentDaemon(t, db)
	const n, snaps = 4, 4
	start := time.Now().Add(-time.Second).Truncate(time.Millisecond)
	for k := uint64(1); k <= snaps; k++ {
		for r := range n {
			send(ringSnapshot("ring-1", r, n, k, start, k == snaps))
			conn.Write([]byte("garbage"))
			bad := ringSnapshot("ring-1", r, n, k, start, false)
			bad.Version = 7
			send(bad)
			bad = ringSnapshot("ring-1", r, n, k, start, false)
			bad.Peers[0].Peer = 99
			send(bad)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var list struct {
		Total int
		Jobs  []struct {
			ID, State string
			Ranks     int
			Nodes     int
			Finalized int
			Traffic   struct{ P2P struct{ Bytes uint64 } }
			InterNode struct{ Bytes uint64 } `json:"inter_node"`
		}
	}
	s.waitFor("the job to finish", func() bool {
		return s.get("/api/v1/jobs?state=finished", &list) == 200 && len(list.Jobs) == 1
	})
	j := list.Jobs[0]
	if j.ID != "ring-1" || j.Ranks != n || j.Nodes != 2 || j.Finalized != n || j.Traffic.P2P.Bytes != n*snaps<<20 || j.InterNode.Bytes != 2*snaps<<20 {
		t.Errorf("job %+v", j)
	}
	checkJobAPI(t, s, "live")

	// Metrics count the bad datagrams by reason.
	resp, err := http.Get(s.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for reason, want := range map[string]int{"version": n * snaps, "malformed": n * snaps, "bad_peer": n * snaps} {
		m := regexp.MustCompile(`netloom_ingest_datagrams_dropped_total\{reason="` + reason + `"\} (\d+)`).FindSubmatch(body)
		if m == nil {
			t.Errorf("no drop counter for %s", reason)
			continue
		}
		if got, _ := strconv.Atoi(string(m[1])); got != want {
			t.Errorf("dropped %s = %d, want %d", reason, got, want)
		}
	}
	if !regexp.MustCompile(`netloom_ingest_datagrams_accepted_total ` + strconv.Itoa(n*snaps) + `\n`).Match(body) {
		t.Errorf("accepted counter wrong:\n%s", regexp.MustCompile(`netloom_ingest_datagrams_accepted_total.*`).Find(body))
	}

	// After a restart the job comes from the store.
	s.stop()
	s, _, _ = startAgentDaemon(t, db)
	checkJobAPI(t, s, "stored")
}

func checkJobAPI(t *testing.T, s *simDaemon, from string) {
	t.Helper()
	const n, snaps = 4, 4
	var detail struct {
		Job struct {
			State     string
			EndReason string `json:"end_reason"`
		} `json:"job"`
		Nodes []struct {
			Node  string
			Ranks []int
		}
		Processes []struct {
			Rank int
			Node string
		}
	}
	if code := s.get("/api/v1/jobs/ring-1", &detail); code != 200 {
		t.Fatalf("%s: detail: %d", from, code)
	}
	if detail.Job.State != "finished" || detail.Job.EndReason != "final" || len(detail.Nodes) != 2 || len(detail.Processes) != n ||
		fmt.Sprint(detail.Nodes[1].Ranks) != "[2 3]" {
		t.Errorf("%s: detail %+v", from, detail)
	}
	var mx struct {
		Labels []string
		Matrix [][]uint64
	}
	if code := s.get("/api/v1/jobs/ring-1/matrix?level=rank&class=p2p&metric=bytes", &mx); code != 200 || len(mx.Matrix) != n {
		t.Fatalf("%s: matrix %d %+v", from, code, mx)
	}
	for r := range n {
		if mx.Matrix[r][(r+1)%n] != snaps<<20 {
			t.Errorf("%s: matrix row %d = %v", from, r, mx.Matrix[r])
		}
	}
	if code := s.get("/api/v1/jobs/ring-1/matrix?level=node&metric=msgs", &mx); code != 200 ||
		fmt.Sprint(mx.Labels) != "[n1 n2]" || fmt.Sprint(mx.Matrix) != fmt.Sprintf("[[%d %d] [%d %d]]", 4*snaps, 4*snaps, 4*snaps, 4*snaps) {
		t.Errorf("%s: node matrix %d %+v", from, code, mx)
	}
	var prof struct {
		Profile struct {
			Functions []string
			Calls     [][]uint64
		}
	}
	if code := s.get("/api/v1/jobs/ring-1/profile", &prof); code != 200 || fmt.Sprint(prof.Profile.Functions) != "[MPI_Sendrecv]" ||
		len(prof.Profile.Calls) != n || prof.Profile.Calls[3][0] != 4*snaps {
		t.Errorf("%s: profile %d %+v", from, code, prof)
	}
	var hist struct{ Histogram struct{ Job []uint64 } }
	if code := s.get("/api/v1/jobs/ring-1/histogram", &hist); code != 200 || len(hist.Histogram.Job) != 22 || hist.Histogram.Job[21] != n*4*snaps {
		t.Errorf("%s: histogram %d %+v", from, code, hist)
	}
	var regions struct {
		Regions []struct {
			Name    string
			Entries uint64
		}
	}
	if code := s.get("/api/v1/jobs/ring-1/regions", &regions); code != 200 || len(regions.Regions) != 1 || regions.Regions[0].Entries != n*snaps {
		t.Errorf("%s: regions %d %+v", from, code, regions)
	}
	var series struct {
		Series struct {
			Time   []float64
			Values map[string][]float64
		}
	}
	if code := s.get("/api/v1/jobs/ring-1/processes/2/series", &series); code != 200 || len(series.Series.Time) != snaps-1 ||
		series.Series.Values["p2p_bytes"][0] != 1<<20 {
		t.Errorf("%s: process series %d %+v", from, code, series)
	}
	if code := s.get("/api/v1/jobs/ring-1/nodes/n2/series?step=200ms", &series); code != 200 || len(series.Series.Time) == 0 {
		t.Errorf("%s: node series %d %+v", from, code, series)
	}
	for path, want := range map[string]int{
		"/api/v1/jobs/nope":                                404,
		"/api/v1/jobs/ring-1/processes/9":                  404,
		"/api/v1/jobs/ring-1/processes/x/series":           400,
		"/api/v1/jobs/ring-1/matrix?level=switch":          400,
		"/api/v1/jobs/ring-1/matrix?class=udp":             400,
		"/api/v1/jobs?sort=color":                          400,
		"/api/v1/jobs?state=sleeping":                      400,
		"/api/v1/jobs?limit=0":                             400,
		"/api/v1/jobs/ring-1/nodes/n9/series":              404,
		"/api/v1/jobs?sort=inter_node_bytes&order=asc":     200,
		"/api/v1/jobs?state=all&sort=cpu&limit=1&offset=1": 200,
	} {
		if code := s.get(path, nil); code != want {
			t.Errorf("%s: GET %s: %d, want %d", from, path, code, want)
		}
	}
}

// TestAgentSidePublish: the live view is every aggregator's jobs, each
// aggregator's as it last published them.
func TestAgentSidePublish(t *testing.T) {
	var shown *ingest.Live
	show := func(l *ingest.Live) { shown = l }
	a := &agentSide{shards: make([]*ingest.Live, 3), show: show}
	job := func(id string) *store.Job { return &store.Job{JobSummary: store.JobSummary{ID: id}} }
	t0 := time.Unix(1000, 0)
	a.publish(1, &ingest.Live{Time: t0, Jobs: map[string]*store.Job{"a": job("a"), "b": job("b")}})
	a.publish(2, &ingest.Live{Time: t0.Add(time.Second), Jobs: map[string]*store.Job{"c": job("c")}})
	l := shown
	if len(l.Jobs) != 3 || l.Jobs["a"].ID != "a" || l.Jobs["c"].ID != "c" || !l.Time.Equal(t0.Add(time.Second)) {
		t.Fatalf("merged view %+v", l)
	}
	a.publish(1, &ingest.Live{Time: t0, Jobs: map[string]*store.Job{"b": job("b")}}) // a ended
	if l := shown; len(l.Jobs) != 2 || l.Jobs["a"] != nil || l.Jobs["c"] == nil {
		t.Fatalf("view after a job left %+v", l.Jobs)
	}
	same := shown
	a.publish(2, a.shards[2])
	if shown != same {
		t.Error("an unchanged view was merged again")
	}
	one := &agentSide{shards: make([]*ingest.Live, 1), show: show}
	l = &ingest.Live{Jobs: map[string]*store.Job{"x": job("x")}}
	if one.publish(0, l); shown != l {
		t.Error("a single aggregator's view is not published as it is")
	}
}

// TestDaemonTracksJobsOfAllAggregators: jobs spread over the aggregators
// all show in the API and the jobs gauge.
func TestDaemonTracksJobsOfAllAggregators(t *testing.T) {
	s, _, send := startAgentDaemon(t, filepath.Join(t.TempDir(), "netloom.db"))
	const jobs = 8
	start := time.Now().Add(-time.Second).Truncate(time.Millisecond)
	for k := range jobs {
		for r := range 2 {
			send(ringSnapshot(fmt.Sprint("spread-", k), r, 2, 1, start, false))
		}
	}
	var list struct{ Total int }
	s.waitFor("every job to show", func() bool {
		return s.get("/api/v1/jobs?state=running", &list) == 200 && list.Total == jobs
	})
	_, b := s.fetch("/metrics")
	body := string(b)
	if !strings.Contains(body, fmt.Sprintf("netloom_ingest_jobs{state=\"running\"} %d\n", jobs)) {
		t.Errorf("jobs gauge:\n%s", regexp.MustCompile(`netloom_ingest_jobs.*`).FindAllString(body, -1))
	}
}

// TestAgentLimitsConfig: agent_limits' defaults, and bad values named.
func TestAgentLimitsConfig(t *testing.T) {
	d := Config{}.WithDefaults().AgentLimits
	if d != (AgentLimits{MaxJobs: 10000, MaxJobsPerUser: 2500, NewJobsPerSource: 10, NewJobsBurst: 200}) {
		t.Errorf("defaults %+v", d)
	}
	c, err := ParseConfig([]byte("agent_limits:\n  max_jobs: 400\n  new_jobs_per_source: -1\n  new_jobs_burst: 5\n"), "ok.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if l := c.WithDefaults().AgentLimits; l != (AgentLimits{MaxJobs: 400, MaxJobsPerUser: 100, NewJobsPerSource: -1, NewJobsBurst: 5}) {
		t.Errorf("parsed %+v", l)
	}
	for text, want := range map[string]string{
		"agent_limits:\n  max_jobs: -3\n":                          "agent_limits.max_jobs -3",
		"agent_limits:\n  max_jobs: 10\n  max_jobs_per_user: 11\n": "agent_limits.max_jobs_per_user 11",
		"agent_limits:\n  new_jobs_per_source: .nan\n":             "agent_limits.new_jobs_per_source NaN",
		"agent_limits:\n  new_jobs_burst: -1\n":                    "agent_limits.new_jobs_burst -1",
		"agent_limits:\n  max_job: 1\n":                            "max_job",
	} {
		if _, err := ParseConfig([]byte(text), "bad.yaml"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("config %q: error %v, want it to name %q", text, err, want)
		}
	}
}

// TestNewJobsLimitedPerSource: a daemon's agents from one address start
// new jobs at most at agent_limits' pace; the jobs it did start go on.
func TestNewJobsLimitedPerSource(t *testing.T) {
	addrFile := filepath.Join(t.TempDir(), "agent-address")
	s := startDaemon(t, filepath.Join(t.TempDir(), "netloom.db"), "fat-tree:hosts=8,radix=8", func(c *Config) {
		c.AgentListen, c.AgentAddressFile, c.AgentAuth = "127.0.0.1:0", addrFile, "none"
		c.AgentLimits = AgentLimits{NewJobsPerSource: 0.001, NewJobsBurst: 3}
	})
	conn, err := net.Dial("udp", s.d.AgentAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now().Add(-time.Second).Truncate(time.Millisecond)
	for i := range 10 {
		b, _ := proto.Marshal(ringSnapshot(fmt.Sprint("burst-", i), 0, 2, 1, start, false))
		conn.Write(b)
	}
	for _, k := range []uint64{1, 2} {
		b, _ := proto.Marshal(ringSnapshot("burst-0", 1, 2, k, start, false))
		conn.Write(b)
	}
	var list struct{ Total int }
	s.waitFor("3 jobs, 7 refused", func() bool {
		return s.get("/api/v1/jobs?state=running", &list) == 200 && list.Total == 3 && s.dropCount(ingest.ReasonNewJobRate) == 7
	})
	var j struct{ Job struct{ Reporting int } }
	if s.get("/api/v1/jobs/burst-0", &j) != 200 || j.Job.Reporting != 2 {
		t.Errorf("burst-0: %+v", j)
	}
}

// dropCount reads one drop reason's counter from /metrics.
func (s *simDaemon) dropCount(reason string) int {
	resp, err := http.Get(s.base + "/metrics")
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`netloom_ingest_datagrams_dropped_total\{reason="` + reason + `"\} (\d+)`).FindSubmatch(body)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}
