package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
)

func testAttribution(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := fabric.PortRef{GUID: 0x10, Port: 3}
	b := fabric.PortRef{GUID: 0x20, Port: 1}
	c := fabric.PortRef{GUID: 0x8000000000000030, Port: 36} // a GUID with the top bit set
	iv := 30 * time.Second
	var in []store.LinkJobSample
	for i := range 3 {
		at := T0.Add(time.Duration(i+1) * iv)
		in = append(in,
			store.LinkJobSample{Time: at, Span: iv, Job: "7", Port: a, Bytes: 100},
			store.LinkJobSample{Time: at, Span: iv, Job: "7", Port: b, Bytes: 10},
			store.LinkJobSample{Time: at, Span: iv, Job: "8", Port: a, Bytes: 1000},
			store.LinkJobSample{Time: at, Span: iv, Job: "8", Port: c, Bytes: 5})
	}
	// One interval at a time, as the daemon writes them.
	for i := 0; i < len(in); i += 4 {
		if err := s.AddLinkJobSamples(ctx, in[i:i+4]); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.LinkJobs(ctx, []fabric.PortRef{a, b}, T0, T0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"7 " + a.String(): 300, "7 " + b.String(): 30, "8 " + a.String(): 3000}
	sums := map[string]uint64{}
	for _, x := range got {
		sums[x.Job+" "+x.Port.String()] += x.Bytes
	}
	if !reflect.DeepEqual(sums, want) {
		t.Errorf("LinkJobs(a, b, all) = %v, want %v", sums, want)
	}
	all, err := s.LinkJobs(ctx, nil, T0, T0.Add(time.Hour))
	if err != nil || len(all) != 4 {
		t.Errorf("LinkJobs(every port) = %+v, %v; want 4 (job, port) sums", all, err)
	}
	// The range is inclusive and selects intervals by their end.
	got, err = s.LinkJobs(ctx, []fabric.PortRef{a}, T0.Add(2*iv), T0.Add(2*iv))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Bytes+got[1].Bytes != 1100 {
		t.Errorf("LinkJobs(a, one interval) = %+v, want 100 + 1000", got)
	}
	// Totals, largest first; and over a range.
	links, err := s.JobLinks(ctx, "8", time.Time{}, time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	wantLinks := []store.LinkJobBytes{{Job: "8", Port: a, Bytes: 3000}, {Job: "8", Port: c, Bytes: 15}}
	if !reflect.DeepEqual(links, wantLinks) {
		t.Errorf("JobLinks(8, totals) = %+v, want %+v", links, wantLinks)
	}
	links, err = s.JobLinks(ctx, "7", T0.Add(iv), T0.Add(2*iv), 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := []store.LinkJobBytes{{Job: "7", Port: a, Bytes: 200}}; !reflect.DeepEqual(links, want) {
		t.Errorf("JobLinks(7, two intervals, limit 1) = %+v, want %+v", links, want)
	}
	// The count of a cut list is every direction the list would hold.
	for _, c := range []struct {
		job      string
		from, to time.Time
		want     int
	}{{"8", time.Time{}, time.Time{}, 2}, {"7", T0.Add(iv), T0.Add(2 * iv), 2}, {"7", T0.Add(2 * iv), T0.Add(2 * iv), 2}, {"8", T0.Add(2 * iv), T0.Add(2 * iv), 2}, {"7", T0.Add(4 * iv), T0.Add(5 * iv), 0}, {"none", time.Time{}, time.Time{}, 0}} {
		all, err := s.JobLinks(ctx, c.job, c.from, c.to, 0)
		n, err2 := s.JobLinkCount(ctx, c.job, c.from, c.to)
		if err != nil || err2 != nil || n != c.want || n != len(all) {
			t.Errorf("JobLinkCount(%s, %s..%s) = %d, %v; want %d, as JobLinks lists %d (%v)", c.job, c.from, c.to, n, err2, c.want, len(all), err)
		}
	}
	if links, err := s.JobLinks(ctx, "none", time.Time{}, time.Time{}, 0); err != nil || len(links) != 0 {
		t.Errorf("JobLinks(unknown) = %v, %v; want empty", links, err)
	}
	// Writing the same interval again replaces the sample (the totals add).
	if err := s.AddLinkJobSamples(ctx, []store.LinkJobSample{{Time: T0.Add(iv), Span: iv, Job: "7", Port: b, Bytes: 11}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.LinkJobs(ctx, []fabric.PortRef{b}, T0, T0.Add(time.Hour)); len(got) != 1 || got[0].Bytes != 31 {
		t.Errorf("after rewriting an interval: %+v, want 31 bytes", got)
	}
	// Bad input is refused whole.
	for _, bad := range [][]store.LinkJobSample{
		{{Time: T0, Job: "", Port: a, Bytes: 1}},
		{{Time: time.Time{}, Job: "9", Port: a, Bytes: 1}},
		{{Time: T0, Job: "9", Port: a, Bytes: 1 << 63}},
	} {
		if err := s.AddLinkJobSamples(ctx, bad); err == nil {
			t.Errorf("AddLinkJobSamples(%+v) succeeded", bad)
		}
	}
	if got, _ := s.JobLinks(ctx, "9", time.Time{}, time.Time{}, 0); len(got) != 0 {
		t.Errorf("a refused sample was stored: %+v", got)
	}
	// Pruning samples keeps the totals of jobs still stored.
	if err := s.Prune(ctx, store.Retention{LinkJobSamples: T0.Add(2*iv + time.Second)}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.LinkJobs(ctx, []fabric.PortRef{a}, T0, T0.Add(time.Hour)); len(got) != 2 || got[0].Bytes+got[1].Bytes != 1100 {
		t.Errorf("after pruning two intervals: %+v, want one interval left (1100 bytes)", got)
	}
	if links, _ := s.JobLinks(ctx, "8", time.Time{}, time.Time{}, 0); len(links) != 2 || links[0].Bytes != 3000 {
		t.Errorf("totals after pruning samples: %+v", links)
	}
}

func testSchedJobs(t *testing.T, s store.Store) {
	ctx := context.Background()
	if _, err := s.JobSummary(ctx, "41"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("JobSummary(unknown): %v, want ErrNotFound", err)
	}
	// A job known only from the scheduler: no processes, fabric counters
	// as its traffic.
	start := T0.Add(time.Minute)
	j := &store.Job{JobSummary: store.JobSummary{ID: "41", State: store.JobFinished, Start: start, End: start.Add(5 * time.Second),
		Updated: start.Add(5 * time.Second), Nodes: 2, User: "alice", TrafficSource: store.SourceFabricCounters,
		Scheduler: &store.SchedInfo{Scheduler: "slurm", ID: "41", Name: "sleep", User: "alice", UID: 1001, State: "completed",
			RawState: "COMPLETED", Nodes: []string{"n1", "n2"}, Start: start, End: start.Add(5 * time.Second), Source: "squeue"},
		HostLinks: &store.HostLinkTraffic{Sent: 4096, Received: 2048, Nodes: 2, UnmappedNodes: []string{}, Intervals: 1}}}
	if err := s.SaveJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	got, err := s.JobSummary(ctx, "41")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*got, j.JobSummary) {
		t.Errorf("scheduler job:\n got %+v\nwant %+v", *got, j.JobSummary)
	}
	full, err := s.Job(ctx, "41")
	if err != nil || len(full.Processes) != 0 || full.Scheduler == nil || full.Scheduler.UID != 1001 {
		t.Errorf("Job(41) = %+v, %v", full, err)
	}
	// An agent job later joined with its scheduler record keeps its ranks.
	aj := Job("42", 2, T0, store.JobRunning)
	if err := s.SaveJob(ctx, aj); err != nil {
		t.Fatal(err)
	}
	merged := &store.Job{JobSummary: aj.JobSummary}
	merged.Agent, merged.TrafficSource = true, store.SourceAgent
	merged.Scheduler = &store.SchedInfo{Scheduler: "slurm", ID: "42", User: "bob", Nodes: []string{"node0", "node1"}, State: "running"}
	merged.Attribution = &store.Attribution{Bytes: 3000, UnmappedNodes: []string{"node1"}, UnmappedBytes: 2000, Intervals: 2}
	if err := s.SaveJob(ctx, merged); err != nil {
		t.Fatal(err)
	}
	full, err = s.Job(ctx, "42")
	if err != nil {
		t.Fatal(err)
	}
	if len(full.Processes) != 2 || !reflect.DeepEqual(full.JobSummary, merged.JobSummary) {
		t.Errorf("merged job: %d processes, summary %+v", len(full.Processes), full.JobSummary)
	}
	list, _, err := s.Jobs(ctx, store.JobQuery{})
	if err != nil || len(list) != 2 {
		t.Fatalf("Jobs() = %d jobs, %v", len(list), err)
	}
}
