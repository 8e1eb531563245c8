package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
)

// trustAlert is one alert as GET /api/v1/alerts lists it.
type trustAlert struct {
	ID, Rule, Kind, State, Counter string
	Value                          float64
	Subject                        struct {
		Kind string
		Port *fabric.PortRef
		Link string
	}
	Jobs []struct {
		ID, User, State string
		Bytes           uint64
		Start, End      time.Time
	}
	JobsSince time.Time `json:"jobs_since"`
	StartsAt  time.Time `json:"starts_at"`
}

type trustAlerts struct {
	Alerts []trustAlert
	Firing int
	Rules  []struct{ Name, Kind string }
}

// counterAlerts lists the alerts on error counters, any state.
func counterAlerts(d *daemon) []trustAlert {
	var got trustAlerts
	d.get("/api/v1/alerts", &got)
	var out []trustAlert
	for _, a := range got.Alerts {
		if a.Kind == "counter_increase" || a.Kind == "counter_total" {
			out = append(out, a)
		}
	}
	return out
}

// portErrorReadings reads the error counters of every swept port from
// /metrics/ports: per port (guid:port), per counter metric, the value.
func portErrorReadings(t *testing.T, d *daemon) map[string]map[string]float64 {
	t.Helper()
	resp, err := http.Get(d.base + "/metrics/ports?counters=symbol_errors,link_integrity_errors,rcv_errors,link_downed")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics/ports: %d %s", resp.StatusCode, b)
	}
	body := string(b)
	line := regexp.MustCompile(`^(netloom_port_\w+)\{([^}]*)\} (\S+)$`)
	label := regexp.MustCompile(`(\w+)="([^"]*)"`)
	out := map[string]map[string]float64{}
	for _, l := range strings.Split(body, "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil || m[1] == "netloom_port_reachable" {
			continue
		}
		lab := map[string]string{}
		for _, x := range label.FindAllStringSubmatch(m[2], -1) {
			lab[x[1]] = x[2]
		}
		v, _ := strconv.ParseFloat(m[3], 64)
		p := lab["guid"] + ":" + lab["port"]
		if out[p] == nil {
			out[p] = map[string]float64{}
		}
		out[p][m[1]] = v
	}
	return out
}

// TestAlertsHealthyStampede (issue 28, item 7): `netloom serve --fabric
// sim:stampede` with the default rules fires no error alert at its first
// sweeps (it fired 213 port_errors_total alerts, link integrity errors of
// 25,921), while its counters read as a real fabric's do: zero on almost
// every port, errors on a few, none past its PortCounters field.
func TestAlertsHealthyStampede(t *testing.T) {
	dir := t.TempDir()
	d, _ := serve(t, dir, nil, "--fabric", "sim:stampede", "--db", filepath.Join(dir, "netloom.db"), "--agent-listen", "off",
		"--agent-address-file", "-", "--sweep-interval", "2s")
	waitAPI(t, d, 90*time.Second, "four sweeps of Stampede", func() bool {
		var st struct{ Sweep struct{ Count int } }
		return d.get("/api/v1/status", &st) == 200 && st.Sweep.Count >= 4
	})
	if a := counterAlerts(d); len(a) > 0 {
		t.Errorf("%d alerts on error counters at the first sweeps, e.g. %s %s: value %g", len(a), a[0].Rule, a[0].State, a[0].Value)
	}
	var got trustAlerts
	d.get("/api/v1/alerts", &got)
	for _, r := range got.Rules {
		if r.Kind == "counter_total" {
			t.Errorf("default rule %s fires on counter totals", r.Name)
		}
	}
	readings := portErrorReadings(t, d)
	bad, past := 0, 0
	for p, cs := range readings {
		nonzero := false
		for m, v := range cs {
			nonzero = nonzero || v > 0
			if m == "netloom_port_local_link_integrity_errors_total" && v > 15 {
				if past++; past == 1 {
					t.Errorf("%s: link integrity errors %g, past the 4-bit field's 15", p, v)
				}
			}
		}
		if nonzero {
			bad++
		}
	}
	if past > 1 {
		t.Errorf("%d ports in all read link integrity errors past 15", past)
	}
	t.Logf("%d of %d swept ports read errors", bad, len(readings))
	if len(readings) < 27000 || bad == 0 || bad > len(readings)/200 {
		t.Errorf("%d of %d ports read errors: want a few bad links, not none nor more than 0.5%%", bad, len(readings))
	}
}

