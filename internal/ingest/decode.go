// Package ingest receives the MPI agents' datagrams (proto/netloom/agent/v1),
// validates them, reassembles chunked snapshots, and keeps live per-job
// state: ranks, nodes, per-interval deltas of the cumulative counters,
// communication matrices, histograms, MPI time profiles and regions.
//
// Bad input never crashes or blocks it: every datagram that is malformed or
// inconsistent is dropped and counted with a reason.
package ingest

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/netloom/netloom/internal/ingest/agentpb"
	"github.com/netloom/netloom/internal/store"
)

// WireVersion is the Datagram version this daemon understands.
const WireVersion = 1

// Limits bound what one datagram and one job may hold. The zero value
// means the defaults.
type Limits struct {
	MaxBytes      int // one datagram; default 65507 (the largest UDP/IPv4 payload)
	MaxWorldSize  int // default 1<<22
	MaxChunks     int // per snapshot; default 4096
	MaxString     int // node, host, program, function names...; default 256
	MaxJobID      int // default 128
	MaxFunctions  int // per snapshot; default 1024
	MaxRegions    int // per snapshot; default 1024
	MaxNodes      int // destination nodes per datagram; default 1<<16
	MaxBins       int // histogram bins; default 65 (sizes up to 2^64)
	MaxCredential int // default 4096
	MaxNCCLOps    int // NCCL operation rows of the GPU section; default 4096
	MaxNCCLPeers  int // NCCL peer rows of the GPU section; default 65536
}

// WithDefaults fills zero fields.
func (l Limits) WithDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxBytes, 65507)
	def(&l.MaxWorldSize, 1<<22)
	def(&l.MaxChunks, 4096)
	def(&l.MaxString, 256)
	def(&l.MaxJobID, 128)
	def(&l.MaxFunctions, 1024)
	def(&l.MaxRegions, 1024)
	def(&l.MaxNodes, 1<<16)
	def(&l.MaxBins, 65)
	def(&l.MaxCredential, 4096)
	def(&l.MaxNCCLOps, 4096)
	def(&l.MaxNCCLPeers, 1<<16)
	return l
}

// Decode parses and checks one datagram against the limits (which must
// have their defaults filled). Checks that need earlier datagrams (chunk
// reassembly, monotone counters) are the Tracker's.
func Decode(b []byte, lim Limits) (*Datagram, error) {
	switch {
	case len(b) == 0:
		return nil, reject(ReasonEmpty, "empty datagram")
	case len(b) > lim.MaxBytes:
		return nil, reject(ReasonOversized, "%d bytes, limit %d", len(b), lim.MaxBytes)
	}
	d, err := unmarshal(b)
	if err != nil {
		return nil, reject(ReasonMalformed, "%v", err)
	}
	if err := Validate(d, lim); err != nil {
		return nil, err
	}
	return d, nil
}

