package ingest

import (
	"fmt"
	"time"

	"github.com/netloom/netloom/internal/store"
)

// A job's lifecycle: finished (every rank final, or timed out), lingering
// in the live view, forgotten; Tick drives it.

func (t *Tracker) finish(j *jobState, reason string, now time.Time) {
	j.finished, j.endReason, j.finishedAt, j.dirty = true, reason, now, true
	// The job ended with its last snapshot, by the agents' clocks.
	j.end = time.Time{}
	for rank, r := range j.ranks {
		if r.pend != nil {
			t.abandon(rankKey{j.id, rank}, r, ReasonIncomplete)
		}
		if r.has && r.cur.Time.After(j.end) {
			j.end = r.cur.Time
		}
	}
	if j.end.IsZero() {
		j.end = now
	}
	if t.opt.JobEnded != nil {
		t.opt.JobEnded(j.id, j.end)
	}
	t.save(j, true)
	j.saved = true
}

func (t *Tracker) dropJob(j *jobState) {
	for rank, r := range j.ranks {
		if r.pend != nil {
			t.abandon(rankKey{j.id, rank}, r, ReasonIncomplete)
		}
	}
	t.forget(j)
	if t.live.Jobs[j.id] != nil {
		t.publishAll()
	}
}

// forget removes a job from the live table.
func (t *Tracker) forget(j *jobState) {
	delete(t.jobs, j.id)
	t.opt.Admit.release(j.owner)
}

// Tick times out reassembly and jobs, saves running jobs on their
// schedule and flushes samples. Call it about once a second.
func (t *Tracker) Tick(now time.Time) {
	for key := range t.pending {
		j := t.jobs[key.job]
		if j == nil {
			delete(t.pending, key)
			continue
		}
		r := j.ranks[key.rank]
		if r == nil || r.pend == nil {
			delete(t.pending, key)
			continue
		}
		if now.Sub(r.pend.first) > t.opt.ReassemblyTimeout {
			t.abandon(key, r, ReasonIncomplete)
		}
	}
	t.ranks = 0
	for _, j := range t.jobs {
		t.ranks += len(j.ranks)
	}
	period := t.processSavePeriod()
	for _, j := range t.jobs {
		switch {
		case !j.finished && now.Sub(j.lastSeen) > t.jobTimeout(j):
			t.finish(j, store.EndTimeout, now)
		case j.finished && now.Sub(j.finishedAt) > t.opt.Linger && now.Sub(j.lastSeen) > t.opt.Linger:
			t.forget(j)
			t.publishAll()
		case !j.finished && j.unsaved > 0 && now.Sub(j.lastSave) >= t.opt.SaveEvery:
			procs := now.Sub(j.procsSaved) >= period
			t.save(j, procs)
			j.lastSave = now
			if procs {
				j.procsSaved = now
			}
		}
	}
	t.flushSamples()
}

// processSavePeriod is how often a running job's processes are saved:
// ProcessSaveEvery, or longer so that the ranks tracked at the last tick
// are stored at ProcessRowsPerSecond.
func (t *Tracker) processSavePeriod() time.Duration {
	return max(t.opt.ProcessSaveEvery, time.Duration(t.ranks)*time.Second/time.Duration(t.opt.ProcessRowsPerSecond))
}

func (t *Tracker) jobTimeout(j *jobState) time.Duration {
	d := time.Duration(t.opt.JobTimeoutIntervals) * j.interval
	if d < t.opt.JobTimeout {
		d = t.opt.JobTimeout
	}
	return d
}

// pastOwner is a stored job's owner, as PastOwner said until then.
type pastOwner struct {
	owner string
	until time.Time
}

// How long an answer of PastOwner that refused a datagram is kept, and
// for how many job ids at most.
const (
	pastOwnerFor = time.Minute
	maxPastOwner = 4096
)

// history checks a datagram that would start a job under its id against
// the job's stored history (Options.PastOwner): a job id once a user's
// stays theirs. A history that names no user belongs to no one.
func (t *Tracker) history(d *Datagram, user string, now time.Time) error {
	if t.opt.PastOwner == nil {
		return nil
	}
	po, ok := t.pastOwners[d.JobId]
	if !ok || now.After(po.until) {
		owner, err := t.opt.PastOwner(d.JobId)
		if err != nil {
			return reject(ReasonJobMismatch, "job %s rank %d: the owner of its stored history is unknown: %v", d.JobId, d.Rank, err)
		}
		po = pastOwner{owner: owner, until: now.Add(pastOwnerFor)}
	}
	if po.owner == "" || po.owner == user {
		return nil
	}
	if t.pastOwners == nil || len(t.pastOwners) >= maxPastOwner {
		t.pastOwners = map[string]pastOwner{}
	}
	t.pastOwners[d.JobId] = po
	claim := fmt.Sprintf("user %q", user)
	if user == "" {
		claim = "no user"
	}
	return reject(ReasonJobMismatch, "job %s rank %d: datagram of %s; the job's stored history is %q's, and a job id never changes owner",
		d.JobId, d.Rank, claim, po.owner)
}
