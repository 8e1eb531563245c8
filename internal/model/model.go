package model

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Network is a what-if: the platform as it is, a perfect network, N times
// the bandwidth, or a given bandwidth and latency.
type Network struct {
	Name      string
	Perfect   bool
	Factor    float64 // bandwidth x Factor (0: not this kind)
	Bandwidth float64 // bytes per second per link (0: unchanged)
	Latency   float64 // seconds per link (negative: unchanged)
}

// ParseNetwork reads a --network value: "perfect" (no latency, no
// bandwidth limit), "xN" (N times every link's bandwidth), or
// "bandwidth=RATE,latency=DURATION" (either or both; RATE like 12.5GB/s
// or 100Gb/s, DURATION like 1us).
func ParseNetwork(s string) (Network, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "perfect":
		return Network{Name: "perfect network", Perfect: true}, nil
	case strings.HasPrefix(s, "x"):
		f, err := strconv.ParseFloat(s[1:], 64)
		if err != nil || !(f >= MinFactor && f <= MaxFactor) { // NaN fails both
			return Network{}, fmt.Errorf("network %q: want xN with N from %g to %g, as x2", s, MinFactor, MaxFactor)
		}
		return Network{Name: s + " bandwidth", Factor: f, Latency: -1}, nil
	}
	n := Network{Name: s, Latency: -1}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return Network{}, fmt.Errorf("network %q: want perfect, xN or bandwidth=RATE,latency=DURATION", s)
		}
		switch strings.TrimSpace(k) {
		case "bandwidth":
			b, err := ParseRate(v)
			if err != nil {
				return Network{}, fmt.Errorf("network %q: bandwidth: %w", s, err)
			}
			n.Bandwidth = b
		case "latency":
			d, err := time.ParseDuration(strings.TrimSpace(v))
			if err != nil || d < 0 || d > MaxLatency {
				return Network{}, fmt.Errorf("network %q: latency %q: want a duration such as 1us, at most %s", s, v, MaxLatency)
			}
			n.Latency = d.Seconds()
		default:
			return Network{}, fmt.Errorf("network %q: unknown field %q (want bandwidth or latency)", s, k)
		}
	}
	return n, nil
}

// The bounds of a what-if network: beyond them a replay's figures
// overflow what the simulator computes with (x1e300 once made SimGrid
// abort) or a replay never ends.
const (
	MinFactor, MaxFactor = 1e-3, 1e3
	MinRate, MaxRate     = 1.0, 1e13 // bytes per second: 8 b/s to 80 Tb/s
	MaxLatency           = 10 * time.Second
)

// ParseRate reads a data rate: a number with B/s, KB/s, MB/s, GB/s (bytes,
// powers of 1000) or b/s, Kb/s, Mb/s, Gb/s (bits).
func ParseRate(s string) (float64, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   float64
	}{{"GB/s", 1e9}, {"MB/s", 1e6}, {"KB/s", 1e3}, {"Gb/s", 1e9 / 8}, {"Mb/s", 1e6 / 8}, {"Kb/s", 1e3 / 8}, {"B/s", 1}, {"b/s", 1.0 / 8}}
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), 64)
			if r := v * u.mult; err == nil && r >= MinRate && r <= MaxRate { // NaN fails both
				return r, nil
			}
			break
		}
	}
	return 0, fmt.Errorf("rate %q: want a number with B/s, KB/s, MB/s, GB/s or b/s, Kb/s, Mb/s, Gb/s, from %g to %g B/s", s, MinRate, MaxRate)
}

// Apply is the platform under the what-if.
func (n Network) Apply(p *Platform) *Platform {
	switch {
	case n.Perfect:
		return p.Perfect(n.Name)
	case n.Factor > 0:
		return p.Scaled(n.Name, n.Factor, 1)
	}
	return p.With(n.Name, n.Bandwidth, n.Latency)
}

// Request is what to predict: the job on its platform as it ran, and
// under each what-if; Placement, when given, is another host per rank,
// predicted on the platform as it is.
type Request struct {
	Platform  *Platform
	HostOf    []string
	Networks  []Network
	Placement []string
	Work      string // temporary files go under it ("": the system's)
	// ElapsedOnly skips the MPI time per function: about twice as fast
	// for large traces (Traces.Replay).
	ElapsedOnly bool
	// WindowActions is the most actions a replay holds before a trace
	// that repeats is replayed in part (0: DefaultWindowActions);
	// FullReplay replays every action however many.
	WindowActions int
	FullReplay    bool
	// Progress, when set, hears what each step of a long prediction is
	// about to do.
	Progress func(format string, args ...any)
}

