package place

import (
	"fmt"

	"github.com/netloom/netloom/internal/sched"
	"github.com/netloom/netloom/internal/store"
)

// Options are what the asker may set; zero values take the job's own.
type Options struct {
	// Hostlist names the nodes to place on (Slurm syntax, n[1-4],gpu7);
	// default: the scheduler's node list, else the nodes the agents reported.
	Hostlist string
	// CoresPerNode; default: the scheduler's CPUs per node, else the most
	// ranks the job ran with on one node.
	CoresPerNode int
	Seed         uint64
}

// JobRequest builds the placement question for a job.
func JobRequest(j *store.Job, opt Options) (Request, error) {
	t, asRan, err := FromJob(j)
	if err != nil {
		return Request{}, err
	}
	req := Request{Traffic: t, AsRan: asRan, Seed: opt.Seed}
	ran := JobNodes(asRan)
	var names []string
	switch {
	case opt.Hostlist != "":
		if names, err = sched.ExpandHostlist(opt.Hostlist); err != nil {
			return Request{}, &InputError{fmt.Errorf("nodes: %w", err)}
		}
		if len(names) == 0 {
			return Request{}, inputErr("nodes: %q names no node", opt.Hostlist)
		}
	case j.Scheduler != nil && len(j.Scheduler.Nodes) > 0:
		names = j.Scheduler.Nodes
	default:
		for _, n := range ran {
			names = append(names, n.Name)
		}
	}
	if len(names) == 0 {
		return Request{}, inputErr("job %s: no node list (no ranks reported their node); give the nodes", j.ID)
	}
	cores := opt.CoresPerNode
	if cores < 0 {
		return Request{}, inputErr("cores per node: %d", cores)
	}
	if cores == 0 && j.Scheduler != nil && j.Scheduler.CPUs > 0 && len(j.Scheduler.Nodes) > 0 {
		cores = (j.Scheduler.CPUs + len(j.Scheduler.Nodes) - 1) / len(j.Scheduler.Nodes)
	}
	if cores == 0 {
		for _, n := range ran {
			cores = max(cores, n.Cores)
		}
	}
	if cores == 0 {
		return Request{}, inputErr("job %s: cores per node unknown; give them", j.ID)
	}
	for _, n := range names {
		req.Nodes = append(req.Nodes, Node{Name: n, Cores: cores})
	}
	return req, nil
}
