package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// docBlock is one ```sh block of docs/cli.md: example command lines, run
// in order in one folder.
type docBlock struct {
	section string // the "## " heading above it
	lines   []string
}

// docExample is what running one documented line must give besides exit
// status 0. setup, when set, runs in the same shell right before the line
// (what the reader is assumed to have: a site's database is
// $NETLOOM_DOC_DB, the doc daemon's); probe right after it.
type docExample struct {
	setup, probe string
	check        func(t *testing.T, r docRun)
}

// docRun is what one documented line did.
type docRun struct {
	stdout, stderr, probe string
	dir                   string
}

func (r docRun) file(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, name))
	if err != nil {
		t.Fatalf("the example wrote no %s: %v", name, err)
	}
	return string(b)
}

func contains(t *testing.T, what, s string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, tailString(s, 40))
		}
	}
}

// cliDocFile reads docs/cli.md.
func cliDocFile(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// cliDocBlocks returns every ```sh block of docs/cli.md, comments and
// blank lines left out.
func cliDocBlocks(t *testing.T) []docBlock {
	t.Helper()
	var blocks []docBlock
	section, in := "intro", false
	sc := bufio.NewScanner(strings.NewReader(cliDocFile(t)))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case !in && strings.HasPrefix(l, "## "):
			section = strings.TrimPrefix(l, "## ")
		case !in && l == "```sh":
			in = true
			blocks = append(blocks, docBlock{section: section})
		case in && l == "```":
			in = false
		case in && strings.TrimSpace(l) != "" && !strings.HasPrefix(strings.TrimSpace(l), "#"):
			b := &blocks[len(blocks)-1]
			b.lines = append(b.lines, l)
		}
	}
	return blocks
}

// TestCLIDocsExamples runs every command line of docs/cli.md's shell
// examples verbatim with bash, netloom on PATH, each block in a folder of
// its own, and checks each line's exit status and output. The parts the
// examples talk to are real: an ibsim fabric with hosts n1..n16 for the
// fabric sections (the environment the doc names: umad2sim's LD_PRELOAD
// and IBSIM_SOCKNAME), a daemon whose agent address the ranks read from
// NETLOOM_DAEMON_FILE (as they read /run/netloom/agent-address), and ./app,
// an MPI program built for the MPI the block runs. Open MPI is told by its
// environment that root may run it and that 4 ranks may share 2 cores.
func TestCLIDocsExamples(t *testing.T) {
	blocks := cliDocBlocks(t)
	examples := cliDocExamples()
	documented := map[string]bool{}
	for _, b := range blocks {
		for _, l := range b.lines {
			documented[l] = true
			if _, ok := examples[l]; !ok {
				t.Errorf("docs/cli.md example %q (section %s) has no check in cli_docs_test.go: add one", l, b.section)
			}
		}
	}
	for l := range examples {
		if !documented[l] {
			t.Errorf("cli_docs_test.go checks %q, which docs/cli.md no longer shows", l)
		}
	}
	if len(documented) < 20 || t.Failed() {
		t.Fatalf("%d example lines in docs/cli.md", len(documented))
	}

	f, _ := startFabric(t, 16, 8)
	buildAgent(t)
	dir := t.TempDir()
	addrFile := filepath.Join(dir, "agent-address")
	d, _ := serve(t, dir, nil, "--fabric", "sim:fat-tree:hosts=8,radix=8", "--db", filepath.Join(dir, "netloom.db"),
		"--agent-listen", "127.0.0.1:0", "--agent-address-file", addrFile, "--job-timeout", "10s")
	env := append(os.Environ(),
		"PATH="+filepath.Dir(netloomBin)+":"+os.Getenv("PATH"),
		"NETLOOM_LIB_DIR="+filepath.Join(repoRoot(t), "bin", "lib"),
		"NETLOOM_DAEMON_FILE="+addrFile,
		"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", "OMPI_MCA_rmaps_base_oversubscribe=1",
		"MANPAGER=cat", "PAGER=cat", "MANWIDTH=100", "NETLOOM_DOC_DB="+filepath.Join(dir, "netloom.db"))

	for i, b := range blocks {
		t.Run(fmt.Sprintf("%d-%s", i+1, firstWords(b.section)), func(t *testing.T) {
			work := t.TempDir()
			env := env
			if strings.HasPrefix(b.section, "`netloom fabric") {
				env = append(env[:len(env):len(env)], f.Env()...)
			}
			text := strings.Join(b.lines, "\n")
			if strings.Contains(text, "./app") {
				cc := "mpicc"
				if strings.Contains(text, "mpich") {
					cc = "mpicc.mpich"
				}
				if _, err := exec.LookPath(cc); err != nil {
					t.Skipf("%s not installed", cc)
				}
				src := filepath.Join(work, "app.c")
				if err := os.WriteFile(src, []byte(jobRing), 0o644); err != nil {
					t.Fatal(err)
				}
				if out, err := exec.Command(cc, "-o", filepath.Join(work, "app"), src).CombinedOutput(); err != nil {
					t.Fatalf("%s: %v\n%s", cc, err, out)
				}
				os.Remove(src)
			}
			for _, l := range b.lines {
				ex := examples[l]
				if tool := strings.Fields(l)[0]; tool != "netloom" && tool != "echo" && tool != "source" {
					if _, err := exec.LookPath(tool); err != nil {
						t.Logf("%q: %s not installed, not run", l, tool)
						continue
					}
				}
				r := docRun{dir: work}
				script := l
				if ex.setup != "" {
					script = ex.setup + "\n" + script
				}
				if ex.probe != "" {
					script += "\necho '--- probe'\n" + ex.probe
				}
				cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", script)
				cmd.Dir, cmd.Env = work, env
				var out, errb bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &errb
				done := make(chan error, 1)
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				go func() { done <- cmd.Wait() }()
				var err error
				select {
				case err = <-done:
				case <-time.After(3 * time.Minute):
					_ = cmd.Process.Kill()
					err = errors.New("timed out")
				}
				r.stdout, r.stderr = out.String(), errb.String()
				if before, after, ok := strings.Cut(r.stdout, "--- probe\n"); ok {
					r.stdout, r.probe = before, after
				}
				if err != nil {
					t.Errorf("docs/cli.md example %q: %v\nstdout:\n%s\nstderr:\n%s", l, err, tailString(r.stdout, 20), tailString(r.stderr, 20))
					continue
				}
				if ex.check != nil {
					t.Run(firstWords(l), func(t *testing.T) {
						ex.check(t, r)
						if strings.Contains(l, "mpirun") && !t.Failed() {
							jobInDaemon(t, d, r.stderr, 4)
						}
					})
				}
			}
		})
	}
}

