package codec

import (
	"encoding/binary"

	"github.com/netloom/netloom/internal/store"
)

// The reorders of a process row (flag 32), after the GPU section: a count,
// then per netloom_reorder call: index, time_ns (zig-zag), ranks, flags (1
// comm_world), nodes, method, moved, old_rank, new_rank, inter_node_before,
// inter_node_after, total_bytes, since, seconds, map_seconds (floats as 8
// little-endian bytes).
func appendReorders(dst []byte, rs []store.Reorder) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(rs)))
	for i := range rs {
		r := &rs[i]
		dst = binary.AppendUvarint(dst, uint64(r.Index))
		dst = binary.AppendVarint(dst, timeNS(r.Time))
		dst = binary.AppendUvarint(dst, uint64(r.Ranks))
		var flags uint64
		if r.CommWorld {
			flags |= 1
		}
		dst = binary.AppendUvarint(dst, flags)
		dst = binary.AppendUvarint(dst, uint64(r.Nodes))
		dst = appendString(dst, r.Method)
		for _, v := range [...]uint64{uint64(r.Moved), uint64(r.OldRank), uint64(r.NewRank), r.InterNodeBefore, r.InterNodeAfter, r.TotalBytes} {
			dst = binary.AppendUvarint(dst, v)
		}
		dst = appendString(dst, r.Since)
		dst = appendFloat(appendFloat(dst, r.Seconds), r.MapSeconds)
	}
	return dst
}

// reorders reads them back.
func (r *rowReader) reorders() []store.Reorder {
	n := r.count("reorders", 29) // at least 13 one-byte fields and two floats
	if n == 0 {
		return nil
	}
	out := make([]store.Reorder, n)
	for i := range out {
		o := &out[i]
		o.Index = int(r.uvarint())
		o.Time = nsTime(r.varint())
		o.Ranks = int(r.uvarint())
		o.CommWorld = r.uvarint()&1 != 0
		o.Nodes = int(r.uvarint())
		o.Method = r.string()
		o.Moved, o.OldRank, o.NewRank = int(r.uvarint()), int(r.uvarint()), int(r.uvarint())
		o.InterNodeBefore, o.InterNodeAfter, o.TotalBytes = r.uvarint(), r.uvarint(), r.uvarint()
		o.Since = r.string()
		o.Seconds, o.MapSeconds = r.float(), r.float()
		if r.err != nil {
			return nil
		}
	}
	return out
}
