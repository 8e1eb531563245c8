// Command model measures the replay trace and its replay (docs/model.md):
//
//   - trace size per rank per minute: a halo kernel and an all-to-all,
//     traced by the agent (netloom run --trace) on 4 Open MPI ranks for
//     --seconds each, the gzip size scaled to a minute;
//
//   - replay time of a --ranks-rank, one-minute trace (the halo kernel's
//     per-rank event rate and compute gaps, made for that many ranks) on a
//     flat platform of 16-core hosts, as netloom model replays it (a
//     window of the iterations; --whole: also every action), against the
//     minute it stands for; and, on --compare ranks, how far the window's
//     prediction is from the whole replay's.
//
//     go run ./bench/model [--seconds 10] [--ranks 1024] [--compare 64] [--whole] [--netloom bin/netloom]
package main

import (
	"bufio"
	"compress/gzip"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/netloom/netloom/internal/model"
)

// kernel is a traced program: halo (a ring exchange of 64 KiB both ways
// and an 8-byte allreduce, after 10 ms of work, per iteration) or alltoall
// (an all-to-all of 4 KiB per peer, after 10 ms of work), for SECONDS.
const kernel = `#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int r, n;
	MPI_Comm_rank(MPI_COMM_WORLD, &r);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	int halo = strcmp(argv[1], "halo") == 0;
	double secs = atof(argv[2]), end = MPI_Wtime() + secs;
	char *s = calloc(1 << 20, 1), *q = calloc(1 << 20, 1);
	struct timespec work = {0, 10000000};
	for (int go = 1; go;) {
		nanosleep(&work, NULL);
		if (halo) {
			MPI_Sendrecv(s, 65536, MPI_BYTE, (r + 1) % n, 0, q, 65536, MPI_BYTE, (r + n - 1) % n, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			MPI_Sendrecv(s, 65536, MPI_BYTE, (r + n - 1) % n, 1, q, 65536, MPI_BYTE, (r + 1) % n, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else {
			MPI_Alltoall(s, 4096, MPI_BYTE, q, 4096, MPI_BYTE, MPI_COMM_WORLD);
		}
		double t = MPI_Wtime() < end, all;
		MPI_Allreduce(&t, &all, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
		go = all > 0;
	}
	MPI_Finalize();
	return 0;
}
`

