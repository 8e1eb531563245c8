package sched

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"

	"github.com/netloom/netloom/internal/echo"
)

// MaxHostlist bounds how many names ExpandHostlist produces, so a hostile
// or broken "n[0-999999999]" fails instead of eating memory.
const MaxHostlist = 1 << 20

// quoteLimit is how much of a hostlist (or of one of its parts) an error
// quotes: enough to recognize it, never the megabytes a request may carry.
const quoteLimit = 100

// TooManyHostsError is a hostlist that names more hosts than its caller
// takes. It is found by counting, before any name is made.
type TooManyHostsError struct {
	// Count is how many names the hostlist expands to, math.MaxUint64 when
	// that does not fit in 64 bits.
	Count uint64
	Limit int
}

func (e *TooManyHostsError) Error() string {
	return fmt.Sprintf("names %s hosts, more than %d", CountText(e.Count), e.Limit)
}

// CountText writes a count from CountHostlist, saying so when it overflowed.
func CountText(n uint64) string {
	if n == math.MaxUint64 {
		return "more than 18446744073709551614"
	}
	return strconv.FormatUint(n, 10)
}

// ExpandHostlist expands Slurm's hostlist syntax: comma-separated names,
// each with any number of bracketed range lists, e.g.
// "n[1-3,5],gpu[01-02]" is n1 n2 n3 n5 gpu01 gpu02 and "r[1-2]n[1-2]" is
// r1n1 r1n2 r2n1 r2n2. A range keeps the zero padding of its lower bound.
// Names keep the order given; "" is an empty list. More than MaxHostlist
// names are refused.
func ExpandHostlist(s string) ([]string, error) {
	return ExpandHostlistMax(s, MaxHostlist)
}

// ExpandHostlistMax is ExpandHostlist for at most limit names: a hostlist
// naming more is refused with a *TooManyHostsError (wrapped), counted
// before anything is allocated for its names.
func ExpandHostlistMax(s string, limit int) ([]string, error) {
	items, err := parseHostlist(s)
	if err != nil {
		return nil, err
	}
	n := countItems(items)
	if n > uint64(max(limit, 0)) {
		return nil, fmt.Errorf("hostlist %s: %w", Quote(s), &TooManyHostsError{Count: n, Limit: limit})
	}
	out := make([]string, 0, n)
	for _, it := range items {
		out = it.expand(out)
	}
	return out, nil
}

// CountHostlist says how many names ExpandHostlist would make of s,
// without making them: the ranges of a name multiply, the names add up.
// A count past 64 bits is math.MaxUint64. It fails exactly where
// ExpandHostlist fails on the syntax.
func CountHostlist(s string) (uint64, error) {
	items, err := parseHostlist(s)
	if err != nil {
		return 0, err
	}
	return countItems(items), nil
}

// Quote quotes s for an error message, at most quoteLimit bytes of it and
// how many more there were: user input is echoed, but boundedly.
func Quote(s string) string { return echo.Quote(s, quoteLimit) }

// clip is Quote without the quotes, for text already set off by brackets.
func clip(s string) string { return echo.Clip(s, quoteLimit) }

// hostItem is one comma-separated name: segments, each a literal followed
// by the bracketed ranges that vary there (none in the last segment).
type hostItem []hostSegment

type hostSegment struct {
	literal string
	ranges  []indexRange // nil: the literal alone
}

// indexRange is lo..hi, written with at least width digits.
type indexRange struct {
	lo, hi uint64
	width  int
}

// parseHostlist checks the whole hostlist's syntax and holds it in a form
// as small as the text, from which it is counted or expanded.
func parseHostlist(s string) ([]hostItem, error) {
	words, err := splitTop(s)
	if err != nil {
		return nil, fmt.Errorf("hostlist %s: %w", Quote(s), err)
	}
	items := make([]hostItem, 0, len(words))
	for _, w := range words {
		it, err := parseItem(w)
		if err != nil {
			return nil, fmt.Errorf("hostlist %s: %w", Quote(s), err)
		}
		items = append(items, it)
	}
	return items, nil
}

