package model

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/netloom/netloom/internal/echo"
	"github.com/netloom/netloom/internal/ingest"
	"github.com/netloom/netloom/internal/store"
)

// Job is a traced run: its profile (what was measured) and each rank's
// replay trace.
type Job struct {
	ID     string
	Dir    string
	Ranks  int
	Nodes  []string // each rank's node as it ran
	Traces []string // rank-N.ti.gz, by rank
	Events int      // in all traces
	// Elapsed is the slowest rank's traced span, as measured.
	Elapsed float64
	// sent[r] is rank r's point-to-point bytes to each peer in its trace
	// (CheckTraces fills it), shapes[r] where its trace repeats.
	sent   []map[int]uint64
	colls  []int // each rank's collectives
	shapes []*shape
	// truncated: some rank's trace was cut (rank-N.ti.json)
	truncated bool
	// Profile is the run as the agents measured it.
	Profile *store.Job
	// fsys holds the traces, by names (nil: Traces are the OS's paths);
	// maxActions and maxLine bound what is read of them (0: no bound),
	// and checked[r] is how many bytes rank r's trace held when checked,
	// so that a trace changed since cannot feed the replay more.
	fsys       fs.FS
	names      []string
	maxActions int
	maxLine    int
	checked    []int64
}

// Source is where a traced run is read from, within bounds.
type Source struct {
	// FS holds the profile directory (netloom run --trace --output DIR):
	// the job's files, or one subdirectory holding them.
	FS fs.FS
	// Name is the directory, for messages and Job.Dir.
	Name string
	// MaxActions bounds the actions of all traces together, MaxLine one
	// trace line's bytes, MaxRecord one profile record's bytes (0: the
	// defaults below).
	MaxActions, MaxLine, MaxRecord int
}

// Bounds when a Source sets none: what the agent writes by default
// (NETLOOM_TRACE_MB) on a large job, with room.
const (
	DefaultMaxLine   = 1 << 16
	DefaultMaxRecord = 1 << 30
)

// traceMeta is rank-N.ti.json, which the agent writes beside the trace.
type traceMeta struct {
	Rank      int  `json:"rank"`
	WorldSize int  `json:"world_size"`
	Events    int  `json:"events"`
	Truncated bool `json:"truncated"`
	// TruncatedReason is what cut the trace: "events" (the buffer,
	// NETLOOM_TRACE_MB), "counts" (the v-collectives' counts),
	// "requests" (the request table), "memory", or another word.
	TruncatedReason string `json:"truncated_reason"`
	// The nonblocking requests: posted, completed (a wait each), the most
	// outstanding at once and the most the request table holds.
	RequestsPosted         uint64  `json:"requests_posted"`
	RequestsCompleted      uint64  `json:"requests_completed"`
	RequestsOutstandingMax uint64  `json:"requests_outstanding_max"`
	RequestsLimit          uint64  `json:"requests_limit"`
	UntracedCalls          uint64  `json:"untraced_calls"`
	HostFlops              float64 `json:"host_flops"`
	// Elapsed is the span the trace covers: MPI_Init's return to
	// MPI_Finalize's entry, as the rank measured it.
	Elapsed float64 `json:"elapsed_seconds"`
}

// Load reads a traced run from a profile directory (netloom run --trace
// --output DIR): DIR/<job>/ or DIR itself.
func Load(dir string) (*Job, []string, error) {
	return LoadFrom(Source{FS: os.DirFS(dir), Name: dir})
}

