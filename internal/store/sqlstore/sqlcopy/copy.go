// Package sqlcopy is storecopy.Engine written once for the SQL engines
// (sqlite, postgres) over sqlstore: an engine's Store embeds a Copier.
// It is a package of its own because storecopy's tests import sqlstore.
package sqlcopy

import (
	"context"
	"fmt"
	"strings"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store/sqlstore"
	"github.com/netloom/netloom/internal/store/storecopy"
)

// Copier implements storecopy.Engine over a sqlstore.Store.
type Copier struct {
	S *sqlstore.Store
	// Name names the database in messages.
	Name string
	// ClearTables empties the given tables in tx.
	ClearTables func(ctx context.Context, tx sqlstore.Tx, tables []string) error
	// AfterLoad, when not nil, runs last in FinishLoad's transaction
	// (PostgreSQL moves its id sequences past the ids copied).
	AfterLoad func(ctx context.Context, tx sqlstore.Tx) error
}

// ReadSnapshot implements storecopy.Engine: one read transaction, so every
// table is read as of one moment while the writer goes on.
func (c *Copier) ReadSnapshot(ctx context.Context, fn func(storecopy.Reader) error) error {
	err := c.S.Engine.Read(ctx, func(tx sqlstore.Tx) error { return fn(snapshot{tx}) })
	if err != nil {
		return fmt.Errorf("read %s: %w", c.Name, err)
	}
	return nil
}

type snapshot struct{ tx sqlstore.Tx }

func (r snapshot) Count(ctx context.Context, t *storecopy.Table) (int64, error) {
	var n int64
	_, err := r.tx.QueryRow(ctx, `SELECT count(*) FROM `+t.Name, nil, &n)
	return n, err
}

// Rows streams the table: the drivers read a query's rows as they are
// scanned, so a batch at a time is in memory. Integer columns of every
// width come as bigint.
func (r snapshot) Rows(ctx context.Context, t *storecopy.Table, batch int, fn func([][]any) error) error {
	sel := make([]string, len(t.Columns))
	from := t.Name + " t"
	for i, c := range t.Columns {
		sel[i] = "t." + c.Name
		if c.Node {
			sel[i] = "n.guid"
			from += " JOIN nodes n ON n.id = t." + c.Name
		}
		if c.Kind == storecopy.Int || c.Kind == storecopy.NullInt {
			sel[i] = "CAST(" + sel[i] + " AS BIGINT)"
		}
	}
	key := make([]string, len(t.Key))
	for i, k := range t.Key {
		key[i] = "t." + k
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

// Load implements storecopy.Engine: the rows in one transaction, once
// their partitions exist, GUIDs turned into this database's node ids.
func (c *Copier) Load(ctx context.Context, t *storecopy.Table, rows [][]any) error {
	if len(rows) == 0 {
		return nil
	}
	var names []string
	var idx []int
	for i, col := range t.Columns {
		if col.Derived && c.S.Dialect.Generated { // computed by the engine
			continue
		}
		names, idx = append(names, col.Name), append(idx, i)
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
	var guids []fabric.GUID
	for _, row := range rows {
		for _, i := range idx {
			if t.Columns[i].Node {
				guids = append(guids, fabric.GUID(row[i].(int64)))
			}
		}
	}
	return c.S.WriteNodes(ctx, fmt.Sprintf("load %d rows of %s", len(rows), t.Name), need, func(tx sqlstore.Tx, learnt map[fabric.GUID]int64) error {
		ids, err := c.S.NodeIDs(ctx, tx, guids, learnt)
		if err != nil {
			return err
		}
		in := make([][]any, len(rows))
		for r, row := range rows {
			v := make([]any, len(idx))
			for j, i := range idx {
				v[j] = row[i]
				if t.Columns[i].Node {
					v[j] = ids[fabric.GUID(row[i].(int64))]
				}
			}
			in[r] = v
		}
		// Identity values are taken as given; FinishLoad moves
		// sequences past them where the engine has any.
		return tx.Insert(ctx, t.Name, names, in)
	})
}

// FinishLoad implements storecopy.Engine: the running totals recounted.
func (c *Copier) FinishLoad(ctx context.Context) error {
	return c.S.Engine.Write(ctx, "finish load", nil, func(tx sqlstore.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE totals SET value = CASE name
			WHEN 'port_samples' THEN (SELECT coalesce(sum(ports), 0) FROM port_samples)
			WHEN 'port_rollups' THEN (SELECT coalesce(sum(ports), 0) FROM port_rollups)
			WHEN 'events' THEN (SELECT count(*) FROM events) ELSE value END`); err != nil {
			return fmt.Errorf("totals: %w", err)
		}
		if c.AfterLoad != nil {
			return c.AfterLoad(ctx, tx)
		}
		return nil
	})
}

// Clear implements storecopy.Engine.
func (c *Copier) Clear(ctx context.Context) error {
	names := make([]string, 0, len(storecopy.Tables)+1)
	for _, t := range storecopy.Tables {
		names = append(names, t.Name)
	}
	names = append(names, "nodes")
	err := c.S.Engine.Write(ctx, "clear "+c.Name, nil, func(tx sqlstore.Tx) error {
		if err := c.ClearTables(ctx, tx, names); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE totals SET value = 0`)
		return err
	})
	c.S.ForgetNodes()
	return err
}
