package model

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protodelim"

	"github.com/netloom/netloom/internal/ingest/agentpb"
)

// profileDir writes a traced job's profile as netloom run --trace does:
// DIR/rank-N.pb (one final snapshot, rank r on hosts[r], named so as its
// node), DIR/rank-N.ti.gz (the actions after "R init", before "R
// finalize") and DIR/rank-N.ti.json (meta[r] merged into what the agent
// writes: elapsed 1 s).
func profileDir(t *testing.T, hosts []string, actions [][]string, meta map[int]map[string]any) string {
	t.Helper()
	dir := t.TempDir()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for r, acts := range actions {
		d := &agentpb.Datagram{Version: 1, JobId: "job29", Rank: uint32(r), WorldSize: uint32(len(actions)), Chunks: 1, Final: true,
			StartUnixNs: start.UnixNano(), TimeUnixNs: start.Add(time.Second).UnixNano(),
			Process:   &agentpb.Process{Node: hosts[r], Host: hosts[r], Pid: uint32(100 + r), User: "alice", Program: "app", WallSeconds: 1},
			Functions: []*agentpb.FunctionStat{{Name: "MPI_Sendrecv", Calls: 1, TimeNs: 1e6}}}
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("rank-%d.pb", r)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := protodelim.MarshalTo(f, d); err != nil {
			t.Fatal(err)
		}
		f.Close()
		var b bytes.Buffer
		z := gzip.NewWriter(&b)
		fmt.Fprintf(z, "%d init\n", r)
		for _, a := range acts {
			fmt.Fprintf(z, "%d %s\n", r, a)
		}
		fmt.Fprintf(z, "%d finalize\n", r)
		z.Close()
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("rank-%d.ti.gz", r)), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		m := map[string]any{"rank": r, "world_size": len(actions), "events": len(acts), "truncated": false, "truncated_reason": "",
			"untraced_calls": 0, "host_flops": 1e9, "elapsed_seconds": 1.0}
		for k, v := range meta[r] {
			m[k] = v
		}
		j, _ := json.Marshal(m)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("rank-%d.ti.json", r)), j, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// pairActions: two ranks exchange n messages of b bytes after 1 ms of
// compute each.
func pairActions(n int, b int) [][]string {
	acts := make([][]string, 2)
	for i := 0; i < n; i++ {
		acts[0] = append(acts[0], "compute 1000000", fmt.Sprintf("send 1 0 %d", b), fmt.Sprintf("recv 1 0 %d", b))
		acts[1] = append(acts[1], "compute 1000000", fmt.Sprintf("recv 0 0 %d", b), fmt.Sprintf("send 0 0 %d", b))
	}
	return acts
}

