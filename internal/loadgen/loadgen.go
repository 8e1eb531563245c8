// Package loadgen simulates the MPI side of a whole supercomputer: jobs of
// many sizes and communication patterns whose ranks send real agent
// datagrams (the wire format of proto/) over UDP at their interval, the
// way libnetloom does. The fabric side of such a system is simulated by the
// daemon itself (`netloom serve --fabric sim:SPEC`), since switch counters
// are pulled, not pushed.
package loadgen

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/fabric/sim"
	"github.com/netloom/netloom/internal/ingest/agentpb"
)

// Patterns a simulated job can follow.
var Patterns = []string{"halo", "alltoall", "reduce", "idle"}

// Config describes the simulated system and how hard to drive the target.
type Config struct {
	System       string        // a sim spec: "stampede", "10x-stampede", "fat-tree:hosts=N,…"
	Target       string        // daemon agent address, host:port
	Duration     time.Duration // how long to send
	Interval     time.Duration // each rank's snapshot interval (default 45s, the paper's)
	RanksPerNode int           // default 16 (Stampede's cores per node)
	Patterns     []string      // default all but idle, plus idle for 10% of jobs
	MaxJobNodes  int           // largest job (default 1024 nodes)
	JobLifetime  time.Duration // mean job lifetime for churn (0: jobs run throughout)
	PeerLimit    int           // send all peer rows for jobs up to this many ranks (default 256)
	TopPeers     int           // else the top K peers (default 32)
	Seed         uint64
	FinishAtEnd  bool // send the final reports of running jobs at the end
	// More are further systems of the site, each with the daemon its
	// ranks report to (a collector per fabric on one database). The first
	// job runs on the last host of one system and the first of the next
	// (one such job per pair), so its ranks report to both daemons; the
	// others fill each system's hosts as usual. Host names must differ
	// between systems.
	More []System
}

// System is one simulated system and the daemon its ranks report to.
type System struct {
	Spec   string // a sim spec
	Target string // daemon agent address, host:port
}

func (c Config) withDefaults() Config {
	if c.Interval <= 0 {
		c.Interval = 45 * time.Second
	}
	if c.RanksPerNode <= 0 {
		c.RanksPerNode = 16
	}
	if len(c.Patterns) == 0 {
		c.Patterns = []string{"halo", "halo", "alltoall", "reduce", "halo", "reduce", "halo", "alltoall", "halo", "idle"}
	}
	if c.MaxJobNodes <= 0 {
		c.MaxJobNodes = 1024
	}
	if c.PeerLimit <= 0 {
		c.PeerLimit = 256
	}
	if c.TopPeers <= 0 {
		c.TopPeers = 32
	}
	return c
}

// Report is what a run sent.
type Report struct {
	System            string  `json:"system"`
	Hosts             int     `json:"hosts"`
	Processes         int     `json:"processes"`
	Jobs              int     `json:"jobs"`
	JobsFinished      int     `json:"jobs_finished"`
	DatagramsSent     uint64  `json:"datagrams_sent"`
	BytesSent         uint64  `json:"bytes_sent"`
	SendErrors        uint64  `json:"send_errors"`
	Snapshots         uint64  `json:"snapshots"`
	Seconds           float64 `json:"seconds"`
	DatagramsPerSec   float64 `json:"datagrams_per_second"`
	ProcessesPerInter float64 `json:"processes_per_interval"`
	IntervalSeconds   float64 `json:"interval_seconds"`
}

// job is one simulated MPI job on a contiguous block of hosts.
type job struct {
	id      string
	pattern string
	nodes   []string // node names, one per host
	ppn     int
	start   time.Time
	end     time.Time // zero: runs to the end
	seq     []uint64  // per rank snapshot counter
	final   bool
	cycle   int64 // the interval being sent (since start)
	next    int   // the next rank to send in it
}

func (j *job) ranks() int { return len(j.nodes) * j.ppn }

// maxDatagram keeps datagrams under 64 KiB with room for headers.
const maxDatagram = 60 << 10

