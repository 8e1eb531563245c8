package ingest

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/netloom/netloom/internal/ingest/agentpb"
	"github.com/netloom/netloom/internal/store"
)

// Traffic values, decoded where node and peer rows (decode_rows.go) and
// the process block (record.gen.go) hold them; built on wire.go.

// decodeTrafficMsg merges an encoded Traffic into t, as decodeTraffic
// does into a store.Traffic.
func decodeTrafficMsg(b []byte, t *agentpb.Traffic) error {
	v := store.Traffic{Bytes: t.Bytes, Msgs: t.Msgs}
	err := decodeTraffic(b, &v)
	t.Bytes, t.Msgs = v.Bytes, v.Msgs
	return err
}

// decodeClass merges one encoded Traffic into c's class-th class (0
// point-to-point, 1 collective, 2 one-sided), as rows list them.
func decodeClass(b []byte, c *store.Classes, class protowire.Number) error {
	t := &c.P2P
	switch class {
	case 1:
		t = &c.Coll
	case 2:
		t = &c.RMA
	}
	return decodeTraffic(b, t)
}

// decodeTraffic merges one encoded Traffic into t.
func decodeTraffic(b []byte, t *store.Traffic) error {
	for off := 0; off < len(b); {
		num, typ, at := tagAt(b, off)
		if at < 0 {
			return errMalformed
		}
		if (num == fieldTrafficByte || num == fieldTrafficMsgs) && typ == protowire.VarintType {
			v, next := varintAt(b, at)
			if next < 0 {
				return errMalformed
			}
			if num == fieldTrafficByte {
				t.Bytes = v
			} else {
				t.Msgs = v
			}
			off = next
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b[at:])
		if m < 0 {
			return protowire.ParseError(m)
		}
		off = at + m
	}
	return nil
}
