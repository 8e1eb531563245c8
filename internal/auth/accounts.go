package auth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Accounts is one consistent reading of the users, groups and tokens files.
type Accounts struct {
	hashes map[string][]byte       // user -> bcrypt hash
	admins map[string]bool         // members of the admin group
	tokens map[[32]byte]TokenEntry // sha256(token) -> entry
}

// TokenEntry is one API token as the tokens file lists it. The token
// itself is never stored, only its SHA-256.
type TokenEntry struct {
	ID      string // first 12 hex digits of the hash: names the token
	User    string
	Created time.Time
	Label   string
	hash    [32]byte
}

// IsAdmin says whether user is in the admin group.
func (a *Accounts) IsAdmin(user string) bool { return a.admins[user] }

// Role is user's role, "admin" or "user".
func (a *Accounts) Role(user string) string { return (&Principal{Admin: a.IsAdmin(user)}).Role() }

// HasUser says whether user has a local password.
func (a *Accounts) HasUser(user string) bool { _, ok := a.hashes[user]; return ok }

// Users lists the local accounts, sorted.
func (a *Accounts) Users() []string {
	out := make([]string, 0, len(a.hashes))
	for u := range a.hashes {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

// Tokens lists the API tokens, by user then creation.
func (a *Accounts) Tokens() []TokenEntry {
	out := make([]TokenEntry, 0, len(a.tokens))
	for _, t := range a.tokens {
		out = append(out, t)
	}
	slices.SortFunc(out, func(x, y TokenEntry) int {
		if c := strings.Compare(x.User, y.User); c != 0 {
			return c
		}
		return x.Created.Compare(y.Created)
	})
	return out
}

// dummyHash is compared against when a user does not exist, so that a
// login takes as long for an unknown name as for a wrong password. It is
// made on first use: at init it cost every netloom command (the CLI, the
// load generator) a bcrypt hash, about 60 ms of CPU.
var dummyHash = sync.OnceValue(func() []byte {
	h, _ := bcrypt.GenerateFromPassword([]byte("netloom: no such user"), bcrypt.DefaultCost)
	return h
})

// CheckPassword says whether password is user's.
func (a *Accounts) CheckPassword(user, password string) bool {
	h, ok := a.hashes[user]
	if !ok {
		h = dummyHash()
	}
	return bcrypt.CompareHashAndPassword(h, []byte(password)) == nil && ok
}

// Token finds the entry of a presented API token.
func (a *Accounts) Token(token string) (TokenEntry, bool) {
	t, ok := a.tokens[sha256.Sum256([]byte(token))]
	return t, ok
}

// LoadAccounts reads the three files of cfg. A missing file is empty;
// a malformed line is an error naming the file and line.
func LoadAccounts(cfg Config) (*Accounts, error) {
	a := &Accounts{hashes: map[string][]byte{}, admins: map[string]bool{}, tokens: map[[32]byte]TokenEntry{}}
	err := readLines(cfg.UsersFile, func(line string) error {
		name, hash, ok := strings.Cut(line, ":")
		if err := ValidUserName(name); !ok || err != nil {
			return fmt.Errorf("want NAME:BCRYPT-HASH (%v)", err)
		}
		if _, err := bcrypt.Cost([]byte(hash)); err != nil {
			return fmt.Errorf("user %s: the hash is not bcrypt (make it with `netloom user add` or `htpasswd -B`)", name)
		}
		if _, dup := a.hashes[name]; dup {
			return fmt.Errorf("user %s listed twice", name)
		}
		a.hashes[name] = []byte(hash)
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = readLines(cfg.GroupsFile, func(line string) error {
		group, members, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(group) == "" {
			return errors.New("want GROUP: USER USER and so on")
		}
		if strings.TrimSpace(group) == AdminGroup {
			for _, u := range strings.Fields(members) {
				a.admins[u] = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = readLines(cfg.TokensFile, func(line string) error {
		f := strings.Fields(line)
		if len(f) < 3 {
			return errors.New("want SHA256-HEX USER CREATED, then an optional label")
		}
		var t TokenEntry
		if b, err := hex.DecodeString(f[0]); err != nil || len(b) != 32 {
			return errors.New("the token hash is not 64 hex digits")
		} else {
			copy(t.hash[:], b)
		}
		if err := ValidUserName(f[1]); err != nil {
			return err
		}
		created, err := time.Parse(time.RFC3339, f[2])
		if err != nil {
			return fmt.Errorf("created %q: want RFC 3339 time", f[2])
		}
		t.ID, t.User, t.Created, t.Label = f[0][:12], f[1], created, strings.Join(f[3:], " ")
		a.tokens[t.hash] = t
		return nil
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// ValidUserName rejects names the files cannot hold.
func ValidUserName(name string) error {
	switch {
	case name == "":
		return errors.New("empty user name")
	case len(name) > 64:
		return fmt.Errorf("user name %.20q...: longer than 64 bytes", name)
	case strings.ContainsAny(name, ": \t\r\n#"):
		return fmt.Errorf("user name %q: must not contain ':', '#' or spaces", name)
	}
	return nil
}

func readLines(path string, f func(line string) error) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		if err := f(line); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
	}
	return sc.Err()
}

// accountsCache re-reads the files when they change (checked at most
// once a second), so `netloom user add` takes effect without a restart.
// A file that became malformed keeps the last good reading, logged once.
type accountsCache struct {
	cfg     Config
	cur     atomic.Pointer[Accounts]
	mu      sync.Mutex
	checked time.Time
	stamp   string
	onError func(error)
}

func newAccountsCache(cfg Config, onError func(error)) (*accountsCache, error) {
	c := &accountsCache{cfg: cfg, onError: onError}
	a, err := LoadAccounts(cfg)
	if err != nil {
		return nil, err
	}
	c.cur.Store(a)
	c.stamp, c.checked = c.fileStamp(), time.Now()
	return c, nil
}

func (c *accountsCache) fileStamp() string {
	var sb strings.Builder
	for _, p := range []string{c.cfg.UsersFile, c.cfg.GroupsFile, c.cfg.TokensFile} {
		if fi, err := os.Stat(p); err == nil {
			fmt.Fprintf(&sb, "%d/%d;", fi.ModTime().UnixNano(), fi.Size())
		} else {
			sb.WriteString("-;")
		}
	}
	return sb.String()
}

func (c *accountsCache) get() *Accounts {
	if !c.mu.TryLock() {
		return c.cur.Load()
	}
	defer c.mu.Unlock()
	if time.Since(c.checked) < time.Second {
		return c.cur.Load()
	}
	c.checked = time.Now()
	if s := c.fileStamp(); s != c.stamp {
		c.stamp = s
		if a, err := LoadAccounts(c.cfg); err != nil {
			c.onError(err)
		} else {
			c.cur.Store(a)
		}
	}
	return c.cur.Load()
}

// writeFileAtomic replaces path with b (mode 0600) through a rename, so a
// reader never sees half a file.
func writeFileAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