// LoadFrom reads a traced run from src.
func LoadFrom(src Source) (*Job, []string, error) {
	if src.MaxLine <= 0 {
		src.MaxLine = DefaultMaxLine
	}
	if src.MaxRecord <= 0 {
		src.MaxRecord = DefaultMaxRecord
	}
	sub, err := ingest.FindProfileDirFS(src.FS, src.Name)
	if err != nil {
		return nil, nil, err
	}
	jobDir := filepath.Join(src.Name, sub)
	jobFS, err := fs.Sub(src.FS, sub)
	if err != nil {
		return nil, nil, err
	}
	prof, warns, err := ingest.ReadProfileFS(jobFS, jobDir, src.MaxRecord)
	if err != nil {
		return nil, nil, err
	}
	var warnings []string
	for _, w := range warns {
		warnings = append(warnings, w.Error())
	}
	j := &Job{ID: prof.ID, Dir: jobDir, Ranks: prof.Ranks, Profile: prof, fsys: jobFS, maxActions: src.MaxActions, maxLine: src.MaxLine}
	if j.Ranks == 0 {
		return nil, warnings, fmt.Errorf("%s: no ranks in the profile", jobDir)
	}
	j.Nodes = make([]string, j.Ranks)
	cut, cutRanks := 0, []string(nil) // ranks whose trace was cut
	for _, p := range prof.Processes {
		if p.Rank >= 0 && p.Rank < j.Ranks {
			j.Nodes[p.Rank] = p.Node
		}
	}
	for r := range j.Ranks {
		if j.Nodes[r] == "" {
			pb := fmt.Sprintf("rank-%d.pb", r)
			if pe := ingest.RankFileError(warns, r); pe != nil { // what is wrong with its file
				return nil, warnings, fmt.Errorf("rank %d has no profile: %w", r, pe)
			}
			if _, err := fs.Stat(jobFS, pb); err != nil {
				return nil, warnings, fmt.Errorf("%s: rank %d has no profile (no %s)", jobDir, r, pb)
			}
			return nil, warnings, fmt.Errorf("%s: rank %d has no profile: %s holds no complete snapshot of it", jobDir, r, pb)
		}
		name := fmt.Sprintf("rank-%d.ti.gz", r)
		if _, err := fs.Stat(jobFS, name); err != nil {
			return nil, warnings, fmt.Errorf("%s: rank %d has no replay trace (run the job with netloom run --trace --output DIR, or NETLOOM_TRACE=1): %w", jobDir, r, err)
		}
		j.names = append(j.names, name)
		meta := strings.TrimSuffix(name, ".gz") + ".json"
		m, err := readTraceMeta(jobFS, meta)
		if err != nil {
			return nil, warnings, fmt.Errorf("%s: rank %d's trace description %s: %w", jobDir, r, meta, err)
		}
		if m.HostFlops != HostFlops {
			return nil, warnings, fmt.Errorf("%s: rank %d's trace counts compute at %g flop/s, not %g (%s)", jobDir, r, m.HostFlops, HostFlops, meta)
		}
		if m.Truncated {
			j.truncated = true
			if cut++; cut <= maxCutWarnings {
				warnings = append(warnings, truncatedWarning(r, &m))
			} else if len(cutRanks) < 20 {
				cutRanks = append(cutRanks, strconv.Itoa(r))
			}
		}
		if m.UntracedCalls > 0 {
			warnings = append(warnings, fmt.Sprintf("rank %d: %d calls the replay cannot express (collectives on other communicators than MPI_COMM_WORLD, persistent requests) count as compute", r, m.UntracedCalls))
		}
		j.Events += max(m.Events, 0)
		j.Elapsed = max(j.Elapsed, m.Elapsed)
		if j.maxActions > 0 && j.Events > j.maxActions {
			return nil, warnings, fmt.Errorf("%s: the traces hold more than %d actions, the most this daemon replays (model_max_actions): replay them with netloom model", jobDir, j.maxActions)
		}
		j.Traces = append(j.Traces, filepath.Join(jobDir, name))
	}
	if cut > maxCutWarnings {
		more := ""
		if cut-maxCutWarnings > len(cutRanks) {
			more = ", ..."
		}
		warnings = append(warnings, fmt.Sprintf("and %d more ranks' traces were cut (ranks %s%s)", cut-maxCutWarnings, strings.Join(cutRanks, ", "), more))
	}
	return j, warnings, nil
}

// maxCutWarnings is the most ranks whose cut trace is told one by one.
const maxCutWarnings = 4

// truncatedWarning says that rank r's trace was cut, by what, and what
// the replay then covers.
func truncatedWarning(r int, m *traceMeta) string {
	why := ""
	switch m.TruncatedReason {
	case "":
		why = "its description gives no reason"
	case "events":
		why = "its buffer (NETLOOM_TRACE_MB) filled"
	case "counts":
		why = "its buffer for the v-collectives' counts (NETLOOM_TRACE_MB) filled"
	case "requests":
		why = fmt.Sprintf("more nonblocking requests were outstanding at once than its request table holds (%d; %d posted, %d completed)",
			m.RequestsLimit, m.RequestsPosted, m.RequestsCompleted)
	case "memory":
		why = "the agent could not allocate memory for it"
	default:
		why = "truncated_reason " + echo.Quote(m.TruncatedReason, 80)
	}
	return fmt.Sprintf("rank %d's trace was cut after %d events (%s): the replay covers the run only up to there, and its prediction is of that part", r, m.Events, why)
}

