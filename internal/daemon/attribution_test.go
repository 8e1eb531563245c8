package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
)

type dirJobJSON struct {
	Job       string
	Link      struct{ ID string }
	Direction fabric.GUID
	From, To  fabric.PortRef
	Bytes     uint64
}

// TestDaemonAttributesJobsToLinks sends a ring job on two nodes of the
// simulated fat tree and checks that each direction of each route between
// them carries exactly the inter-node bytes, that a node with no adapter
// is reported rather than guessed, and the link, pair and why endpoints.
func TestDaemonAttributesJobsToLinks(t *testing.T) {
	db := filepath.Join(t.TempDir(), "netloom.db")
	s, _, send := startAgentDaemon(t, db)
	const n, snaps = 4, 4
	start := time.Now().Add(-time.Second).Truncate(time.Millisecond)
	for k := uint64(1); k <= snaps; k++ {
		for r := range n {
			send(ringSnapshot("ring-1", r, n, k, start, k == snaps))
			// A second job whose rank 1 runs on a node the fabric does not have.
			d := ringSnapshot("ghost-2", r, n, k, start, k == snaps)
			if r == 1 {
				d.Process.Node = "zz9"
			}
			if r == 0 {
				d.Nodes[0].Node = "zz9"
			}
			send(d)
		}
		time.Sleep(150 * time.Millisecond) // one attribution interval or more per snapshot
	}
	// Routes between the nodes are the oracle.
	path := func(src, dst string) []fabric.PortRef {
		var rt fabric.Route
		if code := s.get("/api/v1/routes?src="+src+"&dst="+dst, &rt); code != 200 {
			t.Fatalf("route %s -> %s: %d", src, dst, code)
		}
		var out []fabric.PortRef
		for _, h := range rt.Hops {
			out = append(out, fabric.PortRef{GUID: h.GUID, Port: h.Port})
		}
		return out
	}
	want := map[fabric.PortRef]uint64{}
	for _, p := range path("n1", "n2") {
		want[p] += snaps << 20 // rank 1 -> rank 2
	}
	for _, p := range path("n2", "n1") {
		want[p] += snaps << 20 // rank 3 -> rank 0
	}
	var links struct {
		Links       []dirJobJSON
		Attribution struct {
			Bytes         uint64
			UnmappedNodes []string `json:"unmapped_nodes"`
		}
	}
	s.waitFor("ring-1's traffic attributed", func() bool {
		return s.get("/api/v1/jobs/ring-1/links?limit=100", &links) == 200 && links.Attribution.Bytes == 2*snaps<<20 && len(links.Links) == len(want)
	})
	for _, l := range links.Links {
		if l.Bytes != want[l.From] || l.Direction != l.From.GUID {
			t.Errorf("link %s from %s: %d bytes, want %d", l.Link.ID, l.From, l.Bytes, want[l.From])
		}
	}
	// The first hop out of n1 split by job: ring-1 alone, rank pair 1 -> 2.
	first := path("n1", "n2")[0]
	var split struct {
		Directions []struct {
			From fabric.PortRef
			Jobs []dirJobJSON
		}
		Jobs []dirJobJSON
	}
	if code := s.get("/api/v1/links/"+first.String()+"/jobs?from=-1h", &split); code != 200 {
		t.Fatalf("link jobs: %d", code)
	}
	var ring uint64
	for _, j := range split.Jobs {
		if j.Job == "ring-1" && j.From == first {
			ring += j.Bytes
		}
	}
	if ring != snaps<<20 {
		t.Errorf("link %s: ring-1 sent %d bytes, want %d (%+v)", first, ring, snaps<<20, split.Jobs)
	}
	var pairs struct {
		Level      string
		Directions []struct {
			From  fabric.PortRef
			Pairs []struct {
				Src   int `json:"src_rank"`
				Dst   int `json:"dst_rank"`
				Bytes uint64
			}
		}
	}
	if code := s.get("/api/v1/links/"+first.String()+"/jobs/ring-1/pairs", &pairs); code != 200 {
		t.Fatalf("pairs: %d", code)
	}
	for _, d := range pairs.Directions {
		if d.From == first {
			if got := fmt.Sprint(d.Pairs); pairs.Level != "rank" || got != fmt.Sprintf("[{1 2 %d}]", snaps<<20) {
				t.Errorf("pairs over %s: %s %s", first, pairs.Level, got)
			}
		}
	}
	// ghost-2: traffic to and from zz9 is reported, not attributed.
	var ghost struct {
		Job struct {
			Attribution struct {
				Bytes         uint64
				UnmappedNodes []string `json:"unmapped_nodes"`
				UnmappedBytes uint64   `json:"unmapped_bytes"`
			}
		}
	}
	s.waitFor("ghost-2's unmapped node reported", func() bool {
		return s.get("/api/v1/jobs/ghost-2", &ghost) == 200 && ghost.Job.Attribution.UnmappedBytes > 0
	})
	if fmt.Sprint(ghost.Job.Attribution.UnmappedNodes) != "[zz9]" {
		t.Errorf("ghost-2 attribution %+v", ghost.Job.Attribution)
	}
	resp, err := http.Get(s.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !regexp.MustCompile(`netloom_attribution_unmapped_nodes 1\n`).Match(body) {
		t.Errorf("metrics: %s", regexp.MustCompile(`netloom_attribution_unmapped.*`).FindAll(body, -1))
	}
	// Why: ring-1's links with how loaded they are and who else uses them.
	var why struct {
		Links []struct {
			JobBytes uint64 `json:"job_bytes"`
			From     fabric.PortRef
			Measured struct{ Measured bool }
		}
	}
	if code := s.get("/api/v1/jobs/ring-1/why?limit=100", &why); code != 200 || len(why.Links) != len(want) {
		t.Fatalf("why: %d, %d links, want %d", code, len(why.Links), len(want))
	}
	for _, l := range why.Links {
		if l.JobBytes != want[l.From] || !l.Measured.Measured {
			t.Errorf("why link %+v", l)
		}
	}
	var hot struct {
		Hotspots []struct {
			From fabric.PortRef
			Jobs []dirJobJSON
		}
	}
	if code := s.get("/api/v1/hotspots?min_utilization=0&window=1h&limit=100000", &hot); code != 200 {
		t.Fatalf("hotspots: %d", code)
	}
	found := false
	for _, h := range hot.Hotspots {
		if h.From == first {
			for _, j := range h.Jobs {
				found = found || (j.Job == "ring-1" && j.Bytes == snaps<<20)
			}
		}
	}
	if !found {
		t.Errorf("hotspots: %s with ring-1 not listed", first)
	}
	// After a restart the attribution comes from the store.
	s.stop()
	s, _, _ = startAgentDaemon(t, db)
	var stored struct {
		Links       []dirJobJSON
		Attribution struct{ Bytes uint64 }
	}
	s.waitFor("the stored job links", func() bool { return s.get("/api/v1/jobs/ring-1/links?limit=100", &stored) == 200 })
	if len(stored.Links) != len(want) || stored.Attribution.Bytes != 2*snaps<<20 {
		t.Errorf("stored: %+v", stored)
	}
}

func TestDaemonRefusesBadSchedulerAndNodeMap(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "nodes.map")
	if err := os.WriteFile(bad, []byte("n1 0x10\nn2 not-a-guid\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Scheduler: "pbs"}, `scheduler "pbs"`},
		{Config{NodeMap: bad}, "nodes.map:2"},
		{Config{NodeMap: filepath.Join(dir, "missing.map")}, "missing.map"},
	} {
		tc.cfg.Listen, tc.cfg.AgentListen, tc.cfg.AgentAddressFile = "127.0.0.1:0", "off", "-"
		d := New(tc.cfg, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
		err := d.Run(context.Background(), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run(%+v) = %v, want an error naming %s", tc.cfg, err, tc.want)
		}
	}
}
