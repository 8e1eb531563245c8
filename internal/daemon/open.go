package daemon

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/fabric/eth"
	"github.com/netloom/netloom/internal/fabric/ib"
	"github.com/netloom/netloom/internal/fabric/sim"
	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/postgres"
	"github.com/netloom/netloom/internal/store/sqlite"
)

// OpenSource opens a fabric source from its spec: "ib", "ib:CA",
// "ib:CA:PORT", "sim:SPEC" or "eth:FILE" (an Ethernet fabric read over
// SNMP from the switches FILE lists: docs/ethernet.md).
func OpenSource(ctx context.Context, spec string) (fabric.Source, error) {
	kind, rest, _ := strings.Cut(spec, ":")
	switch kind {
	case "ib":
		var opt ib.Options
		if rest != "" {
			ca, port, hasPort := strings.Cut(rest, ":")
			opt.CA = ca
			if hasPort {
				n, err := strconv.Atoi(port)
				if err != nil || n < 1 || n > 254 {
					return nil, fmt.Errorf("fabric %q: port %q must be a number 1..254", spec, port)
				}
				opt.Port = n
			}
		}
		src, err := ib.Open(opt)
		if err != nil {
			return nil, fmt.Errorf("fabric %q: %w", spec, err)
		}
		return src, nil
	case "sim":
		sp, err := sim.ParseSpec(rest)
		if err != nil {
			return nil, fmt.Errorf("fabric %q: %w", spec, err)
		}
		src, err := sim.NewSource(ctx, sp, sim.Options{})
		if err != nil {
			return nil, fmt.Errorf("fabric %q: %w", spec, err)
		}
		return src, nil
	case "eth":
		if rest == "" {
			return nil, fmt.Errorf("fabric %q: want eth:FILE, FILE a YAML list of switches (docs/ethernet.md)", spec)
		}
		cfg, err := eth.LoadConfig(rest)
		if err != nil {
			return nil, fmt.Errorf("fabric %q: %w", spec, err)
		}
		src, err := eth.Open(*cfg, eth.Options{})
		if err != nil {
			return nil, fmt.Errorf("fabric %q: %w", spec, err)
		}
		return src, nil
	}
	return nil, fmt.Errorf("fabric %q: unknown source; want ib, ib:CA:PORT, sim:SPEC or eth:FILE", spec)
}

// OpenStore opens the store a URL names: a file path or sqlite:PATH for the
// embedded engine, postgres://… or postgresql://… for PostgreSQL. fabricName
// is the fabric the store writes ("" for store.DefaultFabric; readers
// read every fabric whatever it is).
func OpenStore(ctx context.Context, url, fabricName string) (store.Store, error) {
	switch {
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		st, err := postgres.Open(ctx, url, postgres.Options{Fabric: fabricName})
		if err != nil {
			return nil, err // names the database without its password
		}
		return st, nil
	case strings.Contains(url, "://") && !strings.HasPrefix(url, "sqlite:"):
		return nil, fmt.Errorf("db %q: unknown store; want a file path, sqlite:PATH or postgres://…", url)
	}
	path := strings.TrimPrefix(strings.TrimPrefix(url, "sqlite://"), "sqlite:")
	st, err := sqlite.Open(ctx, path, sqlite.Options{Fabric: fabricName})
	if err != nil {
		return nil, fmt.Errorf("db %q: %w", url, err)
	}
	return st, nil
}
