package sqlite

import (
	"compress/flate"
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/codec"
	"github.com/netloom/netloom/internal/store/storetest"
)

// A database written before the binary rows keeps its JSON ones readable.
func TestProcessRowsOfEarlierVersionsRead(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	j := storetest.Job("legacy", 2, storetest.T0, store.JobFinished)
	if err := s.SaveJob(ctx, &store.Job{JobSummary: j.JobSummary}); err != nil {
		t.Fatal(err)
	}
	for i := range j.Processes {
		raw, err := json.Marshal(&j.Processes[i])
		if err != nil {
			t.Fatal(err)
		}
		z, err := codec.Deflate(raw, flate.BestSpeed)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.w.ExecContext(ctx, `INSERT INTO job_processes(job, rank, data) VALUES (?, ?, ?)`, j.ID, j.Processes[i].Rank, z); err != nil {
			t.Fatal(err)
		}
	}
	// A new row beside them.
	p := storetest.Job("legacy", 3, storetest.T0, store.JobFinished).Processes[2]
	if err := s.SaveJob(ctx, &store.Job{JobSummary: j.JobSummary, Processes: []store.Process{p}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Job(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := append(j.Processes, p)
	if !reflect.DeepEqual(got.Processes, want) {
		t.Fatalf("processes:\n got %+v\nwant %+v", got.Processes, want)
	}
	if _, err := s.w.ExecContext(ctx, `UPDATE job_processes SET data = x'0702' WHERE rank = 1`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Job(ctx, j.ID); err == nil {
		t.Fatal("a corrupt row read without an error")
	}
}