func main() {
	seconds := flag.Float64("seconds", 10, "how long each kernel runs traced")
	ranks := flag.Int("ranks", 1024, "ranks of the replayed one-minute trace")
	netloom := flag.String("netloom", "bin/netloom", "netloom binary")
	compare := flag.Int("compare", 64, "compare the window with the whole replay on a one-minute trace of this many `ranks` (0: not)")
	whole := flag.Bool("whole", false, "also replay the --ranks trace whole, elapsed time only (minutes)")
	verbose := flag.Bool("v", false, "print when each step of netloom model's prediction started")
	flag.Parse()
	bin, err := filepath.Abs(*netloom)
	if err != nil {
		log.Fatal(err)
	}
	work, err := os.MkdirTemp("", "bench-model-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(work)
	src := filepath.Join(work, "kernel.c")
	if err := os.WriteFile(src, []byte(kernel), 0o644); err != nil {
		log.Fatal(err)
	}
	prog := filepath.Join(work, "kernel")
	if out, err := exec.Command("mpicc", "-O2", "-o", prog, src).CombinedOutput(); err != nil {
		log.Fatalf("mpicc: %v\n%s", err, out)
	}
	fmt.Printf("trace size, 4 Open MPI ranks, %.0f s each, scaled to a minute:\n", *seconds)
	fmt.Printf("%-9s %10s %14s %18s %20s\n", "kernel", "events", "events/min", "gzip KiB/rank/min", "text KiB/rank/min")
	var haloRate float64
	for _, k := range []string{"halo", "alltoall"} {
		out := filepath.Join(work, k)
		cmd := exec.Command(bin, "run", "--quiet", "--trace", "--output", out, "--job-id", k, "--",
			"mpirun", "--oversubscribe", "-np", "4", prog, k, fmt.Sprint(*seconds))
		cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
		if b, err := cmd.CombinedOutput(); err != nil {
			log.Fatalf("%s: %v\n%s", k, err, b)
		}
		job, _, err := model.Load(out)
		if err != nil {
			log.Fatal(err)
		}
		var gz, text int64
		for _, t := range job.Traces {
			st, _ := os.Stat(t)
			gz += st.Size()
			text += textSize(t)
		}
		perMin := 60 / job.Elapsed / float64(job.Ranks)
		if k == "halo" {
			haloRate = float64(job.Events) / job.Elapsed / float64(job.Ranks)
		}
		fmt.Printf("%-9s %10d %14.0f %18.1f %20.1f\n", k, job.Events, float64(job.Events)*60/job.Elapsed/float64(job.Ranks),
			float64(gz)*perMin/1024, float64(text)*perMin/1024)
	}

	// One-minute halo traces for many ranks: the measured event rate,
	// the same pattern (10 ms of work, two exchanges, an allreduce: 10
	// events per iteration), each compute gap drawn from those the traced
	// halo ranks measured.
	gaps, err := computeGaps(filepath.Join(work, "halo"))
	if err != nil {
		log.Fatal(err)
	}
	iters := int(haloRate * 60 / 10)
	replay := func(ranks int, full, perFunction bool) (*model.Result, time.Duration) {
		j, hosts := haloJob(filepath.Join(work, fmt.Sprintf("big-%d", ranks)), ranks, iters, gaps)
		plat := model.Flat("flat", model.Hosts(hosts), model.Cores(hosts), 1e-6, 12.5e9, model.DefaultLoopback)
		start := time.Now()
		var steps []string
		res, err := model.Predict(context.Background(), j, model.Request{Platform: plat, HostOf: hosts, Work: work,
			ElapsedOnly: !perFunction, FullReplay: full, Progress: func(format string, args ...any) {
				steps = append(steps, fmt.Sprintf("%.1f s %s", time.Since(start).Seconds(), fmt.Sprintf(format, args...)))
			}})
		if *verbose {
			for _, s := range steps {
				fmt.Printf("    at %s\n", s)
			}
		}
		if err != nil {
			log.Fatal(err)
		}
		return res, time.Since(start)
	}
	fmt.Printf("\none-minute halo traces: %d iterations, %d events per rank, compute gaps drawn from the traced run's %d (mean %.2f ms)\n",
		iters, iters*10, len(gaps), mean(gaps)/1e6)
	if *compare > 0 {
		fmt.Printf("window against whole replay, %d ranks, per function:\n", *compare)
		whole, tw := replay(*compare, true, true)
		part, tp := replay(*compare, false, true)
		fmt.Printf("  whole  %6.1f s of wall time: elapsed %.3f s, MPI %.2f s\n", tw.Seconds(), whole.AsRan.Elapsed, whole.AsRan.MPISeconds)
		if part.Window == nil {
			log.Fatalf("%d ranks: %d actions, within the window's budget: no window to compare (--compare more ranks)", *compare, part.Events)
		}
		fmt.Printf("  window %6.1f s of wall time: elapsed %.3f s (%+.2f%%), MPI %.2f s (%+.2f%%); %+v\n", tp.Seconds(),
			part.AsRan.Elapsed, pct(part.AsRan.Elapsed, whole.AsRan.Elapsed), part.AsRan.MPISeconds, pct(part.AsRan.MPISeconds, whole.AsRan.MPISeconds), *part.Window)
		for _, f := range model.Functions(whole.AsRan.Functions) {
			if whole.AsRan.Functions[f] == 0 {
				continue
			}
			fmt.Printf("    %-14s whole %8.3f s  window %8.3f s (%+.2f%%)\n", f, whole.AsRan.Functions[f], part.AsRan.Functions[f], pct(part.AsRan.Functions[f], whole.AsRan.Functions[f]))
		}
	}
	fmt.Printf("replay of %d ranks (%d actions), as netloom model runs it (read and check the traces, window, replays):\n", *ranks, *ranks*(iters*10+2))
	for _, perFunction := range []bool{false, true} {
		res, took := replay(*ranks, false, perFunction)
		how := "whole"
		if w := res.Window; w != nil {
			how = fmt.Sprintf("window of %d periods, %d + %d actions", w.Kept, w.Actions[0], w.Actions[1])
		}
		fmt.Printf("  per function %-5v %6.1f s of wall time for %.1f s simulated (%.2fx the minute; target under a minute): %s\n",
			perFunction, took.Seconds(), res.AsRan.Elapsed, took.Seconds()/60, how)
		if *whole && !perFunction {
			all, t := replay(*ranks, true, perFunction)
			fmt.Printf("  per function %-5v %6.1f s of wall time for the whole replay: %.1f s simulated (window %+.2f%%), %.0f actions/s\n",
				perFunction, t.Seconds(), all.AsRan.Elapsed, pct(res.AsRan.Elapsed, all.AsRan.Elapsed), float64(*ranks*iters*10)/t.Seconds())
		}
	}
}

func pct(got, want float64) float64 { return 100 * (got - want) / want }

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// computeGaps reads the compute amounts (flops at 1 Gflop/s) of a traced
// run's rank-0 trace, the first and last left out.
func computeGaps(dir string) ([]float64, error) {
	job, _, err := model.Load(dir)
	if err != nil {
		return nil, err
	}
	z, done, err := openGzip(job.Traces[0])
	if err != nil {
		return nil, err
	}
	defer done()
	var gaps []float64
	sc := bufio.NewScanner(z)
	for sc.Scan() {
		if fl := strings.Fields(sc.Text()); len(fl) == 3 && fl[1] == "compute" {
			v, err := strconv.ParseFloat(fl[2], 64)
			if err == nil && v > 5e6 { // the 10 ms of work, not the gaps between calls
				gaps = append(gaps, v)
			}
		}
	}
	if len(gaps) < 3 {
		return nil, fmt.Errorf("%s: %d compute gaps", job.Traces[0], len(gaps))
	}
	return gaps[1 : len(gaps)-1], sc.Err()
}

// haloJob writes ranks' halo traces of iters iterations into dir, 16
// ranks per host.
func haloJob(dir string, ranks, iters int, gaps []float64) (*model.Job, []string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	j := &model.Job{ID: "big", Dir: dir, Ranks: ranks}
	hosts := make([]string, ranks)
	for r := range ranks {
		hosts[r] = fmt.Sprintf("node%d", r/16)
		path := filepath.Join(dir, fmt.Sprintf("rank-%d.ti.gz", r))
		if _, err := os.Stat(path); err != nil {
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			if err := writeHalo(path, r, ranks, iters, func() float64 { return gaps[rng.IntN(len(gaps))] }); err != nil {
				log.Fatal(err)
			}
		}
		j.Traces = append(j.Traces, path)
		j.Nodes = append(j.Nodes, hosts[r])
		j.Events += iters*10 + 2
	}
	return j, hosts
}

// openGzip opens a gzip-compressed file for reading.
func openGzip(path string) (io.Reader, func() error, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	z, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return z, f.Close, nil
}

func textSize(path string) int64 {
	z, done, err := openGzip(path)
	if err != nil {
		return 0
	}
	defer done()
	n, _ := io.Copy(io.Discard, z)
	return n
}

func writeHalo(path string, r, n, iters int, gap func() float64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	z := gzip.NewWriter(f)
	var b strings.Builder
	fmt.Fprintf(z, "%d init\n", r)
	right, left := (r+1)%n, (r+n-1)%n
	for range iters {
		b.Reset()
		fmt.Fprintf(&b, "%d compute %.0f\n", r, gap())
		for tag, pair := range [][2]int{{right, left}, {left, right}} {
			fmt.Fprintf(&b, "%d irecv %d %d 65536\n%d isend %d %d 65536\n", r, pair[1], tag, r, pair[0], tag)
			fmt.Fprintf(&b, "%d wait %d %d %d\n%d wait %d %d %d\n", r, pair[1], r, tag, r, r, pair[0], tag)
		}
		fmt.Fprintf(&b, "%d allreduce 8 0\n", r)
		if _, err := z.Write([]byte(b.String())); err != nil {
			return err
		}
	}
	fmt.Fprintf(z, "%d finalize\n", r)
	if err := z.Close(); err != nil {
		return err
	}
	return f.Close()
}
