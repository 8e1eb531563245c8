package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/netloom/netloom/internal/store/sqlstore"
)

// sqlTx is sqlstore.Tx over database/sql: a transaction, whose
// statements are prepared once each, or the reader pool (tx nil). SQLite
// reads ? placeholders as they are.
type sqlTx struct {
	db    *sql.DB
	tx    *sql.Tx
	stmts map[string]*sql.Stmt
}

func newTx(tx *sql.Tx) *sqlTx { return &sqlTx{tx: tx, stmts: map[string]*sql.Stmt{}} }

// stmt returns query prepared in the transaction.
func (t *sqlTx) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := t.stmts[query]; ok {
		return st, nil
	}
	st, err := t.tx.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	t.stmts[query] = st
	return st, nil
}

// close closes the statements prepared.
func (t *sqlTx) close() {
	for _, st := range t.stmts {
		st.Close()
	}
}

func (t *sqlTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	var res sql.Result
	var err error
	if t.tx == nil {
		res, err = t.db.ExecContext(ctx, query, args...)
	} else {
		var st *sql.Stmt
		if st, err = t.stmt(ctx, query); err == nil {
			res, err = st.ExecContext(ctx, args...)
		}
	}
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (t *sqlTx) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	var rows *sql.Rows
	var err error
	if t.tx == nil {
		rows, err = t.db.QueryContext(ctx, query, args...)
	} else {
		var st *sql.Stmt
		if st, err = t.stmt(ctx, query); err == nil {
			rows, err = st.QueryContext(ctx, args...)
		}
	}
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

func (t *sqlTx) QueryRow(ctx context.Context, query string, args []any, dst ...any) (bool, error) {
	var row *sql.Row
	if t.tx == nil {
		row = t.db.QueryRowContext(ctx, query, args...)
	} else {
		st, err := t.stmt(ctx, query)
		if err != nil {
			return false, err
		}
		row = st.QueryRowContext(ctx, args...)
	}
	err := row.Scan(dst...)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// Insert implements sqlstore.Tx: one statement, run row by row.
func (t *sqlTx) Insert(ctx context.Context, table string, cols []string, rows [][]any) error {
	return t.Upsert(ctx, table, cols, nil, "", rows)
}

// Upsert implements sqlstore.Tx.
func (t *sqlTx) Upsert(ctx context.Context, table string, cols, key []string, set string, rows [][]any) error {
	q := `INSERT INTO ` + table + `(` + strings.Join(cols, ", ") + `) VALUES (?` + strings.Repeat(", ?", len(cols)-1) + `)`
	if key != nil {
		q += ` ON CONFLICT (` + strings.Join(key, ", ") + `) DO UPDATE SET ` + set
	}
	for _, row := range rows {
		if _, err := t.Exec(ctx, q, row...); err != nil {
			return fmt.Errorf("%s: %w", table, err)
		}
	}
	return nil
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
	return s.writeTx(ctx, what, func(tx *sql.Tx) error {
		t := newTx(tx)
		defer t.close()
		return fn(t)
	})
}

// Read implements sqlstore.Engine: a read transaction, which in WAL mode
// sees one snapshot while the writer goes on.
func (s *Store) Read(ctx context.Context, fn func(tx sqlstore.Tx) error) error {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	t := newTx(tx)
	defer t.close()
	return fn(t)
}

// Reader implements sqlstore.Engine.
func (s *Store) Reader() sqlstore.Tx { return &sqlTx{db: s.r} }