// splitTop splits at commas outside brackets, dropping empty items.
func splitTop(s string) ([]string, error) {
	var items []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			if depth++; depth > 1 {
				return nil, fmt.Errorf("nested '[' at byte %d", i)
			}
		case ']':
			if depth--; depth < 0 {
				return nil, fmt.Errorf("unmatched ']' at byte %d", i)
			}
		case ',':
			if depth == 0 {
				if it := strings.TrimSpace(s[start:i]); it != "" {
					items = append(items, it)
				}
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unclosed '['")
	}
	if it := strings.TrimSpace(s[start:]); it != "" {
		items = append(items, it)
	}
	return items, nil
}

// parseItem parses one name with brackets (splitTop has checked that
// they pair up and do not nest).
func parseItem(item string) (hostItem, error) {
	var it hostItem
	rest := item
	for {
		open := strings.IndexByte(rest, '[')
		if open < 0 {
			if strings.ContainsAny(rest, "] \t") {
				return nil, fmt.Errorf("bad host name %s", Quote(rest))
			}
			if rest != "" || len(it) == 0 {
				it = append(it, hostSegment{literal: rest})
			}
			return it, nil
		}
		closeAt := strings.IndexByte(rest[open:], ']') + open
		prefix, ranges := rest[:open], rest[open+1:closeAt]
		if strings.ContainsAny(prefix, "] \t") {
			return nil, fmt.Errorf("bad host name prefix %s", Quote(prefix))
		}
		rs, err := parseRanges(ranges)
		if err != nil {
			return nil, err
		}
		it = append(it, hostSegment{literal: prefix, ranges: rs})
		rest = rest[closeAt+1:]
	}
}

// parseRanges parses "1-3,5,07-09".
func parseRanges(ranges string) ([]indexRange, error) {
	var out []indexRange
	for _, r := range strings.Split(ranges, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			hi = lo
		}
		a, errA := parseIndex(lo)
		b, errB := parseIndex(hi)
		if errA != nil || errB != nil {
			return nil, fmt.Errorf("bad range %s in [%s]", Quote(r), clip(ranges))
		}
		if b < a {
			return nil, fmt.Errorf("range %s in [%s] runs backwards", Quote(r), clip(ranges))
		}
		width := 0
		if len(lo) > 1 && lo[0] == '0' {
			width = len(lo)
		}
		out = append(out, indexRange{a, b, width})
	}
	return out, nil
}

func parseIndex(s string) (uint64, error) {
	if s == "" || len(s) > 18 || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("not a number: %q", s)
	}
	return strconv.ParseUint(s, 10, 64)
}

// countItems adds up the items' counts, saturating at math.MaxUint64.
func countItems(items []hostItem) uint64 {
	var n uint64
	for _, it := range items {
		n = addSat(n, it.count())
	}
	return n
}

// count is the product of the item's segments' range sizes.
func (it hostItem) count() uint64 {
	n := uint64(1)
	for _, seg := range it {
		if seg.ranges == nil {
			continue
		}
		var k uint64
		for _, r := range seg.ranges {
			// hi and lo have at most 18 digits: hi-lo+1 cannot overflow.
			k = addSat(k, r.hi-r.lo+1)
		}
		n = mulSat(n, k)
	}
	return n
}

// expand appends the item's names to out: the first segment's ranges vary
// slowest, as Slurm writes them.
func (it hostItem) expand(out []string) []string {
	var walk func(i int, prefix string)
	walk = func(i int, prefix string) {
		if i == len(it) {
			out = append(out, prefix)
			return
		}
		seg := it[i]
		if seg.ranges == nil {
			walk(i+1, prefix+seg.literal)
			return
		}
		for _, r := range seg.ranges {
			for n := r.lo; ; n++ {
				walk(i+1, prefix+seg.literal+padded(n, r.width))
				if n == r.hi {
					break
				}
			}
		}
	}
	walk(0, "")
	return out
}

func padded(n uint64, width int) string {
	s := strconv.FormatUint(n, 10)
	if len(s) < width {
		s = strings.Repeat("0", width-len(s)) + s
	}
	return s
}

func addSat(a, b uint64) uint64 {
	s, carry := bits.Add64(a, b, 0)
	if carry != 0 {
		return math.MaxUint64
	}
	return s
}

func mulSat(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}
