package ingest

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/netloom/netloom/internal/store"
)

// Summarize fills a job's totals from its processes (rank -> job), keeping
// its identity, state and times.
func Summarize(j *store.Job) {
	var (
		sums  []rankSum
		procs []*store.Process
		nodes = map[string]int32{}
	)
	j.EachProcess(func(p *store.Process) {
		k, ok := nodes[p.Node]
		if !ok {
			k = int32(len(nodes))
			nodes[p.Node] = k
		}
		sums = append(sums, sumOf(p, p.Sent(), k))
		procs = append(procs, p)
	})
	var chunks []chunkSum
	for i := 0; i < len(sums); i += viewChunk {
		chunks = append(chunks, sumChunk(sums[i:min(i+viewChunk, len(sums))]))
	}
	summarizeChunks(&j.JobSummary, chunks, procs, len(nodes))
}

// rankSum is what one rank adds to its job's summary. The tracker keeps a
// job's in one array, so that a view rebuild reads them in order instead
// of every rank's process: at ten times Stampede's load, with every job's
// ranks reporting spread over the interval, the rebuilds that read the
// processes (scattered over the heap) were 40% of the daemon's CPU. It
// holds no pointer, so the array is not scanned by the GC and moves as
// plain memory.
type rankSum struct {
	final, truncated     bool
	physical             bool  // its traffic as the library sent it (store.Process.Physical)
	node                 int32 // the rank's node, as an index among the job's
	start, time          int64 // of the run and the snapshot, Unix ns
	cpu, mpi, wall       float64
	rss, hwm, drops      uint64
	ior, iow, mpir, mpiw uint64
	sent                 store.Classes
	intra, inter         store.Traffic
}

func sumOf(p *store.Process, sent store.Classes, node int32) rankSum {
	return rankSum{final: p.Final, truncated: p.PeersTruncated, physical: p.Physical(), node: node, start: p.Start.UnixNano(), time: p.Time.UnixNano(),
		cpu: p.CPUUser + p.CPUSystem, mpi: p.MPI, wall: p.Wall,
		rss: p.VmRSS, hwm: p.VmHWM, drops: p.AgentDrops, ior: p.IORead, iow: p.IOWrite, mpir: p.MPIIORead, mpiw: p.MPIIOWrite,
		sent: sent, intra: p.IntraNode, inter: p.InterNode}
}

// chunkSum is what viewChunk ranks, in rank order, add to their job's
// summary. A job's summary is summed chunk by chunk, so that the tracker
// sums again only the chunks whose ranks changed since the last view
// (summing every rank at every rebuild was 4% of the daemon's CPU at ten
// times Stampede), and Summarize, summing the same chunks, gives the very
// same floating-point totals.
type chunkSum struct {
	reporting, finalized            int
	start, updated                  int64 // earliest run start (0: none), latest snapshot
	cpu, mpi, cpuPct, mpiPct        float64
	mem, peak, ior, iow, mpir, mpiw uint64
	drops                           uint64
	traffic                         store.Classes
	intra, inter                    store.Traffic
	truncated                       bool
	physical                        int // ranks whose traffic is physical
}

func sumChunk(sums []rankSum) chunkSum {
	var c chunkSum
	for i := range sums {
		p := &sums[i]
		r := chunkSum{reporting: 1, start: p.start, updated: p.time, cpu: p.cpu, mpi: p.mpi,
			mem: p.rss, peak: p.hwm, ior: p.ior, iow: p.iow, mpir: p.mpir, mpiw: p.mpiw, drops: p.drops,
			traffic: p.sent, intra: p.intra, inter: p.inter, truncated: p.truncated}
		if p.physical {
			r.physical = 1
		}
		if p.final {
			r.finalized = 1
		}
		if p.wall > 0 {
			r.cpuPct, r.mpiPct = 100*p.cpu/p.wall, 100*p.mpi/p.wall
		}
		c.add(&r)
	}
	return c
}

// add adds the ranks of o to c: ranks to a chunk, and chunks to a job.
func (c *chunkSum) add(o *chunkSum) {
	if c.reporting == 0 || o.start < c.start {
		c.start = o.start
	}
	c.reporting += o.reporting
	c.finalized += o.finalized
	c.updated = max(c.updated, o.updated)
	c.cpu += o.cpu
	c.mpi += o.mpi
	c.cpuPct += o.cpuPct
	c.mpiPct += o.mpiPct
	c.mem += o.mem
	c.peak += o.peak
	c.ior += o.ior
	c.iow += o.iow
	c.mpir += o.mpir
	c.mpiw += o.mpiw
	c.traffic = c.traffic.Add(o.traffic)
	c.intra = c.intra.Add(o.intra)
	c.inter = c.inter.Add(o.inter)
	c.drops += o.drops
	c.truncated = c.truncated || o.truncated
	c.physical += o.physical
}

