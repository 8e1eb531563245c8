package ingest

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/netloom/netloom/internal/ingest/agentpb"
)

// reorderRecord is rank r's record of a 4-rank reordering that swapped
// ranks 1 and 2 (old rank r, new rank r^3 for the moved ones).
func reorderRecord(r int) *agentpb.Reorder {
	nr := r
	if r == 1 || r == 2 {
		nr = 3 - r
	}
	return &agentpb.Reorder{Index: 0, TimeUnixNs: t0.Add(7 * time.Second).UnixNano(), Ranks: 4, CommWorld: true, Nodes: 2,
		Method: "scotch", Moved: 2, OldRank: uint32(r), NewRank: uint32(nr), InterNodeBefore: 4000, InterNodeAfter: 2000,
		TotalBytes: 8000, Since: "warm", Seconds: 0.002, MapSeconds: 0.001}
}

func TestDecodeReorders(t *testing.T) {
	lim := Limits{}.WithDefaults()
	valid := snapshot("r", 1, 4, 1, false)
	valid.Reorders = []*agentpb.Reorder{reorderRecord(1)}
	b := encode(t, valid)
	sameAsProto(t, b)
	d, err := Decode(b, lim)
	if err != nil {
		t.Fatalf("a datagram with reorders rejected: %v", err)
	}
	if len(d.Reorders) != 1 || !proto.Equal(d.Reorders[0], valid.Reorders[0]) {
		t.Fatalf("reorders decoded as %v, want %v", d.Reorders, valid.Reorders)
	}
	mod := func(f func(d *agentpb.Datagram)) []byte {
		d := proto.Clone(valid).(*agentpb.Datagram)
		f(d)
		return encode(t, d)
	}
	for _, c := range []struct {
		name, reason, field string
		b                   []byte
	}{
		{"in chunk 1", ReasonChunk, "reorders outside chunk 0", mod(func(d *agentpb.Datagram) {
			d.Process, d.Functions, d.Regions, d.Chunk, d.Chunks = nil, nil, nil, 1, 2
		})},
		{"too many", ReasonTooMany, "17 reorders", mod(func(d *agentpb.Datagram) {
			for range 16 {
				d.Reorders = append(d.Reorders, reorderRecord(1))
			}
		})},
		{"new rank out of the communicator", ReasonValue, "reorders[0]", mod(func(d *agentpb.Datagram) { d.Reorders[0].NewRank = 4 })},
		{"communicator larger than the world", ReasonValue, "reorders[0]", mod(func(d *agentpb.Datagram) { d.Reorders[0].Ranks = 5 })},
		{"long mark", ReasonString, "reorders[0]", mod(func(d *agentpb.Datagram) { d.Reorders[0].Since = strings.Repeat("m", 257) })},
		{"no time", ReasonValue, "reorders[0]", mod(func(d *agentpb.Datagram) { d.Reorders[0].TimeUnixNs = 0 })},
	} {
		_, err := Decode(c.b, lim)
		if got := reasonOf(err); got != c.reason || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: rejected as %q (%v), want %q naming %q", c.name, got, err, c.reason, c.field)
		}
	}
}

// The daemon keeps a rank's reorders like its GPU section (a snapshot
// without them keeps the last ones), and the report joins the ranks'
// records of one call and says it.
func TestTrackerReorders(t *testing.T) {
	tr, _, _, _ := newTracker(Options{})
	now := t0
	for seq := uint64(0); seq < 3; seq++ {
		for r := range 4 {
			d := snapshot("ro", r, 4, seq, seq == 2)
			if seq == 1 {
				d.Reorders = []*agentpb.Reorder{reorderRecord(r)} // the last snapshot has none
			}
			if err := add(t, tr, d, now); err != nil {
				t.Fatal(err)
			}
		}
		now = now.Add(5 * time.Second)
	}
	j := tr.Publish(now).Jobs["ro"].Full()
	for _, p := range j.Processes {
		if len(p.Reorders) != 1 || p.Reorders[0].OldRank != p.Rank || p.Reorders[0].Method != "scotch" {
			t.Fatalf("rank %d: reorders %+v", p.Rank, p.Reorders)
		}
	}
	rep, err := BuildReport(j, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Reorders) != 1 || rep.Reorders[0].Reported != 4 || len(rep.Reorders[0].Mapping) != 4 || rep.Reorders[0].InterNodeAfter != 2000 {
		t.Fatalf("report reorders: %+v", rep.Reorders)
	}
	var out bytes.Buffer
	if err := WriteText(&out, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Reordered ranks", "MPI_COMM_WORLD of 4 ranks on 2 nodes, from the matrix since mark \"warm\": Scotch's order, 2 of 4 ranks moved",
		"(50.0% less)", "4 ranks reported it", "1:1->2 2:2->1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
	// A job that never reordered says nothing of it, and its JSON has [].
	tr2, _, _, _ := newTracker(Options{})
	if err := add(t, tr2, snapshot("plain", 0, 1, 0, true), t0); err != nil {
		t.Fatal(err)
	}
	rep, err = BuildReport(tr2.Publish(t0).Jobs["plain"].Full(), nil)
	if err != nil || rep.Reorders == nil || len(rep.Reorders) != 0 {
		t.Fatalf("a job without reorders: %v, %v", rep, err)
	}
}
