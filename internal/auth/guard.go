package auth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// Principal is who a request comes from.
type Principal struct {
	Name   string `json:"user"`
	Admin  bool   `json:"-"`
	Method string `json:"method"` // password, token, proxy or anonymous
}

// Role is "admin" or "user".
func (p *Principal) Role() string {
	if p.Admin {
		return "admin"
	}
	return "user"
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext is the request's principal, nil when none was established.
func FromContext(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// Paths the guard serves itself.
const (
	LoginPath  = "/api/v1/auth/login"
	LogoutPath = "/api/v1/auth/logout"
	MePath     = "/api/v1/auth/me"
	// CookieName holds the session; CSRFHeader must repeat the session's
	// CSRF token on every state-changing request.
	CookieName = "netloom_session"
	CSRFHeader = "X-CSRF-Token"
)

// ContentSecurityPolicy is the UI's policy: only its own scripts, styles
// and connections; no inline code, no framing.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
	"font-src 'self'; connect-src 'self'; worker-src 'self' blob:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// Guard authenticates every request, bounds what each client may cost,
// sets security headers, serves login/logout/me, and passes the rest to
// the next handler with the Principal in the request's context. Requests
// for the UI's static files pass without a principal (they hold no data);
// API requests and /metrics without one get 401.
type Guard struct {
	cfg       Config
	next      http.Handler
	log       *slog.Logger
	accounts  *accountsCache
	proxyNets []netip.Prefix
	sessions  sessionStore
	clients   limiterMap
	logins    limiterMap
	inFlight  chan struct{}
	streams   chan struct{}
	bcrypt    chan struct{}
	dropped   *prometheus.CounterVec
	failures  *prometheus.CounterVec
	loginsM   *prometheus.CounterVec
}

// NewGuard builds the guard around next; metrics go to reg (may be nil).
func NewGuard(cfg Config, next http.Handler, reg prometheus.Registerer, log *slog.Logger) (*Guard, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Guard{cfg: cfg, next: next, log: log,
		sessions: sessionStore{m: map[string]*session{}, ttl: cfg.SessionTTL, max: 100_000},
		clients:  limiterMap{m: map[string]*limiterEntry{}, limit: rate.Limit(cfg.RateLimit), burst: cfg.RateBurst},
		// Logins cost a bcrypt comparison (~50 ms of a core): a few per
		// second per address, and at most two at once overall.
		logins:   limiterMap{m: map[string]*limiterEntry{}, limit: rate.Every(2 * time.Second), burst: 10},
		inFlight: make(chan struct{}, cfg.MaxInFlight), streams: make(chan struct{}, cfg.MaxStreams),
		bcrypt: make(chan struct{}, 2),
	}
	if cfg.RateLimit < 0 {
		g.clients.limit = rate.Inf
	}
	var err error
	if g.proxyNets, err = ParseNetworks("auth.proxy_networks", cfg.ProxyNetworks); err != nil {
		return nil, err
	}
	if g.accounts, err = newAccountsCache(cfg, func(err error) {
		log.Error("account files are malformed; keeping the previous accounts", "err", err)
	}); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	g.dropped = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "netloom_http_requests_dropped_total",
		Help: "HTTP requests refused to protect the daemon, by reason (rate_limited, overloaded, too_large, login_rate_limited)."}, []string{"reason"})
	g.failures = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "netloom_auth_failures_total",
		Help: "Requests refused for want of a valid identity, by reason (unauthenticated, bad_token, bad_login, csrf, untrusted_proxy_header, bad_origin)."}, []string{"reason"})
	g.loginsM = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "netloom_auth_logins_total",
		Help: "Password logins, by result."}, []string{"result"})
	if reg != nil {
		reg.MustRegister(g.dropped, g.failures, g.loginsM)
	}
	a := g.accounts.get()
	switch {
	case cfg.Anonymous == "admin":
		log.Warn("anonymous access is on: anyone who reaches the daemon is an administrator (auth.anonymous: admin)")
	case len(a.hashes) == 0 && len(a.tokens) == 0 && cfg.ProxyHeader == "":
		log.Warn("no accounts yet: create one with `netloom user add NAME --admin`", "users_file", cfg.UsersFile)
	}
	return g, nil
}

