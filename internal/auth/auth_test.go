package auth

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// files makes account files in a scratch directory: alice (admin) and bob.
func files(t *testing.T) Config {
	t.Helper()
	dir := t.TempDir()
	c := Config{UsersFile: filepath.Join(dir, "htpasswd"), GroupsFile: filepath.Join(dir, "groups"),
		TokensFile: filepath.Join(dir, "tokens")}.WithDefaults()
	if err := SetUser(c, "alice", "alice-password", true); err != nil {
		t.Fatal(err)
	}
	if err := SetUser(c, "bob", "bob-password", false); err != nil {
		t.Fatal(err)
	}
	return c
}

// echo answers with the principal the guard attached.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	p := FromContext(r.Context())
	if p == nil {
		io.WriteString(w, "nobody")
		return
	}
	io.WriteString(w, p.Name+"/"+p.Role()+"/"+p.Method)
})

func guard(t *testing.T, c Config, next http.Handler) (*Guard, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	g, err := NewGuard(c, next, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return g, reg
}

type client struct {
	t   *testing.T
	h   http.Handler
	jar []*http.Cookie
}

func (c *client) do(method, path, body string, hdr ...string) *httptest.ResponseRecorder {
	c.t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.RemoteAddr = "192.0.2.10:4000"
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	for _, k := range c.jar {
		r.AddCookie(k)
	}
	w := httptest.NewRecorder()
	c.h.ServeHTTP(w, r)
	for _, k := range w.Result().Cookies() {
		c.jar = []*http.Cookie{k}
	}
	return w
}

func TestLoginSessionLogout(t *testing.T) {
	c := files(t)
	g, reg := guard(t, c, echo)
	cl := &client{t: t, h: g}
	if w := cl.do("GET", "/api/v1/jobs", ""); w.Code != 401 || !strings.Contains(w.Body.String(), `"reason":"unauthenticated"`) {
		t.Fatalf("anonymous API call: %d %s", w.Code, w.Body)
	}
	if w := cl.do("GET", "/network", ""); w.Code != 200 || w.Body.String() != "nobody" {
		t.Fatalf("UI page without login: %d %s (the UI shell holds no data and must load to show the login)", w.Code, w.Body)
	}
	if w := cl.do("POST", LoginPath, `{"user":"bob","password":"wrong"}`); w.Code != 401 {
		t.Fatalf("wrong password: %d", w.Code)
	}
	if w := cl.do("POST", LoginPath, `{"user":"nobody","password":"bob-password"}`); w.Code != 401 {
		t.Fatalf("unknown user: %d", w.Code)
	}
	if got := testutil.ToFloat64(g.failures.WithLabelValues("bad_login")); got != 2 {
		t.Errorf("bad_login count %v, want 2", got)
	}
	w := cl.do("POST", LoginPath, `{"user":"bob","password":"bob-password"}`)
	if w.Code != 200 {
		t.Fatalf("login: %d %s", w.Code, w.Body)
	}
	ck := w.Result().Cookies()
	if len(ck) != 1 || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode || ck[0].Name != CookieName {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict", ck)
	}
	var me struct{ User, Role, Method, CSRF string }
	var raw map[string]string
	json.Unmarshal(w.Body.Bytes(), &raw)
	me.User, me.Role, me.Method, me.CSRF = raw["user"], raw["role"], raw["method"], raw["csrf_token"]
	if me.User != "bob" || me.Role != "user" || me.Method != "password" || len(me.CSRF) < 32 {
		t.Fatalf("login answer %s", w.Body)
	}
	if w := cl.do("GET", "/api/v1/jobs", ""); w.Body.String() != "bob/user/password" {
		t.Fatalf("with the session: %s", w.Body)
	}
	// State-changing requests need the CSRF token.
	if w := cl.do("POST", LogoutPath, ""); w.Code != 403 {
		t.Fatalf("logout without CSRF header: %d", w.Code)
	}
	if w := cl.do("POST", LogoutPath, "", CSRFHeader, "forged"); w.Code != 403 {
		t.Fatalf("logout with a wrong CSRF token: %d", w.Code)
	}
	if w := cl.do("POST", LogoutPath, "", CSRFHeader, me.CSRF); w.Code != 204 {
		t.Fatalf("logout: %d %s", w.Code, w.Body)
	}
	if w := cl.do("GET", "/api/v1/jobs", ""); w.Code != 401 {
		t.Fatalf("after logout: %d %s", w.Code, w.Body)
	}
	if got := testutil.ToFloat64(g.failures.WithLabelValues("csrf")); got != 2 {
		t.Errorf("csrf count %v, want 2", got)
	}
	// Login needs JSON and a same-site origin.
	if w := cl.do("POST", LoginPath, `{"user":"bob","password":"bob-password"}`, "Origin", "https://evil.example"); w.Code != 403 {
		t.Errorf("cross-site login: %d", w.Code)
	}
	if w := cl.do("POST", LoginPath, `user=bob`, "Content-Type", "application/x-www-form-urlencoded"); w.Code != 415 {
		t.Errorf("form login: %d", w.Code)
	}
	_ = reg
}

// TestLoginOneObject: a login is exactly one JSON object; anything
// around or after it is refused (400, counted) before a password is
// checked, and a valid object with trailing white space signs in.
func TestLoginOneObject(t *testing.T) {
	c := files(t)
	g, _ := guard(t, c, echo)
	cl := &client{t: t, h: g}
	for _, body := range []string{
		`{"user":"bob","password":"bob-password"} trailing`,
		`{"user":"bob","password":"bob-password"}{"user":"alice"}`,
		`{"user":"bob","password":"bob-password"}]`,
		`{"user":"bob","password":"bob-password"`,
		`[{"user":"bob","password":"bob-password"}]`,
		`null`, `"bob"`, `{"user":1}`, `x`,
	} {
		w := cl.do("POST", LoginPath, body)
		if w.Code != 400 || !strings.Contains(w.Body.String(), `"reason":"bad_body"`) || !strings.Contains(w.Body.String(), "one JSON object") {
			t.Errorf("login %q: %d %s; want a 400 bad_body", body, w.Code, w.Body)
		}
		if len(w.Result().Cookies()) != 0 {
			t.Errorf("login %q set a cookie", body)
		}
	}
	if got := testutil.ToFloat64(g.failures.WithLabelValues("bad_body")); got != 9 {
		t.Errorf("bad_body count %v, want 9", got)
	}
	if w := cl.do("POST", LoginPath, " {\"user\":\"bob\",\"password\":\"bob-password\"}\n\t "); w.Code != 200 {
		t.Errorf("login with white space around its object: %d %s", w.Code, w.Body)
	}
}

func TestAccountChangesApplyToOpenSessions(t *testing.T) {
	c := files(t)
	g, _ := guard(t, c, echo)
	cl := &client{t: t, h: g}
	if w := cl.do("POST", LoginPath, `{"user":"bob","password":"bob-password"}`); w.Code != 200 {
		t.Fatal(w.Code)
	}
	// Promote bob: the role is looked up per request.
	if err := SetUser(c, "bob", "bob-password-2", true); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // the files are re-read at most once a second
	if w := cl.do("GET", "/api/v1/jobs", ""); w.Body.String() != "bob/admin/password" {
		t.Fatalf("after promotion: %s", w.Body)
	}
	if err := DeleteUser(c, "bob"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	if w := cl.do("GET", "/api/v1/jobs", ""); w.Code != 401 {
		t.Fatalf("a deleted account's session still works: %d %s", w.Code, w.Body)
	}
}

func TestTokens(t *testing.T) {
	c := files(t)
	tok, e, err := AddToken(c, "bob", "nightly export")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(c.TokensFile); strings.Contains(string(b), tok) || !strings.Contains(string(b), "nightly export") {
		t.Fatalf("tokens file holds the token itself or lost the label:\n%s", b)
	}
	g, _ := guard(t, c, echo)
	cl := &client{t: t, h: g}
	if w := cl.do("GET", "/metrics", "", "Authorization", "Bearer "+tok); w.Body.String() != "bob/user/token" {
		t.Fatalf("token: %d %s", w.Code, w.Body)
	}
	// Tokens are not cookies: no CSRF header needed.
	if w := cl.do("POST", "/api/v1/x", "{}", "Authorization", "Bearer "+tok); w.Code != 200 {
		t.Fatalf("POST with a token: %d %s", w.Code, w.Body)
	}
	for _, bad := range []string{"Bearer " + tok + "x", "Basic Ym9iOmJvYg==", "Bearer "} {
		if w := cl.do("GET", "/api/v1/jobs", "", "Authorization", bad); w.Code != 401 || !strings.Contains(w.Body.String(), "bad_token") {
			t.Errorf("Authorization %q: %d %s", bad, w.Code, w.Body)
		}
	}
	if err := RevokeToken(c, e.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	if w := cl.do("GET", "/api/v1/jobs", "", "Authorization", "Bearer "+tok); w.Code != 401 {
		t.Fatalf("revoked token still works: %d", w.Code)
	}
}

func TestProxyHeaderOnlyFromTheProxy(t *testing.T) {
	c := files(t)
	c.ProxyHeader, c.ProxyNetworks = "X-Remote-User", []string{"192.0.2.0/28"}
	g, _ := guard(t, c, echo)
	cl := &client{t: t, h: g}
	if w := cl.do("GET", "/api/v1/jobs", "", "X-Remote-User", "alice"); w.Body.String() != "alice/admin/proxy" {
		t.Fatalf("from the proxy: %d %s", w.Code, w.Body)
	}
	c.ProxyNetworks = []string{"198.51.100.7"}
	g, _ = guard(t, c, echo)
	cl = &client{t: t, h: g}
	if w := cl.do("GET", "/api/v1/jobs", "", "X-Remote-User", "alice"); w.Code != 401 {
		t.Fatalf("header from outside the proxy believed: %d %s", w.Code, w.Body)
	}
	if got := testutil.ToFloat64(g.failures.WithLabelValues("untrusted_proxy_header")); got != 1 {
		t.Errorf("untrusted_proxy_header %v", got)
	}
	c.ProxyNetworks = nil
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "proxy_networks") {
		t.Errorf("proxy header without networks: %v", err)
	}
}

func TestAnonymousAndHeaders(t *testing.T) {
	c := files(t)
	c.Anonymous = "admin"
	g, _ := guard(t, c, echo)
	w := (&client{t: t, h: g}).do("GET", "/api/v1/jobs", "")
	if w.Body.String() != "anonymous/admin/anonymous" {
		t.Fatalf("anonymous admin: %s", w.Body)
	}
	h := w.Header()
	if !strings.Contains(h.Get("Content-Security-Policy"), "script-src 'self'") || h.Get("X-Content-Type-Options") != "nosniff" ||
		h.Get("X-Frame-Options") != "DENY" || h.Get("Cache-Control") != "no-store" {
		t.Errorf("security headers: %v", h)
	}
	c.Anonymous = "everyone"
	if err := c.Validate(); err == nil {
		t.Error("anonymous: everyone accepted")
	}
}

func TestLimits(t *testing.T) {
	c := files(t)
	c.Anonymous, c.RateLimit, c.RateBurst, c.MaxInFlight, c.MaxBodyBytes = "admin", 1, 5, 2, 2048
	release := make(chan struct{})
	var held atomic.Int32
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			held.Add(1)
			<-release
		}
	})
	g, _ := guard(t, c, slow)
	cl := &client{t: t, h: g}
	if w := cl.do("POST", "/api/v1/x", strings.Repeat("x", 4096)); w.Code != 413 {
		t.Errorf("oversized body: %d", w.Code)
	}
	// Two slow requests fill the in-flight bound; a third is refused at once.
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); (&client{t: t, h: g}).do("GET", "/slow", "") }()
	}
	for deadline := time.Now().Add(10 * time.Second); held.Load() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			close(release)
			t.Fatalf("only %d of 2 slow requests reached the handler", held.Load())
		}
	}
	if w := cl.do("GET", "/fast", ""); w.Code != 503 || w.Header().Get("Retry-After") == "" {
		t.Errorf("over max_in_flight: %d", w.Code)
	}
	close(release)
	wg.Wait()
	// The burst is 5 per client; 4 were used above.
	n429 := 0
	for range 5 {
		if cl.do("GET", "/fast", "").Code == 429 {
			n429++
		}
	}
	if n429 < 3 {
		t.Errorf("rate limit: %d of 5 refused, want >= 3", n429)
	}
	if got := testutil.ToFloat64(g.dropped.WithLabelValues("rate_limited")); got != float64(n429) {
		t.Errorf("rate_limited metric %v, want %d", got, n429)
	}
}

