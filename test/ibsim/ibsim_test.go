package ibsim

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestStartRunConsoleStop(t *testing.T) {
	if m := Missing(); m != "" {
		t.Skipf("no simulated fabric: %s", m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f, err := Start(ctx, "testdata/fattree.net", Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := f.Dir
	defer f.Stop()

	out, err := f.Run(ctx, "ibnetdiscover")
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	for _, want := range []string{`# "n1 HCA-1"`, `# "n8 HCA-1"`, `# "spine2"`, `# "leaf4"`} {
		if !strings.Contains(text, want) {
			t.Errorf("ibnetdiscover output lacks %s:\n%s", want, text)
		}
	}
	if n := strings.Count(text, "\nSwitch\t"); n != 6 {
		t.Errorf("ibnetdiscover found %d switches, want 6", n)
	}
	cas, sws, err := f.LIDs()
	if err != nil || len(cas) != 8 || len(sws) != 6 {
		t.Errorf("LIDs() = %v, %v, %v; want 8 CA and 6 switch LIDs", cas, sws, err)
	}

	// Counters set on the console show up in perfquery. The console names
	// nodes by the ids in the net file.
	if err := f.Console(`PerformanceSet "S-0000000000000011"[3] PortCounters.SymbolErrorCounter=7`); err != nil {
		t.Fatal(err)
	}
	lid := switchLID(t, text, "leaf1")
	out, err = f.Run(ctx, "perfquery", lid, "3")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`SymbolErrorCounter:\.+7\n`).Match(out) {
		t.Errorf("perfquery %s 3 does not show SymbolErrorCounter 7:\n%s", lid, out)
	}

	// A second fabric runs beside the first.
	g, err := Start(ctx, "testdata/fattree.net", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if g.SockName == f.SockName {
		t.Errorf("two fabrics share socket name %s", f.SockName)
	}
	g.Stop()

	f.Stop()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("scratch dir %s still there after Stop", dir)
	}
}

func TestStartReportsBadNetFile(t *testing.T) {
	if m := Missing(); m != "" {
		t.Skipf("no simulated fabric: %s", m)
	}
	bad := filepath.Join(t.TempDir(), "bad.net")
	if err := os.WriteFile(bad, []byte("Switch 8 \"S-1\"\n[1] \"nowhere\"[1]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := Start(ctx, bad, Options{Timeout: 5 * time.Second})
	if err == nil {
		f.Stop()
		t.Fatal("Start on a fabric with no CA succeeded")
	}
	if !strings.Contains(err.Error(), bad) {
		t.Errorf("error does not name the net file: %v", err)
	}
}

func switchLID(t *testing.T, ibnetdiscover, desc string) string {
	t.Helper()
	m := regexp.MustCompile(`# "` + regexp.QuoteMeta(desc) + `".* lid (\d+) `).FindStringSubmatch(ibnetdiscover)
	if m == nil {
		t.Fatalf("no LID for %q in ibnetdiscover output", desc)
	}
	return m[1]
}
