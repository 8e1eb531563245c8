package sqlite

import (
	"context"
	"fmt"

	"github.com/netloom/netloom/internal/store/sqlstore"
	"github.com/netloom/netloom/internal/store/sqlstore/sqlcopy"
	"github.com/netloom/netloom/internal/store/storecopy"
)

var _ storecopy.Engine = (*Store)(nil)

// initCopier makes the store's storecopy.Engine: SQLite empties
// tables with DELETE.
func (s *Store) initCopier() {
	s.Copier = sqlcopy.Copier{S: &s.Store, Name: s.path,
		ClearTables: func(ctx context.Context, tx sqlstore.Tx, tables []string) error {
			for _, t := range tables {
				if _, err := tx.Exec(ctx, `DELETE FROM `+t); err != nil {
					return fmt.Errorf("%s: %w", t, err)
				}
			}
			return nil
		}}
}
