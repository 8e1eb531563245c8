package eth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gosnmp/gosnmp"
)

func authProto(s string) (gosnmp.SnmpV3AuthProtocol, error) {
	switch strings.ToUpper(s) {
	case "", "SHA", "SHA1":
		return gosnmp.SHA, nil
	case "MD5":
		return gosnmp.MD5, nil
	case "SHA224":
		return gosnmp.SHA224, nil
	case "SHA256":
		return gosnmp.SHA256, nil
	case "SHA384":
		return gosnmp.SHA384, nil
	case "SHA512":
		return gosnmp.SHA512, nil
	}
	return 0, fmt.Errorf("%q: want MD5, SHA, SHA224, SHA256, SHA384 or SHA512", s)
}

func privProto(s string) (gosnmp.SnmpV3PrivProtocol, error) {
	switch strings.ToUpper(s) {
	case "", "AES", "AES128":
		return gosnmp.AES, nil
	case "DES":
		return gosnmp.DES, nil
	case "AES192":
		return gosnmp.AES192, nil
	case "AES256":
		return gosnmp.AES256, nil
	case "AES192C":
		return gosnmp.AES192C, nil
	case "AES256C":
		return gosnmp.AES256C, nil
	}
	return 0, fmt.Errorf("%q: want DES, AES, AES192, AES256, AES192C or AES256C", s)
}

// agent is what a session asks: an SNMP agent (gosnmp.GoSNMP), or in
// tests a table of varbinds answering as an agent would.
type agent interface {
	Get(oids []string) (*gosnmp.SnmpPacket, error)
	GetBulk(oids []string, nonRepeaters uint8, maxRepetitions uint32) (*gosnmp.SnmpPacket, error)
}

// session is one query stream to one switch's agent.
type session struct {
	g     *gosnmp.GoSNMP // nil in tests
	a     agent
	label string
	v3    bool
	tries int
	reps  int
}

// dial opens a session to switch sc with the configuration's credentials
// and limits. Nothing is sent yet.
func dial(ctx context.Context, c *Config, sc *SwitchConfig) (*session, error) {
	host, port, err := sc.hostPort()
	if err != nil {
		return nil, errf(sc.label(), "address", "%v", err)
	}
	g := &gosnmp.GoSNMP{
		Target: host, Port: port, Transport: "udp", Context: ctx,
		Timeout: c.Timeout, Retries: *c.Retries, MaxRepetitions: uint32(c.MaxRepetitions),
		MaxOids: gosnmp.MaxOids,
	}
	v3 := sc.V3
	community := sc.Community
	if v3 == nil && community == "" {
		v3, community = c.V3, c.Community
	}
	if v3 != nil {
		ap, _ := authProto(v3.AuthProto)
		pp, _ := privProto(v3.PrivProto)
		g.Version = gosnmp.Version3
		g.SecurityModel = gosnmp.UserSecurityModel
		g.MsgFlags = gosnmp.AuthPriv
		g.SecurityParameters = &gosnmp.UsmSecurityParameters{
			UserName: v3.User, AuthenticationProtocol: ap, AuthenticationPassphrase: v3.AuthPass,
			PrivacyProtocol: pp, PrivacyPassphrase: v3.PrivPass,
		}
	} else {
		g.Version = gosnmp.Version2c
		g.Community = community
	}
	if err := g.Connect(); err != nil {
		return nil, errf(sc.label(), "snmp", "cannot open a socket to %s: %v", sc.Address, err)
	}
	return &session{g: g, a: g, label: sc.label(), v3: v3 != nil, tries: *c.Retries + 1, reps: c.MaxRepetitions}, nil
}

func (s *session) close() {
	if s.g != nil && s.g.Conn != nil {
		s.g.Conn.Close()
	}
}

