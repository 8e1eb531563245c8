package ingest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"net/netip"
	"os/user"
	"strconv"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// Authenticated datagrams (docs/security.md, "Agent data"). An agent with MUNGE puts a
// credential in each datagram (field 20) whose payload is CredentialMagic,
// a SessionKeyLen-byte random session key and the job id, and appends an
// HMAC-SHA256 under that key of everything before it (field 21, last). The
// daemon has munged decode each credential once (munged vouches for the
// uid that made it and refuses a second decode), remembers the session it
// names, and checks every later datagram with one map lookup and one HMAC.
const (
	CredentialMagic = "netloom1"
	SessionKeyLen   = 32
	macFieldLen     = 3 + sha256.Size
)

// macHeader is field 21's tag (21<<3|2 as a varint) and length.
var macHeader = [3]byte{0xAA, 0x01, sha256.Size}

// CredentialPayload is what an agent asks munged to put in its credential.
func CredentialPayload(key []byte, jobID string) []byte {
	p := make([]byte, 0, len(CredentialMagic)+len(key)+len(jobID))
	return append(append(append(p, CredentialMagic...), key...), jobID...)
}

// Sign appends the mac field to a serialized datagram, as the agent does
// (append's rules: it may write into datagram's spare capacity).
func Sign(datagram, key []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(datagram)
	return m.Sum(append(datagram, macHeader[:]...))
}

// Credential is what munged vouches for in a valid credential.
type Credential struct {
	Payload []byte
	UID     uint32
	Encoded time.Time     // when the agent's munged made it
	TTL     time.Duration // valid until Encoded + TTL
}

// AuthOptions say which datagrams a Listener accepts. The zero value
// accepts any, as before authentication existed (agent_auth none).
type AuthOptions struct {
	// Refuse, when set, refuses every datagram and says why (agent_auth
	// auto without munged: unverified data must not be taken for a user's
	// unless an administrator said so): those without a credential as
	// unauthenticated, those with one as munge_unavailable.
	Refuse string
	// Decode has munged decode a credential. When set, every datagram must
	// carry a credential and a mac (agent_auth munge). An error that has
	// an Unavailable() bool method saying true is munged's fault, not the
	// credential's; others reject the credential.
	Decode func(cred []byte) (Credential, error)
	// Source, when set, says whether datagrams from an address are
	// accepted at all (agent_networks).
	Source func(netip.Addr) bool
	// UserName names a uid; default os/user (remembered for 10 minutes).
	UserName func(uid uint32) (string, error)
	// Workers decode new credentials concurrently, off the socket reader;
	// default 4.
	Workers int
	// MaxSessions bounds remembered credentials (default 1<<21: two per
	// rank of ten Stampedes' worth of ranks). A credential is forgotten
	// when it expires, or 30 s after its rank moved on to a newer one (a
	// datagram that still carries it is then decoded again, which munged
	// refuses as a replay); past the bound, new credentials are refused
	// (queue_full) until some are forgotten.
	MaxSessions int
	// MaxHeldBytes bounds datagrams held while their credential is being
	// decoded; default 64 MiB.
	MaxHeldBytes int
}

// WithDefaults fills zero fields.
func (o AuthOptions) WithDefaults() AuthOptions {
	if o.UserName == nil {
		o.UserName = lookupUser
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = 1 << 21
	}
	if o.MaxHeldBytes <= 0 {
		o.MaxHeldBytes = 64 << 20
	}
	return o
}

func lookupUser(uid uint32) (string, error) {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return "", err
	}
	return u.Username, nil
}

const (
	// maxHeld bounds datagrams held for one credential being decoded.
	maxHeld = 256
	// retryUnavailable is when a credential that could not be decoded
	// because munged was unreachable is tried again.
	retryUnavailable = 5 * time.Second
	// userTTL is how long a uid's name is remembered.
	userTTL = 10 * time.Minute
	// sweepEvery is how often forgettable sessions are looked for;
	// supersededFor how long a rank's older credential stays valid after
	// a newer one arrived (late chunks); failedFor how long a refused
	// credential is remembered as refused.
	sweepEvery    = 30 * time.Second
	supersededFor = 30 * time.Second
	failedFor     = time.Minute
)

