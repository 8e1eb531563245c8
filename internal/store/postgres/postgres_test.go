package postgres

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/storetest"
	pgserver "github.com/netloom/netloom/test/postgres"
)

func TestMain(m *testing.M) { os.Exit(pgserver.Main(m, pgserver.Options{})) }

// testOptions use tiny chunks, so that every prune and rollup takes many
// steps and buckets are split between transactions, and hourly partitions,
// so that the suite's hours of samples span several.
var testOptions = Options{PartitionWidth: time.Hour, PruneChunk: 3, RollupPortRows: 2, RollupProcessRows: 3}

func openTemp(t *testing.T) (*Store, string) {
	t.Helper()
	url := pgserver.Shared(t).NewDB(t)
	s, err := Open(context.Background(), url, testOptions)
	if err != nil {
		t.Fatal(err)
	}
	return s, url
}

func TestConformance(t *testing.T) {
	urls := map[store.Store]string{}
	var mu sync.Mutex
	storetest.Run(t, func(t *testing.T) store.Store {
		s, url := openTemp(t)
		mu.Lock()
		urls[s] = url
		mu.Unlock()
		return s
	}, func(t *testing.T, st store.Store) store.Store {
		t.Helper()
		mu.Lock()
		url := urls[st]
		mu.Unlock()
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		s, err := Open(context.Background(), url, testOptions)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestConcurrentOpen opens one fresh database from several stores at once,
// as daemons started together do: the migration lock lets one create the
// schema and the others find it done.
func TestConcurrentOpen(t *testing.T) {
	url := pgserver.Shared(t).NewDB(t)
	ctx := context.Background()
	const n = 4
	stores := make([]*Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = Open(ctx, url, testOptions)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	// And they write side by side into one schema, partitions included.
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.AddPortSamples(ctx, storetest.Sweep(2, 3, i, storetest.T0.Add(time.Duration(i)*time.Minute)))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	st, err := stores[0].Stats(ctx)
	if err != nil || st.PortSamples != n*6 {
		t.Fatalf("stats after concurrent writes: %+v %v, want %d samples", st, err, n*6)
	}
	var versions int
	if err := stores[0].pool.QueryRow(ctx, `SELECT count(*) FROM schema_version`).Scan(&versions); err != nil || versions != 1 {
		t.Errorf("schema_version rows = %d (%v), want 1", versions, err)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	ctx := context.Background()
	s, url := openTemp(t)
	if _, err := s.pool.Exec(ctx, `UPDATE schema_version SET version = 99`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := Open(ctx, url, testOptions)
	if err == nil || !strings.Contains(err.Error(), "newer") || !strings.Contains(err.Error(), "99") {
		t.Fatalf("open of a newer database: %v, want an error naming version 99 as newer", err)
	}
}

func TestForeignDatabaseRefused(t *testing.T) {
	ctx := context.Background()
	url := pgserver.Shared(t).NewDB(t)
	s, err := Open(ctx, url, testOptions)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `DROP TABLE schema_version`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(ctx, url, testOptions); err == nil || !strings.Contains(err.Error(), "not a Netloom database") {
		t.Fatalf("open of a foreign database: %v", err)
	}
	if _, err := Open(ctx, "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2", testOptions); err == nil {
		t.Fatal("open of an unreachable server succeeded")
	}
}

// partitions lists the partitions of a table in the catalog.
func partitions(t *testing.T, s *Store, parent string) []string {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = $1::regclass ORDER BY c.relname`, parent)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// TestRetentionDropsPartitions: raw samples that no rollup keeps expire by
// whole partitions; folded ones leave empty partitions that go too.
func TestRetentionDropsPartitions(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	defer s.Close()
	for i := range 6 { // one sweep every 30 minutes over three hours
		if err := s.AddPortSamples(ctx, storetest.Sweep(2, 4, i, storetest.T0.Add(time.Duration(i)*30*time.Minute))); err != nil {
			t.Fatal(err)
		}
	}
	// Hours 12, 13 and 14, and 15 made ahead.
	if got := partitions(t, s, tablePortSamples); len(got) != 4 || got[0] != "port_samples_20240301t120000" {
		t.Fatalf("partitions: %v", got)
	}
	// Nothing kept before 13:00: the first partition is dropped unread.
	gone := storetest.T0.Add(time.Hour)
	if err := s.Prune(ctx, store.Retention{Samples: gone, PortRollups5m: gone, PortRollups1h: gone}); err != nil {
		t.Fatal(err)
	}
	if got := partitions(t, s, tablePortSamples); len(got) != 3 || got[0] != "port_samples_20240301t130000" {
		t.Fatalf("partitions after dropping an hour: %v", got)
	}
	// Rolled up into hourly rollups before 14:00: the rows are folded, and
	// then the empty partition goes.
	r := store.Retention{Samples: storetest.T0.Add(2 * time.Hour), PortRollups5m: storetest.T0.Add(2 * time.Hour)}
	if err := s.Prune(ctx, r); err != nil {
		t.Fatal(err)
	}
	if got := partitions(t, s, tablePortSamples); len(got) != 2 || got[0] != "port_samples_20240301t140000" {
		t.Fatalf("partitions after folding an hour: %v", got)
	}
	st, err := s.Stats(ctx)
	if err != nil || st.PortSamples != 2*8 || st.PortRollups != 8 {
		t.Fatalf("stats: %+v %v, want 16 raw samples and 8 hourly points", st, err)
	}
	port := fabric.PortRef{GUID: 0x1000, Port: 1}
	pts, err := s.PortSeries(ctx, []fabric.PortRef{port}, time.Time{}, time.Time{})
	if l := pts[port]; err != nil || len(l) != 3 || l[0].Resolution != store.Rollup1h || l[0].Samples != 2 || l[1].Resolution != 0 {
		t.Fatalf("series after retention: %+v %v, want one hourly point of 2 samples, then 2 raw", pts[port], err)
	}
}

func TestFabrics(t *testing.T) {
	storetest.RunFabrics(t, func(t *testing.T, fabrics ...string) []store.Store {
		url := pgserver.Shared(t).NewDB(t)
		var out []store.Store
		for _, f := range fabrics {
			opt := testOptions
			opt.Fabric = f
			s, err := Open(context.Background(), url, opt)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		return out
	})
}

// TestMigrateFabricNames opens a database of schema 1 (before fabrics had
// names) from two stores at once: one migrates under the lock, and what
// was stored is the default fabric's.
func TestMigrateFabricNames(t *testing.T) {
	url := pgserver.Shared(t).NewDB(t)
	ctx := context.Background()
	s, err := Open(ctx, url, testOptions)
	if err != nil {
		t.Fatal(err)
	}
	topo := storetest.Topo(2, 2, "EDR")
	v1, _, err := s.SaveTopology(ctx, topo, storetest.T0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddEvents(ctx, []fabric.Event{{Time: storetest.T0, Kind: fabric.EventLinkDown, Node: 0x1000, Port: 8, Detail: "old"}}); err != nil {
		t.Fatal(err)
	}
	// Schema 1 had no fabric columns.
	for _, stmt := range []string{
		`ALTER TABLE topology_versions DROP COLUMN fabric`, `ALTER TABLE forwarding_tables DROP COLUMN fabric`,
		`ALTER TABLE events DROP COLUMN fabric`, `DROP TABLE job_parts`, `ALTER TABLE jobs DROP COLUMN fabric`, `UPDATE schema_version SET version = 1`,
	} {
		if _, err := s.pool.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	s.Close()
	stores := make([]*Store, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, f := range []string{store.DefaultFabric, "west"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			opt := testOptions
			opt.Fabric = f
			stores[i], errs[i] = Open(ctx, url, opt)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	var v int
	if err := stores[1].pool.QueryRow(ctx, `SELECT version FROM schema_version`).Scan(&v); err != nil || v != SchemaVersion() {
		t.Fatalf("schema version after open = %d (%v), want %d", v, err, SchemaVersion())
	}
	if _, ver, err := stores[1].FabricTopologyAt(ctx, store.DefaultFabric, storetest.T0); err != nil || ver.ID != v1 {
		t.Errorf("the old topology in fabric %q: %+v %v", store.DefaultFabric, ver, err)
	}
	if v, changed, err := stores[0].SaveTopology(ctx, storetest.Topo(2, 2, "EDR"), storetest.T0.Add(time.Minute)); err != nil || changed || v != v1 {
		t.Errorf("the default fabric's collector saved its unchanged topology as version %d (changed %v, %v), want %d", v, changed, err, v1)
	}
	ev, err := stores[1].Events(ctx, store.EventQuery{})
	if err != nil || len(ev) != 1 || ev[0].Fabric != store.DefaultFabric {
		t.Errorf("old events: %+v %v, want one in fabric %q", ev, err, store.DefaultFabric)
	}
}
