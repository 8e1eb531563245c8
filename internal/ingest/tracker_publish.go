package ingest

import (
	"slices"
	"time"

	"github.com/netloom/netloom/internal/store"
)

// Publishing: each job's immutable view, rebuilt when it changed and
// handed to readers (Publish) and to the store (save, Flush).

// Live is an immutable view of the tracked jobs.
type Live struct {
	Time time.Time
	Jobs map[string]*store.Job
}

// viewChunks returns the chunks of references to procs for a new view:
// the last view's where unchanged, else new copies, and brings chunkSums
// up to date with them.
func (j *jobState) viewChunks() [][]*store.Process {
	chunks := make([][]*store.Process, (len(j.procs)+viewChunk-1)/viewChunk)
	sums := make([]chunkSum, len(chunks))
	for c := range chunks {
		lo, hi := c*viewChunk, min((c+1)*viewChunk, len(j.procs))
		if c < len(j.chunks) && (c/64 >= len(j.changed) || j.changed[c/64]&(1<<(c%64)) == 0) {
			chunks[c], sums[c] = j.chunks[c], j.chunkSums[c]
		} else {
			chunks[c], sums[c] = slices.Clone(j.procs[lo:hi]), sumChunk(j.sums[lo:hi])
		}
	}
	j.chunks, j.chunkSums = chunks, sums
	clear(j.changed)
	return chunks
}

// Flush saves every job with unsaved changes and flushes samples (at
// shutdown, and at the end of an offline report).
func (t *Tracker) Flush() {
	for _, j := range t.jobs {
		if j.unsaved > 0 || (j.finished && !j.saved) {
			t.save(j, true)
		}
	}
	t.flushSamples()
}

// save hands the job's summary to SaveJob, with its changed processes
// when procs is set.
func (t *Tracker) save(j *jobState, procs bool) {
	// Samples first, so a stored job's series is complete up to it.
	t.flushSamples()
	if t.opt.SaveJob == nil {
		j.allSaved()
		return
	}
	out := &store.Job{JobSummary: t.view(j).JobSummary}
	if procs {
		j.rebuildLists()
		out.Processes = make([]store.Process, 0, j.unsaved)
		for _, rank := range j.order {
			if r := j.ranks[rank]; r.gen == j.gen {
				out.Processes = append(out.Processes, *r.cur)
			}
		}
		j.allSaved()
	}
	t.opt.SaveJob(out)
}

// rebuildLists makes the job's lists of reporting ranks when they are
// missing: the ranks with a snapshot in order, with their processes and
// what they add to the summary, which apply keeps up to date (a rank's
// first snapshot inserts it) until a rank restarts (rare).
func (j *jobState) rebuildLists() {
	if j.order != nil {
		return
	}
	j.order = make([]int, 0, len(j.ranks))
	for rank, r := range j.ranks {
		if r.has {
			j.order = append(j.order, rank)
		}
	}
	slices.Sort(j.order)
	j.procs, j.sums = make([]*store.Process, len(j.order)), make([]rankSum, len(j.order))
	j.nodeRanks, j.nodesUsed = nil, 0
	for i, rank := range j.order {
		r := j.ranks[rank]
		node := j.nodeIndex(r.cur.Node)
		r.pos, j.procs[i], j.sums[i] = i, r.cur, sumOf(r.cur, r.sent, node)
		j.countNode(node, 1)
	}
	j.chunks, j.chunkSums = nil, nil
}

// allSaved marks every rank of the job saved.
func (j *jobState) allSaved() {
	j.gen++
	j.unsaved = 0
}

// view returns the job's immutable view, rebuilding it when it changed.
func (t *Tracker) view(j *jobState) *store.Job {
	if j.view != nil && !j.dirty {
		return j.view
	}
	v := &store.Job{JobSummary: store.JobSummary{ID: j.id, State: store.JobRunning, Start: j.start, Ranks: j.world}}
	if j.finished {
		v.State, v.EndReason, v.End = store.JobFinished, j.endReason, j.end
	}
	j.rebuildLists()
	v = store.NewLiveJob(v.JobSummary, j.viewChunks())
	v.TraceDir = j.traceDir
	summarizeChunks(&v.JobSummary, j.chunkSums, j.procs, j.nodesUsed)
	if j.owner != "" {
		v.User = j.owner
	}
	j.view, j.dirty = v, false
	j.shown = append(j.shown, j.waiting...)
	j.waiting = j.waiting[:0]
	return v
}

// Publish returns the current immutable view of all live jobs. Views of
// jobs that did not change are reused.
func (t *Tracker) Publish(now time.Time) *Live {
	changed := false
	for id, j := range t.jobs {
		// A view rebuilt by a save is newer than the published one too.
		if (j.dirty && !t.throttled(j, now)) || j.view == nil || t.live.Jobs[id] != j.view {
			changed = true
			break
		}
	}
	if changed || len(t.live.Jobs) != len(t.jobs) {
		t.publish(now)
		t.live.Time = now // not yet seen by anyone
	}
	running := 0
	for _, j := range t.jobs {
		if !j.finished {
			running++
		}
	}
	finished := len(t.jobs) - running
	t.m.addJobs(running-t.running, finished-t.finished)
	t.running, t.finished = running, finished
	return t.live
}

// throttled says whether a large, running job's changed view waits for
// its next rebuild (ViewEvery after the last). A tenth of ViewEvery is
// slack for late ticks: a tick that came a hair under ViewEvery after the
// last rebuild would make the view wait a whole further period.
func (t *Tracker) throttled(j *jobState, now time.Time) bool {
	return j.view != nil && !j.finished && len(j.ranks) >= t.opt.LargeJob && now.Sub(j.viewAt) < t.opt.ViewEvery-t.opt.ViewEvery/10
}

// publish rebuilds the views that changed, except throttled ones, which
// keep their last view until their time comes.
func (t *Tracker) publish(now time.Time) {
	l := &Live{Time: t.live.Time, Jobs: make(map[string]*store.Job, len(t.jobs))}
	for id, j := range t.jobs {
		if len(j.ranks) == 0 || !j.anyRank() {
			continue
		}
		if j.dirty && t.throttled(j, now) {
			l.Jobs[id] = j.view
			continue
		}
		if j.dirty || j.view == nil {
			j.viewAt = now
		}
		l.Jobs[id] = t.view(j)
	}
	t.live = l
	t.observeShown()
}

// observeShown counts the snapshots that the published views show for the
// first time.
func (t *Tracker) observeShown() {
	if t.m == nil {
		return
	}
	now := time.Now()
	for id, j := range t.jobs {
		if len(j.shown) > 0 && t.live.Jobs[id] == j.view {
			t.m.visible(now, j.shown)
			j.shown = j.shown[:0]
		}
	}
}

// publishAll rebuilds every changed view.
func (t *Tracker) publishAll() {
	l := &Live{Time: t.live.Time, Jobs: make(map[string]*store.Job, len(t.jobs))}
	for id, j := range t.jobs {
		if len(j.ranks) == 0 || !j.anyRank() {
			continue
		}
		l.Jobs[id] = t.view(j)
	}
	t.live = l
	t.observeShown()
}