// summarizeChunks fills s from its ranks' chunk sums and processes, in
// rank order; nodes is how many nodes the ranks run on.
func summarizeChunks(s *store.JobSummary, chunks []chunkSum, procs []*store.Process, nodes int) {
	id, state, reason, start, end, ranks, traceDir := s.ID, s.State, s.EndReason, s.Start, s.End, s.Ranks, s.TraceDir
	*s = store.JobSummary{ID: id, State: state, EndReason: reason, Start: start, End: end, Ranks: ranks, Nodes: nodes, TraceDir: traceDir}
	for _, p := range procs { // the first rank that names its user
		s.User, s.Program, s.MPILibrary = p.User, p.Program, p.MPILibrary
		if p.User != "" {
			break
		}
	}
	var t chunkSum
	for i := range chunks {
		if chunks[i].reporting > 0 {
			t.add(&chunks[i])
		}
	}
	if t.reporting > 0 && (s.Start.IsZero() || t.start < s.Start.UnixNano()) {
		s.Start = time.Unix(0, t.start).UTC()
	}
	if t.updated != 0 {
		s.Updated = time.Unix(0, t.updated).UTC()
	}
	s.Reporting, s.Finalized = t.reporting, t.finalized
	s.CPUSeconds, s.MPISeconds = t.cpu, t.mpi
	s.Memory, s.MemoryPeak = t.mem, t.peak
	s.IORead, s.IOWrite, s.MPIIORead, s.MPIIOWrite = t.ior, t.iow, t.mpir, t.mpiw
	s.Traffic, s.IntraNode, s.InterNode = t.traffic, t.intra, t.inter
	s.AgentDrops, s.PeersCapped = t.drops, t.truncated
	switch {
	case t.physical > 0:
		s.TrafficModel = store.TrafficPhysical
	case t.reporting > 0:
		s.TrafficModel = store.TrafficLogical
	}
	cpuPct, mpiPct := t.cpuPct, t.mpiPct
	if s.Reporting > 0 {
		cpuPct /= float64(s.Reporting)
		mpiPct /= float64(s.Reporting)
	}
	s.CPUPercent, s.MPIPercent = cpuPct, mpiPct
	s.Total = s.Traffic.Total()
	endT := s.End
	if endT.IsZero() {
		endT = s.Updated
	}
	if !s.Start.IsZero() && endT.After(s.Start) {
		s.Duration = endT.Sub(s.Start).Seconds()
	}
}

// ProcessView is one rank without its per-peer and per-function detail.
type ProcessView struct {
	Rank       int       `json:"rank"`
	Node       string    `json:"node"`
	Host       string    `json:"host"`
	PID        uint32    `json:"pid"`
	CPU        int32     `json:"cpu"`
	Time       time.Time `json:"time"`
	Seq        uint64    `json:"seq"`
	Final      bool      `json:"final"`
	CPUPercent float64   `json:"cpu_percent"`
	MPIPercent float64   `json:"mpi_percent"`
	// Every counter and gauge of the process block, as reported
	// (generated from agent.proto: a field added there shows here).
	store.ProcessUsage
	Traffic store.Classes `json:"traffic"`
	Total   store.Traffic `json:"total"`
	// Reorders: the netloom_reorder calls the rank took part in
	// (docs/reorder.md); absent when none.
	Reorders []store.Reorder `json:"reorders,omitempty"`
}

// ViewProcess summarizes one process.
func ViewProcess(p *store.Process) ProcessView {
	v := ProcessView{Rank: p.Rank, Node: p.Node, Host: p.Host, PID: p.PID, CPU: p.CPU, Time: p.Time, Seq: p.Seq, Final: p.Final,
		ProcessUsage: p.ProcessUsage, Traffic: p.Sent(), Reorders: p.Reorders}
	v.Total = v.Traffic.Total()
	if p.Wall > 0 {
		v.CPUPercent = 100 * (p.CPUUser + p.CPUSystem) / p.Wall
		v.MPIPercent = 100 * p.MPI / p.Wall
	}
	return v
}

