package api

import (
	"cmp"
	"errors"
	"net/http"
	"slices"

	"github.com/netloom/netloom/internal/analysis"
	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
)

// maxNodeJobsScanned bounds the stored jobs one node-jobs question reads
// whole (their ranks tell the nodes they ran on): the newest that ran in
// the range; the answer says when there were more (scan_truncated).
const maxNodeJobsScanned = 500

// nodeJob is a job that ran on the node asked about: its summary, the
// ranks it had there and the node names it had them under.
type nodeJob struct {
	store.JobSummary
	RanksHere int      `json:"ranks_on_node"`
	NamesHere []string `json:"node_names"`
}

// nodeJobs serves GET /api/v1/nodes/{node}/jobs: the jobs that ran on a
// node at some time in [from, to] (default: the last 24 hours), newest
// first. A job ran on the node where one of its ranks reported a node name
// that maps to it (as link attribution maps names: the first word of a
// host's description, or the node map), or the scheduler lists it among
// the job's nodes. An administrator names the node as every node endpoint
// does (name, GUID, LID); a user sees only their own jobs, and {node} is
// matched as their jobs name their nodes, the fabric never looked up (so
// the answer says nothing of nodes the user's jobs did not use).
func (s *Server) nodeJobs(r *http.Request) (any, error) {
	q := r.URL.Query()
	if q.Get("from") == "" {
		r = withDefault(r, "from", "-24h")
	}
	from, to, err := timeRange(r)
	if err != nil {
		return nil, err
	}
	limit, err := intParam(r, "limit", 100, 1, 10000)
	if err != nil {
		return nil, err
	}
	key := r.PathValue("node")
	names := map[string]bool{key: true}
	node := key
	owner := ""
	if isAdmin(r.Context()) {
		// A node of the fabric by any of its keys; else a name as jobs
		// give it (a host the fabric does not show).
		if v, err := s.viewAt(r); err == nil {
			if n, err := v.topo.FindNode(key); err == nil {
				node = n.Name()
				names = nodeNames(v.topo, n, s.opt.NodeOverrides)
			}
		}
	} else {
		owner = principal(r.Context()).Name
	}

	var found []nodeJob
	live := s.live()
	ids := make([]string, 0, len(live))
	for id, j := range live {
		ids = append(ids, id)
		if (owner == "" || j.Owner() == owner) && j.Overlaps(from, to) {
			if nj, ok := ranOn(j, names); ok {
				found = append(found, nj)
			}
		}
	}
	stored, total, err := s.opt.Store.Jobs(r.Context(), store.JobQuery{Sort: "start", Limit: maxNodeJobsScanned, Exclude: ids, Owner: owner, From: from, To: to})
	if err != nil {
		return nil, err
	}
	for i := range stored {
		j, err := s.opt.Store.Job(r.Context(), stored[i].ID)
		if errors.Is(err, store.ErrNotFound) {
			continue // pruned since the list was read
		} else if err != nil {
			return nil, err
		}
		if nj, ok := ranOn(j, names); ok {
			found = append(found, nj)
		}
	}
	slices.SortStableFunc(found, func(x, y nodeJob) int {
		if c := y.Start.Compare(x.Start); c != 0 {
			return c
		}
		return cmp.Compare(x.ID, y.ID)
	})
	matched := len(found)
	if len(found) > limit {
		found = found[:limit]
	}
	if found == nil {
		found = []nodeJob{}
	}
	nameList := make([]string, 0, len(names))
	for n := range names {
		nameList = append(nameList, n)
	}
	slices.Sort(nameList)
	return map[string]any{"node": node, "names": nameList, "from": from, "to": to,
		"scanned": len(stored) + len(live), "scan_truncated": total > len(stored),
		"total": matched, "limit": limit, "truncated": matched > limit, "jobs": found}, nil
}

// withDefault is r with query parameter name set to v.
func withDefault(r *http.Request, name, v string) *http.Request {
	q := r.URL.Query()
	q.Set(name, v)
	r2 := r.Clone(r.Context())
	r2.URL.RawQuery = q.Encode()
	return r2
}

// nodeNames are the names jobs may give host n: its own (the first word
// of its description) and every name the node map sends to one of its
// ports, as attribution maps them.
func nodeNames(t *fabric.Topology, n *fabric.Node, overrides map[string]string) map[string]bool {
	out := map[string]bool{n.Name(): true}
	nm, err := analysis.NewNodeMap(t, overrides)
	if err != nil {
		nm, err = analysis.NewNodeMap(t, nil)
	}
	if err != nil || n.Type == fabric.Switch {
		return out
	}
	for p := 1; p <= n.Ports; p++ {
		if lid := n.PortLID(p); lid != 0 {
			for _, m := range nm.NamesOf(lid) {
				out[m.Name] = true
			}
		}
	}
	return out
}

// ranOn says whether job j had ranks, or a scheduler allocation, on a
// node of one of names.
func ranOn(j *store.Job, names map[string]bool) (nodeJob, bool) {
	full := j.Full()
	nj := nodeJob{JobSummary: full.JobSummary}
	seen := map[string]bool{}
	for i := range full.Processes {
		if n := full.Processes[i].Node; names[n] {
			nj.RanksHere++
			seen[n] = true
		}
	}
	if full.Scheduler != nil {
		for _, n := range full.Scheduler.Nodes {
			if names[n] {
				seen[n] = true
			}
		}
	}
	for n := range seen {
		nj.NamesHere = append(nj.NamesHere, n)
	}
	slices.Sort(nj.NamesHere)
	return nj, len(seen) > 0
}
