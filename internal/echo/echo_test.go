package echo

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCut(t *testing.T) {
	if got := Quote("n1", 100); got != `"n1"` {
		t.Errorf("Quote(n1) = %s", got)
	}
	if got := Clip("short", 100); got != "short" {
		t.Errorf("Clip(short) = %s", got)
	}
	// A 3-byte rune across the limit: the cut backs up to its start.
	s := strings.Repeat("a", 99) + "€" + strings.Repeat("b", 50)
	if got, want := Quote(s, 100), `"`+strings.Repeat("a", 99)+`"... (53 more bytes)`; got != want {
		t.Errorf("Quote(%d bytes) = %s; want %s", len(s), got, want)
	}
	if got := Clip(s, 101); !utf8.ValidString(got) || !strings.HasSuffix(got, "a... (53 more bytes)") {
		t.Errorf("Clip(%d bytes, 101) = %s", len(s), got)
	}
}