// Validate checks one decoded datagram on its own.
func Validate(d *Datagram, lim Limits) error {
	if d.Version != WireVersion {
		return reject(ReasonVersion, "version %d, want %d", d.Version, WireVersion)
	}
	if err := checkJobID(d.JobId, lim.MaxJobID); err != nil {
		return err
	}
	if d.WorldSize == 0 || int64(d.WorldSize) > int64(lim.MaxWorldSize) {
		return reject(ReasonWorldSize, "job %s: world size %d, want 1..%d", d.JobId, d.WorldSize, lim.MaxWorldSize)
	}
	if d.Rank >= d.WorldSize {
		return reject(ReasonRank, "job %s: rank %d of world size %d", d.JobId, d.Rank, d.WorldSize)
	}
	if d.Chunks == 0 || int64(d.Chunks) > int64(lim.MaxChunks) || d.Chunk >= d.Chunks {
		return reject(ReasonChunk, "job %s rank %d: chunk %d of %d (limit %d)", d.JobId, d.Rank, d.Chunk, d.Chunks, lim.MaxChunks)
	}
	if d.Chunk != 0 && (d.Process != nil || len(d.Functions) > 0 || len(d.Regions) > 0 || d.Gpu != nil) {
		return reject(ReasonChunk, "job %s rank %d: chunk %d carries process, functions, regions or gpu (only chunk 0 may)", d.JobId, d.Rank, d.Chunk)
	}
	if d.TimeUnixNs <= 0 || d.StartUnixNs < 0 || d.StartUnixNs > d.TimeUnixNs || d.TimeUnixNs > math.MaxInt64/2 {
		return reject(ReasonTime, "job %s rank %d: start %d, time %d", d.JobId, d.Rank, d.StartUnixNs, d.TimeUnixNs)
	}
	if len(d.Credential) > lim.MaxCredential {
		return reject(ReasonOversized, "credential of %d bytes", len(d.Credential))
	}
	where := func() string { return fmt.Sprintf("job %s rank %d seq %d chunk %d", d.JobId, d.Rank, d.Seq, d.Chunk) }
	if p := d.Process; p != nil {
		for _, s := range []struct{ name, v string }{{"node", p.Node}, {"host", p.Host}, {"mpi_library", p.MpiLibrary},
			{"program", p.Program}, {"user", p.User}} {
			if len(s.v) > lim.MaxString {
				return reject(ReasonString, "%s: process %s of %d bytes, limit %d", where(), s.name, len(s.v), lim.MaxString)
			}
		}
		for _, v := range []struct {
			name string
			v    float64
		}{{"cpu_user_seconds", p.CpuUserSeconds}, {"cpu_system_seconds", p.CpuSystemSeconds},
			{"wall_seconds", p.WallSeconds}, {"mpi_seconds", p.MpiSeconds}} {
			if math.IsNaN(v.v) || math.IsInf(v.v, 0) || v.v < 0 || v.v > 1e12 {
				return reject(ReasonValue, "%s: process %s = %g", where(), v.name, v.v)
			}
		}
	}
	if len(d.Functions) > lim.MaxFunctions {
		return reject(ReasonTooMany, "%s: %d functions, limit %d", where(), len(d.Functions), lim.MaxFunctions)
	}
	for i, f := range d.Functions {
		if f.Name == "" || len(f.Name) > lim.MaxString {
			return reject(ReasonString, "%s: function %d name of %d bytes, want 1..%d", where(), i, len(f.Name), lim.MaxString)
		}
	}
	if len(d.Regions) > lim.MaxRegions {
		return reject(ReasonTooMany, "%s: %d regions, limit %d", where(), len(d.Regions), lim.MaxRegions)
	}
	for i, r := range d.Regions {
		if r.Name == "" || len(r.Name) > lim.MaxString {
			return reject(ReasonString, "%s: region %d name of %d bytes, want 1..%d", where(), i, len(r.Name), lim.MaxString)
		}
	}
	if d.rows.n > lim.MaxNodes || int64(d.rows.n) > int64(d.WorldSize) {
		return reject(ReasonTooMany, "%s: %d destination nodes for world size %d", where(), d.rows.n, d.WorldSize)
	}
	if d.rows.n > 0 && (d.rows.minName == 0 || d.rows.maxName > lim.MaxString) {
		for i, n := range d.rows.slice() {
			if n.Node == "" || len(n.Node) > lim.MaxString {
				return reject(ReasonString, "%s: destination node %d name of %d bytes, want 1..%d", where(), i, len(n.Node), lim.MaxString)
			}
		}
	}
	if d.Gpu != nil {
		if err := validateGPU(d, lim, where); err != nil {
			return err
		}
	}
	if len(d.Reorders) > 0 {
		if err := validateReorders(d, lim, where); err != nil {
			return err
		}
	}
	if err := d.conns.validate(d, where); err != nil {
		return err
	}
	if pp := &d.peers; pp.rows.Len() > 0 {
		switch {
		case int64(pp.rows.Len()) > int64(d.WorldSize):
			return reject(ReasonTooMany, "%s: %d peers for world size %d", where(), pp.rows.Len(), d.WorldSize)
		case pp.maxPeer >= int(d.WorldSize):
			return reject(ReasonPeer, "%s: peer %d of world size %d", where(), pp.maxPeer, d.WorldSize)
		case pp.hasDup:
			return reject(ReasonPeer, "%s: peer %d twice", where(), pp.dup)
		case pp.maxBins > lim.MaxBins:
			return reject(ReasonHistogram, "%s: a peer's histogram of %d bins, limit %d", where(), pp.maxBins, lim.MaxBins)
		}
	}
	return nil
}