// explain turns a library error into one that says what probably
// happened, without repeating credentials.
func (s *session) explain(what string, err error) error {
	msg := err.Error()
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return errf(s.label, what, "%v", err)
	case strings.Contains(msg, "timeout") && s.g != nil:
		hint := "switch down or unreachable, or a wrong community (SNMPv2c agents drop requests with an unknown community without answering)"
		if s.v3 {
			hint = "switch down or unreachable, or SNMPv3 keys the agent cannot decrypt with (wrong priv_pass or priv_proto)"
		}
		return errf(s.label, what, "no answer within %s, %d tries: %s", s.g.Timeout, s.tries, hint)
	case strings.Contains(msg, "not authentic") && s.g != nil && s.v3:
		// An agent reports an unknown user or a wrong digest in a report
		// it cannot authenticate with keys it does not share.
		return errf(s.label, what, "SNMPv3: the answer fails authentication: unknown user %q, or a wrong auth_pass or auth_proto", s.g.SecurityParameters.(*gosnmp.UsmSecurityParameters).UserName)
	case (strings.Contains(msg, "unknown user") || strings.Contains(msg, "UnknownUserName")) && s.g != nil:
		return errf(s.label, what, "SNMPv3: the agent does not know user %q", s.g.SecurityParameters.(*gosnmp.UsmSecurityParameters).UserName)
	case strings.Contains(msg, "wrong digest"), strings.Contains(msg, "WrongDigest"), strings.Contains(msg, "authentication"):
		return errf(s.label, what, "SNMPv3: authentication failed (wrong auth_pass or auth_proto): %s", clip(msg))
	case strings.Contains(msg, "decrypt"), strings.Contains(msg, "Decryption"):
		return errf(s.label, what, "SNMPv3: the agent could not decrypt the request (wrong priv_pass or priv_proto): %s", clip(msg))
	}
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return errf(s.label, what, "%s", msg)
}

// get reads scalars; an object the agent does not have is absent from
// the result.
func (s *session) get(oids []string) (map[string]gosnmp.SnmpPDU, error) {
	res, err := s.a.Get(oids)
	if err != nil {
		return nil, s.explain(nameOf(oids[0]), err)
	}
	if res.Error != gosnmp.NoError {
		return nil, errf(s.label, nameOf(oids[0]), "agent answered %s", res.Error)
	}
	out := map[string]gosnmp.SnmpPDU{}
	for _, v := range res.Variables {
		switch v.Type {
		case gosnmp.NoSuchObject, gosnmp.NoSuchInstance, gosnmp.EndOfMibView, gosnmp.Null:
			continue
		}
		out[normOID(v.Name)] = v
	}
	return out, nil
}

// maxRequests bounds one walk's GetBulk requests.
const maxRequests = 4096

// walk reads whole table columns with GetBulk, all of them in each
// request (one row of each per repetition), until each column ends.
func (s *session) walk(oids []string) (map[string]*column, error) {
	cols := map[string]*column{}
	all := make([]*column, len(oids))
	for i, o := range oids {
		all[i] = newColumn(o)
		cols[o] = all[i]
	}
	for n := 0; ; n++ {
		var active []*column
		var req []string
		for _, c := range all {
			if !c.done {
				active = append(active, c)
				req = append(req, c.nextOID())
			}
		}
		if len(active) == 0 {
			return cols, nil
		}
		if n >= maxRequests {
			return cols, errf(s.label, nameOf(oids[0]), "table walk did not end after %d requests", maxRequests)
		}
		reps := max(1, s.reps)
		res, err := s.a.GetBulk(req, 0, uint32(reps))
		if err != nil {
			return cols, s.explain(nameOf(formatOID(active[0].prefix)), err)
		}
		if res.Error != gosnmp.NoError {
			return cols, errf(s.label, nameOf(formatOID(active[0].prefix)), "agent answered %s", res.Error)
		}
		if len(res.Variables) == 0 {
			return cols, errf(s.label, nameOf(formatOID(active[0].prefix)), "empty GetBulk answer")
		}
		if err := absorb(active, res.Variables); err != nil {
			return cols, errf(s.label, "GetBulk", "%v", err)
		}
	}
}

// upTime reads sysUpTime in hundredths of a second.
func (s *session) upTime() (uint64, time.Time, error) {
	m, err := s.get([]string{oidSysUpTime})
	if err != nil {
		return 0, time.Time{}, err
	}
	v, ok := asUint(m[oidSysUpTime])
	if !ok {
		return 0, time.Time{}, errf(s.label, "sysUpTime", "missing or not TimeTicks")
	}
	return v, time.Now(), nil
}
