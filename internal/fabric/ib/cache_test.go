package ib

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestLoadCacheEqualsDiscovery reads caches back, the one DiscoverCache
// wrote with libibnetdisc's writer and the one ibnetdiscover wrote, and
// wants exactly the topology libibnetdisc's own walk gave.
func TestLoadCacheEqualsDiscovery(t *testing.T) {
	f, s, ctx := setup(t)
	dir := t.TempDir()
	ours := filepath.Join(dir, "netloom.cache")
	want, err := s.DiscoverCache(ctx, ours)
	if err != nil {
		t.Fatal(err)
	}
	diags := filepath.Join(dir, "ibnetdiscover.cache")
	if _, err := f.Run(ctx, "ibnetdiscover", "--cache", diags); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{ours, diags} {
		got, err := LoadCache(path)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Nodes, want.Nodes) {
			t.Errorf("%s: nodes differ from discovery:\n%+v\n%+v", filepath.Base(path), got.Nodes, want.Nodes)
		}
		if !reflect.DeepEqual(got.Links, want.Links) {
			t.Errorf("%s: links differ from discovery:\n%+v\n%+v", filepath.Base(path), got.Links, want.Links)
		}
	}
}

// FuzzDecodeCache feeds cache files that are not what ibnetdiscover wrote
// (testdata/fattree.cache, ibnetdiscover --cache of testdata/fattree.net,
// is the seed) to the reader: it must refuse or accept each without a
// panic, and what it accepts must build into a topology or be refused.
func FuzzDecodeCache(f *testing.F) {
	seed, err := os.ReadFile("testdata/fattree.cache")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add(seed[:cacheHeaderLen])
	f.Add(seed[:len(seed)/2])
	f.Fuzz(func(t *testing.T, data []byte) {
		raw, err := decodeCache(data)
		if err != nil {
			if raw != nil {
				t.Errorf("an error (%v) and nodes", err)
			}
			return
		}
		if len(raw) == 0 {
			t.Error("a cache accepted without nodes")
		}
		if topo, err := build(raw); err == nil && len(topo.Nodes) != len(raw) {
			t.Errorf("%d nodes built from %d records", len(topo.Nodes), len(raw))
		}
	})
}

// TestDecodeCacheSeed checks the fuzz seed is a cache the reader takes
// whole: the fuzzer's mutations start from a valid file.
func TestDecodeCacheSeed(t *testing.T) {
	seed, err := os.ReadFile("testdata/fattree.cache")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := decodeCache(seed)
	if err != nil {
		t.Fatal(err)
	}
	topo, err := build(raw)
	if err != nil {
		t.Fatal(err)
	}
	if c := topo.Counts(); c.Switches == 0 || c.CAs == 0 || c.Links == 0 {
		t.Errorf("the seed cache holds %+v", c)
	}
}
