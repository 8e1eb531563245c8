package recordgen

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// root is the repository's root, from this package's folder.
const root = "../.."

// TestGeneratedFilesUpToDate fails when a committed generated file is not
// what the declaration generates (run make gen).
func TestGeneratedFilesUpToDate(t *testing.T) {
	stale, err := Write(root, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range stale {
		t.Errorf("%s differs from what %s generates: run make gen", p, Source)
	}
}

// TestParseRefuses checks that the generator names what it cannot
// generate rather than writing something wrong.
func TestParseRefuses(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(root, Source))
	if err != nil {
		t.Fatal(err)
	}
	for field, want := range map[string]string{
		"uint64 x = 40;":                    "x (field 40): no annotation",
		"uint64 x = 40; // @counter clamp":  "x (field 40): clamp and tolerant are for doubles",
		"string x = 40; // @ident":          "x (field 40): an identity field after frozen=33",
		"string x = 40; // @counter":        "x (field 40): a counter is a double, uint64, int64 or Traffic",
		"uint64 x = 40; // @gauge check=no": "x (field 40): check, clamp and tolerant are for counters",
		"uint64 x = 40; // @gauge colour=1": "x (field 40): unknown setting colour",
		"repeated uint64 x = 40; // @gauge": "x (field 40): type uint64: only scalars",
	} {
		_, err := Parse(strings.NewReader(addField(t, string(src), field)))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", field, err, want)
		}
	}
}

// addField puts a field at the end of message Process.
func addField(t *testing.T, src, field string) string {
	t.Helper()
	at := strings.Index(src, "message Process {")
	end := strings.Index(src[at:], "\n}\n")
	if at < 0 || end < 0 {
		t.Fatal("no message Process in the declaration")
	}
	return src[:at+end] + "\n  " + field + src[at+end:]
}

