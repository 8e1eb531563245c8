package ingest

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The path of a datagram through ingest reads one way: from the socket
// (Listener.handle) through decoding and verification, and from the
// aggregator (Tracker.AddItem) through reassembly, validation, deltas,
// lifecycle and publishing, no file calls a function of a file that
// (directly or through others) called it. Issue 40 counted 13 crossings
// back and forth between decode_rows.go and decode_msg.go.

// datagramPath are the functions where a datagram enters the package's
// code: the listener's, and the tracker's (an aggregator's goroutine
// takes the listener's queue into AddItem; Tick and Publish are the
// tracker's timers).
var datagramPath = []string{"(*Listener).handle", "(*Tracker).AddItem", "(*Tracker).Tick", "(*Tracker).Publish"}

func TestDatagramPathOneWay(t *testing.T) {
	g, err := loadCallGraph(".", nil)
	if err != nil {
		t.Fatal(err)
	}
	if back := g.backAndForth(datagramPath...); len(back) > 0 {
		t.Errorf("files on the datagram's path call back into files that called them:\n%s", strings.Join(back, "\n"))
	}
	// Nothing above is vacuous: the path crosses the files it is meant to.
	files := g.filesFrom(datagramPath...)
	for _, f := range []string{"listener.go", "decode.go", "wire.go", "decode_msg.go", "decode_rows.go"} {
		if !slices.Contains(files, f) {
			t.Errorf("the datagram's path does not reach %s (reaches %v)", f, files)
		}
	}
}

// TestPackageOneWay extends the check to every function of the package:
// the offline profile's path (ReadProfileFS, through the same decoding
// and tracker), the report's, the aggregations' and the rest.
func TestPackageOneWay(t *testing.T) {
	g, err := loadCallGraph(".", nil)
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for f := range g.file {
		all = append(all, f)
	}
	if back := g.backAndForth(all...); len(back) > 0 {
		t.Errorf("files call back into files that called them:\n%s", strings.Join(back, "\n"))
	}
}

// TestCallGraphFindsBackAndForth shows that the check fails on a package
// whose files call each other back and forth, as decode_rows.go and
// decode_msg.go did.
func TestCallGraphFindsBackAndForth(t *testing.T) {
	src := map[string]string{
		"rows.go": `package p
type D struct{ n int }
func unmarshal(b []byte) *D { d := new(D); d.field(b); return d }
func tag(b []byte) int { return len(b) }`,
		"msg.go": `package p
func (d *D) field(b []byte) { d.n = tag(b) }`,
		"wire.go": `package p
func varint(b []byte) int { return len(b) }`,
	}
	g, err := loadCallGraph("", src)
	if err != nil {
		t.Fatal(err)
	}
	back := g.backAndForth("unmarshal")
	if len(back) == 0 {
		t.Fatal("rows.go -> msg.go -> rows.go not found")
	}
	t.Logf("found, as it should:\n%s", strings.Join(back, "\n"))
	src["msg.go"] = `package p
func (d *D) field(b []byte) { d.n = varint(b) }`
	g, err = loadCallGraph("", src)
	if err != nil {
		t.Fatal(err)
	}
	if back := g.backAndForth("unmarshal"); len(back) > 0 {
		t.Errorf("one-way files reported: %v", back)
	}
}

// callGraph is the package's functions, the file each is declared in,
// and what each calls (or takes as a value) of the package's own.
type callGraph struct {
	file  map[string]string              // function -> file
	calls map[string]map[string]struct{} // function -> functions
}