// Run sends until ctx ends or the duration is over, printing progress
// every 10 seconds to progress (when not nil).
func Run(ctx context.Context, cfg Config, progress io.Writer) (Report, error) {
	cfg = cfg.withDefaults()
	for _, p := range cfg.Patterns {
		if !slices.Contains(Patterns, p) {
			return Report{}, fmt.Errorf("loadgen: pattern %q: want one of %s", p, strings.Join(Patterns, ", "))
		}
	}
	g := &generator{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x6e6c)), connOf: map[string]net.Conn{}}
	for _, sys := range append([]System{{cfg.System, cfg.Target}}, cfg.More...) {
		hosts, err := hostNames(sys.Spec)
		if err != nil {
			return Report{}, err
		}
		conn, err := net.Dial("udp", sys.Target)
		if err != nil {
			return Report{}, fmt.Errorf("loadgen: target %q: %w", sys.Target, err)
		}
		defer conn.Close()
		for _, h := range hosts {
			if _, dup := g.connOf[h]; dup {
				return Report{}, fmt.Errorf("loadgen: system %q: host %s is in an earlier system too (give the systems distinct host prefixes)", sys.Spec, h)
			}
			g.connOf[h] = conn
		}
		if len(g.hosts) > 0 {
			g.bounds = append(g.bounds, len(g.hosts))
		}
		g.hosts = append(g.hosts, hosts...)
	}
	hosts := g.hosts

	start := time.Now()
	g.fill(start)
	rep := Report{System: cfg.System, Hosts: len(hosts), IntervalSeconds: cfg.Interval.Seconds()}
	for _, j := range g.jobs {
		rep.Processes += j.ranks()
	}

	// Every rank sends once per interval, spread over it as the agent
	// spreads a job's ranks (due): the target sees a steady stream, as
	// from a real system. What is due follows the clock, not the number of
	// loop turns; a job more than an interval behind skips to the current
	// one, which shows as a lower rate in the report. Each snapshot is
	// stamped when it is built and sent, as the agent does.
	deadline := start.Add(cfg.Duration)
	tick := 5 * time.Millisecond
	lastProgress := start
	for now := start; now.Before(deadline); now = time.Now() {
		if ctx.Err() != nil {
			break
		}
		for _, j := range g.jobs {
			g.due(j, now, &rep)
		}
		g.churn(now, &rep)
		if progress != nil && now.Sub(lastProgress) >= 10*time.Second {
			lastProgress = now
			fmt.Fprintf(progress, "loadgen: %.0fs: %d datagrams (%.0f/s), %d send errors, %d jobs running\n",
				now.Sub(start).Seconds(), rep.DatagramsSent, float64(rep.DatagramsSent)/now.Sub(start).Seconds(), rep.SendErrors, len(g.jobs))
		}
		if sleep := time.Until(now.Add(tick)); sleep > 0 {
			time.Sleep(sleep)
		}
	}
	// Jobs still running are left running, as on a real system; with
	// FinishAtEnd they send their final reports, as MPI_Finalize would.
	if cfg.FinishAtEnd {
		for _, j := range g.jobs {
			g.finish(j, time.Now(), &rep)
		}
	}
	rep.Jobs = g.started
	rep.Seconds = time.Since(start).Seconds()
	if rep.Seconds > 0 {
		rep.DatagramsPerSec = float64(rep.DatagramsSent) / rep.Seconds
		rep.ProcessesPerInter = float64(rep.Snapshots) / rep.Seconds * cfg.Interval.Seconds()
	}
	return rep, nil
}

// hostNames lists the simulated system's host names.
func hostNames(system string) ([]string, error) {
	sp, err := sim.ParseSpec(system)
	if err != nil {
		return nil, fmt.Errorf("loadgen: system %q: %w", system, err)
	}
	t, err := sim.Build(sp)
	if err != nil {
		return nil, fmt.Errorf("loadgen: system %q: %w", system, err)
	}
	var hosts []string
	for i := range t.Nodes {
		if t.Nodes[i].Type != fabric.Switch {
			hosts = append(hosts, t.Nodes[i].Name())
		}
	}
	return hosts, nil
}

type generator struct {
	cfg     Config
	rng     *rand.Rand
	hosts   []string
	free    []string
	connOf  map[string]net.Conn // by host: its system's daemon
	bounds  []int               // where each system after the first starts in hosts
	jobs    []*job
	started int
	enc     encoder
}

