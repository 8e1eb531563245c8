package sched

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	var gotOpts Options
	if err := r.Register("fake", func(o Options) (Scheduler, error) {
		gotOpts = o
		if err := o.Check("a", "b"); err != nil {
			return nil, err
		}
		return None{}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := r.Register("fake", func(Options) (Scheduler, error) { return None{}, nil }); err == nil {
		t.Error("registered a name twice")
	}
	if err := r.Register("Bad Name", func(Options) (Scheduler, error) { return None{}, nil }); err == nil {
		t.Error("registered a bad name")
	}
	if _, err := r.New("fake:a=1, b = x=y"); err != nil {
		t.Fatal(err)
	}
	if gotOpts["a"] != "1" || gotOpts["b"] != "x=y" {
		t.Errorf("options %v", gotOpts)
	}
	for spec, want := range map[string]string{
		"nope":         `scheduler "nope": unknown (have fake)`,
		"fake:c=1":     `scheduler "fake:c=1": unknown option "c" (known: a, b)`,
		"fake:a":       `option "a": want KEY=VALUE`,
		"fake:a=1,a=2": `option "a" given twice`,
		":a=1":         "empty name",
	} {
		if _, err := r.New(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New(%q): %v, want %q", spec, err, want)
		}
	}
	o := Options{"d": "5s", "z": "-1s", "b": "yes"}
	if d, err := o.Duration("d", 0); err != nil || d != 5*time.Second {
		t.Errorf("Duration = %v, %v", d, err)
	}
	if _, err := o.Duration("z", 0); err == nil {
		t.Error("negative duration accepted")
	}
	if _, err := o.Bool("b", false); err == nil || !strings.Contains(err.Error(), `b="yes"`) {
		t.Errorf("Bool error %v", err)
	}
}

type scripted struct {
	polls [][]Job
	errs  []error
	n     int
}

func (s *scripted) Name() string { return "scripted" }
func (s *scripted) Jobs(context.Context) ([]Job, error) {
	i := s.n
	s.n++
	if i >= len(s.polls) {
		i = len(s.polls) - 1
	}
	return s.polls[i], s.errs[i]
}

func TestWatcherReportsChanges(t *testing.T) {
	run := Job{ID: "10", State: StateRunning, Nodes: []string{"n1"}}
	done := run
	done.State, done.End = StateCompleted, time.Unix(100, 0)
	other := Job{ID: "9", State: StatePending}
	s := &scripted{
		polls: [][]Job{{run, other}, nil, {run, other}, {other, done}, {done}},
		errs:  []error{nil, errors.New("squeue: boom"), nil, nil, nil},
	}
	var ups []Update
	var errs []error
	w := &Watcher{Scheduler: s,
		OnUpdate: func(_ context.Context, u Update) { ups = append(ups, u) },
		OnError:  func(_ context.Context, err error) { errs = append(errs, err) }}
	for range 5 {
		w.Poll(context.Background())
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "scripted: squeue: boom") {
		t.Errorf("errors %v", errs)
	}
	if len(ups) != 4 {
		t.Fatalf("%d updates, want 4", len(ups))
	}
	ids := func(js []Job) string {
		var s []string
		for _, j := range js {
			s = append(s, j.ID+":"+string(j.State))
		}
		return strings.Join(s, " ")
	}
	for i, want := range []struct{ jobs, changed, gone string }{
		{"9:pending 10:running", "9:pending 10:running", ""},
		{"9:pending 10:running", "", ""}, // a failed poll changes nothing
		{"9:pending 10:completed", "10:completed", ""},
		{"10:completed", "", "9"},
	} {
		u := ups[i]
		if ids(u.Jobs) != want.jobs || ids(u.Changed) != want.changed || strings.Join(u.Gone, " ") != want.gone {
			t.Errorf("update %d: jobs %q changed %q gone %q; want %+v", i, ids(u.Jobs), ids(u.Changed), u.Gone, want)
		}
	}
}

func TestWatcherRunStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	w := &Watcher{Scheduler: None{}, Interval: time.Millisecond, OnUpdate: func(context.Context, Update) {
		if n++; n == 3 {
			cancel()
		}
	}}
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("%d polls after cancel at 3", n)
	}
	if err := (&Watcher{}).Run(context.Background()); err == nil {
		t.Error("Run without a scheduler succeeded")
	}
}