type sessionState uint8

const (
	sessionPending   sessionState = iota // being decoded
	sessionReleasing                     // decoded; its held datagrams are being handed on
	sessionReady
	sessionFailed
)

// session is one credential: the identity munged vouched for, its key,
// and which (snapshot, chunk) pairs it signed were accepted already.
type session struct {
	cred    string
	state   sessionState
	fail    *RejectError // sessionFailed
	retryAt time.Time    // sessionFailed: zero, or when to decode again
	since   time.Time    // sessionFailed: when; sessionReady: when a newer credential of its rank arrived (zero: none yet)
	rank    rankKey      // sessionReady: the rank that last used it
	uid     uint32
	user    string
	named   bool // user is the uid's login name, not its number
	key     []byte
	job     string
	expires time.Time
	win     replayWindow
	held    []held // sessionPending, sessionReleasing
}

type held struct {
	d   *Datagram
	raw []byte
	at  time.Time
}

// verifier checks authenticated datagrams. check runs on the socket
// reader; resolve on decode workers; both only hold mu for map and window
// updates, never during an HMAC or a munged round trip.
type verifier struct {
	opt       AuthOptions
	m         *Metrics
	mu        sync.Mutex
	sessions  map[string]*session  // by credential
	byRank    map[rankKey]*session // each rank's newest credential
	swept     time.Time
	heldBytes int
	queue     chan *session // credentials to decode

	usersMu sync.Mutex
	users   map[uint32]userEntry
}

// macState is one goroutine's HMAC, kept while it meets one session's
// datagrams in a row (a new HMAC per datagram costs two hashes).
type macState struct {
	mac hash.Hash
	key []byte
}

type userEntry struct {
	name string
	ok   bool
	at   time.Time
}

func newVerifier(opt AuthOptions, m *Metrics, queue int) *verifier {
	return &verifier{opt: opt.WithDefaults(), m: m, sessions: map[string]*session{}, byRank: map[rankKey]*session{},
		queue: make(chan *session, queue), users: map[uint32]userEntry{}}
}

type verdict uint8

const (
	accepted verdict = iota
	rejected
	heldBack // waits for its credential's decode
)

// check verifies one decoded datagram (raw: its bytes as received) with
// the calling goroutine's HMAC state. A datagram whose credential is new
// is held and its credential queued for decoding.
func (v *verifier) check(ms *macState, d *Datagram, raw []byte, now time.Time) (verdict, Item, *RejectError) {
	if len(d.Credential) == 0 {
		return rejected, Item{}, reject(ReasonUnauthenticated, "job %s rank %d: no credential", d.JobId, d.Rank)
	}
	if err := macPlaced(d, raw); err != nil {
		return rejected, Item{}, err
	}
	v.mu.Lock()
	if now.Sub(v.swept) >= sweepEvery || (len(v.sessions) >= v.opt.MaxSessions && now.Sub(v.swept) >= time.Second) {
		v.sweep(now)
	}
	s := v.sessions[string(d.Credential)]
	if s == nil {
		if !plausibleCredential(d.Credential) {
			v.mu.Unlock()
			return rejected, Item{}, reject(ReasonBadCredential, "job %s rank %d: not a MUNGE credential", d.JobId, d.Rank)
		}
		if len(v.sessions) >= v.opt.MaxSessions {
			v.mu.Unlock()
			return rejected, Item{}, reject(ReasonQueueFull, "job %s rank %d: %d credentials remembered already", d.JobId, d.Rank, len(v.sessions))
		}
		s = &session{cred: string(d.Credential)}
		if err := v.hold(s, d, raw, now); err != nil {
			v.mu.Unlock()
			return rejected, Item{}, err
		}
		if err := v.enqueue(s); err != nil {
			v.mu.Unlock()
			return rejected, Item{}, err
		}
		v.sessions[s.cred] = s
		v.mu.Unlock()
		return heldBack, Item{}, nil
	}
	switch s.state {
	case sessionPending, sessionReleasing:
		err := v.hold(s, d, raw, now)
		v.mu.Unlock()
		if err != nil {
			return rejected, Item{}, err
		}
		return heldBack, Item{}, nil
	case sessionFailed:
		if s.retryAt.IsZero() || now.Before(s.retryAt) {
			v.mu.Unlock()
			return rejected, Item{}, s.fail
		}
		s.state, s.fail, s.retryAt = sessionPending, nil, time.Time{}
		err := v.hold(s, d, raw, now)
		if err == nil {
			err = v.enqueue(s)
		}
		if err != nil {
			s.state, s.fail, s.retryAt, s.since = sessionFailed, err, now.Add(retryUnavailable), now
			v.drain(s)
			v.mu.Unlock()
			return rejected, Item{}, err
		}
		v.mu.Unlock()
		return heldBack, Item{}, nil
	}
	v.mu.Unlock()
	// Keyed once per session met in a row.
	if !bytes.Equal(ms.key, s.key) || ms.mac == nil {
		ms.mac, ms.key = hmac.New(sha256.New, s.key), s.key
	} else {
		ms.mac.Reset()
	}
	it, err := v.verify(s, ms.mac, d, raw, now)
	if err != nil {
		return rejected, Item{}, err
	}
	return accepted, it, nil
}

