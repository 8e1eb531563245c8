package sqlite

import (
	"context"
	"database/sql"
	"fmt"
)

// migration is one schema step; steps are applied in order, each in its
// own transaction, and never edited once released: add a new step instead.
type migration struct {
	version int
	name    string
	sql     []string
}

// migrations is the schema's history. Times are nanoseconds since 1970
// (UTC); GUIDs are their 64 bits as a signed integer.
var migrations = []migration{
	{1, "initial schema", []string{
		`CREATE TABLE topology_versions (
			id       INTEGER PRIMARY KEY,
			from_ns  INTEGER NOT NULL,
			until_ns INTEGER,          -- NULL while current
			nodes    INTEGER NOT NULL,
			links    INTEGER NOT NULL,
			hash     BLOB NOT NULL,    -- SHA-256 of the canonical encoding
			data     BLOB NOT NULL     -- deflated canonical JSON
		)`,
		`CREATE INDEX topology_versions_from ON topology_versions(from_ns)`,
		`CREATE TABLE forwarding_tables (
			id      INTEGER PRIMARY KEY,
			from_ns INTEGER NOT NULL,
			hash    BLOB NOT NULL,
			data    BLOB NOT NULL
		)`,
		`CREATE INDEX forwarding_tables_from ON forwarding_tables(from_ns)`,
		`CREATE TABLE events (
			id      INTEGER PRIMARY KEY,
			time_ns INTEGER NOT NULL,
			kind    TEXT NOT NULL,
			node    INTEGER NOT NULL,
			port    INTEGER NOT NULL,
			detail  TEXT NOT NULL
		)`,
		`CREATE INDEX events_time ON events(time_ns)`,
		`CREATE TABLE nodes (
			id   INTEGER PRIMARY KEY,
			guid INTEGER NOT NULL UNIQUE
		)`,
		`CREATE TABLE port_samples (
			id      INTEGER PRIMARY KEY,
			time_ns INTEGER NOT NULL,
			node_id INTEGER NOT NULL REFERENCES nodes(id),
			ports   INTEGER NOT NULL,  -- samples in the blob
			data    BLOB NOT NULL
		)`,
		`CREATE UNIQUE INDEX port_samples_node_time ON port_samples(node_id, time_ns)`,
		`CREATE INDEX port_samples_time ON port_samples(time_ns)`,
	}},
	{2, "event kind and node indexes, running totals", []string{
		`CREATE INDEX events_kind_time ON events(kind, time_ns)`,
		`CREATE INDEX events_node_time ON events(node, time_ns)`,
		`CREATE TABLE totals (
			name  TEXT PRIMARY KEY,
			value INTEGER NOT NULL
		) WITHOUT ROWID`,
		`INSERT INTO totals(name, value) SELECT 'port_samples', COALESCE(SUM(ports), 0) FROM port_samples`,
		`INSERT INTO totals(name, value) SELECT 'events', COUNT(*) FROM events`,
	}},
	{3, "MPI jobs, their processes and per-interval process samples", []string{
		// One row per job: the summary as JSON, and its sortable metrics
		// as columns (see jobSortColumn).
		`CREATE TABLE jobs (
			id               TEXT PRIMARY KEY,
			state            TEXT NOT NULL,
			start_ns         INTEGER NOT NULL,
			end_ns           INTEGER,          -- NULL while running
			updated_ns       INTEGER NOT NULL,
			duration         REAL NOT NULL,
			ranks            REAL NOT NULL,
			nodes            REAL NOT NULL,
			cpu              REAL NOT NULL,
			cpu_seconds      REAL NOT NULL,
			mpi              REAL NOT NULL,
			mpi_seconds      REAL NOT NULL,
			memory           REAL NOT NULL,
			memory_peak      REAL NOT NULL,
			io               REAL NOT NULL,
			bytes            REAL NOT NULL,
			msgs             REAL NOT NULL,
			inter_node_bytes REAL NOT NULL,
			intra_node_bytes REAL NOT NULL,
			p2p_bytes        REAL NOT NULL,
			coll_bytes       REAL NOT NULL,
			rma_bytes        REAL NOT NULL,
			p2p_msgs         REAL NOT NULL,
			coll_msgs        REAL NOT NULL,
			rma_msgs         REAL NOT NULL,
			summary          BLOB NOT NULL     -- JSON of store.JobSummary
		)`,
		`CREATE INDEX jobs_state_start ON jobs(state, start_ns)`,
		`CREATE INDEX jobs_end ON jobs(end_ns)`,
		// Each rank's latest cumulative counters, deflated JSON of store.Process.
		`CREATE TABLE job_processes (
			job  TEXT NOT NULL,
			rank INTEGER NOT NULL,
			data BLOB NOT NULL,
			PRIMARY KEY (job, rank)
		) WITHOUT ROWID`,
		// Per-interval samples of a rank (see encodeProcessSample).
		`CREATE TABLE job_samples (
			job     TEXT NOT NULL,
			rank    INTEGER NOT NULL,
			time_ns INTEGER NOT NULL,
			data    BLOB NOT NULL,
			PRIMARY KEY (job, rank, time_ns)
		) WITHOUT ROWID`,
		`CREATE INDEX job_samples_time ON job_samples(time_ns)`,
	}},
	{4, "link attribution: per link direction, job and interval, and per-job totals", []string{
		// Bytes a job sent over the direction leaving port (guid, port)
		// in the interval ending at time_ns.
		`CREATE TABLE link_job_samples (
			guid    INTEGER NOT NULL,
			port    INTEGER NOT NULL,
			time_ns INTEGER NOT NULL,
			job     TEXT NOT NULL,
			span_ns INTEGER NOT NULL,
			bytes   INTEGER NOT NULL,
			PRIMARY KEY (guid, port, time_ns, job)
		) WITHOUT ROWID`,
		`CREATE INDEX link_job_samples_job ON link_job_samples(job, time_ns)`,
		`CREATE INDEX link_job_samples_time ON link_job_samples(time_ns)`,
		`CREATE TABLE job_link_totals (
			job   TEXT NOT NULL,
			guid  INTEGER NOT NULL,
			port  INTEGER NOT NULL,
			bytes INTEGER NOT NULL,
			PRIMARY KEY (job, guid, port)
		) WITHOUT ROWID`,
	}},
	{5, "job owner (scheduler user, else agent user) as an indexed column", []string{
		`ALTER TABLE jobs ADD COLUMN owner TEXT GENERATED ALWAYS AS (coalesce(nullif(json_extract(summary, '$.scheduler.user'), ''), json_extract(summary, '$.user'), '')) VIRTUAL`,
		`CREATE INDEX jobs_owner ON jobs(owner, start_ns)`,
	}},
	{6, "rollups of port and process samples past their raw retention", []string{
		// One row per switch, bucket width and bucket: the switch's ports'
		// samples of the bucket summed, with peaks (see encodeRollup).
		// time_ns is the newest sample's time, the point's time.
		`CREATE TABLE port_rollups (
			id        INTEGER PRIMARY KEY,
			node_id   INTEGER NOT NULL REFERENCES nodes(id),
			width_s   INTEGER NOT NULL,  -- bucket width in seconds
			bucket_ns INTEGER NOT NULL,  -- bucket start, a multiple of the width
			time_ns   INTEGER NOT NULL,
			ports     INTEGER NOT NULL,  -- points in the blob
			data      BLOB NOT NULL
		)`,
		`CREATE UNIQUE INDEX port_rollups_node ON port_rollups(node_id, width_s, bucket_ns)`,
		`CREATE INDEX port_rollups_bucket ON port_rollups(width_s, bucket_ns)`,
		`INSERT INTO totals(name, value) VALUES ('port_rollups', 0)`,
		// One row per rank, bucket width and bucket (see encodeProcessRollup).
		`CREATE TABLE job_rollups (
			job       TEXT NOT NULL,
			rank      INTEGER NOT NULL,
			width_s   INTEGER NOT NULL,
			bucket_ns INTEGER NOT NULL,
			time_ns   INTEGER NOT NULL,
			data      BLOB NOT NULL,
			PRIMARY KEY (job, rank, width_s, bucket_ns)
		) WITHOUT ROWID`,
		`CREATE INDEX job_rollups_bucket ON job_rollups(width_s, bucket_ns)`,
	}},
	{7, "fabric names: several collectors' fabrics in one database", []string{
		// Rows written before are the one fabric a daemon then had.
		`ALTER TABLE topology_versions ADD COLUMN fabric TEXT NOT NULL DEFAULT 'default'`,
		`CREATE INDEX topology_versions_fabric_from ON topology_versions(fabric, from_ns)`,
		`ALTER TABLE forwarding_tables ADD COLUMN fabric TEXT NOT NULL DEFAULT 'default'`,
		`CREATE INDEX forwarding_tables_fabric_from ON forwarding_tables(fabric, from_ns)`,
		`ALTER TABLE events ADD COLUMN fabric TEXT NOT NULL DEFAULT 'default'`,
		// jobs.fabric: the collector whose summary the row is, or '' when
		// several saved parts of the job: then job_parts holds each one's
		// (JSON of store.JobSummary) and jobs their join.
		`ALTER TABLE jobs ADD COLUMN fabric TEXT NOT NULL DEFAULT 'default'`,
		`CREATE TABLE job_parts (
			job     TEXT NOT NULL,
			fabric  TEXT NOT NULL,
			summary BLOB NOT NULL,
			PRIMARY KEY (job, fabric)
		) WITHOUT ROWID`,
	}},
}

