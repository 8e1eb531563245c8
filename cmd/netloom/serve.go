package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/netloom/netloom/internal/auth"
	"github.com/netloom/netloom/internal/daemon"
	"github.com/netloom/netloom/internal/fabric/sim"
)

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", "[options]", `
Runs the Netloom daemon: discovers the fabric and re-discovers it on an
interval (recording changes as events), sweeps switch port counters, reads
forwarding tables, stores everything in the embedded SQLite database, and
serves the JSON API under /api/v1 and Prometheus metrics at /metrics.

Flags override the config file, which overrides the defaults.

Fabric sources (--fabric):
  ib            the local InfiniBand port, like the infiniband-diags tools
                (works under ibsim's umad2sim LD_PRELOAD too)
  ib:CA:PORT    a given adapter and port, e.g. ib:mlx5_0:1
  sim:SPEC      a simulated fabric with synthetic counters:
`+indent(sim.SpecHelp, "                "), stderr)
	var (
		cfgPath  = fs.String("config", "", "YAML config `file` (see docs/operations.md)")
		listen   = fs.String("listen", "", "HTTP listen `address` (default "+daemon.DefaultListen+")")
		db       = fs.String("db", "", "store `URL`: a file path or sqlite:PATH (default "+daemon.DefaultDB+")")
		fabricS  = fs.String("fabric", "", "fabric `source`: ib, ib:CA:PORT or sim:SPEC (default ib)")
		discover = fs.Duration("discover-interval", 0, "re-discovery `interval` (default 5m)")
		sweep    = fs.Duration("sweep-interval", 0, "counter sweep `interval`; sub-second allowed (default 30s)")
		caPorts  = fs.Bool("sweep-ca-ports", false, "also sweep host adapter ports")
		logLevel = fs.String("log-level", "info", "log `level`: debug, info, warn, error")
		agent    = fs.String("agent-listen", "", "UDP `address` MPI agents send to, or off (default "+daemon.DefaultAgentListen+")")
		agentF   = fs.String("agent-address-file", "", "`file` the agent address is written to for agents, - for none (default "+daemon.DefaultAgentAddressFile+")")
		agentBuf = fs.Int("agent-read-buffer", 0, "agent socket receive buffer in `MiB` (default 256)")
		jobTO    = fs.Duration("job-timeout", 0, "end a job silent for this `long` (and 6 of its intervals; default 30s)")
		schedS   = fs.String("scheduler", "", "batch `scheduler` jobs are learnt from: none or slurm[:OPTIONS] (default none)")
		schedIv  = fs.Duration("scheduler-interval", 0, "scheduler polling `interval` (default 10s)")
		anon     = fs.String("anonymous", "", "`role` of requests without a login: none or admin (default none; admin only on a single-user machine)")
		users    = fs.String("users", "", "htpasswd `file` of local accounts (default "+auth.DefaultUsersFile+"; see netloom user)")
		tlsCert  = fs.String("tls-cert", "", "serve HTTPS with this certificate `file` (PEM; with --tls-key)")
		tlsKey   = fs.String("tls-key", "", "private key `file` for --tls-cert")
		agentAu  = fs.String("agent-auth", "", "agent datagrams accepted: auto, munge or none (default auto: MUNGE-signed when munged runs)")
		mungeS   = fs.String("munge-socket", "", "munged's socket `path` for --agent-auth (default $NETLOOM_MUNGE_SOCKET, else libmunge's)")
		agentNet = fs.String("agent-networks", "", "comma-separated CIDR `networks` agent datagrams may come from (default any)")
		nodeMap  = fs.String("node-map", "", "`file` mapping node names to host adapters (NAME GUID or NAME \"DESCRIPTION\" per line)")
	)
	if err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	var cfg daemon.Config
	if *cfgPath != "" {
		var err error
		if cfg, err = daemon.LoadConfig(*cfgPath); err != nil {
			return err
		}
	}
	override := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	override(&cfg.Listen, *listen)
	override(&cfg.DB, *db)
	override(&cfg.Fabric, *fabricS)
	override(&cfg.AgentListen, *agent)
	override(&cfg.AgentAddressFile, *agentF)
	override(&cfg.Scheduler, *schedS)
	override(&cfg.NodeMap, *nodeMap)
	override(&cfg.Auth.Anonymous, *anon)
	override(&cfg.Auth.UsersFile, *users)
	override(&cfg.TLSCert, *tlsCert)
	override(&cfg.TLSKey, *tlsKey)
	override(&cfg.AgentAuth, *agentAu)
	override(&cfg.MungeSocket, *mungeS)
	if *agentNet != "" {
		cfg.AgentNetworks = strings.Split(*agentNet, ",")
	}
	if *schedIv != 0 {
		cfg.SchedulerInterval = *schedIv
	}
	if *agentBuf != 0 {
		cfg.AgentReadBuffer = *agentBuf
	}
	if *jobTO != 0 {
		cfg.JobTimeout = *jobTO
	}
	if *discover != 0 {
		cfg.DiscoverInterval = *discover
	}
	if *sweep != 0 {
		cfg.SweepInterval = *sweep
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "sweep-ca-ports" {
			cfg.SweepCAPorts = *caPorts
		}
	})
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", *logLevel)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	src, err := daemon.OpenSource(ctx, cfg.Fabric)
	if err != nil {
		return err
	}
	defer src.Close()
	st, err := daemon.OpenStore(ctx, cfg.DB)
	if err != nil {
		return err
	}
	defer st.Close()
	d := daemon.New(cfg, src, st, log)
	return d.Run(ctx, func(addr net.Addr) {
		scheme := "http"
		if cfg.TLSCert != "" {
			scheme = "https"
		}
		fmt.Fprintf(stdout, "netloom: serving on %s://%s (API /api/v1, metrics /metrics) since %s\n", scheme, addr, time.Now().Format(time.RFC3339))
		if a := d.AgentAddr(); a != "" {
			fmt.Fprintf(stdout, "netloom: MPI agents send to udp://%s\n", a)
		}
	})
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return prefix + strings.Join(lines, "\n"+prefix) + "\n"
}
