package sqlstore

import (
	"cmp"
	"context"
	"strconv"
	"strings"
	"sync"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/codec"
)

// Tx runs statements in one of an engine's transactions, or on its
// read pool outside one. Statements are written with ? placeholders;
// an engine whose driver numbers them ($1, $2, ...) rewrites them
// (Dollar).
type Tx interface {
	// Exec runs a statement and returns how many rows it changed.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// Query runs a query; the caller closes the rows.
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	// QueryRow scans a query's first row into dst; ok is false when it
	// has none.
	QueryRow(ctx context.Context, query string, args []any, dst ...any) (ok bool, err error)
	// Insert writes rows of cols into table, many at once where the
	// engine can (PostgreSQL's COPY).
	Insert(ctx context.Context, table string, cols []string, rows [][]any) error
	// Upsert is Insert where a row whose key columns are taken updates
	// the row there as set says (an ON CONFLICT … DO UPDATE SET clause).
	// Rows must not repeat a key.
	Upsert(ctx context.Context, table string, cols, key []string, set string, rows [][]any) error
}

// Rows are a query's result rows. Scan takes a *RawBytes for a column
// read without a copy.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// RawBytes is a column's value as the driver holds it: valid only until
// the next call of Next, Scan or Close.
type RawBytes []byte

// Engine is what a SQL engine supplies under the logic of Store: its
// transactions.
type Engine interface {
	// Write runs fn in one write transaction, under the store's writer
	// lock; need names the rows of partitioned tables about to be
	// written (an engine without partitions ignores it). The error
	// names what.
	Write(ctx context.Context, what string, need []Need, fn func(tx Tx) error) error
	// Read runs fn in one read-only transaction that sees one snapshot.
	Read(ctx context.Context, fn func(tx Tx) error) error
	// Reader runs single reads outside a transaction.
	Reader() Tx
	Pruner
}

// Need says that rows of Table at these times (nanoseconds) are about
// to be written.
type Need struct {
	Table string
	Times []int64
}

// Store is the logic of store.Store that the SQL engines share, written
// once against an Engine's transactions and statements both engines
// understand; what they write differently is in Dialect. An engine's
// Store embeds it and calls Init.
type Store struct {
	Engine  Engine
	Dialect *Dialect
	// Fabric names the fabric this store writes (store.Store).
	Fabric string
	Limits

	// Under the engine's writer lock: the encoder of sample rows and
	// the fold's state.
	enc  codec.Encoder
	fold Folder

	nodes    nodeIDs
	decoders sync.Pool
}

// Limits bound what one prune or rollup transaction touches.
type Limits struct {
	// PruneChunk is how many rows one prune transaction deletes.
	PruneChunk int
	// RollupPortRows and RollupProcessRows are how many expired port
	// rows (one switch's ports of one sweep) and process rows (one
	// rank's interval) one rollup transaction folds.
	RollupPortRows, RollupProcessRows int
}

// DefaultLimits are the limits an engine's options leave at 0 take.
var DefaultLimits = Limits{PruneChunk: 2000, RollupPortRows: 256, RollupProcessRows: 4096}

// Init makes s the shared logic of engine e, writing the fabric named
// fabricName (default store.DefaultFabric) within limits l.
func (s *Store) Init(e Engine, d *Dialect, fabricName string, l Limits) error {
	if fabricName == "" {
		fabricName = store.DefaultFabric
	}
	if err := store.CheckFabricName("fabric name", fabricName); err != nil {
		return err
	}
	l.PruneChunk = cmp.Or(max(l.PruneChunk, 0), DefaultLimits.PruneChunk)
	l.RollupPortRows = cmp.Or(max(l.RollupPortRows, 0), DefaultLimits.RollupPortRows)
	l.RollupProcessRows = cmp.Or(max(l.RollupProcessRows, 0), DefaultLimits.RollupProcessRows)
	s.Engine, s.Dialect, s.Fabric, s.Limits = e, d, fabricName, l
	s.nodes.ids = map[fabric.GUID]int64{}
	s.decoders.New = func() any { return new(codec.Decoder) }
	return nil
}

// Dialect is what an engine's SQL says differently.
type Dialect struct {
	// Lock is run first in a transaction that saves topology versions
	// or forwarding tables, with the table's name, so that daemons on
	// one database save in turn; nil when the engine's write
	// transactions already exclude each other.
	Lock func(table string) string
	// Arrays: a list is one array argument (col = ANY(?)); else one
	// argument per element (col IN (?, ?, ...)), and port rows are
	// read switch by switch, each query's plan a single index range.
	Arrays bool
	// LatestRaw selects (guid, time_ns, data) of each switch's newest
	// raw row at or before its argument.
	LatestRaw string
	// Unique tells an error of a row whose key is already stored.
	Unique func(error) bool
	// NoLimit is the LIMIT argument that limits nothing.
	NoLimit any
	// Generated: the engine computes jobs.owner itself (SQLite's
	// generated column), so it is not written.
	Generated bool
	// JobLock, when not nil, is the statement (and its arguments) run
	// first in a transaction that saves job id, so that collectors
	// saving parts of one job join them in turn.
	JobLock func(id string) (string, []any)
	// Bytewise is the collation clause that orders text bytewise ("" when
	// the engine's default does).
	Bytewise string
	// PruneLock, when not empty, is run first in every transaction of
	// PruneStep, so that daemons sharing a database prune in turn.
	PruneLock string
	// Partitioned: Pruner.DropExpired may drop rows wholesale.
	Partitioned bool
	// LinkJobsOfPorts, when not empty, is LinkJobs' query of a list of
	// ports, with arguments guids and ports (as arrays), from and to;
	// else LinkJobs queries port by port.
	LinkJobsOfPorts string
}

// In is the condition that col is one of vals, and its arguments.
func In[T any](d *Dialect, col string, vals []T) (string, []any) {
	if d.Arrays {
		return col + " = ANY(?)", []any{vals}
	}
	args := make([]any, len(vals))
	for i, v := range vals {
		args[i] = v
	}
	return col + " IN (?" + repeat(", ?", len(vals)-1) + ")", args
}

// repeat is strings.Repeat, none for n < 0.
func repeat(s string, n int) string { return strings.Repeat(s, max(n, 0)) }

// lock runs the dialect's lock of table in tx, if any.
func (s *Store) lock(ctx context.Context, tx Tx, table string) error {
	if s.Dialect.Lock == nil {
		return nil
	}
	_, err := tx.Exec(ctx, s.Dialect.Lock(table))
	return err
}

// Dollar rewrites a statement's ? placeholders as $1, $2, ..., leaving
// quoted strings and identifiers as they are.
func Dollar(q string) string {
	if !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	var quote byte
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
