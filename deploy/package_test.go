package deploy

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/daemon"
)

// nfpm is the packager `make package` runs (keep the two in step).
const nfpm = "github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.0"

func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestDefaultConfig(t *testing.T) {
	c, err := daemon.LoadConfig("netloom.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.DB != "/var/lib/netloom/netloom.db" || len(c.WithDefaults().Alerting.Enabled()) < 10 {
		t.Errorf("default config %+v", c)
	}
}

// buildDeb packages what `make build` made with nfpm, as `make package`
// does, into a temporary folder.
func buildDeb(t *testing.T) string {
	t.Helper()
	root, _ := filepath.Abs("..")
	for _, f := range []string{"bin/netloom", "bin/lib/libnetloom-ompi.so", "bin/lib/libnetloom-mpich.so"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Skipf("%s not built (make build)", f)
		}
	}
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("dpkg-deb unavailable")
	}
	out := t.TempDir()
	run(t, root, []string{"NETLOOM_VERSION=0.0.0+test"}, "go", "run", nfpm, "package", "--config", "deploy/nfpm.yaml", "--packager", "deb", "--target", out)
	debs, _ := filepath.Glob(filepath.Join(out, "*.deb"))
	if len(debs) != 1 {
		t.Fatalf("nfpm made %v", debs)
	}
	return debs[0]
}

// TestDebPackage checks the .deb's control data and contents; as root on
// a machine without Netloom installed it also installs it with dpkg, checks
// the netloom user, the config and the unit, starts the binary as the unit
// does (its user, working directory and command, on a simulated fabric),
// and purges it again.
func TestDebPackage(t *testing.T) {
	deb := buildDeb(t)
	info := run(t, "", nil, "dpkg-deb", "--info", deb)
	for _, want := range []string{"Package: netloom", "Depends: adduser, libibnetdisc5", "postinst", "conffiles"} {
		if !strings.Contains(info, want) {
			t.Errorf("dpkg-deb --info lacks %q:\n%s", want, info)
		}
	}
	contents := run(t, "", nil, "dpkg-deb", "--contents", deb)
	for _, want := range []string{"./usr/bin/netloom", "./usr/lib/netloom/libnetloom-ompi.so", "./usr/lib/netloom/libnetloom-mpich.so",
		"./etc/netloom/netloom.yaml", "./lib/systemd/system/netloom.service", "./usr/share/netloom/prometheus/netloom.rules.yml",
		"./usr/share/netloom/grafana/netloom-fabric.json"} {
		if !strings.Contains(contents, want) {
			t.Errorf("package lacks %s", want)
		}
	}
	if os.Getuid() != 0 {
		t.Skip("installing needs root")
	}
	if _, err := os.Stat("/usr/bin/netloom"); err == nil {
		t.Skip("/usr/bin/netloom exists: not overwriting an installed Netloom")
	}
	t.Cleanup(func() {
		out, err := exec.Command("dpkg", "--purge", "netloom").CombinedOutput()
		if err != nil {
			t.Errorf("dpkg --purge: %v\n%s", err, out)
		}
		_ = exec.Command("deluser", "--system", "netloom").Run()
		_ = exec.Command("delgroup", "--system", "netloom").Run()
		os.RemoveAll("/var/lib/netloom")
		os.RemoveAll("/run/netloom")
	})
	run(t, "", nil, "dpkg", "-i", deb)

	if out := run(t, "", nil, "getent", "passwd", "netloom"); !strings.Contains(out, "/var/lib/netloom") || !strings.Contains(out, "nologin") {
		t.Errorf("netloom user: %s", out)
	}
	if out := run(t, "", nil, "stat", "-c", "%U:%G %a", "/var/lib/netloom", "/etc/netloom/netloom.yaml"); out != "netloom:netloom 750\nroot:netloom 640\n" {
		t.Errorf("owners and modes:\n%s", out)
	}
	if _, err := exec.LookPath("systemd-analyze"); err == nil {
		cmd := exec.Command("systemd-analyze", "verify", "/lib/systemd/system/netloom.service")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("systemd-analyze verify: %v\n%s", err, out)
		}
	}

	// The unit's user, folders and command line.
	unit, err := os.ReadFile("/lib/systemd/system/netloom.service")
	if err != nil {
		t.Fatal(err)
	}
	key := func(k string) string {
		m := regexp.MustCompile(`(?m)^` + k + `=(.*)$`).FindSubmatch(unit)
		if m == nil {
			t.Fatalf("unit has no %s", k)
		}
		return string(m[1])
	}
	user, workdir, runtime := key("User"), key("WorkingDirectory"), key("RuntimeDirectory")
	execStart := strings.Fields(key("ExecStart"))
	as := []string{"--reuid=" + user, "--regid=" + key("Group"), "--init-groups", "--"}
	run(t, "", nil, "install", "-d", "-o", user, "-g", key("Group"), "/run/"+runtime)
	// First use, as the config file says: an administrator account.
	add := exec.Command("setpriv", append(as, "/usr/bin/netloom", "user", "add", "admin", "--admin", "--password-stdin",
		"--users", "/var/lib/netloom/netloom.htpasswd")...)
	add.Dir, add.Stdin = workdir, strings.NewReader("package-test-secret\n")
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("netloom user add as %s: %v\n%s", user, err, out)
	}
	// The unit's command on a simulated fabric (no InfiniBand port here),
	// on a free port: flags override the installed config.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "setpriv", append(append(as, execStart...), "--fabric", "sim:fat-tree:hosts=16,radix=8",
		"--listen", "127.0.0.1:0", "--agent-listen", "127.0.0.1:0")...)
	cmd.Dir = workdir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	base := ""
	sc := bufio.NewScanner(stdout)
	for base == "" && sc.Scan() {
		if m := regexp.MustCompile(`serving on (http://\S+)`).FindStringSubmatch(sc.Text()); m != nil {
			base = m[1]
		}
	}
	if base == "" {
		t.Fatalf("the unit's command did not serve:\n%s", stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	resp, err := http.Get(base + "/api/v1/alerts")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous GET /api/v1/alerts: %s, want 401 (the packaged config requires accounts)", resp.Status)
	}
	for _, f := range []string{"/var/lib/netloom/netloom.db", "/run/netloom/agent-address"} {
		if out := run(t, "", nil, "stat", "-c", "%U", f); out != user+"\n" {
			t.Errorf("%s owned by %q", f, out)
		}
	}
	login, err := http.Post(base+"/api/v1/auth/login", "application/json", strings.NewReader(`{"user":"admin","password":"package-test-secret"}`))
	if err != nil {
		t.Fatal(err)
	}
	login.Body.Close()
	if login.StatusCode != 200 {
		t.Errorf("signing in as the account made at first use: %s", login.Status)
	}
}