// checkIdentity refuses a datagram whose process names itself with a
// control character (NUL, escape, newline, DEL, C1) or bytes that are not
// UTF-8, in its user, node, host, program or MPI library: under
// agent_auth none the user becomes the job's owner as claimed, and every
// one of them is stored and shown as a name. Checked in every mode,
// before the datagram is verified or believed; counted as bad_string.
func checkIdentity(d *Datagram) *RejectError {
	p := d.Process
	if p == nil {
		return nil
	}
	for _, f := range [...]struct{ name, v string }{{"user", p.User}, {"node", p.Node}, {"host", p.Host},
		{"program", p.Program}, {"mpi_library", p.MpiLibrary}} {
		if bad := badNameRune(f.v); bad != "" {
			return reject(ReasonString, "job %s rank %d: process %s %s holds %s", d.JobId, d.Rank, f.name, strconv.QuoteToASCII(f.v), bad)
		}
	}
	return nil
}

// badNameRune says what in s may not be in a name ("" when nothing).
func badNameRune(s string) string {
	if !utf8.ValidString(s) {
		return "bytes that are not UTF-8"
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Sprintf("the control character %U", r)
		}
	}
	return ""
}

// macPlaced checks that the datagram ends with its mac field.
func macPlaced(d *Datagram, raw []byte) *RejectError {
	n := len(raw)
	if len(d.Mac) != sha256.Size || n < macFieldLen || !bytes.Equal(raw[n-macFieldLen:n-sha256.Size], macHeader[:]) ||
		!bytes.Equal(raw[n-sha256.Size:], d.Mac) {
		return reject(ReasonBadMAC, "job %s rank %d: no 32-byte mac as the last field", d.JobId, d.Rank)
	}
	return nil
}

// plausibleCredential: munge_encode's text is "MUNGE:", base64, ":".
// Anything else is refused without asking munged.
func plausibleCredential(c []byte) bool {
	if len(c) < 8 || !bytes.HasPrefix(c, []byte("MUNGE:")) || c[len(c)-1] != ':' {
		return false
	}
	for _, b := range c[6 : len(c)-1] {
		if !(b >= 'A' && b <= 'Z' || b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '+' || b == '/' || b == '=') {
			return false
		}
	}
	return true
}

