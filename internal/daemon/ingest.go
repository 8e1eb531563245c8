package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/netloom/netloom/internal/ingest"
	"github.com/netloom/netloom/internal/store"
)

// agentSide is the MPI agents' activity: a UDP reader, decode workers,
// and aggregator goroutines that each own the live state of some of the
// jobs and publish immutable views of them, merged into one.
type agentSide struct {
	l    *ingest.Listener
	m    *ingest.Metrics
	show func(*ingest.Live) // publishes the merged live view
	addr string             // what agents are told to send to
	// published is the agent address file this daemon wrote (nil: none),
	// withdrawn when it exits.
	published *addressFile
	// admit bounds new jobs per source and live jobs per user, for all
	// aggregators together.
	admit *ingest.Admission

	mu     sync.Mutex
	shards []*ingest.Live // each aggregator's last view
}

// publish makes one aggregator's view part of the merged live view, and
// publishes that (under mu, so views are published in the order made).
func (a *agentSide) publish(shard int, l *ingest.Live) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.shards) == 1 {
		a.shards[0] = l
		a.show(l)
		return
	}
	if a.shards[shard] == l {
		return // unchanged
	}
	a.shards[shard] = l
	n := 0
	for _, s := range a.shards {
		if s != nil {
			n += len(s.Jobs)
		}
	}
	merged := &ingest.Live{Jobs: make(map[string]*store.Job, n)}
	for _, s := range a.shards {
		if s == nil {
			continue
		}
		if s.Time.After(merged.Time) {
			merged.Time = s.Time
		}
		maps.Copy(merged.Jobs, s.Jobs)
	}
	a.show(merged)
}

// Jobs returns the live jobs (nil before the first datagram).
func (d *Daemon) Jobs() *ingest.Live { return d.snap().live }

// AgentAddr is the UDP address agents send to ("" when ingest is off).
func (d *Daemon) AgentAddr() string { return d.agents.addr }

// openIngest binds the agents' socket. A default address already in use is
// logged and ingest stays off; an address asked for explicitly must work.
func (d *Daemon) openIngest() error {
	addr := d.cfg.AgentListen
	if addr == "off" {
		return nil
	}
	if addr == "" {
		addr = DefaultAgentListen
	}
	authOpt, authState, err := d.agentAuth()
	if err != nil {
		return err
	}
	l, err := ingest.Listen(addr, ingest.ListenOptions{Auth: authOpt, ReadBuffer: d.cfg.AgentReadBuffer << 20}, d.agents.m)
	if err != nil {
		if d.agentDefault {
			d.log.Error("agent ingest disabled: the default agent port is unavailable; set --agent-listen", "err", err)
			return nil
		}
		return err
	}
	d.agents.l = l
	d.agents.addr = reachable(l.Addr())
	d.publish(func(p *published) { p.auth = &authState })
	lim := d.cfg.AgentLimits
	d.agents.admit = ingest.NewAdmission(ingest.AdmitOptions{SourceRate: max(lim.NewJobsPerSource, 0),
		SourceBurst: lim.NewJobsBurst, MaxJobsPerUser: max(lim.MaxJobsPerUser, 0)})
	if l.ReadBuffer() < min(4<<20, d.cfg.AgentReadBuffer<<20) {
		d.log.Warn("agent socket receive buffer is small; bursts from large jobs may be dropped (raise net.core.rmem_max)",
			"bytes", l.ReadBuffer())
	}
	if f := d.cfg.AgentAddressFile; f != "" && f != "-" {
		pub, err := writeAddressFile(f, d.agents.addr)
		if err != nil {
			d.log.Warn("could not publish the agent address", "file", f, "err", err)
		}
		d.agents.published = pub
	}
	d.log.Info("agent ingest", "udp", l.Addr().String(), "advertised", d.agents.addr, "rcvbuf", l.ReadBuffer())
	return nil
}

// reachable turns a bound address into one agents on other hosts can use.
func reachable(a *net.UDPAddr) string {
	host := a.IP.String()
	if a.IP == nil || a.IP.IsUnspecified() {
		if h, err := os.Hostname(); err == nil && h != "" {
			host = h
		} else {
			host = "127.0.0.1"
		}
	}
	return net.JoinHostPort(host, fmt.Sprint(a.Port))
}

// addressFile is an agent address file as this daemon wrote it: its
// content and the file itself (each write is a new file renamed into
// place, so another daemon's write, even of the same address, is another
// file).
type addressFile struct {
	path, content string
	file          os.FileInfo
}

