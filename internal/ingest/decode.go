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
	"slices"
	"unicode/utf8"
)

// WireVersion is the Datagram version this daemon understands.
const WireVersion = 1

// Reasons a datagram is dropped; the label of
// netloom_ingest_datagrams_dropped_total.
const (
	ReasonEmpty          = "empty"
	ReasonOversized      = "oversized"
	ReasonMalformed      = "malformed"      // not a Datagram protobuf
	ReasonVersion        = "version"        // unknown wire version
	ReasonJobID          = "bad_job_id"     // empty, too long or not printable
	ReasonWorldSize      = "bad_world_size" // 0 or above the limit
	ReasonRank           = "bad_rank"       // rank >= world_size
	ReasonChunk          = "bad_chunk"      // chunk >= chunks, chunks 0 or too many, chunk-0 fields elsewhere
	ReasonTime           = "bad_time"       // no time, or started after it was taken
	ReasonPeer           = "bad_peer"       // peer >= world_size, or twice in a snapshot
	ReasonHistogram      = "bad_histogram"  // too many bins
	ReasonString         = "bad_string"     // too long or empty where a name is needed
	ReasonTooMany        = "too_many"       // too many functions, regions, nodes or peers
	ReasonValue          = "bad_value"      // NaN, infinite or negative seconds
	ReasonWorldChanged   = "world_size_changed"
	ReasonBackwards      = "counter_backwards" // a cumulative counter decreased within one run
	ReasonStale          = "stale"             // an older snapshot than one already applied
	ReasonDuplicate      = "duplicate"         // a chunk received twice
	ReasonIncomplete     = "incomplete"        // chunks missing when the snapshot timed out or was overtaken
	ReasonChunksChanged  = "chunks_changed"    // chunks of one snapshot disagree on their header
	ReasonTooManyJobs    = "too_many_jobs"
	ReasonReassemblyFull = "reassembly_full"
	ReasonQueueFull      = "queue_full"         // the aggregator (or credential decoding) fell behind the socket
	ReasonNewJobRate     = "new_job_rate"       // a new job from a source address that starts jobs too fast (AdmitOptions)
	ReasonUserJobs       = "too_many_user_jobs" // a new job of a user who has MaxJobsPerUser live jobs

	// Authenticated agent data (AuthOptions, docs/security.md "Agent data").
	ReasonSourceNetwork    = "source_network"    // sent from outside agent_networks
	ReasonUnauthenticated  = "unauthenticated"   // no credential where one is required, or none can be checked (AuthOptions.Refuse)
	ReasonBadCredential    = "bad_credential"    // munged refused it (invalid, expired, replayed) or not a netloom one
	ReasonBadMAC           = "bad_mac"           // mac missing, not last, or not under the credential's key
	ReasonJobMismatch      = "job_mismatch"      // job id not the credential's, or the job belongs to another user (verified or claimed)
	ReasonUserMismatch     = "user_mismatch"     // claimed user is not the credential's uid
	ReasonReplayed         = "replayed"          // a (snapshot, chunk) this credential signed was accepted before
	ReasonMungeUnavailable = "munge_unavailable" // the daemon's munged did not answer
)

// Reasons lists every drop reason, so that metrics show them all from the start.
var Reasons = []string{ReasonEmpty, ReasonOversized, ReasonMalformed, ReasonVersion, ReasonJobID, ReasonWorldSize,
	ReasonRank, ReasonChunk, ReasonTime, ReasonPeer, ReasonHistogram, ReasonString, ReasonTooMany, ReasonValue,
	ReasonWorldChanged, ReasonBackwards, ReasonStale, ReasonDuplicate, ReasonIncomplete, ReasonChunksChanged,
	ReasonTooManyJobs, ReasonReassemblyFull, ReasonQueueFull, ReasonNewJobRate, ReasonUserJobs, ReasonSourceNetwork,
	ReasonUnauthenticated, ReasonBadCredential, ReasonBadMAC, ReasonJobMismatch, ReasonUserMismatch, ReasonReplayed, ReasonMungeUnavailable}

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

// RejectError says why a datagram was dropped.
type RejectError struct {
	Reason string // one of Reasons
	Detail string
}

func (e *RejectError) Error() string { return e.Reason + ": " + e.Detail }

func reject(reason, format string, a ...any) *RejectError {
	return &RejectError{Reason: reason, Detail: fmt.Sprintf(format, a...)}
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
