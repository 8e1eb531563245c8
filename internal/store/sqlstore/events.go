package sqlstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/codec"
)

// AddEvents implements store.Store.
func (s *Store) AddEvents(ctx context.Context, ev []fabric.Event) error {
	if err := CheckEvents(ev); err != nil {
		return err
	}
	if len(ev) == 0 {
		return nil
	}
	rows := make([][]any, len(ev))
	for i, e := range ev {
		rows[i] = []any{codec.NS(e.Time), e.Kind, int64(e.Node), e.Port, e.Detail, s.Fabric}
	}
	return s.Engine.Write(ctx, fmt.Sprintf("add %d events", len(ev)), nil, func(tx Tx) error {
		if err := tx.Insert(ctx, "events", []string{"time_ns", "kind", "node", "port", "detail", "fabric"}, rows); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE totals SET value = value + ? WHERE name = 'events'`, len(ev))
		return err
	})
}

// eventsWhere is the condition selecting q's events, with its arguments.
func eventsWhere(q store.EventQuery) (string, []any) {
	args := []any{codec.LowerBound(q.From), codec.UpperBound(q.To)}
	where := []string{"time_ns >= ? AND time_ns <= ?"}
	if q.Kind != "" {
		where = append(where, "kind = ?")
		args = append(args, q.Kind)
	}
	if q.Node != 0 {
		where = append(where, "node = ?")
		args = append(args, int64(q.Node))
	}
	return strings.Join(where, " AND "), args
}

// EventCount implements store.Store.
func (s *Store) EventCount(ctx context.Context, q store.EventQuery) (int, error) {
	where, args := eventsWhere(q)
	var n int64
	if _, err := s.Engine.Reader().QueryRow(ctx, `SELECT count(*) FROM events WHERE `+where, args, &n); err != nil {
		return 0, fmt.Errorf("count events (kind %q, node %s): %w", q.Kind, q.Node, err)
	}
	return int(n), nil
}

// Events implements store.Store. Zero From or To leave that end open; a
// Limit of 0 or less returns all matches.
func (s *Store) Events(ctx context.Context, q store.EventQuery) ([]fabric.Event, error) {
	where, args := eventsWhere(q)
	query := `SELECT time_ns, kind, node, port, detail, fabric FROM events WHERE ` + where + ` ORDER BY time_ns DESC, id DESC`
	if q.Limit > 0 {
		query += ` LIMIT ?`
		args = append(args, q.Limit)
	}
	rows, err := s.Engine.Reader().Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("query events (kind %q, node %s): %w", q.Kind, q.Node, err)
	}
	defer rows.Close()
	var out []fabric.Event
	for rows.Next() {
		var e fabric.Event
		var t, node int64
		if err := rows.Scan(&t, &e.Kind, &node, &e.Port, &e.Detail, &e.Fabric); err != nil {
			return nil, fmt.Errorf("query events: %w", err)
		}
		e.Time, e.Node = codec.FromNS(t), fabric.GUID(node)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("query events: %w", err)
	}
	return out, nil
}
