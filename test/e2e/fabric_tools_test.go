package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/fabric/sim"
	"github.com/netloom/netloom/test/ibsim"
)

// netloomOn runs the netloom binary against fabric f (in its scratch
// directory, where umad2sim builds its ./sys-PID tree) and returns its
// standard output, standard error and exit status.
func netloomOn(t *testing.T, f *ibsim.Fabric, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(netloomBin, args...)
	cmd.Dir = f.Dir
	cmd.Env = append(os.Environ(), f.Env()...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("netloom %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errb.String(), code
}

// sysTrees lists the ./sys-PID trees umad2sim left in the fabric's folder:
// one is left by every process whose exit handlers did not run.
func sysTrees(t *testing.T, f *ibsim.Fabric) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(f.Dir, "sys-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFabricToolsReleaseTheFabric runs 50 netloom fabric commands in a row
// on one ibsim fabric, which serves ten clients (OpenSM holds one): each
// must give its client slot back on exit, on success, on error and on
// Ctrl-C, or the tenth would fail and every tool after it.
func TestFabricToolsReleaseTheFabric(t *testing.T) {
	f, _ := startFabric(t, 16, 8)
	before := sysTrees(t, f) // OpenSM's, which runs on
	cache := filepath.Join(t.TempDir(), "fabric.cache")
	runs := [][]string{
		{"fabric", "discover"},
		{"fabric", "sweep", "--ca-ports"},
		{"fabric", "route", "n1", "n16"},
		{"fabric", "discover", "--cache", cache},
		{"fabric", "sweep", "--load-cache", cache},
		{"fabric", "route", "--load-cache", cache, "n2", "n9"},
	}
	for i := 0; i < 50; i++ {
		args := runs[i%len(runs)]
		if out, errOut, code := netloomOn(t, f, args...); code != 0 {
			t.Fatalf("run %d of 50, netloom %s: exit status %d\n%s%s", i+1, strings.Join(args, " "), code, out, errOut)
		}
	}
	// Runtime errors end through the same exit.
	for i := 0; i < 12; i++ {
		_, errOut, code := netloomOn(t, f, "fabric", "route", "n1", "nosuch")
		if code != 1 || !strings.Contains(errOut, `"nosuch"`) {
			t.Fatalf("error run %d: exit status %d, %q; want 1 naming the node", i+1, code, errOut)
		}
	}
	// Ctrl-C once the process is attached: umad2sim makes its ./sys-PID
	// tree right after it connects, and removes it from its exit handler.
	for i := 0; i < 12; i++ {
		cmd := exec.Command(netloomBin, "fabric", "sweep", "--ca-ports", "--counters")
		cmd.Dir = f.Dir
		cmd.Env = append(os.Environ(), f.Env()...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		tree := filepath.Join(f.Dir, fmt.Sprintf("sys-%d", cmd.Process.Pid))
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
			if _, err := os.Stat(tree); err == nil || time.Now().After(deadline) {
				break
			}
		}
		_ = cmd.Process.Signal(syscall.SIGINT)
		_ = cmd.Wait() // finished or interrupted: either way it must let go
	}
	if left := sysTrees(t, f); len(left) != len(before) {
		t.Errorf("processes ended without their exit handlers: %v left, %v before", left, before)
	}
	for _, tool := range [][]string{{"perfquery"}, {"ibqueryerrors"}, {"ibnetdiscover"}} {
		if _, err := f.Run(context.Background(), tool[0], tool[1:]...); err != nil {
			t.Errorf("after 74 netloom runs: %v", err)
		}
	}
}

// liveTopology is what `netloom fabric discover --json ARGS` printed.
type liveTopology struct {
	Nodes []fabric.Node
	Links []fabric.Link
	From  string
}

func discoverJSON(t *testing.T, f *ibsim.Fabric, args ...string) liveTopology {
	t.Helper()
	out, errOut, code := netloomOn(t, f, append([]string{"fabric", "discover", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("discover %v: exit status %d: %s", args, code, errOut)
	}
	var lt liveTopology
	if err := json.Unmarshal([]byte(out), &lt); err != nil {
		t.Fatalf("discover %v: %v", args, err)
	}
	return lt
}

// sameTopology compares a netloom topology with ibnetdiscover's.
func sameTopology(t *testing.T, what string, got liveTopology, want *fabric.Topology) {
	t.Helper()
	if len(got.Nodes) != len(want.Nodes) || len(got.Links) != len(want.Links) {
		t.Fatalf("%s: %d nodes, %d links; ibnetdiscover %d, %d", what, len(got.Nodes), len(got.Links), len(want.Nodes), len(want.Links))
	}
	for i, n := range got.Nodes {
		w := want.Nodes[i]
		if n.GUID != w.GUID || n.Type != w.Type || n.Description != w.Description || n.LID != w.LID || n.Ports != w.Ports {
			t.Errorf("%s: node %d: %+v, ibnetdiscover %+v", what, i, n, w)
		}
	}
	for i, l := range got.Links {
		w := want.Links[i]
		if l.A != w.A || l.B != w.B || l.Width != w.Width || l.Speed != w.Speed {
			t.Errorf("%s: link %d: %+v, ibnetdiscover %+v", what, i, l, w)
		}
	}
}

// TestFabricKnownTopology gives sweep, route and discover the topology as
// users keep it: ibnetdiscover's cache (netloom reads what ibnetdiscover
// wrote, and ibnetdiscover what netloom wrote) and the daemon's store, and checks them against
// ibnetdiscover, ibqueryerrors, perfquery and ibtracert.
func TestFabricKnownTopology(t *testing.T) {
	f, _ := startFabric(t, 24, 8)
	ctx := context.Background()
	dir := t.TempDir()
	want := discoverWithTool(t, f)

	diagsCache := filepath.Join(dir, "diags.cache")
	if _, err := f.Run(ctx, "ibnetdiscover", "--cache", diagsCache); err != nil {
		t.Fatal(err)
	}
	ourCache := filepath.Join(dir, "netloom.cache")
	sameTopology(t, "discover --cache", discoverJSON(t, f, "--cache", ourCache), want)

	t.Run("a cache ibnetdiscover wrote", func(t *testing.T) {
		lt := discoverJSON(t, f, "--load-cache", diagsCache)
		if lt.From != "cache "+diagsCache {
			t.Errorf("from %q", lt.From)
		}
		sameTopology(t, "discover --load-cache", lt, want)
	})

	t.Run("ibnetdiscover reads the cache netloom wrote", func(t *testing.T) {
		out, err := f.Run(ctx, "ibnetdiscover", "--load-cache", ourCache)
		if err != nil {
			t.Fatal(err)
		}
		got, err := sim.ParseNetfile(bytes.NewReader(out), "ibnetdiscover --load-cache")
		if err != nil {
			t.Fatal(err)
		}
		var lt liveTopology
		lt.Nodes, lt.Links = got.Nodes, got.Links
		sameTopology(t, "ibnetdiscover --load-cache of netloom's cache", lt, want)
	})

	t.Run("sweep reads the ports ibqueryerrors reads, with perfquery's values", func(t *testing.T) {
		// Before any error is set: ibqueryerrors exits 1 when it finds one.
		iqe, err := f.Run(ctx, "ibqueryerrors", "--load-cache", diagsCache)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(\d+) ports checked`).FindSubmatch(iqe)
		if m == nil {
			t.Fatalf("no port count in ibqueryerrors output:\n%s", iqe)
		}
		// A known error count and data count on one switch port.
		var sw *fabric.Node
		for i := range want.Nodes {
			if n := &want.Nodes[i]; n.Type == fabric.Switch && (sw == nil || n.LID > sw.LID) {
				sw = n
			}
		}
		port := 2
		id := fmt.Sprintf("S-%016x", uint64(sw.GUID))
		for _, c := range []string{
			fmt.Sprintf(`PerformanceSet "%s"[%d] PortCountersExtended.PortXmitData=987654321`, id, port),
			fmt.Sprintf(`PerformanceSet "%s"[%d] PortCounters.SymbolErrorCounter=9`, id, port),
		} {
			if err := f.Console(c); err != nil {
				t.Fatal(err)
			}
		}
		out, errOut, code := netloomOn(t, f, "fabric", "sweep", "--load-cache", diagsCache, "--ca-ports", "--all-ports", "--counters", "--json")
		if code != 0 {
			t.Fatalf("sweep: exit status %d: %s", code, errOut)
		}
		var r struct {
			Ports, Errors int
			Counters      []struct {
				GUID     fabric.GUID
				Port     int
				Counters map[string]uint64
			}
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		if checked, _ := strconv.Atoi(string(m[1])); r.Ports != checked || r.Errors != 0 {
			t.Errorf("netloom swept %d ports (%d failed); ibqueryerrors checked %d", r.Ports, r.Errors, checked)
		}
		pq := []string{strconv.Itoa(int(sw.LID)), strconv.Itoa(port)}
		x, err := f.Run(ctx, "perfquery", append([]string{"-x"}, pq...)...)
		if err != nil {
			t.Fatal(err)
		}
		b, err := f.Run(ctx, "perfquery", pq...)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, c := range r.Counters {
			if c.GUID != sw.GUID || c.Port != port {
				continue
			}
			found = true
			// Management MADs cross this port between the reads; the
			// symbol errors do not move.
			if w := 4 * perfField(t, string(x), "PortXmitData"); c.Counters["xmit_data_bytes"] > w || c.Counters["xmit_data_bytes"] < 4*987654321 {
				t.Errorf("xmit_data_bytes %d; perfquery then %d, set %d", c.Counters["xmit_data_bytes"], w, 4*987654321)
			}
			if w := perfField(t, string(b), "SymbolErrorCounter"); c.Counters["symbol_errors"] != w || w != 9 {
				t.Errorf("symbol_errors %d, perfquery %d, set 9", c.Counters["symbol_errors"], w)
			}
		}
		if !found {
			t.Errorf("port %s:%d not swept", sw.GUID, port)
		}
	})

	t.Run("route from a cache equals ibtracert", func(t *testing.T) {
		var cas []fabric.Node
		for _, n := range want.Nodes {
			if n.Type == fabric.CA {
				cas = append(cas, n)
			}
		}
		for i := 0; i < len(cas); i += 7 {
			src, dst := cas[i], cas[len(cas)-1-i/2]
			if src.GUID == dst.GUID {
				continue
			}
			tr, err := f.Run(ctx, "ibtracert", strconv.Itoa(int(src.LID)), strconv.Itoa(int(dst.LID)))
			if err != nil {
				t.Fatal(err)
			}
			out, errOut, code := netloomOn(t, f, "fabric", "route", "--load-cache", ourCache, "--json", src.Name(), strconv.Itoa(int(dst.LID)))
			if code != 0 {
				t.Fatalf("route: exit status %d: %s", code, errOut)
			}
			var rt fabric.Route
			if err := json.Unmarshal([]byte(out), &rt); err != nil {
				t.Fatal(err)
			}
			var got []fabric.PortRef
			for _, h := range rt.Hops {
				got = append(got, fabric.PortRef{GUID: h.GUID, Port: h.Port})
			}
			if w := parseTracert(t, string(tr)); fmt.Sprint(got) != fmt.Sprint(w) {
				t.Errorf("route %s -> %s: netloom %v, ibtracert %v", src.Description, dst.Description, got, w)
			}
		}
	})

	t.Run("the daemon's stored topology", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "netloom.db")
		d := startDaemon(t, f, db, "--discover-interval", "5m")
		d.kill()
		lt := discoverJSON(t, f, "--db", db)
		if lt.From != "db "+db {
			t.Errorf("from %q", lt.From)
		}
		sameTopology(t, "discover --db", lt, want)
		out, errOut, code := netloomOn(t, f, "fabric", "route", "--db", db, "n1", "n24")
		if code != 0 || !strings.Contains(out, `"n24 HCA-1"`) {
			t.Errorf("route --db: exit status %d\n%s%s", code, out, errOut)
		}
		out, errOut, code = netloomOn(t, f, "fabric", "sweep", "--db", db, "--json")
		if code != 0 || !strings.Contains(out, `"errors": 0`) {
			t.Errorf("sweep --db: exit status %d\n%s%s", code, out, errOut)
		}
	})
}

// TestFabricKnownTopologyBadInput feeds broken caches and stores to the
// three commands: each gets exit status 1 and a message naming the file
// and what is wrong; conflicting options get status 2.
func TestFabricKnownTopologyBadInput(t *testing.T) {
	f, _ := startFabric(t, 8, 8)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.cache")
	if _, err := f.Run(context.Background(), "ibnetdiscover", "--cache", good); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	badMagic := append([]byte{}, b...)
	badMagic[0] ^= 0xff
	badVersion := append([]byte{}, b...)
	binary.LittleEndian.PutUint32(badVersion[4:], 7)
	// The first node record's port count (byte 28+77) made smaller than
	// the port keys it lists.
	fewPorts := append([]byte{}, b...)
	fewPorts[28+77] = 0
	// The first node's first port key names a port the file lacks.
	lostPort := append([]byte{}, b...)
	binary.LittleEndian.PutUint64(lostPort[28+207:], 0xdead)
	cases := []struct {
		name, path string
		want       []string
	}{
		{"missing", filepath.Join(dir, "nosuch.cache"), []string{"nosuch.cache", "no such file"}},
		{"empty", write("empty.cache", nil), []string{"empty.cache", "truncated", "header"}},
		{"not a cache", write("text.cache", []byte(strings.Repeat("not a cache at all\n", 4))), []string{"text.cache", "magic number"}},
		{"bad magic", write("magic.cache", badMagic), []string{"magic.cache", "magic number"}},
		{"bad version", write("version.cache", badVersion), []string{"version.cache", "version 7"}},
		{"truncated", write("short.cache", b[:len(b)-50]), []string{"short.cache", "truncated", "port record"}},
		{"trailing bytes", write("long.cache", append(append([]byte{}, b...), 1, 2, 3)), []string{"long.cache", "3 bytes follow"}},
		{"port beyond the node's ports", write("ports.cache", fewPorts), []string{"ports.cache", "node record 1", "has 0 ports"}},
		{"port key without a record", write("lost.cache", lostPort), []string{"lost.cache", "node record 1", "0x000000000000dead", "has no port record"}},
	}
	for _, c := range cases {
		for _, cmd := range [][]string{{"discover"}, {"sweep"}, {"route", "n1", "n2"}} {
			args := append([]string{"fabric", cmd[0], "--load-cache", c.path}, cmd[1:]...)
			_, errOut, code := netloomOn(t, f, args...)
			if code != 1 {
				t.Errorf("%s, %s: exit status %d, want 1: %s", c.name, cmd[0], code, errOut)
			}
			for _, w := range c.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("%s, %s: %q does not say %q", c.name, cmd[0], strings.TrimSpace(errOut), w)
				}
			}
		}
	}

	// Stores: none there, and one that holds no topology yet.
	_, errOut, code := netloomOn(t, f, "fabric", "sweep", "--db", filepath.Join(dir, "nosuch.db"))
	if code != 1 || !strings.Contains(errOut, "nosuch.db") || !strings.Contains(errOut, "no such file") {
		t.Errorf("missing db: exit status %d: %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "nosuch.db")); err == nil {
		t.Errorf("a missing --db was created")
	}
	empty := write("empty.db", nil)
	_, errOut, code = netloomOn(t, f, "fabric", "route", "--db", empty, "n1", "n2")
	if code != 1 || !strings.Contains(errOut, "empty.db") || !strings.Contains(errOut, "no fabric topology stored") {
		t.Errorf("db without a topology: exit status %d: %s", code, errOut)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"fabric", "sweep", "--load-cache", good, "--db", empty}, "--load-cache and --db: choose one"},
		{[]string{"fabric", "discover", "--cache", filepath.Join(dir, "x.cache"), "--load-cache", good}, "--load-cache and --cache: choose one"},
		{[]string{"fabric", "discover", "--fabric", "sim:fat-tree:hosts=8", "--cache", filepath.Join(dir, "x.cache")}, "needs --fabric ib"},
	} {
		_, errOut, code := netloomOn(t, f, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit status %d, want 2 saying %q: %s", c.args, code, c.want, errOut)
		}
	}
	out, errOut, code := netloomOn(t, f, "fabric", "discover", "--cache", filepath.Join(dir, "nodir", "x.cache"))
	if code != 1 || !strings.Contains(errOut, filepath.Join(dir, "nodir")) {
		t.Errorf("cache in a missing folder: exit status %d: %s%s", code, out, errOut)
	}
}

// TestFabricDocsExamples runs, verbatim, every line of the shell examples
// in docs/cli.md's fabric sections on a live fabric, with netloom on PATH.
func TestFabricDocsExamples(t *testing.T) {
	f, _ := startFabric(t, 16, 8)
	doc, err := os.Open(filepath.Join("..", "..", "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer doc.Close()
	var lines []string
	inFabric, inSh := false, false
	sc := bufio.NewScanner(doc)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "## "):
			inFabric = strings.HasPrefix(l, "## `netloom fabric")
		case inFabric && l == "```sh":
			inSh = true
		case inSh && l == "```":
			inSh = false
		case inSh && strings.TrimSpace(l) != "" && !strings.HasPrefix(l, "#"):
			lines = append(lines, l)
		}
	}
	if len(lines) < 3 {
		t.Fatalf("found %d example lines in docs/cli.md's fabric sections", len(lines))
	}
	work := t.TempDir()
	for _, l := range lines {
		cmd := exec.Command("bash", "-c", l)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), append(f.Env(), "PATH="+filepath.Dir(netloomBin)+":"+os.Getenv("PATH"))...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("docs/cli.md example %q: %v\n%s", l, err, out)
		}
	}
}