// NodeView aggregates the ranks on one node (rank -> node).
type NodeView struct {
	Node       string        `json:"node"`
	Hosts      []string      `json:"hosts"`
	Ranks      []int         `json:"ranks"`
	CPUSeconds float64       `json:"cpu_seconds"`
	CPUPercent float64       `json:"cpu_percent"` // sum over ranks: 200 is two cores busy
	MPISeconds float64       `json:"mpi_seconds"`
	Memory     uint64        `json:"memory_bytes"`
	MemoryPeak uint64        `json:"memory_peak_bytes"`
	IORead     uint64        `json:"io_read_bytes"`
	IOWrite    uint64        `json:"io_write_bytes"`
	Traffic    store.Classes `json:"traffic"` // sent by its ranks
	Total      store.Traffic `json:"total"`
	IntraNode  store.Traffic `json:"intra_node"`
	InterNode  store.Traffic `json:"inter_node"`
}

// Nodes aggregates a job's processes per node, ordered by node name.
func Nodes(j *store.Job) []NodeView {
	j = j.Full()
	idx := map[string]int{}
	var out []NodeView
	for i := range j.Processes {
		p := &j.Processes[i]
		k, ok := idx[p.Node]
		if !ok {
			k = len(out)
			idx[p.Node] = k
			out = append(out, NodeView{Node: p.Node, Hosts: []string{}, Ranks: []int{}})
		}
		n := &out[k]
		n.Ranks = append(n.Ranks, p.Rank)
		if p.Host != "" && !slices.Contains(n.Hosts, p.Host) {
			n.Hosts = append(n.Hosts, p.Host)
		}
		n.CPUSeconds += p.CPUUser + p.CPUSystem
		if p.Wall > 0 {
			n.CPUPercent += 100 * (p.CPUUser + p.CPUSystem) / p.Wall
		}
		n.MPISeconds += p.MPI
		n.Memory += p.VmRSS
		n.MemoryPeak += p.VmHWM
		n.IORead += p.IORead
		n.IOWrite += p.IOWrite
		n.Traffic = n.Traffic.Add(p.Sent())
		n.IntraNode = n.IntraNode.Add(p.IntraNode)
		n.InterNode = n.InterNode.Add(p.InterNode)
	}
	for i := range out {
		out[i].Total = out[i].Traffic.Total()
	}
	slices.SortFunc(out, func(a, b NodeView) int { return cmp.Compare(a.Node, b.Node) })
	return out
}

// Classes names the traffic classes as the API and report do.
var Classes = []string{"p2p", "coll", "rma"}

// Matrix is a communication matrix: Values[i][j] is what Labels[i] sent to
// Labels[j].
type Matrix struct {
	Level     string     `json:"level"` // rank or node
	Class     string     `json:"class"` // p2p, coll, rma or all
	Metric    string     `json:"metric"`
	Labels    []string   `json:"labels"`
	Values    [][]uint64 `json:"matrix"`
	Truncated bool       `json:"peers_truncated"` // some rank reported only its top peers
}

// MaxDenseRanks bounds the rank matrix (MaxDenseRanks^2 cells).
const MaxDenseRanks = 4096

// RankMatrix builds the world-rank matrix of one class ("all" sums them)
// and metric (bytes or msgs). Ranks that did not report have empty rows.
func RankMatrix(j *store.Job, class, metric string) (*Matrix, error) {
	j = j.Full()
	if err := checkClassMetric(class, metric); err != nil {
		return nil, err
	}
	n := j.Ranks
	if n > MaxDenseRanks {
		return nil, fmt.Errorf("a rank matrix of %d ranks is too large to send dense (limit %d); ask for level=node", n, MaxDenseRanks)
	}
	m := &Matrix{Level: "rank", Class: class, Metric: metric, Labels: make([]string, n), Values: make([][]uint64, n)}
	cells := make([]uint64, n*n)
	for i := range n {
		m.Labels[i] = fmt.Sprint(i)
		m.Values[i] = cells[i*n : (i+1)*n : (i+1)*n]
	}
	for i := range j.Processes {
		p := &j.Processes[i]
		if p.Rank >= n {
			continue
		}
		m.Truncated = m.Truncated || p.PeersTruncated
		for peer, cl := range p.Peers.Traffic() {
			if peer < n {
				m.Values[p.Rank][peer] = pick(cl.Class(class), metric)
			}
		}
	}
	return m, nil
}

