package ingest

import (
	"fmt"
	"net/netip"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/netloom/netloom/internal/ingest/agentpb"
)

// A rank's network connections (Datagram fields 24 and 25, docs/sflow.md
// "Flows to jobs"): what the agent read of its process's sockets at the
// snapshot, in chunk 0. They are decoded by hand into Conn values (no
// protobuf message each), bounded and checked: a connection whose address
// is not 4 or 16 bytes, whose port or queue pair is out of range, or more
// of them than an agent sends, drops the datagram as bad_connection or
// too_many, with the connection and its field named. The tracker hands
// each snapshot's on (Options.Connections).

// Field numbers of Datagram and of Connection.
const (
	fieldConnections          protowire.Number = 24
	fieldConnectionsTruncated protowire.Number = 25
)

// MaxConns is the most connections one snapshot may carry: the agent
// sends its first 64 and says it cut them (ConnReport.Truncated).
const MaxConns = 64

// NoPeer is Conn.Peer when the agent does not know the far end's rank.
const NoPeer = 0xFFFFFFFF

// Conn is one of a rank's connections. Kind is "tcp" or "roce" (another
// kind, from a later agent, is kept as it came and matched to nothing).
// For TCP, Local and Remote are the socket's ends; for RoCE (RoCEv2) the
// addresses of the queue pair's ends (their GIDs' IP addresses), port
// 4791, and the queue pair numbers of both ends. Addresses are IPv4 where
// they are IPv4-mapped IPv6.
type Conn struct {
	Kind                string
	Local, Remote       netip.AddrPort
	LocalQPN, RemoteQPN uint32
	Peer                uint32 // the far end's world rank where the agent knew it, else NoPeer
}

// ConnReport is one rank's connections, as one snapshot told them.
type ConnReport struct {
	Job, User string
	Rank      int
	Start     time.Time // when the rank's MPI_Init returned (its run), by the agent's clock
	At        time.Time // when the snapshot was taken, by the agent's clock
	Conns     []Conn
	Truncated bool // the rank had more than it sent
}

// conns is what a datagram carries of its connections: decoded as they
// come; bad is the first one that is wrong, for Validate to refuse.
type conns struct {
	list      []Conn
	truncated bool
	n         int // connections on the wire, kept or not
	bad       string
	badReason string
}

// field decodes Datagram field 24 or 25 at b[at:]; negative: a wire type
// not its own (skipped, as protobuf does).
func (c *conns) field(b []byte, num protowire.Number, typ protowire.Type, at int) (int, error) {
	if num == fieldConnectionsTruncated {
		if typ != protowire.VarintType {
			return -1, nil
		}
		v, next := varintAt(b, at)
		if next < 0 {
			return 0, errMalformed
		}
		c.truncated = v != 0
		return next, nil
	}
	if typ != protowire.BytesType {
		return -1, nil
	}
	v, next := bytesAt(b, at)
	if next < 0 {
		return 0, errMalformed
	}
	c.n++
	if c.n > MaxConns || c.bad != "" {
		return next, nil // refused by Validate: nothing more to keep
	}
	var raw rawConn
	if err := fields(v, func(num protowire.Number, typ protowire.Type, at int) (int, error) { return raw.field(v, num, typ, at) }); err != nil {
		return 0, fmt.Errorf("connections[%d] (field 24): %w", c.n-1, err)
	}
	cn, field, why := raw.conn()
	if field != "" {
		c.bad, c.badReason = fmt.Sprintf("connections[%d].%s", c.n-1, field), why
		return next, nil
	}
	c.list = append(c.list, cn)
	return next, nil
}

// fromProto takes the connections of a message proto.Unmarshal decoded.
func (c *conns) fromProto(m *agentpb.Datagram) {
	c.truncated = m.ConnectionsTruncated
	c.n = len(m.Connections)
	for i, x := range m.Connections {
		if i >= MaxConns {
			break
		}
		raw := rawConn{kind: []byte(x.Kind), local: x.LocalAddr, remote: x.RemoteAddr, localPort: uint64(x.LocalPort),
			remotePort: uint64(x.RemotePort), localQPN: uint64(x.LocalQpn), remoteQPN: uint64(x.RemoteQpn), peer: uint64(x.Peer)}
		cn, field, why := raw.conn()
		if field != "" {
			c.bad, c.badReason = fmt.Sprintf("connections[%d].%s", i, field), why
			return
		}
		c.list = append(c.list, cn)
	}
	m.Connections = nil
}

