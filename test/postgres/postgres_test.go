package postgres

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m, Options{})) }

func TestServer(t *testing.T) {
	s := Shared(t)
	ctx := context.Background()
	a, b := s.NewDB(t), s.NewDB(t)
	if a == b {
		t.Fatalf("two databases share a URL: %s", a)
	}
	c, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var v int
	if err := c.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&v); err != nil || v < 150000 {
		t.Fatalf("server version %d (%v), want 15 or later", v, err)
	}
	var user string
	if err := c.QueryRow(ctx, "SELECT current_user").Scan(&user); err != nil || user != Superuser {
		t.Errorf("current_user = %q (%v)", user, err)
	}
}
