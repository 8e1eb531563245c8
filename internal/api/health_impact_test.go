package api

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/auth"
	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/fabric/sim"
	"github.com/netloom/netloom/internal/store/sqlite"
)

// TestHealthImpactAPI: the impact, degraded and hurt endpoints on a stored
// fat tree with its routes (an API-role daemon's view: no live state):
// bad input is a 400 or 404 naming the value, a user is refused, and a
// link, a switch and nodes are answered with the route model each has.
func TestHealthImpactAPI(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "netloom.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	topo, err := sim.GenerateFatTree(8, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	ft, _, err := sim.ComputeRoutes(ctx, topo)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, _, err := st.SaveTopology(ctx, topo, now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveForwardingTables(ctx, ft, now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	s := New(Options{Store: st, State: func() *FabricState { return nil }})
	get := func(path string, p *auth.Principal) (int, map[string]any) {
		r := httptest.NewRequest("GET", path, nil)
		if p != nil {
			r = r.WithContext(auth.WithPrincipal(r.Context(), p))
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		var v map[string]any
		_ = json.Unmarshal(w.Body.Bytes(), &v)
		return w.Code, v
	}
	admin := &auth.Principal{Name: "root", Admin: true}
	var spine, uplink string
	for _, l := range topo.Links {
		a, _ := topo.Node(l.A.GUID)
		b, _ := topo.Node(l.B.GUID)
		if a.Type == fabric.Switch && b.Type == fabric.Switch && uplink == "" {
			uplink = l.ID()
			spine = b.Description
			if strings.HasPrefix(a.Description, "l2") {
				spine = a.Description
			}
		}
	}
	for path, want := range map[string]struct {
		code int
		says string
	}{
		"/api/v1/health/impact":                                 {400, "parameter link"},
		"/api/v1/health/impact?link=" + uplink + "&switch=x":    {400, "exactly one"},
		"/api/v1/health/impact?link=0x0000000000000001:1-0x2:1": {404, "parameter link"},
		"/api/v1/health/impact?switch=n3":                       {400, "not a switch"},
		"/api/v1/health/impact?switch=spine-99":                 {404, "spine-99"},
		"/api/v1/health/impact?nodes=n1,n42":                    {404, "n42"},
		"/api/v1/health/impact?nodes=,":                         {400, "parameter nodes"},
		"/api/v1/health/impact?link=" + uplink + "&window=1y":   {400, "parameter window"},
		"/api/v1/health/impact?link=" + uplink + "&limit=0":     {400, "parameter limit"},
		"/api/v1/health/hurt":                                   {400, "parameter link"},
		"/api/v1/health/hurt?link=bogus":                        {404, "parameter link"},
		"/api/v1/health/degraded?window=soon":                   {400, "parameter window"},
	} {
		code, v := get(path, admin)
		msg, _ := v["error"].(string)
		if code != want.code || !strings.Contains(msg, want.says) {
			t.Errorf("%s: %d %q, want %d saying %q", path, code, msg, want.code, want.says)
		}
	}
	for q, model := range map[string]string{"link=" + uplink: "predicted", "switch=" + spine: "predicted", "nodes=n1,n2": "unchanged"} {
		code, v := get("/api/v1/health/impact?"+q, admin)
		if code != 200 || v["route_model"] != model || v["state"] != "up" || v["route_note"] == "" {
			t.Errorf("%s: %d %v", q, code, v)
		}
	}
	if code, v := get("/api/v1/health/degraded", admin); code != 200 || len(v["links"].([]any)) != 0 {
		t.Errorf("degraded: %d %v", code, v)
	}
	if code, v := get("/api/v1/health/hurt?link="+uplink, admin); code != 200 || len(v["jobs"].([]any)) != 0 {
		t.Errorf("hurt: %d %v", code, v)
	}
	for _, path := range []string{"/api/v1/health/impact?link=" + uplink, "/api/v1/health/degraded", "/api/v1/health/hurt?link=" + uplink} {
		if code, _ := get(path, &auth.Principal{Name: "ana"}); code != 403 {
			t.Errorf("%s as a user: %d, want 403", path, code)
		}
	}
}
