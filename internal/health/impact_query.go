package health

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/netloom/netloom/internal/analysis"
	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
)

// DefaultImpactWindow is the traffic an impact answer moves: the last hour.
const DefaultImpactWindow = time.Hour

// downSearch is how far back an element no longer in the fabric is looked
// for among the stored topology versions.
const downSearch = 7 * 24 * time.Hour

// ImpactRequest asks the repair-impact question.
type ImpactRequest struct {
	// One of Link, Switch, Nodes.
	Link, Switch string
	Nodes        []string
	// Window is the traffic moved (DefaultImpactWindow); Now its end.
	Window time.Duration
	Now    time.Time
	// Topo and Routes are the fabric now (the daemon's live snapshot, or
	// the newest stored); Routes nil when no forwarding tables were read.
	Topo   *fabric.Topology
	Routes *fabric.Routes
	// Jobs are the running jobs with their processes.
	Jobs     []*store.Job
	MaxPairs int
	// NodeOverrides are the daemon's --node-map entries (node name to a
	// node GUID, port GUID or description), as link attribution uses them.
	NodeOverrides map[string]string
}

// nodeMap maps node names on t as the daemon's attribution does: with the
// overrides, or by the default rule alone where they do not fit t (an
// older topology version).
func (req *ImpactRequest) nodeMap(t *fabric.Topology) (*analysis.NodeMap, error) {
	if len(req.NodeOverrides) > 0 {
		if nm, err := analysis.NewNodeMap(t, req.NodeOverrides); err == nil {
			return nm, nil
		}
	}
	return analysis.NewNodeMap(t, nil)
}

// ErrNoRoutes: the forwarding tables needed are not known.
var ErrNoRoutes = errors.New("forwarding tables have not been read yet")

// QueryImpact answers req: the element is looked up in the fabric now;
// one that is no longer there (a link or switch taken down) is looked up in
// the stored topology versions of the last 7 days, and then the routes
// before are the forwarding tables in force before it went down and the
// routes after those read since (RoutesRead).
func QueryImpact(ctx context.Context, st store.Store, req ImpactRequest) (*Impact, error) {
	if req.Window <= 0 {
		req.Window = DefaultImpactWindow
	}
	if req.Now.IsZero() {
		req.Now = time.Now()
	}
	in := ImpactInput{Topo: req.Topo, Before: req.Routes, From: req.Now.Add(-req.Window), To: req.Now, MaxPairs: req.MaxPairs}
	nm, err := req.nodeMap(req.Topo)
	if err != nil {
		return nil, err
	}
	tg, err := ResolveTarget(req.Topo, nm, req.Link, req.Switch, req.Nodes)
	var nf *NotFoundError
	if errors.As(err, &nf) && (req.Link != "" || req.Switch != "") {
		old, down, ft, ferr := findRemoved(ctx, st, req)
		if ferr != nil {
			return nil, ferr
		}
		if old == nil {
			return nil, err
		}
		if req.Routes == nil {
			return nil, fmt.Errorf("%s is down, but %w since", nf.Param, ErrNoRoutes)
		}
		if nm, err = req.nodeMap(old); err != nil {
			return nil, err
		}
		if tg, err = ResolveTarget(old, nm, req.Link, req.Switch, nil); err != nil {
			return nil, err
		}
		in.Topo, in.Before, in.After, in.Down = old, fabric.NewRoutes(old, ft), req.Routes, down
	} else if err != nil {
		return nil, err
	}
	if in.Before == nil && tg.Kind != TargetNodes {
		return nil, ErrNoRoutes
	}
	in.Target = tg
	running := map[string]bool{}
	for _, j := range req.Jobs {
		if j.State != store.JobRunning {
			continue
		}
		running[j.ID] = true
		in.Jobs = append(in.Jobs, JobInput(j, nm))
	}
	slices.SortFunc(in.Jobs, func(a, b ImpactJob) int {
		if a.Summary.ID < b.Summary.ID {
			return -1
		}
		if a.Summary.ID > b.Summary.ID {
			return 1
		}
		return 0
	})
	load, err := st.LinkJobs(ctx, nil, in.From, in.To)
	if err != nil {
		return nil, err
	}
	for _, x := range load {
		if running[x.Job] {
			in.Load = append(in.Load, x)
		}
	}
	fillFromLinks(in.Topo, in.Jobs, in.Load)
	return ComputeImpact(in)
}

