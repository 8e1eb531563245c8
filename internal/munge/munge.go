// Package munge encodes and decodes MUNGE credentials through libmunge
// (Debian libmunge-dev): the daemon decodes the credentials MPI agents put
// in their datagrams, and checks at start that munged answers.
//
// Every call is a round trip to munged over its Unix socket (libmunge
// bounds each by its own timeouts: about 2 s per attempt, 5 attempts), so
// callers keep these calls off paths that must not wait.
package munge

/*
#cgo CFLAGS: -std=gnu11 -Wall -Wextra -Werror
#cgo LDFLAGS: -lmunge
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <munge.h>

// nl_ctx makes a libmunge context for the munged at socket (NULL:
// libmunge's default); *e says whether the socket could be set. NULL when
// out of memory.
static munge_ctx_t nl_ctx(const char *socket, munge_err_t *e)
{
	munge_ctx_t ctx = munge_ctx_create();
	*e = ctx ? EMUNGE_SUCCESS : EMUNGE_NO_MEMORY;
	if (ctx && socket)
		*e = munge_ctx_set(ctx, MUNGE_OPT_SOCKET, socket);
	return ctx;
}

// nl_decode decodes cred through the munged at socket (NULL: libmunge's
// default). On success the payload is malloc'ed into *buf (the caller frees
// it); on failure *msg is a malloc'ed error text.
static munge_err_t nl_decode(const char *cred, const char *socket, void **buf, int *len,
                             uid_t *uid, gid_t *gid, time_t *encoded, int *ttl, uid_t *decoder, char **msg)
{
	*buf = NULL;
	*msg = NULL;
	munge_err_t e;
	munge_ctx_t ctx = nl_ctx(socket, &e);
	if (!ctx)
		return e;
	if (e == EMUNGE_SUCCESS)
		e = munge_decode(cred, ctx, buf, len, uid, gid);
	if (e == EMUNGE_SUCCESS) {
		munge_ctx_get(ctx, MUNGE_OPT_ENCODE_TIME, encoded);
		munge_ctx_get(ctx, MUNGE_OPT_TTL, ttl);
		munge_ctx_get(ctx, MUNGE_OPT_UID_RESTRICTION, decoder);
	} else {
		const char *s = munge_ctx_strerror(ctx);
		*msg = strdup(s ? s : munge_strerror(e));
		free(*buf); // allocated for some errors (expired, rewound, replayed)
		*buf = NULL;
	}
	munge_ctx_destroy(ctx);
	return e;
}

// nl_encode makes a credential holding buf (ttl 0: munged's default).
static munge_err_t nl_encode(char **cred, const char *socket, const void *buf, int len, int ttl, char **msg)
{
	*cred = NULL;
	*msg = NULL;
	munge_err_t e;
	munge_ctx_t ctx = nl_ctx(socket, &e);
	if (!ctx)
		return e;
	if (e == EMUNGE_SUCCESS && ttl > 0)
		e = munge_ctx_set(ctx, MUNGE_OPT_TTL, ttl);
	if (e == EMUNGE_SUCCESS)
		e = munge_encode(cred, ctx, buf, len);
	if (e != EMUNGE_SUCCESS) {
		const char *s = munge_ctx_strerror(ctx);
		*msg = strdup(s ? s : munge_strerror(e));
	}
	munge_ctx_destroy(ctx);
	return e;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"time"
	"unsafe"
)

// Credential is what munged vouches for in a valid credential.
type Credential struct {
	Payload  []byte
	UID, GID uint32
	Encoded  time.Time     // when it was made (by the encoding host's munged)
	TTL      time.Duration // valid until Encoded + TTL
	// Restricted: only the uid Decoder may decode it (MUNGE_OPT_UID_RESTRICTION);
	// otherwise any local user can, and learn its payload.
	Restricted bool
	Decoder    uint32
}

// Kinds of failure, for errors.Is on an *Error.
var (
	ErrExpired     = errors.New("credential expired")
	ErrRewound     = errors.New("credential from the future (clocks out of step)")
	ErrReplayed    = errors.New("credential replayed (decoded before)")
	ErrInvalid     = errors.New("credential invalid")
	ErrUnavailable = errors.New("munged unavailable")
)

// Error is a failed libmunge call: its error number and message.
type Error struct {
	Code int    // munge_err_t
	Msg  string // munge_ctx_strerror
}

func (e *Error) Error() string { return fmt.Sprintf("munge: %s (error %d)", e.Msg, e.Code) }

// Is maps the error number to one of the Err* kinds.
func (e *Error) Is(target error) bool { return target == e.kind() }

// Unavailable says the fault is munged's or the socket's, not the
// credential's: trying again later may succeed.
func (e *Error) Unavailable() bool { return e.kind() == ErrUnavailable }

func (e *Error) kind() error {
	switch C.munge_err_t(e.Code) {
	case C.EMUNGE_CRED_EXPIRED:
		return ErrExpired
	case C.EMUNGE_CRED_REWOUND:
		return ErrRewound
	case C.EMUNGE_CRED_REPLAYED:
		return ErrReplayed
	case C.EMUNGE_SOCKET, C.EMUNGE_TIMEOUT, C.EMUNGE_SNAFU, C.EMUNGE_NO_MEMORY:
		return ErrUnavailable
	default: // bad format, version, cipher, MAC, realm, invalid, unauthorized
		return ErrInvalid
	}
}

// Client talks to one munged.
type Client struct {
	// Socket is munged's socket; "" is libmunge's default
	// (/run/munge/munge.socket.2 on Debian).
	Socket string
}

func (c Client) socket() *C.char {
	if c.Socket == "" {
		return nil
	}
	return C.CString(c.Socket)
}

// maxCredential bounds what is handed to munged (credentials of netloom
// payloads are a few hundred bytes).
const maxCredential = 1 << 16

// Decode validates cred (the text Encode or munge_encode returned). munged
// accepts each credential once: a second Decode of the same one fails with
// ErrReplayed until it expires.
func (c Client) Decode(cred []byte) (Credential, error) {
	if len(cred) == 0 || len(cred) > maxCredential {
		return Credential{}, &Error{Code: int(C.EMUNGE_BAD_CRED), Msg: fmt.Sprintf("credential of %d bytes", len(cred))}
	}
	for _, b := range cred {
		if b == 0 {
			return Credential{}, &Error{Code: int(C.EMUNGE_BAD_CRED), Msg: "credential holds a NUL byte"}
		}
	}
	ccred := C.CString(string(cred))
	defer C.free(unsafe.Pointer(ccred))
	sock := c.socket()
	defer C.free(unsafe.Pointer(sock))
	var (
		buf     unsafe.Pointer
		n       C.int
		uid     C.uid_t
		gid     C.gid_t
		encoded C.time_t
		ttl     C.int
		decoder C.uid_t
		msg     *C.char
	)
	e := C.nl_decode(ccred, sock, &buf, &n, &uid, &gid, &encoded, &ttl, &decoder, &msg)
	if e != C.EMUNGE_SUCCESS {
		defer C.free(unsafe.Pointer(msg))
		return Credential{}, &Error{Code: int(e), Msg: C.GoString(msg)}
	}
	defer C.free(buf)
	out := Credential{UID: uint32(uid), GID: uint32(gid), Encoded: time.Unix(int64(encoded), 0),
		TTL: time.Duration(ttl) * time.Second}
	if decoder != C.uid_t(^uint32(0)) { // MUNGE_UID_ANY
		out.Restricted, out.Decoder = true, uint32(decoder)
	}
	if buf != nil && n > 0 {
		out.Payload = C.GoBytes(buf, n)
	}
	return out, nil
}

// Encode makes a credential of the calling process's uid and gid holding
// payload; ttl 0 is munged's default (300 s unless configured).
func (c Client) Encode(payload []byte, ttl time.Duration) ([]byte, error) {
	sock := c.socket()
	defer C.free(unsafe.Pointer(sock))
	var p unsafe.Pointer
	if len(payload) > 0 {
		p = C.CBytes(payload)
		defer C.free(p)
	}
	var cred, msg *C.char
	e := C.nl_encode(&cred, sock, p, C.int(len(payload)), C.int(ttl/time.Second), &msg)
	if e != C.EMUNGE_SUCCESS {
		defer C.free(unsafe.Pointer(msg))
		return nil, &Error{Code: int(e), Msg: C.GoString(msg)}
	}
	defer C.free(unsafe.Pointer(cred))
	return []byte(C.GoString(cred)), nil
}

// Check makes a credential and decodes it: whether munged answers, and
// decodes for this process. The error says why not.
func (c Client) Check() error {
	cred, err := c.Encode([]byte("netloom check"), 0)
	if err != nil {
		return err
	}
	_, err = c.Decode(cred)
	return err
}
