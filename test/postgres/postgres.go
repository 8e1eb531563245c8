// Package postgres starts a real PostgreSQL server for tests: Debian's
// binaries, initdb into a scratch directory as the unprivileged postgres
// user (when run as root), a private loopback port and unix socket
// directory, trust authentication. Each test gets a fresh database of its
// own from NewDB.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Superuser is the role initdb creates; trust authentication lets it in
// without a password, over loopback TCP only.
const Superuser = "postgres"

// BinDir returns the directory of the newest installed server binaries
// (Debian keeps them in /usr/lib/postgresql/VERSION/bin), or "".
func BinDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d
		}
	}
	return ""
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// Missing returns why a server cannot be started here ("" when it can).
func Missing() string {
	if BinDir() == "" {
		return "PostgreSQL server binaries not found in /usr/lib/postgresql/*/bin (Debian postgresql: scripts/install-deps.sh)"
	}
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			return "running as root but there is no postgres user to run the server as (Debian postgresql creates it)"
		}
	}
	return ""
}

// Server is one running postgres.
type Server struct {
	Dir    string // scratch directory: data/, the socket, server.log
	Port   int
	BinDir string

	cmd  *exec.Cmd
	done chan struct{}
	dbs  atomic.Int64
	opt  Options
}

// Options tune Start; the zero value is good.
type Options struct {
	// Timeout bounds initdb and the wait for the server to accept
	// connections; default 60s.
	Timeout time.Duration
	// Settings are extra "name=value" server settings.
	Settings []string
}

// Start runs initdb into a new scratch directory under the system's
// temporary directory and starts the server on a free loopback port. It
// returns once the server accepts connections. The caller must Stop it.
func Start(ctx context.Context, opt Options) (*Server, error) {
	if m := Missing(); m != "" {
		return nil, fmt.Errorf("postgres: %s", m)
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, opt.Timeout)
	defer cancel()
	// Not t.TempDir: its parents are private to root, and the server runs
	// as postgres.
	dir, err := os.MkdirTemp("", "netloom-postgres-")
	if err != nil {
		return nil, fmt.Errorf("postgres: scratch dir: %w", err)
	}
	s := &Server{Dir: dir, BinDir: BinDir(), opt: opt}
	cred, err := s.credential()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("postgres: chown %s: %w", dir, err)
		}
	}
	initdb := exec.CommandContext(ctx, filepath.Join(s.BinDir, "initdb"), "-D", s.dataDir(), "-U", Superuser,
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("postgres: initdb: %v:\n%s", err, lastLines(string(out), 20))
	}
	// A port found free may be taken before the server binds it: try a
	// few.
	for attempt := 0; ; attempt++ {
		var port int
		if port, err = freePort(); err != nil {
			s.Stop()
			return nil, fmt.Errorf("postgres: %w", err)
		}
		err = s.start(ctx, cred, opt, port)
		if err == nil {
			return s, nil
		}
		if attempt == 4 || !strings.Contains(s.Log(), "could not bind") || ctx.Err() != nil {
			s.Stop()
			return nil, err
		}
	}
}

