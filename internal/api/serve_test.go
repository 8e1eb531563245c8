package api

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netloom/netloom/internal/auth"
)

// TestServeUnencodable: an answer JSON cannot hold (a NaN that slipped
// through) is a 500 with the API's error shape, never a 200 with an empty
// body; an answer it can hold is written as before.
func TestServeUnencodable(t *testing.T) {
	s := New(Options{Registry: prometheus.NewRegistry()})
	ctx := auth.WithPrincipal(context.Background(), &auth.Principal{Name: "alice"})
	for _, c := range []struct {
		v    any
		code int
		body string
	}{
		{map[string]float64{"x": math.NaN()}, http.StatusInternalServerError, `"reason":"internal"`},
		{map[string]float64{"x": math.Inf(1)}, http.StatusInternalServerError, `"reason":"internal"`},
		{map[string]float64{"x": 1.5}, http.StatusOK, `{"x":1.5}`},
	} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/api/v1/x", nil).WithContext(ctx)
		s.serve(w, r, false, func(*http.Request) (any, error) { return c.v, nil })
		if w.Code != c.code || !strings.Contains(w.Body.String(), c.body) || w.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%v: %d %q (%s); want %d with %s", c.v, w.Code, w.Body, w.Header().Get("Content-Type"), c.code, c.body)
		}
	}
}
