// Package sqlite is Netloom's embedded store: one SQLite file in WAL mode,
// one writer connection and a pool of readers, so readers never wait for
// the writer. Port samples, the big table, are kept one row per switch and
// sweep as a compact columnar blob (see codec). The logic is sqlstore's,
// shared with the PostgreSQL engine; here are the connections, schema and
// what SQLite's SQL says differently.
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/sqlstore"
	"github.com/netloom/netloom/internal/store/sqlstore/sqlcopy"
)

// applicationID marks a Netloom database ("NLOM") so that another SQLite
// file is refused rather than written into.
const applicationID = 0x4E4C4F4D

// Options tune a store; the zero value is good.
type Options struct {
	// BusyTimeout is how long a statement waits for a lock held by another
	// process before failing. Default 5s.
	BusyTimeout time.Duration
	// Readers is the size of the read connection pool. Default 4.
	Readers int
	// PruneChunk is how many rows one prune transaction deletes, bounding
	// how long it holds the write lock. Default 2000
	// (sqlstore.DefaultLimits, as the two below).
	PruneChunk int
	// RollupPortRows and RollupProcessRows are how many expired rows one
	// rollup transaction folds: port rows (one switch's ports of one
	// sweep, ~36 samples) and process rows (one rank's interval). They
	// bound how long a rollup step holds the write lock. Defaults 256 and
	// 4096.
	RollupPortRows    int
	RollupProcessRows int
	// Fabric names the fabric this store writes topology, routes and
	// events of (store.Store); default store.DefaultFabric.
	Fabric string
}

func (o Options) withDefaults() Options {
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 5 * time.Second
	}
	if o.Readers <= 0 {
		o.Readers = 4
	}
	return o
}

// Store is the SQLite engine of store.Store: the shared logic of
// sqlstore over one file.
type Store struct {
	sqlstore.Store
	sqlcopy.Copier
	path string
	opt  Options
	w    *sql.DB // exactly one connection: SQLite has one writer anyway
	r    *sql.DB // read-only pool

	// wmu serializes write transactions (and with them the shared
	// logic's writer state).
	wmu sync.Mutex
}

var _ store.Store = (*Store)(nil)

// dsn builds a go-sqlite3 URI for path. Characters that mean something in
// a URI are escaped so any file name works.
func dsn(path string, readOnly bool, opt Options) string {
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	q := fmt.Sprintf("_busy_timeout=%d&_foreign_keys=1", opt.BusyTimeout.Milliseconds())
	if readOnly {
		q += "&mode=ro&_query_only=1"
	} else {
		q += "&_txlock=immediate&_synchronous=NORMAL"
	}
	return "file:" + esc + "?" + q
}

// Open opens or creates the database at path, creating or migrating its
// schema.
func Open(ctx context.Context, path string, opt Options) (*Store, error) {
	opt = opt.withDefaults()
	if path == "" {
		return nil, errors.New("open sqlite store: empty path")
	}
	s := &Store{path: path, opt: opt}
	if err := s.Init(s, &dialect, opt.Fabric, sqlstore.Limits{PruneChunk: opt.PruneChunk, RollupPortRows: opt.RollupPortRows, RollupProcessRows: opt.RollupProcessRows}); err != nil {
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	s.initCopier()
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("open sqlite store %s: is a directory", path)
	}
	w := sql.OpenDB(newConnector(dsn(path, false, opt), writerPragmas))
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	s.w = w
	if err := s.prepare(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, describe(err))
	}
	r := sql.OpenDB(newConnector(dsn(path, true, opt), readerPragmas))
	r.SetMaxOpenConns(opt.Readers)
	r.SetMaxIdleConns(opt.Readers)
	if err := r.PingContext(ctx); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("open sqlite store %s for reading: %w", path, err)
	}
	s.r = r
	return s, nil
}

// dialect is what SQLite's SQL says differently. Its write transactions
// exclude each other (BEGIN IMMEDIATE), so saves need no lock.
var dialect = sqlstore.Dialect{
	LatestRaw: `SELECT n.guid, s.time_ns, s.data FROM nodes n JOIN port_samples s ON s.id =
		(SELECT id FROM port_samples WHERE node_id = n.id AND time_ns <= ? ORDER BY time_ns DESC LIMIT 1)`,
	Unique: func(err error) bool {
		var se sqlite3.Error
		return errors.As(err, &se) && se.ExtendedCode == sqlite3.ErrConstraintUnique
	},
	NoLimit:   -1,
	Generated: true, // jobs.owner
}

