package codec

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/netloom/netloom/internal/store"
)

// A stored process row (job_processes.data) is a format byte, then
// uvarints (signed values zig-zagged, float64 seconds as 8 little-endian
// bytes, strings as a length and bytes):
//
//	rank, node, host, pid, cpu, mpi_library, program, user, start_ns, time_ns,
//	seq, flags (1 final, 2 peers truncated, 4 wait times, 8 region wait times, 16 a GPU section, 32 reorders,
//	64 a usage tail), the usage block (appendUsage, generated: cpu_user, cpu_system, wall, mpi,
//	vm_size, vm_peak, vm_rss, vm_hwm, io_read, io_write, mpiio_read,
//	mpiio_write, intra_node bytes and msgs, inter_node bytes and msgs, agent_drops),
//	functions: count, then name, calls, time_ns, bytes_sent, bytes_received
//	(and wait_ns with flag 4),
//	regions: count, then name, entries, time_ns, mpi_time_ns (and wait_ns
//	  with flag 8), classes,
//	to_nodes: count, then the name as the length of the prefix it shares
//	  with the previous name, the rest as a string, and classes,
//	peers: count, then the peer as the difference from the previous one,
//	  classes, histogram (count and bins), monitored (0, or 1 and classes),
//	with flag 16, the GPU section (appendGPU),
//	with flag 32, the reorders (appendReorders),
//	with flag 64, the usage fields declared after the frozen one
//	  (appendUsageTail, generated), as a length and their protobuf encoding,
//
// where classes are a byte saying which of p2p, coll and rma bytes and
// msgs are not zero, then those. It replaced rows of
// JSON compressed with deflate, which cost 70% of the daemon's CPU at
// twice Stampede's load (encoding a 1,024-node all-to-all rank: 1.1 ms
// against 12 µs); those rows are still read. The format byte has its
// three low bits set, which starts no valid deflate stream (block type 3).
const formatProcess = 0x07

// maxProcessRow bounds a row's decoded element counts (a corrupt count
// must not allocate gigabytes).
const maxProcessElems = 1 << 24

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendFloat(dst []byte, f float64) []byte {
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(f))
}

func appendTraffic(dst []byte, t store.Traffic) []byte {
	return binary.AppendUvarint(binary.AppendUvarint(dst, t.Bytes), t.Msgs)
}

func timeNS(t time.Time) int64 {
	if t.IsZero() {
		return math.MinInt64
	}
	return t.UnixNano()
}

