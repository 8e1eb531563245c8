package sched

import (
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"
)

func TestExpandHostlist(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"n1", "n1"},
		{"n[1-3,5]", "n1 n2 n3 n5"},
		{"n[1-3],gpu[08-10],login", "n1 n2 n3 gpu08 gpu09 gpu10 login"},
		{"r[1-2]n[1-2]", "r1n1 r1n2 r2n1 r2n2"},
		{"n[8-10]", "n8 n9 n10"},
		{"n[098-101]-ib", "n098-ib n099-ib n100-ib n101-ib"},
		{"a-[0]", "a-0"},
		{" n1 ,, n2 ", "n1 n2"},
		{"[1-2]", "1 2"},
		{"r[1-2]n[3]x", "r1n3x r2n3x"},
		{"n[999999999999999998-999999999999999999]", "n999999999999999998 n999999999999999999"},
	} {
		got, err := ExpandHostlist(c.in)
		if err != nil || strings.Join(got, " ") != c.want {
			t.Errorf("ExpandHostlist(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
		if n, err := CountHostlist(c.in); err != nil || n != uint64(len(got)) {
			t.Errorf("CountHostlist(%q) = %d, %v; want %d", c.in, n, err, len(got))
		}
	}
	for _, in := range []string{"n[", "n]", "n[1-", "n[a-b]", "n[[1]]", "n[5-1]", "n[0-99999999]", "n[0-999]x[0-9999]", "a b", "n[]", "n[1-2-3]",
		"n[1-99999999999999999999]", "n[1]]", "n[1] x"} {
		if got, err := ExpandHostlist(in); err == nil {
			t.Errorf("ExpandHostlist(%q) = %q, want an error", in, got)
		}
	}
}

func TestCountHostlist(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
	}{
		{"", 0},
		{"n1,n2", 2},
		{"n[1-1048576]", 1 << 20},
		{"n[1-1048576],x", 1<<20 + 1},
		{"n[1-3,5,7-9]", 7},
		{"r[1-1000]n[1-1000]c[1-1000]", 1e9},
		{"n[0-999999999999999999]", 1e18},
		// 1e18 cubed does not fit in 64 bits: the count saturates.
		{"a[0-999999999999999999]b[0-999999999999999999]c[0-999999999999999999]", math.MaxUint64},
		// Twenty ranges of 1e18 each overflow the sum inside one bracket.
		{"n[" + strings.Repeat("0-999999999999999999,", 19) + "0-999999999999999999]", math.MaxUint64},
		// And items that each fit add up past 64 bits.
		{strings.Repeat("a[0-999999999999999999]b[0-9],", 2), math.MaxUint64},
	} {
		got, err := CountHostlist(c.in)
		if err != nil || got != c.want {
			t.Errorf("CountHostlist(%.60q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	// Syntax errors are the same as ExpandHostlist's, including a bound
	// past what parses (20 digits) and brackets that nest.
	for _, in := range []string{"n[1-99999999999999999999]", "n[[1-2]]", "n[1-2", "n[2-1]", "a b"} {
		if n, err := CountHostlist(in); err == nil {
			t.Errorf("CountHostlist(%q) = %d, want an error", in, n)
		}
	}
}

// TestExpandHostlistMaxRefusesByCount: a hostlist over the caller's limit
// is refused by its count, with the count in the error, before its names
// are made; the error quotes a bounded prefix of the input.
func TestExpandHostlistMaxRefusesByCount(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := ExpandHostlistMax("n[1-1048576]", 64)
	runtime.ReadMemStats(&after)
	var tm *TooManyHostsError
	if !errors.As(err, &tm) || tm.Count != 1<<20 || tm.Limit != 64 || !strings.Contains(err.Error(), "names 1048576 hosts, more than 64") {
		t.Fatalf("ExpandHostlistMax(n[1-1048576], 64): %v", err)
	}
	// A million names would be tens of megabytes; counting is a few
	// small allocations.
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<10 {
		t.Errorf("refusing by count allocated %d bytes", got)
	}
	_, err = ExpandHostlistMax("a[0-999999999999999999]b[0-999999999999999999]", 10)
	if !errors.As(err, &tm) || tm.Count != math.MaxUint64 || !strings.Contains(err.Error(), "more than 18446744073709551614 hosts") {
		t.Errorf("an overflowing count: %v", err)
	}
	if got, err := ExpandHostlistMax("n[1-4]", 4); err != nil || len(got) != 4 {
		t.Errorf("n[1-4] at a limit of 4: %q, %v", got, err)
	}
	if _, err := ExpandHostlistMax("n1", -1); !errors.As(err, &tm) {
		t.Errorf("a negative limit takes nothing: %v", err)
	}

	long := strings.Repeat("x", 10000) + "[1-99999999]"
	_, err = ExpandHostlist(long)
	if err == nil || len(err.Error()) > 300 || !strings.Contains(err.Error(), "more bytes)") {
		t.Errorf("error for a 10 kB hostlist: %d bytes: %.400s", len(err.Error()), err)
	}
	_, err = ExpandHostlist("n[" + strings.Repeat("1,", 5000) + "x]")
	if err == nil || len(err.Error()) > 400 {
		t.Errorf("error for a 10 kB range list: %d bytes: %.500s", len(err.Error()), err)
	}
}

func TestQuote(t *testing.T) {
	if got := Quote("n1"); got != `"n1"` {
		t.Errorf("Quote(n1) = %s", got)
	}
	// 99 ASCII bytes then a 3-byte rune across the limit: the cut backs
	// up to the rune's start rather than split it.
	s := strings.Repeat("a", 99) + "€" + strings.Repeat("b", 50)
	want := `"` + strings.Repeat("a", 99) + `"... (53 more bytes)`
	if got := Quote(s); got != want {
		t.Errorf("Quote(%d bytes) = %s; want %s", len(s), got, want)
	}
}

func FuzzExpandHostlist(f *testing.F) {
	for _, s := range []string{"n[1-3,5]", "r[1-2]n[01-02],x", "n[0-1048575]", "n[1-1048576]", "a[1-9]b[1-9]c[1-9]", "n[1-99999999999999999999]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, cerr := CountHostlist(s)
		got, err := ExpandHostlist(s)
		if err == nil && len(got) > MaxHostlist {
			t.Fatalf("%d names", len(got))
		}
		if err == nil && (cerr != nil || n != uint64(len(got))) {
			t.Fatalf("CountHostlist = %d, %v; ExpandHostlist made %d names", n, cerr, len(got))
		}
		// The two agree on the syntax: expansion fails on its own only
		// for too many names, which the count says.
		var tm *TooManyHostsError
		if err != nil && !errors.As(err, &tm) && cerr == nil {
			t.Fatalf("ExpandHostlist: %v; CountHostlist = %d without an error", err, n)
		}
		if err != nil && errors.As(err, &tm) && (cerr != nil || n <= MaxHostlist || tm.Count != n) {
			t.Fatalf("ExpandHostlist: %v; CountHostlist = %d, %v", err, n, cerr)
		}
		if cerr != nil && err == nil {
			t.Fatalf("CountHostlist: %v; ExpandHostlist made %d names", cerr, len(got))
		}
	})
}
