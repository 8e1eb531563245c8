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
	"github.com/netloom/netloom/internal/store/sqlite"
)

func TestHealthAPI(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "netloom.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a, b := fabric.PortRef{GUID: 0x10, Port: 1}, fabric.PortRef{GUID: 0x20, Port: 1}
	topo, err := fabric.NewTopology([]fabric.Node{{GUID: 0x10, Type: fabric.Switch, Description: "s1", Ports: 1, LID: 1},
		{GUID: 0x20, Type: fabric.Switch, Description: "s2", Ports: 1, LID: 2}}, []fabric.Link{fabric.NewLink(a, b, "4X", "EDR", "Active")})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, _, err := st.SaveTopology(ctx, topo, now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	// b counts a rising symbol error rate; a is clean.
	for i := 1; i <= 30; i++ {
		at := now.Add(time.Duration(i-30) * 10 * time.Second)
		sb := fabric.PortSample{Port: b, Time: at, Span: 10 * time.Second}
		sb.Delta[fabric.SymbolErrors] = uint64(5 * i)
		sa := fabric.PortSample{Port: a, Time: at, Span: 10 * time.Second}
		if err := st.AddPortSamples(ctx, []fabric.PortSample{sa, sb}); err != nil {
			t.Fatal(err)
		}
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
		if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
			t.Logf("%s: %v: %.300s", path, err, w.Body.String())
		}
		return w.Code, v
	}
	admin, user := &auth.Principal{Name: "root", Admin: true}, &auth.Principal{Name: "ana"}
	code, v := get("/api/v1/health?window=10m", admin)
	if code != 200 {
		t.Fatalf("health: %d %v", code, v)
	}
	dirs := v["directions"].([]any)
	first := dirs[0].(map[string]any)
	if len(dirs) != 2 || first["trend"] != "rising" || first["prediction"] == nil || !strings.HasPrefix(first["link"].(string), a.String()) {
		t.Errorf("health: %v", v)
	}
	for path, want := range map[string]int{
		"/api/v1/health":                                        200,
		"/api/v1/health?window=x":                               400,
		"/api/v1/health?window=0s":                              400,
		"/api/v1/health?window=200h":                            400,
		"/api/v1/health?ber_limit=abc":                          400,
		"/api/v1/health?horizon=-1h":                            400,
		"/api/v1/health/links/" + b.String():                    200,
		"/api/v1/health/links/" + a.String() + "-" + b.String(): 200,
		"/api/v1/health/links/0x30:1":                           404,
		"/api/v1/health/links/bogus":                            404,
	} {
		if code, v := get(path, admin); code != want || (want != 200 && v["error"] == "") {
			t.Errorf("%s: %d %v, want %d", path, code, v, want)
		}
	}
	if code, _ := get("/api/v1/health", user); code != 403 {
		t.Errorf("user: %d, want 403", code)
	}
	if code, _ := get("/api/v1/health/links/"+b.String(), nil); code != 401 {
		t.Errorf("anonymous: %d, want 401", code)
	}
	_, v = get("/api/v1/health/links/"+b.String(), admin)
	for _, d := range v["directions"].([]any) {
		if d.(map[string]any)["series"] == nil {
			t.Errorf("direction without series: %v", d)
		}
	}
}
