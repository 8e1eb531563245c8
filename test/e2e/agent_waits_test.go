package e2e

import (
	"fmt"
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
// NETLOOM_WAITS=1. Each rank's wait before the allreduce (b_allreduce) is
// checked against what the program measured on the host's one clock: it
// cannot be less than the program's own wait for the last rank (from every
// rank's arrival time; 3 ms allowed), nor more than the program's whole time
// inside its MPI_Allreduce calls, the allreduce included. The difference is
// the barrier's own latency and the time a rank took to run again (10-20 ms
// per call when 4 MPICH ranks spin on 2 cores; more on a loaded machine),
// and only that noise, as the program saw it, may separate the wait from the
// injected imbalance (n-1-k) x D x ITERS beyond 10% (or 50 ms). The
// allreduce's own time must be small beside the largest wait, and a
// balanced run (D = 0) waits only what the program's own calls took. The
// program's sums are the same without the agent.
func TestAgentWaits(t *testing.T) {
	buildAgent(t)
	const d, iters = 100, 5 // ms per rank step, rounds
	const eps = 0.003       // s: clock reads and the wrapper around the barrier
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
					own, inAll := ownWaits(stdout, "imbalance"), ownMeasure(stdout, "imbalance", "inall")
					if len(own) != agentRanks || len(inAll) != agentRanks {
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
						what := fmt.Sprintf("D=%d rank %d: b_allreduce %.3f s, MPI_Allreduce %.4f s; the program: waited %.3f s, in MPI_Allreduce %.3f s; injected %.3f s",
							delay, rank, wait, self, own[rank], inAll[rank], injected)
						if wait < own[rank]-eps {
							t.Errorf("%s: the wait is less than the program's wait for the last rank", what)
						}
						if wait+self > inAll[rank]+eps {
							t.Errorf("%s: the wait and the allreduce exceed the program's time in MPI_Allreduce", what)
						}
						noise := math.Abs(own[rank]-injected) + inAll[rank] - own[rank]
						if math.Abs(wait-injected) > math.Max(0.1*injected, 0.05)+noise {
							t.Errorf("%s: the wait is not the injected imbalance", what)
						}
						if largest := float64((agentRanks-1)*d*iters) / 1e3; self > 0.25*largest {
							t.Errorf("D=%d rank %d: MPI_Allreduce itself took %.3f s, beside an imbalance of %.3f s", delay, rank, self, largest)
						}
						if p.MPI[i] > p.Wall[i] {
							t.Errorf("D=%d rank %d: MPI %.3f s > wall %.3f s", delay, rank, p.MPI[i], p.Wall[i])
						}
						t.Log(what)
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

// ownMeasure is another of the program's measures per rank: the number
// after "KEY" on its "PROG rank R waited SECONDS [KEY SECONDS]..." lines.
func ownMeasure(stdout, prog, key string) map[int]float64 {
	out := map[int]float64{}
	re := regexp.MustCompile(prog + ` rank (\d+) waited [0-9.]+ (?:\w+ [0-9.]+ )*` + key + ` ([0-9.]+)`)
	for _, f := range re.FindAllStringSubmatch(stdout, -1) {
		r, _ := strconv.Atoi(f[1])
		out[r], _ = strconv.ParseFloat(f[2], 64)
	}
	return out
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
// with an eager (1 KiB) and a rendezvous (256 KiB) message. Each rank's wait
// for late senders (w_recv, the probe before MPI_Recv) is checked against
// what the program measured on the host's one clock: it cannot be less than
// the sender's lateness (its post time minus the receiver's entry, 3 ms
// allowed), nor more than the program's whole time inside MPI_Recv, entry to
// return, receive included. The difference between those two is the time the
// receiver took to run again once the message was there (none on a quiet
// machine; tens of ms with 4 spinning MPICH ranks on 2 cores or a loaded
// machine, where a sender can also post later than it slept), and only that
// noise, as the program saw it, may separate w_recv from the injected delay
// (r+1) x D x ITERS beyond 10% (or 20 ms). The receive's own time must hold
// none of the lateness, and a run without delays (D = 0) waits only what the program's own
// receives took. The measured rounds are a region (MPI_Pcontrol): its wait
// holds the sender's lateness and no more than all of w_recv. The program's
// checksums are the same without the agent. latesend.c's sendrecv mode does
// each round as one MPI_Sendrecv on both sides, the same checks on
// w_sendrecv (the wrappers post its send, then probe), and latesend.f90's
// the same from Fortran, with a status the receiver checks.
func TestAgentLateSender(t *testing.T) {
	buildAgent(t)
	const d, iters = 50, 4 // ms per sender step, rounds
	const eps = 0.003      // s: clock reads and the wrapper around the probe
	half := agentRanks / 2
	for _, m := range impls(t) {
		for _, c := range []struct{ src, mode, fn string }{
			{"testdata/mpi/latesend.c", "", "MPI_Recv"},
			{"testdata/mpi/latesend.f90", "", "MPI_Recv"},
			{"testdata/mpi/latesend.c", "sendrecv", "MPI_Sendrecv"},
			{"testdata/mpi/latesend.f90", "sendrecv", "MPI_Sendrecv"},
		} {
			src, name := c.src, m.name+"/"+strings.TrimPrefix(c.src, "testdata/mpi/")
			if c.mode != "" {
				name += "," + c.mode
			}
			t.Run(name, func(t *testing.T) {
				needMPI(t, m)
				prog := compile(t, m, src)
				for _, size := range []int{1024, 262144} {
					args := func(delay int) []string {
						return []string{strconv.Itoa(delay), strconv.Itoa(iters), strconv.Itoa(size), c.mode}
					}
					plain := sortedLines(runJob(t, m, agentRanks, "", nil, nil, prog, args(d)...), "latesend")
					for _, delay := range []int{d, 0} {
						out := t.TempDir()
						stdout := runJob(t, m, agentRanks, m.lib, []string{"NETLOOM_OUTPUT=" + out, "NETLOOM_WAITS=1"}, nil, prog, args(delay)...)
						if delay == d && !slices.Equal(sortedLines(stdout, "latesend"), plain) {
							t.Errorf("%d B: output with the waits differs:\n%s\nwithout the agent:\n%s", size, stdout, strings.Join(plain, "\n"))
						}
						late, inRecv := ownWaits(stdout, "latesend"), ownMeasure(stdout, "latesend", "inrecv")
						if len(late) != agentRanks || len(inRecv) != agentRanks {
							t.Fatalf("program output: %s", stdout)
						}
						j := joinProfiles(t, out)
						regionWait := map[int]float64{}
						for _, pr := range j.Processes {
							for _, r := range pr.Regions {
								if r.Name == "pcontrol-1" {
									regionWait[pr.Rank] = float64(r.WaitNS) / 1e9
								}
							}
						}
						p := ingest.BuildProfile(j)
						col := slices.Index(p.Functions, c.fn)
						if col < 0 || len(p.WaitNS) != agentRanks {
							t.Fatalf("%d B, D=%d: no %s wait in the profile: %+v", size, delay, c.fn, p)
						}
						for i, rank := range p.Ranks {
							injected := 0.0
							if rank >= half {
								injected = float64((rank-half+1)*delay*iters) / 1e3
							}
							wait, self := float64(p.WaitNS[i][col])/1e9, float64(p.TimeNS[i][col])/1e9
							what := fmt.Sprintf("%d B, D=%d rank %d: %s %.4f s, %s %.4f s; the program: sender late %.4f s, in %s %.4f s; injected %.3f s",
								size, delay, rank, ingest.WaitColumn(c.fn), wait, c.fn, self, late[rank], c.fn, inRecv[rank], injected)
							t.Log(what)
							if wait < late[rank]-eps {
								t.Errorf("%s: the wait is less than the sender's lateness", what)
							}
							if wait+self > inRecv[rank]+eps {
								t.Errorf("%s: the wait and the receive exceed the program's time in MPI_Recv", what)
							}
							if late[rank] < 0.9*injected-0.02 {
								t.Errorf("%s: the sender was not as late as injected", what)
							}
							// Noise the program itself saw: a sender later than it
							// slept (not run at once), a receiver slow to resume.
							noise := math.Abs(late[rank]-injected) + inRecv[rank] - late[rank]
							if math.Abs(wait-injected) > math.Max(0.1*injected, 0.02)+noise {
								t.Errorf("%s: the wait is not the injected delay", what)
							}
							// The call's own time holds none of the lateness: no more
							// than the program's time in it beyond that (a sender's
							// MPI_Sendrecv also completes its rendezvous send there,
							// which waits until the receiver runs: 25 ms over 4 rounds
							// with 4 spinning MPICH ranks on 2 cores), plus 10%.
							if self > inRecv[rank]-late[rank]+0.1*float64(d*iters)/1e3 {
								t.Errorf("%s: the receive itself took long", what)
							}
							if rw := regionWait[rank]; rw < late[rank]-eps || rw > wait+eps {
								t.Errorf("%s: the region's wait is %.4f s", what, rw)
							}
						}
					}
				}
			})
		}
	}
}
