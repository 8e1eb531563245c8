package sqlite

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/codec"
	"github.com/netloom/netloom/internal/store/storetest"
)

// testOptions use tiny chunks, so that every prune and rollup takes many
// steps and buckets are split between transactions.
var testOptions = Options{PruneChunk: 3, RollupPortRows: 2, RollupProcessRows: 3}

func openTemp(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "netloom.db"), testOptions)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openTemp(t) }, func(t *testing.T, st store.Store) store.Store {
		t.Helper()
		path := st.(*Store).path
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		s, err := Open(context.Background(), path, testOptions)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestReopenKeepsData(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a b?#%.db") // URI-special characters
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddPortSamples(ctx, storetest.Sweep(2, 3, 0, storetest.T0)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.SaveTopology(ctx, storetest.Topo(2, 2, "EDR"), storetest.T0); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Stats(ctx)
	if err != nil || st.PortSamples != 6 || st.Versions != 1 {
		t.Fatalf("after reopen: %+v %v", st, err)
	}
	// The node dictionary is reloaded from the file: a second sweep of the
	// same switches reuses their ids.
	if err := s.AddPortSamples(ctx, storetest.Sweep(2, 3, 1, storetest.T0.Add(time.Minute))); err != nil {
		t.Fatal(err)
	}
	var nodes int
	if err := s.r.QueryRow(`SELECT COUNT(*) FROM nodes`).Scan(&nodes); err != nil || nodes != 2 {
		t.Errorf("nodes = %d (%v), want 2", nodes, err)
	}
}

// TestMigrateFromV1 builds a version-1 database by hand, as an older
// Netloom left it, and checks Open migrates it and keeps its data.
func TestMigrateFromV1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v1.db")
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	var enc codec.Encoder
	blob, err := enc.EncodeSwitch(nil, storetest.Sweep(1, 4, 0, storetest.T0))
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`PRAGMA application_id = 1313624909`,
		`CREATE TABLE schema_version (version INTEGER NOT NULL)`,
		`INSERT INTO schema_version VALUES (1)`,
		`CREATE TABLE topology_versions (id INTEGER PRIMARY KEY, from_ns INTEGER NOT NULL, until_ns INTEGER,
			nodes INTEGER NOT NULL, links INTEGER NOT NULL, hash BLOB NOT NULL, data BLOB NOT NULL)`,
		`CREATE INDEX topology_versions_from ON topology_versions(from_ns)`,
		`CREATE TABLE forwarding_tables (id INTEGER PRIMARY KEY, from_ns INTEGER NOT NULL, hash BLOB NOT NULL, data BLOB NOT NULL)`,
		`CREATE INDEX forwarding_tables_from ON forwarding_tables(from_ns)`,
		`CREATE TABLE events (id INTEGER PRIMARY KEY, time_ns INTEGER NOT NULL, kind TEXT NOT NULL,
			node INTEGER NOT NULL, port INTEGER NOT NULL, detail TEXT NOT NULL)`,
		`CREATE INDEX events_time ON events(time_ns)`,
		`CREATE TABLE nodes (id INTEGER PRIMARY KEY, guid INTEGER NOT NULL UNIQUE)`,
		`CREATE TABLE port_samples (id INTEGER PRIMARY KEY, time_ns INTEGER NOT NULL,
			node_id INTEGER NOT NULL REFERENCES nodes(id), ports INTEGER NOT NULL, data BLOB NOT NULL)`,
		`CREATE UNIQUE INDEX port_samples_node_time ON port_samples(node_id, time_ns)`,
		`CREATE INDEX port_samples_time ON port_samples(time_ns)`,
		`INSERT INTO nodes(id, guid) VALUES (1, 4096)`,
		`INSERT INTO events(time_ns, kind, node, port, detail) VALUES (` + itoa(storetest.T0.UnixNano()) + `, 'link_down', 4096, 3, 'old')`,
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if _, err := db.Exec(`INSERT INTO port_samples(time_ns, node_id, ports, data) VALUES (?, 1, 4, ?)`, storetest.T0.UnixNano(), blob); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatalf("open v1 database: %v", err)
	}
	defer s.Close()
	var v int
	if err := s.r.QueryRow(`SELECT version FROM schema_version`).Scan(&v); err != nil || v != SchemaVersion() {
		t.Fatalf("schema version after open = %d (%v), want %d", v, err, SchemaVersion())
	}
	st, err := s.Stats(ctx)
	if err != nil || st.PortSamples != 4 || st.Events != 1 {
		t.Fatalf("stats after migration = %+v (%v), want totals backfilled: 4 samples, 1 event", st, err)
	}
	ev, err := s.Events(ctx, store.EventQuery{Kind: "link_down", Node: 4096})
	if err != nil || len(ev) != 1 || ev[0].Detail != "old" || ev[0].Fabric != store.DefaultFabric {
		t.Errorf("old event after migration: %+v %v, want it in fabric %q", ev, err, store.DefaultFabric)
	}
	got, err := s.PortSamples(ctx, []fabric.PortRef{{GUID: 4096, Port: 2}}, time.Time{}, time.Time{})
	if err != nil || len(got[fabric.PortRef{GUID: 4096, Port: 2}]) != 1 {
		t.Errorf("old samples after migration: %v %v", got, err)
	}
	if err := s.AddPortSamples(ctx, storetest.Sweep(1, 4, 1, storetest.T0.Add(time.Minute))); err != nil {
		t.Errorf("write after migration: %v", err)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func TestNewerSchemaRefused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "new.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.Exec(`UPDATE schema_version SET version = 99`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err = Open(ctx, path, Options{})
	if err == nil || !strings.Contains(err.Error(), "newer") || !strings.Contains(err.Error(), "99") {
		t.Fatalf("open of a newer database: %v, want an error naming version 99 as newer", err)
	}
}

func TestGarbageFileRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	data := []byte(strings.Repeat("this is not a database, just some text\n", 500))
	if err := os.WriteFile(garbage, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(ctx, garbage, Options{})
	if err == nil || !strings.Contains(err.Error(), "not a SQLite database") {
		t.Fatalf("open of a garbage file: %v, want a clear error", err)
	}
	if b, _ := os.ReadFile(garbage); string(b) != string(data) {
		t.Error("open of a garbage file changed it")
	}

	// A SQLite file of some other program is refused too.
	other := filepath.Join(dir, "other.db")
	db, err := sql.Open("sqlite3", other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE t (x)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(ctx, other, Options{}); err == nil || !strings.Contains(err.Error(), "not a Netloom") {
		t.Fatalf("open of a foreign SQLite file: %v", err)
	}

	// A Netloom database whose pages were overwritten by garbage.
	path := filepath.Join(dir, "broken.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(b); i++ {
		b[i] ^= 0x5a
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, path, Options{}); err == nil {
		t.Fatal("open of a scrambled database succeeded")
	}
}

// TestReadersDoNotBlock holds the write lock in an open transaction and
// checks reads still answer.
func TestReadersDoNotBlock(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	defer s.Close()
	if err := s.AddPortSamples(ctx, storetest.Sweep(2, 3, 0, storetest.T0)); err != nil {
		t.Fatal(err)
	}
	tx, err := s.w.BeginTx(ctx, nil) // immediate: takes the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`DELETE FROM port_samples`); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	got, err := s.LatestSamples(rctx, storetest.T0, time.Minute)
	if err != nil || len(got) != 6 {
		t.Fatalf("read during an open write: %d samples, %v", len(got), err)
	}
}

func TestFabrics(t *testing.T) {
	storetest.RunFabrics(t, func(t *testing.T, fabrics ...string) []store.Store {
		path := filepath.Join(t.TempDir(), "netloom.db")
		var out []store.Store
		for _, f := range fabrics {
			opt := testOptions
			opt.Fabric = f
			s, err := Open(context.Background(), path, opt)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		return out
	})
}