// writerPragmas are set on every writer connection (database/sql may
// reconnect): they are per connection, not stored in the file.
var writerPragmas = []string{
	// Truncate the WAL after a checkpoint once it passed 64 MiB, so one
	// burst does not leave a large file behind.
	"PRAGMA journal_size_limit=67108864",
	// Each sweep touches one leaf of the (node, time) index per switch;
	// keeping the index hot keeps inserts flat as the file grows.
	"PRAGMA cache_size=-65536",
}

// readerPragmas: mapping the file saves copying a whole page to read one
// ~1 KiB sample row, which dominates per-port history queries.
var readerPragmas = []string{
	"PRAGMA mmap_size=17179869184",
	"PRAGMA cache_size=-16384",
}

// connector opens go-sqlite3 connections with per-connection pragmas,
// without registering a driver name (no global state).
type connector struct {
	dsn string
	drv *sqlite3.SQLiteDriver
}

func newConnector(dsn string, pragmas []string) *connector {
	return &connector{dsn: dsn, drv: &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		for _, p := range pragmas {
			if _, err := c.Exec(p, nil); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
		return nil
	}}}
}

func (c *connector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c *connector) Driver() driver.Driver                        { return c.drv }

// describe turns SQLite's terse corruption codes into advice.
func describe(err error) error {
	var se sqlite3.Error
	if errors.As(err, &se) && (se.Code == sqlite3.ErrNotADB || se.Code == sqlite3.ErrCorrupt) {
		return fmt.Errorf("the file is not a SQLite database or is corrupted (restore it from a backup or move it away to start afresh): %w", err)
	}
	return err
}

// prepare sets connection pragmas, checks the file is ours and migrates.
func (s *Store) prepare(ctx context.Context) error {
	var pages int64
	if err := s.w.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		return fmt.Errorf("read page count: %w", err)
	}
	if pages == 0 {
		// Only possible before the first table: 16 KiB pages waste less
		// space around the ~0.5-1 KiB sample rows, and incremental
		// auto-vacuum lets Prune return space to the file system.
		for _, p := range []string{"PRAGMA page_size=16384", "PRAGMA auto_vacuum=INCREMENTAL",
			fmt.Sprintf("PRAGMA application_id=%d", applicationID)} {
			if _, err := s.w.ExecContext(ctx, p); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
	}
	var mode string
	if err := s.w.QueryRowContext(ctx, "PRAGMA journal_mode=WAL").Scan(&mode); err != nil {
		return fmt.Errorf("set WAL mode: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("set WAL mode: journal mode is %q", mode)
	}
	var app int64
	if err := s.w.QueryRowContext(ctx, "PRAGMA application_id").Scan(&app); err != nil {
		return fmt.Errorf("read application id: %w", err)
	}
	if app != applicationID {
		var tables int
		if err := s.w.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema WHERE name <> 'schema_version'").Scan(&tables); err != nil {
			return fmt.Errorf("read schema: %w", err)
		}
		var hasVersion int
		if err := s.w.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema WHERE name = 'schema_version'").Scan(&hasVersion); err != nil {
			return fmt.Errorf("read schema: %w", err)
		}
		if tables > 0 && hasVersion == 0 {
			return fmt.Errorf("the file is a SQLite database but not a Netloom one (application_id %#x, no schema_version table)", app)
		}
		if _, err := s.w.ExecContext(ctx, fmt.Sprintf("PRAGMA application_id=%d", applicationID)); err != nil {
			return fmt.Errorf("set application id: %w", err)
		}
	}
	return migrate(ctx, s.w)
}

// Close closes both connection pools; the last one checkpoints the WAL.
func (s *Store) Close() error {
	var errs []error
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	errs = append(errs, s.w.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close sqlite store %s: %w", s.path, err)
	}
	return nil
}

// writeTx runs fn in one write transaction under the writer lock.
func (s *Store) writeTx(ctx context.Context, what string, fn func(tx *sql.Tx) error) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: begin: %w", what, err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: commit: %w", what, err)
	}
	return nil
}
