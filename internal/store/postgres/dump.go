package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/netloom/netloom/internal/store/sqlstore"
	"github.com/netloom/netloom/internal/store/sqlstore/sqlcopy"
	"github.com/netloom/netloom/internal/store/storecopy"
)

var _ storecopy.Engine = (*Store)(nil)

// initCopier makes the store's storecopy.Engine: tables emptied with TRUNCATE
// (partitions stay, empty, for retention to drop in time), and the id
// sequences moved past the ids copied.
func (s *Store) initCopier() {
	s.Copier = sqlcopy.Copier{S: &s.Store, Name: s.url,
		ClearTables: func(ctx context.Context, tx sqlstore.Tx, tables []string) error {
			_, err := tx.Exec(ctx, `TRUNCATE `+strings.Join(tables, ", "))
			return err
		},
		AfterLoad: func(ctx context.Context, tx sqlstore.Tx) error {
			for _, t := range []string{"topology_versions", "forwarding_tables", "events"} {
				if _, err := tx.Exec(ctx, fmt.Sprintf(`SELECT setval(pg_get_serial_sequence('%s', 'id'), coalesce(max(id), 0) + 1, false) FROM %s`, t, t)); err != nil {
					return fmt.Errorf("%s id sequence: %w", t, err)
				}
			}
			return nil
		}}
}