// writeAddressFile publishes addr at path for agents: a new file, written
// whole, then renamed into place, so an agent never reads half of it.
func writeAddressFile(path, addr string) (*addressFile, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return nil, err
	}
	content := addr + "\n"
	_, err = f.WriteString(content)
	if err == nil {
		err = f.Chmod(0o644)
	}
	var fi os.FileInfo
	if err == nil {
		fi, err = f.Stat()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return nil, err
	}
	return &addressFile{path: path, content: content, file: fi}, nil
}

// withdrawAddressFile removes the agent address file when the daemon
// exits, so later jobs do not report to a daemon that is gone, unless
// another daemon has written it since (its content or the file itself
// differ): that daemon's address stays published.
func (d *Daemon) withdrawAddressFile() {
	a := d.agents.published
	if a == nil {
		return
	}
	b, err := os.ReadFile(a.path)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			d.log.Warn("could not read the agent address file back to remove it", "file", a.path, "err", err)
		}
		return
	}
	fi, err := os.Stat(a.path)
	if err != nil || string(b) != a.content || !os.SameFile(fi, a.file) {
		d.log.Info("agent address file left in place: another daemon has written it since", "file", a.path,
			"address", strings.TrimSpace(string(b)))
		return
	}
	if err := os.Remove(a.path); err != nil {
		d.log.Warn("could not remove the agent address file", "file", a.path, "err", err)
		return
	}
	d.log.Info("agent address file removed", "file", a.path)
}

// ingestLoop runs the reader and the aggregators until ctx ends.
func (d *Daemon) ingestLoop(ctx context.Context) error {
	l := d.agents.l
	if l == nil {
		return nil
	}
	d.endStaleJobs(ctx)
	startPprof(ctx, d)
	rejects := &rejectLog{log: d.log, last: map[string]time.Time{}, skipped: map[string]int{}}
	l.OnInvalid(rejects.note)
	queues := l.Queues()
	d.agents.shards = make([]*ingest.Live, len(queues))
	var wg sync.WaitGroup
	for i, q := range queues {
		wg.Go(func() { d.aggregate(i, len(queues), q, rejects) })
	}
	err := l.Run(ctx) // closes the queues when it ends
	wg.Wait()
	return err
}

// aggregate keeps the live state of the jobs whose datagrams come on q,
// shard of shards, until q is closed.
func (d *Daemon) aggregate(shard, shards int, q <-chan ingest.Item, rejects *rejectLog) {
	// Job saves are queued as one write per aggregator tick: every running
	// job's summary is saved every 10 s and its processes every 2 min, so
	// at eight times Stampede's load (3,200 jobs) one write each filled the
	// store's queue and saves were dropped.
	var saves []*store.Job
	flushSaves := func() {
		if len(saves) == 0 {
			return
		}
		d.enqueue(saveJobs(saves))
		saves = nil
	}
	// The limits of the whole daemon, shared among the aggregators (the
	// admission limits exactly; the others evenly, as jobs are).
	def := ingest.Options{}.WithDefaults()
	tr := ingest.NewTracker(ingest.Options{
		JobTimeout:           d.cfg.JobTimeout,
		MaxJobs:              max(d.cfg.AgentLimits.MaxJobs/shards, 1),
		Admit:                d.agents.admit,
		PastOwner:            d.pastOwner,
		Connections:          d.flows.Report,
		JobEnded:             d.flows.End,
		MaxPendingBytes:      max(def.MaxPendingBytes/shards, 1),
		ProcessRowsPerSecond: max(def.ProcessRowsPerSecond/shards, 1),
		SaveJob: func(j *store.Job) {
			j.JobSummary = d.mergeSummary(j.JobSummary)
			saves = append(saves, j)
		},
		Samples: func(s []store.ProcessSample) {
			d.enqueue(writeOp{kind: "job_samples", bytes: processSamplesBytes(s), apply: func(ctx context.Context, st store.Store) error { return st.AddProcessSamples(ctx, s) }})
		},
	}, d.agents.m)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case it, ok := <-q:
			if !ok {
				tr.Flush()
				flushSaves()
				d.agents.publish(shard, tr.Publish(time.Now()))
				return
			}
			if err := d.schedMismatch(it); err != nil {
				d.agents.m.Drop(ingest.ReasonJobMismatch)
				rejects.note(err)
				continue
			}
			if err := tr.AddItem(it); err != nil { // counted by reason in the metrics
				rejects.note(err)
			}
		case now := <-tick.C:
			tr.Tick(now)
			flushSaves()
			d.agents.publish(shard, tr.Publish(now))
		}
	}
}

