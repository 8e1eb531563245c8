package ingest

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/netloom/netloom/internal/ingest/agentpb"
)

// Message decoders, built on wire.go's primitives: the datagram's own
// fields (Datagram.field, called by decode.go's unmarshal), its function
// rows and the Traffic values that node and peer rows (decode_rows.go)
// hold too. Each is a switch that copies the wire's fields into the
// message, one case a field. The process block's decoder (process) is
// generated from agent.proto's annotations, in record.gen.go.

// field decodes one of the datagram's own fields (not node or peer rows)
// at b[at:], whose tag said num and typ, into d; it returns the offset
// after the field, negative with err nil when the field is unknown to it
// (to be skipped).
func (d *Datagram) field(b []byte, num protowire.Number, typ protowire.Type, at int) (int, error) {
	m := d.Datagram
	switch typ {
	case protowire.VarintType:
		v, next := varintAt(b, at)
		if next < 0 {
			return 0, errMalformed
		}
		switch num {
		case 1:
			m.Version = uint32(v)
		case 3:
			m.Rank = uint32(v)
		case 4:
			m.WorldSize = uint32(v)
		case 5:
			m.Seq = v
		case 6:
			m.Chunk = uint32(v)
		case 7:
			m.Chunks = uint32(v)
		case 8:
			m.TimeUnixNs = int64(v)
		case 9:
			m.Final = v != 0
		case 10:
			m.StartUnixNs = int64(v)
		case 16:
			m.PeersTruncated = v != 0
		case 17:
			m.IntervalNs = v
		default:
			return -1, nil
		}
		return next, nil
	case protowire.BytesType:
		v, next := bytesAt(b, at)
		if next < 0 {
			return 0, errMalformed
		}
		switch num {
		case 2:
			s, err := stringOf(v)
			m.JobId = s
			return next, err
		case 11:
			if m.Process == nil {
				m.Process = &d.own.proc
			}
			return next, d.process(v, m.Process)
		case 12:
			var f *agentpb.FunctionStat
			if n := len(m.Functions); n < len(d.own.fns) {
				if m.Functions == nil {
					m.Functions = d.own.fnPtrs[:0]
				}
				f = &d.own.fns[n]
			} else {
				f = new(agentpb.FunctionStat)
			}
			m.Functions = append(m.Functions, f)
			return next, decodeFunction(v, f)
		case 13:
			r := new(agentpb.Region)
			m.Regions = append(m.Regions, r)
			return next, proto.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(v, r)
		case 22:
			// Small and in chunk 0 only (and absent without CUDA): not
			// worth decoding by hand. Sent twice, the sections merge, as
			// proto.Unmarshal merges them.
			if m.Gpu == nil {
				m.Gpu = new(agentpb.Gpu)
			}
			if err := (proto.UnmarshalOptions{DiscardUnknown: true, Merge: true}).Unmarshal(v, m.Gpu); err != nil {
				return 0, fmt.Errorf("gpu (field 22): %w", err)
			}
			return next, nil
		case 23:
			// netloom_reorder calls: a few, in chunk 0 only (reorder.go)
			r := new(agentpb.Reorder)
			if err := (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(v, r); err != nil {
				return 0, fmt.Errorf("reorders (field 23): %w", err)
			}
			m.Reorders = append(m.Reorders, r)
			return next, nil
		case 20:
			m.Credential = append([]byte{}, v...)
		case 21:
			m.Mac = append([]byte{}, v...)
		default:
			return -1, nil
		}
		return next, nil
	}
	return -1, nil
}

// decodeFunction merges an encoded FunctionStat into f.
func decodeFunction(b []byte, f *agentpb.FunctionStat) error {
	return fields(b, func(num protowire.Number, typ protowire.Type, at int) (int, error) {
		switch {
		case typ == protowire.VarintType && num >= 2 && num <= 6:
			v, next := varintAt(b, at)
			if next < 0 {
				return 0, errMalformed
			}
			switch num {
			case 2:
				f.Calls = v
			case 3:
				f.TimeNs = v
			case 4:
				f.BytesSent = v
			case 5:
				f.BytesReceived = v
			default:
				f.WaitNs = v
			}
			return next, nil
		case typ == protowire.BytesType && num == 1:
			v, next := bytesAt(b, at)
			if next < 0 {
				return 0, errMalformed
			}
			s, err := stringOf(v)
			f.Name = s
			return next, err
		}
		return -1, nil
	})
}