// run runs a command in dir, failing the test with its output.
func run(t *testing.T, dir string, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// copyTree copies the files under src (relative to root) into dst.
func copyTree(t *testing.T, dst, src string) {
	t.Helper()
	err := filepath.WalkDir(filepath.Join(root, src), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAddField adds a counter to a copy of the declaration, as a person
// would, and nothing else by hand: protoc-gen-go and this generator
// regenerate the code, and the copy's own code must then carry the field
// from a datagram as protobuf encodes it through the decoder, the
// tracker's checks and deltas, the store's rows, samples and rollups, the
// API's JSON and the load generator, and the web's types must name it.
func TestAddField(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the daemon's packages (about a minute)")
	}
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		t.Fatal("protoc is not installed (scripts/install-deps.sh installs it):", err)
	}
	tsc, err := filepath.Abs(filepath.Join(root, "web/node_modules/.bin/tsc"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tsc); err != nil {
		t.Fatal("the web's TypeScript is not installed (make web):", err)
	}
	dir := t.TempDir()
	for _, f := range []string{"go.mod", "go.sum"} {
		copyTree(t, dir, f)
	}
	copyTree(t, dir, "internal")
	copyTree(t, dir, "proto")
	copyTree(t, dir, "web/src/jobs")
	src, err := os.ReadFile(filepath.Join(root, Source))
	if err != nil {
		t.Fatal(err)
	}
	decl := addField(t, string(src),
		`uint64 rx_retries = 40;  // receives the transport retried @counter go=RxRetries unit=retries label="Receive retries" sample load="3 * elapsed"`)
	if err := os.WriteFile(filepath.Join(dir, Source), []byte(decl), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"GOFLAGS=-mod=mod -buildvcs=false", "GOWORK=off", "GOPROXY=off", "GOTOOLCHAIN=local"}
	run(t, dir, env, "go", "build", "-o", "bin/protoc-gen-go", "google.golang.org/protobuf/cmd/protoc-gen-go")
	run(t, dir, env, protoc, "-I", "proto", "--plugin=protoc-gen-go=bin/protoc-gen-go", "--go_out=.",
		"--go_opt=module=github.com/netloom/netloom", Source)
	stale, err := Write(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(stale) != 5 {
		t.Errorf("the new field changed %v, want all 5 generated files", stale)
	}
	for name, text := range map[string]string{"internal/ingest/addfield_test.go": ingestCheck, "internal/loadgen/addfield_test.go": loadgenCheck} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(t, dir, env, "go", "test", "-count=1", "-run", "^TestAddedField$", "./internal/ingest/", "./internal/loadgen/")
	run(t, dir, env, "go", "vet", "./internal/ingest/", "./internal/store/", "./internal/store/codec/", "./internal/loadgen/")
	ts, err := os.ReadFile(filepath.Join(dir, WebFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"  rx_retries: number;", `{ key: "rx_retries", label: "Receive retries", kind: "counter", unit: "retries" }`} {
		if !strings.Contains(string(ts), want) {
			t.Errorf("%s lacks %q", WebFile, want)
		}
	}
	// The web's types compile, and a ProcessView (api.ts) carries the field.
	check := "import type { ProcessView } from \"./api\";\nexport const n = (p: ProcessView): number => p.rx_retries;\n"
	if err := os.WriteFile(filepath.Join(dir, "web/src/jobs/addfield.ts"), []byte(check), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "web/src/api.ts"), []byte("export function get<T>(..._args: unknown[]): Promise<T> { throw new Error(); }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, filepath.Join(dir, "web/src/jobs"), nil, tsc, "--noEmit", "--strict", "--target", "es2022", "--module", "es2022",
		"--moduleResolution", "bundler", "addfield.ts")
}

// ingestCheck runs in the copy's internal/ingest, after the field is added.
const ingestCheck = `package ingest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/codec"
)

func TestAddedField(t *testing.T) {
	tr, sk, m, _ := newTracker(Options{})
	now := t0
	for seq, v := range []uint64{5, 12} {
		d := snapshot("af", 0, 1, uint64(seq), false)
		d.Process.RxRetries = v // encoded by proto.Marshal, decoded by Decode (add)
		if err := add(t, tr, d, now); err != nil {
			t.Fatal(err)
		}
		now = now.Add(5 * time.Second)
	}
	// The counter going backwards is refused by name.
	back := snapshot("af", 0, 1, 2, false)
	back.Process.RxRetries = 11
	if err := add(t, tr, back, now); reasonOf(err) != ReasonBackwards || !strings.Contains(err.Error(), "rx_retries") {
		t.Fatalf("backwards: %v", err)
	}
	if dropped(m, ReasonBackwards) != 1 {
		t.Fatal("the refusal was not counted")
	}
	// A snapshot without a process block keeps the last one's.
	keep := snapshot("af", 0, 1, 2, false)
	keep.Process = nil
	if err := add(t, tr, keep, now); err != nil {
		t.Fatal(err)
	}
	tr.Flush()
	j := tr.Publish(now).Jobs["af"]
	if j == nil {
		t.Fatal("no job")
	}
	var procs []store.Process
	j.EachProcess(func(p *store.Process) { procs = append(procs, *p) })
	if len(procs) != 1 {
		t.Fatalf("%d processes", len(procs))
	}
	p := procs[0]
	if p.RxRetries != 12 {
		t.Fatalf("process: rx_retries %d, want 12", p.RxRetries)
	}
	if len(sk.samples) != 2 || sk.samples[0].RxRetries != 7 || sk.samples[1].RxRetries != 0 {
		t.Fatalf("samples %+v, want deltas 7 and 0", sk.samples)
	}
	// The store's rows.
	row := codec.EncodeProcess(nil, &p)
	back2, err := codec.DecodeProcess(row)
	if err != nil || back2.RxRetries != 12 || back2.ProcessUsage != p.ProcessUsage {
		t.Fatalf("process row: %+v, %v", back2.ProcessUsage, err)
	}
	s := sk.samples[0]
	srow := codec.EncodeProcessSample(nil, &s)
	s2, err := codec.DecodeProcessSample(srow)
	if err != nil || s2.RxRetries != 7 {
		t.Fatalf("sample row: %+v, %v", s2, err)
	}
	var r codec.ProcessRollup
	r.AddRaw(1, &s)
	r.AddRaw(2, &s)
	r2, err := codec.DecodeProcessRollup(codec.EncodeProcessRollup(nil, &r), 2)
	if err != nil || r2.Sample("af", 0, time.Minute).RxRetries != 14 {
		t.Fatalf("rollup: %+v, %v", r2.Sample("af", 0, time.Minute), err)
	}
	var sum store.ProcessSample
	sum.AddUsage(&s)
	sum.AddUsage(&s)
	if sum.RxRetries != 14 {
		t.Fatalf("summed samples: %d", sum.RxRetries)
	}
	// The API's JSON of the rank.
	b, err := json.Marshal(ViewProcess(&back2))
	if err != nil || !strings.Contains(string(b), ` + "`" + `"rx_retries":12` + "`" + `) {
		t.Fatalf("JSON %s, %v", b, err)
	}
}
`

// loadgenCheck runs in the copy's internal/loadgen.
const loadgenCheck = `package loadgen

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/netloom/netloom/internal/ingest/agentpb"
)

func TestAddedField(t *testing.T) {
	var p agentpb.Process
	fillUsage(&p, 10)
	if p.RxRetries != 30 {
		t.Fatalf("load= value: %d, want 30", p.RxRetries)
	}
	want, err := proto.Marshal(&p)
	if err != nil {
		t.Fatal(err)
	}
	if got := appendProcessFields(nil, &p); !bytes.Equal(got, want) {
		t.Fatalf("encoded %x, proto.Marshal %x", got, want)
	}
}
`
