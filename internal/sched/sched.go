// Package sched is how Netloom learns jobs from a batch scheduler: who owns
// a job, what it is called, where it runs and when it started and ended.
//
// A scheduler is one package implementing Scheduler plus one Register call
// in package schedulers, the way a Prometheus exporter adds a collector.
// Watcher polls one Scheduler from a single goroutine and reports what
// changed between polls.
package sched

import (
	"context"
	"time"
)

// Scheduler reports the jobs a batch scheduler knows about.
type Scheduler interface {
	// Name is the registered name ("slurm", "none").
	Name() string
	// Jobs returns the pending, running and recently finished jobs.
	// "Recently" is whatever the scheduler still reports (Slurm: MinJobAge
	// seconds in squeue, longer through sacct when accounting is on).
	Jobs(ctx context.Context) ([]Job, error)
}

// State is a job's state in Netloom's own words, the same for every
// scheduler. RawState on Job keeps the scheduler's word.
type State string

// Job states.
const (
	StatePending     State = "pending"
	StateRunning     State = "running"
	StateSuspended   State = "suspended"
	StateCompleting  State = "completing" // ended, epilog still running on its nodes
	StateCompleted   State = "completed"  // ended with exit code 0
	StateFailed      State = "failed"
	StateCancelled   State = "cancelled"
	StateTimeout     State = "timeout"
	StateNodeFail    State = "node_fail"
	StatePreempted   State = "preempted"
	StateOutOfMemory State = "out_of_memory"
	StateUnknown     State = "unknown"
)

// Finished reports whether a job in state s has ended for good (its end
// time is final). Completing jobs still hold their nodes.
func (s State) Finished() bool {
	switch s {
	case StateCompleted, StateFailed, StateCancelled, StateTimeout, StateNodeFail,
		StatePreempted, StateOutOfMemory:
		return true
	}
	return false
}

// Active reports whether a job in state s holds nodes.
func (s State) Active() bool {
	return s == StateRunning || s == StateSuspended || s == StateCompleting
}

// Job is one job as the scheduler sees it.
type Job struct {
	// ID is the job id as the job's processes see it (Slurm: SLURM_JOB_ID,
	// also for array tasks), the key agents report under.
	ID string `json:"id"`
	// ArrayID is "ARRAYJOB_TASK" for an array task, else "".
	ArrayID string `json:"array_id,omitempty"`
	Name    string `json:"name"`
	User    string `json:"user"` // login name; "" when the scheduler gave none and the uid has no name here
	UID     uint32 `json:"uid"`
	// UIDKnown is false when the scheduler reported only a user name that
	// does not resolve on this host.
	UIDKnown  bool   `json:"uid_known"`
	Partition string `json:"partition,omitempty"`
	State     State  `json:"state"`
	RawState  string `json:"raw_state"` // the scheduler's own word, e.g. "NODE_FAIL"
	// Nodes is the expanded node list, in the scheduler's order; empty
	// while pending.
	Nodes []string `json:"nodes"`
	CPUs  int      `json:"cpus,omitempty"`
	// Submit, Start and End are zero when unknown. Start is set once the
	// job has started; End only once State is Finished or completing.
	Submit time.Time `json:"submit,omitzero"`
	Start  time.Time `json:"start,omitzero"`
	End    time.Time `json:"end,omitzero"`
	// ExitCode is the job's exit status as the scheduler reports it.
	ExitCode int `json:"exit_code"`
	// Source names what reported the job ("squeue", "sacct").
	Source string `json:"source,omitempty"`
}

// Equal reports whether two reports of a job carry the same information.
func (j Job) Equal(k Job) bool {
	if j.ID != k.ID || j.ArrayID != k.ArrayID || j.Name != k.Name || j.User != k.User ||
		j.UID != k.UID || j.UIDKnown != k.UIDKnown || j.Partition != k.Partition ||
		j.State != k.State || j.RawState != k.RawState || j.CPUs != k.CPUs ||
		!j.Submit.Equal(k.Submit) || !j.Start.Equal(k.Start) || !j.End.Equal(k.End) ||
		j.ExitCode != k.ExitCode || len(j.Nodes) != len(k.Nodes) {
		return false
	}
	for i := range j.Nodes {
		if j.Nodes[i] != k.Nodes[i] {
			return false
		}
	}
	return true
}

// None is the scheduler of a cluster without one: it never reports a job,
// so jobs are known only from agent data.
type None struct{}

// Name returns "none".
func (None) Name() string { return "none" }

// Jobs returns no jobs.
func (None) Jobs(context.Context) ([]Job, error) { return nil, nil }
