package ingest

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/netloom/netloom/internal/gpupath"
	"github.com/netloom/netloom/internal/store"
)

// The offline report (netloom report): a job's summary, matrices,
// profile, regions and GPU paths built from its store.Job, and its text.

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
	GPU *gpupath.Summary `json:"gpu"`
	// Reorders are the times the job reordered its ranks itself
	// (netloom_reorder, docs/reorder.md), oldest first; [] when never.
	Reorders []store.JobReorder `json:"reorders"`
	// Warnings is never null: [] when there are none.
	Warnings []string `json:"warnings"`
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
		Histogram: BuildHistogram(j, -1), Regions: BuildRegions(j), GPU: gpupath.Summarize(j, maxReportPairs),
		Reorders: j.Reorders()}
	if r.Reorders == nil {
		r.Reorders = []store.JobReorder{}
	}
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
	r.Warnings = make([]string, 0, len(warnings))
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
	// Wall: the job's, the longest rank's (from MPI_Init on); the MPI and
	// CPU times are sums over the ranks, set against the sum of the
	// ranks' wall times (rank-seconds).
	fmt.Fprintf(bw, "\nWall %.3fs (the longest rank; %.3f rank-seconds over %d ranks), MPI %.3fs in all ranks (%.1f%% of their wall time, the mean over ranks), CPU %.1f%% per rank; sent %s in %d messages (%s inter-node)\n",
		maxF(r.Profile.Wall), sumF(r.Profile.Wall), len(r.Profile.Wall), j.MPISeconds, j.MPIPercent, j.CPUPercent, bytesText(j.Total.Bytes), j.Total.Msgs, bytesText(j.InterNode.Bytes))
	if st := r.Startup; st.InitSeconds+st.FinalizeSeconds > 0 {
		rest := j.MPISeconds - st.InitSeconds - st.FinalizeSeconds
		fmt.Fprintf(bw, "Of the MPI time, MPI_Init %.3fs and MPI_Finalize %.3fs; the rest %.3fs", st.InitSeconds, st.FinalizeSeconds, max(rest, 0))
		if wall := sumF(r.Profile.Wall); wall > 0 {
			fmt.Fprintf(bw, " (%.1f%% of the rank-seconds)", 100*max(rest, 0)/wall)
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
	writeReorders(bw, r.Reorders)
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

func maxF(v []float64) float64 {
	var m float64
	for _, x := range v {
		m = max(m, x)
	}
	return m
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

// writeReorders prints when and how the job reordered its ranks.
func writeReorders(bw *bufio.Writer, rs []store.JobReorder) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(bw, "\nReordered ranks (netloom_reorder, docs/reorder.md)\n")
	for _, r := range rs {
		comm := "a communicator"
		if r.CommWorld {
			comm = "MPI_COMM_WORLD"
		}
		from := "MPI_Init"
		if r.Since != "" {
			from = "mark " + strconv.Quote(r.Since)
		}
		how := fmt.Sprintf("Scotch's order, %d of %d ranks moved", r.Moved, r.Ranks)
		if r.Method != "scotch" {
			how = "order kept (nothing to gain)"
		}
		pct := 0.0
		if r.InterNodeBefore > 0 {
			pct = 100 * (1 - float64(r.InterNodeAfter)/float64(r.InterNodeBefore))
		}
		fmt.Fprintf(bw, "%s: %s of %d ranks on %d nodes, from the matrix since %s: %s; predicted inter-node bytes %s -> %s (%.1f%% less) of %s; took %.3fs (mapping %.3fs); %d ranks reported it\n",
			r.Time.Format(time.RFC3339Nano), comm, r.Ranks, r.Nodes, from, how, bytesText(r.InterNodeBefore), bytesText(r.InterNodeAfter), pct,
			bytesText(r.TotalBytes), r.Seconds, r.MapSeconds, r.Reported)
		if r.Method == "scotch" && len(r.Mapping) > 0 {
			fmt.Fprintf(bw, "  world rank: old -> new rank:")
			for _, m := range r.Mapping {
				fmt.Fprintf(bw, " %d:%d->%d", m.Rank, m.OldRank, m.NewRank)
			}
			fmt.Fprintln(bw)
		}
	}
}
