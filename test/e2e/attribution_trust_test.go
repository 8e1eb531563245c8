package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/analysis"
	"github.com/netloom/netloom/internal/fabric"
)

// trustLoop is the MPI program of the trust tests: for ITERS rounds every
// PERIOD ms, rank r sends (r+1)*BASE bytes to rank (r+1)%n in one
// MPI_Sendrecv. The last round goes straight into MPI_Finalize, so a job's
// traffic lasts until it ends: its last attribution interval, stamped at
// the sweep after its end, always holds some of its bytes.
const trustLoop = `#include <mpi.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	int rank, n;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	long base = atol(argv[1]);
	int iters = atoi(argv[2]), period = atoi(argv[3]);
	usleep(200000);
	int right = (rank + 1) % n, left = (rank + n - 1) % n;
	char *s = calloc((size_t)(rank + 1) * base, 1), *r = calloc((size_t)(left + 1) * base, 1);
	for (int i = 0; i < iters; i++) {
		if (i)
			usleep((useconds_t)period * 1000);
		MPI_Sendrecv(s, (int)((rank + 1) * base), MPI_BYTE, right, 1, r, (int)((left + 1) * base), MPI_BYTE, left, 1,
			MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	}
	MPI_Finalize();
	return 0;
}
`

// trustWrap names Open MPI rank r's node: word r+1 of $NL_NODES.
const trustWrap = `#!/bin/sh
r=${OMPI_COMM_WORLD_RANK:-0}
NETLOOM_NODE=$(echo $NL_NODES | cut -d' ' -f$((r + 1)))
export NETLOOM_NODE
exec "$@"
`

const (
	trustBase   = 100000
	trustIters  = 50
	trustPeriod = 100 // ms: a job's traffic lasts about 5 s
	// trustSweep is longer than the gap between two jobs run one after
	// the other, as production's 30 s is: the interval a job's last bytes
	// are attributed in ends after the next job has started.
	trustSweep = 4 * time.Second
)

// pctOf prints an explained figure ("null" when there is none).
func pctOf(p *float64) string {
	if p == nil {
		return "null"
	}
	return strconv.FormatFloat(*p, 'g', -1, 64)
}

// trustJob is a job as /api/v1/jobs/{job} gives it.
type trustJob struct {
	ID          string
	State       string
	Start, End  time.Time
	Attribution *struct{ Bytes uint64 }
}

// trustCheck is a direction's consistency check.
type trustCheck struct {
	Status  string
	Cause   string
	Message string
	Wide    uint64 `json:"widened_measured_bytes"`
}

type trustDirJob struct {
	Job            string
	Bytes          uint64
	OverlapSeconds *float64 `json:"overlap_seconds"`
	// why's not_overlapping
	Ran            string
	InRangeSeconds *float64 `json:"in_range_seconds"`
}

type trustDirection struct {
	From      fabric.PortRef
	To        fabric.PortRef
	Link      struct{ ID string }
	Measured  struct{ Bytes uint64 }
	Monitored uint64   `json:"monitored_bytes"`
	Explained *float64 `json:"explained_pct"`
	Check     trustCheck
	Jobs      []trustDirJob
	// why only
	JobBytes       uint64        `json:"job_bytes"`
	Others         []trustDirJob `json:"others"`
	NotOverlapping []trustDirJob `json:"not_overlapping"`
	OthersBytes    uint64        `json:"others_bytes"`
	NeighbourBytes uint64        `json:"not_overlapping_bytes"`
}

type trustWhy struct {
	From, To time.Time
	Links    []trustDirection
	Sharing  []trustDirJob `json:"sharing_jobs"`
}

