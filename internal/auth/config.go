// Package auth decides who is asking: local accounts (htpasswd, bcrypt),
// sessions with CSRF tokens, API tokens, single sign-on through a trusted
// reverse proxy, and anonymous access when configured. It also bounds what
// any one client can cost the daemon (rate, size, concurrency) and sets the
// security headers of every response. What a principal may see is decided
// by the API (internal/api), from the Principal this package attaches to
// each request.
package auth

import (
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Config is the `auth:` block of the daemon's config.
type Config struct {
	// UsersFile is an htpasswd file of bcrypt hashes (htpasswd -B, or
	// `netloom user add`); GroupsFile lists roles in Apache's group file
	// format ("admin: alice bob"); TokensFile holds API tokens, hashed.
	UsersFile  string `yaml:"users_file"`
	GroupsFile string `yaml:"groups_file"`
	TokensFile string `yaml:"tokens_file"`
	// Anonymous is the role of a request that proves no identity: "none"
	// (default: it gets 401) or "admin" (a single-user workstation or a
	// demo; never on a shared cluster).
	Anonymous string `yaml:"anonymous"`
	// ProxyHeader names the header a trusted reverse proxy sets to the
	// signed-in user (e.g. X-Remote-User); it is believed only from
	// ProxyNetworks.
	ProxyHeader   string   `yaml:"proxy_header"`
	ProxyNetworks []string `yaml:"proxy_networks"`
	// SessionTTL is how long a login lasts without use (default 12h).
	SessionTTL time.Duration `yaml:"session_ttl"`
	// RateLimit is the requests per second each client (user, or address
	// when anonymous) may make on average, RateBurst how many at once
	// (defaults 100 and 400; a negative RateLimit turns limiting off).
	RateLimit float64 `yaml:"rate_limit"`
	RateBurst int     `yaml:"rate_burst"`
	// MaxInFlight bounds requests served at once (default 256) and
	// MaxStreams open live-update streams (default 1024); past them the
	// daemon answers 503 instead of queueing.
	MaxInFlight int `yaml:"max_in_flight"`
	MaxStreams  int `yaml:"max_streams"`
	// MaxBodyBytes bounds a request body (default 64 KiB).
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
}

// Defaults.
const (
	DefaultUsersFile  = "netloom.htpasswd"
	DefaultGroupsFile = "netloom.groups"
	DefaultTokensFile = "netloom.tokens"
	AdminGroup        = "admin"
)

// WithDefaults fills every zero field with its default.
func (c Config) WithDefaults() Config {
	set := func(s *string, d string) {
		if *s == "" {
			*s = d
		}
	}
	set(&c.UsersFile, DefaultUsersFile)
	set(&c.GroupsFile, DefaultGroupsFile)
	set(&c.TokensFile, DefaultTokensFile)
	set(&c.Anonymous, "none")
	if c.SessionTTL == 0 {
		c.SessionTTL = 12 * time.Hour
	}
	if c.RateLimit == 0 {
		c.RateLimit = 100
	}
	if c.RateBurst == 0 {
		c.RateBurst = 400
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 256
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = 1024
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 64 << 10
	}
	return c
}

// Validate reports the first impossible field, named as in the config file.
func (c Config) Validate() error {
	switch {
	case c.Anonymous != "none" && c.Anonymous != "admin":
		return fmt.Errorf("auth.anonymous %q: want none or admin", c.Anonymous)
	case c.SessionTTL < time.Minute:
		return fmt.Errorf("auth.session_ttl %s: must be at least 1m", c.SessionTTL)
	case c.RateBurst < 0:
		return fmt.Errorf("auth.rate_burst %d: must not be negative", c.RateBurst)
	case c.MaxInFlight < 1 || c.MaxStreams < 1:
		return fmt.Errorf("auth.max_in_flight and auth.max_streams must be at least 1")
	case c.MaxBodyBytes < 1024:
		return fmt.Errorf("auth.max_body_bytes %d: must be at least 1024", c.MaxBodyBytes)
	case c.ProxyHeader != "" && len(c.ProxyNetworks) == 0:
		return fmt.Errorf("auth.proxy_header %q: set auth.proxy_networks to the proxy's addresses, or anyone could claim to be anyone", c.ProxyHeader)
	}
	_, err := ParseNetworks("auth.proxy_networks", c.ProxyNetworks)
	return err
}

// ParseNetworks parses CIDR prefixes (a bare address is one host); field
// names the setting in errors.
func ParseNetworks(field string, nets []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for i, s := range nets {
		s = strings.TrimSpace(s)
		if !strings.Contains(s, "/") {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, fmt.Errorf("%s[%d] %q: not an address or CIDR prefix", field, i, s)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%s[%d] %q: %v", field, i, s, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Contains says whether addr is in one of nets.
func Contains(nets []netip.Prefix, addr netip.Addr) bool {
	addr = addr.Unmap()
	for _, p := range nets {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}
