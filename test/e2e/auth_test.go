package e2e

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// apiClient is one person at the API: anonymous, a password login (with
// its session cookie and CSRF token) or an API token.
type apiClient struct {
	t     *testing.T
	base  string
	name  string
	http  *http.Client
	token string
	csrf  string
}

func newClient(t *testing.T, base, name string) *apiClient {
	jar, _ := cookiejar.New(nil)
	return &apiClient{t: t, base: base, name: name, http: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
}

func (c *apiClient) do(method, path string, body []byte) (int, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.csrf != "" {
		req.Header.Set("X-CSRF-Token", c.csrf)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s %s: %v", c.name, method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (c *apiClient) get(path string, v any) int {
	c.t.Helper()
	code, b := c.do("GET", path, nil)
	if v != nil && code == 200 {
		if err := json.Unmarshal(b, v); err != nil {
			c.t.Fatalf("%s GET %s: %v in %.300s", c.name, path, err, b)
		}
	}
	return code
}

func (c *apiClient) login(user, password string) {
	c.t.Helper()
	body, _ := json.Marshal(map[string]string{"user": user, "password": password})
	code, b := c.do("POST", "/api/v1/auth/login", body)
	if code != 200 {
		c.t.Fatalf("login %s: %d %s", user, code, b)
	}
	var me struct {
		CSRF string `json:"csrf_token"`
	}
	json.Unmarshal(b, &me)
	c.csrf = me.CSRF
}

// TestWhoSeesWhat runs real MPI jobs of two local users through real Slurm
// on an ibsim fabric, under a daemon with accounts, and probes every API
// endpoint as anonymous, user A, user B and an administrator: a user sees
// their own jobs and the links their jobs crossed (other jobs anonymized),
// nothing of another user's job even by guessing its id, and no fabric-wide
// data; then floods the API from one client while another keeps working.
func TestWhoSeesWhat(t *testing.T) {
	const userA, userB = "nltest-a", "nltest-b"
	f, c, ctx, lib, prog := slurmOnFabric(t, userA, userB)
	// The agent and netloom where other users' jobs reach them.
	bin, sharedLib := shareTools(t, c, lib)

	// Accounts: an administrator and the two users, from the CLI.
	dir := t.TempDir()
	pw := map[string]string{"root-admin": "admin-pass-1", userA: "a-pass-123", userB: "b-pass-123"}
	cfg := addAccounts(t, dir, pw, "  rate_limit: 50\n  rate_burst: 100\n")
	out, err := exec.Command(netloomBin, "token", "add", userB, "--config", cfg, "--label", "flood").Output()
	if err != nil {
		t.Fatal(err)
	}
	tokenB := strings.TrimSpace(string(out))

	// Agent data signed with the cluster's MUNGE, decodable by the daemon's
	// uid only: job ownership is the verified one end to end.
	munge := []string{"NETLOOM_MUNGE_SOCKET=" + c.MungeSocket, "NETLOOM_MUNGE_UID=" + strconv.Itoa(os.Getuid())}
	for _, kv := range munge {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v) // sbatch passes the environment on to the jobs
	}
	d, agent := serve(t, f.Dir, append(append(f.Env(), c.Env()...), munge...), "--config", cfg, "--anonymous", "none",
		"--fabric", "ib", "--db", filepath.Join(dir, "netloom.db"),
		"--agent-listen", "127.0.0.1:0", "--agent-address-file", "-", "--agent-auth", "munge",
		"--scheduler", "slurm", "--scheduler-interval", "500ms", "--sweep-interval", "300ms", "--discover-interval", "5s",
		"--job-timeout", "20s")
	admin, a, b, anon := newClient(t, d.base, "admin"), newClient(t, d.base, userA), newClient(t, d.base, userB), newClient(t, d.base, "anonymous")
	admin.login("root-admin", pw["root-admin"])
	a.login(userA, pw[userA])
	b.login(userB, pw[userB])
	waitAPI(t, d, 60*time.Second, "routes", func() bool {
		var st struct{ Routes bool }
		return admin.get("/api/v1/status", &st) == 200 && st.Routes
	})

	// A's job on n1,n2; B's on n2,n3: both cross n2's host link.
	run := fmt.Sprintf("%s run --daemon %s --interval 200ms --lib %s -- srun --mpi=pmix %s 50000", bin, agent, sharedLib, prog)
	idA, err := c.Sbatch(ctx, userA, "-J", "nl-auth-a", "-N2", "-n2", "-w", "n1,n2", "-o", filepath.Join(c.Shared, "a-%j.out"), "--wrap", run)
	if err != nil {
		t.Fatal(err)
	}
	idB, err := c.Sbatch(ctx, userB, "-J", "nl-auth-b", "-N2", "-n2", "-w", "n2,n3", "-o", filepath.Join(c.Shared, "b-%j.out"), "--wrap", run)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{idA, idB} {
		if err := c.WaitState(ctx, id, "COMPLETED", "FAILED", "CANCELLED"); err != nil {
			t.Fatal(err)
		}
		if st, _ := c.JobState(ctx, id); st != "COMPLETED" {
			o, _ := os.ReadFile(filepath.Join(c.Shared, map[string]string{idA: "a", idB: "b"}[id]+"-"+id+".out"))
			t.Fatalf("job %s: %s\n%s", id, st, o)
		}
	}
	type jobRow struct {
		ID        string
		User      string
		Agent     bool
		Scheduler *struct{ User string }
	}
	var jobs struct{ Jobs []jobRow }
	waitAPI(t, d, 60*time.Second, "both jobs with agent data and their links attributed", func() bool {
		n := 0
		if admin.get("/api/v1/jobs?limit=100", &jobs) != 200 {
			return false
		}
		for _, j := range jobs.Jobs {
			var links struct{ Links []struct{} }
			if (j.ID == idA || j.ID == idB) && j.Agent && admin.get("/api/v1/jobs/"+j.ID+"/links", &links) == 200 && len(links.Links) > 0 {
				n++
			}
		}
		return n == 2
	})
	for _, j := range jobs.Jobs {
		if want := map[string]string{idA: userA, idB: userB}[j.ID]; want != "" && (j.Scheduler == nil || j.Scheduler.User != want || j.User != want) {
			t.Errorf("job %s: scheduler %+v, agents' verified user %q; want %s", j.ID, j.Scheduler, j.User, want)
		}
	}
	_, metrics := admin.do("GET", "/metrics", nil)
	for _, l := range strings.Split(string(metrics), "\n") {
		if strings.HasPrefix(l, "netloom_ingest_datagrams_dropped_total{") && !strings.HasSuffix(l, " 0") &&
			!strings.Contains(l, "incomplete") {
			t.Errorf("signed agent data was dropped: %s", l)
		}
		if strings.HasPrefix(l, "netloom_ingest_credentials_decoded_total ") && strings.HasSuffix(l, " 0") {
			t.Errorf("no MUNGE credential decoded: %s", l)
		}
	}

	// The links each job crossed, by the administrator's view.
	linksOf := func(id string) map[string]bool {
		var l struct {
			Links []struct{ Link struct{ ID string } }
		}
		if code := admin.get("/api/v1/jobs/"+id+"/links?limit=1000", &l); code != 200 {
			t.Fatalf("links of %s: %d", id, code)
		}
		out := map[string]bool{}
		for _, x := range l.Links {
			out[x.Link.ID] = true
		}
		return out
	}
	la, lb := linksOf(idA), linksOf(idB)
	var shared, onlyB string
	for id := range lb {
		if la[id] {
			shared = id
		} else {
			onlyB = id
		}
	}
	if shared == "" || onlyB == "" {
		t.Fatalf("want a link both jobs crossed and one only B's did: A %v, B %v", la, lb)
	}
	var nodes struct{ Nodes []struct{ GUID string } }
	admin.get("/api/v1/fabric/nodes", &nodes)
	if len(nodes.Nodes) == 0 {
		t.Fatal("no fabric nodes")
	}
	node := nodes.Nodes[0].GUID
	port := strings.SplitN(shared, "-", 2)[0]
	rng := "from=-1h"

	// Every endpoint. want[who] is the status each principal must get.
	const (
		adminOnly  = iota // 401 anonymous, 403 users, 200 admin
		jobOfA            // 401, A 200, B 404, admin 200
		jobOfB            // 401, A 404, B 200, admin 200
		linkShared        // 401, A 200, B 200, admin 200
		linkOfB           // 401, A 404, B 200, admin 200
		anyUser           // 401, 200, 200, 200
	)
	endpoints := []struct {
		path string
		kind int
	}{
		{"/api/v1/status", anyUser},
		{"/api/v1/fabric", adminOnly},
		{"/api/v1/fabric/versions", adminOnly},
		{"/api/v1/fabric/nodes", adminOnly},
		{"/api/v1/fabric/links", adminOnly},
		{"/api/v1/fabric/errors", adminOnly},
		{"/api/v1/fabric/utilization", adminOnly},
		{"/api/v1/fabric/layout", adminOnly},
		{"/api/v1/nodes/" + node, adminOnly},
		{"/api/v1/nodes/" + node + "/counters", adminOnly},
		{"/api/v1/ports/" + port + "/counters", adminOnly},
		{"/api/v1/links/top", adminOnly},
		{"/api/v1/links/" + shared + "/routes", adminOnly},
		{"/api/v1/routes?src=n1&dst=n3", adminOnly},
		{"/api/v1/events", adminOnly},
		{"/api/v1/hotspots?min_utilization=0", adminOnly},
		{"/metrics", adminOnly},
		{"/metrics/ports", adminOnly},
		{"/api/v1/jobs", anyUser},
		{"/api/v1/links/" + shared + "?" + rng, linkShared},
		{"/api/v1/links/" + shared + "/counters?" + rng, linkShared},
		{"/api/v1/links/" + shared + "/jobs?" + rng, linkShared},
		{"/api/v1/links/" + onlyB + "?" + rng, linkOfB},
		{"/api/v1/links/" + onlyB + "/counters?" + rng, linkOfB},
		{"/api/v1/links/" + onlyB + "/jobs?" + rng, linkOfB},
		{"/api/v1/links/" + shared + "/jobs/" + idA + "/pairs", jobOfA},
		{"/api/v1/links/" + shared + "/jobs/" + idB + "/pairs", jobOfB},
	}
	for _, id := range []string{idA, idB} {
		kind := map[string]int{idA: jobOfA, idB: jobOfB}[id]
		for _, sub := range []string{"", "/processes", "/processes/0", "/processes/0/series", "/nodes", "/nodes/n2/series",
			"/series?ranks=0", "/series?nodes=n2", "/matrix", "/matrix?format=sparse", "/histogram", "/profile", "/regions", "/links", "/why"} {
			endpoints = append(endpoints, struct {
				path string
				kind int
			}{"/api/v1/jobs/" + id + sub, kind})
		}
	}
	want := map[int][4]int{ // anonymous, A, B, admin
		adminOnly: {401, 403, 403, 200}, jobOfA: {401, 200, 404, 200}, jobOfB: {401, 404, 200, 200},
		linkShared: {401, 200, 200, 200}, linkOfB: {401, 404, 200, 200}, anyUser: {401, 200, 200, 200},
	}
	for _, e := range endpoints {
		for i, cl := range []*apiClient{anon, a, b, admin} {
			if code, body := cl.do("GET", e.path, nil); code != want[e.kind][i] {
				t.Errorf("%s GET %s: %d, want %d (%.200s)", cl.name, e.path, code, want[e.kind][i], body)
			}
		}
	}
	// The live-update stream too (it would stay open on success).
	if code, _ := a.do("GET", "/api/v1/fabric/stream", nil); code != 403 {
		t.Errorf("user stream: %d, want 403", code)
	}

	// A's job list holds only A's jobs; guessed ids look like missing ones.
	var la2 struct {
		Total int
		Jobs  []jobRow
	}
	a.get("/api/v1/jobs?limit=1000", &la2)
	if la2.Total != 1 || len(la2.Jobs) != 1 || la2.Jobs[0].ID != idA {
		t.Errorf("A's job list: %+v, want only %s", la2, idA)
	}
	_, hidden := a.do("GET", "/api/v1/jobs/"+idB, nil)
	_, missing := a.do("GET", "/api/v1/jobs/999999", nil)
	if strings.Replace(string(hidden), idB, "999999", 1) != string(missing) {
		t.Errorf("another user's job answers differently from a missing one: %s vs %s", hidden, missing)
	}
	n, _ := strconv.Atoi(idB)
	for _, guess := range []string{strconv.Itoa(n + 1), strconv.Itoa(n + 2), idB + "%20", "%2e%2e%2f" + idB, "%20" + idB} {
		if code, _ := a.do("GET", "/api/v1/jobs/"+guess, nil); code != 404 {
			t.Errorf("A read job %q", guess)
		}
	}

	// On the shared link A sees B's traffic only as "other-1".
	var split struct {
		Jobs []struct {
			Job, User  string
			Anonymized bool
			Bytes      uint64
		}
	}
	a.get("/api/v1/links/"+shared+"/jobs?"+rng, &split)
	sawA, sawOther := false, false
	for _, j := range split.Jobs {
		switch {
		case j.Job == idA && !j.Anonymized:
			sawA = true
		case j.Anonymized && strings.HasPrefix(j.Job, "other-") && j.User == "" && j.Bytes > 0:
			sawOther = true
		default:
			t.Errorf("A sees on the shared link: %+v", j)
		}
	}
	if !sawA || !sawOther {
		t.Errorf("A's view of the shared link: %+v; want A's job and an anonymized other", split.Jobs)
	}
	_, whyA := a.do("GET", "/api/v1/jobs/"+idA+"/why", nil)
	if bytes.Contains(whyA, []byte(`"job":"`+idB+`"`)) || bytes.Contains(whyA, []byte(userB)) || !bytes.Contains(whyA, []byte(`"other-1"`)) {
		t.Errorf("A's why names B's job or user, or hides the sharing: %.600s", whyA)
	}

	// Sign-out ends the session.
	if code, _ := b.do("POST", "/api/v1/auth/logout", nil); code != 204 {
		t.Errorf("logout: %d", code)
	}
	if code := b.get("/api/v1/jobs", nil); code != 401 {
		t.Errorf("after logout: %d", code)
	}

	// A flood from B's token (bounded: 32 connections, 4 s) must not stop
	// the administrator, nor grow the daemon's memory without bound.
	rss := func() int {
		s, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
		for _, l := range strings.Split(string(s), "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[0] == "VmRSS:" {
				kb, _ := strconv.Atoi(f[1])
				return kb
			}
		}
		return 0
	}
	before := rss()
	flooder := newClient(t, d.base, "flood")
	flooder.token = tokenB
	flooder.http.Transport = &http.Transport{MaxIdleConnsPerHost: 32}
	var sent, limited atomic.Int64
	stop := time.Now().Add(4 * time.Second)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				req, _ := http.NewRequest("GET", d.base+"/api/v1/jobs/"+idB+"/matrix", nil)
				req.Header.Set("Authorization", "Bearer "+tokenB)
				resp, err := flooder.http.Do(req)
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				sent.Add(1)
				if resp.StatusCode == 429 {
					limited.Add(1)
				}
			}
		}()
	}
	okAdmin, failAdmin := 0, 0
	for time.Now().Before(stop) {
		if admin.get("/api/v1/jobs/"+idA, nil) == 200 && admin.get("/api/v1/status", nil) == 200 {
			okAdmin++
		} else {
			failAdmin++
		}
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	t.Logf("flood: %d requests, %d refused with 429; admin %d ok, %d failed; RSS %d -> %d KiB", sent.Load(), limited.Load(), okAdmin, failAdmin, before, rss())
	if failAdmin > 0 || okAdmin < 10 {
		t.Errorf("during the flood the administrator got %d ok, %d failed", okAdmin, failAdmin)
	}
	if limited.Load() == 0 || limited.Load() < sent.Load()/2 {
		t.Errorf("flood of %d requests: only %d rate-limited", sent.Load(), limited.Load())
	}
	if after := rss(); after > before+100<<10 {
		t.Errorf("RSS grew from %d to %d KiB under the flood", before, after)
	}
	var m string
	if _, body := admin.do("GET", "/metrics", nil); true {
		m = string(body)
	}
	for _, want := range []string{`netloom_http_requests_dropped_total{reason="rate_limited"}`, `netloom_auth_failures_total{reason="unauthenticated"}`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// No secrets in the log.
	for _, secret := range []string{pw[userA], pw[userB], pw["root-admin"], tokenB, a.csrf} {
		if strings.Contains(d.log.String(), secret) {
			t.Errorf("the daemon log holds a secret (%.6s...)", secret)
		}
	}
}

// TestTLS serves HTTPS with a self-signed certificate: the API answers over
// TLS only, with HSTS, and the session cookie is Secure.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "netloom test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	users := filepath.Join(dir, "htpasswd")
	cmd := exec.Command(netloomBin, "user", "add", "ops", "--users", users, "--groups", filepath.Join(dir, "netloom.groups"), "--password-stdin")
	cmd.Stdin = strings.NewReader("ops-password\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("user add: %v %s", err, out)
	}

	d, _ := serve(t, dir, nil, "--fabric", "sim:fat-tree:hosts=16,radix=8", "--db", filepath.Join(dir, "netloom.db"),
		"--agent-listen", "off", "--anonymous", "none", "--users", users, "--tls-cert", certFile, "--tls-key", keyFile)
	if !strings.HasPrefix(d.base, "https://") {
		t.Fatalf("daemon serves %s, want https", d.base)
	}
	pool := x509.NewCertPool()
	parsed, _ := x509.ParseCertificate(der)
	pool.AddCert(parsed)
	c := newClient(t, d.base, "ops")
	c.http.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	body, _ := json.Marshal(map[string]string{"user": "ops", "password": "ops-password"})
	req, _ := http.NewRequest("POST", d.base+"/api/v1/auth/login", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Strict-Transport-Security") == "" {
		t.Fatalf("login over TLS: %d, HSTS %q", resp.StatusCode, resp.Header.Get("Strict-Transport-Security"))
	}
	if ck := resp.Cookies(); len(ck) != 1 || !ck[0].Secure || !ck[0].HttpOnly {
		t.Errorf("session cookie over TLS: %+v, want Secure and HttpOnly", ck)
	}
	var me struct{ User, Role string }
	if code := c.get("/api/v1/auth/me", &me); code != 200 || me.User != "ops" || me.Role != "user" {
		t.Errorf("GET /auth/me over TLS with the session: %d %+v", code, me)
	}
	// Plain HTTP to the TLS port gets no API answer.
	plain, err := http.Get("http://" + strings.TrimPrefix(d.base, "https://") + "/api/v1/status")
	if err == nil {
		b, _ := io.ReadAll(plain.Body)
		plain.Body.Close()
		if plain.StatusCode == 200 || bytes.Contains(b, []byte(`"time"`)) {
			t.Errorf("plain HTTP answered: %d %s", plain.StatusCode, b)
		}
	}
}