func (g *Guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
	if r.TLS != nil {
		h.Set("Strict-Transport-Security", "max-age=31536000")
	}
	if r.ContentLength > g.cfg.MaxBodyBytes {
		g.refuse(w, g.dropped, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body over %d bytes", g.cfg.MaxBodyBytes))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, g.cfg.MaxBodyBytes)

	ip := g.clientIP(r)
	p, sess, reason := g.identify(r, ip)
	if reason != "" {
		g.refuse(w, g.failures, http.StatusUnauthorized, reason, "the API token or session is not valid")
		return
	}
	key := "ip:" + ip.String()
	if p != nil && p.Method != "anonymous" {
		key = "user:" + p.Name
	}
	if !g.clients.allow(key) {
		w.Header().Set("Retry-After", "1")
		g.refuse(w, g.dropped, http.StatusTooManyRequests, "rate_limited", "too many requests; slow down")
		return
	}
	isAPI := strings.HasPrefix(r.URL.Path, "/api/") || r.URL.Path == "/metrics"
	if isAPI {
		h.Set("Cache-Control", "no-store")
	}
	switch r.URL.Path {
	case LoginPath:
		g.login(w, r, ip)
		return
	case LogoutPath, MePath:
		if p == nil {
			g.refuse(w, g.failures, http.StatusUnauthorized, "unauthenticated", "not signed in")
			return
		}
	}
	if sess != nil && !safeMethod(r.Method) {
		if got := r.Header.Get(CSRFHeader); subtle.ConstantTimeCompare([]byte(got), []byte(sess.csrf)) != 1 {
			g.refuse(w, g.failures, http.StatusForbidden, "csrf", "missing or wrong "+CSRFHeader+" header")
			return
		}
	}
	switch r.URL.Path {
	case LogoutPath:
		if r.Method != http.MethodPost {
			g.refuse(w, nil, http.StatusMethodNotAllowed, "method", "POST to sign out")
			return
		}
		if sess != nil {
			g.sessions.remove(sess.id)
		}
		http.SetCookie(w, g.cookie(r, "", -1))
		w.WriteHeader(http.StatusNoContent)
		return
	case MePath:
		g.writeMe(w, p, sess)
		return
	}
	if p == nil && isAPI {
		g.refuse(w, g.failures, http.StatusUnauthorized, "unauthenticated", "sign in first (POST "+LoginPath+") or send an API token (Authorization: Bearer ...)")
		return
	}
	sem := g.inFlight
	if strings.HasSuffix(r.URL.Path, "/stream") || r.Header.Get("Accept") == "text/event-stream" {
		sem = g.streams
	}
	select {
	case sem <- struct{}{}:
		defer func() { <-sem }()
	default:
		w.Header().Set("Retry-After", "2")
		g.refuse(w, g.dropped, http.StatusServiceUnavailable, "overloaded", "the daemon is serving as many requests as it allows; retry shortly")
		return
	}
	if p != nil {
		r = r.WithContext(WithPrincipal(r.Context(), p))
	}
	g.next.ServeHTTP(w, r)
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// identify finds who sent r. A presented but invalid token is an error
// (reason); a stale session cookie is simply no session.
func (g *Guard) identify(r *http.Request, ip netip.Addr) (*Principal, *session, string) {
	a := g.accounts.get()
	if h := r.Header.Get("Authorization"); h != "" {
		tok, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			return nil, nil, "bad_token"
		}
		e, ok := a.Token(strings.TrimSpace(tok))
		if !ok {
			return nil, nil, "bad_token"
		}
		return &Principal{Name: e.User, Admin: a.IsAdmin(e.User), Method: "token"}, nil, ""
	}
	if g.cfg.ProxyHeader != "" {
		if user := r.Header.Get(g.cfg.ProxyHeader); user != "" {
			if !Contains(g.proxyNets, g.peer(r)) {
				// Anyone can set a header; only the proxy is believed.
				g.failures.WithLabelValues("untrusted_proxy_header").Inc()
			} else if ValidUserName(user) == nil {
				return &Principal{Name: user, Admin: a.IsAdmin(user), Method: "proxy"}, nil, ""
			}
		}
	}
	if c, err := r.Cookie(CookieName); err == nil {
		if s := g.sessions.get(c.Value); s != nil {
			if a.HasUser(s.user) {
				return &Principal{Name: s.user, Admin: a.IsAdmin(s.user), Method: "password"}, s, ""
			}
			g.sessions.remove(s.id) // the account was deleted
		}
	}
	if g.cfg.Anonymous == "admin" {
		return &Principal{Name: "anonymous", Admin: true, Method: "anonymous"}, nil, ""
	}
	return nil, nil, ""
}

func (g *Guard) login(w http.ResponseWriter, r *http.Request, ip netip.Addr) {
	if r.Method != http.MethodPost {
		g.refuse(w, nil, http.StatusMethodNotAllowed, "method", "POST {\"user\": ..., \"password\": ...} to sign in")
		return
	}
	// A JSON body cannot be sent cross-site without a CORS preflight this
	// server never grants; the Origin check also stops login CSRF.
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		g.refuse(w, nil, http.StatusUnsupportedMediaType, "content_type", "send the login as application/json")
		return
	}
	if o := r.Header.Get("Origin"); o != "" {
		if u, err := url.Parse(o); err != nil || u.Host != r.Host {
			g.refuse(w, g.failures, http.StatusForbidden, "bad_origin", "login from another site refused")
			return
		}
	}
	var body struct {
		User     string `json:"user"`
		Password string `json:"password"`
	}
	if err := decodeOne(r.Body, &body); err != nil {
		g.refuse(w, g.failures, http.StatusBadRequest, "bad_body", "login body: "+err.Error()+": want one JSON object {\"user\": ..., \"password\": ...}")
		return
	}
	if !g.logins.allow(ip.String()) {
		w.Header().Set("Retry-After", "5")
		g.refuse(w, g.dropped, http.StatusTooManyRequests, "login_rate_limited", "too many sign-in attempts; wait a few seconds")
		return
	}
	select {
	case g.bcrypt <- struct{}{}:
	case <-time.After(2 * time.Second):
		g.refuse(w, g.dropped, http.StatusServiceUnavailable, "overloaded", "too many sign-ins at once; retry shortly")
		return
	case <-r.Context().Done():
		return
	}
	a := g.accounts.get()
	ok := ValidUserName(body.User) == nil && a.CheckPassword(body.User, body.Password)
	<-g.bcrypt
	if !ok {
		g.loginsM.WithLabelValues("failed").Inc()
		g.log.Warn("sign-in failed", "user", body.User, "from", ip.String())
		g.refuse(w, g.failures, http.StatusUnauthorized, "bad_login", "wrong user name or password")
		return
	}
	s, err := g.sessions.create(body.User)
	if err != nil {
		g.refuse(w, g.dropped, http.StatusServiceUnavailable, "overloaded", err.Error())
		return
	}
	g.loginsM.WithLabelValues("ok").Inc()
	g.log.Info("signed in", "user", body.User, "from", ip.String())
	http.SetCookie(w, g.cookie(r, s.id, int(g.cfg.SessionTTL/time.Second)))
	g.writeMe(w, &Principal{Name: body.User, Admin: a.IsAdmin(body.User), Method: "password"}, s)
}

// decodeOne decodes exactly one JSON object from r into v: not null, an
// array or a string, and nothing but white space after it.
func decodeOne(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return errors.New("not JSON")
	}
	if raw[0] != '{' {
		return errors.New("not an object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("more after the object")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return errors.New("not the object of a login")
	}
	return nil
}

func (g *Guard) cookie(r *http.Request, value string, maxAge int) *http.Cookie {
	secure := r.TLS != nil || (Contains(g.proxyNets, g.peer(r)) && r.Header.Get("X-Forwarded-Proto") == "https")
	return &http.Cookie{Name: CookieName, Value: value, Path: "/", MaxAge: maxAge, HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode}
}

func (g *Guard) writeMe(w http.ResponseWriter, p *Principal, s *session) {
	out := map[string]string{"user": p.Name, "role": p.Role(), "method": p.Method}
	if s != nil {
		out["csrf_token"] = s.csrf
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// refuse answers with the API's error shape and counts reason on m.
func (g *Guard) refuse(w http.ResponseWriter, m *prometheus.CounterVec, status int, reason, msg string) {
	if m != nil {
		m.WithLabelValues(reason).Inc()
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg, "reason": reason})
}

// peer is the address the connection comes from.
func (g *Guard) peer(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			a, _ := netip.ParseAddr(h)
			return a.Unmap()
		}
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// clientIP is the peer, or for a trusted proxy the address it says it
// forwarded for (the last one in X-Forwarded-For, which it appended).
func (g *Guard) clientIP(r *http.Request) netip.Addr {
	peer := g.peer(r)
	if Contains(g.proxyNets, peer) {
		if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
			hops := strings.Split(xff[len(xff)-1], ",")
			if a, err := netip.ParseAddr(strings.TrimSpace(hops[len(hops)-1])); err == nil {
				return a.Unmap()
			}
		}
	}
	return peer
}

// session is one login. The role is not kept: it is looked up on each
// request, so removing someone from the admin group takes effect at once.
type session struct {
	id, user, csrf string
	expires        time.Time
}

type sessionStore struct {
	mu  sync.Mutex
	m   map[string]*session
	ttl time.Duration
	max int
}

func randomToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

var errTooManySessions = errors.New("too many open sessions; retry later")

func (s *sessionStore) create(user string) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= s.max {
		now := time.Now()
		for id, x := range s.m {
			if now.After(x.expires) {
				delete(s.m, id)
			}
		}
		if len(s.m) >= s.max {
			return nil, errTooManySessions
		}
	}
	x := &session{id: randomToken(), user: user, csrf: randomToken(), expires: time.Now().Add(s.ttl)}
	s.m[x.id] = x
	return x, nil
}

