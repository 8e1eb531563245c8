package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/test/prom"
)

// alertLoop is the MPI program of the alerts test: a ring exchange of
// 256 KiB every 100 ms until the file named by argv[1] exists (rank 0
// looks, everyone follows) or two minutes pass.
const alertLoop = `#include <mpi.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	int rank, n, go = 1;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	int size = 1 << 18, right = (rank + 1) % n, left = (rank + n - 1) % n;
	char *s = calloc(size, 1), *r = calloc(size, 1);
	double end = MPI_Wtime() + 120;
	while (go) {
		MPI_Sendrecv(s, size, MPI_BYTE, right, 1, r, size, MPI_BYTE, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		usleep(100000);
		if (rank == 0)
			go = access(argv[1], F_OK) != 0 && MPI_Wtime() < end;
		MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
	}
	MPI_Finalize();
	return 0;
}
`

// amHook collects what Alertmanager posts to its webhook receiver.
type amHook struct {
	mu  sync.Mutex
	got []prom.Notification
	at  []time.Time
	srv *httptest.Server
}

func newAMHook(t *testing.T) *amHook {
	h := &amHook{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var n prom.Notification
		if err := json.Unmarshal(b, &n); err != nil {
			t.Errorf("Alertmanager webhook body %s: %v", b, err)
		}
		h.mu.Lock()
		h.got, h.at = append(h.got, n), append(h.at, time.Now())
		h.mu.Unlock()
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// find returns the first alert Alertmanager notified with status and
// the labels given, and when it came.
func (h *amHook) find(status string, labels map[string]string) (*prom.AMAlert, time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, n := range h.got {
	next:
		for _, a := range n.Alerts {
			if a.Status != status {
				continue
			}
			for k, v := range labels {
				if a.Labels[k] != v {
					continue next
				}
			}
			return &a, h.at[i]
		}
	}
	return nil, time.Time{}
}

// TestAlertsNameJobs runs a real MPI job under the agent on a Slurm
// cluster whose nodes are the hosts of an ibsim fabric, injects symbol
// errors on its first node's switch port and makes a link it crosses flap
// through ibsim's console, and checks that a real Alertmanager receives
// each alert naming the job and its user, and sees it resolve.
func TestAlertsNameJobs(t *testing.T) {
	if m := prom.Missing(prom.AlertmanagerBin); m != "" {
		t.Skip("Alertmanager unavailable: " + m)
	}
	f, c, ctx, lib, _ := slurmOnFabric(t, "nltest-a")
	prog := filepath.Join(c.Shared, "alertloop")
	if err := os.WriteFile(prog+".c", []byte(alertLoop), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(ctx, "mpicc", "-o", prog, prog+".c").CombinedOutput(); err != nil {
		t.Fatalf("mpicc: %v\n%s", err, out)
	}
	// The job runs as nltest-a, who cannot reach the test's build folders.
	bin, agentLib := shareTools(t, c, lib)
	hook := newAMHook(t)
	am, err := prom.StartAlertmanager(ctx, t.TempDir(), hook.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(am.Stop)

	dir := t.TempDir()
	cfg := filepath.Join(dir, "netloom.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`alerting:
  alertmanagers: [%q]
  resend_interval: 2s
  external_url: http://netloom.test
  rules:
    - {name: port_errors, threshold: 5, window: 15s}
    - {name: link_flapping, threshold: 2, window: 2m}
    - {name: port_congestion, disabled: true}
    - {name: link_utilization, disabled: true}
`, am.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	d, agent := serve(t, f.Dir, append(f.Env(), c.Env()...), "--config", cfg, "--fabric", "ib", "--db", filepath.Join(dir, "netloom.db"),
		"--agent-listen", "127.0.0.1:0", "--agent-address-file", "-",
		"--scheduler", "slurm", "--scheduler-interval", "500ms", "--sweep-interval", "300ms", "--discover-interval", "1s",
		"--job-timeout", "20s")
	waitAPI(t, d, 60*time.Second, "two sweeps with routes", func() bool {
		var st struct {
			Sweep  struct{ Count int } `json:"sweep"`
			Routes bool
		}
		return d.get("/api/v1/status", &st) == 200 && st.Sweep.Count >= 2 && st.Routes
	})

	stop := filepath.Join(c.Shared, "alertloop.stop")
	run := fmt.Sprintf("%s run --daemon %s --interval 200ms --lib %s -- srun --mpi=pmix %s %s", bin, agent, agentLib, prog, stop)
	id, err := c.Sbatch(ctx, "nltest-a", "-J", "nl-alerts", "-N3", "-n3", "-o", filepath.Join(c.Shared, "alerts-%j.out"), "--wrap", run)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.WriteFile(stop, nil, 0o644) })
	waitAPI(t, d, 90*time.Second, "job "+id+" running with attributed traffic", func() bool {
		var j struct{ Job *attribJob }
		if st, _ := c.JobState(ctx, id); st != "" && st != "RUNNING" && st != "PENDING" && st != "CONFIGURING" {
			b, _ := os.ReadFile(filepath.Join(c.Shared, "alerts-"+id+".out"))
			t.Fatalf("job %s: %s\n%s", id, st, b)
		}
		return d.get("/api/v1/jobs/"+id, &j) == 200 && j.Job.State == "running" && j.Job.Attribution != nil && j.Job.Attribution.Bytes > 0
	})

	// Symbol errors on the switch port of n1's host link, which the job's
	// traffic from and to n1 crosses.
	topo := discoverWithTool(t, f)
	n1, err := topo.FindNode("n1")
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := topo.Peer(fabric.PortRef{GUID: n1.GUID, Port: 1})
	injected := time.Now()
	if err := f.Console(fmt.Sprintf(`PerformanceSet "S-%016x"[%d] PortCounters.SymbolErrorCounter=20`, uint64(leaf.GUID), leaf.Port)); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"alertname": "port_errors", "guid": leaf.GUID.String(), "port": strconv.Itoa(leaf.Port), "counter": "symbol_errors"}
	var fired *prom.AMAlert
	var firedAt time.Time
	waitAPI(t, d, 60*time.Second, "Alertmanager notified of port_errors", func() bool {
		fired, firedAt = hook.find("firing", labels)
		return fired != nil
	})
	t.Logf("fault injected -> Alertmanager's webhook: %s", firedAt.Sub(injected).Round(time.Millisecond))
	if !strings.Contains(fired.Annotations["jobs"], id+" (nltest-a)") || fired.Annotations["users"] != "nltest-a" ||
		fired.Annotations["value"] != "20" || fired.Labels["severity"] != "warning" || fired.Labels["node"] == "" ||
		!strings.HasPrefix(fired.GeneratorURL, "http://netloom.test/alerts?alert=") {
		t.Errorf("alert at Alertmanager: %+v", fired)
	}
	var api struct {
		Alerts []struct {
			Rule, State string
			Jobs        []struct{ ID, User string }
		}
		Firing int
	}
	if d.get("/api/v1/alerts?state=firing", &api); api.Firing == 0 || len(api.Alerts[0].Jobs) == 0 || api.Alerts[0].Jobs[0].User != "nltest-a" {
		t.Errorf("/api/v1/alerts: %+v", api)
	}
	waitAPI(t, d, 60*time.Second, "Alertmanager sees port_errors resolve", func() bool {
		a, _ := hook.find("resolved", labels)
		return a != nil
	})

	// A link on the route from n1 to n3 flaps: unlinked and linked again
	// twice through ibsim's console.
	var l3 fabric.LID
	if l3, err = topo.EndpointLID("n3"); err != nil {
		t.Fatal(err)
	}
	out, err := f.Run(ctx, "ibtracert", strconv.Itoa(int(n1.LID)), strconv.Itoa(int(l3)))
	if err != nil {
		t.Fatal(err)
	}
	var victim fabric.PortRef
	for _, h := range parseTracert(t, string(out)) {
		if n, _ := topo.Node(h.GUID); n.Type == fabric.Switch {
			if peer, ok := topo.Peer(h); ok {
				if pn, _ := topo.Node(peer.GUID); pn.Type == fabric.Switch {
					victim = h
					break
				}
			}
		}
	}
	if victim.GUID == 0 {
		t.Fatalf("no switch-to-switch hop from n1 to n3:\n%s", out)
	}
	link, _ := topo.LinkAt(victim)
	for i := range 2 {
		for _, cmd := range []string{"Unlink", "ReLink"} {
			if err := f.Console(fmt.Sprintf(`%s "S-%016x"[%d]`, cmd, uint64(victim.GUID), victim.Port)); err != nil {
				t.Fatal(err)
			}
			kind := map[string]string{"Unlink": "link_down", "ReLink": "link_up"}[cmd]
			waitAPI(t, d, 30*time.Second, fmt.Sprintf("%s event %d", kind, i+1), func() bool {
				var ev struct{ Events []fabric.Event }
				d.get("/api/v1/events?from=-5m&kind="+kind, &ev)
				return len(ev.Events) > i
			})
		}
	}
	flap := map[string]string{"alertname": "link_flapping", "link": link.ID()}
	var flapped *prom.AMAlert
	waitAPI(t, d, 60*time.Second, "Alertmanager notified of link_flapping", func() bool {
		flapped, _ = hook.find("firing", flap)
		return flapped != nil
	})
	if !strings.Contains(flapped.Annotations["jobs"], id+" (nltest-a)") || flapped.Labels["severity"] != "critical" {
		t.Errorf("flap at Alertmanager: %+v", flapped)
	}
	active, err := am.Alerts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := false
	for _, a := range active {
		seen = seen || a.Labels["alertname"] == "link_flapping"
	}
	if !seen {
		t.Errorf("Alertmanager's API does not list link_flapping: %+v", active)
	}
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitState(ctx, id, "COMPLETED", "FAILED", "CANCELLED"); err != nil {
		t.Fatal(err)
	}
}
