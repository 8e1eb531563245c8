package slurm_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/sched"
	"github.com/netloom/netloom/internal/sched/slurm"
	slurmtest "github.com/netloom/netloom/test/slurm"
)

// seen collects what the watcher reported, per job: every state in the
// order first seen, and the last report.
type seen struct {
	mu     sync.Mutex
	states map[string][]sched.State
	last   map[string]sched.Job
	errs   []error
	polls  int
}

func (s *seen) update(_ context.Context, u sched.Update) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.polls++
	for _, j := range u.Changed {
		if st := s.states[j.ID]; len(st) == 0 || st[len(st)-1] != j.State {
			s.states[j.ID] = append(st, j.State)
		}
		s.last[j.ID] = j
	}
}

func (s *seen) job(id string) (sched.Job, []sched.State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last[id], slices.Clone(s.states[id])
}

// TestRealSlurm runs jobs of three users on a real three-node Slurm, one of
// them an Open MPI program started with srun --mpi=pmix, and checks what
// the adapter reports against what the jobs saw themselves.
func TestRealSlurm(t *testing.T) {
	if m := slurmtest.Missing(); m != "" {
		t.Skipf("no Slurm cluster: %s", m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := slurmtest.Start(ctx, slurmtest.Options{Nodes: 3, CPUs: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	uidA, err := slurmtest.EnsureUser(ctx, "nltest-a")
	if err != nil {
		t.Fatal(err)
	}
	uidB, err := slurmtest.EnsureUser(ctx, "nltest-b")
	if err != nil {
		t.Fatal(err)
	}

	s, err := slurm.New(slurm.Config{Conf: c.Conf})
	if err != nil {
		t.Fatal(err)
	}
	rec := &seen{states: map[string][]sched.State{}, last: map[string]sched.Job{}}
	w := &sched.Watcher{Scheduler: s, Interval: 150 * time.Millisecond, OnUpdate: rec.update,
		OnError: func(_ context.Context, err error) {
			rec.mu.Lock()
			rec.errs = append(rec.errs, err)
			rec.mu.Unlock()
		}}
	wctx, stopWatch := context.WithCancel(ctx)
	watchDone := make(chan error, 1)
	go func() { watchDone <- w.Run(wctx) }()
	defer func() { stopWatch(); <-watchDone }()

	t0 := time.Now().Truncate(time.Second)
	out := func(name string) string { return filepath.Join(c.Shared, name+"-%j.out") }
	// Each job prints the node every task runs on: the oracle for the
	// node list.
	where := "srun -l printenv SLURMD_NODENAME; sleep 2"
	type want struct {
		user  string
		uid   uint32
		name  string
		nodes int
		state sched.State
		exit  int
	}
	jobs := map[string]want{}
	submit := func(user string, w want, args ...string) string {
		t.Helper()
		id, err := c.Sbatch(ctx, user, append([]string{"-J", w.name}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		jobs[id] = w
		return id
	}
	rootJob := submit("", want{"root", 0, "nl-root", 2, sched.StateCompleted, 0}, "-N2", "-o", out("nl-root"), "--wrap", where)
	userA := submit("nltest-a", want{"nltest-a", uidA, "nl-user-a", 1, sched.StateCompleted, 0}, "-N1", "-o", out("nl-user-a"), "--wrap", where)
	userB := submit("", want{"nltest-b", uidB, "nl-user-b", 1, sched.StateCompleted, 0}, "--uid=nltest-b", "-N1", "-o", out("nl-user-b"), "--wrap", where)
	submit("nltest-b", want{"nltest-b", uidB, "nl-fail", 1, sched.StateFailed, 3}, "-N1", "-o", "/dev/null", "--wrap", "sleep 1; exit 3")
	cancelled := submit("", want{"root", 0, "nl-cancel", 1, sched.StateCancelled, 128 + 15}, "-N1", "-o", "/dev/null", "--wrap", "sleep 300")

	var ring string
	if _, err := exec.LookPath("mpicc"); err != nil {
		t.Logf("no MPI job: mpicc missing (install libopenmpi-dev)")
	} else {
		bin := filepath.Join(c.Shared, "ring")
		if b, err := exec.CommandContext(ctx, "mpicc", "-o", bin, "testdata/ring.c").CombinedOutput(); err != nil {
			t.Fatalf("mpicc testdata/ring.c: %v\n%s", err, b)
		}
		ring = submit("nltest-a", want{"nltest-a", uidA, "nl-ring", 3, sched.StateCompleted, 0},
			"-N3", "-n3", "-o", out("nl-ring"), "--wrap", "sleep 2; srun --mpi=pmix "+bin)
	}

	// Cancel once the watcher has seen the job run.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if j, _ := rec.job(cancelled); j.State == sched.StateRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("watcher did not see job %s run in 30s", cancelled)
		}
	}
	if _, err := c.Run(ctx, "scancel", cancelled); err != nil {
		t.Fatal(err)
	}
	for id := range jobs {
		if err := c.WaitState(ctx, id, "COMPLETED", "FAILED", "CANCELLED"); err != nil {
			t.Fatal(err)
		}
	}
	// Two more polls, so the watcher has seen the final states.
	rec.mu.Lock()
	n := rec.polls
	rec.mu.Unlock()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		rec.mu.Lock()
		p := rec.polls
		rec.mu.Unlock()
		if p >= n+2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("watcher made %d polls in 10s", p-n)
		}
	}
	t1 := time.Now().Add(time.Second)
	rec.mu.Lock()
	if len(rec.errs) > 0 {
		t.Errorf("watcher errors: %v", rec.errs)
	}
	rec.mu.Unlock()

	for id, w := range jobs {
		j, states := rec.job(id)
		if j.ID != id || j.User != w.user || j.UID != w.uid || !j.UIDKnown || j.Name != w.name || j.Partition != c.Partition {
			t.Errorf("job %s: got id %q user %q uid %d (known %v) name %q partition %q; want user %s uid %d name %s",
				id, j.ID, j.User, j.UID, j.UIDKnown, j.Name, j.Partition, w.user, w.uid, w.name)
		}
		if j.State != w.state || j.ExitCode != w.exit {
			t.Errorf("job %s (%s): state %s exit %d, want %s exit %d", id, w.name, j.State, j.ExitCode, w.state, w.exit)
		}
		// Polled every 150ms, every job of a few seconds is seen running
		// before it ends (pending may or may not be caught).
		if i := slices.Index(states, sched.StateRunning); i < 0 || states[len(states)-1] != w.state {
			t.Errorf("job %s (%s): states seen %v, want running then %s", id, w.name, states, w.state)
		}
		if j.Start.IsZero() || j.End.IsZero() || j.Start.Before(t0) || j.End.Before(j.Start) || j.End.After(t1) {
			t.Errorf("job %s (%s): start %s end %s, want within [%s, %s]", id, w.name, j.Start, j.End, t0, t1)
		}
		if len(j.Nodes) != w.nodes {
			t.Errorf("job %s (%s): nodes %v, want %d", id, w.name, j.Nodes, w.nodes)
		}
		for _, n := range j.Nodes {
			if !slices.Contains(c.Nodes, n) {
				t.Errorf("job %s: node %q is not one of the cluster's %v", id, n, c.Nodes)
			}
		}
	}

	// The node lists are where the jobs' tasks really ran.
	nodeRE := regexp.MustCompile(`(?m)^\d+: (\S+)$`)
	for _, id := range []string{rootJob, userA, userB} {
		j, _ := rec.job(id)
		b, err := os.ReadFile(filepath.Join(c.Shared, j.Name+"-"+id+".out"))
		if err != nil {
			t.Fatal(err)
		}
		var ran []string
		for _, m := range nodeRE.FindAllStringSubmatch(string(b), -1) {
			ran = append(ran, m[1])
		}
		sort.Strings(ran)
		if strings.Join(ran, ",") != strings.Join(j.Nodes, ",") {
			t.Errorf("job %s (%s): adapter says nodes %v, tasks ran on %v", id, j.Name, j.Nodes, ran)
		}
	}
	if ring != "" {
		j, _ := rec.job(ring)
		b, err := os.ReadFile(filepath.Join(c.Shared, "nl-ring-"+ring+".out"))
		if err != nil {
			t.Fatal(err)
		}
		// The token is 1 at rank 0, goes +1 per hop and comes back as 3.
		for _, line := range []string{"rank 0 of 3 on n1 token 3", "rank 1 of 3 on n2 token 2", "rank 2 of 3 on n3 token 3"} {
			if !strings.Contains(string(b), line) {
				t.Errorf("MPI ring output lacks %q:\n%s", line, b)
			}
		}
		if strings.Join(j.Nodes, ",") != "n1,n2,n3" {
			t.Errorf("MPI job nodes %v, want n1 n2 n3", j.Nodes)
		}
	}
	if s.AccountingUsed() {
		t.Error("sacct used on a cluster without accounting")
	}
}