// Result is the measurement and the predictions.
type Result struct {
	Job      string `json:"job"`
	Ranks    int    `json:"ranks"`
	Hosts    int    `json:"hosts"`
	Events   int    `json:"trace_events"`
	Platform string `json:"platform"`
	// Window says how a long periodic trace was replayed in part (nil:
	// every action).
	Window   *Window       `json:"window,omitempty"`
	Measured Measure       `json:"measured"`
	AsRan    *Prediction   `json:"as_ran"`
	WhatIfs  []*Prediction `json:"what_ifs"`
	// Loopback is how ranks on one node reach each other on the platform
	// as it is.
	Loopback LoopbackUse `json:"loopback"`
	// Oversubscribed is each host that ran more of the job's ranks than
	// it has CPUs (as far as they are known: HostCores).
	Oversubscribed []HostLoad `json:"oversubscribed,omitempty"`
	// Warnings is what makes the predictions less than they seem ([]
	// when nothing does).
	Warnings []string `json:"warnings"`
}

// LoopbackUse is the platform's loopback.
type LoopbackUse struct {
	Bandwidth float64 `json:"bandwidth_bytes_per_second"`
	Latency   float64 `json:"latency_seconds"`
	// PairBandwidth is what one message gets at most (left out: all of
	// Bandwidth, which its messages in flight at once share).
	PairBandwidth float64 `json:"pair_bandwidth_bytes_per_second,omitempty"`
	// From says where the figures came from: "calibrated on HOST at
	// TIME", the default's rule, or given.
	From string `json:"from"`
}

// Measure is the run as measured, on the replay's span.
type Measure struct {
	Elapsed    float64            `json:"elapsed_seconds"`
	MPISeconds float64            `json:"mpi_seconds"`
	Functions  map[string]float64 `json:"functions"`
	// Groups is Functions under names the measurement and the replays
	// share (Group).
	Groups map[string]float64 `json:"function_groups"`
}

// PointToPoint is the group of every point-to-point call: the replay
// keeps messages, not the calls that posted and completed them (an
// MPI_Sendrecv replays as a post of each and a wait), so the measured and
// the replayed times of point-to-point calls compare only together.
const PointToPoint = "point-to-point"

// pointToPoint are the MPI calls of the PointToPoint group.
var pointToPoint = map[string]bool{}

func init() {
	for _, f := range strings.Fields(`Send Bsend Ssend Rsend Recv Sendrecv Sendrecv_replace Mrecv Isend Ibsend Issend Irsend Irecv Imrecv
		Send_init Bsend_init Ssend_init Rsend_init Recv_init Start Startall Request_free Probe Iprobe Mprobe Improbe
		Wait Waitall Waitany Waitsome Test Testall Testany Testsome Cancel`) {
		pointToPoint["MPI_"+f] = true
	}
}

// Group names an MPI function as the measurement and the replay can both
// tell it: PointToPoint for point-to-point calls, else its own name.
func Group(fn string) string {
	if pointToPoint[fn] {
		return PointToPoint
	}
	return fn
}

// groups sums times by Group.
func groups(fns map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(fns))
	for f, t := range fns {
		out[Group(f)] += t
	}
	return out
}

// Gain is how much faster (negative: slower) p is than the replay of the
// job as it ran, in percent: the what-ifs' baseline. The replay as ran
// against the measured run is the model's calibration, shown apart.
func (r *Result) Gain(p *Prediction) float64 {
	if r.AsRan == nil || r.AsRan.Elapsed <= 0 {
		return 0
	}
	return 100 * (p.Elapsed - r.AsRan.Elapsed) / r.AsRan.Elapsed
}

