// Package storecopy moves everything one store holds into another, of the
// same engine or not (netloom store copy): topology versions, forwarding
// tables, events, port samples and their rollups, jobs with their
// processes, process samples and their rollups, and link attribution.
//
// Both engines keep the same rows (codec's blobs, JSON summaries), so a
// copy moves rows, not API answers: that is what makes it exact (rollups,
// running totals and version ids cannot be rebuilt through the write API)
// and cheap. Rows travel in an engine-neutral form described by Tables;
// each engine reads them from one consistent snapshot, a batch at a time
// (bounded memory), and writes them into its own tables.
package storecopy

import (
	"context"
	"fmt"
	"slices"

	"github.com/netloom/netloom/internal/store"
)

// Kind is a column's type in transit.
type Kind int

// Column kinds and the Go values that carry them.
const (
	Int     Kind = iota // int64
	NullInt             // int64, or nil for NULL
	Float               // float64
	Text                // string
	Bytes               // []byte
)

// Column is one column of a table in transit.
type Column struct {
	Name string
	Kind Kind
	// Node marks a fabric GUID that the engines store as an id into
	// their nodes dictionary (node_id): rows carry the GUID.
	Node bool
	// Derived marks a column an engine may compute itself from the
	// others (SQLite generates jobs.owner); such an engine ignores it.
	Derived bool
}

// Table is one table in transit: its name (the same in both engines), its
// columns and the columns that order it (its key).
type Table struct {
	Name    string
	Columns []Column
	Key     []string
	// Time is the column rows are partitioned by, where an engine
	// partitions the table ("" for none).
	Time string
}

func cols(kind Kind, names ...string) []Column {
	c := make([]Column, len(names))
	for i, n := range names {
		c[i] = Column{Name: n, Kind: kind}
	}
	return c
}

