package sched

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxHostlist bounds how many names ExpandHostlist produces, so a hostile
// or broken "n[0-999999999]" fails instead of eating memory.
const MaxHostlist = 1 << 20

// ExpandHostlist expands Slurm's hostlist syntax: comma-separated names,
// each with any number of bracketed range lists, e.g.
// "n[1-3,5],gpu[01-02]" is n1 n2 n3 n5 gpu01 gpu02 and "r[1-2]n[1-2]" is
// r1n1 r1n2 r2n1 r2n2. A range keeps the zero padding of its lower bound.
// Names keep the order given; "" is an empty list.
func ExpandHostlist(s string) ([]string, error) {
	var out []string
	items, err := splitTop(s)
	if err != nil {
		return nil, fmt.Errorf("hostlist %q: %w", s, err)
	}
	for _, item := range items {
		names, err := expandItem(item, MaxHostlist-len(out))
		if err != nil {
			return nil, fmt.Errorf("hostlist %q: %w", s, err)
		}
		out = append(out, names...)
	}
	return out, nil
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

// expandItem expands one name with brackets into the cartesian product of
// its ranges, producing at most limit names.
func expandItem(item string, limit int) ([]string, error) {
	open := strings.IndexByte(item, '[')
	if open < 0 {
		if strings.ContainsAny(item, "] \t") {
			return nil, fmt.Errorf("bad host name %q", item)
		}
		if limit < 1 {
			return nil, fmt.Errorf("more than %d hosts", MaxHostlist)
		}
		return []string{item}, nil
	}
	closeAt := strings.IndexByte(item[open:], ']') + open
	prefix, ranges, rest := item[:open], item[open+1:closeAt], item[closeAt+1:]
	if strings.ContainsAny(prefix, "] \t") {
		return nil, fmt.Errorf("bad host name prefix %q", prefix)
	}
	values, err := expandRanges(ranges, limit)
	if err != nil {
		return nil, err
	}
	tails := []string{""}
	if rest != "" {
		if tails, err = expandItem(rest, limit); err != nil {
			return nil, err
		}
	}
	if len(values)*len(tails) > limit {
		return nil, fmt.Errorf("more than %d hosts", MaxHostlist)
	}
	out := make([]string, 0, len(values)*len(tails))
	for _, v := range values {
		for _, t := range tails {
			out = append(out, prefix+v+t)
		}
	}
	return out, nil
}

// expandRanges expands "1-3,5,07-09" into its numbers as strings.
func expandRanges(ranges string, limit int) ([]string, error) {
	var out []string
	for _, r := range strings.Split(ranges, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			hi = lo
		}
		a, errA := parseIndex(lo)
		b, errB := parseIndex(hi)
		if errA != nil || errB != nil {
			return nil, fmt.Errorf("bad range %q in [%s]", r, ranges)
		}
		if b < a {
			return nil, fmt.Errorf("range %q in [%s] runs backwards", r, ranges)
		}
		if b-a >= uint64(limit-len(out)) {
			return nil, fmt.Errorf("range %q: more than %d hosts", r, MaxHostlist)
		}
		width := 0
		if len(lo) > 1 && lo[0] == '0' {
			width = len(lo)
		}
		for n := a; n <= b; n++ {
			s := strconv.FormatUint(n, 10)
			if len(s) < width {
				s = strings.Repeat("0", width-len(s)) + s
			}
			out = append(out, s)
		}
	}
	return out, nil
}

func parseIndex(s string) (uint64, error) {
	if s == "" || len(s) > 18 || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("not a number: %q", s)
	}
	return strconv.ParseUint(s, 10, 64)
}
