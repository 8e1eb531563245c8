package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/netloom/netloom/internal/store/sqlstore"
)

// pgTx is sqlstore.Tx over pgx: a transaction or the pool. Statements'
// ? placeholders become PostgreSQL's $1, $2, ...
type pgTx struct {
	q interface {
		Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
		Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
		QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	}
}

func (t pgTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := t.q.Exec(ctx, sqlstore.Dollar(query), args...)
	return tag.RowsAffected(), err
}

func (t pgTx) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	rows, err := t.q.Query(ctx, sqlstore.Dollar(query), args...)
	if err != nil {
		return nil, err
	}
	return pgRows{rows}, nil
}

func (t pgTx) QueryRow(ctx context.Context, query string, args []any, dst ...any) (bool, error) {
	err := t.q.QueryRow(ctx, sqlstore.Dollar(query), args...).Scan(dst...)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// Insert implements sqlstore.Tx with COPY.
func (t pgTx) Insert(ctx context.Context, table string, cols []string, rows [][]any) error {
	tx, ok := t.q.(pgx.Tx)
	if !ok {
		return errors.New("insert outside a transaction")
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromRows(rows))
	return err
}

// Upsert implements sqlstore.Tx with COPY through a staging table.
func (t pgTx) Upsert(ctx context.Context, table string, cols, key []string, set string, rows [][]any) error {
	tx, ok := t.q.(pgx.Tx)
	if !ok {
		return errors.New("upsert outside a transaction")
	}
	return copyUpsert(ctx, tx, table, cols, key, set, rows)
}

// pgRows are sqlstore.Rows: a *sqlstore.RawBytes is the column's bytes
// as pgx read them from the connection, without a copy.
type pgRows struct{ pgx.Rows }

func (r pgRows) Scan(dest ...any) error {
	var args []any
	for i, d := range dest {
		if _, ok := d.(*sqlstore.RawBytes); ok {
			if args == nil {
				args = append([]any(nil), dest...)
			}
			args[i] = nil // pgx skips the column
		}
	}
	if args == nil {
		return r.Rows.Scan(dest...)
	}
	if err := r.Rows.Scan(args...); err != nil {
		return err
	}
	vals := r.RawValues()
	for i, d := range dest {
		if b, ok := d.(*sqlstore.RawBytes); ok {
			*b = vals[i]
		}
	}
	return nil
}

// Write implements sqlstore.Engine.
func (s *Store) Write(ctx context.Context, what string, need []sqlstore.Need, fn func(tx sqlstore.Tx) error) error {
	parts := make([]partNeed, len(need))
	for i, n := range need {
		parts[i] = partNeed{n.Table, n.Times}
	}
	return s.writeTx(ctx, what, parts, func(tx pgx.Tx) error { return fn(pgTx{tx}) })
}

// Read implements sqlstore.Engine.
func (s *Store) Read(ctx context.Context, fn func(tx sqlstore.Tx) error) error {
	return s.readTx(ctx, func(tx pgx.Tx) error { return fn(pgTx{tx}) })
}

// Reader implements sqlstore.Engine.
func (s *Store) Reader() sqlstore.Tx { return pgTx{s.pool} }