// Predict replays the job as it ran and under every what-if.
func Predict(ctx context.Context, j *Job, req Request) (*Result, error) {
	progress := req.Progress
	if progress == nil {
		progress = func(string, ...any) {}
	}
	progress("reading %d ranks' traces (%d events)", j.Ranks, j.Events)
	if err := j.CheckTraces(); err != nil {
		return nil, err
	}
	res := &Result{Job: j.ID, Ranks: j.Ranks, Events: j.Events, Platform: req.Platform.Name, Warnings: []string{},
		Loopback: LoopbackUse{Bandwidth: req.Platform.Loopback.Bandwidth, Latency: req.Platform.Loopback.Latency,
			PairBandwidth: req.Platform.Loopback.PairBandwidth, From: req.Platform.Loopback.From}}
	hosts := map[string]bool{}
	for _, h := range req.Platform.HostsOf(req.HostOf) {
		hosts[h] = true
	}
	res.Hosts = len(hosts)
	res.Measured.Elapsed, res.Measured.Functions = j.Measured()
	for _, t := range res.Measured.Functions {
		res.Measured.MPISeconds += t
	}
	limit := req.WindowActions
	switch {
	case req.FullReplay:
		limit = 0
	case limit <= 0:
		limit = DefaultWindowActions
	}
	traces, err := j.Prepare(req.Work, limit)
	if err != nil {
		return nil, err
	}
	defer traces.Close()
	res.Window = traces.Window
	if traces.Whole != "" {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the trace's %d actions are replayed whole (%s): that takes a while", j.Events, traces.Whole))
	}
	scenarios := 1 + len(req.Networks)
	if req.Placement != nil {
		scenarios++
	}
	if w := traces.Window; w != nil {
		progress("every rank repeats a period of up to %d events %d times: each scenario replays every %d-th (%d actions) and the run without them (%d), and extrapolates",
			w.PeriodEvents, w.Periods, w.Stride, w.Actions[1], w.Actions[0])
	} else {
		progress("each scenario replays all %d events", j.Events)
	}
	step := 0
	replay := func(p *Platform, hostOf []string, name string) (*Prediction, error) {
		step++
		progress("replaying %s (%d of %d)", name, step, scenarios)
		return traces.Replay(ctx, j, p, hostOf, name, !req.ElapsedOnly)
	}
	if res.AsRan, err = replay(req.Platform, req.HostOf, "as ran"); err != nil {
		return nil, err
	}
	res.Oversubscribed = j.Oversubscribed(ctx)
	res.Warnings = append(res.Warnings, fidelity(res, j.truncated)...)
	if len(req.Networks) > 0 {
		if w := j.nothingBetweenNodes(req.Platform.HostsOf(req.HostOf)); w != "" {
			res.Warnings = append(res.Warnings, w)
		}
	}
	for _, n := range req.Networks {
		p, err := replay(n.Apply(req.Platform), req.HostOf, n.Name)
		if err != nil {
			return nil, err
		}
		res.WhatIfs = append(res.WhatIfs, p)
	}
	if req.Placement != nil {
		p, err := replay(req.Platform, req.Placement, "placement")
		if err != nil {
			return nil, err
		}
		res.WhatIfs = append(res.WhatIfs, p)
	}
	res.Measured.Groups = groups(res.Measured.Functions)
	for _, p := range append([]*Prediction{res.AsRan}, res.WhatIfs...) {
		p.Groups = groups(p.Functions)
		if p != res.AsRan {
			g := res.Gain(p)
			p.VsAsRan = &g
		}
	}
	return res, nil
}

// nothingBetweenNodes says why a network what-if predicts the job as it
// ran when nothing of it crossed the network: all its ranks on one node,
// or no point-to-point bytes between its nodes and no collectives ("":
// something crossed).
func (j *Job) nothingBetweenNodes(hostOf []string) string {
	const what = "a what-if of the links between nodes (bandwidth=, latency=) predicts it as it ran, and perfect and xN change only the loopback within nodes"
	if hs := Hosts(hostOf); len(hs) == 1 {
		return fmt.Sprintf("nothing crossed the network as the job ran (all %d ranks on node %s): %s", j.Ranks, hs[0], what)
	}
	if j.sent == nil || j.InterNodeBytes(hostOf) > 0 {
		return ""
	}
	for _, c := range j.colls {
		if c > 0 {
			return ""
		}
	}
	return fmt.Sprintf("nothing crossed the network as the job ran (no point-to-point bytes between its %d nodes, no collectives): %s", len(Hosts(hostOf)), what)
}

// HostsOf is each rank's host from a placement file: an Open MPI rankfile
// ("rank R=HOST slot=S") or a Hydra/Slurm machine file (HOST or HOST:N per
// line, ranks in order).
func HostsOf(text string, ranks int) ([]string, error) {
	out := make([]string, ranks)
	next := 0
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if c := strings.IndexByte(line, '#'); c >= 0 {
			line = strings.TrimSpace(line[:c])
		}
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "rank ") {
			k, v, ok := strings.Cut(strings.TrimPrefix(line, "rank "), "=")
			r, err := strconv.Atoi(strings.TrimSpace(k))
			if !ok || err != nil || r < 0 || r >= ranks || len(strings.Fields(v)) == 0 {
				return nil, fmt.Errorf("placement line %d: %q: want rank R=HOST with 0 <= R < %d", i+1, line, ranks)
			}
			out[r] = strings.Fields(v)[0]
			continue
		}
		host, n := line, 1
		if h, c, ok := strings.Cut(line, ":"); ok {
			v, err := strconv.Atoi(c)
			if err != nil || v < 1 {
				return nil, fmt.Errorf("placement line %d: %q: want HOST or HOST:N", i+1, line)
			}
			host, n = h, v
		}
		for ; n > 0 && next < ranks; n-- {
			out[next] = host
			next++
		}
	}
	for r, h := range out {
		if h == "" {
			return nil, fmt.Errorf("placement: no host for rank %d (%d ranks)", r, ranks)
		}
	}
	return out, nil
}

// Cores is the most ranks any host runs under each placement given.
func Cores(placements ...[]string) map[string]int {
	out := map[string]int{}
	for _, p := range placements {
		n := map[string]int{}
		for _, h := range p {
			n[h]++
		}
		for h, c := range n {
			out[h] = max(out[h], c)
		}
	}
	return out
}

// Hosts is the sorted set of hosts of some placements.
func Hosts(placements ...[]string) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range placements {
		for _, h := range p {
			if !seen[h] {
				seen[h] = true
				out = append(out, h)
			}
		}
	}
	sort.Strings(out)
	return out
}
