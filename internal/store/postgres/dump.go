package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store/sqlstore"
	"github.com/netloom/netloom/internal/store/storecopy"
)

var _ storecopy.Engine = (*Store)(nil)

// ReadSnapshot implements storecopy.Engine: one read-only repeatable-read
// transaction, so every table is read as of one moment while daemons go
// on writing.
func (s *Store) ReadSnapshot(ctx context.Context, fn func(storecopy.Reader) error) error {
	err := s.readTx(ctx, func(tx pgx.Tx) error { return fn(snapshot{tx}) })
	if err != nil {
		return fmt.Errorf("read %s: %w", s.url, err)
	}
	return nil
}

type snapshot struct{ tx pgx.Tx }

func (r snapshot) Count(ctx context.Context, t *storecopy.Table) (int64, error) {
	var n int64
	err := r.tx.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{t.Name}.Sanitize()).Scan(&n)
	return n, err
}

// Rows streams the table: pgx reads a query's rows from the connection
// as they are scanned, so a batch at a time is in memory.
func (r snapshot) Rows(ctx context.Context, t *storecopy.Table, batch int, fn func([][]any) error) error {
	sel := make([]string, len(t.Columns))
	from := pgx.Identifier{t.Name}.Sanitize() + " t"
	for i, c := range t.Columns {
		sel[i] = "t." + c.Name
		if c.Node {
			sel[i] = "n.guid"
			from += " JOIN nodes n ON n.id = t." + c.Name
		}
	}
	key := make([]string, len(t.Key))
	for i, k := range t.Key {
		key[i] = "t." + k
	}
	// Integer columns of every width come as bigint and text sorts
	// bytewise, as in SQLite.
	for i, c := range t.Columns {
		if c.Kind == storecopy.Int || c.Kind == storecopy.NullInt {
			sel[i] += "::bigint"
		}
	}
	rows, err := r.tx.Query(ctx, `SELECT `+strings.Join(sel, ", ")+` FROM `+from+` ORDER BY `+strings.Join(key, ", "))
	if err != nil {
		return err
	}
	defer rows.Close()
	dst := storecopy.Scan(t)
	out := make([][]any, 0, batch)
	for rows.Next() {
		if err := rows.Scan(dst...); err != nil {
			return err
		}
		out = append(out, storecopy.Values(t, dst))
		if len(out) == batch {
			if err := fn(out); err != nil {
				return err
			}
			out = out[:0]
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(out) > 0 {
		return fn(out)
	}
	return nil
}

// Load implements storecopy.Engine: the rows with COPY in one
// transaction, once their partitions exist, GUIDs turned into this
// database's node ids.
func (s *Store) Load(ctx context.Context, t *storecopy.Table, rows [][]any) error {
	if len(rows) == 0 {
		return nil
	}
	names := make([]string, len(t.Columns))
	node := -1
	for i, c := range t.Columns {
		names[i] = c.Name
		if c.Node {
			node = i
		}
	}
	var need []sqlstore.Need
	if t.Time != "" {
		ti := t.Index(t.Time)
		times := make([]int64, len(rows))
		for i, row := range rows {
			times[i] = row[ti].(int64)
		}
		need = []sqlstore.Need{{Table: t.Name, Times: times}}
	}
	return s.WriteNodes(ctx, fmt.Sprintf("load %d rows of %s", len(rows), t.Name), need, func(tx sqlstore.Tx, learnt map[fabric.GUID]int64) error {
		in := rows
		if node >= 0 {
			var guids []fabric.GUID
			for _, row := range rows {
				guids = append(guids, fabric.GUID(row[node].(int64)))
			}
			ids, err := s.NodeIDs(ctx, tx, guids, learnt)
			if err != nil {
				return err
			}
			in = make([][]any, len(rows))
			for i, row := range rows {
				r := append([]any(nil), row...)
				r[node] = ids[fabric.GUID(row[node].(int64))]
				in[i] = r
			}
		}
		// COPY takes identity values as given, GENERATED ALWAYS or not;
		// FinishLoad moves the sequences past them.
		return tx.Insert(ctx, t.Name, names, in)
	})
}

// FinishLoad implements storecopy.Engine: the running totals recounted
// and the id sequences moved past the ids copied.
func (s *Store) FinishLoad(ctx context.Context) error {
	return s.writeTx(ctx, "finish load", nil, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE totals SET value = CASE name
			WHEN 'port_samples' THEN (SELECT coalesce(sum(ports), 0) FROM port_samples)
			WHEN 'port_rollups' THEN (SELECT coalesce(sum(ports), 0) FROM port_rollups)
			WHEN 'events' THEN (SELECT count(*) FROM events) ELSE value END`); err != nil {
			return fmt.Errorf("totals: %w", err)
		}
		for _, t := range []string{"topology_versions", "forwarding_tables", "events"} {
			if _, err := tx.Exec(ctx, fmt.Sprintf(`SELECT setval(pg_get_serial_sequence('%s', 'id'), coalesce(max(id), 0) + 1, false) FROM %s`, t, t)); err != nil {
				return fmt.Errorf("%s id sequence: %w", t, err)
			}
		}
		return nil
	})
}

// Clear implements storecopy.Engine. Partitions stay (empty); retention
// drops them in time.
func (s *Store) Clear(ctx context.Context) error {
	names := make([]string, 0, len(storecopy.Tables)+1)
	for _, t := range storecopy.Tables {
		names = append(names, pgx.Identifier{t.Name}.Sanitize())
	}
	names = append(names, "nodes")
	err := s.writeTx(ctx, "clear "+s.url, nil, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `TRUNCATE `+strings.Join(names, ", ")); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE totals SET value = 0`)
		return err
	})
	s.ForgetNodes()
	return err
}
