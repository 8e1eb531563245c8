// Package schedulers lists the schedulers Netloom ships. Adding one is a
// package implementing sched.Scheduler and one line in Default.
package schedulers

import (
	"github.com/netloom/netloom/internal/sched"
	"github.com/netloom/netloom/internal/sched/slurm"
)

// Default returns a new registry holding every built-in scheduler.
func Default() *sched.Registry {
	r := sched.NewRegistry()
	for _, s := range []struct {
		name string
		f    sched.Factory
	}{
		{"none", func(opts sched.Options) (sched.Scheduler, error) {
			if err := opts.Check(); err != nil {
				return nil, err
			}
			return sched.None{}, nil
		}},
		{"slurm", slurm.Factory},
	} {
		if err := r.Register(s.name, s.f); err != nil {
			panic(err) // a programming error in the list above
		}
	}
	return r
}

// New builds the scheduler a spec names from the default registry, e.g.
// "none", "slurm" or "slurm:accounting=off".
func New(spec string) (sched.Scheduler, error) { return Default().New(spec) }