// loadCallGraph type-checks the package in dir (its files for this
// platform, tests excluded), or the sources in src (file -> text).
func loadCallGraph(dir string, src map[string]string) (*callGraph, error) {
	fset := token.NewFileSet()
	var files []*ast.File
	imp := types.Importer(importer.Default())
	if src == nil {
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			return nil, err
		}
		for _, name := range pkg.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
			if err != nil {
				return nil, err
			}
			files = append(files, f)
		}
		exports, err := exportData(dir)
		if err != nil {
			return nil, err
		}
		imp = importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
			f, ok := exports[path]
			if !ok {
				return nil, fmt.Errorf("no export data for %s", path)
			}
			return os.Open(f)
		})
	} else {
		for name, s := range src {
			f, err := parser.ParseFile(fset, name, s, 0)
			if err != nil {
				return nil, err
			}
			files = append(files, f)
		}
	}
	info := &types.Info{Defs: map[*ast.Ident]types.Object{}, Uses: map[*ast.Ident]types.Object{}}
	pkg, err := (&types.Config{Importer: imp}).Check("p", fset, files, info)
	if err != nil {
		return nil, err
	}
	g := &callGraph{file: map[string]string{}, calls: map[string]map[string]struct{}{}}
	name := func(f *types.Func) string {
		if r := f.Type().(*types.Signature).Recv(); r != nil {
			return "(" + types.TypeString(r.Type(), types.RelativeTo(pkg)) + ")." + f.Name()
		}
		return f.Name()
	}
	for _, f := range files {
		file := filepath.Base(fset.Position(f.Pos()).Filename)
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			caller := name(info.Defs[fd.Name].(*types.Func))
			g.file[caller] = file
			calls := map[string]struct{}{}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				id, ok := n.(*ast.Ident)
				if !ok {
					return true
				}
				if fn, ok := info.Uses[id].(*types.Func); ok && fn.Pkg() == pkg {
					if sig := fn.Type().(*types.Signature); sig.Recv() != nil && types.IsInterface(sig.Recv().Type()) {
						return true // an interface's method: no body of its own
					}
					calls[name(fn.Origin())] = struct{}{}
				}
				return true
			})
			g.calls[caller] = calls
		}
	}
	return g, nil
}

// exportData maps each package that dir's package depends on to its
// compiled export data (built by go list, from the build cache).
func exportData(dir string) (map[string]string, error) {
	cmd := exec.Command("go", "list", "-deps", "-export", "-f", "{{if .Export}}{{.ImportPath}}\t{{.Export}}{{end}}", ".")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v: %s", err, stderr.String())
	}
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if path, file, ok := strings.Cut(sc.Text(), "\t"); ok {
			m[path] = file
		}
	}
	return m, sc.Err()
}

// reach returns the functions reachable from the entries.
func (g *callGraph) reach(entries ...string) map[string]bool {
	seen := map[string]bool{}
	var visit func(string)
	visit = func(f string) {
		if seen[f] {
			return
		}
		seen[f] = true
		for c := range g.calls[f] {
			visit(c)
		}
	}
	for _, e := range entries {
		if _, ok := g.file[e]; !ok {
			panic("no function " + e)
		}
		visit(e)
	}
	return seen
}

// filesFrom lists the files of the functions reachable from the entries.
func (g *callGraph) filesFrom(entries ...string) []string {
	var files []string
	for f := range g.reach(entries...) {
		if !slices.Contains(files, g.file[f]) {
			files = append(files, g.file[f])
		}
	}
	slices.Sort(files)
	return files
}

// backAndForth returns, for every cycle between files along the calls
// reachable from the entries, the calls that make it: "a.go -> b.go:
// f calls g", each call that crosses from one file of a cycle to another.
// A function calling one of its own file is no crossing.
func (g *callGraph) backAndForth(entries ...string) []string {
	reach := g.reach(entries...)
	edges := map[string]map[string][]string{} // file -> file -> calls
	for f := range reach {
		for c := range g.calls[f] {
			a, b := g.file[f], g.file[c]
			if a == b {
				continue
			}
			if edges[a] == nil {
				edges[a] = map[string][]string{}
			}
			edges[a][b] = append(edges[a][b], f+" calls "+c)
		}
	}
	// b reaches a through the file graph?
	reaches := func(from, to string) bool {
		seen := map[string]bool{}
		var walk func(string) bool
		walk = func(x string) bool {
			if x == to {
				return true
			}
			if seen[x] {
				return false
			}
			seen[x] = true
			for y := range edges[x] {
				if walk(y) {
					return true
				}
			}
			return false
		}
		return walk(from)
	}
	var out []string
	for a, bs := range edges {
		for b, calls := range bs {
			if reaches(b, a) {
				slices.Sort(calls)
				out = append(out, fmt.Sprintf("%s -> %s: %s", a, b, strings.Join(calls, "; ")))
			}
		}
	}
	slices.Sort(out)
	return out
}
