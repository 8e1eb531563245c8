package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// copyUpsert writes rows into table with COPY through a temporary staging
// table, then moves them over with INSERT … ON CONFLICT (key) DO UPDATE
// SET set: COPY alone cannot replace rows. Rows must not repeat a key.
func copyUpsert(ctx context.Context, tx pgx.Tx, table string, cols, key []string, set string, rows [][]any) error {
	stage := pgx.Identifier{"stage_" + table}.Sanitize()
	if _, err := tx.Exec(ctx, `CREATE TEMPORARY TABLE IF NOT EXISTS `+stage+` (LIKE `+pgx.Identifier{table}.Sanitize()+`) ON COMMIT DELETE ROWS`); err != nil {
		return fmt.Errorf("staging table for %s: %w", table, err)
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"stage_" + table}, cols, pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("copy into %s: %w", table, err)
	}
	c := strings.Join(cols, ", ")
	q := fmt.Sprintf(`INSERT INTO %s (%s) SELECT %s FROM %s ON CONFLICT (%s) DO UPDATE SET %s`,
		pgx.Identifier{table}.Sanitize(), c, c, stage, strings.Join(key, ", "), set)
	if _, err := tx.Exec(ctx, q); err != nil {
		return fmt.Errorf("upsert into %s: %w", table, err)
	}
	// ON COMMIT DELETE ROWS empties it at the end; empty it now for the
	// next call in the same transaction.
	if _, err := tx.Exec(ctx, `TRUNCATE `+stage); err != nil {
		return fmt.Errorf("staging table for %s: %w", table, err)
	}
	return nil
}