func nsTime(ns int64) time.Time {
	if ns == math.MinInt64 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// EncodeProcess appends p's row to dst.
func EncodeProcess(dst []byte, p *store.Process) []byte {
	dst = append(dst, formatProcess)
	dst = binary.AppendVarint(dst, int64(p.Rank))
	dst = appendString(dst, p.Node)
	dst = appendString(dst, p.Host)
	dst = binary.AppendUvarint(dst, uint64(p.PID))
	dst = binary.AppendVarint(dst, int64(p.CPU))
	dst = appendString(dst, p.MPILibrary)
	dst = appendString(dst, p.Program)
	dst = appendString(dst, p.User)
	dst = binary.AppendVarint(dst, timeNS(p.Start))
	dst = binary.AppendVarint(dst, timeNS(p.Time))
	dst = binary.AppendUvarint(dst, p.Seq)
	var flags uint64
	if p.Final {
		flags |= 1
	}
	if p.PeersTruncated {
		flags |= 2
	}
	waits := slices.ContainsFunc(p.Functions, func(f store.Function) bool { return f.WaitNS != 0 })
	if waits {
		flags |= 4 // each function has its wait time after the four counters
	}
	regionWaits := slices.ContainsFunc(p.Regions, func(r store.Region) bool { return r.WaitNS != 0 })
	if regionWaits {
		flags |= 8 // each region has its wait time after its MPI time
	}
	if p.GPU != nil {
		flags |= 16 // the GPU section after the peer rows
	}
	if len(p.Reorders) > 0 {
		flags |= 32 // the reorders after the GPU section (process_reorder.go)
	}
	tail := appendUsageTail(nil, &p.ProcessUsage)
	if len(tail) > 0 {
		flags |= 64 // the usage fields after the frozen one, last (record.gen.go)
	}
	dst = binary.AppendUvarint(dst, flags)
	dst = appendUsage(dst, &p.ProcessUsage)

	dst = binary.AppendUvarint(dst, uint64(len(p.Functions)))
	for i := range p.Functions {
		f := &p.Functions[i]
		dst = appendString(dst, f.Name)
		for _, v := range [...]uint64{f.Calls, f.TimeNS, f.BytesSent, f.BytesReceived} {
			dst = binary.AppendUvarint(dst, v)
		}
		if waits {
			dst = binary.AppendUvarint(dst, f.WaitNS)
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(p.Regions)))
	for i := range p.Regions {
		r := &p.Regions[i]
		dst = appendString(dst, r.Name)
		for _, v := range [...]uint64{r.Entries, r.TimeNS, r.MPITimeNS} {
			dst = binary.AppendUvarint(dst, v)
		}
		if regionWaits {
			dst = binary.AppendUvarint(dst, r.WaitNS)
		}
		dst = store.AppendClasses(dst, &r.Classes)
	}
	dst = binary.AppendUvarint(dst, uint64(p.ToNodes.Len()))
	prev := ""
	for n := range p.ToNodes.All() {
		k := 0
		for k < len(prev) && k < len(n.Node) && prev[k] == n.Node[k] {
			k++
		}
		dst = binary.AppendUvarint(dst, uint64(k))
		dst = appendString(dst, n.Node[k:])
		dst = store.AppendClasses(dst, &n.Classes)
		prev = n.Node
	}
	// Peer rows are kept packed as they are stored (store.AppendPeer).
	dst = binary.AppendUvarint(dst, uint64(p.Peers.Len()))
	dst = append(dst, p.Peers.Packed()...)
	if p.GPU != nil {
		dst = appendGPU(dst, p.GPU)
	}
	if len(p.Reorders) > 0 {
		dst = appendReorders(dst, p.Reorders)
	}
	if len(tail) > 0 {
		dst = binary.AppendUvarint(dst, uint64(len(tail)))
		dst = append(dst, tail...)
	}
	return dst
}

// rowReader reads a process row, remembering the first error.
type rowReader struct {
	b   []byte
	err error
}

func (r *rowReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%s: %w", what, errTruncated)
	}
	r.b = nil
}

func (r *rowReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("integer")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *rowReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("integer")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *rowReader) float() float64 {
	if len(r.b) < 8 {
		r.fail("float")
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(r.b))
	r.b = r.b[8:]
	return v
}

// raw returns the next n bytes of a string (copied by the caller's string
// conversion).
func (r *rowReader) raw() []byte {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail("string")
		return nil
	}
	s := r.b[:n]
	r.b = r.b[n:]
	return s
}

func (r *rowReader) string() string { return string(r.raw()) }

// count reads an element count; each element takes at least min bytes.
func (r *rowReader) count(what string, min int) int {
	n := r.uvarint()
	if r.err == nil && (n > maxProcessElems || n*uint64(min) > uint64(len(r.b))) {
		r.err = fmt.Errorf("%s: count %d exceeds the row", what, n)
		r.b = nil
	}
	if r.err != nil {
		return 0
	}
	return int(n)
}

func (r *rowReader) traffic() store.Traffic {
	return store.Traffic{Bytes: r.uvarint(), Msgs: r.uvarint()}
}

func (r *rowReader) classes() store.Classes {
	if len(r.b) == 0 {
		r.fail("classes")
		return store.Classes{}
	}
	mask := r.b[0]
	r.b = r.b[1:]
	if mask >= 1<<6 {
		if r.err == nil {
			r.err = fmt.Errorf("classes: mask %#x", mask)
		}
		r.b = nil
		return store.Classes{}
	}
	var vals [6]uint64
	for i := range vals {
		if mask&(1<<i) != 0 {
			vals[i] = r.uvarint()
		}
	}
	return store.Classes{P2P: store.Traffic{Bytes: vals[0], Msgs: vals[1]}, Coll: store.Traffic{Bytes: vals[2], Msgs: vals[3]},
		RMA: store.Traffic{Bytes: vals[4], Msgs: vals[5]}}
}