// fill starts jobs on every free host: sizes are powers of two up to
// MaxJobNodes, as on a busy production system.
func (g *generator) fill(now time.Time) {
	if g.free == nil && g.started == 0 {
		g.free = append([]string(nil), g.hosts...)
		// A job across each pair of systems: the last host of one and
		// the first of the next.
		for i := len(g.bounds) - 1; i >= 0; i-- {
			b := g.bounds[i]
			g.start(now, []string{g.free[b-1], g.free[b]})
			g.free = slices.Delete(g.free, b-1, b+1)
		}
	}
	for len(g.free) > 0 {
		size := 1 << g.rng.IntN(bitsLen(g.cfg.MaxJobNodes))
		size = min(size, len(g.free))
		for i := 1; i < size; i++ {
			if g.connOf[g.free[i]] != g.connOf[g.free[0]] {
				size = i // within one system
				break
			}
		}
		g.start(now, g.free[:size])
		g.free = g.free[size:]
	}
}

// start starts a job on the given hosts.
func (g *generator) start(now time.Time, nodes []string) {
	j := &job{id: fmt.Sprintf("lg-%d-%d", g.cfg.Seed, g.started+1), pattern: g.cfg.Patterns[g.started%len(g.cfg.Patterns)],
		nodes: slices.Clip(nodes), ppn: g.cfg.RanksPerNode, start: now}
	if g.cfg.JobLifetime > 0 {
		life := time.Duration(g.rng.ExpFloat64() * float64(g.cfg.JobLifetime))
		j.end = now.Add(max(life, g.cfg.Interval))
	}
	j.seq = make([]uint64, j.ranks())
	g.jobs = append(g.jobs, j)
	g.started++
}

func bitsLen(n int) int {
	b := 0
	for ; n > 0; n >>= 1 {
		b++
	}
	return b
}

// churn ends jobs whose time is up and starts new ones on their hosts.
func (g *generator) churn(now time.Time, rep *Report) {
	kept := g.jobs[:0]
	for _, j := range g.jobs {
		if !j.end.IsZero() && now.After(j.end) {
			g.finish(j, now, rep)
			rep.JobsFinished++
			g.free = append(g.free, j.nodes...)
			continue
		}
		kept = append(kept, j)
	}
	g.jobs = kept
	if len(g.free) > 0 {
		g.fill(now)
	}
}

func (g *generator) finish(j *job, now time.Time, rep *Report) {
	if j.final {
		return
	}
	j.final = true
	for r := 0; r < j.ranks(); r++ {
		g.send(j, r, time.Now(), true, rep)
	}
}

// due sends a job's snapshots due at now: rank r of n reports (r + 1/2)
// / n of an interval after the job started, then every interval, as the
// agent does.
func (g *generator) due(j *job, now time.Time, rep *Report) {
	iv := g.cfg.Interval
	el := now.Sub(j.start)
	c := int64(el / iv)
	if c > j.cycle+1 {
		j.cycle, j.next = c, 0
	}
	n := j.ranks()
	for ; j.cycle < c && j.next < n; j.next++ { // the rest of the last interval
		g.send(j, j.next, time.Now(), false, rep)
	}
	if j.cycle < c {
		j.cycle, j.next = c, 0
	}
	f := float64(el-time.Duration(c)*iv) / float64(iv)
	for ; j.next < n && (float64(j.next)+0.5)/float64(n) <= f; j.next++ {
		g.send(j, j.next, time.Now(), false, rep)
	}
}

// send encodes one rank's snapshot as one or more datagrams and sends them.
func (g *generator) send(j *job, rank int, now time.Time, final bool, rep *Report) {
	chunks := g.enc.encode(snap{job: j, rank: rank, seq: j.seq[rank], time: now.UnixNano(), start: j.start.UnixNano(),
		interval: uint64(g.cfg.Interval), final: final, elapsed: now.Sub(j.start).Seconds(),
		peerLimit: g.cfg.PeerLimit, peerCount: g.cfg.TopPeers})
	j.seq[rank]++
	for i := range chunks {
		b := g.enc.datagram(i, chunks)
		if _, err := g.connOf[j.nodes[rank/j.ppn]].Write(b); err != nil {
			rep.SendErrors++
			continue
		}
		rep.DatagramsSent++
		rep.BytesSent += uint64(len(b))
	}
	rep.Snapshots++
}

