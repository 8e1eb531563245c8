package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// migrationLock is the advisory lock key (per database) that schema
// changes and partition changes take, so that daemons starting together
// migrate once and never create or drop a partition at the same time.
const (
	migrationLock = 0x4E4C4F4D0001 // "NLOM" 1
	partitionLock = 0x4E4C4F4D0002
	pruneLock     = 0x4E4C4F4D0003
	// jobLockSpace is the first key of the two-key advisory locks that
	// serialize saves of one job id (the second key is a hash of it):
	// collectors saving parts of one job join them in turn.
	jobLockSpace = 0x4E4C4F4D
)

// migration is one schema step; steps are never edited once released: add
// a new step instead.
type migration struct {
	version int
	name    string
	sql     []string
}

// migrations is the schema's history. Times are nanoseconds since 1970
// (UTC); GUIDs are their 64 bits as a signed bigint. The tables of raw
// samples are partitioned by range of time_ns (see partition.go).
var migrations = []migration{
	{1, "initial schema", []string{
		`CREATE TABLE topology_versions (
			id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			from_ns  bigint NOT NULL,
			until_ns bigint,            -- NULL while current
			nodes    integer NOT NULL,
			links    integer NOT NULL,
			hash     bytea NOT NULL,    -- SHA-256 of the canonical encoding
			data     bytea NOT NULL     -- deflated canonical JSON
		)`,
		`CREATE INDEX topology_versions_from ON topology_versions(from_ns)`,
		`CREATE TABLE forwarding_tables (
			id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			from_ns bigint NOT NULL,
			hash    bytea NOT NULL,
			data    bytea NOT NULL
		)`,
		`CREATE INDEX forwarding_tables_from ON forwarding_tables(from_ns)`,
		`CREATE TABLE events (
			id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			time_ns bigint NOT NULL,
			kind    text NOT NULL,
			node    bigint NOT NULL,
			port    integer NOT NULL,
			detail  text NOT NULL
		)`,
		`CREATE INDEX events_time ON events(time_ns)`,
		`CREATE INDEX events_kind_time ON events(kind, time_ns)`,
		`CREATE INDEX events_node_time ON events(node, time_ns)`,
		`CREATE TABLE nodes (
			id   integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			guid bigint NOT NULL UNIQUE
		)`,
		// One row per switch and sweep (codec's columnar blob). Columns
		// are in the order that wastes no alignment padding.
		`CREATE TABLE port_samples (
			time_ns bigint NOT NULL,
			node_id integer NOT NULL,
			ports   smallint NOT NULL,  -- samples in the blob
			data    bytea NOT NULL,
			PRIMARY KEY (node_id, time_ns)
		) PARTITION BY RANGE (time_ns)`,
		`CREATE INDEX port_samples_time ON port_samples(time_ns)`,
		`CREATE TABLE port_rollups (
			bucket_ns bigint NOT NULL,  -- bucket start, a multiple of the width
			time_ns   bigint NOT NULL,  -- the newest sample's time
			node_id   integer NOT NULL,
			width_s   integer NOT NULL,
			ports     smallint NOT NULL,
			data      bytea NOT NULL,
			PRIMARY KEY (node_id, width_s, bucket_ns)
		)`,
		`CREATE INDEX port_rollups_bucket ON port_rollups(width_s, bucket_ns)`,
		`CREATE TABLE totals (
			name  text PRIMARY KEY,
			value bigint NOT NULL
		)`,
		`INSERT INTO totals(name, value) VALUES ('port_samples', 0), ('port_rollups', 0), ('events', 0)`,
		`CREATE TABLE jobs (
			id               text PRIMARY KEY,
			state            text NOT NULL,
			owner            text NOT NULL,  -- store.JobSummary.Owner
			start_ns         bigint NOT NULL,
			end_ns           bigint,         -- NULL while running
			updated_ns       bigint NOT NULL,
			duration         double precision NOT NULL,
			ranks            double precision NOT NULL,
			nodes            double precision NOT NULL,
			cpu              double precision NOT NULL,
			cpu_seconds      double precision NOT NULL,
			mpi              double precision NOT NULL,
			mpi_seconds      double precision NOT NULL,
			memory           double precision NOT NULL,
			memory_peak      double precision NOT NULL,
			io               double precision NOT NULL,
			bytes            double precision NOT NULL,
			msgs             double precision NOT NULL,
			inter_node_bytes double precision NOT NULL,
			intra_node_bytes double precision NOT NULL,
			p2p_bytes        double precision NOT NULL,
			coll_bytes       double precision NOT NULL,
			rma_bytes        double precision NOT NULL,
			p2p_msgs         double precision NOT NULL,
			coll_msgs        double precision NOT NULL,
			rma_msgs         double precision NOT NULL,
			summary          bytea NOT NULL   -- JSON of store.JobSummary
		)`,
		`CREATE INDEX jobs_state_start ON jobs(state, start_ns)`,
		`CREATE INDEX jobs_end ON jobs(end_ns)`,
		`CREATE INDEX jobs_owner ON jobs(owner, start_ns)`,
		`CREATE TABLE job_processes (
			job  text NOT NULL,
			rank integer NOT NULL,
			data bytea NOT NULL,
			PRIMARY KEY (job, rank)
		)`,
		`CREATE TABLE job_samples (
			time_ns bigint NOT NULL,
			rank    integer NOT NULL,
			job     text NOT NULL,
			data    bytea NOT NULL,
			PRIMARY KEY (job, rank, time_ns)
		) PARTITION BY RANGE (time_ns)`,
		`CREATE INDEX job_samples_time ON job_samples(time_ns)`,
		`CREATE TABLE job_rollups (
			bucket_ns bigint NOT NULL,
			time_ns   bigint NOT NULL,
			rank      integer NOT NULL,
			width_s   integer NOT NULL,
			job       text NOT NULL,
			data      bytea NOT NULL,
			PRIMARY KEY (job, rank, width_s, bucket_ns)
		)`,
		`CREATE INDEX job_rollups_bucket ON job_rollups(width_s, bucket_ns)`,
		`CREATE TABLE link_job_samples (
			guid    bigint NOT NULL,
			time_ns bigint NOT NULL,
			span_ns bigint NOT NULL,
			bytes   bigint NOT NULL,
			port    smallint NOT NULL,
			job     text NOT NULL,
			PRIMARY KEY (guid, port, time_ns, job)
		) PARTITION BY RANGE (time_ns)`,
		`CREATE INDEX link_job_samples_job ON link_job_samples(job, time_ns)`,
		`CREATE INDEX link_job_samples_time ON link_job_samples(time_ns)`,
		`CREATE TABLE job_link_totals (
			guid  bigint NOT NULL,
			bytes bigint NOT NULL,
			port  smallint NOT NULL,
			job   text NOT NULL,
			PRIMARY KEY (job, guid, port)
		)`,
		// The partitions of the tables above, as created: parent table,
		// range [lo, hi) of time_ns, and the partition's name.
		`CREATE TABLE partitions (
			parent text NOT NULL,
			lo     bigint NOT NULL,
			hi     bigint NOT NULL,
			name   text NOT NULL UNIQUE,
			PRIMARY KEY (parent, lo)
		)`,
	}},
	{2, "fabric names: several collectors' fabrics in one database", []string{
		// Rows written before are the one fabric a daemon then had. A
		// constant default adds the column without rewriting the table.
		`ALTER TABLE topology_versions ADD COLUMN fabric text NOT NULL DEFAULT 'default'`,
		`CREATE INDEX topology_versions_fabric_from ON topology_versions(fabric, from_ns)`,
		`ALTER TABLE forwarding_tables ADD COLUMN fabric text NOT NULL DEFAULT 'default'`,
		`CREATE INDEX forwarding_tables_fabric_from ON forwarding_tables(fabric, from_ns)`,
		`ALTER TABLE events ADD COLUMN fabric text NOT NULL DEFAULT 'default'`,
		// jobs.fabric: the collector whose summary the row is, or '' when
		// several saved parts of the job: then job_parts holds each one's
		// (JSON of store.JobSummary) and jobs their join.
		`ALTER TABLE jobs ADD COLUMN fabric text NOT NULL DEFAULT 'default'`,
		`CREATE TABLE job_parts (
			job     text NOT NULL,
			fabric  text NOT NULL,
			summary bytea NOT NULL,
			PRIMARY KEY (job, fabric)
		)`,
	}},
}