// saveJobs is one store write that saves jobs.
func saveJobs(jobs []*store.Job) writeOp {
	return writeOp{kind: "jobs", bytes: jobsBytes(jobs), apply: func(ctx context.Context, st store.Store) error {
		var errs []error
		for _, j := range jobs {
			errs = append(errs, st.SaveJob(ctx, j))
		}
		return errors.Join(errs...)
	}}
}

// rejectLog logs rejected datagrams, at most one a minute per reason with
// how many like it were not logged (all are counted in the metrics). The
// errors name jobs, ranks and uids, never credentials or keys.
type rejectLog struct {
	log     *slog.Logger
	mu      sync.Mutex
	last    map[string]time.Time
	skipped map[string]int
}

func (r *rejectLog) note(err error) {
	reason := "other"
	var re *ingest.RejectError
	if errors.As(err, &re) {
		reason = re.Reason
	}
	if skipped, ok := r.due(reason); ok {
		r.log.Warn("agent datagram rejected", "reason", reason, "err", err, "similar_not_logged", skipped)
	}
}

// due says whether a reason is to be logged now (not in the last minute),
// and how many were not logged since; one not due is counted as skipped.
func (r *rejectLog) due(reason string) (int, bool) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.last[reason]; ok && now.Sub(t) < time.Minute {
		r.skipped[reason]++
		return 0, false
	}
	skipped := r.skipped[reason]
	r.last[reason], r.skipped[reason] = now, 0
	return skipped, true
}

// schedMismatch rejects a verified datagram for a job the scheduler says
// another user owns.
func (d *Daemon) schedMismatch(it ingest.Item) error {
	if !it.Verified {
		return nil
	}
	sv := d.snap().sched
	if sv == nil {
		return nil
	}
	si, ok := sv.Jobs[it.D.JobId]
	if !ok || schedOwns(si, it) {
		return nil
	}
	return &ingest.RejectError{Reason: ingest.ReasonJobMismatch,
		Detail: fmt.Sprintf("job %s rank %d: datagram of %s (uid %d); %s says the job is %s's (uid %d)",
			it.D.JobId, it.D.Rank, it.User, it.UID, sv.Name, si.User, si.UID)}
}

// endStaleJobs marks jobs a previous daemon left running as finished: their
// agents' datagrams, if they still run, reopen them.
func (d *Daemon) endStaleJobs(ctx context.Context) {
	jobs, _, err := d.st.Jobs(ctx, store.JobQuery{State: store.JobRunning})
	if err != nil {
		d.log.Warn("listing jobs left running", "err", err)
		return
	}
	for _, joined := range jobs {
		// Only this collector's part: other collectors' ranks of the job
		// (on one database) are theirs to end.
		j, err := d.st.JobPart(ctx, joined.ID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			d.log.Warn("reading a job left running", "job", joined.ID, "err", err)
			continue
		}
		if j.State != store.JobRunning {
			continue
		}
		j.State, j.EndReason, j.End = store.JobFinished, store.EndRestart, j.Updated
		job := &store.Job{JobSummary: *j}
		d.enqueue(writeOp{kind: "jobs", bytes: jobsBytes([]*store.Job{job}), apply: func(ctx context.Context, st store.Store) error { return st.SaveJob(ctx, job) }})
	}
}

// parseAgentListen checks an agent address early, for a clear error.
func parseAgentListen(addr string) error {
	if addr == "off" || addr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("agent_listen %q: %w", addr, err)
	}
	if strings.ContainsAny(host, " /") || port == "" {
		return fmt.Errorf("agent_listen %q: want HOST:PORT or off", addr)
	}
	return nil
}

// startPprof serves Go's profiler on $NETLOOM_PPROF (HOST:PORT) when set:
// an opt-in for benchmarks (bench/ingest --pprof), never on by default.
func startPprof(ctx context.Context, d *Daemon) {
	addr := os.Getenv("NETLOOM_PPROF")
	if addr == "" {
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	srv := &http.Server{Addr: addr, Handler: mux}
	context.AfterFunc(ctx, func() { srv.Close() })
	go func() {
		if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
			d.log.Warn("pprof", "err", err)
		}
	}()
	d.log.Warn("profiler listening (NETLOOM_PPROF)", "addr", addr)
}
