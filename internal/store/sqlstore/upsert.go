package sqlstore

import "strings"

// Excluded is an upsert's SET clause that takes every given (non-key)
// column from the new row; both engines' ON CONFLICT … DO UPDATE read it.
func Excluded(cols ...string) string {
	s := make([]string, len(cols))
	for i, c := range cols {
		s[i] = c + " = excluded." + c
	}
	return strings.Join(s, ", ")
}