// jobInDaemon checks that the job netloom run announced on stderr reached
// the daemon with its ranks.
func jobInDaemon(t *testing.T, d *daemon, stderr string, ranks int) {
	t.Helper()
	m := regexp.MustCompile(`netloom: job (\S+),`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("netloom run did not name its job:\n%s", stderr)
	}
	d = d.in(t)
	d.waitFor(func() bool {
		var detail struct{ Job struct{ Ranks int } }
		return d.get("/api/v1/jobs/"+m[1], &detail) == 200 && detail.Job.Ranks == ranks
	}, fmt.Sprintf("job %s with %d ranks in the daemon", m[1], ranks))
}

func firstWords(s string) string {
	s = strings.NewReplacer("`", "", "/", "_").Replace(s)
	w := strings.Fields(s)
	if len(w) > 4 {
		w = w[:4]
	}
	return strings.Join(w, "_")
}

// cliDocExamples is what each documented line must do besides succeed.
func cliDocExamples() map[string]docExample {
	jsonOut := func(t *testing.T, s string, v any) {
		t.Helper()
		if err := json.Unmarshal([]byte(s), v); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, tailString(s, 20))
		}
	}
	return map[string]docExample{
		"netloom --help": {check: func(t *testing.T, r docRun) {
			contains(t, "netloom --help", r.stdout, "Usage:", "fabric", "completion", "man", "Exit status")
		}},
		"netloom fabric --help": {check: func(t *testing.T, r docRun) {
			contains(t, "netloom fabric --help", r.stdout, "discover", "sweep", "route")
		}},
		"netloom help fabric route": {check: func(t *testing.T, r docRun) {
			contains(t, "netloom help fabric route", r.stdout, "netloom fabric route SRC DST [flags]", "--load-cache")
		}},

		"source <(netloom completion bash)": {probe: "complete -p netloom", check: func(t *testing.T, r docRun) {
			contains(t, "complete -p netloom", r.probe, "-F __start_netloom netloom")
		}},
		"netloom completion zsh > _netloom": {check: func(t *testing.T, r docRun) {
			contains(t, "_netloom", r.file(t, "_netloom"), "#compdef netloom", "__complete")
			if zsh, err := exec.LookPath("zsh"); err == nil {
				if out, err := exec.Command(zsh, "-n", filepath.Join(r.dir, "_netloom")).CombinedOutput(); err != nil {
					t.Errorf("zsh -n _netloom: %v\n%s", err, out)
				}
			}
		}},
		"netloom completion fish > netloom.fish": {check: func(t *testing.T, r docRun) {
			contains(t, "netloom.fish", r.file(t, "netloom.fish"), "complete -c netloom", "__complete")
			if fish, err := exec.LookPath("fish"); err == nil {
				if out, err := exec.Command(fish, "-n", filepath.Join(r.dir, "netloom.fish")).CombinedOutput(); err != nil {
					t.Errorf("fish -n netloom.fish: %v\n%s", err, out)
				}
			}
		}},
		"netloom man man1": {check: func(t *testing.T, r docRun) {
			pages, _ := filepath.Glob(filepath.Join(r.dir, "man1", "netloom*.1"))
			if len(pages) < 20 {
				t.Errorf("%d man pages: %v", len(pages), pages)
			}
			contains(t, "netloom-report.1", r.file(t, "man1/netloom-report.1"), `.TH "NETLOOM-REPORT" "1"`, "--csv")
		}},
		"man -l man1/netloom-fabric-route.1": {check: func(t *testing.T, r docRun) {
			contains(t, "the rendered page", r.stdout, "NETLOOM-FABRIC-ROUTE(1)", "SYNOPSIS", "netloom fabric route SRC DST", "ibtracert")
		}},

		"netloom user add admin --admin": {check: func(t *testing.T, r docRun) {
			contains(t, "user add", r.stdout, "admin: admin (password below) in netloom.htpasswd", "password: ")
		}},
		"echo 'correct horse battery staple' | netloom user add alice --password-stdin": {check: func(t *testing.T, r docRun) {
			contains(t, "user add", r.stdout, "alice: user (password set)")
			contains(t, "netloom.htpasswd", r.file(t, "netloom.htpasswd"), "alice:$2")
		}},
		"netloom token add admin --label scripts": {check: func(t *testing.T, r docRun) {
			if tok := strings.TrimSpace(r.stdout); len(tok) < 20 || strings.ContainsAny(tok, " \n") {
				t.Errorf("token add printed %q, want one token", r.stdout)
			}
			contains(t, "token add's stderr", r.stderr, "for admin (shown only now)")
		}},
		"netloom user list": {check: func(t *testing.T, r docRun) {
			if !regexp.MustCompile(`(?m)^admin\s+admin\s+1$`).MatchString(r.stdout) || !regexp.MustCompile(`(?m)^alice\s+user\s+0$`).MatchString(r.stdout) {
				t.Errorf("user list:\n%s", r.stdout)
			}
		}},
		"netloom token list": {check: func(t *testing.T, r docRun) {
			if !regexp.MustCompile(`(?m)^\S+\s+admin\s+\d{4}-\d\d-\d\d \d\d:\d\d\s+scripts$`).MatchString(r.stdout) {
				t.Errorf("token list:\n%s", r.stdout)
			}
		}},
		"netloom user del alice": {check: func(t *testing.T, r docRun) {
			contains(t, "user del", r.stdout, "alice: deleted")
			if strings.Contains(r.file(t, "netloom.htpasswd"), "alice:") {
				t.Error("alice is still in netloom.htpasswd")
			}
		}},

		"netloom fabric discover --cache fabric.cache": {check: func(t *testing.T, r docRun) {
			contains(t, "discover", r.stdout, "switches, 16 channel adapters", `"n16 HCA-1"`)
			if len(r.file(t, "fabric.cache")) == 0 {
				t.Error("fabric.cache is empty")
			}
		}},
		"ibnetdiscover --load-cache fabric.cache": {check: func(t *testing.T, r docRun) {
			contains(t, "ibnetdiscover", r.stdout, "Switch", `"n1 HCA-1"`, `"n16 HCA-1"`)
		}},
		"netloom fabric sweep --load-cache fabric.cache --ca-ports --all-ports": {check: func(t *testing.T, r docRun) {
			if !regexp.MustCompile(`^swept \d+ ports \(0 failed\)`).MatchString(r.stdout) {
				t.Errorf("sweep: %s", r.stdout)
			}
		}},
		"netloom fabric sweep --load-cache fabric.cache --ca-ports --all-ports --port-counters-only": {check: func(t *testing.T, r docRun) {
			if !regexp.MustCompile(`^swept \d+ ports \(0 failed\)`).MatchString(r.stdout) {
				t.Errorf("sweep, PortCounters only: %s", r.stdout)
			}
		}},
		"ibqueryerrors --load-cache fabric.cache": {},

		"netloom store copy --from sqlite:site.db --to sqlite:copy.db": {
			// a consistent copy of the running doc daemon's store, as a site's
			setup: `sqlite3 "$NETLOOM_DOC_DB" ".backup site.db"`,
			probe: `sqlite3 site.db "SELECT COUNT(*) FROM topology_versions"; sqlite3 copy.db "SELECT COUNT(*) FROM topology_versions"`,
			check: func(t *testing.T, r docRun) {
				contains(t, "store copy", r.stderr+r.stdout, "rows in 12 tables")
				if n := strings.Fields(r.probe); len(n) != 2 || n[0] != n[1] || n[0] == "0" {
					t.Errorf("topology versions in the site's store and the copy: %q", r.probe)
				}
			}},
		"netloom fabric route --load-cache fabric.cache n1 n8": {check: func(t *testing.T, r docRun) {
			contains(t, "route", r.stdout, `From ca`, `"n1 HCA-1"`, `"n8 HCA-1"`)
		}},
		"netloom fabric route n1 n8": {check: func(t *testing.T, r docRun) {
			contains(t, "route", r.stdout, `From ca`, `"n1 HCA-1"`, `"n8 HCA-1"`)
		}},
		"netloom fabric route n1 n8 --json": {check: func(t *testing.T, r docRun) {
			var rt struct {
				SrcLID int `json:"src_lid"`
				Hops   []struct{ Description string }
				To     struct{ Description string }
			}
			jsonOut(t, r.stdout, &rt)
			if rt.SrcLID == 0 || len(rt.Hops) < 2 || rt.Hops[0].Description != "n1 HCA-1" || rt.To.Description != "n8 HCA-1" {
				t.Errorf("route JSON: %+v", rt)
			}
		}},

		"netloom topo gen fat-tree --hosts 648 -o fabric.net": {check: func(t *testing.T, r docRun) {
			contains(t, "topo gen's stderr", r.stderr, "wrote fabric.net: 648 hosts")
			contains(t, "fabric.net", r.file(t, "fabric.net"), `"n648 HCA-1"`, "Switch")
		}},
		"netloom topo gen fat-tree --hosts 16 --radix 8": {check: func(t *testing.T, r docRun) {
			contains(t, "the net file", r.stdout, `"n1 HCA-1"`, `"n16 HCA-1"`, "Switch\t8 ")
		}},

		"netloom run -- mpirun -np 4 ./app": {check: func(t *testing.T, r docRun) {
			contains(t, "run's stderr", r.stderr, "netloom: job ", "ompi agent")
		}},
		"netloom run --output prof --interval 1s -- mpiexec.mpich -n 4 ./app": {check: func(t *testing.T, r docRun) {
			contains(t, "run's stderr", r.stderr, "mpich agent")
			files, _ := filepath.Glob(filepath.Join(r.dir, "prof", "*", "rank-*.pb"))
			if len(files) != 4 {
				t.Errorf("offline profile files: %v, want 4", files)
			}
		}},
		"netloom run --output prof -- mpirun -np 4 ./app": {check: func(t *testing.T, r docRun) {
			files, _ := filepath.Glob(filepath.Join(r.dir, "prof", "*", "rank-*.pb"))
			if len(files) != 4 {
				t.Errorf("offline profile files: %v, want 4", files)
			}
		}},
		"netloom place prof --fabric sim:fat-tree:hosts=16,radix=8 --nodes n1,n5 --cores-per-node 2 -o rankfile": {check: func(t *testing.T, r docRun) {
			contains(t, "place", r.stdout, "4 ranks on 2 nodes (2 cores each)", "advice", "round-robin", "wrote rankfile (openmpi) to rankfile")
			if !regexp.MustCompile(`^(rank [0-3]=n[15] slot=[01]\n){4}$`).MatchString(r.file(t, "rankfile")) {
				t.Errorf("rankfile:\n%s", r.file(t, "rankfile"))
			}
		}},
		"netloom place prof --fabric sim:fat-tree:hosts=16,radix=8 --nodes n[1-4] --format slurm --json > advice.json": {check: func(t *testing.T, r docRun) {
			var a struct {
				Ranks  int
				Format string
				Advice struct {
					ByteHops uint64 `json:"byte_hops"`
				}
				Mapping []struct{ Node string }
			}
			jsonOut(t, r.file(t, "advice.json"), &a)
			if a.Ranks != 4 || a.Format != "slurm" || len(a.Mapping) != 4 {
				t.Errorf("place JSON: %+v", a)
			}
		}},
		"netloom run --trace --output traced -- mpirun -np 4 ./app": {check: func(t *testing.T, r docRun) {
			traces, _ := filepath.Glob(filepath.Join(r.dir, "traced", "*", "rank-*.ti.gz"))
			if len(traces) != 4 {
				t.Errorf("replay traces: %v, want 4", traces)
			}
		}},
		"netloom model calibrate -o calib.json": {check: func(t *testing.T, r docRun) {
			var c struct {
				Latency   float64 `json:"latency_seconds"`
				Bandwidth float64 `json:"bandwidth_bytes_per_second"`
			}
			jsonOut(t, r.file(t, "calib.json"), &c)
			if c.Latency <= 0 || c.Latency > 1e-3 || c.Bandwidth < 1e7 {
				t.Errorf("calibration %+v: want a latency under 1 ms and a bandwidth over 10 MB/s", c)
			}
			contains(t, "calibrate's stderr", r.stderr, "latency", "bandwidth")
		}},
		"netloom model traced --platform calibrated --calibration calib.json": {check: func(t *testing.T, r docRun) {
			contains(t, "model", r.stdout, "4 ranks", "platform: calibrated", "measured", "as ran", "perfect network", "x2 bandwidth", "vs as ran",
				"point-to-point", "MPI_Bcast", "calibration: the replay as it ran takes")
			// The what-ifs' column is their change against the replay as ran,
			// and the calibration line is the as-ran replay against the
			// measured run, as the table's own figures give them.
			var measured, asRan float64
			for _, l := range strings.Split(r.stdout, "\n") {
				f := strings.Fields(l)
				switch {
				case len(f) >= 3 && f[0] == "measured":
					measured, _ = strconv.ParseFloat(f[1], 64)
				case len(f) >= 3 && f[0] == "as" && f[1] == "ran":
					asRan, _ = strconv.ParseFloat(f[2], 64)
				case len(f) >= 5 && f[0] == "perfect" && f[1] == "network":
					p, _ := strconv.ParseFloat(f[2], 64)
					got, err := strconv.ParseFloat(strings.TrimSuffix(f[4], "%"), 64)
					// the table's seconds are rounded to 0.1 ms, its percent to 0.1
					if want := 100 * (p - asRan) / asRan; err != nil || math.Abs(got-want) > 0.05+1e-2/asRan {
						t.Errorf("perfect network's change %s, want %.2f%% against the replay as ran (%.4f s)", f[4], want, asRan)
					}
				}
			}
			if want := fmt.Sprintf("takes %.1f%% of the measured elapsed time (%.4f s against %.4f s)", 100*asRan/measured, asRan, measured); !strings.Contains(r.stdout, want) {
				t.Errorf("model's calibration line: want %q in\n%s", want, r.stdout)
			}
		}},
		"netloom model traced --network perfect --network bandwidth=25GB/s,latency=600ns --json > model.json": {check: func(t *testing.T, r docRun) {
			var m struct {
				Ranks int
				AsRan struct {
					Elapsed float64 `json:"elapsed_seconds"`
				} `json:"as_ran"`
				WhatIfs []struct {
					Scenario string
					Elapsed  float64            `json:"elapsed_seconds"`
					VsAsRan  *float64           `json:"vs_as_ran_pct"`
					Groups   map[string]float64 `json:"function_groups"`
				} `json:"what_ifs"`
				Measured struct {
					Groups map[string]float64 `json:"function_groups"`
				}
			}
			jsonOut(t, r.file(t, "model.json"), &m)
			for _, w := range m.WhatIfs {
				if w.VsAsRan == nil || math.Abs(*w.VsAsRan-100*(w.Elapsed-m.AsRan.Elapsed)/m.AsRan.Elapsed) > 1e-9 {
					t.Errorf("%s: vs_as_ran_pct %v, want its change against the replay as ran", w.Scenario, w.VsAsRan)
				}
			}
			if m.Measured.Groups["point-to-point"] <= 0 || len(m.WhatIfs) > 0 && m.WhatIfs[0].Groups["point-to-point"] <= 0 {
				t.Errorf("function groups: measured %v, what-ifs %+v: want point-to-point on both sides", m.Measured.Groups, m.WhatIfs)
			}
			if m.Ranks != 4 || m.AsRan.Elapsed <= 0 || len(m.WhatIfs) != 2 || m.WhatIfs[0].Scenario != "perfect network" ||
				m.WhatIfs[1].Scenario != "bandwidth=25GB/s,latency=600ns" || m.WhatIfs[0].Elapsed > m.AsRan.Elapsed {
				t.Errorf("model JSON: %+v", m)
			}
		}},
		"netloom report prof": {check: func(t *testing.T, r docRun) {
			contains(t, "report", r.stdout, "Netloom report: job", "4 ranks", "MPI_Sendrecv", "MPI_Bcast")
		}},
		"netloom report prof --csv prof-csv --json > prof.json": {check: func(t *testing.T, r docRun) {
			var rep struct {
				Ranks  int
				Matrix struct{ P2P struct{ Bytes [][]uint64 } }
			}
			jsonOut(t, r.file(t, "prof.json"), &rep)
			if rep.Ranks != 4 || len(rep.Matrix.P2P.Bytes) != 4 || rep.Matrix.P2P.Bytes[0][1] != 10000 {
				t.Errorf("report JSON: %d ranks, p2p bytes %v; want 4 and 10 x 1000 bytes from rank 0 to 1", rep.Ranks, rep.Matrix.P2P.Bytes)
			}
			contains(t, "ranks.csv", r.file(t, "prof-csv/ranks.csv"), "rank")
			contains(t, "report's stderr", r.stderr, "CSV files to prof-csv")
		}},
	}
}