// readTraceMeta reads a rank's trace description (rank-N.ti.json).
func readTraceMeta(fsys fs.FS, name string) (traceMeta, error) {
	var m traceMeta
	b, err := readSmall(fsys, name, 1<<16)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("not the JSON the agent writes: %w", err)
	}
	return m, nil
}

// readSmall reads a file of at most limit bytes.
func readSmall(fsys fs.FS, name string, limit int64) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("more than %d bytes", limit)
	}
	return b, err
}

// Measured is the run as the agents measured it, on the replay's span
// (from MPI_Init's return to MPI_Finalize): the slowest rank's time and
// each MPI function's time summed over ranks.
func (j *Job) Measured() (elapsed float64, functions map[string]float64) {
	functions = map[string]float64{}
	if j.Profile == nil { // traces alone
		return j.Elapsed, functions
	}
	for _, p := range j.Profile.Processes {
		for _, f := range p.Functions {
			if f.Name != "MPI_Init" && f.Name != "MPI_Init_thread" && f.Name != "MPI_Finalize" {
				functions[f.Name] += float64(f.TimeNS+f.WaitNS) / 1e9
			}
		}
	}
	return j.Elapsed, functions
}

// Prediction is one replay's outcome.
type Prediction struct {
	Scenario string  `json:"scenario"`
	Platform string  `json:"platform"`
	Elapsed  float64 `json:"elapsed_seconds"` // the last rank's end
	// InterNodeBytes is the point-to-point bytes between ranks on
	// different hosts (Job.InterNodeBytes).
	InterNodeBytes uint64 `json:"inter_node_p2p_bytes"`
	// IntraNodeBytes is the rest of the point-to-point bytes: between
	// ranks of one host, through its loopback, which they share.
	IntraNodeBytes uint64 `json:"intra_node_p2p_bytes"`
	// MPISeconds is the replay's time in MPI, summed over ranks;
	// Functions splits it by the trace's actions (named as MPI calls:
	// MPI_Wait stands for every wait and test that completed requests,
	// MPI_Isend/MPI_Irecv for the posts, also those of MPI_Sendrecv).
	MPISeconds float64            `json:"mpi_seconds"`
	Functions  map[string]float64 `json:"functions"`
	// Groups is Functions under the names the measurement shares
	// (Group: point-to-point calls as one).
	Groups map[string]float64 `json:"function_groups"`
	// VsAsRan is a what-if's change of the elapsed time against the
	// replay of the job as it ran, in percent (Result.Gain); nil for the
	// replay as ran itself.
	VsAsRan *float64 `json:"vs_as_ran_pct,omitempty"`
	// RankMPI is each rank's MPI time.
	RankMPI []float64 `json:"rank_mpi_seconds"`
	// PerFunction says whether the MPI times were measured in the replay
	// (false: elapsed only, a replay about twice as fast for large traces).
	PerFunction bool `json:"per_function"`
}

// actionFunction names the trace's actions as MPI calls.
var actionFunction = map[string]string{
	"send": "MPI_Send", "isend": "MPI_Isend", "recv": "MPI_Recv", "irecv": "MPI_Irecv", "wait": "MPI_Wait",
	"test": "MPI_Test", "waitall": "MPI_Waitall", "barrier": "MPI_Barrier", "bcast": "MPI_Bcast",
	"reduce": "MPI_Reduce", "allreduce": "MPI_Allreduce", "alltoall": "MPI_Alltoall", "alltoallv": "MPI_Alltoallv",
	"gather": "MPI_Gather", "gatherv": "MPI_Gatherv", "allgather": "MPI_Allgather", "allgatherv": "MPI_Allgatherv",
	"scatter": "MPI_Scatter", "scatterv": "MPI_Scatterv", "reducescatter": "MPI_Reduce_scatter",
}

// collectives are the trace's collective actions.
var collectives = map[string]bool{"barrier": true, "bcast": true, "reduce": true, "allreduce": true, "alltoall": true, "alltoallv": true,
	"gather": true, "gatherv": true, "allgather": true, "allgatherv": true, "scatter": true, "scatterv": true, "reducescatter": true}

// Smpirun is SimGrid's launcher.
var Smpirun = "smpirun"

