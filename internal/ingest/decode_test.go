package ingest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/netloom/netloom/internal/ingest/agentpb"
)

func TestDecodeRejects(t *testing.T) {
	lim := Limits{}.WithDefaults()
	valid := snapshot("42", 1, 4, 0, false)
	if _, err := Decode(encode(t, valid), lim); err != nil {
		t.Fatalf("valid datagram rejected: %v", err)
	}
	mod := func(f func(d *agentpb.Datagram)) []byte {
		d := proto.Clone(valid).(*agentpb.Datagram)
		f(d)
		return encode(t, d)
	}
	full := encode(t, valid)
	for _, c := range []struct {
		name, reason string
		b            []byte
	}{
		{"empty", ReasonEmpty, nil},
		{"truncated", ReasonMalformed, full[:len(full)-3]},
		{"garbage", ReasonMalformed, []byte{0xff, 0xff, 0xff, 0xff, 0xff}},
		{"oversized", ReasonOversized, make([]byte, 70000)},
		{"version 2", ReasonVersion, mod(func(d *agentpb.Datagram) { d.Version = 2 })},
		{"version 0", ReasonVersion, mod(func(d *agentpb.Datagram) { d.Version = 0 })},
		{"no job", ReasonJobID, mod(func(d *agentpb.Datagram) { d.JobId = "" })},
		{"job with slash", ReasonJobID, mod(func(d *agentpb.Datagram) { d.JobId = "../etc" })},
		{"long job", ReasonJobID, mod(func(d *agentpb.Datagram) { d.JobId = strings.Repeat("j", 200) })},
		{"world 0", ReasonWorldSize, mod(func(d *agentpb.Datagram) { d.WorldSize, d.Rank = 0, 0 })},
		{"huge world", ReasonWorldSize, mod(func(d *agentpb.Datagram) { d.WorldSize = 1 << 30 })},
		{"rank out of world", ReasonRank, mod(func(d *agentpb.Datagram) { d.Rank = 4 })},
		{"chunk out of chunks", ReasonChunk, mod(func(d *agentpb.Datagram) { d.Chunk = 1 })},
		{"no chunks", ReasonChunk, mod(func(d *agentpb.Datagram) { d.Chunks = 0 })},
		{"too many chunks", ReasonChunk, mod(func(d *agentpb.Datagram) { d.Chunks = 1 << 20 })},
		{"process in chunk 1", ReasonChunk, mod(func(d *agentpb.Datagram) { d.Chunk, d.Chunks = 1, 2 })},
		{"no time", ReasonTime, mod(func(d *agentpb.Datagram) { d.TimeUnixNs = 0 })},
		{"start after time", ReasonTime, mod(func(d *agentpb.Datagram) { d.StartUnixNs = d.TimeUnixNs + 1 })},
		{"peer out of world", ReasonPeer, mod(func(d *agentpb.Datagram) { d.Peers[0].Peer = 99 })},
		{"peer twice", ReasonPeer, mod(func(d *agentpb.Datagram) {
			d.Peers = append(d.Peers, &agentpb.PeerTraffic{Peer: d.Peers[0].Peer, Rma: &agentpb.Traffic{Bytes: 1}})
		})},
		{"long histogram", ReasonHistogram, mod(func(d *agentpb.Datagram) { d.Peers[0].SizeHistogram = make([]uint64, 66) })},
		{"long node name", ReasonString, mod(func(d *agentpb.Datagram) { d.Process.Node = strings.Repeat("n", 300) })},
		{"empty function", ReasonString, mod(func(d *agentpb.Datagram) { d.Functions[0].Name = "" })},
		{"NaN seconds", ReasonValue, mod(func(d *agentpb.Datagram) { d.Process.WallSeconds = nan() })},
		{"negative seconds", ReasonValue, mod(func(d *agentpb.Datagram) { d.Process.CpuUserSeconds = -1 })},
		{"too many peers", ReasonTooMany, mod(func(d *agentpb.Datagram) {
			for range 4 {
				d.Peers = append(d.Peers, &agentpb.PeerTraffic{Peer: 2})
			}
		})},
	} {
		_, err := Decode(c.b, lim)
		if got := reasonOf(err); got != c.reason {
			t.Errorf("%s: rejected as %q (%v), want %q", c.name, got, err, c.reason)
		}
	}
}

func nan() float64 { var z float64; return z / z }