// SchemaVersion is the version this code writes.
func SchemaVersion() int { return migrations[len(migrations)-1].version }

// migrate brings the database to SchemaVersion.
func migrate(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("create schema_version: %w", err)
	}
	cur, err := currentVersion(ctx, db)
	if err != nil {
		return err
	}
	latest := SchemaVersion()
	if cur > latest {
		return fmt.Errorf("database schema version %d is newer than this Netloom understands (%d): upgrade Netloom or use a new database file", cur, latest)
	}
	for _, m := range migrations {
		if m.version <= cur {
			continue
		}
		if err := apply(ctx, db, m); err != nil {
			return err
		}
	}
	return nil
}

func currentVersion(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (int, error) {
	var v sql.NullInt64
	if err := q.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_version`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return int(v.Int64), nil
}

func apply(ctx context.Context, db *sql.DB, m migration) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate to schema %d (%s): begin: %w", m.version, m.name, err)
	}
	defer tx.Rollback()
	// Another process may have migrated meanwhile; the immediate
	// transaction holds the write lock, so re-check under it.
	cur, err := currentVersion(ctx, tx)
	if err != nil {
		return err
	}
	if cur >= m.version {
		return nil
	}
	if cur != m.version-1 {
		return fmt.Errorf("migrate to schema %d (%s): database is at %d", m.version, m.name, cur)
	}
	for i, stmt := range m.sql {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("migrate to schema %d (%s), step %d: %w", m.version, m.name, i+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM schema_version`); err != nil {
		return fmt.Errorf("migrate to schema %d: %w", m.version, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version(version) VALUES (?)`, m.version); err != nil {
		return fmt.Errorf("migrate to schema %d: %w", m.version, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate to schema %d (%s): commit: %w", m.version, m.name, err)
	}
	return nil
}
