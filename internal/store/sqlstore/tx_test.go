package sqlstore

import "testing"

func TestDollar(t *testing.T) {
	for in, want := range map[string]string{
		`SELECT 1`: `SELECT 1`,
		`SELECT a FROM t WHERE b = ? AND (? = '' OR c = ?)`: `SELECT a FROM t WHERE b = $1 AND ($2 = '' OR c = $3)`,
		`SELECT '?', "a?b" FROM t WHERE x = ? LIMIT ?`:      `SELECT '?', "a?b" FROM t WHERE x = $1 LIMIT $2`,
		`SELECT 'it''s ?' WHERE y IN (?, ?)`:                `SELECT 'it''s ?' WHERE y IN ($1, $2)`,
	} {
		if got := Dollar(in); got != want {
			t.Errorf("Dollar(%q) = %q, want %q", in, got, want)
		}
	}
}
