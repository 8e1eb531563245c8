package model

import (
	"bufio"
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A long run repeats one iteration: a halo kernel's minute on 1,024 ranks
// is 70 million actions, most of them the same ten per rank over and
// over. Replaying every one of them takes SMPI minutes; replaying a
// sample of the iterations, spread over the whole run with their own
// measured compute gaps, and extrapolating predicts the same times in a
// fraction of it.
//
// The window: every rank's trace is its prefix, M repetitions of its
// period (actions alike but for the compute amounts) and its suffix. Two
// replays run side by side: the bounds (prefix and suffix alone, no
// period) and the window (prefix, every S-th period, suffix: K periods).
// Everything they predict (elapsed, MPI time per function and per rank)
// is then linear in the periods, and the whole run is extrapolated:
//
//	whole = P0 + (P1 - P0) M / K
//
// Every rank leaves out as many periods, and a period must be closed
// (every request it posts is waited in it) and match the other ranks' (as
// many messages to each peer and tag as the peer receives, as many
// collectives), so the shortened traces still pair every send with its
// receive.

// DefaultWindowActions is how many actions a replay may hold before a
// periodic trace is replayed in part.
const DefaultWindowActions = 2_000_000

// minWindowPeriods is the fewest periods the window keeps: fewer would
// extrapolate from too small a sample of iterations.
const minWindowPeriods = 32

// Window says how a periodic trace was replayed in part.
type Window struct {
	// Periods is the repetitions every rank's trace has in common, of
	// PeriodEvents events at most.
	Periods      int `json:"periods"`
	PeriodEvents int `json:"period_events"`
	// Kept is the periods the window replays (every Stride-th), Actions
	// the actions the bounds and the window replay.
	Stride  int    `json:"stride"`
	Kept    int    `json:"kept_periods"`
	Actions [2]int `json:"replayed_actions"`
}

// shape is where one rank's trace repeats: lines [start, start +
// count*period) are count repetitions of one period (its first
// repetition's lines are lines), compute amounts aside.
type shape struct {
	lines                int // in all
	start, period, count int
	first                []string  // the first period's actions
	work                 []float64 // each period's compute, flops
}

var seed = maphash.MakeSeed()

// shaper finds a rank's period from its actions, one at a time.
type shaper struct {
	sig   []uint64
	work  []float64         // each action's compute (0 but for compute)
	texts map[uint64]string // each signature's first action
}

// maxTexts bounds the distinct actions a rank's shaper keeps the text of:
// a period is far shorter in real codes, and a hostile trace of distinct
// lines would otherwise keep every one.
const maxTexts = 1 << 14

// add takes the next action: its line and its fields.
func (s *shaper) add(line string, fields []string) {
	key, work := line, 0.0
	if fields[1] == "compute" { // the amount left out
		key = "compute"
		if len(fields) > 2 {
			work, _ = strconv.ParseFloat(fields[2], 64)
		}
	}
	s.work = append(s.work, work)
	sig := maphash.String(seed, key)
	if s.texts == nil {
		s.texts = map[uint64]string{}
	}
	if _, ok := s.texts[sig]; !ok && len(s.texts) < maxTexts {
		s.texts[sig] = line
	}
	s.sig = append(s.sig, sig)
}

// shape is where the actions repeat.
func (s *shaper) shape() *shape {
	sh := &shape{lines: len(s.sig)}
	start, period, count, ok := findPeriod(s.sig)
	if !ok {
		return sh
	}
	for _, sig := range s.sig[start : start+period] {
		text, ok := s.texts[sig]
		if !ok { // a period of more distinct actions than are kept
			return &shape{lines: len(s.sig)}
		}
		sh.first = append(sh.first, text)
	}
	sh.start, sh.period, sh.count = start, period, count
	sh.work = make([]float64, count)
	for i, w := range s.work[start : start+count*period] {
		sh.work[i/period] += w
	}
	return sh
}

// findPeriod finds the repetition that covers the middle half of sig:
// its smallest period there (by the prefix function), extended both ways
// as far as it holds. ok is false when the middle half does not repeat at
// least 8 times.
func findPeriod(sig []uint64) (start, period, count int, ok bool) {
	n := len(sig)
	lo, hi := n/4, 3*n/4
	seg := sig[lo:hi]
	if len(seg) < 16 {
		return 0, 0, 0, false
	}
	pi := make([]int, len(seg))
	for i := 1; i < len(seg); i++ {
		k := pi[i-1]
		for k > 0 && seg[i] != seg[k] {
			k = pi[k-1]
		}
		if seg[i] == seg[k] {
			k++
		}
		pi[i] = k
	}
	period = len(seg) - pi[len(seg)-1]
	if period*8 > len(seg) {
		return 0, 0, 0, false
	}
	for lo > 0 && sig[lo-1] == sig[lo-1+period] {
		lo--
	}
	for hi < n && sig[hi] == sig[hi-period] {
		hi++
	}
	return lo, period, (hi - lo) / period, true
}

// periodTraffic is what one period of a rank does with the others: the
// messages it sends to and receives from each (peer, tag), and its
// collectives in order.
type periodTraffic struct {
	sent, received map[[2]int]int
	collectives    []string
}

// collectiveActions are the collective actions the agent writes.
var collectiveActions = map[string]bool{
	"barrier": true, "bcast": true, "reduce": true, "allreduce": true, "alltoall": true, "alltoallv": true,
	"gather": true, "gatherv": true, "allgather": true, "allgatherv": true, "scatter": true, "scatterv": true,
	"reducescatter": true,
}

// traffic checks that a period of rank's actions is closed (every request
// it posts is waited in it, no wait for an earlier one) and holds only
// actions the window understands, and returns what it exchanges.
func traffic(rank int, lines []string) (*periodTraffic, error) {
	t := &periodTraffic{sent: map[[2]int]int{}, received: map[[2]int]int{}}
	open := map[[3]int]int{} // (source, destination, tag) posted, not yet waited
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) < 2 {
			return nil, fmt.Errorf("action %q", line)
		}
		nums := make([]int, 0, 3)
		for _, s := range f[2:min(len(f), 5)] {
			v, err := strconv.Atoi(s)
			if err != nil {
				break
			}
			nums = append(nums, v)
		}
		switch act := f[1]; {
		case act == "compute":
		case act == "send" || act == "isend" || act == "recv" || act == "irecv":
			if len(nums) < 2 {
				return nil, fmt.Errorf("action %q", line)
			}
			key := [2]int{nums[0], nums[1]}
			if act[len(act)-4:] == "send" {
				t.sent[key]++
				if act == "isend" {
					open[[3]int{rank, nums[0], nums[1]}]++
				}
			} else {
				t.received[key]++
				if act == "irecv" {
					open[[3]int{nums[0], rank, nums[1]}]++
				}
			}
		case act == "wait":
			if len(nums) < 3 {
				return nil, fmt.Errorf("action %q", line)
			}
			key := [3]int{nums[0], nums[1], nums[2]}
			if open[key] == 0 {
				return nil, fmt.Errorf("a wait for a request posted before the period: %q", line)
			}
			open[key]--
		case collectiveActions[act]:
			t.collectives = append(t.collectives, act)
		default:
			return nil, fmt.Errorf("action %s", act)
		}
	}
	for key, n := range open {
		if n > 0 {
			return nil, fmt.Errorf("a request from rank %d to rank %d, tag %d, is waited after the period", key[0], key[1], key[2])
		}
	}
	return t, nil
}

