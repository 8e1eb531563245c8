// Package jobfiles reads, for the daemon, the files a job's ranks wrote
// (offline profiles and replay traces) without letting the job's agent
// name anything else: only under a root the administrator configured, only
// directories and regular files owned by the job's user, never through a
// symbolic link, a device or a FIFO, and within bounds on the bytes read
// and the time taken. A folder named by an agent is a claim, not a
// permission: the daemon usually runs as root and would otherwise read any
// file for whoever can start a job (docs/security.md, "What the daemon
// reads").
package jobfiles

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Limits bound what one FS reads.
type Limits struct {
	// MaxFileBytes bounds each file's size as stored.
	MaxFileBytes int64
	// MaxTotalBytes bounds all bytes read through the FS.
	MaxTotalBytes int64
	// MaxEntries bounds the entries read from one directory.
	MaxEntries int
}

// DefaultLimits suit a job of some thousand ranks' traces.
var DefaultLimits = Limits{MaxFileBytes: 1 << 30, MaxTotalBytes: 8 << 30, MaxEntries: 1 << 20}

// ErrNotYours is the answer for a folder or file that is missing, outside
// the root, not the job user's, or not a plain file or directory: one
// answer for all, so that a user cannot probe what exists.
var ErrNotYours = errors.New("not a folder or file of the job's user under the daemon's trace_root")

// FS is one job folder opened for reading: an fs.FS (with ReadDir and
// Stat) whose names are relative to the folder. Every Open walks from the
// root one component at a time with O_NOFOLLOW, so a link swapped in
// after a check cannot redirect a later read.
type FS struct {
	ctx   context.Context
	root  string   // the configured root, absolute and clean
	below []string // the job folder's components below root
	uid   uint32
	lim   Limits
	read  atomic.Int64
	// refused, when set, hears of every path refused (OnRefuse).
	refused func(path string, why error)
}

// OnRefuse has fn told of every path this FS refuses from now on, with
// the reason, which the error returned does not give (ErrNotYours): a
// link, a FIFO, a device, another owner's file, a file too large. The
// daemon logs them. Set it before the FS is used.
func (f *FS) OnRefuse(fn func(path string, why error)) { f.refused = fn }

// Open checks that dir lies under root and is owned, in every component
// below root, by uid, and returns it for reading. Reads fail once ctx is
// done.
func Open(ctx context.Context, root, dir string, uid uint32, lim Limits) (*FS, error) {
	if root == "" || !filepath.IsAbs(root) {
		return nil, fmt.Errorf("trace_root %q: want an absolute path", root)
	}
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("%q: %w", dir, ErrNotYours)
	}
	root, dir = filepath.Clean(root), filepath.Clean(dir)
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, fmt.Errorf("%s: %w", dir, ErrNotYours)
	}
	f := &FS{ctx: ctx, root: root, uid: uid, lim: lim}
	if rel != "." {
		f.below = strings.Split(rel, "/")
	}
	fd, err := f.walk(nil, true)
	if err != nil {
		return nil, err
	}
	unix.Close(fd)
	return f, nil
}

// Dir is the job folder's path, for messages.
func (f *FS) Dir() string { return filepath.Join(append([]string{f.root}, f.below...)...) }

// walk opens the job folder's components and then those of name, each
// with O_NOFOLLOW below the root, and checks each: a directory owned by
// uid, or (last, unless dir) a regular file owned by uid. It returns the
// last one's descriptor.
func (f *FS) walk(name []string, dir bool) (int, error) {
	if err := f.ctx.Err(); err != nil {
		return -1, err
	}
	fd, err := unix.Open(f.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("trace_root %s: %w", f.root, err)
	}
	parts := append(append([]string{}, f.below...), name...)
	for i, p := range parts {
		last := i == len(parts)-1
		flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK | unix.O_NOCTTY
		if !last || dir {
			flags |= unix.O_DIRECTORY
		}
		next, err := unix.Openat(fd, p, flags, 0)
		unix.Close(fd)
		if err != nil {
			return -1, f.refuse(parts[:i+1], err)
		}
		fd = next
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, f.refuse(parts[:i+1], err)
		}
		kind := st.Mode & unix.S_IFMT
		switch {
		case st.Uid != f.uid:
			err = fmt.Errorf("owned by uid %d", st.Uid)
		case kind == unix.S_IFDIR:
		case kind != unix.S_IFREG || !last || dir: // a device, FIFO or socket is never opened for reading
			err = fmt.Errorf("not a regular file (mode %o)", st.Mode)
		case f.lim.MaxFileBytes > 0 && st.Size > f.lim.MaxFileBytes:
			unix.Close(fd)
			err := fmt.Errorf("%s: %d bytes, more than the daemon reads of one file (%d)", filepath.Join(f.Dir(), filepath.Join(name...)), st.Size, f.lim.MaxFileBytes)
			f.tell(parts[:i+1], err)
			return -1, err
		}
		if err != nil {
			unix.Close(fd)
			return -1, f.refuse(parts[:i+1], err)
		}
	}
	return fd, nil
}

