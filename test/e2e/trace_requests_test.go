package e2e

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// reqsProgram posts TOTAL pairs of MPI_Irecv and MPI_Isend (8 bytes, tags
// modulo 32,768) to its partner rank (r ^ 1) in windows of WINDOW pairs,
// 2 x WINDOW requests outstanding at once, and completes each window with
// another of MPI_Waitall, Waitsome, Waitany, Wait, Testall, Testany and
// Testsome in turn; it prints how many requests it completed.
const reqsProgram = `#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int r;
	MPI_Comm_rank(MPI_COMM_WORLD, &r);
	long total = atol(argv[1]), w = atol(argv[2]);
	int peer = r ^ 1;
	MPI_Request *q = malloc(2 * w * sizeof *q);
	int *idx = malloc(2 * w * sizeof *idx);
	double *sb = calloc(w, sizeof *sb), *rb = calloc(w, sizeof *rb);
	long completed = 0, win = 0;
	for (long base = 0; base < total; base += w, win++) {
		long m = total - base < w ? total - base : w;
		for (long i = 0; i < m; i++) {
			int tag = (int)((base + i) % 32768);
			MPI_Irecv(&rb[i], 1, MPI_DOUBLE, peer, tag, MPI_COMM_WORLD, &q[2 * i]);
			MPI_Isend(&sb[i], 1, MPI_DOUBLE, peer, tag, MPI_COMM_WORLD, &q[2 * i + 1]);
		}
		int k = (int)(2 * m), left = k, flag, out, j;
		switch (win % 7) {
		case 0:
			MPI_Waitall(k, q, MPI_STATUSES_IGNORE);
			left = 0;
			break;
		case 1:
			while (left > 0) {
				MPI_Waitsome(k, q, &out, idx, MPI_STATUSES_IGNORE);
				if (out == MPI_UNDEFINED)
					break;
				left -= out;
			}
			break;
		case 2:
			while (left > 0) {
				MPI_Waitany(k, q, &j, MPI_STATUS_IGNORE);
				if (j == MPI_UNDEFINED)
					break;
				left--;
			}
			break;
		case 3:
			for (j = 0; j < k; j++)
				MPI_Wait(&q[j], MPI_STATUS_IGNORE);
			left = 0;
			break;
		case 4:
			do
				MPI_Testall(k, q, &flag, MPI_STATUSES_IGNORE);
			while (!flag);
			left = 0;
			break;
		case 5:
			while (left > 0) {
				MPI_Testany(k, q, &j, &flag, MPI_STATUS_IGNORE);
				if (flag && j == MPI_UNDEFINED)
					break;
				if (flag)
					left--;
			}
			break;
		case 6:
			while (left > 0) {
				MPI_Testsome(k, q, &out, idx, MPI_STATUSES_IGNORE);
				if (out == MPI_UNDEFINED)
					break;
				left -= out;
			}
			break;
		}
		if (left != 0) {
			fprintf(stderr, "rank %d: window %ld: %d requests not completed\n", r, win, left);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		completed += k;
	}
	printf("rank %d completed %ld\n", r, completed);
	MPI_Finalize();
	return 0;
}
`

// traceMetaReqs is what the test reads of rank-N.ti.json.
type traceMetaReqs struct {
	Events                 int     `json:"events"`
	Truncated              bool    `json:"truncated"`
	TruncatedReason        string  `json:"truncated_reason"`
	RequestsPosted         int64   `json:"requests_posted"`
	RequestsCompleted      int64   `json:"requests_completed"`
	RequestsOutstandingMax int64   `json:"requests_outstanding_max"`
	RequestsLimit          int64   `json:"requests_limit"`
	Elapsed                float64 `json:"elapsed_seconds"`
}

// rankTrace is one rank's trace: its description, its posts and waits, each
// as "SRC DST TAG".
type rankTrace struct {
	meta         traceMetaReqs
	posts, waits map[string]int
	nposts       int
	nwaits       int
}