// Each bad file gets the error that names it and what is wrong with it:
// a trace cut mid-file is "cut short" at the line the cut falls in (not
// the partial line's own complaint), corrupt compressed data "corrupt",
// an empty or uncompressed file so; a profile file that cannot be read
// says why (not "rank 1 has no profile" alone); a trace description that
// is not JSON names itself.
func TestBadFilesSayWhatIsWrong(t *testing.T) {
	// many lines, so that a cut falls inside the compressed stream
	acts := pairActions(2000, 65536)
	fresh := func(t *testing.T) string { return profileDir(t, []string{"n1", "n2"}, acts, nil) }
	load := func(t *testing.T, dir string) error {
		t.Helper()
		j, _, err := Load(dir)
		if err != nil {
			return err
		}
		return j.CheckTraces()
	}
	if err := load(t, fresh(t)); err != nil {
		t.Fatalf("the whole job: %v", err)
	}

	t.Run("cut short", func(t *testing.T) {
		dir := fresh(t)
		name := filepath.Join(dir, "rank-1.ti.gz")
		b, _ := os.ReadFile(name)
		cut := b[:len(b)/2]
		if err := os.WriteFile(name, cut, 0o644); err != nil {
			t.Fatal(err)
		}
		// the line the cut falls in: one more than the whole lines before it
		z, err := gzip.NewReader(bytes.NewReader(cut))
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		_, rerr := got.ReadFrom(z)
		if rerr == nil {
			t.Fatal("the cut file reads whole")
		}
		line := bytes.Count(got.Bytes(), []byte("\n")) + 1
		err = load(t, dir)
		want := fmt.Sprintf("%s: cut short (unexpected EOF at line %d)", name, line)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "without its peer") {
			t.Errorf("cut at line %d: %v; want %q", line, err, want)
		}
	})
	t.Run("corrupt", func(t *testing.T) {
		dir := fresh(t)
		name := filepath.Join(dir, "rank-0.ti.gz")
		b, _ := os.ReadFile(name)
		for i := len(b) / 2; i < len(b)/2+64; i++ {
			b[i] ^= 0x5a
		}
		os.WriteFile(name, b, 0o644)
		if err := load(t, dir); err == nil || !strings.Contains(err.Error(), name+": corrupt") {
			t.Errorf("corrupt: %v", err)
		}
	})
	t.Run("empty and not compressed", func(t *testing.T) {
		dir := fresh(t)
		name := filepath.Join(dir, "rank-0.ti.gz")
		os.WriteFile(name, nil, 0o644)
		if err := load(t, dir); err == nil || !strings.Contains(err.Error(), name+": empty") {
			t.Errorf("empty: %v", err)
		}
		os.WriteFile(name, []byte("0 init\n0 finalize\n"), 0o644)
		if err := load(t, dir); err == nil || !strings.Contains(err.Error(), name+": not gzip-compressed") {
			t.Errorf("not compressed: %v", err)
		}
	})
	t.Run("corrupt profile", func(t *testing.T) {
		dir := fresh(t)
		name := filepath.Join(dir, "rank-1.pb")
		b, _ := os.ReadFile(name)
		os.WriteFile(name, b[:len(b)/2], 0o644)
		err := load(t, dir)
		if err == nil || !strings.Contains(err.Error(), "rank 1 has no profile: "+name+": ") {
			t.Errorf("a profile cut short: %v; want what is wrong with %s", err, name)
		}
		os.Remove(name)
		if err := load(t, dir); err == nil || !strings.Contains(err.Error(), "rank 1 has no profile (no rank-1.pb)") {
			t.Errorf("no profile file: %v", err)
		}
	})
	t.Run("trace description", func(t *testing.T) {
		dir := fresh(t)
		os.WriteFile(filepath.Join(dir, "rank-1.ti.json"), []byte("{\"rank\": 1, \"eve"), 0o644)
		if err := load(t, dir); err == nil || !strings.Contains(err.Error(), "rank 1's trace description rank-1.ti.json: not the JSON") {
			t.Errorf("a cut description: %v", err)
		}
	})
}

// A rank's trace description that says it was cut is told, with its
// reason (truncated_reason) and figures; one that is whole is not.
func TestTruncatedTraceWarns(t *testing.T) {
	acts := pairActions(3, 8)
	for _, c := range []struct {
		meta map[string]any
		want string
	}{
		{map[string]any{"truncated": true, "truncated_reason": "requests", "requests_posted": 4818, "requests_completed": 4096, "requests_limit": 4096, "events": 13482},
			"rank 1's trace was cut after 13482 events (more nonblocking requests were outstanding at once than its request table holds (4096; 4818 posted, 4096 completed))"},
		{map[string]any{"truncated": true, "truncated_reason": "events", "events": 9},
			"rank 1's trace was cut after 9 events (its buffer (NETLOOM_TRACE_MB) filled)"},
		{map[string]any{"truncated": true, "events": 9},
			"rank 1's trace was cut after 9 events (its description gives no reason)"},
		{map[string]any{"truncated": true, "truncated_reason": "cosmic rays", "events": 9},
			`rank 1's trace was cut after 9 events (truncated_reason "cosmic rays")`},
	} {
		dir := profileDir(t, []string{"n1", "n2"}, acts, map[int]map[string]any{1: c.meta})
		_, warns, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, w := range warns {
			found = found || strings.HasPrefix(w, c.want+": the replay covers the run only up to there")
		}
		if !found {
			t.Errorf("%v: warnings %q; want %q", c.meta, warns, c.want)
		}
	}
	_, warns, err := Load(profileDir(t, []string{"n1", "n2"}, acts, nil))
	if err != nil || len(warns) != 0 {
		t.Errorf("a whole trace: warnings %q, %v", warns, err)
	}
}

