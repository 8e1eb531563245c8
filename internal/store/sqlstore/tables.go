package sqlstore

import (
	"fmt"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/codec"
)

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

// ScanVersion scans a topology version's id, from_ns, until_ns (NULL: in
// force), nodes, links and fabric, then extra, from a row of either engine.
func ScanVersion(sc interface{ Scan(...any) error }, extra ...any) (store.Version, error) {
	var v store.Version
	var from int64
	var until *int64
	dst := append([]any{&v.ID, &from, &until, &v.Nodes, &v.Links, &v.Fabric}, extra...)
	if err := sc.Scan(dst...); err != nil {
		return v, err
	}
	v.From = codec.FromNS(from)
	if until != nil {
		v.Until = codec.FromNS(*until)
	}
	return v, nil
}

// MergeFabricVersions reads each fabric's topology version in force (rows
// of ScanVersion's columns then data: one per fabric) and merges them
// (store.MergeVersions).
func MergeFabricVersions(rows Rows) (*fabric.Topology, store.Version, error) {
	var parts []store.FabricVersion
	for rows.Next() {
		var data []byte
		v, err := ScanVersion(rows, &data)
		if err != nil {
			return nil, store.Version{}, err
		}
		t, err := codec.DecodeTopology(data)
		if err != nil {
			return nil, store.Version{}, fmt.Errorf("topology version %d: %w", v.ID, err)
		}
		parts = append(parts, store.FabricVersion{Version: v, Topology: t})
	}
	if err := rows.Err(); err != nil {
		return nil, store.Version{}, err
	}
	return store.MergeVersions(parts)
}
