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

// TestHaltRestart stops a server of its own and starts it again: the same
// URL answers and what was committed is there.
func TestHaltRestart(t *testing.T) {
	if m := Missing(); m != "" {
		t.Skip(m)
	}
	ctx := context.Background()
	s, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	url, err := s.CreateDB(ctx, "halt")
	if err != nil {
		t.Fatal(err)
	}
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	s.Halt()
	if err := c.Ping(ctx); err == nil {
		t.Fatal("a connection still answers after Halt")
	}
	if _, err := pgx.Connect(ctx, url); err == nil {
		t.Fatal("connected to a halted server")
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	c, err = pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var v int
	if err := c.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != 42 {
		t.Fatalf("after a restart: %d, %v", v, err)
	}
}
