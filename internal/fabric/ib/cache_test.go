package ib

import (
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
