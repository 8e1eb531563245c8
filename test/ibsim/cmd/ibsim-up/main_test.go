package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/netloom/netloom/test/ibsim"
)

// TestAnswer drives a real ibsim console the way the web tests do: one
// JSON line per command, ibsim's reply in it, refusals as errors.
func TestAnswer(t *testing.T) {
	if m := ibsim.Missing(); m != "" {
		t.Skip(m)
	}
	f, err := ibsim.Start(context.Background(), "../../testdata/fattree.net", ibsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	type ans struct{ Cmd, Reply, Error string }
	send := func(cmd string) ans {
		t.Helper()
		var buf bytes.Buffer
		answer(&buf, f, cmd)
		line := buf.String()
		if !strings.HasPrefix(line, "console {") || strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n") {
			t.Fatalf("answer to %q is not one console line: %q", cmd, line)
		}
		var a ans
		if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "console ")), &a); err != nil {
			t.Fatalf("answer to %q: %v: %q", cmd, err, line)
		}
		if a.Cmd != cmd {
			t.Errorf("answer names %q, sent %q", a.Cmd, cmd)
		}
		return a
	}

	ok := send(`PerformanceSet "S-0000000000000011"[3] PortCountersExtended.PortXmitData=123456789`)
	if ok.Error != "" || !strings.Contains(ok.Reply, "PortXmitData has been set to 123456789") {
		t.Errorf("PerformanceSet: %+v", ok)
	}
	bad := send(`PerformanceSet "S-nope"[3] PortCounters.SymbolErrorCounter=1`)
	if !strings.Contains(bad.Error, `nodeid "S-nope"`) || !strings.HasPrefix(bad.Reply, "#") {
		t.Errorf("unknown node: %+v", bad)
	}
	// The console still works after a refusal, and each answer has only
	// its own command's reply.
	field := send(`PerformanceSet "S-0000000000000011"[3] PortCounters.NoSuchField=1`)
	if !strings.Contains(field.Error, "NoSuchField") || strings.Contains(field.Reply, "S-nope") {
		t.Errorf("unknown field: %+v", field)
	}
	if c := send(`# a comment`); c.Error != "" {
		t.Errorf("comment: %+v", c)
	}
}

func TestRefusal(t *testing.T) {
	for reply, want := range map[string]string{
		"": "",
		"S-1[3] PortCounters.X has been set to 1": "",
		"# nodeid \"x\" (x) not found":            `nodeid "x" (x) not found`,
		"ibwarn: something\n# bad one\n#bad two":  "bad one; bad two",
	} {
		if got := refusal(reply); got != want {
			t.Errorf("refusal(%q) = %q, want %q", reply, got, want)
		}
	}
}
