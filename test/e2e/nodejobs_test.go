package e2e

// The jobs that ran on a node (issue 43 item 6): GET /nodes/{node}/jobs
// against what the jobs API records of each job's nodes, for an
// administrator and for users, who see only their own jobs.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestNodeJobs: two real Open MPI runs as two local users, job A with its
// 2 ranks on n1 and n2, job B on n2 and n3 (each rank's node named by
// NETLOOM_NODE, as nodewrap.sh does), on a sim fabric with hosts n1..n8.
// For every host the administrator's list is exactly the jobs whose
// /jobs/{job}/nodes name it, each with the ranks that list gives it there;
// a user's list of the same node holds only their own job; a range before
// the jobs lists none; a node the fabric lacks lists the jobs that name it
// so (here none), for a user as for an administrator.
func TestNodeJobs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const userA, userB = "nltest-a", "nltest-b"
	m, _ := localUsers(t, ctx, userA, userB)
	dir := t.TempDir()
	pw := map[string]string{"root-admin": "admin-pass-1", userA: "a-pass-123", userB: "b-pass-123"}
	cfg := addAccounts(t, dir, pw, "")
	d, agent := serve(t, dir, nil, "--config", cfg, "--anonymous", "none",
		"--fabric", "sim:fat-tree:hosts=8,radix=8", "--db", filepath.Join(dir, "netloom.db"),
		"--agent-listen", "127.0.0.1:0", "--agent-address-file", "-", "--job-timeout", "10s")
	admin, a, b := newClient(t, d.base, "admin"), newClient(t, d.base, userA), newClient(t, d.base, userB)
	admin.login("root-admin", pw["root-admin"])
	a.login(userA, pw[userA])
	b.login(userB, pw[userB])

	share, prog := ringForAll(t, m)
	wrap := filepath.Join(share, "onnode.sh")
	os.WriteFile(wrap, []byte("#!/bin/sh\nr=${OMPI_COMM_WORLD_RANK:-0}\nNETLOOM_NODE=\"n$((NL_NODE_BASE + r))\"\nexport NETLOOM_NODE\nexec \"$@\"\n"), 0o755)
	before := time.Now()
	stamp := time.Now().UnixNano()
	jobs := map[string]string{userA: fmt.Sprintf("nodejobs-a-%d", stamp), userB: fmt.Sprintf("nodejobs-b-%d", stamp)}
	base := map[string]int{userA: 1, userB: 2}
	for _, user := range []string{userA, userB} {
		env := []string{"LD_PRELOAD=" + m.lib, "NETLOOM_DAEMON=" + agent, "NETLOOM_INTERVAL=0.2", "NETLOOM_JOB_ID=" + jobs[user],
			fmt.Sprintf("NL_NODE_BASE=%d", base[user])}
		args := append([]string{"runuser", "-u", user, "--", "env", "HOME=/tmp"}, env...)
		args = append(args, m.launcher, "--oversubscribe", "-np", "2")
		for _, kv := range env {
			k, _, _ := strings.Cut(kv, "=")
			args = append(args, "-x", k)
		}
		args = append(args, wrap, prog, "5")
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = share
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("job %s as %s: %v\n%s", jobs[user], user, err, out)
		}
	}
	// The jobs API's record: each job finished, its nodes and ranks there.
	ranksOn := map[string]map[string]int{} // job -> node -> ranks
	for _, id := range jobs {
		d.waitFor(func() bool {
			var v struct{ Job struct{ State string } }
			return admin.get("/api/v1/jobs/"+id, &v) == 200 && v.Job.State == "finished"
		}, id+" finished")
		var ns struct {
			Nodes []struct {
				Node  string
				Ranks []int
			}
		}
		if code := admin.get("/api/v1/jobs/"+id+"/nodes", &ns); code != 200 {
			t.Fatalf("/jobs/%s/nodes: HTTP %d", id, code)
		}
		ranksOn[id] = map[string]int{}
		for _, n := range ns.Nodes {
			ranksOn[id][n.Node] = len(n.Ranks)
		}
	}
	if want := map[string]int{"n1": 1, "n2": 1}; fmt.Sprint(ranksOn[jobs[userA]]) != fmt.Sprint(want) {
		t.Fatalf("job A's nodes %v, want %v (NETLOOM_NODE per rank)", ranksOn[jobs[userA]], want)
	}

	type nodeJobs struct {
		Node  string
		Total int
		Jobs  []struct {
			ID          string
			User        string
			RanksOnNode int `json:"ranks_on_node"`
			Start, End  time.Time
		}
	}
	list := func(c *apiClient, node, query string) (int, nodeJobs) {
		t.Helper()
		var v nodeJobs
		code := c.get("/api/v1/nodes/"+node+"/jobs"+query, &v)
		return code, v
	}
	ids := func(v nodeJobs) []string {
		var out []string
		for _, j := range v.Jobs {
			out = append(out, j.ID)
		}
		slices.Sort(out)
		return out
	}
	// The administrator, every host: exactly the jobs whose nodes name it.
	for h := 1; h <= 8; h++ {
		node := fmt.Sprintf("n%d", h)
		var want []string
		for _, id := range jobs {
			if ranksOn[id][node] > 0 {
				want = append(want, id)
			}
		}
		slices.Sort(want)
		code, v := list(admin, node, "")
		if code != 200 || !slices.Equal(ids(v), want) || v.Total != len(want) || v.Node != node {
			t.Errorf("admin, %s: HTTP %d, node %q, jobs %v (total %d); the jobs API puts %v there", node, code, v.Node, ids(v), v.Total, want)
		}
		for _, j := range v.Jobs {
			if j.RanksOnNode != ranksOn[j.ID][node] || j.Start.Before(before.Add(-time.Second)) || j.End.Before(j.Start) {
				t.Errorf("admin, %s: job %s with %d ranks there, %s .. %s; the jobs API says %d ranks", node, j.ID, j.RanksOnNode, j.Start, j.End, ranksOn[j.ID][node])
			}
		}
	}
	// By GUID, as the node page asks: the same list.
	var nodes struct {
		Nodes []struct{ GUID, Description string }
	}
	admin.get("/api/v1/fabric/nodes?type=ca", &nodes)
	for _, n := range nodes.Nodes {
		if strings.HasPrefix(n.Description, "n2 ") {
			if code, v := list(admin, n.GUID, ""); code != 200 || len(v.Jobs) != 2 || v.Node != "n2" {
				t.Errorf("admin, n2 by GUID %s: HTTP %d, %q, %v", n.GUID, code, v.Node, ids(v))
			}
		}
	}
	// Users: their own jobs only, on the shared node too.
	for _, c := range []struct {
		client *apiClient
		user   string
	}{{a, userA}, {b, userB}} {
		for _, node := range []string{"n1", "n2", "n3"} {
			var want []string
			if ranksOn[jobs[c.user]][node] > 0 {
				want = []string{jobs[c.user]}
			}
			code, v := list(c.client, node, "")
			if code != 200 || !slices.Equal(ids(v), want) || v.Total != len(want) {
				t.Errorf("%s, %s: HTTP %d, jobs %v (total %d); want only their own: %v", c.user, node, code, ids(v), v.Total, want)
			}
			for _, j := range v.Jobs {
				if j.User != c.user {
					t.Errorf("%s sees %s's job %s", c.user, j.User, j.ID)
				}
			}
		}
	}
	// A range before the jobs: none.
	q := fmt.Sprintf("?from=%d&to=%d", before.Add(-time.Hour).Unix(), before.Add(-10*time.Minute).Unix())
	if code, v := list(admin, "n2", q); code != 200 || len(v.Jobs) != 0 {
		t.Errorf("admin, n2 an hour before: HTTP %d, %v", code, ids(v))
	}
	// A node the fabric lacks: the administrator is told; a user gets
	// the same empty list as for a node none of their jobs used.
	if code, v := list(admin, "0x00000000deadbeef", ""); code != 200 || len(v.Jobs) != 0 {
		t.Errorf("admin, an unknown GUID: HTTP %d, %v", code, ids(v))
	}
	if code, v := list(a, "0x00000000deadbeef", ""); code != 200 || len(v.Jobs) != 0 {
		t.Errorf("user, an unknown GUID: HTTP %d, %v", code, ids(v))
	}
	if code, _ := list(admin, "n2", "?from=yesterday"); code != 400 {
		t.Errorf("from=yesterday: HTTP %d, want 400", code)
	}
}