// flow is a constant-rate stream from the rank to a peer or a node.
type flow struct {
	to   int     // peer rank, or node index for node flows
	rate float64 // bytes per second
	coll bool
}

// flowsInto appends a rank's peer flows (at most limit of them, the
// heaviest first) and the same traffic summed per destination node to
// peers and nodes, computed directly so an all-to-all over thousands of
// ranks costs O(nodes).
func flowsInto(peers, nodes []flow, j *job, rank int, jitter float64, limit int) ([]flow, []flow, bool) {
	n := j.ranks()
	switch j.pattern {
	case "halo":
		for _, off := range []int{1, -1, j.ppn, -j.ppn} {
			p := ((rank+off)%n + n) % n
			if p == rank {
				continue
			}
			// In small jobs two neighbours can be the same rank: one row.
			if i := slices.IndexFunc(peers, func(f flow) bool { return f.to == p }); i >= 0 {
				peers[i].rate += 50e6 * jitter
			} else {
				peers = append(peers, flow{to: p, rate: 50e6 * jitter})
			}
		}
	case "reduce":
		if rank > 0 {
			peers = append(peers, flow{to: (rank - 1) / 2, rate: 20e6 * jitter, coll: true})
		}
	case "alltoall":
		per := 400e6 * jitter / float64(max(n-1, 1))
		for k := range j.nodes {
			count := j.ppn
			if k == rank/j.ppn {
				count--
			}
			if count > 0 {
				nodes = append(nodes, flow{to: k, rate: per * float64(count), coll: true})
			}
		}
		for p := 0; p < n && len(peers) < limit; p++ {
			if p != rank {
				peers = append(peers, flow{to: p, rate: per, coll: true})
			}
		}
		return peers, nodes, n-1 > limit
	}
	for _, f := range peers {
		k := f.to / j.ppn
		if i := slices.IndexFunc(nodes, func(x flow) bool { return x.to == k && x.coll == f.coll }); i >= 0 {
			nodes[i].rate += f.rate
		} else {
			nodes = append(nodes, flow{to: k, rate: f.rate, coll: f.coll})
		}
	}
	return peers, nodes, false
}

// rankJitter is a rank's fixed variation of its pattern's rates.
func rankJitter(rank int) float64 {
	return 0.8 + 0.4*float64(uint32(rank)*2654435761%1000)/1000
}

// fillProcess sets a rank's process block after elapsed seconds, given its
// traffic totals.
func fillProcess(p *agentpb.Process, j *job, rank int, elapsed float64, intra, inter *agentpb.Traffic) {
	node := j.nodes[rank/j.ppn]
	*p = agentpb.Process{Node: node, Host: node, Pid: uint32(10000 + rank%j.ppn), Cpu: int32(rank % j.ppn),
		MpiLibrary: "loadgen", Program: j.pattern, User: "loadgen",
		IntraNode: intra, InterNode: inter}
	fillUsage(p, elapsed) // the declaration's load= values (record.gen.go)
}

// fillFunctions sets a rank's function rows in fs and appends them to dst.
func fillFunctions(dst []*agentpb.FunctionStat, fs *[4]agentpb.FunctionStat, elapsed float64, sent uint64) []*agentpb.FunctionStat {
	calls, mpi := uint64(elapsed*1000), 0.1*elapsed
	fs[0] = agentpb.FunctionStat{Name: "MPI_Isend", Calls: calls, TimeNs: uint64(mpi * 0.2e9), BytesSent: sent}
	fs[1] = agentpb.FunctionStat{Name: "MPI_Irecv", Calls: calls, TimeNs: uint64(mpi * 0.1e9)}
	fs[2] = agentpb.FunctionStat{Name: "MPI_Waitall", Calls: calls / 2, TimeNs: uint64(mpi * 0.5e9)}
	fs[3] = agentpb.FunctionStat{Name: "MPI_Allreduce", Calls: calls / 10, TimeNs: uint64(mpi * 0.2e9)}
	for i := range fs {
		dst = append(dst, &fs[i])
	}
	return dst
}