// TestCLIDocsCommandLines checks every command line docs/cli.md shows in
// running text and headings (`netloom ...` code spans, synopses such as
// "netloom fabric route [--json] ... SRC DST" included): each names
// commands that exist, and only options those commands have.
func TestCLIDocsCommandLines(t *testing.T) {
	doc := cliDocFile(t)
	// Running text only: the ```sh blocks run in TestCLIDocsExamples.
	var text strings.Builder
	in := false
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(l, "```") {
			in = !in
			continue
		}
		if !in {
			text.WriteString(l + "\n")
		}
	}
	spans := regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(text.String(), -1)
	help := map[string]string{}
	helpOf := func(path []string) string {
		key := strings.Join(path, " ")
		if h, ok := help[key]; ok {
			return h
		}
		out, err := exec.Command(netloomBin, append(append([]string{}, path...), "--help")...).Output()
		if err != nil {
			t.Fatalf("netloom %s --help: %v", key, err)
		}
		help[key] = string(out)
		return help[key]
	}
	subcommands := func(path []string) map[string]bool {
		subs := map[string]bool{}
		_, list, ok := strings.Cut(helpOf(path), "Available Commands:\n")
		if !ok {
			return subs
		}
		for _, l := range strings.Split(list, "\n") {
			if strings.TrimSpace(l) == "" {
				break
			}
			subs[strings.Fields(l)[0]] = true
		}
		return subs
	}
	word := regexp.MustCompile(`^[a-z][a-z0-9-]*(\|[a-z][a-z0-9-]*)*$`)
	option := regexp.MustCompile(`(?:^|[\s\[|(])(--[a-z][a-z0-9-]*|-[a-zA-Z])\b`)
	n := 0
	for _, m := range spans {
		line := strings.Join(strings.Fields(m[1]), " ")
		if line != "netloom" && !strings.HasPrefix(line, "netloom ") {
			continue
		}
		n++
		// The command paths: alternatives (fabric discover|sweep|route) give several.
		paths := [][]string{{}}
		words := strings.Fields(line)[1:]
		for len(words) > 0 && word.MatchString(words[0]) {
			var next [][]string
			for _, p := range paths {
				subs := subcommands(p)
				if len(subs) == 0 {
					continue
				}
				for _, alt := range strings.Split(words[0], "|") {
					if !subs[alt] {
						t.Errorf("docs/cli.md `%s`: netloom %s has no command %q", line, strings.Join(p, " "), alt)
						continue
					}
					next = append(next, append(append([]string{}, p...), alt))
				}
			}
			if next == nil {
				break // an argument
			}
			paths, words = next, words[1:]
		}
		opts, _, _ := strings.Cut(strings.Join(words, " "), " -- ")
		for _, o := range option.FindAllStringSubmatch(opts, -1) {
			found := false
			for _, p := range paths {
				h := helpOf(p)
				if strings.HasPrefix(o[1], "--") {
					found = found || regexp.MustCompile(`(?m)^\s+(-[a-zA-Z], )?`+regexp.QuoteMeta(o[1])+`\b`).MatchString(h)
				} else {
					found = found || regexp.MustCompile(`(?m)^\s+`+regexp.QuoteMeta(o[1])+`, --`).MatchString(h)
				}
			}
			if !found {
				t.Errorf("docs/cli.md `%s`: %s is no option of netloom %v", line, o[1], paths)
			}
		}
	}
	if n < 30 {
		t.Errorf("found %d netloom command lines in docs/cli.md's text", n)
	}
}