// TestAttributionTrust runs real MPI jobs under the agent on hosts of an
// ibsim fat tree and checks what the link answers say against the jobs'
// time ranges and the port counters (issue 28, items 2 and 3):
//
//   - three jobs run one after the other on n5 and n6 share no link with
//     each other in "why" (others, sharing_jobs), even over a range that
//     holds all their traffic, and a hot spot's window lists only the jobs
//     that ran in it, although the previous job's last interval is
//     attributed inside it;
//   - two jobs run at the same time on the same nodes share their links,
//     for as long as their time ranges overlap;
//   - a job whose node n3 the node-map file sends to n7's adapter puts
//     bytes on n7's link that its counters (perfquery) never saw: the
//     explained figure is the ratio as measured and its check says the two
//     disagree, naming the node map and n3, with the one measured figure
//     the answer gives; the directions the traffic really crossed (their
//     counters given the job's bytes through ibsim) are consistent;
//   - a job's neighbours (run before or after it, by the order the test
//     ran them) are said as such, with how long they ran in the range, and
//     the job's, the others' and the neighbours' bytes make up the
//     direction's;
//   - the jobs on n5 and n6, whose counters ibsim never gives their bytes
//     (perfquery counts under 1% of them), have every direction
//     not_carried (counters_flat), never a cause naming the job.
func TestAttributionTrust(t *testing.T) {
	f, _ := startFabric(t, 8, 4)
	buildAgent(t)
	m := impls(t)[0]
	needMPI(t, m)
	work := t.TempDir()
	src := filepath.Join(work, "trustloop.c")
	wrap := filepath.Join(work, "wrap.sh")
	if err := os.WriteFile(src, []byte(trustLoop), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wrap, []byte(trustWrap), 0o755); err != nil {
		t.Fatal(err)
	}
	prog := compile(t, m, src)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	// The fabric as the diags see it, independently of the daemon.
	topo := discoverWithTool(t, f)
	node := func(name string) *fabric.Node {
		n, err := topo.FindNode(name)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	n7 := node("n7")
	n7Port := fabric.PortRef{GUID: n7.GUID, Port: 1}
	leaf7, _ := topo.Peer(n7Port)
	leaf7Node, _ := topo.Node(leaf7.GUID)
	perf := func(sw *fabric.Node, port int) (xmit, rcv uint64) {
		out, err := f.Run(ctx, "perfquery", "-x", strconv.Itoa(int(sw.LID)), strconv.Itoa(port))
		if err != nil {
			t.Fatal(err)
		}
		return perfField(t, string(out), "PortXmitData"), perfField(t, string(out), "PortRcvData")
	}
	xmit0, rcv0 := perf(leaf7Node, leaf7.Port)

	// The node-map file sends n3 to n7's adapter: a wrong mapping.
	mapFile := filepath.Join(work, "nodes.map")
	if err := os.WriteFile(mapFile, []byte("n3 "+n7.GUID.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, agent := serve(t, f.Dir, f.Env(), "--fabric", "ib", "--db", filepath.Join(work, "netloom.db"), "--agent-listen", "127.0.0.1:0",
		"--agent-address-file", "-", "--sweep-interval", trustSweep.String(), "--discover-interval", "30s", "--job-timeout", "20s",
		"--node-map", mapFile)
	waitAPI(t, d, 90*time.Second, "two sweeps with routes", func() bool {
		var st struct {
			Sweep  struct{ Count int } `json:"sweep"`
			Routes bool
		}
		return d.get("/api/v1/status", &st) == 200 && st.Sweep.Count >= 2 && st.Routes
	})

	start := func(id string, nodes ...string) *exec.Cmd {
		args := []string{"run", "--quiet", "--daemon", agent, "--interval", "200ms", "--job-id", id, "--lib", m.lib, "--",
			"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", strconv.Itoa(len(nodes)), "sh", wrap, prog,
			strconv.Itoa(trustBase), strconv.Itoa(trustIters), strconv.Itoa(trustPeriod)}
		cmd := exec.CommandContext(ctx, netloomBin, args...)
		cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", "NL_NODES="+strings.Join(nodes, " "))
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("job %s output:\n%s", id, out.String())
			}
		})
		return cmd
	}
	wait := func(id string, cmd *exec.Cmd) {
		t.Helper()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("job %s: %v", id, err)
		}
	}
	const total = trustIters * 3 * trustBase // both ranks' messages cross nodes
	job := func(id string) trustJob {
		var j trustJob
		d.get("/api/v1/jobs/"+id, &struct{ Job *trustJob }{&j})
		return j
	}
	attributed := func(id string) trustJob {
		t.Helper()
		var j trustJob
		waitAPI(t, d, 60*time.Second, "job "+id+" finished and attributed", func() bool {
			j = job(id)
			return j.State == "finished" && j.Attribution != nil && j.Attribution.Bytes == total
		})
		return j
	}
	why := func(id, query string) trustWhy {
		t.Helper()
		var w trustWhy
		if code := d.get("/api/v1/jobs/"+id+"/why?limit=1000"+query, &w); code != 200 {
			t.Fatalf("why %s%s: %d", id, query, code)
		}
		return w
	}
	unix := func(x time.Time) string { return strconv.FormatFloat(float64(x.UnixNano())/1e9, 'f', 3, 64) }

	// The wrongly mapped job first, alone on the fabric: its ranks on n1
	// and n3, n3 mapped to n7's adapter. While it runs, the counters of
	// the route n1 <-> n3 really takes (ibtracert) are given twice its
	// bytes through ibsim, as a real fabric would count them.
	idF := fmt.Sprintf("trust-map-%d", os.Getpid())
	cmdF := start(idF, "n1", "n3")
	waitAPI(t, d, 60*time.Second, "job "+idF+" running", func() bool { return job(idF).State == "running" })
	route := func(s, dst *fabric.Node) []fabric.PortRef {
		b, err := f.Run(ctx, "ibtracert", strconv.Itoa(int(s.LID)), strconv.Itoa(int(dst.LID)))
		if err != nil {
			t.Fatal(err)
		}
		return parseTracert(t, string(b))
	}
	n1, n3 := node("n1"), node("n3")
	for _, leg := range []struct {
		hops  []fabric.PortRef
		bytes uint64
	}{{route(n1, n3), trustIters * trustBase}, {route(n3, n1), trustIters * 2 * trustBase}} {
		for _, hop := range leg.hops {
			words := (2*leg.bytes + 3) / 4
			port, field := hop, "PortXmitData"
			if n, _ := topo.Node(hop.GUID); n.Type != fabric.Switch {
				// Adapter ports are not swept: the switch end counts it.
				port, _ = topo.Peer(hop)
				field = "PortRcvData"
			}
			sw, _ := topo.Node(port.GUID)
			x, r := perf(sw, port.Port)
			before := map[string]uint64{"PortXmitData": x, "PortRcvData": r}[field]
			if err := f.Console(fmt.Sprintf(`PerformanceSet "S-%016x"[%d] PortCountersExtended.%s=%d`, uint64(sw.GUID), port.Port, field, before+words)); err != nil {
				t.Fatal(err)
			}
		}
	}
	wait(idF, cmdF)
	jf := attributed(idF)

	// Jobs on n5 and n6: three one after the other, then two at once;
	// what the counters of n5's link counted meanwhile, by perfquery.
	n5Port := fabric.PortRef{GUID: node("n5").GUID, Port: 1}
	leaf5, _ := topo.Peer(n5Port)
	leaf5Node, _ := topo.Node(leaf5.GUID)
	x5, r5 := perf(leaf5Node, leaf5.Port)
	seq := make([]string, 3)
	for i := range seq {
		seq[i] = fmt.Sprintf("trust-seq%d-%d", i, os.Getpid())
		wait(seq[i], start(seq[i], "n5", "n6"))
	}
	idD, idE := fmt.Sprintf("trust-d-%d", os.Getpid()), fmt.Sprintf("trust-e-%d", os.Getpid())
	cmdD := start(idD, "n5", "n6")
	time.Sleep(1500 * time.Millisecond)
	cmdE := start(idE, "n5", "n6")
	wait(idD, cmdD)
	wait(idE, cmdE)
	x5b, r5b := perf(leaf5Node, leaf5.Port)
	n5Counted := 4 * (x5b - x5 + r5b - r5)
	// The order the test ran them in (D and E at once).
	order := map[string]int{idF: 0, seq[0]: 1, seq[1]: 2, seq[2]: 3, idD: 4, idE: 4}
	spans := map[string]trustJob{}
	for _, id := range append(seq, idD, idE) {
		spans[id] = attributed(id)
	}
	spans[idF] = jf
	overlap := func(a, b string) float64 {
		x, y := spans[a], spans[b]
		from, to := x.Start, x.End
		if y.Start.After(from) {
			from = y.Start
		}
		if y.End.Before(to) {
			to = y.End
		}
		return to.Sub(from).Seconds()
	}
	for i := 1; i < len(seq); i++ {
		if overlap(seq[i-1], seq[i]) > 0 {
			t.Fatalf("jobs %s and %s overlap: %+v %+v", seq[i-1], seq[i], spans[seq[i-1]], spans[seq[i]])
		}
	}
	if overlap(idD, idE) <= 0 {
		t.Fatalf("jobs %s and %s do not overlap: %+v %+v", idD, idE, spans[idD], spans[idE])
	}
	// The time ranges decide: a job shares a link with another only when
	// they overlapped.
	neighbours := 0
	checkWhy := func(t *testing.T, id string, w trustWhy, want map[string]bool) {
		t.Helper()
		sharing := map[string]bool{}
		for _, s := range w.Sharing {
			sharing[s.Job] = true
		}
		if fmt.Sprint(sharing) != fmt.Sprint(want) {
			t.Errorf("job %s shares links with %v; want %v (the jobs whose time ranges overlap its own)", id, sharing, want)
		}
		for _, l := range w.Links {
			for _, o := range l.Others {
				if !want[o.Job] {
					t.Errorf("job %s, direction %s: %s among the others, but they never ran at the same time", id, l.From, o.Job)
				}
				ov := overlap(id, o.Job)
				if o.OverlapSeconds == nil || math.Abs(*o.OverlapSeconds-ov) > 1 {
					t.Errorf("job %s, direction %s: %s overlapped for %v s, want %.1f", id, l.From, o.Job, o.OverlapSeconds, ov)
				}
			}
			var mine uint64
			for _, j := range l.Jobs {
				if j.Job == id {
					mine = j.Bytes
				}
			}
			if mine+l.OthersBytes+l.NeighbourBytes != l.Monitored {
				t.Errorf("job %s, direction %s: its %d bytes, the others' %d and the neighbours' %d; monitored %d", id, l.From, mine, l.OthersBytes, l.NeighbourBytes, l.Monitored)
			}
			for _, o := range l.NotOverlapping {
				if overlap(id, o.Job) > 0 {
					t.Errorf("job %s, direction %s: %s listed as not overlapping, but it ran %.1f s at the same time", id, l.From, o.Job, overlap(id, o.Job))
				}
				if want := map[bool]string{true: "before", false: "after"}[order[o.Job] < order[id]]; o.Ran != want {
					t.Errorf("job %s, direction %s: %s ran %q it; the test ran it %s", id, l.From, o.Job, o.Ran, want)
				}
				// How long it ran inside the range, by its own time range.
				in := spans[o.Job].End.Sub(spans[o.Job].Start)
				if s := w.From.Sub(spans[o.Job].Start); s > 0 {
					in -= s
				}
				if s := spans[o.Job].End.Sub(w.To); s > 0 {
					in -= s
				}
				if o.InRangeSeconds == nil || math.Abs(*o.InRangeSeconds-max(0, in.Seconds())) > 0.2 {
					t.Errorf("job %s, direction %s: %s ran %v s in the range %s..%s; by its time range %.1f", id, l.From, o.Job, o.InRangeSeconds, w.From, w.To, in.Seconds())
				}
				neighbours++
			}
		}
	}

	t.Run("jobs run one after another share no link", func(t *testing.T) {
		d := d.in(t)
		for _, id := range seq {
			checkWhy(t, id, why(id, ""), map[string]bool{})
		}
		// Over a range holding all three jobs' traffic, the middle one's
		// links carry the other two (the link page lists them: that is
		// what counted them as sharing), yet they never ran at the same
		// time as it.
		from, to := spans[seq[0]].Start.Add(-time.Second), spans[seq[2]].End.Add(3*trustSweep)
		q := "&from=" + unix(from) + "&to=" + unix(to)
		w := why(seq[1], q)
		checkWhy(t, seq[1], w, map[string]bool{})
		seen := map[string]bool{}
		for _, l := range w.Links {
			var lj struct{ Jobs []trustDirJob }
			if code := d.get("/api/v1/links/"+l.Link.ID+"/jobs?from="+unix(from)+"&to="+unix(to), &lj); code != 200 {
				t.Fatalf("link %s jobs: %d", l.Link.ID, code)
			}
			for _, j := range lj.Jobs {
				seen[j.Job] = true
			}
			for _, o := range l.NotOverlapping {
				seen["not-overlapping "+o.Job] = true
			}
		}
		for _, id := range []string{seq[0], seq[2]} {
			if !seen[id] || !seen["not-overlapping "+id] {
				t.Errorf("over %s..%s job %s: on the links %v, among the jobs not overlapping %v; want both", from, to, id, seen[id], seen["not-overlapping "+id])
			}
		}
		if neighbours == 0 {
			t.Error("no neighbour checked")
		}
	})

	t.Run("a fabric whose counters carry none of the jobs' bytes says so", func(t *testing.T) {
		// perfquery: n5's link counted under 1% of what the jobs on n5
		// and n6 sent through it (ibsim never gives the counters MPI
		// traffic, which runs over shared memory and TCP here).
		sent := uint64(len(seq)+2) * total
		if 100*n5Counted >= sent {
			t.Fatalf("perfquery: n5's link counted %d bytes while the jobs sent %d through it; the test needs flat counters", n5Counted, sent)
		}
		t.Logf("perfquery: n5's link counted %d bytes while the jobs sent %d through it", n5Counted, sent)
		for _, id := range []string{seq[1], seq[2], idD, idE} {
			w := why(id, "")
			for _, l := range w.Links {
				if l.Monitored == 0 {
					continue
				}
				if l.Check.Status != "not_carried" || l.Check.Cause != "counters_flat" || !strings.Contains(l.Check.Message, "do not carry the jobs' traffic") {
					t.Errorf("job %s, direction %s: check %+v; want not_carried, counters_flat (perfquery counted %d of %d bytes)", id, l.From, l.Check, n5Counted, sent)
				}
				if l.Measured.Bytes > 0 && (l.Explained == nil || math.Abs(*l.Explained-100*float64(l.Monitored)/float64(l.Measured.Bytes)) > 1e-6**l.Explained) {
					t.Errorf("job %s, direction %s: explained %v, want %d / %d as measured", id, l.From, l.Explained, l.Monitored, l.Measured.Bytes)
				}
			}
			t.Logf("job %s: %d directions; %s", id, len(w.Links), w.Links[0].Check.Message)
		}
	})

	t.Run("jobs run at the same time share their links", func(t *testing.T) {
		checkWhy(t, idD, why(idD, ""), map[string]bool{idE: true})
		checkWhy(t, idE, why(idE, ""), map[string]bool{idD: true})
	})

	t.Run("hot spots count only the jobs that ran in the window", func(t *testing.T) {
		d := d.in(t)
		// A window from just after the first job ended to the end of the
		// second: the first job's last interval, attributed at the sweep
		// after it ended, lies in it, but the job does not.
		a, b := spans[seq[0]], spans[seq[1]]
		from, at := a.End.Add(time.Millisecond), b.End
		w := why(seq[1], "")
		var host trustDirection // n5's uplink
		for _, l := range w.Links {
			if n, _ := topo.Node(l.From.GUID); n.Description == "n5 HCA-1" {
				host = l
			}
		}
		if host.Link.ID == "" {
			t.Fatalf("no direction from n5 in %+v", w.Links)
		}
		var lj struct{ Jobs []trustDirJob }
		d.get("/api/v1/links/"+host.Link.ID+"/jobs?from="+unix(from)+"&to="+unix(at), &lj)
		inWindow := map[string]bool{}
		for _, j := range lj.Jobs {
			inWindow[j.Job] = true
		}
		if !inWindow[seq[0]] || !inWindow[seq[1]] {
			t.Fatalf("the window %s..%s holds the bytes of %v on %s; want %s's last interval and %s", from, at, inWindow, host.From, seq[0], seq[1])
		}
		var hot struct {
			Hotspots []struct {
				From fabric.PortRef
				Jobs []trustDirJob
			}
		}
		window := at.Sub(from)
		if code := d.get("/api/v1/hotspots?min_utilization=0&limit=100000&at="+unix(at)+"&window="+window.String(), &hot); code != 200 {
			t.Fatalf("hotspots: %d", code)
		}
		found := false
		for _, h := range hot.Hotspots {
			if h.From != host.From {
				continue
			}
			found = true
			for _, j := range h.Jobs {
				sp := spans[j.Job]
				if !sp.Start.Before(at) || !sp.End.After(from) {
					t.Errorf("hot spot %s lists job %s (%s..%s), which did not run in %s..%s", h.From, j.Job, sp.Start, sp.End, from, at)
				}
			}
			if len(h.Jobs) != 1 || h.Jobs[0].Job != seq[1] {
				t.Errorf("hot spot %s: jobs %+v, want %s alone", h.From, h.Jobs, seq[1])
			}
		}
		if !found {
			t.Errorf("no hot spot on %s in %+v", host.From, hot.Hotspots)
		}
		// A list cut says so with its total: the whole list's length.
		var cut struct {
			Hotspots     []json.RawMessage
			Total, Limit int
			Truncated    bool
		}
		if d.get("/api/v1/hotspots?min_utilization=0&limit=1&at="+unix(at)+"&window="+window.String(), &cut); len(hot.Hotspots) < 2 ||
			len(cut.Hotspots) != 1 || cut.Total != len(hot.Hotspots) || cut.Limit != 1 || !cut.Truncated {
			t.Errorf("hot spots cut to 1: %d listed of %d, limit %d, truncated %v; the whole list holds %d", len(cut.Hotspots), cut.Total, cut.Limit, cut.Truncated, len(hot.Hotspots))
		}
	})

	t.Run("explained warns when the jobs put more on a link than its counters saw", func(t *testing.T) {
		d := d.in(t)
		w := why(idF, "")
		xmit1, rcv1 := perf(leaf7Node, leaf7.Port)
		// What the counters of n7's link counted in both directions from
		// before the daemon started to now, by perfquery.
		counted := map[fabric.PortRef]uint64{leaf7: 4 * (xmit1 - xmit0), n7Port: 4 * (rcv1 - rcv0)}
		wantJob := map[fabric.PortRef]uint64{leaf7: trustIters * trustBase, n7Port: trustIters * 2 * trustBase}
		checked := 0
		for _, l := range w.Links {
			if l.Measured.Bytes > 0 && (l.Explained == nil || math.Abs(*l.Explained-100*float64(l.Monitored)/float64(l.Measured.Bytes)) > 1e-6**l.Explained) {
				t.Errorf("direction %s: explained %v, want %d / %d as measured", l.From, l.Explained, l.Monitored, l.Measured.Bytes)
			}
			if l.Check.Status == "inconsistent" && l.Check.Cause != "node_map_or_network" && l.Check.Cause != "routes_or_network" {
				t.Errorf("direction %s: cause %q (%s)", l.From, l.Check.Cause, l.Check.Message)
			}
			if n, _ := topo.Node(l.From.GUID); n.Description == "n1 HCA-1" || l.To.GUID == n1.GUID {
				// n1's link carried the job's bytes (and more, as counted).
				if l.Check.Status != "consistent" && l.Check.Status != "timing" {
					t.Errorf("n1's direction %s: %+v; want consistent", l.From, l.Check)
				}
			}
			c, ok := counted[l.From]
			if !ok {
				continue
			}
			checked++
			if l.JobBytes != wantJob[l.From] || l.Monitored != wantJob[l.From] {
				t.Errorf("n7's direction %s: job %d, monitored %d bytes; want %d", l.From, l.JobBytes, l.Monitored, wantJob[l.From])
			}
			if l.Check.Wide > c || l.Measured.Bytes > c || l.Monitored <= c {
				t.Errorf("n7's direction %s: measured %d (widened %d), monitored %d; perfquery counted %d", l.From, l.Measured.Bytes, l.Check.Wide, l.Monitored, c)
			}
			if l.Check.Status != "inconsistent" || l.Check.Cause != "node_map_or_network" {
				t.Errorf("n7's direction %s: check %+v; want inconsistent, node_map_or_network", l.From, l.Check)
			}
			// One measured figure: the one the answer gives (and the page
			// shows), over the range.
			figure := "its counters measured " + analysis.FormatBytes(l.Measured.Bytes) + " over this range"
			if l.Check.Wide == 0 {
				figure = "its counters measured nothing"
			}
			for _, say := range []string{"n3 (by the node-map file)", "n7 (by its adapter's description)", "the link of n7 HCA-1", "--node-map", "another network", figure} {
				if !strings.Contains(l.Check.Message, say) {
					t.Errorf("n7's direction %s: message %q does not say %q", l.From, l.Check.Message, say)
				}
			}
			// The link page's answer over the same range says the same.
			var lj struct{ Directions []trustDirection }
			if code := d.get("/api/v1/links/"+l.Link.ID+"/jobs?from="+unix(w.From)+"&to="+unix(w.To), &lj); code != 200 {
				t.Fatalf("link %s jobs: %d", l.Link.ID, code)
			}
			for _, ld := range lj.Directions {
				if ld.From == l.From && (ld.Check != l.Check || pctOf(ld.Explained) != pctOf(l.Explained)) {
					t.Errorf("link page's %s: check %+v explained %v; why's %+v %v", l.From, ld.Check, ld.Explained, l.Check, l.Explained)
				}
			}
			t.Logf("n7's direction %s: job %d bytes, perfquery %d, explained %v: %s", l.From, l.JobBytes, c, l.Explained, l.Check.Message)
		}
		if checked != 2 {
			t.Errorf("%d of n7's link directions in the job's links; want both: %+v", checked, w.Links)
		}
	})
}
