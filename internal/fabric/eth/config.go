// Package eth is a fabric.Source for Ethernet (and RoCE) fabrics: it reads
// switches over SNMP (v2c or v3 authPriv, through github.com/gosnmp/gosnmp)
// from a list of management addresses. The topology is what the switches
// publish in LLDP-MIB (their neighbours; hosts are the neighbours that are
// not themselves polled switches), speeds and state come from IF-MIB, and
// counters from IF-MIB's 64-bit ifXTable (32-bit ifTable counters, unwrapped,
// where an agent has no 64-bit ones). Routes are the shortest paths of the
// LLDP graph, traffic split evenly over equal-cost paths (fabric's
// shortest-path route model). See docs/ethernet.md.
package eth

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Config says which switches to read and how. It is the YAML file an
// "eth:FILE" fabric spec names.
type Config struct {
	// Switches are the switches to poll.
	Switches []SwitchConfig `yaml:"switches"`
	// Community and V3 are the credentials of every switch that names
	// none of its own: an SNMPv2c community, or an SNMPv3 authPriv user.
	Community string    `yaml:"community"`
	V3        *V3Config `yaml:"v3"`
	// Timeout is how long one request waits for its answer (default 2s);
	// Retries how many times it is sent again (default 1).
	Timeout time.Duration `yaml:"timeout"`
	Retries *int          `yaml:"retries"`
	// Parallel bounds the switches read at once (default 32): one query
	// stream per switch.
	Parallel int `yaml:"parallel"`
	// MaxRepetitions is the GetBulk max-repetitions (default 24).
	MaxRepetitions int `yaml:"max_repetitions"`
}

// SwitchConfig is one switch.
type SwitchConfig struct {
	// Address is the agent's management address: "host" or "host:port"
	// (default port 161).
	Address string `yaml:"address"`
	// Name labels the switch in errors until its sysName is known.
	Name      string    `yaml:"name"`
	Community string    `yaml:"community"`
	V3        *V3Config `yaml:"v3"`
}

// V3Config is an SNMPv3 user with authentication and privacy (authPriv).
type V3Config struct {
	User      string `yaml:"user"`
	AuthProto string `yaml:"auth_proto"` // MD5, SHA (default), SHA224, SHA256, SHA384, SHA512
	AuthPass  string `yaml:"auth_pass"`
	PrivProto string `yaml:"priv_proto"` // DES, AES (default), AES192, AES256, AES192C, AES256C
	PrivPass  string `yaml:"priv_pass"`
}

// Defaults.
const (
	DefaultTimeout        = 2 * time.Second
	DefaultRetries        = 1
	DefaultParallel       = 32
	DefaultMaxRepetitions = 24
)

// LoadConfig reads and checks a configuration file.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("eth config: %w", err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("eth config %s: %w", path, err)
	}
	return c, nil
}

// ParseConfig parses and checks a configuration (YAML; unknown keys are
// errors).
func ParseConfig(b []byte) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	return &c, nil
}

// withDefaults fills zero fields.
func (c Config) withDefaults() Config {
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Retries == nil {
		r := DefaultRetries
		c.Retries = &r
	}
	if c.Parallel <= 0 {
		c.Parallel = DefaultParallel
	}
	if c.MaxRepetitions <= 0 {
		c.MaxRepetitions = DefaultMaxRepetitions
	}
	return c
}

func (c *Config) check() error {
	if len(c.Switches) == 0 {
		return errors.New("switches: none listed")
	}
	if c.Retries != nil && (*c.Retries < 0 || *c.Retries > 10) {
		return fmt.Errorf("retries: %d, want 0..10", *c.Retries)
	}
	if c.Timeout < 0 || c.Timeout > time.Minute {
		return fmt.Errorf("timeout: %s, want up to 1m", c.Timeout)
	}
	if c.MaxRepetitions < 0 || c.MaxRepetitions > 200 {
		return fmt.Errorf("max_repetitions: %d, want 1..200", c.MaxRepetitions)
	}
	if c.V3 != nil {
		if err := c.V3.check("v3"); err != nil {
			return err
		}
	}
	seen := map[string]int{}
	for i := range c.Switches {
		s := &c.Switches[i]
		where := fmt.Sprintf("switches[%d]", i)
		host, port, err := s.hostPort()
		if err != nil {
			return fmt.Errorf("%s.address: %w", where, err)
		}
		key := net.JoinHostPort(host, strconv.Itoa(int(port)))
		if j, dup := seen[key]; dup {
			return fmt.Errorf("%s.address: %s is also switches[%d]", where, key, j)
		}
		seen[key] = i
		if s.V3 != nil {
			if err := s.V3.check(where + ".v3"); err != nil {
				return err
			}
		}
		if s.V3 == nil && s.Community == "" && c.V3 == nil && c.Community == "" {
			return fmt.Errorf("%s: no credentials (community or v3, here or at the top)", where)
		}
	}
	return nil
}

func (v *V3Config) check(where string) error {
	if v.User == "" {
		return fmt.Errorf("%s.user: empty", where)
	}
	if _, err := authProto(v.AuthProto); err != nil {
		return fmt.Errorf("%s.auth_proto: %w", where, err)
	}
	if _, err := privProto(v.PrivProto); err != nil {
		return fmt.Errorf("%s.priv_proto: %w", where, err)
	}
	// RFC 3414 keys are derived from passphrases of at least 8 octets;
	// net-snmp refuses shorter ones.
	if len(v.AuthPass) < 8 {
		return fmt.Errorf("%s.auth_pass: want at least 8 characters", where)
	}
	if len(v.PrivPass) < 8 {
		return fmt.Errorf("%s.priv_pass: want at least 8 characters", where)
	}
	return nil
}

// hostPort splits the switch's address.
func (s *SwitchConfig) hostPort() (string, uint16, error) {
	a := strings.TrimSpace(s.Address)
	if a == "" {
		return "", 0, errors.New("empty")
	}
	host, port := a, "161"
	if h, p, err := net.SplitHostPort(a); err == nil {
		host, port = h, p
	} else if strings.Count(a, ":") == 1 {
		return "", 0, fmt.Errorf("%q: %v", a, err)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return "", 0, fmt.Errorf("%q: port must be 1..65535", a)
	}
	if host == "" {
		return "", 0, fmt.Errorf("%q: no host", a)
	}
	return host, uint16(n), nil
}

// label names a switch in errors before its sysName is known.
func (s *SwitchConfig) label() string {
	if s.Name != "" {
		return fmt.Sprintf("%s (%s)", s.Name, s.Address)
	}
	return s.Address
}