// credential is who runs the server: the postgres user when we are root
// (the server refuses to run as root), else ourselves.
func (s *Server) credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("postgres: user postgres: %w", err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("postgres: user postgres: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (s *Server) dataDir() string { return filepath.Join(s.Dir, "data") }

// LogPath is the server's log file.
func (s *Server) LogPath() string { return filepath.Join(s.Dir, "server.log") }

func (s *Server) start(ctx context.Context, cred *syscall.Credential, opt Options, port int) error {
	s.Port = port
	args := []string{"-D", s.dataDir(), "-p", strconv.Itoa(port), "-k", s.Dir,
		"-c", "listen_addresses=127.0.0.1",
		// Throwaway data: durability buys nothing and costs test time.
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200", "-c", "shared_buffers=64MB"}
	for _, kv := range opt.Settings {
		args = append(args, "-c", kv)
	}
	log, err := os.OpenFile(s.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer log.Close()
	s.cmd = exec.Command(filepath.Join(s.BinDir, "postgres"), args...)
	s.cmd.Dir = s.Dir
	s.cmd.Stdout, s.cmd.Stderr = log, log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("postgres: start: %w", err)
	}
	s.done = make(chan struct{})
	cmd, done := s.cmd, s.done
	go func() { _ = cmd.Wait(); close(done) }()
	for {
		c, err := pgx.Connect(ctx, s.URL("postgres"))
		if err == nil {
			c.Close(ctx)
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("postgres exited (%v) on port %d:\n%s", cmd.ProcessState, port, lastLines(s.Log(), 20))
		case <-ctx.Done():
			s.kill()
			return fmt.Errorf("postgres: not accepting connections on port %d (%v): %w\n%s", port, err, ctx.Err(), lastLines(s.Log(), 20))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// URL is the connection URL of database db.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", Superuser, s.Port, db)
}

// CreateDB creates an empty database and returns its URL.
func (s *Server) CreateDB(ctx context.Context, name string) (string, error) {
	c, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return "", fmt.Errorf("postgres: create database %s: %w", name, err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("postgres: create database %s: %w", name, err)
	}
	return s.URL(name), nil
}

// NewDB creates a fresh database for t, named after it, and returns its
// URL. It fails t when it cannot.
func (s *Server) NewDB(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%s", s.dbs.Add(1), strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return '_'
	}, t.Name()))
	if len(name) > 63 {
		name = name[:63]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url, err := s.CreateDB(ctx, name)
	if err != nil {
		t.Fatalf("%v\nserver log:\n%s", err, lastLines(s.Log(), 20))
	}
	return url
}

// Log returns what the server wrote to its log.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.LogPath())
	return string(b)
}

// LogTail returns the last n lines of the server's log.
func (s *Server) LogTail(n int) string { return lastLines(s.Log(), n) }

func (s *Server) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
	}
}

// Stop shuts the server down (a fast shutdown, then SIGKILL after 10 s)
// and removes its directory.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		select {
		case <-s.done:
		default:
			_ = s.cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-s.done:
			case <-time.After(10 * time.Second):
				s.kill()
			}
		}
	}
	_ = os.RemoveAll(s.Dir)
}

// Halt shuts the server down (a fast shutdown: clients are disconnected,
// committed data is kept) and leaves its data directory: a database host
// gone away. Restart brings it back.
func (s *Server) Halt() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.kill()
	}
}

// Restart starts a halted server again on its port and data, and
// returns once it accepts connections.
func (s *Server) Restart(ctx context.Context) error {
	cred, err := s.credential()
	if err != nil {
		return err
	}
	timeout := s.opt.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The port may be held for a moment after the old server let it go.
	for {
		err := s.start(ctx, cred, s.opt, s.Port)
		if err == nil || !strings.Contains(s.Log(), "could not bind") || ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Main starts one server for a test binary, runs its tests and stops the
// server: call it from TestMain and get the server with Shared. When the
// binaries are missing, tests that ask for the server skip under -short
// and fail otherwise.
func Main(m *testing.M, opt Options) int {
	if Missing() != "" {
		return m.Run()
	}
	s, err := Start(context.Background(), opt)
	if err != nil {
		fmt.Fprintf(os.Stderr, "test/postgres: %v\n", err)
		startErr = err
		return m.Run()
	}
	shared = s
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "test/postgres: server log (%s), last lines:\n%s\n", s.LogPath(), s.LogTail(40))
	}
	s.Stop()
	return code
}

// shared is the server Main started for this test binary; tests reach it
// only through Shared.
var (
	shared   *Server
	startErr error
)

// Shared returns the server Main started. Without PostgreSQL installed it
// skips t under -short and fails it otherwise: the engine must be tested
// wherever make test runs.
func Shared(t testing.TB) *Server {
	t.Helper()
	if m := Missing(); m != "" {
		if testing.Short() {
			t.Skipf("no PostgreSQL server: %s", m)
		}
		t.Fatalf("no PostgreSQL server: %s (run scripts/install-deps.sh, or go test -short to skip)", m)
	}
	if startErr != nil {
		t.Fatalf("PostgreSQL server did not start: %v", startErr)
	}
	if shared == nil {
		t.Fatal("test/postgres: call postgres.Main from the package's TestMain")
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("PostgreSQL server log, last lines:\n%s", shared.LogTail(30))
		}
	})
	return shared
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