// TestAlertsFireOnChange (issue 28, item 7): on a real ibsim fabric whose
// error counters were high before the daemon started (never cleared:
// symbol errors 50,000, receive errors 12,000, link integrity errors at
// their 4-bit maximum of 15, on every switch port), the default rules fire
// nothing at the first sweeps nor while the counters stay; raising one
// port's symbol errors by 20 fires port_errors on that port alone, with
// the rise as its value. The old default, turned back on as docs/alerts.md
// says, fires on the readings at once.
func TestAlertsFireOnChange(t *testing.T) {
	f, topo := startFabric(t, 4, 4)
	var switchPorts []fabric.PortRef
	for _, l := range topo.Links {
		for _, p := range []fabric.PortRef{l.A, l.B} {
			if n, _ := topo.Node(p.GUID); n.Type == fabric.Switch {
				switchPorts = append(switchPorts, p)
			}
		}
	}
	for _, p := range switchPorts {
		for _, set := range []string{"SymbolErrorCounter=50000", "PortRcvErrors=12000", "LocalLinkIntegrityErrors=15"} {
			if err := f.Console(fmt.Sprintf(`PerformanceSet "S-%016x"[%d] PortCounters.%s`, uint64(p.GUID), p.Port, set)); err != nil {
				t.Fatal(err)
			}
		}
	}
	dir := t.TempDir()
	d := startDaemon(t, f, filepath.Join(dir, "netloom.db"))
	waitAPI(t, d, 30*time.Second, "ten sweeps", func() bool {
		var st struct{ Sweep struct{ Count int } }
		return d.get("/api/v1/status", &st) == 200 && st.Sweep.Count >= 10
	})
	// The daemon read the totals...
	readings := portErrorReadings(t, d)
	victim := switchPorts[len(switchPorts)-1]
	key := victim.GUID.String() + ":" + strconv.Itoa(victim.Port)
	if v := readings[key]["netloom_port_symbol_error_total"]; v != 50000 {
		t.Fatalf("%s: symbol errors read %g, set 50000 (%v)", key, v, readings[key])
	}
	// ...and fired nothing on them.
	if a := counterAlerts(d); len(a) > 0 {
		t.Fatalf("%d alerts on counters set before the daemon started, e.g. %s %s on %s: %g", len(a), a[0].Rule, a[0].State, a[0].Subject.Port, a[0].Value)
	}
	if err := f.Console(fmt.Sprintf(`PerformanceSet "S-%016x"[%d] PortCounters.SymbolErrorCounter=50020`, uint64(victim.GUID), victim.Port)); err != nil {
		t.Fatal(err)
	}
	var fired []trustAlert
	waitAPI(t, d, 30*time.Second, "port_errors on the port whose errors rose", func() bool {
		fired = counterAlerts(d)
		return len(fired) > 0 && fired[0].State == "firing"
	})
	time.Sleep(time.Second) // a few more sweeps: nothing else fires
	fired = counterAlerts(d)
	if len(fired) != 1 || fired[0].Rule != "port_errors" || *fired[0].Subject.Port != victim || fired[0].Counter != "symbol_errors" || fired[0].Value != 20 {
		t.Errorf("after a rise of 20 on %s: %+v", victim, fired)
	}
	d.stop()

	// The old default, on readings, turned back on.
	cfg := filepath.Join(dir, "old.yaml")
	if err := os.WriteFile(cfg, []byte("alerting:\n  rules:\n    - {name: port_errors_total, disabled: false}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := startDaemon(t, f, filepath.Join(dir, "old.db"), "--config", cfg)
	waitAPI(t, old, 30*time.Second, "port_errors_total on every switch port", func() bool {
		n := 0
		for _, a := range counterAlerts(old) {
			if a.Rule == "port_errors_total" && a.State == "firing" {
				n++
			}
		}
		return n == 2*len(switchPorts) // symbol and receive errors
	})
}

// crossSend is the MPI program of TestAlertsNameFinishedJobs: rank 0 sends
// argv[1] bytes to rank 1 in one message, and nothing else is sent.
const crossSend = `#include <mpi.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	int rank;
	long n = atol(argv[1]);
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	char *b = calloc((size_t)n, 1);
	usleep(200000);
	if (rank == 0)
		MPI_Send(b, (int)n, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
	else if (rank == 1)
		MPI_Recv(b, (int)n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	MPI_Finalize();
	return 0;
}
`

// TestAlertsNameFinishedJobs (issue 28, item 8): short jobs that sent
// 41,943,040 bytes each from n2 to n3 across a leaf uplink (ibtracert
// names it) and finished, then symbol errors on that uplink: the
// port_errors alert (window 45s) names each of them, marked finished,
// with the time range the jobs API gives and the bytes the attribution
// API gives for that link in the alert's window; not a job that crossed it
// before the window, nor one that ran in it between two nodes of one leaf.
// It named none: only jobs running at that instant were named.
func TestAlertsNameFinishedJobs(t *testing.T) {
	f, _ := startFabric(t, 4, 4)
	buildAgent(t)
	m := impls(t)[0]
	needMPI(t, m)
	work := t.TempDir()
	src := filepath.Join(work, "crosssend.c")
	wrap := filepath.Join(work, "wrap.sh")
	if err := os.WriteFile(src, []byte(crossSend), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wrap, []byte(modelWrap), 0o755); err != nil {
		t.Fatal(err)
	}
	prog := compile(t, m, src)
	cfg := filepath.Join(work, "netloom.yaml")
	if err := os.WriteFile(cfg, []byte(`alerting:
  rules:
    - {name: port_errors, window: 45s}
    - {name: link_utilization, disabled: true}
    - {name: port_congestion, disabled: true}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	d, agent := serve(t, f.Dir, f.Env(), "--config", cfg, "--fabric", "ib", "--db", filepath.Join(work, "netloom.db"),
		"--agent-listen", "127.0.0.1:0", "--agent-address-file", "-", "--sweep-interval", "300ms", "--discover-interval", "5s", "--job-timeout", "20s")
	waitAPI(t, d, 60*time.Second, "two sweeps with routes", func() bool {
		var st struct {
			Sweep  struct{ Count int } `json:"sweep"`
			Routes bool
		}
		return d.get("/api/v1/status", &st) == 200 && st.Sweep.Count >= 2 && st.Routes
	})

	// The uplink of n2's leaf on the route from n2 to n3, as ibtracert has it.
	topo := discoverWithTool(t, f)
	var lids [2]fabric.LID
	for i, n := range []string{"n2", "n3"} {
		l, err := topo.EndpointLID(n)
		if err != nil {
			t.Fatal(err)
		}
		lids[i] = l
	}
	out, err := f.Run(context.Background(), "ibtracert", strconv.Itoa(int(lids[0])), strconv.Itoa(int(lids[1])))
	if err != nil {
		t.Fatal(err)
	}
	var uplink fabric.PortRef
	for _, h := range parseTracert(t, string(out)) {
		if n, _ := topo.Node(h.GUID); n.Type == fabric.Switch {
			if peer, ok := topo.Peer(h); ok {
				if pn, _ := topo.Node(peer.GUID); pn.Type == fabric.Switch {
					uplink = h
					break
				}
			}
		}
	}
	if uplink.GUID == 0 {
		t.Fatalf("no leaf uplink on the route from n2 to n3:\n%s", out)
	}
	link, _ := topo.LinkAt(uplink)
	t.Logf("n2 -> n3 leaves n2's leaf by %s (link %s)", uplink, link.ID())

	const bytes = 41943040
	type apiJob struct {
		State      string
		Start, End time.Time
	}
	run := func(id, nodes string) apiJob {
		t.Helper()
		cmd := exec.Command(netloomBin, "run", "--quiet", "--daemon", agent, "--interval", "200ms", "--job-id", id, "--lib", m.lib, "--",
			"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", "sh", wrap, nodes, prog, strconv.Itoa(bytes))
		cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("job %s: %v\n%s", id, err, b)
		}
		var j struct {
			Job struct {
				apiJob
				Attribution *struct{ Bytes uint64 }
			}
		}
		waitAPI(t, d, 60*time.Second, "job "+id+" finished and attributed", func() bool {
			return d.get("/api/v1/jobs/"+id, &j) == 200 && j.Job.State == "finished" && j.Job.Attribution != nil && j.Job.Attribution.Bytes == bytes
		})
		return j.Job.apiJob
	}
	early := run("cross-early", "n2,n3")
	// Past the 45 s window before the errors come.
	time.Sleep(time.Until(early.End.Add(50 * time.Second)))
	ran := map[string]apiJob{}
	for _, id := range []string{"cross-1", "cross-2", "cross-3"} {
		ran[id] = run(id, "n2,n3")
	}
	run("leaf-only", "n1,n2") // within the window, never on the uplink

	if err := f.Console(fmt.Sprintf(`PerformanceSet "S-%016x"[%d] PortCounters.SymbolErrorCounter=20`, uint64(uplink.GUID), uplink.Port)); err != nil {
		t.Fatal(err)
	}
	var a trustAlert
	waitAPI(t, d, 30*time.Second, "port_errors firing on the uplink", func() bool {
		for _, x := range counterAlerts(d) {
			if x.State == "firing" && x.Rule == "port_errors" && *x.Subject.Port == uplink {
				a = x
				return true
			}
		}
		return false
	})
	var ids []string
	for _, j := range a.Jobs {
		ids = append(ids, j.ID)
	}
	// Finished jobs, the latest end first.
	if !slices.Equal(ids, []string{"cross-3", "cross-2", "cross-1"}) {
		t.Fatalf("alert names %v (since %s), want the three jobs that crossed the uplink in its window, the latest first: %+v", ids, a.JobsSince, a)
	}
	if !a.JobsSince.Equal(a.StartsAt.Add(-45 * time.Second)) {
		t.Errorf("jobs since %s, alert starts %s: want the 45s window before it", a.JobsSince, a.StartsAt)
	}
	if !early.End.Before(a.JobsSince) {
		t.Errorf("cross-early ended %s, not before the window began %s", early.End, a.JobsSince)
	}
	var onLink struct {
		Jobs []struct {
			Job   string
			Bytes uint64
		}
	}
	from := a.JobsSince.UTC().Format(time.RFC3339Nano)
	if code := d.get("/api/v1/links/"+link.ID()+"/jobs?from="+from+"&to="+time.Now().UTC().Format(time.RFC3339Nano), &onLink); code != 200 {
		t.Fatalf("links/%s/jobs: %d", link.ID(), code)
	}
	for _, j := range a.Jobs {
		want := ran[j.ID]
		if j.State != "finished" || !j.Start.Equal(want.Start) || !j.End.Equal(want.End) {
			t.Errorf("%s in the alert: %s %s..%s; the jobs API: %s %s..%s", j.ID, j.State, j.Start, j.End, want.State, want.Start, want.End)
		}
		if j.End.Before(a.JobsSince) || j.Start.After(a.StartsAt) {
			t.Errorf("%s ran %s..%s, outside the alert's window %s..%s", j.ID, j.Start, j.End, a.JobsSince, a.StartsAt)
		}
		var attributed uint64
		for _, x := range onLink.Jobs {
			if x.Job == j.ID {
				attributed = x.Bytes
			}
		}
		if j.Bytes != bytes || attributed != bytes {
			t.Errorf("%s: %d bytes in the alert, %d attributed to link %s since %s; it sent %d", j.ID, j.Bytes, attributed, link.ID(), from, bytes)
		}
	}
}