// validateGPU checks the GPU section (field 22): its rows within bounds,
// peers world ranks each once, names 1..MaxString bytes.
func validateGPU(d *Datagram, lim Limits, where func() string) error {
	g := d.Gpu
	for _, s := range []struct{ name, v string }{{"probe_error", g.ProbeError}, {"nccl_version", g.NcclVersion}} {
		if len(s.v) > lim.MaxString {
			return reject(ReasonString, "%s: gpu.%s of %d bytes, limit %d", where(), s.name, len(s.v), lim.MaxString)
		}
	}
	if len(g.Functions) > lim.MaxFunctions {
		return reject(ReasonTooMany, "%s: gpu.functions: %d rows, limit %d", where(), len(g.Functions), lim.MaxFunctions)
	}
	for i, f := range g.Functions {
		if f.Name == "" || len(f.Name) > lim.MaxString {
			return reject(ReasonString, "%s: gpu.functions[%d].name of %d bytes, want 1..%d", where(), i, len(f.Name), lim.MaxString)
		}
	}
	if int64(len(g.Peers)) > int64(d.WorldSize) {
		return reject(ReasonTooMany, "%s: gpu.peers: %d rows for world size %d", where(), len(g.Peers), d.WorldSize)
	}
	if len(g.Peers) > 0 {
		peers := make([]uint32, len(g.Peers))
		for i, p := range g.Peers {
			if p.Peer >= d.WorldSize {
				return reject(ReasonPeer, "%s: gpu.peers[%d].peer %d of world size %d", where(), i, p.Peer, d.WorldSize)
			}
			peers[i] = p.Peer
		}
		slices.Sort(peers)
		for i := 1; i < len(peers); i++ {
			if peers[i] == peers[i-1] {
				return reject(ReasonPeer, "%s: gpu.peers: peer %d twice", where(), peers[i])
			}
		}
	}
	if len(g.NcclOps) > lim.MaxNCCLOps {
		return reject(ReasonTooMany, "%s: gpu.nccl_ops: %d rows, limit %d", where(), len(g.NcclOps), lim.MaxNCCLOps)
	}
	for i, o := range g.NcclOps {
		if o.Name == "" || len(o.Name) > lim.MaxString {
			return reject(ReasonString, "%s: gpu.nccl_ops[%d].name of %d bytes, want 1..%d", where(), i, len(o.Name), lim.MaxString)
		}
		if len(o.Algorithm) > lim.MaxString || len(o.Protocol) > lim.MaxString {
			return reject(ReasonString, "%s: gpu.nccl_ops[%d]: algorithm of %d bytes, protocol of %d, limit %d", where(), i, len(o.Algorithm), len(o.Protocol), lim.MaxString)
		}
		if o.CommSize > 0 && o.CommRank >= o.CommSize {
			return reject(ReasonValue, "%s: gpu.nccl_ops[%d]: comm_rank %d of comm_size %d", where(), i, o.CommRank, o.CommSize)
		}
	}
	if len(g.NcclPeers) > lim.MaxNCCLPeers {
		return reject(ReasonTooMany, "%s: gpu.nccl_peers: %d rows, limit %d", where(), len(g.NcclPeers), lim.MaxNCCLPeers)
	}
	return nil
}

func checkJobID(id string, max int) error {
	if id == "" || id == "." || id == ".." || len(id) > max {
		return reject(ReasonJobID, "job id of %d bytes, want 1..%d", len(id), max)
	}
	if !utf8.ValidString(id) {
		return reject(ReasonJobID, "job id %q is not UTF-8", id)
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f || r == '/' || r == '\\' {
			return reject(ReasonJobID, "job id %q has a control character or slash", id)
		}
	}
	return nil
}

