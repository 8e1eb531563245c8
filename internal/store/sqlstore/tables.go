package sqlstore

import (
	"fmt"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/codec"
)

// Rows is a query's result rows, as both engines' drivers give them.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// MergeFabricTables reads each fabric's forwarding tables in force at at
// (rows of from_ns, data: one per fabric) and joins them (store.MergeTables).
func MergeFabricTables(rows Rows, at time.Time) (fabric.ForwardingTables, time.Time, error) {
	var parts []fabric.ForwardingTables
	var froms []time.Time
	for rows.Next() {
		var from int64
		var data []byte
		if err := rows.Scan(&from, &data); err != nil {
			return nil, time.Time{}, fmt.Errorf("forwarding tables at %s: %w", at.Format(time.RFC3339), err)
		}
		ft, err := codec.DecodeStoredTables(data)
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("forwarding tables from %s: %w", codec.FromNS(from).Format(time.RFC3339), err)
		}
		parts, froms = append(parts, ft), append(froms, codec.FromNS(from))
	}
	if err := rows.Err(); err != nil {
		return nil, time.Time{}, fmt.Errorf("forwarding tables at %s: %w", at.Format(time.RFC3339), err)
	}
	if len(parts) == 0 {
		return nil, time.Time{}, fmt.Errorf("forwarding tables at %s: %w", at.Format(time.RFC3339), store.ErrNotFound)
	}
	ft, from := store.MergeTables(parts, froms)
	return ft, from, nil
}