// planWindow decides whether and how to replay the traces in part: nil
// when they fit in budget actions, do not repeat enough, or their periods
// do not match across ranks (why says so).
func planWindow(shapes []*shape, budget int) (w *Window, why string) {
	total, periods, most := 0, -1, 0
	for _, sh := range shapes {
		total += sh.lines
	}
	if total <= budget {
		return nil, ""
	}
	for r, sh := range shapes {
		if sh.period == 0 {
			return nil, fmt.Sprintf("rank %d's trace does not repeat", r)
		}
		if periods < 0 || sh.count < periods {
			periods = sh.count
		}
		most = max(most, sh.period)
	}
	ts := make([]*periodTraffic, len(shapes))
	for r, sh := range shapes {
		t, err := traffic(r, sh.first)
		if err != nil {
			return nil, fmt.Sprintf("rank %d's period (%d actions) cannot be left out: %v", r, sh.period, err)
		}
		ts[r] = t
	}
	for r, t := range ts {
		if len(t.collectives) != len(ts[0].collectives) {
			return nil, fmt.Sprintf("rank %d's period holds %d collectives, rank 0's %d", r, len(t.collectives), len(ts[0].collectives))
		}
		for k, n := range t.sent {
			if k[0] < 0 || k[0] >= len(ts) || ts[k[0]].received[[2]int{r, k[1]}] != n {
				return nil, fmt.Sprintf("rank %d's period sends %d messages with tag %d to rank %d, which receives another number in its own", r, n, k[1], k[0])
			}
		}
		for k, n := range t.received {
			if k[0] < 0 || k[0] >= len(ts) || ts[k[0]].sent[[2]int{r, k[1]}] != n {
				return nil, fmt.Sprintf("rank %d's period receives %d messages with tag %d from rank %d, which sends another number in its own", r, n, k[1], k[0])
			}
		}
	}
	periodic := 0
	for _, sh := range shapes {
		periodic += periods * sh.period
	}
	rest := total - periodic
	// every stride-th period kept: rest + periodic/stride actions
	if rest >= budget/2 {
		return nil, fmt.Sprintf("%d of the %d actions are outside the repeating part", rest, total)
	}
	stride := max(2, (periodic+budget-rest-1)/(budget-rest))
	kept := (periods + stride - 1) / stride
	if kept < minWindowPeriods {
		return nil, fmt.Sprintf("only %d repetitions of the period", periods)
	}
	return &Window{Periods: periods, PeriodEvents: most, Stride: stride, Kept: kept,
		Actions: [2]int{rest, rest + periodic/periods*kept}}, ""
}