// NodeMatrix builds the node-to-node matrix from each rank's per-node
// totals, which the agent always sends complete.
func NodeMatrix(j *store.Job, class, metric string) (*Matrix, error) {
	j = j.Full()
	if err := checkClassMetric(class, metric); err != nil {
		return nil, err
	}
	idx := map[string]int{}
	var labels []string
	add := func(n string) {
		if _, ok := idx[n]; !ok {
			idx[n] = len(labels)
			labels = append(labels, n)
		}
	}
	for i := range j.Processes {
		add(j.Processes[i].Node)
		for t := range j.Processes[i].ToNodes.All() {
			add(t.Node)
		}
	}
	slices.Sort(labels)
	for i, l := range labels {
		idx[l] = i
	}
	n := len(labels)
	m := &Matrix{Level: "node", Class: class, Metric: metric, Labels: labels, Values: make([][]uint64, n)}
	if m.Labels == nil {
		m.Labels = []string{}
	}
	for i := range m.Values {
		m.Values[i] = make([]uint64, n)
	}
	for i := range j.Processes {
		p := &j.Processes[i]
		src := idx[p.Node]
		for t := range p.ToNodes.All() {
			m.Values[src][idx[t.Node]] += pick(t.Classes.Class(class), metric)
		}
	}
	return m, nil
}

func checkClassMetric(class, metric string) error {
	if class != "all" && !slices.Contains(Classes, class) {
		return fmt.Errorf("class %q: want p2p, coll, rma or all", class)
	}
	if metric != "bytes" && metric != "msgs" {
		return fmt.Errorf("metric %q: want bytes or msgs", metric)
	}
	return nil
}

func pick(t store.Traffic, metric string) uint64 {
	if metric == "msgs" {
		return t.Msgs
	}
	return t.Bytes
}

// FunctionTotal is one MPI function over all ranks.
type FunctionTotal struct {
	store.Function
	Ranks      int     `json:"ranks"`       // ranks that called it
	MPIPercent float64 `json:"mpi_percent"` // of all MPI time
}

// Profile is time per MPI function per rank, MPInside-style.
type Profile struct {
	Functions []string   `json:"functions"` // by total time, largest first
	Ranks     []int      `json:"ranks"`
	TimeNS    [][]uint64 `json:"time_ns"` // [rank index][function index]
	// WaitNS is each function's wait before it, with NETLOOM_WAITS (the
	// barrier's time before blocking collectives); absent without.
	WaitNS   [][]uint64      `json:"wait_ns,omitempty"`
	Calls    [][]uint64      `json:"calls"`
	Sent     [][]uint64      `json:"bytes_sent"`
	Received [][]uint64      `json:"bytes_received"`
	Wall     []float64       `json:"wall_seconds"` // per rank
	MPI      []float64       `json:"mpi_seconds"`  // per rank
	Totals   []FunctionTotal `json:"totals"`
}

// LateSender tells whether fn's wait (NETLOOM_WAITS) is the time a blocking
// receive waited for its message to be sent (a probe before it; agent/gen's
// waitsBefore and waitsInstead), not the wait for the last rank before a
// collective.
func LateSender(fn string) bool { return fn == "MPI_Recv" || fn == "MPI_Sendrecv" }

// WaitColumn names fn's wait as MPInside does: w_recv for a receive's wait
// for a late sender, b_allreduce for the wait before a collective.
func WaitColumn(fn string) string {
	prefix := "b_"
	if LateSender(fn) {
		prefix = "w_"
	}
	return prefix + strings.ToLower(strings.TrimPrefix(fn, "MPI_"))
}

// waited tells, per function column, whether any rank waited before it.
func (p *Profile) waited() []bool {
	w := make([]bool, len(p.Functions))
	for _, row := range p.WaitNS {
		for k, v := range row {
			w[k] = w[k] || v > 0
		}
	}
	return w
}

