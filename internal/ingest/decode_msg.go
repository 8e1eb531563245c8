package ingest

import (
	"encoding/binary"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/netloom/netloom/internal/ingest/agentpb"
	"github.com/netloom/netloom/internal/store"
)

// Message decoders, built on wire.go's primitives: the datagram's own
// fields (Datagram.field, called by decode.go's unmarshal), its process
// block, its function rows and the Traffic values that node and peer rows
// (decode_rows.go) hold too. Each is a switch that copies the wire's
// fields into the message, one case a field: what a generator from
// agent.proto would write, and this file is where its output would go.

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

// process merges an encoded Process into p.
func (d *Datagram) process(b []byte, p *agentpb.Process) error {
	return fields(b, func(num protowire.Number, typ protowire.Type, at int) (int, error) {
		switch typ {
		case protowire.VarintType:
			v, next := varintAt(b, at)
			if next < 0 {
				return 0, errMalformed
			}
			switch num {
			case 3:
				p.Pid = uint32(v)
			case 4:
				p.Cpu = int32(v)
			case 14:
				p.VmSize = v
			case 15:
				p.VmPeak = v
			case 16:
				p.VmRss = v
			case 17:
				p.VmHwm = v
			case 18:
				p.IoReadBytes = v
			case 19:
				p.IoWriteBytes = v
			case 20:
				p.MpiioReadBytes = v
			case 21:
				p.MpiioWriteBytes = v
			case 32:
				p.DatagramsDropped = v
			default:
				return -1, nil
			}
			return next, nil
		case protowire.Fixed64Type:
			if at+8 > len(b) {
				return 0, errMalformed
			}
			v := math.Float64frombits(binary.LittleEndian.Uint64(b[at:]))
			switch num {
			case 10:
				p.CpuUserSeconds = v
			case 11:
				p.CpuSystemSeconds = v
			case 12:
				p.WallSeconds = v
			case 13:
				p.MpiSeconds = v
			default:
				return -1, nil
			}
			return at + 8, nil
		case protowire.BytesType:
			v, next := bytesAt(b, at)
			if next < 0 {
				return 0, errMalformed
			}
			var err error
			switch num {
			case 1:
				p.Node, err = stringOf(v)
			case 2:
				p.Host, err = stringOf(v)
			case 5:
				p.MpiLibrary, err = stringOf(v)
			case 6:
				p.Program, err = stringOf(v)
			case 7:
				p.User, err = stringOf(v)
			case 33:
				p.TraceDir, err = stringOf(v)
			case 30:
				if p.IntraNode == nil {
					p.IntraNode = &d.own.traffic[0]
				}
				err = decodeTrafficMsg(v, p.IntraNode)
			case 31:
				if p.InterNode == nil {
					p.InterNode = &d.own.traffic[1]
				}
				err = decodeTrafficMsg(v, p.InterNode)
			default:
				return -1, nil
			}
			return next, err
		}
		return -1, nil
	})
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