func FuzzDecodeDatagram(f *testing.F) {
	f.Add(encode(f, snapshot("42", 1, 4, 0, false)))
	f.Add(encode(f, snapshot("42", 3, 4, 7, true)))
	for _, c := range split(snapshot("j", 2, 4, 1, false), 1) {
		f.Add(encode(f, c))
	}
	f.Add([]byte{})
	f.Add([]byte{0x08, 0x01})
	// With a GPU section (field 22): as an agent with CUDA sends it, one
	// with its section only, and one in chunk 1 (refused).
	f.Add(encode(f, withGPU(snapshot("42", 1, 4, 0, false), 1)))
	f.Add(encode(f, &agentpb.Datagram{Version: 1, JobId: "g", Rank: 0, WorldSize: 2, Chunks: 1, TimeUnixNs: 1, Gpu: gpuSection(3)}))
	f.Add(encode(f, &agentpb.Datagram{Version: 1, JobId: "g", Rank: 0, WorldSize: 2, Chunk: 1, Chunks: 2, TimeUnixNs: 1, Gpu: &agentpb.Gpu{Probed: true}}))
	lim := Limits{}.WithDefaults()
	tr := NewTracker(Options{MaxJobs: 64, MaxPendingBytes: 1 << 20}, nil)
	now := t0
	// The verification path: each input also goes through a verifier as
	// sent, and signed under a session it knows (credential appended, mac
	// last), so that what is accepted reaches a tracker of verified jobs.
	fm := newFakeMunge()
	cred, key := fm.issue(1001, "42", t0, 1<<20*time.Hour)
	v := newVerifier(AuthOptions{Decode: fm.Decode, UserName: users}, nil, 64)
	vtr := NewTracker(Options{MaxJobs: 64, MaxPendingBytes: 1 << 20}, nil)
	credField := protowire.AppendBytes(protowire.AppendTag(nil, 20, protowire.BytesType), cred)
	f.Add(signed(f, snapshot("42", 0, 2, 0, false), cred, key))
	f.Fuzz(func(t *testing.T, b []byte) {
		sameAsProto(t, b)
		fuzzVerify(t, v, vtr, b, lim, now)
		fuzzVerify(t, v, vtr, Sign(append(slices.Clip(b), credField...), key), lim, now)
		d, err := Decode(b, lim)
		if err != nil {
			if reasonOf(err) == "" {
				t.Fatalf("error without a reason: %v", err)
			}
			return
		}
		if d.Rank >= d.WorldSize || d.Chunk >= d.Chunks || d.Version != WireVersion {
			t.Fatalf("accepted an invalid datagram: %v", d)
		}
		if g := d.Gpu; g != nil {
			if d.Chunk != 0 || len(g.Functions) > lim.MaxFunctions || len(g.Peers) > int(d.WorldSize) || len(g.NcclOps) > lim.MaxNCCLOps || len(g.NcclPeers) > lim.MaxNCCLPeers {
				t.Fatalf("accepted a bad gpu section: %v", g)
			}
			for _, p := range g.Peers {
				if p.Peer >= d.WorldSize {
					t.Fatalf("accepted gpu peer %d of world size %d", p.Peer, d.WorldSize)
				}
			}
		}
		last := -1
		for p := range d.peers.rows.All() {
			if p.Peer >= int(d.WorldSize) || p.Peer <= last || len(p.Histogram) > lim.MaxBins {
				t.Fatalf("accepted a bad peer, or one out of order: %+v after peer %d", p, last)
			}
			last = p.Peer
		}
		now = now.Add(time.Millisecond)
		if err := tr.Add(d, len(b), now); err != nil && reasonOf(err) == "" {
			t.Fatalf("tracker error without a reason: %v", err)
		}
		tr.Tick(now)
		l := tr.Publish(now)
		for _, j := range l.Jobs {
			if j.Ranks <= lim.MaxWorldSize && j.Ranks <= 64 {
				if _, err := RankMatrix(j, "all", "bytes"); err != nil {
					t.Fatal(err)
				}
			}
			NodeMatrix(j, "p2p", "msgs")
			BuildProfile(j)
			BuildHistogram(j, 0)
			BuildRegions(j)
		}
	})
}

func fuzzVerify(t *testing.T, v *verifier, tr *Tracker, raw []byte, lim Limits, now time.Time) {
	d, err := Decode(raw, lim)
	if err != nil {
		return
	}
	check := func(it Item, rerr *RejectError) {
		if rerr != nil {
			if rerr.Reason == "" {
				t.Fatalf("verifier error without a reason: %v", rerr)
			}
			return
		}
		if !it.Verified || it.UID != 1001 || it.User != "alice" || it.D.JobId != "42" || (it.D.Process != nil && it.D.Process.User != "alice") {
			t.Fatalf("accepted %+v", it)
		}
		if err := tr.AddItem(it); err != nil && reasonOf(err) == "" {
			t.Fatalf("tracker error without a reason: %v", err)
		}
	}
	var ms macState
	switch vd, it, rerr := v.check(&ms, d, raw, now); vd {
	case accepted:
		check(it, nil)
	case rejected:
		check(it, rerr)
	}
	for len(v.queue) > 0 {
		v.resolve(<-v.queue, now, func(r result) { check(r.it, r.err) })
	}
	tr.Tick(now)
}
