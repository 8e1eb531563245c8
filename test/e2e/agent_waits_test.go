package e2e

import (
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/netloom/netloom/internal/ingest"
)

// TestAgentWaits runs imbalance.c and imbalance.f90 (rank k sleeps k x D
// before each of ITERS MPI_Allreduce calls) under each MPI with
// NETLOOM_WAITS=1: each rank's wait before the allreduce (b_allreduce) must
// be what the program measured itself from every rank's arrival times (one
// clock: the ranks share this host), within 10% (or 100 ms, the barrier's
// own latency over the rounds when 4 ranks spin on 2 cores); for Open MPI
// that is the injected imbalance (n-1-k) x D x ITERS too, within 10% (or
// 50 ms); MPICH's waiting ranks spin, and with 4 ranks on 2 cores they
// delay the working ones, so there only the program's own measure is the
// truth. The allreduce's own time must be
// small beside the largest wait, and a balanced run (D = 0) must wait
// almost nothing. The program's sums are the same without the agent.
func TestAgentWaits(t *testing.T) {
	buildAgent(t)
	const d, iters = 100, 5 // ms per rank step, rounds
	for _, m := range impls(t) {
		for _, src := range []string{"testdata/mpi/imbalance.c", "testdata/mpi/imbalance.f90"} {
			t.Run(m.name+"/"+strings.TrimPrefix(src, "testdata/mpi/"), func(t *testing.T) {
				needMPI(t, m)
				prog := compile(t, m, src)
				plain := sortedLines(runJob(t, m, agentRanks, "", nil, nil, prog, strconv.Itoa(d), strconv.Itoa(iters)), "imbalance")
				for _, delay := range []int{d, 0} {
					out := t.TempDir()
					stdout := runJob(t, m, agentRanks, m.lib, []string{"NETLOOM_OUTPUT=" + out, "NETLOOM_WAITS=1"}, nil, prog, strconv.Itoa(delay), strconv.Itoa(iters))
					if delay == d && !slices.Equal(sortedLines(stdout, "imbalance"), plain) {
						t.Errorf("output with the waits differs:\n%s\nwithout the agent:\n%s", stdout, strings.Join(plain, "\n"))
					}
					own := ownWaits(stdout, "imbalance")
					if len(own) != agentRanks {
						t.Fatalf("program output: %s", stdout)
					}
					j := joinProfiles(t, out)
					p := ingest.BuildProfile(j)
					col := slices.Index(p.Functions, "MPI_Allreduce")
					if col < 0 || len(p.WaitNS) != agentRanks {
						t.Fatalf("D=%d: no MPI_Allreduce wait in the profile: %+v", delay, p)
					}
					for i, rank := range p.Ranks {
						injected := float64((agentRanks-1-rank)*delay*iters) / 1e3
						wait, self := float64(p.WaitNS[i][col])/1e9, float64(p.TimeNS[i][col])/1e9
						if math.Abs(wait-own[rank]) > math.Max(0.1*own[rank], 0.1) {
							t.Errorf("D=%d rank %d: waited %.3f s before MPI_Allreduce; the program measured %.3f s", delay, rank, wait, own[rank])
						}
						if m.name == "openmpi" && math.Abs(wait-injected) > math.Max(0.1*injected, 0.05) {
							t.Errorf("D=%d rank %d: waited %.3f s before MPI_Allreduce, injected %.3f s", delay, rank, wait, injected)
						}
						if largest := float64((agentRanks-1)*d*iters) / 1e3; self > 0.25*largest {
							t.Errorf("D=%d rank %d: MPI_Allreduce itself took %.3f s, beside an imbalance of %.3f s", delay, rank, self, largest)
						}
						if p.MPI[i] > p.Wall[i] {
							t.Errorf("D=%d rank %d: MPI %.3f s > wall %.3f s", delay, rank, p.MPI[i], p.Wall[i])
						}
						t.Logf("D=%d rank %d: b_allreduce %.3f s (program %.3f, injected %.3f), allreduce %.4f s", delay, rank, wait, own[rank], injected, self)
					}
				}
			})
		}
	}
}

// ownWaits are the test program's own measures of each rank's wait, from
// its "PROG rank R waited SECONDS" lines.
func ownWaits(stdout, prog string) map[int]float64 {
	own := map[int]float64{}
	re := regexp.MustCompile(prog + ` rank (\d+) waited ([0-9.]+)`)
	for _, f := range re.FindAllStringSubmatch(stdout, -1) {
		r, _ := strconv.Atoi(f[1])
		own[r], _ = strconv.ParseFloat(f[2], 64)
	}
	return own
}