func readRankTrace(t *testing.T, dir string, r int) rankTrace {
	t.Helper()
	jobs, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil || len(jobs) != 1 {
		t.Fatalf("%s: want one job folder, got %v (%v)", dir, jobs, err)
	}
	var rt rankTrace
	b, err := os.ReadFile(filepath.Join(jobs[0], fmt.Sprintf("rank-%d.ti.json", r)))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rt.meta); err != nil {
		t.Fatalf("rank-%d.ti.json: %v\n%s", r, err, b)
	}
	for _, k := range []string{`"truncated_reason"`, `"requests_posted"`, `"requests_completed"`, `"requests_outstanding_max"`, `"requests_limit"`, `"untraced_calls"`, `"host_flops"`, `"elapsed_seconds"`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("rank-%d.ti.json has no %s: %s", r, k, b)
		}
	}
	f, err := os.Open(filepath.Join(jobs[0], fmt.Sprintf("rank-%d.ti.gz", r)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	text, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	rt.posts, rt.waits = map[string]int{}, map[string]int{}
	me := strconv.Itoa(r)
	for _, line := range strings.Split(strings.TrimSpace(string(text)), "\n") {
		w := strings.Fields(line)
		if len(w) < 2 || w[0] != me {
			t.Fatalf("rank %d: bad line %q", r, line)
		}
		switch w[1] {
		case "isend", "irecv": // R OP PEER TAG BYTES
			if len(w) != 5 {
				t.Fatalf("rank %d: bad line %q", r, line)
			}
			key := me + " " + w[2] + " " + w[3]
			if w[1] == "irecv" {
				key = w[2] + " " + me + " " + w[3]
			}
			rt.posts[key]++
			rt.nposts++
		case "wait": // R wait SRC DST TAG
			if len(w) != 5 {
				t.Fatalf("rank %d: bad line %q", r, line)
			}
			rt.waits[strings.Join(w[2:], " ")]++
			rt.nwaits++
		}
	}
	return rt
}

var completedLine = regexp.MustCompile(`rank (\d+) completed (\d+)`)

// TestTraceRequests records the replay trace (NETLOOM_TRACE=1) of ranks
// posting many nonblocking requests, under each MPI, and counts the trace's
// actions in the decompressed rank-N.ti.gz:
//   - 100,000 Isend/Irecv pairs per rank in windows of 64 (200,000
//     requests, every wait and test function): one wait per request the
//     program completed, each naming a posted request, and rank-N.ti.json
//     says whole (before, the table lost every wait after 4,096 posts and
//     still said "truncated": false). Both MPIs give small sends complete
//     when posted one shared handle: the trace queues their posts;
//   - 10,000 pairs outstanding at once (20,000 requests, completed by one
//     MPI_Waitall, then again by MPI_Waitsome): the same;
//   - with NETLOOM_TRACE_MB=1 the request table holds 8,192 handles:
//     20,000 requests at once cut the trace, which says so ("truncated":
//     true, "truncated_reason": "requests") and holds the posts up to the
//     bound;
//     and 200,000 requests in windows fill the record array first
//     ("events"). Either way the waits in the trace are the completions the
//     description counts.
func TestTraceRequests(t *testing.T) {
	buildAgent(t)
	const np = 2
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			needMPI(t, m)
			bin := compileSource(t, m, "reqs.c", reqsProgram)
			for _, c := range []struct {
				name          string
				total, window int64
				mb            string // NETLOOM_TRACE_MB, "" for the default
				reason        string // the truncated_reason expected, "" for whole
			}{
				{"100000 in windows of 64", 100000, 64, "", ""},
				{"10000 outstanding", 20000, 10000, "", ""},
				{"past the request bound", 10000, 10000, "1", "requests"},
				{"past the record bound", 100000, 64, "1", "events"},
			} {
				t.Run(c.name, func(t *testing.T) {
					out := t.TempDir()
					env := []string{"NETLOOM_OUTPUT=" + out, "NETLOOM_TRACE=1"}
					if c.mb != "" {
						env = append(env, "NETLOOM_TRACE_MB="+c.mb)
					}
					stdout := runJob(t, m, np, m.lib, env, nil, bin, strconv.FormatInt(c.total, 10), strconv.FormatInt(c.window, 10))
					done := map[int]int64{}
					for _, g := range completedLine.FindAllStringSubmatch(stdout, -1) {
						r, _ := strconv.Atoi(g[1])
						done[r], _ = strconv.ParseInt(g[2], 10, 64)
					}
					for r := range np {
						if done[r] != 2*c.total {
							t.Fatalf("rank %d completed %d requests, want %d:\n%s", r, done[r], 2*c.total, stdout)
						}
						rt := readRankTrace(t, out, r)
						mt := rt.meta
						t.Logf("rank %d: %d posts, %d waits in the trace; %+v", r, rt.nposts, rt.nwaits, mt)
						// every wait names a request the trace posted
						for k, n := range rt.waits {
							if rt.posts[k] < n {
								t.Errorf("rank %d: %d waits for %q, %d posts", r, n, k, rt.posts[k])
							}
						}
						if mt.Elapsed <= 0 { // a cut trace said 0 before
							t.Errorf("rank %d: elapsed_seconds %g, want the span the trace covers", r, mt.Elapsed)
						}
						if int64(rt.nwaits) != mt.RequestsCompleted || int64(rt.nposts) != mt.RequestsPosted {
							t.Errorf("rank %d: the trace holds %d posts and %d waits, its description %d and %d", r, rt.nposts, rt.nwaits, mt.RequestsPosted, mt.RequestsCompleted)
						}
						if c.reason == "" {
							if mt.Truncated || mt.TruncatedReason != "" {
								t.Errorf("rank %d: truncated %v (%q), want whole", r, mt.Truncated, mt.TruncatedReason)
							}
							if int64(rt.nwaits) != done[r] || int64(rt.nposts) != done[r] {
								t.Errorf("rank %d: the trace holds %d posts and %d waits, the program completed %d requests", r, rt.nposts, rt.nwaits, done[r])
							}
							if mt.RequestsOutstandingMax != 2*c.window {
								t.Errorf("rank %d: at most %d requests outstanding, the program had %d", r, mt.RequestsOutstandingMax, 2*c.window)
							}
							continue
						}
						if !mt.Truncated || mt.TruncatedReason != c.reason {
							t.Errorf("rank %d: truncated %v (%q), want true (%q)", r, mt.Truncated, mt.TruncatedReason, c.reason)
						}
						if mt.RequestsLimit != 8192 {
							t.Errorf("rank %d: request limit %d with NETLOOM_TRACE_MB=1, want 8,192", r, mt.RequestsLimit)
						}
						switch c.reason {
						case "requests":
							// cut at the post of one handle more than the
							// table holds, before any wait (the small sends,
							// complete when posted, may share one handle)
							if mt.RequestsOutstandingMax < mt.RequestsLimit || int64(rt.nposts) < mt.RequestsLimit || int64(rt.nposts) >= done[r] || rt.nwaits != 0 {
								t.Errorf("rank %d: cut with %d outstanding, %d posts and %d waits in the trace, want at least %d, %d and 0", r, mt.RequestsOutstandingMax, rt.nposts, rt.nwaits, mt.RequestsLimit, mt.RequestsLimit)
							}
						case "events": // the record array filled, with requests completed in windows
							if rt.nwaits < 1000 || int64(rt.nwaits) >= done[r] {
								t.Errorf("rank %d: %d waits in the trace cut by its records, want some of %d", r, rt.nwaits, done[r])
							}
						}
					}
				})
			}
		})
	}
}
