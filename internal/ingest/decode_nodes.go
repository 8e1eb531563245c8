package ingest

import (
	"errors"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/netloom/netloom/internal/ingest/agentpb"
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

// unmarshal is proto.Unmarshal into a Datagram, except that its node rows
// (field 14: every destination node of the rank, a thousand and more for an
// all-to-all job) are decoded here, all rows of the datagram in one
// allocation and their names in one string. proto.Unmarshal makes three
// objects per row (row, name, traffic), and at a thousand rows a datagram
// that was most of the socket reader's time and a good share of the
// garbage. The result is the same, but for unknown fields inside node rows,
// which are dropped (nothing reads them).
func unmarshal(b []byte) (*agentpb.Datagram, error) {
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
		return d, nil
	}
	if err := proto.Unmarshal(rest, d); err != nil {
		return nil, err
	}
	nodes, err := decodeNodeRows(b, rows)
	if err != nil {
		return nil, err
	}
	d.Nodes = nodes
	return d, nil
}

// decodeNodeRows decodes the rows node rows of datagram b, whose fields
// unmarshal checked.
func decodeNodeRows(b []byte, rows int) ([]*agentpb.NodeTraffic, error) {
	out := make([]agentpb.NodeTraffic, rows)
	ptrs := make([]*agentpb.NodeTraffic, rows)
	names := make([]byte, 0, len(b)/2)
	ends := make([]uint32, rows)  // where each name ends in names
	var traffic []agentpb.Traffic // rows' classes, in blocks (pointers into them stay valid)
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
				// The last value wins, as in proto.
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
					field = &nt.Rma
				}
				// A message field given twice is merged, as in proto.
				if *field == nil {
					if len(traffic) == cap(traffic) {
						traffic = make([]agentpb.Traffic, 0, min(rows, 512))
					}
					traffic = traffic[:len(traffic)+1]
					*field = &traffic[len(traffic)-1]
				}
				if err := decodeTraffic(v, *field); err != nil {
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
		ptrs[i] = nt
		i++
	}
	all := string(names)
	start := uint32(0)
	for i := range out {
		out[i].Node = all[start:ends[i]]
		start = ends[i]
	}
	return ptrs, nil
}

// decodeTraffic merges one encoded Traffic into t.
func decodeTraffic(b []byte, t *agentpb.Traffic) error {
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
