package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// Unreachable tells an error of reaching the database (refused or broken
// connections, a server shutting down or starting up, too many
// connections, a serialization failure) from one about the data or the
// schema: a write that failed for the first kind may succeed as it is
// when tried again later, one that failed for the second never will.
func Unreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"): // connection exception
			return true
		case pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03": // admin shutdown, crash shutdown, cannot connect now
			return true
		case pe.Code == "53300", pe.Code == "53400": // too many connections, configuration limit exceeded
			return true
		case pe.Code == "40001", pe.Code == "40P01": // serialization failure, deadlock: try again
			return true
		}
		return false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &ce), errors.As(err, &ne), pgconn.SafeToRetry(err), pgconn.Timeout(err):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	// pgx reports a connection it closed after an error as such, without
	// a type to test.
	return strings.Contains(err.Error(), "conn closed")
}