func join(parts ...[]Column) []Column {
	var out []Column
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

var guid = []Column{{Name: "node_id", Kind: Int, Node: true}}

// Tables lists what a store holds, in the order a copy writes it. The
// nodes dictionary and the running totals are not copied: the target
// builds its own (FinishLoad).
var Tables = []*Table{
	{Name: "topology_versions", Key: []string{"id"},
		Columns: join(cols(Int, "id", "from_ns"), cols(NullInt, "until_ns"), cols(Int, "nodes", "links"), cols(Bytes, "hash", "data"), cols(Text, "fabric"))},
	{Name: "forwarding_tables", Key: []string{"id"},
		Columns: join(cols(Int, "id", "from_ns"), cols(Bytes, "hash", "data"), cols(Text, "fabric"))},
	{Name: "events", Key: []string{"id"},
		Columns: join(cols(Int, "id", "time_ns"), cols(Text, "kind"), cols(Int, "node", "port"), cols(Text, "detail", "fabric"))},
	{Name: "port_samples", Key: []string{"time_ns", "node_id"}, Time: "time_ns",
		Columns: join(guid, cols(Int, "time_ns", "ports"), cols(Bytes, "data"))},
	{Name: "port_rollups", Key: []string{"node_id", "width_s", "bucket_ns"},
		Columns: join(guid, cols(Int, "width_s", "bucket_ns", "time_ns", "ports"), cols(Bytes, "data"))},
	{Name: "jobs", Key: []string{"id"},
		Columns: join(cols(Text, "id", "state"), []Column{{Name: "owner", Kind: Text, Derived: true}},
			cols(Int, "start_ns"), cols(NullInt, "end_ns"), cols(Int, "updated_ns"),
			cols(Float, jobMetrics()...), cols(Bytes, "summary"), cols(Text, "fabric"))},
	{Name: "job_parts", Key: []string{"job", "fabric"},
		Columns: join(cols(Text, "job", "fabric"), cols(Bytes, "summary"))},
	{Name: "job_processes", Key: []string{"job", "rank"},
		Columns: join(cols(Text, "job"), cols(Int, "rank"), cols(Bytes, "data"))},
	{Name: "job_samples", Key: []string{"job", "rank", "time_ns"}, Time: "time_ns",
		Columns: join(cols(Text, "job"), cols(Int, "rank", "time_ns"), cols(Bytes, "data"))},
	{Name: "job_rollups", Key: []string{"job", "rank", "width_s", "bucket_ns"},
		Columns: join(cols(Text, "job"), cols(Int, "rank", "width_s", "bucket_ns", "time_ns"), cols(Bytes, "data"))},
	{Name: "link_job_samples", Key: []string{"guid", "port", "time_ns", "job"}, Time: "time_ns",
		Columns: join(cols(Int, "guid", "port", "time_ns"), cols(Text, "job"), cols(Int, "span_ns", "bytes"))},
	{Name: "job_link_totals", Key: []string{"job", "guid", "port"},
		Columns: join(cols(Text, "job"), cols(Int, "guid", "port", "bytes"))},
}

// jobMetrics are the jobs table's numeric columns (sqlstore's
// JobMetricColumns, which storetest cannot import): the sort keys but the
// times and the id.
func jobMetrics() []string {
	return slices.DeleteFunc(slices.Clone(store.JobSortKeys), func(k string) bool {
		return k == "start" || k == "end" || k == "updated" || k == "id"
	})
}

// Index returns the position of the named column, or -1.
func (t *Table) Index(name string) int {
	for i, c := range t.Columns {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// Engine is a store that can be copied from and into: both engines
// implement it.
type Engine interface {
	// ReadSnapshot calls fn with a Reader that sees one consistent
	// snapshot of the store while fn runs (writers may go on).
	ReadSnapshot(ctx context.Context, fn func(Reader) error) error
	// Load writes rows of t (as Reader.Rows gives them) into the store.
	// Rows must not repeat a key that is already stored.
	Load(ctx context.Context, t *Table, rows [][]any) error
	// FinishLoad brings what the engine keeps beside the rows (running
	// totals, id sequences) in line with what Load wrote.
	FinishLoad(ctx context.Context) error
	// Clear deletes everything the store holds, leaving the schema.
	Clear(ctx context.Context) error
}

// Reader reads one snapshot.
type Reader interface {
	// Count returns the number of rows of t.
	Count(ctx context.Context, t *Table) (int64, error)
	// Rows calls fn with t's rows in key order, at most batch at a time;
	// fn must not keep rows after it returns.
	Rows(ctx context.Context, t *Table, batch int, fn func(rows [][]any) error) error
}

// Scan makes the destinations a row of t is scanned into, and Values
// turns them back into the row's values; engines share them.
func Scan(t *Table) []any {
	d := make([]any, len(t.Columns))
	for i, c := range t.Columns {
		switch c.Kind {
		case Int:
			d[i] = new(int64)
		case NullInt:
			d[i] = new(*int64)
		case Float:
			d[i] = new(float64)
		case Text:
			d[i] = new(string)
		case Bytes:
			d[i] = new([]byte)
		default:
			panic(fmt.Sprintf("storecopy: column %s.%s: unknown kind %d", t.Name, c.Name, c.Kind))
		}
	}
	return d
}

// Values returns the values scanned into dst (from Scan), as a new row.
func Values(t *Table, dst []any) []any {
	row := make([]any, len(dst))
	for i, c := range t.Columns {
		switch c.Kind {
		case Int:
			row[i] = *dst[i].(*int64)
		case NullInt:
			if p := *dst[i].(**int64); p != nil {
				row[i] = *p
			} else {
				row[i] = nil
			}
		case Float:
			row[i] = *dst[i].(*float64)
		case Text:
			row[i] = *dst[i].(*string)
		case Bytes:
			b := *dst[i].(*[]byte)
			row[i] = append(make([]byte, 0, len(b)), b...) // never nil: NOT NULL
		}
	}
	return row
}
