package daemon

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netloom/netloom/internal/fabric/sim"
	"github.com/netloom/netloom/internal/store/sqlite"
)

// TestSFlowConfig: a bad sflow_listen or sflow_max_flows is refused by
// name, and the collector is refused on a fabric without sFlow agents
// (only eth: switches are allowed).
func TestSFlowConfig(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{SFlowListen: "6343"}, "sflow_listen"},
		{Config{SFlowListen: "a b:6343"}, "sflow_listen"},
		{Config{SFlowMaxFlows: -1}, "sflow_max_flows"},
	} {
		err := c.cfg.WithDefaults().Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.cfg, err, c.want)
		}
	}
	db := filepath.Join(t.TempDir(), "n.db")
	st, err := sqlite.Open(context.Background(), db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sp, _ := sim.ParseSpec("fat-tree:hosts=8,radix=8")
	src, err := sim.NewSource(context.Background(), sp, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Listen: "127.0.0.1:0", DB: db, Fabric: "sim", AgentListen: "off", AgentAddressFile: "-", SFlowListen: "127.0.0.1:0"}
	d := New(cfg, src, st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	err = d.Run(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "sflow_listen") || !strings.Contains(err.Error(), "eth:") {
		t.Errorf("Run on a sim fabric with sflow_listen: %v, want a refusal naming sflow_listen and eth:", err)
	}
}
