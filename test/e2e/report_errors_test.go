package e2e

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestReportBadRankFiles runs a real 4-rank Open MPI job with `netloom run
// --output`, then damages rank 1's profile file in each way a file goes
// bad (cut short, random bytes, empty, a length prefix beyond the file, a
// record then garbage, another rank's record, a text file) and checks
// `netloom report`'s standard error, exit status and --json word for word:
// the file, and what is wrong with it; the other ranks are reported all
// the same. With every file bad it exits 1 naming each. (Issue 29, item 8:
// it said `record 1: unexpected EOF` and `proto: : message size ...`.)
func TestReportBadRankFiles(t *testing.T) {
	buildAgent(t)
	m := impls(t)[0]
	needMPI(t, m)
	dir := t.TempDir()
	prog := compileSource(t, m, "ring.c", jobRing)
	prof := filepath.Join(dir, "prof")
	run := exec.Command(netloomBin, "run", "--quiet", "--output", prof, "--job-id", "ring29", "--daemon", "127.0.0.1:9", "--lib", m.lib, "--",
		m.launch, "--allow-run-as-root", "--oversubscribe", "-np", "4", prog)
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("netloom run: %v\n%s", err, out)
	}
	jobDir := filepath.Join(prof, "ring29")
	file := func(rank int) string { return filepath.Join(jobDir, fmt.Sprintf("rank-%d.pb", rank)) }
	read := func(rank int) []byte {
		b, err := os.ReadFile(file(rank))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	write := func(rank int, b []byte) {
		if err := os.WriteFile(file(rank), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	good, rank2 := read(1), read(2)
	length, p := binary.Uvarint(good)
	if p <= 0 || int(length) != len(good)-p {
		t.Fatalf("rank-1.pb: %d bytes, not one length-prefixed record (prefix %d, %d bytes)", len(good), length, p)
	}

	type reportJSON struct {
		Ranks     int      `json:"ranks"`
		Warnings  []string `json:"warnings"`
		Processes []struct {
			Rank int `json:"rank"`
		} `json:"processes"`
	}
	// report runs netloom report on the output folder, in text and JSON,
	// and checks both exit 0 and print these warnings, on standard error
	// and in the report, and the ranks reported.
	report := func(t *testing.T, warnings []string, ranks []int) {
		t.Helper()
		var wantErr strings.Builder
		for _, w := range warnings {
			fmt.Fprintf(&wantErr, "netloom report: warning: %s\n", w)
		}
		for _, asJSON := range []bool{false, true} {
			cmd := exec.Command(netloomBin, "report", prof)
			if asJSON {
				cmd.Args = append(cmd.Args, "--json")
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil || stderr.String() != wantErr.String() {
				t.Errorf("%s: %v; stderr:\n%s\nwant:\n%s", strings.Join(cmd.Args[1:], " "), err, stderr.String(), wantErr.String())
			}
			if !asJSON {
				for _, w := range warnings {
					if !strings.Contains(string(out), "\nwarning: "+w+"\n") {
						t.Errorf("the text report lacks the warning %q", w)
					}
				}
				continue
			}
			var rep reportJSON
			if err := json.Unmarshal(out, &rep); err != nil {
				t.Fatalf("report --json: %v\n%.500s", err, out)
			}
			var got []int
			for _, p := range rep.Processes {
				got = append(got, p.Rank)
			}
			if rep.Warnings == nil || !slices.Equal(rep.Warnings, warnings) || rep.Ranks != 4 || !slices.Equal(got, ranks) {
				t.Errorf("report --json: %d ranks, ranks %v reported (want %v), warnings:\n%q\nwant\n%q", rep.Ranks, got, ranks, rep.Warnings, warnings)
			}
		}
	}
	t.Run("good", func(t *testing.T) {
		report(t, []string{}, []int{0, 1, 2, 3})
	})

	random := make([]byte, 4096)
	r := rand.New(rand.NewPCG(29, 8))
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	beyond := append(binary.AppendUvarint(nil, 10*length), good[p:]...)
	const missing = "1 of 4 ranks have no profile: rank 1 (bad file)"
	for _, c := range []struct {
		name string
		data []byte
		want string // rank-1.pb's warning, after its name
		read bool   // rank 1 is reported all the same
	}{
		{"cut short", good[:len(good)/2], fmt.Sprintf("cut short: the record says %s bytes, %s are there", commas(length), commas(len(good)/2-p)), false},
		{"random bytes", random, "not a Netloom profile (the record is not a Datagram: field 1610 at byte 3, which a Datagram does not have)", false},
		{"zero-length", nil, "empty (0 bytes): the rank wrote no record", false},
		{"length prefix beyond the file", beyond, fmt.Sprintf("cut short: the record says %s bytes, %s are there", commas(10*length), commas(length)), false},
		{"a record, then garbage", append(slices.Clone(good), "garbage!!"...),
			fmt.Sprintf("garbage after record 1, at byte %s (bad length prefix: it says 103 bytes, the file holds 8 after it); record 1 was read", commas(len(good))), true},
		{"another rank's record", rank2, "holds rank 2's profile (job ring29), not rank 1's", false},
		{"a trace file", []byte("0 init\n0 compute 1e6\n0 send 1 1000\n"), "not a Netloom profile (bad length prefix: the record says 48 bytes, the file holds 34 after it)", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			write(1, c.data)
			defer write(1, good)
			warnings := []string{file(1) + ": " + c.want}
			ranks := []int{0, 1, 2, 3}
			if !c.read {
				warnings, ranks = append(warnings, missing), []int{0, 2, 3}
			}
			report(t, warnings, ranks)
		})
	}

	t.Run("no file readable", func(t *testing.T) {
		for rank := range 4 {
			b := read(rank)
			write(rank, b[:len(b)-1])
			defer write(rank, b)
		}
		cmd := exec.Command(netloomBin, "report", prof, "--json")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		want := fmt.Sprintf("netloom report: %s: no rank's profile could be read from its 4 rank-*.pb files:\n", jobDir)
		for rank := range 4 {
			b := read(rank)
			n, p := binary.Uvarint(b)
			want += fmt.Sprintf("  %s: cut short: the record says %s bytes, %s are there\n", file(rank), commas(n), commas(len(b)-p))
		}
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || len(out) != 0 || stderr.String() != want {
			t.Errorf("report --json of no readable file: %v, stdout %q, stderr:\n%s\nwant:\n%s", err, out, stderr.String(), want)
		}
	})
}

// commas writes n with a comma every three digits, as netloom's messages
// do: 5,321.
func commas[T int | uint64](n T) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
