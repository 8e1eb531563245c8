package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunSaysWhereReportsGo: netloom run says where the ranks' reports
// go and how it knows (issue 28: a job sent to another daemon's address
// file and never appeared), and where the profiles are written. The
// launcher here is `true`, which ignores the agent's arguments.
func TestRunSaysWhereReportsGo(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "libnetloom-ompi.so")
	if err := os.WriteFile(lib, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	addrFile := filepath.Join(dir, "agent-address")
	if err := os.WriteFile(addrFile, []byte("10.1.2.3:8467\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NETLOOM_DAEMON", "")
	t.Setenv("XDG_RUNTIME_DIR", "")
	base := []string{"run", "--mpi", "ompi", "--lib", lib, "--job-id", "j7"}
	for _, c := range []struct {
		name, file string
		args       []string
		want       []string
	}{
		{"flag", addrFile, []string{"--daemon", "mgmt:9"}, []string{"netloom: reports to mgmt:9 (--daemon)\n"}},
		{"address file", addrFile, nil, []string{"netloom: reports to 10.1.2.3:8467 (the address file " + addrFile + ", which the daemon writes; ranks on other nodes read their own)\n"}},
		{"nowhere", filepath.Join(dir, "none"), []string{"--output", dir},
			[]string{"netloom: reports to no daemon: no --daemon, no NETLOOM_DAEMON, and no address in " + filepath.Join(dir, "none") + ", /run/netloom/agent-address (netloom serve writes it)\n",
				"netloom: profiles to " + filepath.Join(dir, "j7") + "\n"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("NETLOOM_DAEMON_FILE", c.file)
			if _, err := os.Stat("/run/netloom/agent-address"); err == nil && c.name == "nowhere" {
				t.Skip("this machine has /run/netloom/agent-address (a daemon runs here)")
			}
			args := append(append(append([]string{}, base...), c.args...), "--", "true")
			_, errOut, code := netloom(t, args...)
			if code != 0 {
				t.Fatalf("netloom run: exit %d: %s", code, errOut)
			}
			for _, w := range c.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
		})
	}
	t.Setenv("NETLOOM_DAEMON_FILE", "")
	t.Setenv("NETLOOM_DAEMON", "h:1")
	if _, errOut, _ := netloom(t, append(append([]string{}, base...), "--", "true")...); !strings.Contains(errOut, "netloom: reports to h:1 (NETLOOM_DAEMON in the environment)\n") {
		t.Errorf("with NETLOOM_DAEMON set: %s", errOut)
	}
}