// verboseLine is one action SMPI's replay logs with its duration:
// "[host:rank:(pid) clock] ...: [smpi_replay/VERBOSE] RANK ACTION ARGS... DURATION".
var verboseLine = regexp.MustCompile(`^\[[^\]]*:(\d+):\(\d+\) ([0-9.e+-]+)\] .*\[smpi_replay/VERBOSE\] (\d+) (\w+)(?: .*)? ([0-9.e+-]+)$`)

// simulationTime is the line the last rank's replay ends with.
var simulationTime = regexp.MustCompile(`\[smpi_replay/INFO\] Simulation time ([0-9.e+-]+)$`)

// Traces is a job's traces made ready for SMPI: text files in a
// temporary folder, every action (one replay) or a periodic run's bounds
// and window (two replays, extrapolated; window.go).
type Traces struct {
	dir    string
	lists  []string // the trace list of each replay
	Window *Window
	// Whole says why a trace over the budget is replayed whole ("": it
	// fits, or the window is used).
	Whole string
}

// Prepare writes the job's traces for replay under work: all of them
// when they hold no more than maxActions actions (or maxActions <= 0),
// else a window when they repeat (Window). Close removes them.
func (j *Job) Prepare(work string, maxActions int) (*Traces, error) {
	if j.shapes == nil {
		if err := j.CheckTraces(); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp(work, "replay-")
	if err != nil {
		return nil, err
	}
	t := &Traces{dir: dir}
	if maxActions > 0 {
		t.Window, t.Whole = planWindow(j.shapes, maxActions)
	}
	names := make([][2]string, len(j.Traces))
	errs := make([]error, len(j.Traces))
	eachRank(len(j.Traces), func(r int) {
		if t.Window == nil {
			names[r][0] = filepath.Join(dir, fmt.Sprintf("rank-%d.ti", r))
			errs[r] = j.gunzip(r, names[r][0])
		} else {
			names[r], errs[r] = j.windowTrace(r, dir, j.shapes[r], t.Window)
		}
	})
	if err := errors.Join(errs...); err != nil {
		t.Close()
		return nil, err
	}
	var lists [2]strings.Builder
	for _, n := range names {
		for i := range lists {
			fmt.Fprintln(&lists[i], n[i])
		}
	}
	n := 1
	if t.Window != nil {
		n = 2
	}
	for i := range n {
		name := filepath.Join(dir, fmt.Sprintf("traces.%d", i))
		if err := os.WriteFile(name, []byte(lists[i].String()), 0o644); err != nil {
			t.Close()
			return nil, err
		}
		t.lists = append(t.lists, name)
	}
	return t, nil
}

// Close removes the prepared traces.
func (t *Traces) Close() error { return os.RemoveAll(t.dir) }

func (j *Job) windowTrace(rank int, dir string, sh *shape, w *Window) ([2]string, error) {
	z, done, err := j.openTrace(rank)
	if err != nil {
		return [2]string{}, err
	}
	defer done()
	names, err := writeWindow(z, dir, rank, sh, w)
	if err != nil {
		err = fmt.Errorf("%s: %w", j.Traces[rank], err)
	}
	return names, err
}

// Replay replays the prepared traces on the platform, rank r on host
// hostOf[r]; a window's two replays run side by side and the whole run is
// extrapolated from them.
func (t *Traces) Replay(ctx context.Context, j *Job, p *Platform, hostOf []string, scenario string, perFunction bool) (*Prediction, error) {
	if len(hostOf) != j.Ranks {
		return nil, fmt.Errorf("%d hosts for %d ranks", len(hostOf), j.Ranks)
	}
	dir, err := os.MkdirTemp(t.dir, "platform-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	hostOf = p.HostsOf(hostOf)
	files := map[string]string{"hosts": strings.Join(hostOf, "\n") + "\n"}
	var plat strings.Builder
	if err := p.WriteXML(&plat); err != nil {
		return nil, err
	}
	files["platform.xml"] = plat.String()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return nil, err
		}
	}
	preds := make([]*Prediction, len(t.lists))
	errs := make([]error, len(t.lists))
	var wg sync.WaitGroup
	for i, list := range t.lists {
		wg.Add(1)
		go func() {
			defer wg.Done()
			preds[i], errs[i] = smpiReplay(ctx, j.Ranks, dir, list, p.Name, perFunction)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	pred := preds[0]
	if t.Window != nil {
		pred = t.Window.extrapolate(preds[0], preds[1])
	}
	pred.Scenario = scenario
	if j.sent != nil {
		pred.InterNodeBytes, pred.IntraNodeBytes = j.nodeBytes(hostOf)
	}
	return pred, nil
}

// smpiReplay runs smpirun on the platform and hosts in dir and the traces
// list names.
func smpiReplay(ctx context.Context, ranks int, dir, list, platform string, perFunction bool) (*Prediction, error) {
	tmp, err := os.MkdirTemp(dir, "smpi-")
	if err != nil {
		return nil, err
	}
	logs := []string{"--log=root.thres:warning", "--log=smpi_replay.thres:info"}
	if perFunction {
		logs[1] = "--log=smpi_replay.thres:verbose"
	}
	cmd := exec.CommandContext(ctx, Smpirun, append(logs, "-np", strconv.Itoa(ranks), "-platform", filepath.Join(dir, "platform.xml"),
		"-hostfile", filepath.Join(dir, "hosts"), "-replay", list,
		// the platform's numbers as they are: a message takes latency +
		// size / bandwidth on each link, not SMPI's factors fitted to
		// another cluster
		"--cfg=smpi/bw-factor:0:1", "--cfg=smpi/lat-factor:0:1",
		"--cfg=smpi/tmpdir:"+tmp)...)
	cmd.Dir = tmp
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w (install SimGrid: Debian's simgrid and libsimgrid-dev)", Smpirun, err)
	}
	pred := &Prediction{Platform: platform, Functions: map[string]float64{}, PerFunction: perFunction}
	if perFunction {
		pred.RankMPI = make([]float64, ranks)
	}
	var tail []string
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	actions := 0
	for sc.Scan() {
		line := sc.Text()
		if m := simulationTime.FindStringSubmatch(line); m != nil {
			t, _ := strconv.ParseFloat(m[1], 64)
			pred.Elapsed = max(pred.Elapsed, t)
			actions++
			continue
		}
		m := verboseLine.FindStringSubmatch(line)
		if m == nil {
			if tail = append(tail, line); len(tail) > 20 {
				tail = tail[1:]
			}
			continue
		}
		actions++
		clock, _ := strconv.ParseFloat(m[2], 64)
		rank, _ := strconv.Atoi(m[3])
		d, _ := strconv.ParseFloat(m[5], 64)
		pred.Elapsed = max(pred.Elapsed, clock)
		if m[4] == "compute" || rank < 0 || rank >= ranks {
			continue
		}
		name := actionFunction[m[4]]
		if name == "" {
			name = m[4]
		}
		pred.Functions[name] += d
		pred.RankMPI[rank] += d
		pred.MPISeconds += d
	}
	werr := cmd.Wait()
	if werr != nil || actions == 0 {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%s replay on %s failed (%v):\n%s", Smpirun, platform, werr, strings.Join(tail, "\n"))
	}
	return pred, nil
}

// openTrace opens rank r's gzip-compressed trace for reading. Once the
// traces were checked, it reads no more than the check saw.
func (j *Job) openTrace(r int) (io.Reader, func() error, error) {
	var f io.ReadCloser
	var err error
	if j.fsys != nil {
		f, err = j.fsys.Open(j.names[r])
	} else {
		f, err = os.Open(j.Traces[r])
	}
	if err != nil {
		return nil, nil, err
	}
	z, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		switch {
		case err == io.EOF:
			return nil, nil, fmt.Errorf("%s: empty (a gzip-compressed trace was expected)", j.Traces[r])
		case errors.Is(err, io.ErrUnexpectedEOF):
			return nil, nil, fmt.Errorf("%s: cut short (unexpected EOF in its gzip header)", j.Traces[r])
		case errors.Is(err, gzip.ErrHeader):
			return nil, nil, fmt.Errorf("%s: not gzip-compressed (%v)", j.Traces[r], err)
		}
		return nil, nil, fmt.Errorf("%s: %w", j.Traces[r], err)
	}
	var rd io.Reader = z
	if j.checked != nil {
		rd = &capped{r: z, left: j.checked[r], name: j.Traces[r]}
	}
	return rd, f.Close, nil
}

// capped fails a read past left bytes: a trace that grew since it was
// checked.
type capped struct {
	r    io.Reader
	left int64
	name string
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left <= 0 {
		var one [1]byte
		if n, _ := c.r.Read(one[:]); n > 0 {
			return 0, fmt.Errorf("%s changed since it was checked", c.name)
		}
		return 0, io.EOF
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

func (j *Job) gunzip(r int, dst string) error {
	z, done, err := j.openTrace(r)
	if err != nil {
		return err
	}
	defer done()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, z); err != nil {
		out.Close()
		return fmt.Errorf("%s: %w", j.Traces[r], err)
	}
	return out.Close()
}

// CheckTraces reads every trace once and refuses what SMPI cannot replay:
// a receive whose sender the trace does not know (MPI_ANY_SOURCE with the
// status ignored), a rank number out of range, a line it does not parse.
func (j *Job) CheckTraces() error {
	errs := make([]error, len(j.Traces))
	j.sent = make([]map[int]uint64, j.Ranks)
	j.colls = make([]int, j.Ranks)
	j.shapes = make([]*shape, j.Ranks)
	checked := make([]int64, j.Ranks)
	lim := &actionLimit{max: int64(j.maxActions), line: j.maxLine}
	eachRank(len(j.Traces), func(r int) {
		j.sent[r] = map[int]uint64{}
		var sh shaper
		checked[r], errs[r] = j.checkTrace(r, j.sent[r], &sh, lim)
		j.shapes[r] = sh.shape()
	})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	j.checked = checked
	return nil
}

// actionLimit bounds the actions of all ranks' traces together (max 0:
// none) and each line's bytes (line 0: DefaultMaxLine).
type actionLimit struct {
	max  int64
	n    atomic.Int64
	line int
}

// eachRank calls do for ranks 0 to n-1, on as many goroutines as there are
// CPUs: reading and writing 1,024 ranks' traces is seconds of gzip and
// parsing per core.
func eachRank(n int, do func(r int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := int(next.Add(1) - 1); r < n; r = int(next.Add(1) - 1) {
				do(r)
			}
		}()
	}
	wg.Wait()
}

// InterNodeBytes is the point-to-point bytes the trace sends between
// ranks on different hosts under a placement (collectives are left out:
// how SMPI decomposes them is its algorithms' choice). CheckTraces first.
func (j *Job) InterNodeBytes(hostOf []string) uint64 {
	inter, _ := j.nodeBytes(hostOf)
	return inter
}

// nodeBytes is the point-to-point bytes the trace sends between ranks on
// different hosts and between ranks of one host.
func (j *Job) nodeBytes(hostOf []string) (inter, intra uint64) {
	for r, peers := range j.sent {
		for q, n := range peers {
			if hostOf[r] != hostOf[q] {
				inter += n
			} else {
				intra += n
			}
		}
	}
	return inter, intra
}

func (j *Job) checkTrace(r int, sent map[int]uint64, sh *shaper, lim *actionLimit) (int64, error) {
	z, done, err := j.openTrace(r)
	if err != nil {
		return 0, err
	}
	defer done()
	c := &counted{r: z}
	err = checkActions(c, j.Traces[r], r, j.Ranks, sent, &j.colls[r], sh, lim)
	return c.n, err
}

// counted counts the bytes read through it.
type counted struct {
	r io.Reader
	n int64
}

func (c *counted) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// checkActions reads rank's trace actions from r (named path in errors),
// adding the bytes each send carries to sent by destination, counting its
// collectives in colls, and each action to sh (unless nil), within lim
// (nil: the default line bound).
func checkActions(r io.Reader, path string, rank, ranks int, sent map[int]uint64, colls *int, sh *shaper, lim *actionLimit) error {
	if lim == nil {
		lim = &actionLimit{}
	}
	if lim.line <= 0 {
		lim.line = DefaultMaxLine
	}
	// A read error (a file cut short, corrupt data) ends the lines as the
	// end of the file would, and is told once the lines before it are
	// read: the partial line it leaves is not read as an action.
	rd := &heldError{r: r}
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, min(lim.line, 1<<20)), lim.line)
	partial := false
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		adv, tok, err := bufio.ScanLines(data, atEOF)
		partial = tok != nil && atEOF && !bytes.Contains(data[:adv], []byte{'\n'})
		return adv, tok, err
	})
	n := 0
	err := func() error {
		for sc.Scan() {
			n++
			if partial && rd.err != nil {
				return readError(path, n, rd.err)
			}
			if err := checkAction(sc.Text(), path, n, rank, ranks, sent, colls, sh, lim); err != nil {
				return err
			}
		}
		return nil
	}()
	var many *tooManyActions
	if err != nil && !errors.As(err, &many) {
		// a line that does not read may be corrupt data: said so when the
		// rest of the file does not decompress
		if rd.err == nil {
			_, rd.err = io.Copy(io.Discard, rd.r)
		}
		if rd.err != nil && !errors.Is(rd.err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%s: corrupt (%v): %w", path, rd.err, err)
		}
	}
	if err != nil {
		return err
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("%s line %d: longer than %d bytes", path, n+1, lim.line)
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	if rd.err != nil {
		return readError(path, n+1, rd.err)
	}
	return nil
}

