// Command pg-up starts a private PostgreSQL server for tests that are not
// written in Go (the web UI's), creates one empty database, prints its URL
// on one line and keeps the server running until its standard input closes
// or it is interrupted:
//
//	go run ./test/postgres/cmd/pg-up
//	postgres://postgres@127.0.0.1:PORT/netloom?sslmode=disable
//
// Like the Go tests' servers (test/postgres), it needs Debian's postgresql
// (scripts/install-deps.sh) and runs the server as the postgres user when
// started as root.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/netloom/netloom/test/postgres"
)

func main() {
	if why := postgres.Missing(); why != "" {
		fmt.Fprintln(os.Stderr, "pg-up:", why)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	s, err := postgres.Start(startCtx, postgres.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "pg-up:", err)
		os.Exit(1)
	}
	defer s.Stop()
	url, err := s.CreateDB(startCtx, "netloom")
	if err != nil {
		fmt.Fprintln(os.Stderr, "pg-up:", err)
		return
	}
	fmt.Println(url)
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(closed)
	}()
	select {
	case <-ctx.Done():
	case <-closed:
	}
}
