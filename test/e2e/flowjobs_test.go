package e2e

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netloom/netloom/test/ethlab"
)

// Flows to jobs (issue 44 item 2, docs/sflow.md): the agent reports its
// rank's TCP connections; the daemon keeps them per job and finds the rank
// at the far end of each by the connection another rank reported from the
// other side.

// sockEnds is one established TCP socket: its local and remote ends.
type sockEnds struct{ local, remote netip.AddrPort }

// procSockets is the oracle: the established TCP sockets of process pid
// as the kernel lists them, its socket inodes (/proc/PID/fd) found in its
// network namespace's tables (/proc/PID/net/tcp and tcp6), loopback ones
// left out as the agent leaves them out. The agent asks its sockets
// (getsockname, getpeername); this reads the kernel's tables.
func procSockets(t *testing.T, pid int) []sockEnds {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	// An address as /proc/net/tcp prints it: each 32-bit word in hex as
	// the host reads it.
	addr := func(s string) netip.AddrPort {
		a, p, _ := strings.Cut(s, ":")
		raw, err := hex.DecodeString(a)
		if err != nil || (len(raw) != 4 && len(raw) != 16) {
			t.Fatalf("/proc/%d/net/tcp: address %q", pid, s)
		}
		b := make([]byte, len(raw))
		for w := 0; w < len(raw); w += 4 {
			binary.NativeEndian.PutUint32(b[w:], binary.BigEndian.Uint32(raw[w:]))
		}
		port, _ := strconv.ParseUint(p, 16, 16)
		ip, _ := netip.AddrFromSlice(b)
		return netip.AddrPortFrom(ip.Unmap(), uint16(port))
	}
	var out []sockEnds
	for _, table := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "01" || !inodes[f[9]] { // 01: ESTABLISHED
				continue
			}
			s := sockEnds{addr(f[1]), addr(f[2])}
			if !s.local.Addr().IsLoopback() && !s.remote.Addr().IsLoopback() {
				out = append(out, s)
			}
		}
	}
	return out
}

// connRow is one connection as GET /jobs/{job}/connections lists it.
type connRow struct {
	Kind    string `json:"kind"`
	Src     string `json:"src"`
	Dst     string `json:"dst"`
	SrcRank int    `json:"src_rank"`
	DstRank int    `json:"dst_rank"`
	Current bool   `json:"current"`
}

// expectedRows are the rows the daemon should list for the ranks'
// sockets: each connection once, from the end that sorts first, with the
// rank whose socket is at each end (-1 where no rank's is, or where
// several ranks hold the socket: Hydra's proxy passes its connection to
// mpiexec on to the ranks it starts).
func expectedRows(socks map[int][]sockEnds) []connRow {
	type end struct {
		ap     netip.AddrPort
		rank   int
		shared bool
	}
	ends := map[[2]netip.AddrPort]*[2]end{}
	for rank, ss := range socks {
		for _, s := range ss {
			a, b := s.local, s.remote
			if b.Compare(a) < 0 {
				a, b = b, a
			}
			k := [2]netip.AddrPort{a, b}
			e := ends[k]
			if e == nil {
				e = &[2]end{{ap: a, rank: -1}, {ap: b, rank: -1}}
				ends[k] = e
			}
			i := 1
			if s.local == a {
				i = 0
			}
			if e[i].rank == -1 && !e[i].shared {
				e[i].rank = rank
			} else if e[i].rank != rank {
				e[i].rank, e[i].shared = -1, true // a socket several ranks hold
			}
		}
	}
	var out []connRow
	for _, e := range ends {
		out = append(out, connRow{Kind: "tcp", Src: e[0].ap.String(), Dst: e[1].ap.String(), SrcRank: e[0].rank, DstRank: e[1].rank, Current: true})
	}
	sortRows(out)
	return out
}

func sortRows(r []connRow) {
	slices.SortFunc(r, func(a, b connRow) int {
		return strings.Compare(a.Src+" "+a.Dst, b.Src+" "+b.Dst)
	})
}

