package schedulers

import (
	"context"
	"strings"
	"testing"
)

func TestDefault(t *testing.T) {
	if got := strings.Join(Default().Names(), ","); got != "none,slurm" {
		t.Errorf("schedulers %s", got)
	}
	s, err := New("none")
	if err != nil {
		t.Fatal(err)
	}
	if jobs, err := s.Jobs(context.Background()); err != nil || len(jobs) != 0 || s.Name() != "none" {
		t.Errorf("none: %v %v %s", jobs, err, s.Name())
	}
	if _, err := New("none:x=1"); err == nil {
		t.Error("none took an option")
	}
	if s, err := New("slurm:accounting=off"); err != nil || s.Name() != "slurm" {
		t.Errorf("slurm: %v", err)
	}
}
