package ingest

import (
	"net/netip"
	"sync"
	"time"
)

// AdmitOptions bound who may start new jobs, so that one sender or one
// user cannot fill the live-job table (MaxJobs) and have everyone else's
// new jobs refused. A refused job is not lost: its ranks send again at
// their next snapshot, with cumulative counters, and the job starts then.
type AdmitOptions struct {
	// SourceRate is how many new jobs a second one source address may
	// start on average, SourceBurst how many at once (a token bucket per
	// address). SourceRate 0 means no limit.
	SourceRate  float64
	SourceBurst int
	// MaxSources bounds the addresses remembered (default 65536). Past it
	// (only spoofed floods get there: a full bucket is forgotten, and no
	// cluster has that many nodes starting jobs at once) the other
	// addresses share one bucket.
	MaxSources int
	// MaxJobsPerUser bounds the live jobs (running, or finished and still
	// shown) of one user, as verified or, without authentication, as
	// claimed ("" for a job whose user is not known yet). 0: no limit.
	MaxJobsPerUser int
}

// Admission applies AdmitOptions for all of a daemon's trackers at once
// (they share the limits, whatever aggregator a job's datagrams go to).
// New jobs are rare next to datagrams, so one mutex is cheap.
type Admission struct {
	opt      AdmitOptions
	mu       sync.Mutex
	sources  map[netip.Addr]*bucket
	overflow bucket
	users    map[string]int
	swept    time.Time
}

type bucket struct {
	tokens float64
	at     time.Time
}

// NewAdmission makes the shared admission state.
func NewAdmission(opt AdmitOptions) *Admission {
	if opt.MaxSources <= 0 {
		opt.MaxSources = 1 << 16
	}
	if opt.SourceBurst < 1 {
		opt.SourceBurst = 1
	}
	return &Admission{opt: opt, sources: map[netip.Addr]*bucket{}, users: map[string]int{}}
}

// admitSweepEvery is how often full buckets (no different from none) are
// forgotten.
const admitSweepEvery = 10 * time.Second

// admit says whether a new job of user, whose first datagram came from
// from (invalid: not from the network, e.g. an offline report), may start,
// and counts it for user when it may. The user limit is checked first, so
// a refused job takes no token from its sender.
func (a *Admission) admit(job string, from netip.Addr, user string, now time.Time) *RejectError {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if n := a.users[user]; a.opt.MaxJobsPerUser > 0 && n >= a.opt.MaxJobsPerUser {
		return reject(ReasonUserJobs, "job %s: user %q has %d live jobs already (max_jobs_per_user)", job, user, n)
	}
	if a.opt.SourceRate > 0 && from.IsValid() {
		if b := a.bucket(from, now); !b.take(now, a.opt.SourceRate, float64(a.opt.SourceBurst)) {
			return reject(ReasonNewJobRate, "job %s: %s starts new jobs faster than %g a second (burst %d; new_jobs_per_source)",
				job, from, a.opt.SourceRate, a.opt.SourceBurst)
		}
	}
	a.users[user]++
	return nil
}

// bucket is from's bucket (called with mu held).
func (a *Admission) bucket(from netip.Addr, now time.Time) *bucket {
	if now.Sub(a.swept) >= admitSweepEvery {
		a.swept = now
		for addr, b := range a.sources {
			if b.level(now, a.opt.SourceRate, float64(a.opt.SourceBurst)) >= float64(a.opt.SourceBurst) {
				delete(a.sources, addr)
			}
		}
	}
	b := a.sources[from]
	if b == nil {
		if len(a.sources) >= a.opt.MaxSources {
			return &a.overflow
		}
		b = &bucket{tokens: float64(a.opt.SourceBurst), at: now}
		a.sources[from] = b
	}
	return b
}

// level is how many tokens the bucket holds at now.
func (b *bucket) level(now time.Time, rate, burst float64) float64 {
	if b.at.IsZero() {
		return burst
	}
	return min(burst, b.tokens+max(now.Sub(b.at).Seconds(), 0)*rate)
}

func (b *bucket) take(now time.Time, rate, burst float64) bool {
	b.tokens, b.at = b.level(now, rate, burst), now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// release forgets a job of user that left the live table.
func (a *Admission) release(user string) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.users[user] <= 1 {
		delete(a.users, user)
	} else {
		a.users[user]--
	}
}

// transfer moves a job counted for no user yet to the user its agents
// named later (a snapshot's chunk 0 carries the user and may come after
// another chunk). It is not refused: the job is live already.
func (a *Admission) transfer(from, to string) {
	if a == nil || from == to {
		return
	}
	a.release(from)
	a.mu.Lock()
	a.users[to]++
	a.mu.Unlock()
}

// UserJobs is how many live jobs are counted for user (for tests).
func (a *Admission) UserJobs(user string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.users[user]
}
