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
	// CoresPerNode; default: the scheduler's CPUs per node, else each
	// node's own from NodeCores, else assumed (see JobRequest).
	CoresPerNode int
	// NodeCores gives a node's real cores and where the count came from
	// (the CLI's: this host's CPU topology when the node is this host);
	// 0 when it does not know. May be nil.
	NodeCores func(node string) (cores int, from string)
	Seed      uint64
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

// Where a node's cores came from (Node.CoresFrom).
const (
	CoresGiven = "given"
	CoresSlurm = "Slurm: the job's CPUs per node"
	// CoresMostRanks is the last resort: a count the job itself shows
	// ranks ran with, not one of the node's.
	CoresMostRanks = "assumed: the most ranks the job ran with on one node; the node's own cores are unknown, give them"
)

// coresAs is the assumption for a node whose cores are unknown, when a
// node the job ran on has known cores.
func coresAs(node string) string {
	return fmt.Sprintf("assumed: as on %s, a node the job ran on; this node's own cores are unknown, give them", node)
}

// JobRequest builds the placement question for a job.
//
// Each node's cores are, in order: the ones asked for (CoresPerNode), the
// scheduler's CPUs per node, the node's own (NodeCores), else assumed:
// those of a node the job ran on whose cores are known, else the most
// ranks the job ran with on one node. A node may hold as many ranks as
// the job ran with on it, even beyond its cores (ranks then share cores:
// the advice says the node is oversubscribed); the rankfile names only
// cores the node has.
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
	cores, from := opt.CoresPerNode, CoresGiven
	if cores < 0 {
		return Request{}, inputErr("cores per node: %d", cores)
	}
	if cores == 0 && j.Scheduler != nil && j.Scheduler.CPUs > 0 && len(j.Scheduler.Nodes) > 0 {
		cores, from = (j.Scheduler.CPUs+len(j.Scheduler.Nodes)-1)/len(j.Scheduler.Nodes), CoresSlurm
	}
	ranOn := map[string]int{} // ranks per node as the job ran
	for _, n := range ran {
		ranOn[n.Name] = n.Cores
	}
	req.Nodes = make([]Node, len(names))
	for i, n := range names {
		req.Nodes[i] = Node{Name: n, Cores: cores, CoresFrom: from}
	}
	if cores == 0 {
		// Each node's own, where known; the rest assumed.
		known := map[string]Node{}
		if opt.NodeCores != nil {
			for _, n := range ran {
				if c, f := opt.NodeCores(n.Name); c > 0 {
					known[n.Name] = Node{Name: n.Name, Cores: c, CoresFrom: f}
				}
			}
		}
		var assumed Node // a node the job ran on with known cores, the most
		for _, n := range ran {
			if k, ok := known[n.Name]; ok && k.Cores > assumed.Cores {
				assumed = k
			}
		}
		mostRanks := 0
		for _, n := range ran {
			mostRanks = max(mostRanks, n.Cores)
		}
		for i := range req.Nodes {
			nd := &req.Nodes[i]
			k, ok := known[nd.Name]
			if !ok && opt.NodeCores != nil && ranOn[nd.Name] == 0 {
				if c, f := opt.NodeCores(nd.Name); c > 0 {
					k, ok = Node{Cores: c, CoresFrom: f}, true
				}
			}
			switch {
			case ok:
				nd.Cores, nd.CoresFrom = k.Cores, k.CoresFrom
			case assumed.Cores > 0:
				nd.Cores, nd.CoresFrom = assumed.Cores, coresAs(assumed.Name)
			case mostRanks > 0:
				nd.Cores, nd.CoresFrom = mostRanks, CoresMostRanks
			default:
				return Request{}, inputErr("job %s: cores per node unknown; give them", j.ID)
			}
		}
	}
	// A node holds as many ranks as the job ran with on it, if more than
	// its cores: the job ran oversubscribed there, and may again.
	for i := range req.Nodes {
		if k := ranOn[req.Nodes[i].Name]; k > req.Nodes[i].Cores {
			req.Nodes[i].Slots = k
		}
	}
	return req, nil
}