// sortedLines are the program's sums, sorted (ranks print in any order).
func sortedLines(s, prog string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if strings.HasPrefix(l, prog+" ") && strings.Contains(l, ": sum ") {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

// TestAgentLateSender runs latesend.c and latesend.f90 (rank r of the first
// half sleeps (r+1) x D before each of ITERS sends to rank r + n/2, which
// waits in MPI_Recv, then acknowledges) under each MPI with NETLOOM_WAITS=1,
// with an eager (1 KiB) and a rendezvous (256 KiB) message: each receiver's
// wait for its late sender (w_recv, the probe before MPI_Recv) must be what
// the program measured itself from the sender's post times on the host's one
// clock, and the injected delay (r+1) x D x ITERS, within 10% (or 20 ms;
// 50 ms under MPICH, whose waiting ranks spin: 4 of them on 2 cores see a
// message only when the scheduler runs them, 25-35 ms late over 4 rounds);
// the receive's own time must be small beside it; the senders, whose acks
// come at once, and a run without delays (D = 0) must wait almost nothing.
// The program's checksums are the same without the agent.
func TestAgentLateSender(t *testing.T) {
	buildAgent(t)
	const d, iters = 50, 4 // ms per sender step, rounds
	half := agentRanks / 2
	for _, m := range impls(t) {
		for _, src := range []string{"testdata/mpi/latesend.c", "testdata/mpi/latesend.f90"} {
			t.Run(m.name+"/"+strings.TrimPrefix(src, "testdata/mpi/"), func(t *testing.T) {
				needMPI(t, m)
				prog := compile(t, m, src)
				slack := 0.02
				if m.name == "mpich" {
					slack = 0.05
				}
				for _, size := range []int{1024, 262144} {
					args := func(delay int) []string {
						return []string{strconv.Itoa(delay), strconv.Itoa(iters), strconv.Itoa(size)}
					}
					plain := sortedLines(runJob(t, m, agentRanks, "", nil, nil, prog, args(d)...), "latesend")
					for _, delay := range []int{d, 0} {
						out := t.TempDir()
						stdout := runJob(t, m, agentRanks, m.lib, []string{"NETLOOM_OUTPUT=" + out, "NETLOOM_WAITS=1"}, nil, prog, args(delay)...)
						if delay == d && !slices.Equal(sortedLines(stdout, "latesend"), plain) {
							t.Errorf("%d B: output with the waits differs:\n%s\nwithout the agent:\n%s", size, stdout, strings.Join(plain, "\n"))
						}
						own := ownWaits(stdout, "latesend")
						if len(own) != agentRanks {
							t.Fatalf("program output: %s", stdout)
						}
						p := ingest.BuildProfile(joinProfiles(t, out))
						col := slices.Index(p.Functions, "MPI_Recv")
						if col < 0 || len(p.WaitNS) != agentRanks {
							t.Fatalf("%d B, D=%d: no MPI_Recv wait in the profile: %+v", size, delay, p)
						}
						for i, rank := range p.Ranks {
							injected := 0.0
							if rank >= half {
								injected = float64((rank-half+1)*delay*iters) / 1e3
							}
							wait, self := float64(p.WaitNS[i][col])/1e9, float64(p.TimeNS[i][col])/1e9
							t.Logf("%d B, D=%d rank %d: w_recv %.4f s (program %.4f, injected %.3f), MPI_Recv %.4f s", size, delay, rank, wait, own[rank], injected, self)
							if math.Abs(wait-own[rank]) > math.Max(0.1*own[rank], slack) {
								t.Errorf("%d B, D=%d rank %d: waited %.4f s for late senders; the program measured %.4f s", size, delay, rank, wait, own[rank])
							}
							if math.Abs(wait-injected) > math.Max(0.1*injected, slack) {
								t.Errorf("%d B, D=%d rank %d: waited %.4f s for late senders, injected %.3f s", size, delay, rank, wait, injected)
							}
							if self > 0.1*float64(d*iters)/1e3 {
								t.Errorf("%d B, D=%d rank %d: MPI_Recv itself took %.4f s", size, delay, rank, self)
							}
						}
					}
				}
			})
		}
	}
}