// refuse is the one error for every path the walk does not take (the
// reason stays in the daemon's own wrapped error, not shown to users).
func (f *FS) refuse(parts []string, why error) error {
	f.tell(parts, why)
	return &refusal{path: filepath.Join(append([]string{f.root}, parts...)...), why: why}
}

// tell passes a refusal to OnRefuse's function.
func (f *FS) tell(parts []string, why error) {
	if f.refused != nil {
		f.refused(filepath.Join(append([]string{f.root}, parts...)...), why)
	}
}

type refusal struct {
	path string
	why  error
}

func (r *refusal) Error() string { return r.path + ": " + ErrNotYours.Error() }
func (r *refusal) Unwrap() error { return ErrNotYours }

// Why is the reason a path was refused, for the daemon's log.
func Why(err error) string {
	var r *refusal
	if errors.As(err, &r) {
		return r.why.Error()
	}
	return ""
}

func split(name string) ([]string, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if name == "." {
		return nil, nil
	}
	return strings.Split(name, "/"), nil
}

// Open opens a regular file or a directory of the job folder.
func (f *FS) Open(name string) (fs.File, error) {
	parts, err := split(name)
	if err != nil {
		return nil, err
	}
	fd, err := f.walk(parts, false)
	if err != nil {
		return nil, err
	}
	file := os.NewFile(uintptr(fd), filepath.Join(f.Dir(), name))
	return &bounded{File: file, fs: f}, nil
}

// ReadDir lists a directory of the job folder, sorted by name.
func (f *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	parts, err := split(name)
	if err != nil {
		return nil, err
	}
	fd, err := f.walk(parts, true)
	if err != nil {
		return nil, err
	}
	d := os.NewFile(uintptr(fd), filepath.Join(f.Dir(), name))
	defer d.Close()
	var out []fs.DirEntry
	for {
		batch, err := d.ReadDir(1024)
		out = append(out, batch...)
		if f.lim.MaxEntries > 0 && len(out) > f.lim.MaxEntries {
			return nil, fmt.Errorf("%s: more than %d entries", d.Name(), f.lim.MaxEntries)
		}
		if errors.Is(err, io.EOF) || len(batch) == 0 {
			break
		}
		if err != nil {
			return nil, err
		}
		if err := f.ctx.Err(); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

// Stat describes a file or directory of the job folder.
func (f *FS) Stat(name string) (fs.FileInfo, error) {
	file, err := f.Open(name)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	return file.Stat()
}

// bounded is an open file whose reads count against the FS's total and
// stop when its context is done.
type bounded struct {
	*os.File
	fs *FS
}

func (b *bounded) Read(p []byte) (int, error) {
	if err := b.fs.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := b.File.Read(p)
	if n > 0 {
		total := b.fs.read.Add(int64(n))
		if lim := b.fs.lim.MaxTotalBytes; lim > 0 && total > lim {
			return n, fmt.Errorf("%s: the job's files hold more than the daemon reads of one job (%d bytes)", b.Name(), lim)
		}
	}
	return n, err
}

// ReadDir of an open directory is bounded like FS.ReadDir.
func (b *bounded) ReadDir(n int) ([]fs.DirEntry, error) {
	if n <= 0 || (b.fs.lim.MaxEntries > 0 && n > b.fs.lim.MaxEntries) {
		n = max(b.fs.lim.MaxEntries, 1)
	}
	return b.File.ReadDir(n)
}
