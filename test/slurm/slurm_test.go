package slurm

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func TestStartRunStop(t *testing.T) {
	if m := Missing(); m != "" {
		t.Skipf("no Slurm cluster: %s", m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	c, err := Start(ctx, Options{Nodes: 3})
	if err != nil {
		t.Fatal(err)
	}
	dir := c.Dir
	defer c.Stop()
	t.Logf("cluster up in %s", time.Since(t0).Round(time.Millisecond))

	out, err := c.Run(ctx, "srun", "-N3", "-n3", "-l", "printenv", "SLURMD_NODENAME")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"0: n1", "1: n2", "2: n3"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("srun output lacks %q:\n%s", want, out)
		}
	}

	if _, err := EnsureUser(ctx, "nltest-a"); err != nil {
		t.Fatal(err)
	}
	out, err = c.RunAs(ctx, "nltest-a", "srun", "-N1", "id", "-un")
	// srun may first say it waits for resources; the last word is id's.
	if f := strings.Fields(string(out)); err != nil || len(f) == 0 || f[len(f)-1] != "nltest-a" {
		t.Errorf("srun as nltest-a: %q, %v", out, err)
	}

	// A job still running at Stop must not survive it.
	id, err := c.Sbatch(ctx, "", "-N1", "-o", "/dev/null", "--wrap", "sleep 300")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitState(ctx, id, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	c.Stop()
	t.Logf("stopped in %s", time.Since(t1).Round(time.Millisecond))
	if n := killMarked(dir); n != 0 {
		t.Errorf("%d processes of the cluster left after Stop", n)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("scratch dir %s left: %v", dir, err)
	}
}

func TestStartFailureShowsLogs(t *testing.T) {
	if m := Missing(); m != "" {
		t.Skipf("no Slurm cluster: %s", m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := Start(ctx, Options{Nodes: 1, Extra: []string{"SelectType=select/nosuch"}, Timeout: 20 * time.Second})
	if err == nil {
		t.Fatal("started with SelectType=select/nosuch")
	}
	if !strings.Contains(err.Error(), "slurm cluster: waiting for") || !strings.Contains(err.Error(), "---") {
		t.Errorf("error lacks what was waited for or log tails:\n%v", err)
	}
	t.Logf("error (as expected):\n%v", err)
}