// checkAction checks line n of a trace (checkActions).
func checkAction(line, path string, n, rank, ranks int, sent map[int]uint64, colls *int, sh *shaper, lim *actionLimit) error {
	if lim.max > 0 && lim.n.Add(1) > lim.max {
		return &tooManyActions{fmt.Sprintf("%s line %d: the traces hold more than %d actions, the most this daemon replays (model_max_actions): replay them with netloom model", path, n, lim.max)}
	}
	fields := strings.Fields(line)
	if len(fields) < 2 || fields[0] != strconv.Itoa(rank) {
		return fmt.Errorf("%s line %d: not an action of rank %d: %s", path, n, rank, echo.Quote(line, 80))
	}
	peers := 0
	switch fields[1] {
	case "send", "isend", "recv", "irecv":
		peers = 1
	case "wait":
		peers = 2 // source and destination
	}
	if peers > 0 {
		if len(fields) < 2+peers {
			return fmt.Errorf("%s line %d: %s without its peer", path, n, fields[1])
		}
		for _, s := range fields[2 : 2+peers] {
			p, err := strconv.Atoi(s)
			if err != nil || p >= ranks {
				return fmt.Errorf("%s line %d: %s: rank %s out of range", path, n, fields[1], echo.Quote(s, 80))
			}
			if p < 0 {
				return fmt.Errorf("%s line %d: %s: the sender of a receive from MPI_ANY_SOURCE is not known (the program ignored its status): SMPI cannot replay it", path, n, fields[1])
			}
		}
	}
	if collectives[fields[1]] {
		*colls++
	}
	if (fields[1] == "send" || fields[1] == "isend") && len(fields) >= 5 {
		peer, _ := strconv.Atoi(fields[2])
		b, err := strconv.ParseFloat(fields[4], 64)
		if err != nil || b < 0 {
			return fmt.Errorf("%s line %d: %s: size %s", path, n, fields[1], echo.Quote(fields[4], 80))
		}
		sent[peer] += uint64(b)
	}
	if sh != nil {
		sh.add(line, fields)
	}
	return nil
}