// BuildProfile tabulates a job's MPI functions per rank.
func BuildProfile(j *store.Job) *Profile {
	j = j.Full()
	totals := map[string]*FunctionTotal{}
	var mpiNS uint64
	waits := false
	for i := range j.Processes {
		for _, f := range j.Processes[i].Functions {
			t := totals[f.Name]
			if t == nil {
				t = &FunctionTotal{Function: store.Function{Name: f.Name}}
				totals[f.Name] = t
			}
			t.Calls += f.Calls
			t.TimeNS += f.TimeNS
			t.WaitNS += f.WaitNS
			t.BytesSent += f.BytesSent
			t.BytesReceived += f.BytesReceived
			if f.Calls > 0 {
				t.Ranks++
			}
			mpiNS += f.TimeNS + f.WaitNS
			waits = waits || f.WaitNS > 0
		}
	}
	p := &Profile{Functions: []string{}, Ranks: []int{}, TimeNS: [][]uint64{}, Calls: [][]uint64{}, Sent: [][]uint64{},
		Received: [][]uint64{}, Wall: []float64{}, MPI: []float64{}, Totals: []FunctionTotal{}}
	for _, t := range totals {
		if mpiNS > 0 {
			t.MPIPercent = 100 * float64(t.TimeNS) / float64(mpiNS)
		}
		p.Totals = append(p.Totals, *t)
	}
	slices.SortFunc(p.Totals, func(a, b FunctionTotal) int {
		if c := cmp.Compare(b.TimeNS+b.WaitNS, a.TimeNS+a.WaitNS); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Calls, a.Calls); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	col := map[string]int{}
	for i, t := range p.Totals {
		p.Functions = append(p.Functions, t.Name)
		col[t.Name] = i
	}
	nf := len(p.Functions)
	for i := range j.Processes {
		pr := &j.Processes[i]
		tm, calls, sent, recv, wait := make([]uint64, nf), make([]uint64, nf), make([]uint64, nf), make([]uint64, nf), make([]uint64, nf)
		for _, f := range pr.Functions {
			c := col[f.Name]
			tm[c] += f.TimeNS
			wait[c] += f.WaitNS
			calls[c] += f.Calls
			sent[c] += f.BytesSent
			recv[c] += f.BytesReceived
		}
		p.Ranks = append(p.Ranks, pr.Rank)
		p.TimeNS = append(p.TimeNS, tm)
		if waits {
			p.WaitNS = append(p.WaitNS, wait)
		}
		p.Calls = append(p.Calls, calls)
		p.Sent = append(p.Sent, sent)
		p.Received = append(p.Received, recv)
		p.Wall = append(p.Wall, pr.Wall)
		p.MPI = append(p.MPI, pr.MPI)
	}
	return p
}

// Histogram is point-to-point message counts by size bin.
type Histogram struct {
	// Bins[i] is the smallest size of bin i (0 for empty messages, then
	// 2^(i-1)).
	Bins  []uint64   `json:"bin_min_bytes"`
	Job   []uint64   `json:"job"`
	Ranks []int      `json:"ranks"`
	Rank  [][]uint64 `json:"per_rank"` // [rank index][bin], over all peers
	// Peers is set when one rank was asked for: its per-peer histograms.
	Peers map[int][]uint64 `json:"peers,omitempty"`
}

// BuildHistogram sums message-size histograms over peers, per rank and for
// the job; with rank >= 0 it also returns that rank's per-peer rows.
func BuildHistogram(j *store.Job, rank int) *Histogram {
	j = j.Full()
	nb := 0
	var bins []uint64
	for i := range j.Processes {
		c := j.Processes[i].Peers.Cursor()
		for {
			var ok bool
			if _, _, bins, _, ok = c.Next(bins, nil); !ok {
				break
			}
			nb = max(nb, len(bins))
		}
	}
	h := &Histogram{Bins: make([]uint64, nb), Job: make([]uint64, nb), Ranks: []int{}, Rank: [][]uint64{}}
	for i := 1; i < nb; i++ {
		h.Bins[i] = 1 << (i - 1)
	}
	for i := range j.Processes {
		p := &j.Processes[i]
		row := make([]uint64, nb)
		c := p.Peers.Cursor()
		for {
			peer, _, hist, _, ok := c.Next(bins, nil)
			if !ok {
				break
			}
			bins = hist
			for b, c := range hist {
				row[b] += c
				h.Job[b] += c
			}
			if p.Rank == rank && len(hist) > 0 {
				if h.Peers == nil {
					h.Peers = map[int][]uint64{}
				}
				h.Peers[peer] = slices.Clone(hist)
			}
		}
		h.Ranks = append(h.Ranks, p.Rank)
		h.Rank = append(h.Rank, row)
	}
	return h
}

// RegionTotal is one region over all ranks.
type RegionTotal struct {
	store.Region
	Ranks   []int          `json:"ranks"`
	PerRank []store.Region `json:"per_rank"`
}

// BuildRegions groups each rank's regions by name.
func BuildRegions(j *store.Job) []RegionTotal {
	j = j.Full()
	idx := map[string]int{}
	out := []RegionTotal{}
	for i := range j.Processes {
		p := &j.Processes[i]
		for _, r := range p.Regions {
			k, ok := idx[r.Name]
			if !ok {
				k = len(out)
				idx[r.Name] = k
				out = append(out, RegionTotal{Region: store.Region{Name: r.Name}, Ranks: []int{}, PerRank: []store.Region{}})
			}
			t := &out[k]
			t.Entries += r.Entries
			t.TimeNS += r.TimeNS
			t.MPITimeNS += r.MPITimeNS
			t.WaitNS += r.WaitNS
			t.Classes = t.Classes.Add(r.Classes)
			t.Ranks = append(t.Ranks, p.Rank)
			t.PerRank = append(t.PerRank, r)
		}
	}
	slices.SortFunc(out, func(a, b RegionTotal) int { return cmp.Compare(a.Name, b.Name) })
	return out
}
