// Command ingest benchmarks the daemon under a whole system's load, in one
// run per system size: `netloom serve --fabric sim:SYSTEM` sweeps the
// simulated fabric's switch ports while `netloom loadgen --system SYSTEM`
// sends every process's agent datagrams, both on this machine. It prints
// records offered and stored per second, drops by reason, arrival-to-
// queryable latency (p50/p99), the daemon's CPU and RSS, database bytes per
// sample, and API latency under load, and compares with the scalable-INAM
// paper's figure (a quarter million inserts per 45 s). --db runs each
// system once per store engine: sqlite (the default), postgres (a private
// PostgreSQL 15 that test/postgres starts, a fresh database per run) or a
// postgres:// URL of an empty database; it then also prints the disk taken
// per port sample and per process sample, tables and indexes.
//
//	go run ./bench/ingest --systems stampede,10x-stampede --duration 3m
//	go run -tags sqlite_dbstat ./bench/ingest --systems 10x-stampede --duration 1m --db sqlite,postgres
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	pgserver "github.com/netloom/netloom/test/postgres"
)

func main() {
	systems := flag.String("systems", "stampede,10x-stampede", "comma-separated sim systems")
	duration := flag.Duration("duration", 3*time.Minute, "load per system")
	bin := flag.String("netloom", "bin/netloom", "netloom binary")
	flag.IntVar(&copies, "copies", 1, "run this many load generators (seeds 1..N): N times the processes and snapshots of SYSTEM, on its one fabric")
	flag.StringVar(&loadgenBin, "loadgen", "", "netloom binary whose loadgen sends the load (default: --netloom), to compare daemons under one generator")
	interval := flag.Duration("interval", 45*time.Second, "agent snapshot interval (the paper's 45 s)")
	sweep := flag.Duration("sweep-interval", 30*time.Second, "switch port sweep interval (the paper's 30 s)")
	flag.StringVar(&serveArgs, "serve-args", "", "extra space-separated flags for netloom serve, e.g. \"--agent-read-buffer 256\"")
	flag.StringVar(&pprofDir, "pprof", "", "write the daemon's CPU (30 s, from a third into the load) and heap profiles to DIR")
	dbs := flag.String("db", "sqlite", "comma-separated store engines to run each system on: sqlite, postgres (a private server) or a postgres:// URL")
	flag.Parse()
	engines := strings.Split(*dbs, ",")
	if slices.Contains(engines, "postgres") {
		srv, err := pgserver.Start(context.Background(), pgserver.Options{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench/ingest:", err)
			os.Exit(1)
		}
		defer srv.Stop()
		pgServer = srv
	}
	fmt.Println("paper baseline (scalable INAM, Stampede): 27,504 ports / 30 s + 104,656 processes / 45 s, about 250,000 inserts per 45 s")
	for _, s := range strings.Split(*systems, ",") {
		for _, e := range engines {
			if err := run(s, e, *bin, *duration, *interval, *sweep); err != nil {
				fmt.Fprintln(os.Stderr, "bench/ingest:", s, "on", e+":", err)
				if pgServer != nil {
					pgServer.Stop()
				}
				os.Exit(1)
			}
		}
	}
}

// pgServer is the private PostgreSQL server of --db postgres.
var pgServer *pgserver.Server

// storeURL is the --db of a run on engine: a file in dir, a fresh
// database on the private server, or the URL given.
func storeURL(engine, system, dir string) (string, error) {
	switch {
	case engine == "sqlite":
		return filepath.Join(dir, "netloom.db"), nil
	case engine == "postgres":
		pgRuns++
		return pgServer.CreateDB(context.Background(), fmt.Sprintf("bench_%d_%s", pgRuns, strings.ReplaceAll(system, "-", "_")))
	case strings.HasPrefix(engine, "postgres://"), strings.HasPrefix(engine, "postgresql://"):
		return engine, nil
	}
	return "", fmt.Errorf("--db %q: want sqlite, postgres or a postgres:// URL", engine)
}

var pgRuns int

var (
	pprofDir, loadgenBin, serveArgs string
	copies                          int
)

// profile fetches the daemon's profiles (served on pprofAddr through
// NETLOOM_PPROF) into pprofDir.
func profile(system, pprofAddr string, delay time.Duration) {
	time.Sleep(delay)
	get := func(path, file string) {
		resp, err := http.Get("http://" + pprofAddr + path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "pprof:", err)
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(filepath.Join(pprofDir, system+"-"+file))
		if err != nil {
			fmt.Fprintln(os.Stderr, "pprof:", err)
			return
		}
		defer f.Close()
		_, _ = io.Copy(f, resp.Body)
	}
	get("/debug/pprof/profile?seconds=30", "cpu.prof")
	get("/debug/pprof/heap", "heap.prof")
}

func freePort(network string) string {
	if network == "udp" {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		defer c.Close()
		return c.LocalAddr().String()
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func run(system, engine, bin string, duration, interval, sweep time.Duration) error {
	dir, err := os.MkdirTemp("", "netloom-bench-ingest-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	httpAddr, agentAddr := freePort("tcp"), freePort("udp")
	db, err := storeURL(engine, system, dir)
	if err != nil {
		return err
	}
	// The load generator sends every job from one address and as one user,
	// thousands at once: the limits on new jobs per source and live jobs
	// per user, meant for a real cluster's nodes and users, are off.
	cfg := filepath.Join(dir, "netloom.yaml")
	if err := os.WriteFile(cfg, []byte("agent_limits:\n  max_jobs_per_user: -1\n  new_jobs_per_source: -1\n"), 0o644); err != nil {
		return err
	}
	serve := exec.Command(bin, "serve", "--config", cfg, "--fabric", "sim:"+system, "--db", db, "--listen", httpAddr,
		"--agent-listen", agentAddr, "--agent-address-file", "-", "--sweep-interval", sweep.String(), "--log-level", "warn",
		// The load generator's ranks carry no MUNGE credentials, and the
		// API probes sign in as nobody.
		"--agent-auth", "none", "--anonymous", "admin")
	serve.Args = append(serve.Args, strings.Fields(serveArgs)...)
	pprofAddr := ""
	if pprofDir != "" {
		pprofAddr = freePort("tcp")
		_ = os.MkdirAll(pprofDir, 0o755)
		serve.Env = append(os.Environ(), "NETLOOM_PPROF="+pprofAddr)
	}
	logf, _ := os.Create(filepath.Join(dir, "serve.log"))
	serve.Stdout, serve.Stderr = logf, logf
	if err := serve.Start(); err != nil {
		return err
	}
	defer func() {
		if serve.ProcessState == nil {
			_ = serve.Process.Kill()
			_ = serve.Wait()
		}
	}()
	if pprofDir != "" {
		defer func() {
			b, _ := os.ReadFile(filepath.Join(dir, "serve.log"))
			_ = os.WriteFile(filepath.Join(pprofDir, system+"-serve.log"), b, 0o644)
		}()
	}
	base := "http://" + httpAddr
	if err := waitUp(base, 2*time.Minute); err != nil {
		return fmt.Errorf("daemon: %w (log %s)", err, tail(filepath.Join(dir, "serve.log")))
	}
	name := engine
	if strings.Contains(engine, "://") {
		name = "postgres" // not the URL: it may hold a password
	}
	fmt.Printf("\n== %s on %s: %s of load\n", system, name, duration)

	ctx, cancel := context.WithTimeout(context.Background(), duration+5*time.Minute)
	defer cancel()
	lgBin := bin
	if loadgenBin != "" {
		lgBin = loadgenBin
	}
	lgOut := make([]bytes.Buffer, max(copies, 1))
	var lgs []*exec.Cmd
	for i := range lgOut {
		lg := exec.CommandContext(ctx, lgBin, "loadgen", "--system", system, "--target", agentAddr,
			"--duration", duration.String(), "--interval", interval.String(), "--seed", strconv.Itoa(i+1), "--json")
		lg.Stdout, lg.Stderr = &lgOut[i], os.Stderr
		lgs = append(lgs, lg)
	}
	startCPU := cpuSeconds(serve.Process.Pid)
	start := time.Now()
	for _, lg := range lgs {
		if err := lg.Start(); err != nil {
			return err
		}
	}
	done := make(chan error, 1)
	go func() {
		var first error
		for _, lg := range lgs {
			if err := lg.Wait(); err != nil && first == nil {
				first = err
			}
		}
		done <- first
	}()
	if pprofAddr != "" {
		go profile(system, pprofAddr, duration/3)
	}

	var lat, apiJobs, apiLink []float64
	var maxRSS int64
	seen := map[string]time.Time{}
	link := firstLink(base)
	poll := time.NewTicker(200 * time.Millisecond)
	defer poll.Stop()
	var lgErr error
	// Every 10 s: the kernel's drops so far, and since the last line the
	// daemon's CPU and the arrival-to-queryable p99, to tell a slow start
	// or a periodic stall from a steady shortfall.
	progress := time.NewTicker(10 * time.Second)
	defer progress.Stop()
	lastCPU, lastAt := startCPU, start
	var lastVis hist
loop:
	for {
		select {
		case lgErr = <-done:
			break loop
		case now := <-progress.C:
			cpu := cpuSeconds(serve.Process.Pid)
			kernel, _ := socketDrops(agentAddr)
			vis := histogram(scrape(base), "netloom_ingest_visible_delay_seconds", "from", "snapshot")
			win := vis.since(lastVis)
			fmt.Printf("bench: %3.0fs: kernel drops %d, daemon CPU %.0f%%, p99 %.2fs (%.2f%% over 2 s) of %.0f snapshots\n",
				now.Sub(start).Seconds(), kernel, 100*(cpu-lastCPU)/now.Sub(lastAt).Seconds(), win.quantile(0.99), 100*win.over(2), win.count())
			lastCPU, lastAt, lastVis = cpu, now, vis
			continue
		case <-poll.C:
		}
		maxRSS = max(maxRSS, rssBytes(serve.Process.Pid))
		// Arrival to queryable: when a job's newest snapshot time advances,
		// how long ago was that snapshot sent.
		t0 := time.Now()
		var jobs struct {
			Jobs []struct {
				ID      string    `json:"id"`
				Updated time.Time `json:"updated"`
			} `json:"jobs"`
		}
		if getJSON(base+"/api/v1/jobs?state=running&sort=updated&order=desc&limit=20", &jobs) == nil {
			apiJobs = append(apiJobs, time.Since(t0).Seconds())
			for _, j := range jobs.Jobs {
				if prev, ok := seen[j.ID]; ok && j.Updated.After(prev) {
					lat = append(lat, time.Since(j.Updated).Seconds())
				}
				seen[j.ID] = j.Updated
			}
		}
		if link != "" {
			t1 := time.Now()
			if getJSON(base+"/api/v1/links/"+link+"/counters?from=-1h&counters=xmit_data_bytes", nil) == nil {
				apiLink = append(apiLink, time.Since(t1).Seconds())
			}
		}
	}
	if lgErr != nil {
		return fmt.Errorf("loadgen: %w", lgErr)
	}
	time.Sleep(3 * time.Second) // let the daemon drain its queues
	elapsed := time.Since(start).Seconds()
	cpu := cpuSeconds(serve.Process.Pid) - startCPU

	var rep struct {
		Processes     int     `json:"processes"`
		DatagramsSent uint64  `json:"datagrams_sent"`
		Snapshots     uint64  `json:"snapshots"`
		Seconds       float64 `json:"seconds"`
	}
	for i := range lgOut {
		var r struct {
			Processes     int     `json:"processes"`
			DatagramsSent uint64  `json:"datagrams_sent"`
			Snapshots     uint64  `json:"snapshots"`
			Seconds       float64 `json:"seconds"`
		}
		if err := json.Unmarshal(lgOut[i].Bytes(), &r); err != nil {
			return fmt.Errorf("loadgen report: %w: %s", err, lgOut[i].String())
		}
		rep.Processes += r.Processes
		rep.DatagramsSent += r.DatagramsSent
		rep.Snapshots += r.Snapshots
		rep.Seconds = max(rep.Seconds, r.Seconds)
	}
	fams := scrape(base)
	m := metrics(fams)
	var status struct {
		Store map[string]int64 `json:"store"`
		Sweep struct {
			Ports int     `json:"ports"`
			Count int64   `json:"count"`
			Secs  float64 `json:"seconds"`
		} `json:"sweep"`
	}
	_ = getJSON(base+"/api/v1/status", &status)

	received := m["netloom_ingest_datagrams_received_total"]
	accepted := m["netloom_ingest_datagrams_accepted_total"]
	snapshots := m["netloom_ingest_snapshots_total"]
	portSamples := float64(status.Store["port_samples"])
	offered := float64(rep.Snapshots)/rep.Seconds + float64(status.Sweep.Ports)/sweep.Seconds()
	stored := snapshots/rep.Seconds + float64(status.Sweep.Ports)/sweep.Seconds()
	// Stampede: 104,656 processes every 45 s.
	fmt.Printf("processes %d, switch ports %d; process snapshots at %.2fx Stampede's rate (104,656 every 45 s)\n",
		rep.Processes, status.Sweep.Ports, float64(rep.Snapshots)/rep.Seconds/(104656/45.0))
	fmt.Printf("offered: %.0f datagrams/s, %.0f process snapshots/s + %.0f port samples/s = %.0f records/s (%.0f per 45 s: %.2fx the paper's load)\n",
		float64(rep.DatagramsSent)/rep.Seconds, float64(rep.Snapshots)/rep.Seconds, float64(status.Sweep.Ports)/sweep.Seconds(),
		offered, offered*45, offered*45/250000)
	fmt.Printf("daemon: received %.0f, accepted %.0f datagrams (%.4f%% lost before the daemon), %.0f snapshots => %.0f records/s stored\n",
		received, accepted, 100*(1-received/float64(rep.DatagramsSent)), snapshots, stored)
	if n, ok := socketDrops(agentAddr); ok {
		fmt.Printf("kernel drops on the daemon's socket (receive buffer full): %d\n", n)
	}
	fmt.Printf("drops by reason:%s\n", drops(m))
	// Every snapshot: from its time stamp (the load generator's clock,
	// this machine's) and from the daemon's receipt of it to the first
	// published live view showing it, which the API serves from then on.
	// The poll sees only each job's newest snapshot, after up to 200 ms.
	hs := histogram(fams, "netloom_ingest_visible_delay_seconds", "from", "snapshot")
	hr := histogram(fams, "netloom_ingest_visible_delay_seconds", "from", "received")
	fmt.Printf("arrival to queryable, every snapshot (time stamp to the first live view showing it): p50 %.3fs p99 %.3fs, %.3f%% over 2 s (n=%.0f)\n",
		hs.quantile(0.5), hs.quantile(0.99), 100*hs.over(2), hs.count())
	fmt.Printf("  from the daemon's receipt: p50 %.3fs p99 %.3fs, %.3f%% over 2 s; as polled from the API (each job's newest snapshot): p50 %.3fs p99 %.3fs (n=%d)\n",
		hr.quantile(0.5), hr.quantile(0.99), 100*hr.over(2), pct(lat, 50), pct(lat, 99), len(lat))
	fmt.Printf("API under load: jobs page p50 %.0f ms p99 %.0f ms; link history p50 %.0f ms p99 %.0f ms\n",
		1e3*pct(apiJobs, 50), 1e3*pct(apiJobs, 99), 1e3*pct(apiLink, 50), 1e3*pct(apiLink, 99))
	fmt.Printf("daemon CPU %.0f%% of one core, max RSS %.0f MiB; last sweep %.3fs\n", 100*cpu/elapsed, float64(maxRSS)/(1<<20), status.Sweep.Secs)
	// The store counts port samples; every accepted snapshot after a
	// rank's first is one process sample (and a job's process rows).
	if n := portSamples + snapshots; n > 0 {
		fmt.Printf("store: %.1f MB for %.0f port samples + %.0f process snapshots = %.1f bytes per record\n",
			float64(status.Store["bytes"])/1e6, portSamples, snapshots, float64(status.Store["bytes"])/n)
	}
	// Stopped, so that the tables are read as the daemon left them.
	_ = serve.Process.Kill()
	_ = serve.Wait()
	sizes, err := tableSizes(db)
	if err != nil {
		fmt.Printf("store by table: %v\n", err)
		return nil
	}
	per := func(table string) string {
		if sizes.rows[table] == 0 {
			return "none stored"
		}
		return fmt.Sprintf("%.1f bytes (%.1f MB / %d)", float64(sizes.bytes[table])/float64(sizes.rows[table]), float64(sizes.bytes[table])/1e6, sizes.rows[table])
	}
	fmt.Printf("store by table, indexes included: per port sample %s; per process sample %s; per process row (latest counters of a rank) %s; per link attribution row %s\n",
		per("port_samples"), per("job_samples"), per("job_processes"), per("link_job_samples"))
	return nil
}

func waitUp(base string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		var st struct {
			Sweep struct{ Count int } `json:"sweep"`
		}
		if getJSON(base+"/api/v1/status", &st) == nil && st.Sweep.Count > 0 {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("not up after %s", timeout)
}

func getJSON(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: %d", url, resp.StatusCode)
	}
	if v == nil {
		return nil
	}
	return json.Unmarshal(b, v)
}

func firstLink(base string) string {
	var links struct {
		Links []struct {
			ID string `json:"id"`
		} `json:"links"`
	}
	if getJSON(base+"/api/v1/fabric/links", &links) != nil || len(links.Links) == 0 {
		return ""
	}
	return links.Links[len(links.Links)/2].ID
}

// scrape reads the daemon's /metrics with Prometheus' own text parser
// (nil when it cannot).
func scrape(base string) map[string]*dto.MetricFamily {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, _ := p.TextToMetricFamilies(resp.Body)
	return fams
}

// metrics sums each netloom metric (not the per-port ones) over its
// labels; drops are also kept per reason, as NAME{reason="..."}.
func metrics(fams map[string]*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for name, f := range fams {
		if !strings.HasPrefix(name, "netloom_") || strings.HasPrefix(name, "netloom_port_") {
			continue
		}
		for _, m := range f.GetMetric() {
			var v float64
			switch {
			case m.Counter != nil:
				v = m.GetCounter().GetValue()
			case m.Gauge != nil:
				v = m.GetGauge().GetValue()
			case m.Untyped != nil:
				v = m.GetUntyped().GetValue()
			default:
				continue
			}
			out[name] += v
			if strings.HasSuffix(name, "_dropped_total") && v > 0 {
				var labels []string
				for _, l := range m.GetLabel() {
					labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
				out[name+"{"+strings.Join(labels, ",")+"}"] = v
			}
		}
	}
	return out
}

func drops(m map[string]float64) string {
	var out []string
	for k, v := range m {
		if strings.Contains(k, "_dropped_total{") {
			out = append(out, fmt.Sprintf(" %s=%.0f", k, v))
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return " none"
	}
	return strings.Join(out, "")
}

func pct(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[min(len(s)-1, int(float64(len(s))*p/100))]
}

func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

func rssBytes(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			kb, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// hist is a Prometheus histogram's cumulative buckets.
type hist struct {
	le  []float64 // upper bounds, ascending; the last is +Inf
	cum []float64
}

// histogram is the series of histogram name whose label key is value.
// since is what h counted after earlier, a scrape of the same histogram
// (or nothing).
func (h hist) since(earlier hist) hist {
	out := hist{le: h.le, cum: slices.Clone(h.cum)}
	if len(earlier.cum) == len(h.cum) {
		for i := range out.cum {
			out.cum[i] -= earlier.cum[i]
		}
	}
	return out
}

func histogram(fams map[string]*dto.MetricFamily, name, key, value string) hist {
	var h hist
	for _, m := range fams[name].GetMetric() {
		if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == key && l.GetValue() == value }) {
			continue
		}
		for _, b := range m.GetHistogram().GetBucket() {
			h.le, h.cum = append(h.le, b.GetUpperBound()), append(h.cum, float64(b.GetCumulativeCount()))
		}
		if n := len(h.le); n == 0 || !math.IsInf(h.le[n-1], 1) { // the text form lists +Inf; be sure
			h.le, h.cum = append(h.le, math.Inf(1)), append(h.cum, float64(m.GetHistogram().GetSampleCount()))
		}
	}
	return h
}

func (h hist) count() float64 {
	if len(h.cum) == 0 {
		return 0
	}
	return h.cum[len(h.cum)-1]
}

// quantile interpolates linearly within the bucket holding q (the last
// finite bound when it falls in +Inf).
func (h hist) quantile(q float64) float64 {
	n := h.count()
	if n == 0 {
		return 0
	}
	rank := q * n
	lo, prev := 0.0, 0.0
	for i, c := range h.cum {
		if c >= rank {
			if math.IsInf(h.le[i], 1) {
				return lo
			}
			if c == prev {
				return h.le[i]
			}
			return lo + (h.le[i]-lo)*(rank-prev)/(c-prev)
		}
		lo, prev = h.le[i], c
	}
	return lo
}

// over is the fraction of observations above bound (a bucket bound).
func (h hist) over(bound float64) float64 {
	n := h.count()
	for i, b := range h.le {
		if b == bound && n > 0 {
			return (n - h.cum[i]) / n
		}
	}
	return 0
}

// socketDrops reads the kernel's count of datagrams dropped at the UDP
// socket bound to addr (HOST:PORT) from /proc/net/udp: what was lost
// because the daemon did not read fast enough, as opposed to datagrams
// still queued when the run ended.
func socketDrops(addr string) (uint64, bool) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, false
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return 0, false
	}
	suffix := fmt.Sprintf(":%04X", p)
	for _, f := range []string{"/proc/net/udp", "/proc/net/udp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) < 13 || !strings.HasSuffix(fields[1], suffix) {
				continue
			}
			if n, err := strconv.ParseUint(fields[len(fields)-1], 10, 64); err == nil {
				return n, true
			}
		}
	}
	return 0, false
}