// sampled says whether line i of a trace shaped sh is in the window's
// first periods, those it samples.
func (sh *shape) sampled(i, periods int) bool {
	return i >= sh.start && i < sh.start+periods*sh.period
}

// keep says whether line i of a trace shaped sh is replayed when every
// stride-th of the window's first periods is kept (stride 0: none).
func (sh *shape) keep(i, periods, stride int) bool {
	if !sh.sampled(i, periods) {
		return true
	}
	return stride > 0 && (i-sh.start)/sh.period%stride == 0
}

// calibration is the factor the window's compute gaps are scaled by so
// that, extrapolated, they add up to the rank's whole compute over the
// periods left out or kept: the sample's error in each rank's own compute
// is taken out, and what remains to sample is how the ranks' gaps meet.
func (sh *shape) calibration(w *Window) float64 {
	var all, kept float64
	for i, v := range sh.work[:w.Periods] {
		all += v
		if i%w.Stride == 0 {
			kept += v
		}
	}
	if kept <= 0 || all <= 0 {
		return 1
	}
	return all * float64(w.Kept) / (kept * float64(w.Periods))
}

// writeWindow writes rank's trace text from r to dir as the bounds
// (rank-N.ti.0) and the window (rank-N.ti.S, S the stride), and returns
// the files' paths.
func writeWindow(r io.Reader, dir string, rank int, sh *shape, w *Window) ([2]string, error) {
	var paths [2]string
	var outs [2]*bufio.Writer
	strides := []int{0, w.Stride}
	for i, s := range strides {
		paths[i] = filepath.Join(dir, fmt.Sprintf("rank-%d.ti.%d", rank, s))
		f, err := os.Create(paths[i])
		if err != nil {
			return paths, err
		}
		defer f.Close()
		outs[i] = bufio.NewWriterSize(f, 1<<16)
	}
	scale := sh.calibration(w)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for n := 0; sc.Scan(); n++ {
		line := sc.Bytes()
		for i, s := range strides {
			if !sh.keep(n, w.Periods, s) {
				continue
			}
			if s > 0 && scale != 1 && sh.sampled(n, w.Periods) {
				if f := strings.Fields(string(line)); len(f) == 3 && f[1] == "compute" {
					v, _ := strconv.ParseFloat(f[2], 64)
					fmt.Fprintf(outs[i], "%s compute %.0f\n", f[0], v*scale)
					continue
				}
			}
			outs[i].Write(line)
			outs[i].WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		return paths, err
	}
	for _, o := range outs {
		if err := o.Flush(); err != nil {
			return paths, err
		}
	}
	return paths, nil
}

// extrapolate is the whole run's prediction from the bounds' replay p0
// and the window's p1.
func (w *Window) extrapolate(p0, p1 *Prediction) *Prediction {
	k := float64(w.Periods) / float64(w.Kept)
	at := func(b, x float64) float64 { return max(0, b+(x-b)*k) }
	out := *p1
	out.Elapsed = at(p0.Elapsed, p1.Elapsed)
	out.MPISeconds = at(p0.MPISeconds, p1.MPISeconds)
	out.Functions = map[string]float64{}
	for f, t := range p1.Functions {
		out.Functions[f] = at(p0.Functions[f], t)
	}
	if p1.RankMPI != nil {
		out.RankMPI = make([]float64, len(p1.RankMPI))
		for r, t := range p1.RankMPI {
			out.RankMPI[r] = at(p0.RankMPI[r], t)
		}
	}
	return &out
}