// verify checks a datagram against a decoded session. mac is an HMAC
// under the session's key, freshly reset.
func (v *verifier) verify(s *session, mac hash.Hash, d *Datagram, raw []byte, at time.Time) (Item, *RejectError) {
	if at.After(s.expires) {
		return Item{}, reject(ReasonBadCredential, "job %s rank %d: credential of uid %d expired at %s", d.JobId, d.Rank, s.uid,
			s.expires.UTC().Format(time.RFC3339))
	}
	n := len(raw) - macFieldLen
	mac.Write(raw[:n])
	var sum [sha256.Size]byte
	if !hmac.Equal(mac.Sum(sum[:0]), d.Mac) {
		return Item{}, reject(ReasonBadMAC, "job %s rank %d: mac does not match the credential's key", d.JobId, d.Rank)
	}
	if d.JobId != s.job {
		return Item{}, reject(ReasonJobMismatch, "datagram of job %q rank %d carries a credential for job %q (uid %d)", d.JobId, d.Rank, s.job, s.uid)
	}
	if p := d.Process; p != nil && s.named && p.User != s.user {
		return Item{}, reject(ReasonUserMismatch, "job %s rank %d claims user %q; its credential is uid %d (%s)", d.JobId, d.Rank, p.User, s.uid, s.user)
	}
	v.mu.Lock()
	fresh := s.win.accept(d.Seq, d.Chunk)
	if fresh {
		v.current(s, rankKey{d.JobId, int(d.Rank)}, at)
	}
	v.mu.Unlock()
	if !fresh {
		return Item{}, reject(ReasonReplayed, "job %s rank %d: snapshot %d chunk %d seen before under this credential", d.JobId, d.Rank, d.Seq, d.Chunk)
	}
	if p := d.Process; p != nil {
		p.User = s.user
	}
	return Item{D: d, Size: len(raw), At: at, User: s.user, UID: s.uid, Verified: true}, nil
}

// hold keeps a copy of a datagram until its credential is decoded.
func (v *verifier) hold(s *session, d *Datagram, raw []byte, at time.Time) *RejectError {
	if len(s.held) >= maxHeld || v.heldBytes+len(raw) > v.opt.MaxHeldBytes {
		return reject(ReasonQueueFull, "job %s rank %d: too many datagrams wait for credentials to be decoded", d.JobId, d.Rank)
	}
	s.held = append(s.held, held{d: d, raw: bytes.Clone(raw), at: at})
	v.heldBytes += len(raw)
	return nil
}

// drain forgets a session's held datagrams (called with mu held).
func (v *verifier) drain(s *session) []held {
	h := s.held
	s.held = nil
	for _, x := range h {
		v.heldBytes -= len(x.raw)
	}
	return h
}

func (v *verifier) enqueue(s *session) *RejectError {
	select {
	case v.queue <- s:
		return nil
	default:
		return reject(ReasonQueueFull, "credential decoding fell behind (%d waiting)", len(v.queue))
	}
}

// current notes that a rank used session s; a rank's older session is
// forgotten a while after it moved to a newer one (called with mu held).
func (v *verifier) current(s *session, k rankKey, at time.Time) {
	s.rank = k
	c := v.byRank[k]
	if c == s {
		return
	}
	if c != nil && c.expires.After(s.expires) {
		if s.since.IsZero() {
			s.since = at // a late datagram under an older credential
		}
		return
	}
	if c != nil && c.since.IsZero() {
		c.since = at
	}
	v.byRank[k] = s
}

// sweep forgets expired sessions, those of ranks that moved on, and
// refusals after a while (called with mu held).
func (v *verifier) sweep(now time.Time) {
	v.swept = now
	for cred, s := range v.sessions {
		var gone bool
		switch s.state {
		case sessionReady:
			gone = now.After(s.expires) || (!s.since.IsZero() && now.Sub(s.since) >= supersededFor)
		case sessionFailed:
			gone = now.Sub(s.since) >= failedFor && (s.retryAt.IsZero() || now.After(s.retryAt))
		}
		if gone {
			delete(v.sessions, cred)
			if v.byRank[s.rank] == s {
				delete(v.byRank, s.rank)
			}
		}
	}
}

// result is the outcome for one datagram held back.
type result struct {
	it  Item
	err *RejectError
}