// A job measured with more ranks on a host than it has CPUs says so, where
// the number came from, and what the replay as ran is then worth against
// the measured time, figures as in the result; HostCores knows this host's
// CPUs (nproc) and asks Slurm for another's.
func TestOversubscribedWarns(t *testing.T) {
	needSmpirun(t)
	old := CoresOf
	defer func() { CoresOf = old }()
	CoresOf = func(_ context.Context, host string, nodes []string) (int, string) {
		if host == "vm" {
			return 1, "a test's count"
		}
		return 0, ""
	}
	dir := profileDir(t, []string{"vm", "vm"}, pairActions(3, 8), nil)
	j, _, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := Flat("flat", []string{"vm"}, map[string]int{"vm": 2}, 1e-6, 12.5e9, DefaultLoopback)
	res, err := Predict(context.Background(), j, Request{Platform: p, HostOf: j.Nodes, Work: t.TempDir(), Networks: []Network{{Name: "perfect network", Perfect: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Oversubscribed) != 1 || res.Oversubscribed[0] != (HostLoad{Host: "vm", Ranks: 2, CPUs: 1, Source: "a test's count"}) {
		t.Fatalf("oversubscribed %+v", res.Oversubscribed)
	}
	// 3 ms of compute replayed against the 1 s measured
	want := "the measured run was oversubscribed: host vm ran 2 ranks on 1 CPUs (a test's count). Its ranks waited for a core inside MPI calls too"
	worth := fmt.Sprintf("as ran it predicts %.0f%% of the measured elapsed time (%.4f s against %.4f s)", 100*res.AsRan.Elapsed/res.Measured.Elapsed, res.AsRan.Elapsed, res.Measured.Elapsed)
	if res.Measured.Elapsed != 1 || res.AsRan.Elapsed > 0.01 {
		t.Errorf("measured %g s, as ran %g s", res.Measured.Elapsed, res.AsRan.Elapsed)
	}
	var w string
	for _, x := range res.Warnings {
		if strings.HasPrefix(x, want) {
			w = x
		}
	}
	if w == "" || !strings.Contains(w, worth) {
		t.Errorf("warnings %q; want %q ... %q", res.Warnings, want, worth)
	}
	// all ranks on one node: a network what-if is told why it changes little
	found := false
	for _, x := range res.Warnings {
		found = found || strings.HasPrefix(x, "nothing crossed the network as the job ran (all 2 ranks on node vm)")
	}
	if !found {
		t.Errorf("warnings %q: no word of the job on one node", res.Warnings)
	}

	// Not oversubscribed, but far off: said so, with the figures.
	CoresOf = func(context.Context, string, []string) (int, string) { return 2, "a test's count" }
	res, err = Predict(context.Background(), j, Request{Platform: p, HostOf: j.Nodes, Work: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Oversubscribed) != 0 || len(res.Warnings) != 1 || !strings.HasPrefix(res.Warnings[0], "the replay is far from the measured run: "+worth) {
		t.Errorf("2 ranks on 2 CPUs: oversubscribed %+v, warnings %q; want only %q", res.Oversubscribed, res.Warnings, worth)
	}

	me, _ := os.Hostname()
	if n, src := HostCores(context.Background(), me, nil); n != runtime.NumCPU() || src != "nproc on this host" {
		t.Errorf("this host: %d CPUs from %q", n, src)
	}
	fake := filepath.Join(t.TempDir(), "scontrol")
	os.WriteFile(fake, []byte("#!/bin/sh\n[ \"$4\" = n7 ] && echo 'NodeName=n7 Arch=x86_64 CoresPerSocket=8 CPUAlloc=0 CPUTot=48 CPULoad=0.1' && exit 0\nexit 1\n"), 0o755)
	oldS := Scontrol
	defer func() { Scontrol = oldS }()
	Scontrol = fake
	if n, src := HostCores(context.Background(), "elsewhere", []string{"n7"}); n != 48 || src != "Slurm's CPUTot of node n7" {
		t.Errorf("a Slurm node: %d CPUs from %q", n, src)
	}
	if n, src := HostCores(context.Background(), "elsewhere", []string{"n8"}); n != 0 || src != "" {
		t.Errorf("a node nobody knows: %d CPUs from %q", n, src)
	}
}

// An implausible calibration is said, with its figures.
func TestCalibrationCheck(t *testing.T) {
	good := &Calibration{Latency: 1.2e-6, Bandwidth: 8e9}
	if w := good.Check("c.json"); len(w) != 0 {
		t.Errorf("a plausible calibration: %q", w)
	}
	bad := &Calibration{Latency: 1.03e-3, Bandwidth: 5e9, Warnings: []string{"measured busy"}}
	w := bad.Check("c.json")
	if len(w) != 2 || w[0] != "measured busy" || !strings.HasPrefix(w[1], "the calibration c.json measured a latency of 1.03 ms (more than 100 us): implausible") {
		t.Errorf("1 ms latency: %q", w)
	}
	load := 3.5
	if got := BusyWarning(2, &load); !strings.HasPrefix(got, "this machine's load average was 3.50 on 2 CPUs") {
		t.Errorf("busy: %q", got)
	}
	load = 0.2
	if got := BusyWarning(16, &load); got != "" {
		t.Errorf("quiet: %q", got)
	}
}
