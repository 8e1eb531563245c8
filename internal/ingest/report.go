package ingest

import (
	"bufio"
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	"github.com/netloom/netloom/internal/gpupath"
	"github.com/netloom/netloom/internal/ingest/agentpb"
	"github.com/netloom/netloom/internal/store"
)

// maxProfileRecord bounds one record of an offline profile file: the final
// snapshot is written unchunked, with every peer.
const maxProfileRecord = 1 << 30

// FindProfileDir returns the directory holding a job's rank-*.pb files:
// dir itself, or its only job subdirectory (NETLOOM_OUTPUT holds one
// subdirectory per job).
func FindProfileDir(dir string) (string, error) {
	sub, err := FindProfileDirFS(os.DirFS(dir), dir)
	return filepath.Join(dir, sub), err
}

// FindProfileDirFS is FindProfileDir within fsys, named name in errors: it
// returns "." or the job subdirectory's name.
func FindProfileDirFS(fsys fs.FS, name string) (string, error) {
	if files, _ := fs.Glob(fsys, "rank-*.pb"); len(files) > 0 {
		return ".", nil
	}
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // its path is fsys's, not the one the user gave
		}
		return "", fmt.Errorf("profile directory %s: %w", name, err)
	}
	var jobs []string
	for _, e := range entries {
		if e.IsDir() {
			if files, _ := fs.Glob(fsys, path.Join(e.Name(), "rank-*.pb")); len(files) > 0 {
				jobs = append(jobs, e.Name())
			}
		}
	}
	switch len(jobs) {
	case 0:
		return "", fmt.Errorf("%s: no rank-*.pb profile files, here or in a job subdirectory", name)
	case 1:
		return jobs[0], nil
	}
	return "", fmt.Errorf("%s holds profiles of %d jobs (%s): name one", name, len(jobs), strings.Join(jobs, ", "))
}

// ReadProfile reads a job's offline profile (DIR/rank-N.pb files, each a
// sequence of varint-length-prefixed Datagrams) the way the daemon reads
// datagrams, and returns the job. Records that fail validation are
// skipped and returned as warnings.
func ReadProfile(dir string) (*store.Job, []error, error) {
	return ReadProfileFS(os.DirFS(dir), dir, maxProfileRecord)
}