// TestCLIOptionsAfterArguments runs the two command lines on real
// parts: netloom report DIR --json on a real job's offline profile and
// netloom fabric route A B --json on an ibsim fabric; and the exit
// statuses of a usage error (2) and a runtime error (1) from the binary.
func TestCLIOptionsAfterArguments(t *testing.T) {
	f, _ := startFabric(t, 16, 8)
	out, errOut, code := netloomOn(t, f, "fabric", "route", "n1", "n16", "--json")
	var rt struct{ To struct{ Description string } }
	if code != 0 || json.Unmarshal([]byte(out), &rt) != nil || rt.To.Description != "n16 HCA-1" {
		t.Errorf("fabric route n1 n16 --json: exit status %d: %s%s", code, out, errOut)
	}
	_, errOut, code = netloomOn(t, f, "fabric", "route", "n1", "--json")
	if code != 2 || !strings.Contains(errOut, "missing DST") {
		t.Errorf("fabric route n1 --json: exit status %d: %s; want 2 and missing DST", code, errOut)
	}
	_, errOut, code = netloomOn(t, f, "fabric", "route", "n1", "n99", "--json")
	if code != 1 || !strings.Contains(errOut, `"n99"`) {
		t.Errorf("fabric route n1 n99 --json: exit status %d: %s; want 1 naming n99", code, errOut)
	}

	buildAgent(t)
	m := impls(t)[0]
	needMPI(t, m)
	dir := t.TempDir()
	prog := compileSource(t, m, "ring.c", jobRing)
	prof := filepath.Join(dir, "prof")
	cmd := exec.Command(netloomBin, "run", "--quiet", "--output", prof, "--daemon", "127.0.0.1:9", "--lib", m.lib, "--",
		m.launch, "--allow-run-as-root", "--oversubscribe", "-np", "4", prog)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("netloom run: %v\n%s", err, out)
	}
	jobs, _ := filepath.Glob(filepath.Join(prof, "*"))
	if len(jobs) != 1 {
		t.Fatalf("job folders: %v", jobs)
	}
	for _, args := range [][]string{{"report", jobs[0], "--json"}, {"report", "--json", jobs[0]}, {"report", prof, "--csv", filepath.Join(dir, "csv"), "--json"}} {
		out, err := exec.Command(netloomBin, args...).Output()
		var rep struct{ Ranks int }
		if err != nil || json.Unmarshal(out, &rep) != nil || rep.Ranks != 4 {
			t.Errorf("netloom %s: %v, %d ranks\n%.300s", strings.Join(args, " "), err, rep.Ranks, out)
		}
	}
}