// fillFromLinks gives the jobs whose ranks are not known (a store's
// running job before its ranks are first saved) their node pairs from
// link attribution: the hosts whose adapters sent its bytes and those
// whose adapters received them, each pair weighted by sent x received
// (exact for a job of two nodes; PairsFrom says so).
func fillFromLinks(t *fabric.Topology, jobs []ImpactJob, load []store.LinkJobBytes) {
	for k := range jobs {
		j := &jobs[k]
		j.PairsFrom = PairsFromRanks
		if len(j.Names) > 0 {
			continue
		}
		out, in := map[fabric.LID]uint64{}, map[fabric.LID]uint64{}
		names := map[fabric.LID]string{}
		for _, x := range load {
			if x.Job != j.Summary.ID {
				continue
			}
			if n, ok := t.Node(x.Port.GUID); ok && n.Type != fabric.Switch {
				l := n.PortLID(x.Port.Port)
				out[l] += x.Bytes
				names[l] = n.Name()
				continue
			}
			peer, ok := t.Peer(x.Port)
			if n, found := t.Node(peer.GUID); ok && found && n.Type != fabric.Switch {
				l := n.PortLID(peer.Port)
				in[l] += x.Bytes
				names[l] = n.Name()
			}
		}
		if len(names) == 0 {
			continue
		}
		j.PairsFrom = PairsFromHostLinks
		var lids []fabric.LID
		for l := range names {
			lids = append(lids, l)
		}
		slices.Sort(lids)
		n := len(lids)
		m := analysis.Matrix{LIDs: lids, Bytes: make([]uint64, n*n)}
		var total uint64
		for _, b := range out {
			total += b
		}
		for a, s := range lids {
			j.Names = append(j.Names, names[s])
			for d, r := range lids {
				if a != d && total > 0 {
					m.Bytes[d*n+a] = uint64(float64(out[s]) * float64(in[r]) / float64(total))
				}
			}
		}
		j.Matrix = m
	}
}

// findRemoved looks for the link or switch of req in the stored topology
// versions, newest first: the last version that had it, when the version
// after it began (the element went down then), and the forwarding tables
// in force just before.
func findRemoved(ctx context.Context, st store.Store, req ImpactRequest) (*fabric.Topology, time.Time, fabric.ForwardingTables, error) {
	vs, err := st.Versions(ctx, req.Now.Add(-downSearch), req.Now)
	if err != nil {
		return nil, time.Time{}, nil, err
	}
	for i := len(vs) - 1; i >= 0; i-- {
		v := vs[i]
		if v.Until.IsZero() {
			continue // the version in force: the element is not in it
		}
		t, _, err := st.TopologyAt(ctx, v.From)
		if err != nil {
			continue
		}
		found := false
		if req.Link != "" {
			_, err := t.FindLink(req.Link)
			found = err == nil
		} else if n, err := t.FindNode(req.Switch); err == nil && n.Type == fabric.Switch {
			found = true
		}
		if !found {
			continue
		}
		ft, _, err := st.ForwardingTablesAt(ctx, v.Until.Add(-time.Millisecond))
		if errors.Is(err, store.ErrNotFound) {
			return nil, time.Time{}, nil, fmt.Errorf("the element went down at %s, but %w before", v.Until.Format(time.RFC3339), ErrNoRoutes)
		}
		if err != nil {
			return nil, time.Time{}, nil, err
		}
		return t, v.Until, ft, nil
	}
	return nil, time.Time{}, nil, nil
}

// DegradedReport is the degraded links of the fabric now, with the
// running jobs whose routes cross them and their bytes on them over
// [From, To].
type DegradedReport struct {
	From  time.Time  `json:"from"`
	To    time.Time  `json:"to"`
	Links []Degraded `json:"links"`
}

// QueryDegraded finds the degraded links of req.Topo (FindDegraded) and
// the running jobs of req.Jobs they slow.
func QueryDegraded(ctx context.Context, st store.Store, req ImpactRequest) (*DegradedReport, error) {
	if req.Window <= 0 {
		req.Window = DefaultImpactWindow
	}
	if req.Now.IsZero() {
		req.Now = time.Now()
	}
	r := &DegradedReport{From: req.Now.Add(-req.Window), To: req.Now, Links: FindDegraded(req.Topo)}
	if len(r.Links) == 0 {
		return r, nil
	}
	nm, err := req.nodeMap(req.Topo)
	if err != nil {
		return nil, err
	}
	var jobs []ImpactJob
	running := map[string]bool{}
	for _, j := range req.Jobs {
		if j.State == store.JobRunning {
			running[j.ID] = true
			jobs = append(jobs, JobInput(j, nm))
		}
	}
	var ports []fabric.PortRef
	for _, d := range r.Links {
		ports = append(ports, d.A, d.B)
	}
	load, err := st.LinkJobs(ctx, ports, r.From, r.To)
	if err != nil {
		return nil, err
	}
	var keep []store.LinkJobBytes
	for _, x := range load {
		if running[x.Job] {
			keep = append(keep, x)
		}
	}
	DegradedJobs(r.Links, req.Routes, jobs, keep)
	return r, nil
}