// Datagram is one decoded agent datagram: the protobuf message, but for
// its destination-node rows (field 14: every destination node of the rank,
// a thousand and more for an all-to-all job), which are decoded straight
// into one buffer (nodeRows) that the tracker packs against the job's node
// table, and its peer rows (field 15), decoded by hand, sorted and packed
// as the store keeps them (store.PeerRows); the message's own Nodes and
// Peers stay empty. proto.Unmarshal made three objects per node row
// (row, name, traffic), and a 64-byte store row per row after it was still
// a fifth of the daemon's CPU at ten times Stampede's load, with its
// zeroing and garbage; for peers it made five objects each (row, three
// Traffic, histogram), a quarter of all the daemon allocated at that load,
// and the tracker copied them once more. Unknown fields inside node and
// peer rows are dropped (nothing reads them).
type Datagram struct {
	*agentpb.Datagram
	rows  nodeRows
	peers packedPeers
	conns conns   // the rank's connections (decode_conn.go)
	own   storage // where unmarshal puts the message
	// from is the address it came from (invalid when not read from a
	// socket); it travels with the datagram while its credential is
	// decoded, for the limits on new jobs per source (AdmitOptions).
	from netip.Addr
}

// FromProto wraps a message decoded by proto.Unmarshal, moving its node
// and peer rows into the datagram's own.
func FromProto(m *agentpb.Datagram) *Datagram {
	d := &Datagram{Datagram: m}
	for _, n := range m.Nodes {
		c := store.Classes{P2P: traffic(n.P2P), Coll: traffic(n.Coll), RMA: traffic(n.Rma)}
		d.rows.add([]byte(n.Node), &c)
	}
	if len(m.Peers) > 0 {
		var p peerRows
		for _, x := range m.Peers {
			p.hist = append(p.hist, x.SizeHistogram...)
			var mon *store.Physical
			if x.MonitoredP2P != nil || x.MonitoredColl != nil || x.MonitoredRma != nil || x.MonitoredFetched != nil {
				mon = &store.Physical{Classes: store.Classes{P2P: traffic(x.MonitoredP2P), Coll: traffic(x.MonitoredColl), RMA: traffic(x.MonitoredRma)},
					Fetched: traffic(x.MonitoredFetched)}
			}
			p.end(store.PeerTraffic{Peer: int(x.Peer), Classes: store.Classes{P2P: traffic(x.P2P), Coll: traffic(x.Coll), RMA: traffic(x.Rma)}}, mon)
		}
		d.peers = p.pack()
	}
	m.Nodes, m.Peers = nil, nil
	d.conns.fromProto(m)
	return d
}

// unmarshal decodes a datagram (see Datagram and decode_msg.go).
func unmarshal(b []byte) (*Datagram, error) {
	d := new(Datagram)
	d.Datagram = &d.own.msg
	var peers *peerRows
	defer func() {
		if peers != nil {
			peers.reset()
			peersPool.Put(peers)
		}
	}()
	err := fields(b, func(num protowire.Number, typ protowire.Type, at int) (int, error) {
		switch {
		case num == fieldNodes && typ == protowire.BytesType:
			row, next := bytesAt(b, at)
			if next < 0 {
				return 0, errMalformed
			}
			if d.rows.b == nil {
				// A row packs to no more bytes than it takes on the wire.
				d.rows.b = rowsBuffer(len(b) - at)
			}
			return next, d.rows.decode(row)
		case num == fieldPeers && typ == protowire.BytesType:
			row, next := bytesAt(b, at)
			if next < 0 {
				return 0, errMalformed
			}
			if peers == nil {
				peers = peersPool.Get().(*peerRows)
			}
			return next, peers.decode(row)
		case num == fieldConnections || num == fieldConnectionsTruncated:
			return d.conns.field(b, num, typ, at)
		}
		return d.field(b, num, typ, at)
	})
	if err != nil {
		return nil, err
	}
	d.rows.fit()
	if peers != nil {
		d.peers = peers.pack()
	}
	return d, nil
}

// The datagram's own fields, its process block and its function rows are
// decoded by hand too, into storage that comes with the Datagram (one
// allocation where proto.Unmarshal made a dozen objects a datagram, with
// reflection: 7% of the daemon's CPU at ten times Stampede's load). The result is what proto.Unmarshal gives, but for
// unknown fields, which are dropped (nothing reads them); regions, rare,
// are still decoded by proto.Unmarshal. A field whose wire type is not
// its own is an unknown field, as for proto.Unmarshal.

// storage is where a decoded datagram's message lives: the message, its
// process block and its first four function rows (the load generator
// sends four; more are made one by one).
type storage struct {
	msg     agentpb.Datagram
	proc    agentpb.Process
	traffic [2]agentpb.Traffic
	fns     [4]agentpb.FunctionStat
	fnPtrs  [4]*agentpb.FunctionStat
}