// TestFlowJobs runs a real MPI job over TCP on two hosts of the Ethernet
// lab (network namespaces, two ranks each), under the agent, reporting to
// a daemon. While every rank holds its connections (after an all-to-all,
// waiting without MPI), the connections the daemon holds as current for
// the job (GET /jobs/{job}/connections; it keeps closed ones too, for the
// samples of their time) are compared with the kernel's own tables read
// for each rank's pid: the same 5-tuples, and at each end the rank whose
// socket it is, or -1. Every pair of ranks on different hosts has a
// connection between them with both ranks named. After the job ends the
// daemon still lists them, with the job's end.
func TestFlowJobs(t *testing.T) {
	buildAgent(t)
	lab := startEthLab(t, "two-leaf")
	cfg := ethConfig(t, lab, false, "", nil)
	d, agentAddr := serveEth(t, lab, cfg)
	hostOf := []string{"h1", "h1", "h3", "h3"} // by rank: --host h1:2,h3:2 fills h1 first
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			needMPI(t, m)
			prog := compile(t, m, "testdata/mpi/conns.c")
			dir := t.TempDir()
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			job := "conns-" + lab.ID + "-" + m.name
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			done := make(chan error, 1)
			var out []byte
			go func() {
				var err error
				out, err = lab.MPIRun(ctx, ethlab.RunSpec{Impl: m.name, Hosts: []string{"h1", "h3"}, RanksPerHost: 2,
					Argv: []string{prog, dir, "65536"}, Dir: dir,
					Env: []string{"LD_PRELOAD=" + m.lib, "NETLOOM_DAEMON=" + agentAddr, "NETLOOM_INTERVAL=1", "NETLOOM_JOB_ID=" + job}})
				done <- err
			}()
			finish := func() {
				_ = os.WriteFile(filepath.Join(dir, "done"), nil, 0o644)
			}
			defer finish()
			// Every rank's pid, once it holds its connections.
			pids := map[int]int{}
			for deadline := time.Now().Add(2 * time.Minute); len(pids) < len(hostOf); time.Sleep(100 * time.Millisecond) {
				select {
				case err := <-done:
					t.Fatalf("the job ended before every rank was ready: %v\n%s", err, out)
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("ranks ready: %v of %d", pids, len(hostOf))
				}
				for r := range hostOf {
					if b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("ready-%d", r))); err == nil {
						pids[r], _ = strconv.Atoi(strings.TrimSpace(string(b)))
					}
				}
			}
			oracle := func() map[int][]sockEnds {
				s := map[int][]sockEnds{}
				for r, pid := range pids {
					s[r] = procSockets(t, pid)
				}
				return s
			}
			// Past two of the agents' snapshots (1 s apart) the daemon has
			// what they held; the kernel's tables must not have changed.
			before := oracle()
			var rows struct {
				Connections []connRow `json:"connections"`
				Total       int       `json:"total"`
				End         *time.Time
			}
			want := expectedRows(before)
			var got, past []connRow
			deadline := time.Now().Add(20 * time.Second)
			for {
				code := d.get("/api/v1/jobs/"+job+"/connections", &rows)
				got, past = nil, nil
				for _, c := range rows.Connections {
					if c.Current {
						got = append(got, c)
					} else {
						past = append(past, c)
					}
				}
				sortRows(got)
				if code == 200 && slices.Equal(got, want) || time.Now().After(deadline) {
					break
				}
				time.Sleep(500 * time.Millisecond)
			}
			if after := expectedRows(oracle()); !slices.Equal(after, want) {
				t.Fatalf("the ranks' sockets changed while the job waited:\nbefore %v\nafter  %v", want, after)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("the daemon's connections of %s:\n%s\nthe kernel's:\n%s", job, rowsText(got), rowsText(want))
			}
			// Every pair of ranks on different hosts is a connection the
			// daemon names both ranks of.
			pairs := map[[2]int]bool{}
			for _, c := range got {
				pairs[[2]int{min(c.SrcRank, c.DstRank), max(c.SrcRank, c.DstRank)}] = true
			}
			for a := range hostOf {
				for b := a + 1; b < len(hostOf); b++ {
					if hostOf[a] != hostOf[b] && !pairs[[2]int{a, b}] {
						t.Errorf("ranks %d (%s) and %d (%s): no connection between them named\n%s", a, hostOf[a], b, hostOf[b], rowsText(got))
					}
				}
			}
			t.Logf("%s: %d connections, as the kernel's tables have them:\n%s", m.name, len(got), rowsText(got))
			if len(past) > 0 {
				t.Logf("%s: and %d the ranks held earlier (not current):\n%s", m.name, len(past), rowsText(past))
			}
			finish()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("mpirun: %v\n%s", err, out)
				}
			case <-time.After(40 * time.Second):
				// MPICH's UCX over TCP sometimes hangs in MPI_Finalize after
				// the job's work (openucx/ucx#8738, with or without the
				// agent): killed, the daemon ends the job by its timeout.
				cancel()
				<-done
				if m.name != "mpich" {
					t.Fatalf("mpirun hung after the job's work:\n%s", out)
				}
				t.Logf("MPICH hung in MPI_Finalize (UCX's TCP transport): killed")
			}
			if n := strings.Count(string(out), " ok\n"); n != len(hostOf) {
				t.Errorf("%d ranks ok, want %d:\n%s", n, len(hostOf), out)
			}
			d.waitFor(func() bool {
				var j struct{ Job struct{ State string } }
				return d.get("/api/v1/jobs/"+job, &j) == 200 && j.Job.State == "finished"
			}, "job "+job+" finished")
			if code := d.get("/api/v1/jobs/"+job+"/connections", &rows); code != 200 || rows.End == nil || len(rows.Connections) < len(want) {
				t.Errorf("after the job: %d, end %v, %d connections (had %d)", code, rows.End, len(rows.Connections), len(want))
			}
		})
	}
	if code := d.get("/api/v1/jobs/no-such-job/connections", nil); code != 404 {
		t.Errorf("connections of a job never seen: %d, want 404", code)
	}
}

func rowsText(rows []connRow) string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "  %s %s (rank %d) - %s (rank %d)\n", r.Kind, r.Src, r.SrcRank, r.Dst, r.DstRank)
	}
	return b.String()
}
