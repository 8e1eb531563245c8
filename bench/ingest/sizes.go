package main

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	sqlite3 "github.com/mattn/go-sqlite3"
)

// sizes are bytes on disk (table, its indexes and TOAST) and rows, by
// table: for port_samples the rows are port samples (a row holds a
// switch's ports), for the others rows.
type sizes struct {
	bytes, rows map[string]int64
}

var sizedTables = []string{"port_samples", "job_samples", "job_processes", "link_job_samples"}

// tableSizes measures the store the daemon wrote.
func tableSizes(db string) (sizes, error) {
	ctx := context.Background()
	out := sizes{map[string]int64{}, map[string]int64{}}
	if strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://") {
		c, err := pgx.Connect(ctx, db)
		if err != nil {
			return out, err
		}
		defer c.Close(ctx)
		for _, t := range sizedTables {
			// A partitioned table's bytes are its partitions'.
			var b int64
			if err := c.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c
				WHERE c.oid = $1::regclass OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = $1::regclass)`, t).Scan(&b); err != nil {
				return out, fmt.Errorf("size of %s: %w", t, err)
			}
			var n int64
			if err := c.QueryRow(ctx, rowsQuery(t)).Scan(&n); err != nil {
				return out, fmt.Errorf("rows of %s: %w", t, err)
			}
			out.bytes[t], out.rows[t] = b, n
		}
		return out, nil
	}
	// SQLite's per-table pages come from its dbstat table, compiled in
	// with the sqlite_dbstat build tag.
	d := sql.OpenDB(connector{"file:" + strings.TrimPrefix(db, "sqlite:") + "?mode=ro"})
	defer d.Close()
	for _, t := range sizedTables {
		var b int64
		if err := d.QueryRowContext(ctx, `SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name IN
			(SELECT name FROM sqlite_schema WHERE tbl_name = ?)`, t).Scan(&b); err != nil {
			return out, fmt.Errorf("SQLite sizes by table need dbstat (go run -tags sqlite_dbstat ./bench/ingest): %w", err)
		}
		var n int64
		if err := d.QueryRowContext(ctx, rowsQuery(t)).Scan(&n); err != nil {
			return out, fmt.Errorf("rows of %s: %w", t, err)
		}
		out.bytes[t], out.rows[t] = b, n
	}
	return out, nil
}

func rowsQuery(table string) string {
	if table == "port_samples" {
		return `SELECT coalesce(sum(ports), 0) FROM port_samples`
	}
	return `SELECT count(*) FROM ` + table
}

// connector opens the SQLite file without registering a driver name.
type connector struct{ dsn string }

func (c connector) Connect(context.Context) (driver.Conn, error) {
	return (&sqlite3.SQLiteDriver{}).Open(c.dsn)
}
func (c connector) Driver() driver.Driver { return &sqlite3.SQLiteDriver{} }
