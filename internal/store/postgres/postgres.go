// Package postgres is Netloom's PostgreSQL engine of store.Store, through
// pgx. It keeps the same compact rows as the SQLite engine (one row per
// switch and sweep, see codec) and shares all its logic (sqlstore); what it
// adds is what a server database does well: several daemons on one
// database, the schema migrated under an advisory lock, raw samples in
// tables partitioned by time whose expired partitions are dropped whole,
// and batches written with COPY.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/sqlstore"
	"github.com/netloom/netloom/internal/store/sqlstore/sqlcopy"
)

// Options tune a store; the zero value is good.
type Options struct {
	// PartitionWidth is the time range of one partition of the raw
	// sample tables (port samples, process samples, link attribution): a
	// multiple of 5 minutes; default 24h. Retention drops a partition
	// once all of it has expired.
	PartitionWidth time.Duration
	// MaxConns bounds the connection pool; default 8.
	MaxConns int32
	// PruneChunk, RollupPortRows and RollupProcessRows bound what one
	// prune or rollup transaction touches, as in the SQLite engine.
	// Defaults 2000, 256 and 4096 (sqlstore.DefaultLimits).
	PruneChunk        int
	RollupPortRows    int
	RollupProcessRows int
	// Fabric names the fabric this store writes topology, routes and
	// events of (store.Store); default store.DefaultFabric. Each collector
	// on one database names its own.
	Fabric string
}

func (o Options) withDefaults() Options {
	if o.PartitionWidth <= 0 {
		o.PartitionWidth = 24 * time.Hour
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 8
	}
	return o
}

// DefaultConnectTimeout bounds a connection attempt when the URL does not
// (connect_timeout).
const DefaultConnectTimeout = 10 * time.Second

// Store is the PostgreSQL engine of store.Store: the shared logic of
// sqlstore over a connection pool.
type Store struct {
	sqlstore.Store
	sqlcopy.Copier
	url  string // without a password, for messages
	opt  Options
	pool *pgxpool.Pool

	// wmu serializes this process's write transactions and guards the
	// fields below. Other daemons on the same database write too: what
	// must not race across them is locked in the database.
	wmu   sync.Mutex
	parts map[partKey]bool // partitions known to exist
}

var _ store.Store = (*Store)(nil)

// Open connects to the database a postgres:// URL names and creates or
// migrates its schema.
func Open(ctx context.Context, url string, opt Options) (*Store, error) {
	opt = opt.withDefaults()
	s := &Store{opt: opt, parts: map[partKey]bool{}}
	if err := s.Init(s, &dialect, opt.Fabric, sqlstore.Limits{PruneChunk: opt.PruneChunk, RollupPortRows: opt.RollupPortRows, RollupProcessRows: opt.RollupProcessRows}); err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	if opt.PartitionWidth%(5*time.Minute) != 0 {
		return nil, fmt.Errorf("open postgres store: partition width %s is not a multiple of 5 minutes", opt.PartitionWidth)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	cfg.MaxConns = opt.MaxConns
	if cfg.ConnConfig.ConnectTimeout == 0 {
		// A database host that drops packets would otherwise hold each
		// connection attempt, and the writer with it, for the kernel's
		// TCP timeout (minutes); connect_timeout in the URL overrides.
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	s.url = redact(cfg)
	s.initCopier()
	if s.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, fmt.Errorf("open postgres store %s: %w", s.url, err)
	}
	if err := migrate(ctx, s.pool); err != nil {
		s.pool.Close()
		return nil, fmt.Errorf("open postgres store %s: %w", s.url, err)
	}
	return s, nil
}

// dialect is what PostgreSQL's SQL says differently.
var dialect = sqlstore.Dialect{
	// Daemons on one database save topology and routes in turn.
	Lock:   func(table string) string { return `LOCK TABLE ` + table + ` IN SHARE ROW EXCLUSIVE MODE` },
	Arrays: true,
	LatestRaw: `SELECT n.guid, s.time_ns, s.data FROM nodes n CROSS JOIN LATERAL
		(SELECT time_ns, data FROM port_samples WHERE node_id = n.id AND time_ns <= ? ORDER BY time_ns DESC LIMIT 1) s`,
	Unique:      isUniqueViolation,
	PruneLock:   fmt.Sprintf(`SELECT pg_advisory_xact_lock(%d)`, int64(pruneLock)),
	Partitioned: true,
	LinkJobsOfPorts: `SELECT l.guid, l.port, l.job, CAST(sum(l.bytes) AS BIGINT) FROM link_job_samples l
		JOIN unnest(CAST(? AS BIGINT[]), CAST(? AS SMALLINT[])) AS p(guid, port) ON p.guid = l.guid AND p.port = l.port
		WHERE l.time_ns BETWEEN ? AND ? GROUP BY l.guid, l.port, l.job`,
	// Collectors saving parts of one job join them in turn: a two-key
	// advisory lock, the second key a hash of the job id.
	JobLock: func(id string) (string, []any) {
		h := fnv.New32a()
		h.Write([]byte(id))
		return `SELECT pg_advisory_xact_lock(?, ?)`, []any{int32(jobLockSpace), int32(h.Sum32())}
	},
	// Job ids sort bytewise, as in SQLite.
	Bytewise: ` COLLATE "C"`,
}

// redact names a database without its password.
func redact(cfg *pgxpool.Config) string {
	c := cfg.ConnConfig
	return fmt.Sprintf("postgres://%s@%s:%d/%s", c.User, c.Host, c.Port, c.Database)
}

// Close closes the connection pool.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// writeTx runs fn in one transaction under the writer lock, once the
// partitions that need holds exist. When a partition this process thought
// was there is gone (another daemon's retention dropped it), it forgets
// what it knew and tries once more.
func (s *Store) writeTx(ctx context.Context, what string, need []partNeed, fn func(tx pgx.Tx) error) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	err := s.ensurePartitions(ctx, need)
	if err == nil {
		err = s.tx(ctx, fn)
	}
	if isNoPartition(err) {
		clear(s.parts)
		if err = s.ensurePartitions(ctx, need); err == nil {
			err = s.tx(ctx, fn)
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// readTx runs fn in a read-only transaction that sees one snapshot.
func (s *Store) readTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	return fn(tx)
}

func (s *Store) tx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(ctx)
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// isNoPartition tells a row refused for want of its partition.
func isNoPartition(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23514" && strings.Contains(pe.Message, "no partition")
}

func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// queryRow scans one row; ok is false when there is none.
func queryRow(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, sql string, args []any, dst ...any) (bool, error) {
	err := q.QueryRow(ctx, sql, args...).Scan(dst...)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// Stats implements store.Store. Bytes counts the tables, their indexes
// and TOAST, partitions included.
func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	var st store.Stats
	err := s.pool.QueryRow(ctx, `SELECT
		(SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c
			WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'),
		(SELECT value FROM totals WHERE name = 'port_samples'),
		(SELECT value FROM totals WHERE name = 'port_rollups'),
		(SELECT value FROM totals WHERE name = 'events'),
		(SELECT count(*) FROM topology_versions),
		(SELECT count(*) FROM jobs)`).Scan(&st.Bytes, &st.PortSamples, &st.PortRollups, &st.Events, &st.Versions, &st.Jobs)
	if err != nil {
		return st, fmt.Errorf("stats of %s: %w", s.url, err)
	}
	return st, nil
}
