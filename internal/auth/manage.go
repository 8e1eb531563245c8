package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// This file changes the account files for `netloom user` and `netloom
// token`. Each change rewrites one file atomically and keeps its comments
// and other lines as they were.

// SetUser adds user with password, or changes the password of an existing
// one; admin puts the user in the admin group or takes them out.
func SetUser(cfg Config, user, password string, admin bool) error {
	if err := ValidUserName(user); err != nil {
		return err
	}
	if len(password) < 8 {
		return errors.New("password: at least 8 characters")
	}
	if len(password) > 72 {
		return errors.New("password: bcrypt uses at most 72 bytes")
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return err
	}
	if err := editLines(cfg.UsersFile, func(lines []string) []string {
		out := slices.DeleteFunc(lines, func(l string) bool { return lineUser(l, ":") == user })
		return append(out, user+":"+string(hash))
	}); err != nil {
		return err
	}
	return setAdmin(cfg, user, admin)
}

// DeleteUser removes user's password, admin role and API tokens.
func DeleteUser(cfg Config, user string) error {
	a, err := LoadAccounts(cfg)
	if err != nil {
		return err
	}
	if !a.HasUser(user) {
		return fmt.Errorf("no user %q in %s", user, cfg.UsersFile)
	}
	if err := editLines(cfg.UsersFile, func(lines []string) []string {
		return slices.DeleteFunc(lines, func(l string) bool { return lineUser(l, ":") == user })
	}); err != nil {
		return err
	}
	if err := setAdmin(cfg, user, false); err != nil {
		return err
	}
	return editLines(cfg.TokensFile, func(lines []string) []string {
		return slices.DeleteFunc(lines, func(l string) bool {
			f := strings.Fields(l)
			return len(f) > 1 && f[1] == user && !strings.HasPrefix(l, "#")
		})
	})
}

func setAdmin(cfg Config, user string, admin bool) error {
	return editLines(cfg.GroupsFile, func(lines []string) []string {
		found := false
		for i, l := range lines {
			group, members, ok := strings.Cut(l, ":")
			if !ok || strings.TrimSpace(group) != AdminGroup || strings.HasPrefix(l, "#") {
				continue
			}
			found = true
			m := slices.DeleteFunc(strings.Fields(members), func(u string) bool { return u == user })
			if admin {
				m = append(m, user)
			}
			lines[i] = AdminGroup + ": " + strings.Join(m, " ")
		}
		if !found && admin {
			lines = append(lines, AdminGroup+": "+user)
		}
		return lines
	})
}

// tokenPrefix marks Netloom API tokens, so that secret scanners and people
// can tell them apart.
const tokenPrefix = "nlt_"

// AddToken makes a new API token for user and returns it; only its hash
// is kept, so it cannot be shown again.
func AddToken(cfg Config, user, label string) (token string, e TokenEntry, err error) {
	if err := ValidUserName(user); err != nil {
		return "", e, err
	}
	if strings.ContainsAny(label, "\r\n") {
		return "", e, errors.New("label: must be one line")
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", e, err
	}
	token = tokenPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	h := sha256.Sum256([]byte(token))
	e = TokenEntry{ID: hex.EncodeToString(h[:])[:12], User: user, Created: time.Now().UTC().Truncate(time.Second), Label: label, hash: h}
	line := strings.TrimSpace(fmt.Sprintf("%x %s %s %s", h, user, e.Created.Format(time.RFC3339), label))
	return token, e, editLines(cfg.TokensFile, func(lines []string) []string { return append(lines, line) })
}

// RevokeToken removes the token whose ID (or a unique prefix of its hash,
// at least 6 hex digits) is id.
func RevokeToken(cfg Config, id string) error {
	if len(id) < 6 {
		return errors.New("token id: give at least 6 hex digits")
	}
	n := 0
	err := editLines(cfg.TokensFile, func(lines []string) []string {
		return slices.DeleteFunc(lines, func(l string) bool {
			if strings.HasPrefix(l, "#") || !strings.HasPrefix(l, id) {
				return false
			}
			n++
			return true
		})
	})
	if err == nil && n != 1 {
		if n == 0 {
			return fmt.Errorf("no token %s in %s", id, cfg.TokensFile)
		}
		return fmt.Errorf("token id %s matched %d tokens; give more digits", id, n)
	}
	return err
}

// editLines rewrites path with edit applied to its lines, refusing to
// write a file the daemon would then reject.
func editLines(path string, edit func([]string) []string) error {
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var lines []string
	if s := strings.TrimRight(string(b), "\n"); s != "" {
		lines = strings.Split(s, "\n")
	}
	lines = edit(lines)
	out := strings.Join(lines, "\n")
	if out != "" {
		out += "\n"
	}
	if err := writeFileAtomic(path, []byte(out)); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func lineUser(line, sep string) string {
	if strings.HasPrefix(strings.TrimSpace(line), "#") {
		return ""
	}
	u, _, _ := strings.Cut(line, sep)
	return strings.TrimSpace(u)
}