// resolve decodes a session's credential through munged, verifies the
// datagrams held for it and hands each result to emit, in the order they
// arrived, with those that arrive meanwhile.
func (v *verifier) resolve(s *session, now time.Time, emit func(result)) {
	var fail *RejectError
	var retry time.Time
	c, err := v.opt.Decode([]byte(s.cred))
	v.m.decoded()
	var key []byte
	var job string
	if err != nil {
		var u interface{ Unavailable() bool }
		if errors.As(err, &u) && u.Unavailable() {
			fail, retry = reject(ReasonMungeUnavailable, "decoding a credential: %v", err), now.Add(retryUnavailable)
		} else {
			fail = reject(ReasonBadCredential, "%v", err)
		}
	} else if len(c.Payload) <= len(CredentialMagic)+SessionKeyLen || !bytes.HasPrefix(c.Payload, []byte(CredentialMagic)) {
		fail = reject(ReasonBadCredential, "credential of uid %d does not hold a netloom session (%d-byte payload)", c.UID, len(c.Payload))
	} else {
		key = bytes.Clone(c.Payload[len(CredentialMagic) : len(CredentialMagic)+SessionKeyLen])
		job = string(c.Payload[len(CredentialMagic)+SessionKeyLen:])
	}
	var name string
	var named bool
	if fail == nil {
		name, named = v.userName(c.UID, now)
	}
	v.mu.Lock()
	h := v.drain(s)
	if fail != nil {
		s.state, s.fail, s.retryAt, s.since = sessionFailed, fail, retry, now
	} else {
		s.uid, s.user, s.named, s.key, s.job = c.UID, name, named, key, job
		s.expires = c.Encoded.Add(c.TTL)
		s.state = sessionReleasing
	}
	v.mu.Unlock()
	var mac hash.Hash
	for {
		for _, x := range h {
			if fail != nil {
				emit(result{err: &RejectError{Reason: fail.Reason, Detail: fmt.Sprintf("job %s rank %d: %s", x.d.JobId, x.d.Rank, fail.Detail)}})
				continue
			}
			if mac == nil {
				mac = hmac.New(sha256.New, key)
			} else {
				mac.Reset()
			}
			it, err := v.verify(s, mac, x.d, x.raw, x.at)
			emit(result{it: it, err: err})
		}
		if fail != nil {
			return
		}
		// Datagrams that came while these were handed on were held too:
		// the session is ready once none is left, so that no later
		// datagram of a rank overtakes an earlier one.
		v.mu.Lock()
		if len(s.held) == 0 {
			s.state = sessionReady
			v.mu.Unlock()
			return
		}
		h = v.drain(s)
		v.mu.Unlock()
	}
}

// userName is the login name of uid, or its number when it has none here.
func (v *verifier) userName(uid uint32, now time.Time) (string, bool) {
	v.usersMu.Lock()
	e, ok := v.users[uid]
	v.usersMu.Unlock()
	if ok && now.Sub(e.at) < userTTL {
		return e.name, e.ok
	}
	name, err := v.opt.UserName(uid)
	e = userEntry{name: name, ok: err == nil && name != "", at: now}
	if !e.ok {
		e.name = strconv.FormatUint(uint64(uid), 10)
	}
	v.usersMu.Lock()
	if len(v.users) >= 1<<16 {
		clear(v.users)
	}
	v.users[uid] = e
	v.usersMu.Unlock()
	return e.name, e.ok
}

// replayWindow remembers which chunks of a session's newest snapshot and
// the one before were accepted: chunks may come out of order within and
// across those two, never twice, and nothing older is taken.
type replayWindow struct {
	seen      bool
	top       uint64
	cur, prev []uint64 // chunk bitsets of snapshots top and top-1
}

func (w *replayWindow) accept(seq uint64, chunk uint32) bool {
	switch {
	case !w.seen || seq > w.top:
		if w.seen && seq == w.top+1 {
			w.prev, w.cur = w.cur, w.prev
		} else {
			clear(w.prev)
		}
		clear(w.cur)
		w.top, w.seen = seq, true
		return mark(&w.cur, chunk)
	case seq == w.top:
		return mark(&w.cur, chunk)
	case seq == w.top-1:
		return mark(&w.prev, chunk)
	}
	return false
}

func mark(bits *[]uint64, chunk uint32) bool {
	i := int(chunk / 64)
	if i >= len(*bits) {
		*bits = append(*bits, make([]uint64, i+1-len(*bits))...)
	}
	b := uint64(1) << (chunk % 64)
	if (*bits)[i]&b != 0 {
		return false
	}
	(*bits)[i] |= b
	return true
}
