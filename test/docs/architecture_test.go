// Package docs checks the repository's documents against the tree they
// describe.
package docs

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// root is the repository's root, two levels above this package.
var root = func() string {
	r, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		panic(err)
	}
	return r
}()

// roots are the top-level folders a path the architecture document names
// starts with.
var roots = []string{"agent/", "bench/", "cmd/", "deploy/", "docs/", "internal/", "proto/", "scripts/", "test/", "web/"}

// TestArchitecture checks docs/architecture.md against the tree: every path
// it names in code spans exists, every file name it names alone exists
// somewhere in the repository, every link leads to a file of it; and it
// names every Go package under internal/ and cmd/, every source file of the
// agent (agent/src, agent/nccl) and every folder of web/src.
func TestArchitecture(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := repoFiles(t)
	names := map[string]bool{}
	for _, f := range files {
		names[filepath.Base(f)] = true
	}
	spans := codeSpans(string(doc))
	named := map[string]bool{}
	for _, s := range spans {
		named[s] = true
	}

	// What it names exists.
	checked := 0
	for _, s := range spans {
		p := strings.TrimSuffix(s, "/")
		switch {
		case hasRoot(p):
			checked++
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				t.Errorf("docs/architecture.md names %s, which does not exist", s)
			}
		case sourceFile.MatchString(p):
			checked++
			if !names[p] {
				t.Errorf("docs/architecture.md names %s, which is no file of the repository", s)
			}
		}
	}
	for _, l := range links(string(doc)) {
		checked++
		if err := linkTarget(filepath.Join(root, "docs"), l); err != nil {
			t.Errorf("docs/architecture.md: %v", err)
		}
	}
	if checked < 100 {
		t.Errorf("docs/architecture.md: only %d paths, file names and links checked; is the parsing broken?", checked)
	}

	// Everything it must name, it names.
	var must []string
	for _, f := range files {
		dir := filepath.Dir(f)
		switch {
		case strings.HasSuffix(f, ".go") && (strings.HasPrefix(f, "internal/") || strings.HasPrefix(f, "cmd/")) && !strings.Contains(f, "/testdata/"):
			must = append(must, dir)
		case (dir == "agent/src" || dir == "agent/nccl") && (strings.HasSuffix(f, ".c") || strings.HasSuffix(f, ".h")):
			must = append(must, f)
		case strings.HasPrefix(f, "web/src/") && strings.HasSuffix(f, ".ts"):
			must = append(must, dir)
		}
	}
	slices.Sort(must)
	must = slices.Compact(must)
	for _, want := range []string{"internal/fabric/eth", "internal/health", "cmd/netloom", "agent/src/core.c", "agent/nccl/plugin.c", "web/src/jobs/panels"} {
		if !slices.Contains(must, want) {
			t.Fatalf("the tree as read has no %s: %d paths found (%v…)", want, len(must), must[:min(len(must), 5)])
		}
	}
	for _, m := range must {
		if !named[m] {
			t.Errorf("docs/architecture.md does not name %s (as `%s`)", m, m)
		}
	}
}

// TestNothingPointsOutside checks that no file of the repository points
// outside it: none names the workspace around the checkout (the sibling
// folder of shared notes, or the machine's work folder), and every relative
// link of a Markdown file leads to a file inside the repository.
func TestNothingPointsOutside(t *testing.T) {
	// Spelled in two parts so that this file does not match itself.
	outside := regexp.MustCompile(regexp.QuoteMeta("../"+"shared") + "|" + regexp.QuoteMeta("/"+"work/"))
	read := 0
	for _, f := range repoFiles(t) {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Error(err)
			continue
		}
		if bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0 {
			continue // binary
		}
		read++
		for i, line := range strings.Split(string(b), "\n") {
			if m := outside.FindString(line); m != "" {
				t.Errorf("%s:%d points outside the repository (%q): %s", f, i+1, m, strings.TrimSpace(line))
			}
		}
		if strings.HasSuffix(f, ".md") {
			for _, l := range links(string(b)) {
				if err := linkTarget(filepath.Join(root, filepath.Dir(f)), l); err != nil {
					t.Errorf("%s: %v", f, err)
				}
			}
		}
	}
	if read < 300 {
		t.Errorf("only %d text files read; is the file list broken?", read)
	}
}