// SchemaVersion is the version this code writes.
func SchemaVersion() int { return migrations[len(migrations)-1].version }

// migrate brings the database to SchemaVersion in one transaction under
// an advisory lock: a second daemon starting at the same time waits, then
// finds the schema current. PostgreSQL's DDL is transactional, so a failed
// step leaves the database as it was.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("migrate: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
		return fmt.Errorf("migrate: lock: %w", err)
	}
	var hasVersion, hasOurs bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass('schema_version') IS NOT NULL, to_regclass('port_samples') IS NOT NULL`).Scan(&hasVersion, &hasOurs); err != nil {
		return fmt.Errorf("migrate: read schema: %w", err)
	}
	if !hasVersion && hasOurs {
		return errors.New("the database has a port_samples table but no schema_version: it is not a Netloom database (use another database or schema)")
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)`); err != nil {
		return fmt.Errorf("migrate: create schema_version: %w", err)
	}
	var cur int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_version`).Scan(&cur); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	latest := SchemaVersion()
	if cur > latest {
		return fmt.Errorf("database schema version %d is newer than this Netloom understands (%d): upgrade Netloom or use a new database", cur, latest)
	}
	for _, m := range migrations {
		if m.version <= cur {
			continue
		}
		for i, stmt := range m.sql {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("migrate to schema %d (%s), step %d: %w", m.version, m.name, i+1, err)
			}
		}
		cur = m.version
	}
	if _, err := tx.Exec(ctx, `DELETE FROM schema_version`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO schema_version(version) VALUES ($1)`, cur); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("migrate: commit: %w", err)
	}
	return nil
}