func TestMalformedFiles(t *testing.T) {
	dir := t.TempDir()
	c := Config{UsersFile: filepath.Join(dir, "u"), GroupsFile: filepath.Join(dir, "g"), TokensFile: filepath.Join(dir, "t")}
	for _, tc := range []struct{ file, text, want string }{
		{c.UsersFile, "# comment\nalice:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n", "u:2: user alice: the hash is not bcrypt"},
		{c.UsersFile, "no colon here\n", "u:1: want NAME:BCRYPT-HASH"},
		{c.GroupsFile, "admin alice\n", "g:1: want GROUP: USER USER"},
		{c.TokensFile, "abcd bob 2026-01-01T00:00:00Z\n", "t:1: the token hash is not 64 hex digits"},
	} {
		os.Remove(c.UsersFile)
		os.Remove(c.GroupsFile)
		os.Remove(c.TokensFile)
		os.WriteFile(tc.file, []byte(tc.text), 0o600)
		_, err := LoadAccounts(c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.text, err, tc.want)
		}
	}
}

func FuzzAccountFiles(f *testing.F) {
	f.Add("alice:$2a$10$Ost.zVde4NpqVR9m//djrOajKceMaOLRTx9ouwK4lJ25YqHJlajeC\n", "admin: alice\n", "")
	f.Add("", "", "d5b41f98f8affe595650a65f48bebeef5df1041472aeb0f11c87202366c32aa6 alice 2026-11-22T05:42:45Z ci\n")
	dir := f.TempDir()
	c := Config{UsersFile: filepath.Join(dir, "u"), GroupsFile: filepath.Join(dir, "g"), TokensFile: filepath.Join(dir, "t")}
	f.Fuzz(func(t *testing.T, users, groups, tokens string) {
		os.WriteFile(c.UsersFile, []byte(users), 0o600)
		os.WriteFile(c.GroupsFile, []byte(groups), 0o600)
		os.WriteFile(c.TokensFile, []byte(tokens), 0o600)
		a, err := LoadAccounts(c)
		if err == nil {
			for _, u := range a.Users() {
				if ValidUserName(u) != nil {
					t.Errorf("accepted user name %q", u)
				}
			}
		}
	})
}