// ReadProfileFS is ReadProfile within fsys (named name in messages), its
// records no longer than maxRecord bytes.
func ReadProfileFS(fsys fs.FS, name string, maxRecord int) (*store.Job, []error, error) {
	sub, err := FindProfileDirFS(fsys, name)
	if err != nil {
		return nil, nil, err
	}
	files, err := fs.Glob(fsys, path.Join(sub, "rank-*.pb"))
	if err != nil {
		return nil, nil, err
	}
	dir := filepath.Join(name, sub)
	lim := Limits{MaxBytes: maxRecord, MaxChunks: 1 << 20}.WithDefaults()
	tr := NewTracker(Options{Limits: lim, MaxPendingBytes: 1 << 40, JobTimeout: 1 << 62, Linger: 1 << 62}, nil)
	var warnings []error
	var latest time.Time
	// Every file is read before any is added: each rank's node must be
	// known when the other ranks' traffic to it is placed (KnowNode).
	recs := make([][]profileRecord, len(files))
	for i, f := range files {
		var err error
		recs[i], err = readProfileFile(fsys, f, filepath.Join(name, f), lim)
		if err != nil {
			warnings = append(warnings, err)
		}
		if len(recs[i]) == 0 && err == nil {
			warnings = append(warnings, fmt.Errorf("%s: no records", filepath.Join(name, f)))
		}
		for _, r := range recs[i] {
			if r.d.Process != nil {
				tr.KnowNode(r.d.JobId, int(r.d.Rank), r.d.Process.Node)
			}
		}
	}
	for i, f := range files {
		for _, r := range recs[i] {
			now := time.Unix(0, r.d.TimeUnixNs)
			if now.After(latest) {
				latest = now
			}
			if err := tr.Add(r.d, r.size, now); err != nil {
				warnings = append(warnings, fmt.Errorf("%s record %d: %w", filepath.Join(name, f), r.n, err))
				break
			}
		}
	}
	tr.Flush()
	live := tr.Publish(latest)
	if len(live.Jobs) == 0 {
		return nil, warnings, fmt.Errorf("%s: no complete rank snapshot in %d files", dir, len(files))
	}
	if len(live.Jobs) > 1 {
		var ids []string
		for id := range live.Jobs {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		return nil, warnings, fmt.Errorf("%s: profiles of several jobs (%s)", dir, strings.Join(ids, ", "))
	}
	for _, lj := range live.Jobs {
		j := lj.Full()
		if j.Reporting < j.Ranks {
			var missing []string
			have := map[int]bool{}
			for _, p := range j.Processes {
				have[p.Rank] = true
			}
			for r := 0; r < j.Ranks && len(missing) < 20; r++ {
				if !have[r] {
					missing = append(missing, strconv.Itoa(r))
				}
			}
			warnings = append(warnings, fmt.Errorf("%d of %d ranks have no profile (ranks %s...)", j.Ranks-j.Reporting, j.Ranks, strings.Join(missing, ",")))
		}
		return j, warnings, nil
	}
	panic("unreachable")
}

// profileRecord is one valid record of a profile file: the n-th.
type profileRecord struct {
	d       *Datagram
	size, n int
}

// readProfileFile reads a profile file's records up to the first bad one
// (shown as display in messages). A record longer than the file's rest is
// refused before its bytes are allocated.
func readProfileFile(fsys fs.FS, name, display string, lim Limits) ([]profileRecord, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	cr := &countingReader{r: bufio.NewReaderSize(f, 1<<20)}
	var recs []profileRecord
	for n := 1; ; n++ {
		m := new(agentpb.Datagram)
		left := st.Size() - cr.n
		size := min(int64(lim.MaxBytes), max(left, 0))
		err := protodelim.UnmarshalOptions{MaxSize: size}.UnmarshalFrom(cr, m)
		if errors.Is(err, io.EOF) {
			return recs, nil
		}
		if err != nil {
			return recs, fmt.Errorf("%s record %d: %w", display, n, err)
		}
		d := FromProto(m)
		if err := Validate(d, lim); err != nil {
			return recs, fmt.Errorf("%s record %d: %w", display, n, err)
		}
		recs = append(recs, profileRecord{d: d, size: proto.Size(m), n: n})
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// Report is the JSON document of `netloom report --json`.
type Report struct {
	Job        store.JobSummary                     `json:"job"`
	Ranks      int                                  `json:"ranks"`
	Nodes      []NodeView                           `json:"nodes"`
	Processes  []ProcessView                        `json:"processes"`
	Profile    *Profile                             `json:"profile"`
	Matrix     map[string]map[string][][]uint64     `json:"matrix"` // class -> bytes|msgs -> [sender][receiver]
	NodeMatrix map[string]map[string]map[string]any `json:"node_matrix"`
	Histogram  *Histogram                           `json:"histogram"`
	Regions    []RegionTotal                        `json:"regions"`
	// Startup is the time in MPI_Init (and _thread) and MPI_Finalize, all
	// ranks: part of the MPI and wall times (which both start at
	// MPI_Init's entry), given apart so that start-up does not swamp the
	// profile.
	Startup Startup `json:"startup"`
	// GPU is the ranks' GPU side: their MPI buffers by kind and path
	// between host and device memory, and their NCCL operations.
	GPU      *gpupath.Summary `json:"gpu"`
	Warnings []string         `json:"warnings,omitempty"`
}

// maxReportPairs bounds the rank pairs of a report's GPU section (the
// paths table sums them all).
const maxReportPairs = 4096

// Startup is the seconds all ranks spent starting and stopping MPI.
type Startup struct {
	InitSeconds     float64 `json:"mpi_init_seconds"`
	FinalizeSeconds float64 `json:"mpi_finalize_seconds"`
}

// BuildReport assembles the report of a job.
func BuildReport(j *store.Job, warnings []error) (*Report, error) {
	r := &Report{Job: j.JobSummary, Ranks: j.Ranks, Nodes: Nodes(j), Processes: make([]ProcessView, len(j.Processes)),
		Profile: BuildProfile(j), Matrix: map[string]map[string][][]uint64{}, NodeMatrix: map[string]map[string]map[string]any{},
		Histogram: BuildHistogram(j, -1), Regions: BuildRegions(j), GPU: gpupath.Summarize(j, maxReportPairs)}
	for i := range j.Processes {
		r.Processes[i] = ViewProcess(&j.Processes[i])
	}
	for _, t := range r.Profile.Totals {
		switch t.Name {
		case "MPI_Init", "MPI_Init_thread":
			r.Startup.InitSeconds += float64(t.TimeNS) / 1e9
		case "MPI_Finalize":
			r.Startup.FinalizeSeconds += float64(t.TimeNS) / 1e9
		}
	}
	for _, c := range Classes {
		r.Matrix[c] = map[string][][]uint64{}
		r.NodeMatrix[c] = map[string]map[string]any{}
		for _, m := range []string{"bytes", "msgs"} {
			if j.Ranks <= MaxDenseRanks {
				rm, err := RankMatrix(j, c, m)
				if err != nil {
					return nil, err
				}
				r.Matrix[c][m] = rm.Values
			}
			nm, err := NodeMatrix(j, c, m)
			if err != nil {
				return nil, err
			}
			r.NodeMatrix[c][m] = map[string]any{"labels": nm.Labels, "matrix": nm.Values}
		}
	}
	for _, w := range warnings {
		r.Warnings = append(r.Warnings, w.Error())
	}
	return r, nil
}

// WriteText prints MPInside-style tables: time per MPI function per rank,
// bytes and requests sent and received per function, and the rank-to-rank
// SIZE and REQUEST matrices of each class that carried traffic.
func WriteText(w io.Writer, r *Report) error {
	j := &r.Job
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "Netloom report: job %s, %d ranks on %d nodes", j.ID, j.Ranks, j.Nodes)
	if j.MPILibrary != "" {
		fmt.Fprintf(bw, ", %s", j.MPILibrary)
	}
	if j.Program != "" {
		fmt.Fprintf(bw, ", %s", j.Program)
	}
	fmt.Fprintf(bw, "\nWall %.3fs, MPI %.3fs in all ranks (%.1f%% of wall), CPU %.1f%%; sent %s in %d messages (%s inter-node)\n",
		sumF(r.Profile.Wall), j.MPISeconds, j.MPIPercent, j.CPUPercent, bytesText(j.Total.Bytes), j.Total.Msgs, bytesText(j.InterNode.Bytes))
	if st := r.Startup; st.InitSeconds+st.FinalizeSeconds > 0 {
		rest := j.MPISeconds - st.InitSeconds - st.FinalizeSeconds
		fmt.Fprintf(bw, "Of the MPI time, MPI_Init %.3fs and MPI_Finalize %.3fs; the rest %.3fs", st.InitSeconds, st.FinalizeSeconds, max(rest, 0))
		if wall := sumF(r.Profile.Wall); wall > 0 {
			fmt.Fprintf(bw, " (%.1f%% of wall)", 100*max(rest, 0)/wall)
		}
		fmt.Fprintln(bw)
	}
	for _, wn := range r.Warnings {
		fmt.Fprintf(bw, "warning: %s\n", wn)
	}

	p := r.Profile
	fmt.Fprintf(bw, "\nTime per MPI function per rank (seconds)\n")
	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "rank\tnode\twall\tmpi\t")
	waited := p.waited()
	for k, f := range p.Functions {
		if waited[k] { // MPInside's columns: the wait before a function, then the function
			fmt.Fprintf(tw, "%s\t", WaitColumn(f))
		}
		fmt.Fprintf(tw, "%s\t", f)
	}
	fmt.Fprintln(tw)
	for i, rank := range p.Ranks {
		fmt.Fprintf(tw, "%d\t%s\t%.3f\t%.3f\t", rank, r.Processes[i].Node, p.Wall[i], p.MPI[i])
		for k := range p.Functions {
			if waited[k] {
				fmt.Fprintf(tw, "%.4f\t", float64(p.WaitNS[i][k])/1e9)
			}
			fmt.Fprintf(tw, "%.4f\t", float64(p.TimeNS[i][k])/1e9)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	if len(p.WaitNS) > 0 {
		fmt.Fprintf(bw, "(b_X: waiting for the last rank before collective X, in a barrier the agent put there; w_recv: waiting in MPI_Recv for a late sender, in a probe the agent put there: NETLOOM_WAITS=1)\n")
	}

	fmt.Fprintf(bw, "\nMPI functions, all ranks (bytes and requests sent and received)\n")
	tw = tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "function\tcalls\ttime (s)\twait (s)\t% MPI\tranks\tbytes sent\tbytes received\t")
	for _, t := range p.Totals {
		fmt.Fprintf(tw, "%s\t%d\t%.4f\t%.4f\t%.1f\t%d\t%d\t%d\t\n", t.Name, t.Calls, float64(t.TimeNS)/1e9, float64(t.WaitNS)/1e9, t.MPIPercent, t.Ranks, t.BytesSent, t.BytesReceived)
	}
	tw.Flush()

	fmt.Fprintf(bw, "\nPer rank and function: requests, bytes sent, bytes received\n")
	tw = tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rank\tfunction\trequests\tbytes sent\tbytes received\t")
	for i, rank := range p.Ranks {
		for k, f := range p.Functions {
			if p.Calls[i][k] > 0 {
				fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t\n", rank, f, p.Calls[i][k], p.Sent[i][k], p.Received[i][k])
			}
		}
	}
	tw.Flush()

	names := map[string]string{"p2p": "point-to-point", "coll": "collective", "rma": "one-sided (RMA)"}
	for _, c := range Classes {
		mb := r.Matrix[c]["bytes"]
		if mb == nil || matrixZero(mb) {
			continue
		}
		for _, m := range []struct{ key, title string }{{"bytes", "SIZE (bytes)"}, {"msgs", "REQUEST (messages)"}} {
			fmt.Fprintf(bw, "\n%s matrix, %s; row = sender, column = receiver\n", m.title, names[c])
			writeMatrix(bw, r.Matrix[c][m.key])
		}
	}
	if len(r.Regions) > 0 {
		fmt.Fprintf(bw, "\nRegions\n")
		tw = tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
		waits := len(r.Profile.WaitNS) > 0
		fmt.Fprint(tw, "region\tranks\tentries\ttime (s)\tMPI time (s)\t")
		if waits {
			fmt.Fprint(tw, "wait (s)\t")
		}
		fmt.Fprintln(tw, "bytes sent\t")
		for _, g := range r.Regions {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.4f\t%.4f\t", g.Name, len(g.Ranks), g.Entries, float64(g.TimeNS)/1e9, float64(g.MPITimeNS)/1e9)
			if waits {
				fmt.Fprintf(tw, "%.4f\t", float64(g.WaitNS)/1e9)
			}
			fmt.Fprintf(tw, "%d\t\n", g.Classes.Total().Bytes)
		}
		tw.Flush()
	}
	writeGPU(bw, r.GPU)
	return bw.Flush()
}

// writeGPU prints the GPU buffers' paths and kinds per function, when
// any rank was probed (else one line saying why none was), and the NCCL
// operations, when any rank reported some.
func writeGPU(bw *bufio.Writer, g *gpupath.Summary) {
	if g == nil {
		return
	}
	b := &g.Buffers
	if b.ProbedRanks == 0 {
		fmt.Fprintf(bw, "\nGPU buffers not probed: %s\n", b.NotProbed)
	} else {
		fmt.Fprintf(bw, "\nGPU buffers (%s; %d of %d ranks probed): bytes and messages by path, sender's memory -> receiver's\n", b.Source, b.ProbedRanks, b.Ranks)
		for _, e := range b.ProbeErrors {
			fmt.Fprintf(bw, "probe failed on %d ranks (rank %d first): %s\n", e.Ranks, e.FirstRank, e.Error)
		}
		tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "path\twhere\tbytes\tmessages\tsplit\t")
		for _, p := range b.Paths {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t\n", p.Path, p.Locality, p.Bytes, p.Msgs, splitText(p.Split))
		}
		tw.Flush()
		if len(b.Paths) == 0 {
			fmt.Fprintln(bw, "(no traffic between probed ranks)")
		}
		fmt.Fprintln(bw, "(H: host memory, pageable or pinned; D: device or managed memory; point-to-point messages; exact: both sides counted the same messages and bytes and one side used one kind of memory, so the other side's split is the paths')")
		undetermined := slices.ContainsFunc(b.Paths, func(p gpupath.PathRow) bool { return !p.Exact })
		if undetermined {
			fmt.Fprintln(bw, "(mixed: both sides used both kinds, the paths are not determined: H->? and D->? are the sender's count, ?->H and ?->D the receiver's,"+
				" of the same messages; counts differ: the sides did not count the same messages and bytes (a receive posted larger than its message, or in flight), so the paths are not determined either; receiver unknown: the receiver has no row for that sender (not probed, MPI_ANY_SOURCE, or not among its busiest peers); sender unknown: likewise the sender)")
		}
		if len(b.Functions) > 0 {
			fmt.Fprintf(bw, "\nBuffer kinds per function, all probed ranks (bytes/buffers)\n")
			tw = tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "function\tranks\tsend pageable\tsend pinned\tsend device\tsend managed\trecv pageable\trecv pinned\trecv device\trecv managed\t")
			kinds := func(k store.BufferKinds) string {
				var s strings.Builder
				for _, t := range []store.Traffic{k.Pageable, k.Pinned, k.Device, k.Managed} {
					fmt.Fprintf(&s, "%d/%d\t", t.Bytes, t.Msgs)
				}
				return s.String()
			}
			for _, f := range b.Functions {
				fmt.Fprintf(tw, "%s\t%d\t%s%s\n", f.Name, f.Ranks, kinds(f.Send), kinds(f.Recv))
			}
			tw.Flush()
		}
	}
	n := &g.NCCL
	if len(n.Ops) == 0 {
		if len(n.Versions) > 0 { // the plugin ran, NCCL told it no operation
			fmt.Fprintf(bw, "\nNCCL operations: none reported (NCCL %s told the plugin of no operation; NCCL starts no profiler event for a one-rank communicator)\n",
				strings.Join(n.Versions, ", "))
		}
		return
	}
	fmt.Fprintf(bw, "\nNCCL operations (%s; %d ranks", n.Source, n.Ranks)
	if len(n.Versions) > 0 {
		fmt.Fprintf(bw, "; NCCL %s", strings.Join(n.Versions, ", "))
	}
	for _, v := range n.ProfilerInterfaces {
		fmt.Fprintf(bw, "; profiler interface v%d", v)
	}
	fmt.Fprintln(bw, "), all ranks")
	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "communicator\tsize\toperation\talgorithm\tprotocol\tranks\tcalls\tbytes\ttime (s)\t")
	dash := func(s string) string { return cmp.Or(s, "-") }
	for _, o := range n.Ops {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%d\t%d\t%.6f\t\n", o.Comm, o.CommSize, o.Name, dash(o.Algorithm), dash(o.Protocol), o.Ranks, o.Calls, o.Bytes, float64(o.TimeNS)/1e9)
	}
	tw.Flush()
	fmt.Fprintf(bw, "network bytes per peer: %s; link attribution: %s\n", n.PeersFrom, n.LinkAttribution)
}

