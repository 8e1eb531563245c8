package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/codec"
	"github.com/netloom/netloom/internal/store/sqlstore"
)

// AddEvents implements store.Store.
func (s *Store) AddEvents(ctx context.Context, ev []fabric.Event) error {
	if err := sqlstore.CheckEvents(ev); err != nil {
		return err
	}
	if len(ev) == 0 {
		return nil
	}
	rows := make([][]any, len(ev))
	for i, e := range ev {
		rows[i] = []any{codec.NS(e.Time), e.Kind, guidInt(e.Node), int32(e.Port), e.Detail, s.opt.Fabric}
	}
	return s.writeTx(ctx, fmt.Sprintf("add %d events", len(ev)), nil, func(tx pgx.Tx) error {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"events"}, []string{"time_ns", "kind", "node", "port", "detail", "fabric"}, pgx.CopyFromRows(rows)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE totals SET value = value + $1 WHERE name = 'events'`, len(ev))
		return err
	})
}

// Events implements store.Store. Zero From or To leave that end open; a
// Limit of 0 or less returns all matches.
func (s *Store) Events(ctx context.Context, q store.EventQuery) ([]fabric.Event, error) {
	args := []any{codec.LowerBound(q.From), codec.UpperBound(q.To)}
	where := []string{"time_ns >= $1 AND time_ns <= $2"}
	if q.Kind != "" {
		args = append(args, q.Kind)
		where = append(where, fmt.Sprintf("kind = $%d", len(args)))
	}
	if q.Node != 0 {
		args = append(args, guidInt(q.Node))
		where = append(where, fmt.Sprintf("node = $%d", len(args)))
	}
	query := `SELECT time_ns, kind, node, port, detail, fabric FROM events WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY time_ns DESC, id DESC`
	if q.Limit > 0 {
		args = append(args, q.Limit)
		query += fmt.Sprintf(` LIMIT $%d`, len(args))
	}
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("query events (kind %q, node %s): %w", q.Kind, q.Node, err)
	}
	defer rows.Close()
	var out []fabric.Event
	for rows.Next() {
		var e fabric.Event
		var t, node int64
		var port int32
		if err := rows.Scan(&t, &e.Kind, &node, &port, &e.Detail, &e.Fabric); err != nil {
			return nil, fmt.Errorf("query events: %w", err)
		}
		e.Time, e.Node, e.Port = codec.FromNS(t), fabric.GUID(node), int(port)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("query events: %w", err)
	}
	return out, nil
}
