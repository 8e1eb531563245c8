package jobfiles

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The folder tree of the tests: root/job/{rank-0.pb,sub/x} owned by uid,
// and hostile entries beside them.
func tree(t *testing.T, uid int) (root, job string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: files are given to other uids")
	}
	root = t.TempDir()
	job = filepath.Join(root, "user", "job")
	if err := os.MkdirAll(filepath.Join(job, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"rank-0.pb": "profile", "sub/x": "x", "big": strings.Repeat("b", 5000)} {
		if err := os.WriteFile(filepath.Join(job, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(root, "secret")
	if err := os.WriteFile(secret, []byte("root only"), 0o600); err != nil {
		t.Fatal(err)
	}
	must(t, os.Symlink(secret, filepath.Join(job, "link")))
	must(t, os.Symlink("/dev/zero", filepath.Join(job, "zero")))
	must(t, syscall.Mkfifo(filepath.Join(job, "fifo"), 0o644))
	must(t, os.Symlink(filepath.Join(root, "user", "job"), filepath.Join(root, "user", "linked")))
	must(t, os.WriteFile(filepath.Join(job, "others"), []byte("someone else's"), 0o644))
	for _, p := range []string{filepath.Join(root, "user"), job, filepath.Join(job, "sub"), filepath.Join(job, "rank-0.pb"), filepath.Join(job, "sub/x"), filepath.Join(job, "big"), filepath.Join(job, "fifo")} {
		must(t, os.Chown(p, uid, uid))
	}
	must(t, os.Chown(filepath.Join(job, "others"), uid+1, uid+1))
	return root, job
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestJobFiles(t *testing.T) {
	const uid = 54321
	root, job := tree(t, uid)
	ctx := context.Background()
	lim := Limits{MaxFileBytes: 4096, MaxTotalBytes: 1 << 20, MaxEntries: 100}
	f, err := Open(ctx, root, job, uid, lim)
	if err != nil {
		t.Fatal(err)
	}
	b, err := fs.ReadFile(f, "rank-0.pb")
	if err != nil || string(b) != "profile" {
		t.Errorf("rank-0.pb: %q, %v", b, err)
	}
	if b, err := fs.ReadFile(f, "sub/x"); err != nil || string(b) != "x" {
		t.Errorf("sub/x: %q, %v", b, err)
	}
	if got, _ := fs.Glob(f, "rank-*.pb"); len(got) != 1 {
		t.Errorf("glob rank-*.pb: %v", got)
	}
	// Each hostile entry is refused with the one answer, quickly (the FIFO
	// has no writer: opening it for reading must not wait for one); the
	// reason goes to OnRefuse's function alone.
	told := map[string]string{}
	f.OnRefuse(func(path string, why error) { told[path] = why.Error() })
	for _, name := range []string{"link", "zero", "fifo", "others", "missing", "sub/../link"} {
		start := time.Now()
		_, err := fs.ReadFile(f, name)
		if err == nil {
			t.Errorf("%s: read", name)
			continue
		}
		if name != "sub/../link" && !errors.Is(err, ErrNotYours) {
			t.Errorf("%s: %v, want ErrNotYours", name, err)
		}
		if strings.Contains(err.Error(), "root only") {
			t.Errorf("%s: the error shows the file: %v", name, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s: refused after %s", name, d)
		}
	}
	if _, err := fs.ReadFile(f, "big"); err == nil || !strings.Contains(err.Error(), "more than the daemon reads of one file") {
		t.Errorf("a file over MaxFileBytes: %v", err)
	}
	for name, why := range map[string]string{"link": "too many levels of symbolic links", "zero": "too many levels of symbolic links",
		"fifo": "not a regular file", "others": "owned by uid", "missing": "no such file", "big": "more than the daemon reads"} {
		if got := told[filepath.Join(job, name)]; !strings.Contains(got, why) {
			t.Errorf("%s refused for %q; want it told, saying %q (told: %q)", name, got, why, told)
		}
	}
	// Folders: outside the root, through a link, or another's.
	for _, dir := range []string{"/etc", filepath.Join(root, "user", "linked"), filepath.Join(root, "user", "job", "..", "..", ".."), root + "/../x", "relative"} {
		if _, err := Open(ctx, root, dir, uid, lim); !errors.Is(err, ErrNotYours) {
			t.Errorf("folder %s: %v, want ErrNotYours", dir, err)
		}
	}
	if _, err := Open(ctx, root, job, uid+1, lim); !errors.Is(err, ErrNotYours) || Why(err) == "" {
		t.Errorf("another uid's folder: %v (why %q)", err, Why(err))
	}
	// The total bound and the context.
	small, err := Open(ctx, root, job, uid, Limits{MaxFileBytes: 1 << 20, MaxTotalBytes: 6000})
	must(t, err)
	_, err1 := fs.ReadFile(small, "big")
	_, err2 := fs.ReadFile(small, "big")
	if err1 != nil || err2 == nil {
		t.Errorf("total bound of 6000 bytes: first read %v, second %v", err1, err2)
	}
	cctx, cancel := context.WithCancel(ctx)
	late, err := Open(cctx, root, job, uid, Limits{})
	must(t, err)
	file, err := late.Open("big")
	must(t, err)
	cancel()
	if _, err := io.ReadAll(file); !errors.Is(err, context.Canceled) {
		t.Errorf("read after the context ended: %v", err)
	}
	file.Close()
}
