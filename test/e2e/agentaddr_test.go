package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAgentAddressFileWithdrawn: a daemon stopped as a service manager does
// (SIGTERM) removes the agent address file it wrote, so later jobs on the
// host do not report to a daemon that is gone; when another daemon has
// written the file since, the first one's exit leaves that address in place.
func TestAgentAddressFileWithdrawn(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "run", "agent-address")
	start := func(name string) (*daemon, string) {
		return serve(t, dir, nil, "--fabric", "sim:fat-tree:hosts=8,radix=8", "--db", filepath.Join(dir, name+".db"),
			"--agent-listen", "127.0.0.1:0", "--agent-address-file", file)
	}
	read := func(t *testing.T) string {
		t.Helper()
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("agent address file: %v", err)
		}
		return strings.TrimSpace(string(b))
	}
	gone := func(t *testing.T, after string) {
		t.Helper()
		if _, err := os.Stat(file); !os.IsNotExist(err) {
			t.Fatalf("after %s the agent address file is still there (%v)", after, err)
		}
	}

	t.Run("alone", func(t *testing.T) {
		a, addr := start("alone")
		if got := read(t); got != addr {
			t.Fatalf("agent address file says %q, daemon printed %q", got, addr)
		}
		a.in(t).stop()
		gone(t, "the only daemon stopped")
		if !strings.Contains(a.log.String(), "agent address file removed") {
			t.Errorf("the daemon did not log the removal:\n%s", tailString(a.log.String(), 10))
		}
	})

	t.Run("overwritten", func(t *testing.T) {
		a, addrA := start("first")
		b, addrB := start("second")
		if addrA == addrB {
			t.Fatalf("both daemons advertise %s", addrA)
		}
		if got := read(t); got != addrB {
			t.Fatalf("agent address file says %q, want the second daemon's %q", got, addrB)
		}
		a.in(t).stop()
		if got := read(t); got != addrB {
			t.Fatalf("after the first daemon stopped the file says %q, want the second daemon's %q", got, addrB)
		}
		if !strings.Contains(a.log.String(), "agent address file left in place") {
			t.Errorf("the first daemon did not say why it left the file:\n%s", tailString(a.log.String(), 10))
		}
		b.in(t).stop()
		gone(t, "the second daemon stopped")
	})

	t.Run("rewritten with the same address", func(t *testing.T) {
		// Something else (another daemon, an administrator) replaced the
		// file since, with the same bytes: it is not this daemon's to remove.
		a, addr := start("same")
		tmp := file + ".other"
		if err := os.WriteFile(tmp, []byte(addr+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
		a.in(t).stop()
		if got := read(t); got != addr {
			t.Fatalf("the file rewritten by someone else says %q after the daemon stopped, want %q", got, addr)
		}
	})
}
