package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/netloom/netloom/internal/store/sqlstore"
)

// sqlTx is sqlstore.Tx over database/sql: a transaction or the reader
// pool. SQLite reads ? placeholders as they are.
type sqlTx struct {
	q interface {
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	}
}

func (t sqlTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := t.q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (t sqlTx) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	rows, err := t.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

func (t sqlTx) QueryRow(ctx context.Context, query string, args []any, dst ...any) (bool, error) {
	err := t.q.QueryRowContext(ctx, query, args...).Scan(dst...)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// sqlRows are sqlstore.Rows: a *sqlstore.RawBytes is scanned as
// sql.RawBytes, which database/sql hands over without a copy.
type sqlRows struct{ *sql.Rows }

func (r sqlRows) Scan(dest ...any) error {
	for i, d := range dest {
		if b, ok := d.(*sqlstore.RawBytes); ok {
			dest[i] = (*sql.RawBytes)(b)
		}
	}
	return r.Rows.Scan(dest...)
}

func (r sqlRows) Close() { r.Rows.Close() }

// Write implements sqlstore.Engine.
func (s *Store) Write(ctx context.Context, what string, _ []sqlstore.Need, fn func(tx sqlstore.Tx) error) error {
	return s.writeTx(ctx, what, func(tx *sql.Tx) error { return fn(sqlTx{tx}) })
}

// Read implements sqlstore.Engine: a read transaction, which in WAL mode
// sees one snapshot while the writer goes on.
func (s *Store) Read(ctx context.Context, fn func(tx sqlstore.Tx) error) error {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return fn(sqlTx{tx})
}

// Reader implements sqlstore.Engine.
func (s *Store) Reader() sqlstore.Tx { return sqlTx{s.r} }
