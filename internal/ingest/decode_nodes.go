package ingest

import (
	"errors"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/netloom/netloom/internal/ingest/agentpb"
	"github.com/netloom/netloom/internal/store"
)

// Field numbers of the node rows (agent.proto).
const (
	fieldNodes       protowire.Number = 14
	fieldNodeName    protowire.Number = 1
	fieldNodeP2P     protowire.Number = 2 // then coll 3, rma 4
	fieldNodeRMA     protowire.Number = 4
	fieldTrafficByte protowire.Number = 1
	fieldTrafficMsgs protowire.Number = 2
)

var errInvalidUTF8 = errors.New("node name is not valid UTF-8")

// Datagram is one decoded agent datagram: the protobuf message, but for
// its destination-node rows (field 14: every destination node of the rank,
// a thousand and more for an all-to-all job), which are decoded straight
// into store rows in Nodes, one allocation for all rows and one string for
// all names; the message's own Nodes stay empty. proto.Unmarshal made
// three objects per row (row, name, traffic) and at four times Stampede's
// load those rows, copied again into store rows, were 60% of every byte
// the daemon allocated. Unknown fields inside node rows are dropped
// (nothing reads them).
type Datagram struct {
	*agentpb.Datagram
	Nodes []store.NodeTraffic
}

// FromProto wraps a message decoded by proto.Unmarshal, moving its node
// rows into Nodes.
func FromProto(m *agentpb.Datagram) *Datagram {
	d := &Datagram{Datagram: m}
	if len(m.Nodes) > 0 {
		d.Nodes = make([]store.NodeTraffic, len(m.Nodes))
		for i, n := range m.Nodes {
			d.Nodes[i] = store.NodeTraffic{Node: n.Node, Classes: store.Classes{P2P: traffic(n.P2P), Coll: traffic(n.Coll), RMA: traffic(n.Rma)}}
		}
		m.Nodes = nil
	}
	return d
}

// unmarshal decodes a datagram (see Datagram).
func unmarshal(b []byte) (*Datagram, error) {
	d := new(agentpb.Datagram)
	// The other fields, in order, when there are node rows to take out.
	var rest []byte
	rows := 0
	for off := 0; off < len(b); {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, b[off+n:])
		if m < 0 {
			return nil, protowire.ParseError(m)
		}
		if num == fieldNodes && typ == protowire.BytesType {
			if rest == nil {
				rest = make([]byte, off, len(b))
				copy(rest, b[:off])
			}
			rows++
		} else if rest != nil {
			rest = append(rest, b[off:off+n+m]...)
		}
		off += n + m
	}
	if rows == 0 {
		if err := proto.Unmarshal(b, d); err != nil {
			return nil, err
		}
		return &Datagram{Datagram: d}, nil
	}
	if err := proto.Unmarshal(rest, d); err != nil {
		return nil, err
	}
	nodes, err := decodeNodeRows(b, rows)
	if err != nil {
		return nil, err
	}
	return &Datagram{Datagram: d, Nodes: nodes}, nil
}

// decodeNodeRows decodes the rows node rows of datagram b, whose fields
// unmarshal checked.
func decodeNodeRows(b []byte, rows int) ([]store.NodeTraffic, error) {
	out := make([]store.NodeTraffic, rows)
	names := make([]byte, 0, len(b)/2)
	ends := make([]uint32, rows) // where each name ends in names
	i := 0
	for off := 0; off < len(b); {
		num, typ, n := protowire.ConsumeTag(b[off:])
		off += n
		if num != fieldNodes || typ != protowire.BytesType {
			off += protowire.ConsumeFieldValue(num, typ, b[off:])
			continue
		}
		row, m := protowire.ConsumeBytes(b[off:])
		off += m
		nt := &out[i]
		start := len(names)
		for roff := 0; roff < len(row); {
			num, typ, n := protowire.ConsumeTag(row[roff:])
			if n < 0 {
				return nil, protowire.ParseError(n)
			}
			roff += n
			switch {
			case num == fieldNodeName && typ == protowire.BytesType:
				v, m := protowire.ConsumeBytes(row[roff:])
				if m < 0 {
					return nil, protowire.ParseError(m)
				}
				if !utf8.Valid(v) {
					return nil, errInvalidUTF8
				}
				names = append(names[:start], v...)
				roff += m
			case num >= fieldNodeP2P && num <= fieldNodeRMA && typ == protowire.BytesType:
				v, m := protowire.ConsumeBytes(row[roff:])
				if m < 0 {
					return nil, protowire.ParseError(m)
				}
				roff += m
				field := &nt.P2P
				switch num {
				case fieldNodeP2P + 1:
					field = &nt.Coll
				case fieldNodeRMA:
					field = &nt.RMA
				}
				if err := decodeTraffic(v, field); err != nil {
					return nil, err
				}
			default:
				m := protowire.ConsumeFieldValue(num, typ, row[roff:])
				if m < 0 {
					return nil, protowire.ParseError(m)
				}
				roff += m
			}
		}
		ends[i] = uint32(len(names))
		i++
	}
	all := string(names)
	start := uint32(0)
	for i := range out {
		out[i].Node = all[start:ends[i]]
		start = ends[i]
	}
	return out, nil
}

// decodeTraffic merges one encoded Traffic into t.
func decodeTraffic(b []byte, t *store.Traffic) error {
	for off := 0; off < len(b); {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return protowire.ParseError(n)
		}
		off += n
		if (num == fieldTrafficByte || num == fieldTrafficMsgs) && typ == protowire.VarintType {
			v, m := protowire.ConsumeVarint(b[off:])
			if m < 0 {
				return protowire.ParseError(m)
			}
			if num == fieldTrafficByte {
				t.Bytes = v
			} else {
				t.Msgs = v
			}
			off += m
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b[off:])
		if m < 0 {
			return protowire.ParseError(m)
		}
		off += m
	}
	return nil
}
