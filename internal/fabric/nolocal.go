package fabric

import (
	"errors"
	"fmt"
	"strings"
)

// NoLocalPortError is an InfiniBand source that could not open the local
// management port (umad): a machine without InfiniBand, without the
// ib_umad module, without access to /dev/infiniband, or an adapter or
// port that is not there. WithAlternatives adds what the command that
// failed can use in its place.
type NoLocalPortError struct {
	Err    error  // what the management stack said
	Reason string // the likely cause, in words
}

func (e *NoLocalPortError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("no InfiniBand management port here: %v", e.Err)
	}
	return fmt.Sprintf("no InfiniBand management port here: %v (%s)", e.Err, e.Reason)
}

func (e *NoLocalPortError) Unwrap() error { return e.Err }

// Alternative is one option a command can take in place of the local
// InfiniBand port, and what it gives.
type Alternative struct {
	Option, What string
}

// The alternatives the commands offer.
var (
	AltSim       = Alternative{"--fabric sim:SPEC", "a simulated fabric (specs: netloom serve --help)"}
	AltDB        = Alternative{"--db DB", "the topology and forwarding tables a netloom daemon stored in DB"}
	AltDBTopo    = Alternative{"--db DB", "the topology a netloom daemon stored in DB"}
	AltLoadCache = Alternative{"--load-cache FILE", "the topology in an ibnetdiscover cache (ibnetdiscover --cache FILE, run where the fabric is)"}
	AltRoleAPI   = Alternative{"--role api --db DB", "the API and UI alone, from the database that collectors on the fabric write (docs/postgres.md)"}
)

// hinted is an error with the alternatives to the local port named.
type hinted struct {
	err  error
	alts []Alternative
}

func (h *hinted) Error() string {
	var b strings.Builder
	b.WriteString(h.err.Error())
	w := 0
	for _, a := range h.alts {
		w = max(w, len(a.Option))
	}
	b.WriteString("\nwithout InfiniBand here, use:")
	for _, a := range h.alts {
		fmt.Fprintf(&b, "\n  %-*s  %s", w, a.Option, a.What)
	}
	return b.String()
}

func (h *hinted) Unwrap() error { return h.err }

// WithAlternatives returns err with the alternatives a command offers in
// place of the local InfiniBand port named after it, when err is (or
// wraps) a NoLocalPortError; any other error, and nil, come back as they
// are. A second call replaces the alternatives of the first. Every command
// that opens a fabric source calls it with its own, so that a machine
// without InfiniBand is told what to do instead.
func WithAlternatives(err error, alts ...Alternative) error {
	var np *NoLocalPortError
	if len(alts) == 0 || !errors.As(err, &np) {
		return err
	}
	if h, ok := err.(*hinted); ok {
		err = h.err
	}
	return &hinted{err: err, alts: alts}
}