// TestChecksFail runs the checks' parts on made-up text, so that a check
// that could not fail is caught.
func TestChecksFail(t *testing.T) {
	text := "a `internal/none` b `x.go` `agent/src/core.c` ``two `ticks` `` and\n```\n`internal/fenced`\n```\n[l](../../outside.md) [m](architecture.md#x) [w](https://example.org/a.md)"
	got := codeSpans(text)
	want := []string{"internal/none", "x.go", "agent/src/core.c", "two `ticks`"}
	if !slices.Equal(got, want) {
		t.Errorf("codeSpans = %q, want %q", got, want)
	}
	ls := links(text)
	if !slices.Equal(ls, []string{"../../outside.md", "architecture.md#x", "https://example.org/a.md"}) {
		t.Errorf("links = %q", ls)
	}
	docs := filepath.Join(root, "docs")
	if err := linkTarget(docs, "../../outside.md"); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Errorf("a link out of the repository: %v", err)
	}
	if err := linkTarget(docs, "nothing-here.md"); err == nil {
		t.Error("a link to a missing file passed")
	}
	for _, ok := range []string{"architecture.md#x", "https://example.org/a.md", "#top", "../README.md"} {
		if err := linkTarget(docs, ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	if !hasRoot("internal/none") || hasRoot("none/internal") || !sourceFile.MatchString("x.go") || sourceFile.MatchString("mpif") {
		t.Error("hasRoot or sourceFile misread a name")
	}
}

// sourceFile is a bare file name of a kind the repository holds.
var sourceFile = regexp.MustCompile(`^[\w.-]+\.(go|c|h|ts|mjs|sh|proto|list)$`)

func hasRoot(p string) bool {
	for _, r := range roots {
		if p == strings.TrimSuffix(r, "/") || strings.HasPrefix(p, r) {
			return true
		}
	}
	return false
}

// codeSpans returns the Markdown code spans of text, in order, outside
// fenced blocks.
func codeSpans(text string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for i := 0; i < len(line); {
			if line[i] != '`' {
				i++
				continue
			}
			n := 0
			for i+n < len(line) && line[i+n] == '`' {
				n++
			}
			fence := strings.Repeat("`", n)
			end := strings.Index(line[i+n:], fence)
			if end < 0 {
				break
			}
			out = append(out, strings.TrimSpace(line[i+n:i+n+end]))
			i += n + end + n
		}
	}
	return out
}

var linkRe = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// links returns the targets of text's Markdown links.
func links(text string) []string {
	var out []string
	for _, m := range linkRe.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

// linkTarget checks a link of a file in dir: a web address or an anchor
// passes; a path must stay inside the repository and exist.
func linkTarget(dir, l string) error {
	if strings.HasPrefix(l, "#") || regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`).MatchString(l) {
		return nil
	}
	p, _, _ := strings.Cut(l, "#")
	abs := filepath.Clean(filepath.Join(dir, p))
	if rel, err := filepath.Rel(root, abs); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return &linkError{l, "leads outside the repository"}
	}
	if _, err := os.Stat(abs); err != nil {
		return &linkError{l, "leads to no file"}
	}
	return nil
}

type linkError struct{ link, why string }

func (e *linkError) Error() string { return "link " + e.link + " " + e.why }

// repoFiles lists the repository's files as git tracks them (added to its
// index: others' work in progress in the same checkout is not yet the
// repository's), relative to root; outside a git checkout, every file but
// those of .git, node_modules and build outputs.
func repoFiles(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z", "--cached")
	cmd.Dir = root
	if out, err := cmd.Output(); err == nil {
		var files []string
		for _, f := range strings.Split(string(out), "\x00") {
			if f == "" {
				continue
			}
			if _, err := os.Lstat(filepath.Join(root, f)); err == nil { // deleted but not yet committed
				files = append(files, f)
			}
		}
		return files
	}
	var files []string
	skip := map[string]bool{".git": true, "node_modules": true, "bin": true, "dist": true, "build": true}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skip[d.Name()] && p != root {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(root, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