// get returns a live session and extends it.
func (s *sessionStore) get(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	x := s.m[id]
	if x == nil {
		return nil
	}
	now := time.Now()
	if now.After(x.expires) {
		delete(s.m, id)
		return nil
	}
	x.expires = now.Add(s.ttl)
	return x
}

func (s *sessionStore) remove(id string) {
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
}

// limiterMap holds one token bucket per client, bounded: idle entries are
// dropped when it fills, and past that all new clients share one bucket,
// so a flood of spoofed or many addresses costs bounded memory.
type limiterMap struct {
	mu       sync.Mutex
	m        map[string]*limiterEntry
	limit    rate.Limit
	burst    int
	overflow *rate.Limiter
}

type limiterEntry struct {
	l    *rate.Limiter
	used time.Time
}

const maxLimiters = 10_000

func (lm *limiterMap) allow(key string) bool {
	if lm.limit == rate.Inf {
		return true
	}
	now := time.Now()
	lm.mu.Lock()
	e := lm.m[key]
	if e == nil {
		if len(lm.m) >= maxLimiters {
			for k, x := range lm.m {
				if now.Sub(x.used) > time.Minute {
					delete(lm.m, k)
				}
			}
		}
		if len(lm.m) >= maxLimiters {
			if lm.overflow == nil {
				lm.overflow = rate.NewLimiter(lm.limit, lm.burst)
			}
			lm.mu.Unlock()
			return lm.overflow.AllowN(now, 1)
		}
		e = &limiterEntry{l: rate.NewLimiter(lm.limit, lm.burst)}
		lm.m[key] = e
	}
	e.used = now
	lm.mu.Unlock()
	return e.l.AllowN(now, 1)
}
