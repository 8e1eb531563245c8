package store

import (
	"sync"
	"testing"
)

func TestLiveJobFull(t *testing.T) {
	a, b, c3 := &Process{Rank: 0, Seq: 1}, &Process{Rank: 1, Seq: 2}, &Process{Rank: 2, Seq: 3}
	j := NewLiveJob(JobSummary{ID: "x", Ranks: 3}, [][]*Process{{a, b}, {}, {c3}})
	if j.Processes != nil {
		t.Fatal("a live job's processes are copied only when asked for")
	}
	var seen []int
	j.EachProcess(func(p *Process) { seen = append(seen, p.Rank) })
	if len(seen) != 3 || seen[1] != 1 || seen[2] != 2 {
		t.Fatalf("EachProcess saw %v", seen)
	}
	// Copies of the job share the one copy of its processes, made once
	// even when asked for at the same time.
	c := *j
	c.ID = "merged"
	var wg sync.WaitGroup
	fulls := make([]*Job, 8)
	for i := range fulls {
		wg.Go(func() { fulls[i] = c.Full() })
	}
	wg.Wait()
	f := j.Full()
	if f.ID != "x" || len(f.Processes) != 3 || f.Processes[1].Seq != 2 || f.Processes[2].Seq != 3 || fulls[0].ID != "merged" {
		t.Fatalf("full job %+v", f)
	}
	for _, g := range fulls {
		if &g.Processes[0] != &f.Processes[0] {
			t.Fatal("processes copied more than once")
		}
	}
	stored := &Job{JobSummary: JobSummary{ID: "s"}, Processes: []Process{{Rank: 3}}}
	if stored.Full() != stored {
		t.Error("a stored job is its own full job")
	}
	n := 0
	stored.EachProcess(func(*Process) { n++ })
	if n != 1 {
		t.Errorf("EachProcess of a stored job: %d", n)
	}
}