// DecodeProcess decodes a stored process row, either format. Its lists are
// empty rather than nil, as the JSON rows' were (the API shows [] not null).
func DecodeProcess(b []byte) (store.Process, error) {
	var p store.Process
	if len(b) == 0 {
		return p, errors.New("empty process row")
	}
	if b[0] != formatProcess {
		raw, err := Inflate(b)
		if err != nil {
			return p, err
		}
		err = json.Unmarshal(raw, &p)
		return p, err
	}
	r := &rowReader{b: b[1:]}
	p.Rank = int(r.varint())
	p.Node, p.Host = r.string(), r.string()
	p.PID, p.CPU = uint32(r.uvarint()), int32(r.varint())
	p.MPILibrary, p.Program, p.User = r.string(), r.string(), r.string()
	p.Start, p.Time = nsTime(r.varint()), nsTime(r.varint())
	p.Seq = r.uvarint()
	flags := r.uvarint()
	p.Final, p.PeersTruncated = flags&1 != 0, flags&2 != 0
	r.usage(&p.ProcessUsage)

	p.Functions = make([]store.Function, r.count("functions", 5))
	for i := range p.Functions {
		f := &p.Functions[i]
		f.Name = r.string()
		f.Calls, f.TimeNS, f.BytesSent, f.BytesReceived = r.uvarint(), r.uvarint(), r.uvarint(), r.uvarint()
		if flags&4 != 0 {
			f.WaitNS = r.uvarint()
		}
	}
	p.Regions = make([]store.Region, r.count("regions", 5))
	for i := range p.Regions {
		x := &p.Regions[i]
		x.Name = r.string()
		x.Entries, x.TimeNS, x.MPITimeNS = r.uvarint(), r.uvarint(), r.uvarint()
		if flags&8 != 0 {
			x.WaitNS = r.uvarint()
		}
		x.Classes = r.classes()
	}
	nodes := make([]store.NodeTraffic, r.count("to_nodes", 3))
	var name []byte
	for i := range nodes {
		k := r.uvarint()
		if k > uint64(len(name)) {
			r.fail("node name prefix")
			break
		}
		name = append(name[:k], r.raw()...)
		nodes[i].Node = string(name)
		nodes[i].Classes = r.classes()
	}
	p.ToNodes = store.NewNodeRows(nodes)
	// Peer rows: each checked, then kept packed as they are.
	peers := r.count("peers", 4)
	at := r.b
	for range peers {
		r.varint()
		r.classes()
		for range r.count("histogram", 1) {
			r.uvarint()
		}
		// One byte, as store.PeerCursor reads it.
		switch {
		case len(r.b) == 0:
			r.fail("peer monitored")
		case r.b[0] == 0:
			r.b = r.b[1:]
		case r.b[0] == 1 || r.b[0] == 2:
			fetched := r.b[0] == 2
			r.b = r.b[1:]
			r.classes()
			if fetched {
				r.uvarint()
				r.uvarint()
			}
		default:
			if r.err == nil {
				r.err = errors.New("peer monitored: want 0, 1 or 2")
			}
		}
		if r.err != nil {
			break
		}
	}
	if r.err == nil {
		p.Peers = store.PackedPeers(slices.Clone(at[:len(at)-len(r.b)]), peers)
	}
	if flags&16 != 0 && r.err == nil {
		p.GPU = r.gpu()
	}
	if flags&32 != 0 && r.err == nil {
		p.Reorders = r.reorders()
	}
	if flags&64 != 0 && r.err == nil {
		if err := readUsageTail(r.raw(), &p.ProcessUsage); err != nil && r.err == nil {
			r.err = fmt.Errorf("usage tail: %w", err)
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d bytes after the row", len(r.b))
	}
	return p, r.err
}