// splitText is how a path row's split reads in the report.
func splitText(split string) string {
	switch split {
	case gpupath.Mixed:
		return "mixed: not determined"
	case gpupath.CountsDiffer:
		return "counts differ: not determined"
	}
	return split
}

func writeMatrix(w io.Writer, m [][]uint64) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "\t")
	for c := range m {
		fmt.Fprintf(tw, "%d\t", c)
	}
	fmt.Fprintln(tw)
	for r, row := range m {
		fmt.Fprintf(tw, "%d\t", r)
		for _, v := range row {
			fmt.Fprintf(tw, "%d\t", v)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

func matrixZero(m [][]uint64) bool {
	for _, row := range m {
		if slices.ContainsFunc(row, func(v uint64) bool { return v != 0 }) {
			return false
		}
	}
	return true
}

func sumF(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s
}

func bytesText(b uint64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := uint64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}

// WriteCSV writes ranks.csv, functions.csv and matrix-<class>-<bytes|msgs>.csv
// into dir.
func WriteCSV(dir string, r *Report) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("csv directory: %w", err)
	}
	var written []string
	write := func(name string, rows [][]string) error {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		cw := csv.NewWriter(f)
		if err := cw.WriteAll(rows); err != nil {
			f.Close()
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		written = append(written, path)
		return nil
	}
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	fl := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	rows := [][]string{{"rank", "node", "host", "pid", "wall_seconds", "mpi_seconds", "cpu_user_seconds", "cpu_system_seconds",
		"vm_hwm", "p2p_bytes", "p2p_msgs", "coll_bytes", "coll_msgs", "rma_bytes", "rma_msgs", "intra_node_bytes", "inter_node_bytes"}}
	for _, p := range r.Processes {
		rows = append(rows, []string{strconv.Itoa(p.Rank), p.Node, p.Host, strconv.Itoa(int(p.PID)), fl(p.Wall), fl(p.MPI), fl(p.CPUUser),
			fl(p.CPUSystem), u(p.VmHWM), u(p.Traffic.P2P.Bytes), u(p.Traffic.P2P.Msgs), u(p.Traffic.Coll.Bytes), u(p.Traffic.Coll.Msgs),
			u(p.Traffic.RMA.Bytes), u(p.Traffic.RMA.Msgs), u(p.IntraNode.Bytes), u(p.InterNode.Bytes)})
	}
	if err := write("ranks.csv", rows); err != nil {
		return written, err
	}
	rows = [][]string{{"rank", "function", "calls", "time_ns", "bytes_sent", "bytes_received", "wait_ns"}}
	pr := r.Profile
	for i, rank := range pr.Ranks {
		for k, f := range pr.Functions {
			if pr.Calls[i][k] > 0 || pr.TimeNS[i][k] > 0 {
				wait := uint64(0)
				if len(pr.WaitNS) > 0 {
					wait = pr.WaitNS[i][k]
				}
				rows = append(rows, []string{strconv.Itoa(rank), f, u(pr.Calls[i][k]), u(pr.TimeNS[i][k]), u(pr.Sent[i][k]), u(pr.Received[i][k]), u(wait)})
			}
		}
	}
	if err := write("functions.csv", rows); err != nil {
		return written, err
	}
	for _, c := range Classes {
		for _, m := range []string{"bytes", "msgs"} {
			mx := r.Matrix[c][m]
			if mx == nil {
				continue
			}
			head := []string{"sender\\receiver"}
			for i := range mx {
				head = append(head, strconv.Itoa(i))
			}
			rows = [][]string{head}
			for i, row := range mx {
				line := []string{strconv.Itoa(i)}
				for _, v := range row {
					line = append(line, u(v))
				}
				rows = append(rows, line)
			}
			if err := write(fmt.Sprintf("matrix-%s-%s.csv", c, m), rows); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}
