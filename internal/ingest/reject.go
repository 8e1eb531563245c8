package ingest

// Why a datagram is dropped: the reasons, counted by the metrics, and the
// error that carries one, from decoding, verification and the tracker.

import (
	"fmt"
)

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
	ReasonConnection     = "bad_connection"     // a connection's address, port or queue pair out of shape (decode_conn.go)

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
	ReasonUnauthenticated, ReasonBadCredential, ReasonBadMAC, ReasonJobMismatch, ReasonUserMismatch, ReasonReplayed, ReasonMungeUnavailable, ReasonConnection}

// RejectError says why a datagram was dropped.
type RejectError struct {
	Reason string // one of Reasons
	Detail string
}

func (e *RejectError) Error() string { return e.Reason + ": " + e.Detail }

func reject(reason, format string, a ...any) *RejectError {
	return &RejectError{Reason: reason, Detail: fmt.Sprintf(format, a...)}
}
