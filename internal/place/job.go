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
	// FabricHosts is the number of host adapters on the fabric (0:
	// unknown). A hostlist may name no more nodes than that, since every
	// node must be a distinct host on the fabric; nor ever more than
	// MaxNodes.
	FabricHosts int
}

// MaxNodes bounds the nodes a hostlist may name for placement, whatever
// the fabric. It is above the 6,541 hosts of the largest fabric Netloom is
// sized for (TACC Stampede), so it refuses no real allocation; the advice
// judges every pair of the nodes given (a hop matrix of n² entries), so it
// also bounds the work a request can ask for. The hostlist is counted,
// not expanded, to check it.
const MaxNodes = 8192

// maxNodes is the most nodes opt lets a hostlist name, and why.
func (opt Options) maxNodes() (int, string) {
	if opt.FabricHosts > 0 && opt.FabricHosts < MaxNodes {
		return opt.FabricHosts, fmt.Sprintf("the fabric's %d hosts", opt.FabricHosts)
	}
	return MaxNodes, fmt.Sprintf("%d, the most placement takes", MaxNodes)
}

// JobRequest builds the placement question for a job.
func JobRequest(j *store.Job, opt Options) (Request, error) {
	t, asRan, err := FromJob(j)
	if err != nil {
		// A job no agent reported has nothing to place: the asker's
		// question, not the daemon's failure.
		return Request{}, &InputError{err}
	}
	req := Request{Traffic: t, AsRan: asRan, Seed: opt.Seed}
	ran := JobNodes(asRan)
	var names []string
	switch {
	case opt.Hostlist != "":
		limit, why := opt.maxNodes()
		// Counted first: the names of a hostlist too long are never made.
		n, err := sched.CountHostlist(opt.Hostlist)
		if err != nil {
			return Request{}, &InputError{fmt.Errorf("nodes: %w", err)}
		}
		if n > uint64(limit) {
			return Request{}, inputErr("nodes: %s names %s nodes, more than %s", sched.Quote(opt.Hostlist), sched.CountText(n), why)
		}
		if names, err = sched.ExpandHostlistMax(opt.Hostlist, limit); err != nil {
			return Request{}, &InputError{fmt.Errorf("nodes: %w", err)}
		}
		if len(names) == 0 {
			return Request{}, inputErr("nodes: %s names no node", sched.Quote(opt.Hostlist))
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