// tooManyActions is the error of traces over the daemon's bound.
type tooManyActions struct{ msg string }

func (e *tooManyActions) Error() string { return e.msg }

// heldError reads r and keeps its first error other than the end of the
// file, ending the reading there as the end of the file would.
type heldError struct {
	r   io.Reader
	err error
}

func (h *heldError) Read(p []byte) (int, error) {
	if h.err != nil {
		return 0, io.EOF
	}
	n, err := h.r.Read(p)
	if err != nil && err != io.EOF {
		h.err = err
		err = io.EOF
	}
	return n, err
}

// readError says what is wrong with a trace file whose reading failed at
// line n: cut short, or corrupt.
func readError(path string, n int, err error) error {
	var corrupt flate.CorruptInputError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%s: cut short (unexpected EOF at line %d): the rank did not finish writing it, or it was copied in part", path, n)
	case errors.Is(err, gzip.ErrChecksum), errors.As(err, &corrupt), errors.Is(err, gzip.ErrHeader):
		return fmt.Errorf("%s: corrupt at line %d (%v)", path, n, err)
	}
	return fmt.Errorf("%s line %d: %w", path, n, err)
}

// Functions lists the functions that times per function (a measurement's,
// predictions') name, by their largest time, largest first.
func Functions(times ...map[string]float64) []string {
	seen := map[string]float64{}
	for _, m := range times {
		for f, t := range m {
			seen[f] = max(seen[f], t)
		}
	}
	out := make([]string, 0, len(seen))
	for f := range seen {
		out = append(out, f)
	}
	sort.Slice(out, func(a, b int) bool {
		if seen[out[a]] != seen[out[b]] {
			return seen[out[a]] > seen[out[b]]
		}
		return out[a] < out[b]
	})
	return out
}