// validate is Validate's part for the connections.
func (c *conns) validate(d *Datagram, where func() string) error {
	switch {
	case c.n == 0 && !c.truncated:
		return nil
	case d.Chunk != 0:
		return reject(ReasonChunk, "%s: carries connections (only chunk 0 may)", where())
	case c.n > MaxConns:
		return reject(ReasonTooMany, "%s: %d connections, limit %d", where(), c.n, MaxConns)
	case c.bad != "":
		return reject(ReasonConnection, "%s: %s: %s", where(), c.bad, c.badReason)
	}
	for _, x := range c.list {
		if x.Peer != NoPeer && x.Peer >= d.WorldSize {
			return reject(ReasonConnection, "%s: a connection's peer %d of world size %d", where(), x.Peer, d.WorldSize)
		}
	}
	return nil
}

// report is the connections of chunk 0 as the tracker hands them on.
func (c *conns) report(d *Datagram, user string) ConnReport {
	return ConnReport{Job: d.JobId, User: user, Rank: int(d.Rank), Start: time.Unix(0, d.StartUnixNs), At: time.Unix(0, d.TimeUnixNs),
		Conns: c.list, Truncated: c.truncated}
}

// rawConn is one Connection message's fields as they came.
type rawConn struct {
	kind, local, remote                              []byte
	localPort, remotePort, localQPN, remoteQPN, peer uint64
}

// field decodes one of Connection's fields; negative: unknown to it, or
// of a wire type not its own (skipped).
func (r *rawConn) field(b []byte, num protowire.Number, typ protowire.Type, at int) (int, error) {
	switch {
	case typ == protowire.BytesType && num >= 1 && num <= 4 && num != 3:
		v, next := bytesAt(b, at)
		if next < 0 {
			return 0, errMalformed
		}
		switch num {
		case 1:
			r.kind = v
		case 2:
			r.local = v
		case 4:
			r.remote = v
		}
		return next, nil
	case typ == protowire.VarintType && num >= 3 && num <= 8 && num != 4:
		v, next := varintAt(b, at)
		if next < 0 {
			return 0, errMalformed
		}
		switch num {
		case 3:
			r.localPort = v
		case 5:
			r.remotePort = v
		case 6:
			r.localQPN = v
		case 7:
			r.remoteQPN = v
		case 8:
			r.peer = v
		}
		return next, nil
	}
	return -1, nil
}

// conn checks the fields and makes the Conn; field names the first wrong
// one ("" when none is) and why says what is wrong with it.
func (r *rawConn) conn() (c Conn, field, why string) {
	if len(r.kind) == 0 || len(r.kind) > 16 {
		return c, "kind", fmt.Sprintf("%d bytes, want 1..16 (\"tcp\", \"roce\")", len(r.kind))
	}
	kind, err := stringOf(r.kind)
	if err != nil {
		return c, "kind", "not UTF-8"
	}
	c.Kind = kind
	addr := func(name string, b []byte, port uint64) (netip.AddrPort, string, string) {
		if len(b) != 4 && len(b) != 16 {
			return netip.AddrPort{}, name + "_addr", fmt.Sprintf("%d bytes, want 4 (IPv4) or 16 (IPv6)", len(b))
		}
		if port > 65535 {
			return netip.AddrPort{}, name + "_port", fmt.Sprintf("%d, want 0..65535", port)
		}
		a, _ := netip.AddrFromSlice(b)
		return netip.AddrPortFrom(a.Unmap(), uint16(port)), "", ""
	}
	if c.Local, field, why = addr("local", r.local, r.localPort); field != "" {
		return c, field, why
	}
	if c.Remote, field, why = addr("remote", r.remote, r.remotePort); field != "" {
		return c, field, why
	}
	if kind == "tcp" && c.Local.Port() == 0 {
		return c, "local_port", "0: a TCP connection has a port at each end"
	}
	if kind == "tcp" && c.Remote.Port() == 0 {
		return c, "remote_port", "0: a TCP connection has a port at each end"
	}
	for _, q := range []struct {
		name string
		v    uint64
		to   *uint32
	}{{"local_qpn", r.localQPN, &c.LocalQPN}, {"remote_qpn", r.remoteQPN, &c.RemoteQPN}} {
		if q.v >= 1<<24 {
			return c, q.name, fmt.Sprintf("%d: a queue pair number has 24 bits", q.v)
		}
		*q.to = uint32(q.v)
	}
	if r.peer > NoPeer {
		return c, "peer", fmt.Sprintf("%d, more than 32 bits", r.peer)
	}
	c.Peer = uint32(r.peer)
	return c, "", ""
}
