package main

import (
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/netloom/netloom/internal/auth"
	"github.com/netloom/netloom/internal/daemon"
	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/fabric/sim"
)

func serveCmd() *cobra.Command {
	var (
		cfgPath, listen, db, fabricS, logLevel, agent, agentF, sflowL string
		schedS, anon, users, tlsCert, tlsKey, agentAu, mungeS         string
		agentNet, nodeMap, role, fabricName, traceRoot                string
		discover, sweep, jobTO, schedIv, poll                         time.Duration
		caPorts                                                       bool
		agentBuf, backlog                                             int
	)
	c := &cobra.Command{
		Use:   "serve",
		Short: "run the daemon: fabric monitoring, store, HTTP API and /metrics",
		Long: `Runs the Netloom daemon: discovers the fabric and re-discovers it on an
interval (recording changes as events), sweeps switch port counters (host
adapter ports too with --sweep-ca-ports), reads forwarding tables, stores
everything in the embedded SQLite database, and serves the JSON API under
/api/v1 and Prometheus metrics at /metrics.

Flags override the config file, which overrides the defaults.

Roles (--role): collector (the default) does all of the above; api serves
the API and UI from the database alone (PostgreSQL; docs/postgres.md),
reading the newest topology, routes and port samples every --poll-interval,
so that any number of them can run behind a load balancer beside the
collectors.

Fabric sources (--fabric):
  ib            the local InfiniBand port, like the infiniband-diags tools
                (works under ibsim's umad2sim LD_PRELOAD too)
  ib:CA:PORT    a given adapter and port, e.g. ib:mlx5_0:1
  sim:SPEC      a simulated fabric with synthetic counters:
` + indent(sim.SpecHelp, "                "),
		Args:              posArgs(),
		ValidArgsFunction: noFiles,
		RunE: func(c *cobra.Command, _ []string) error {
			var cfg daemon.Config
			if cfgPath != "" {
				var err error
				if cfg, err = daemon.LoadConfig(cfgPath); err != nil {
					return err
				}
			}
			override := func(dst *string, v string) {
				if v != "" {
					*dst = v
				}
			}
			override(&cfg.Role, role)
			if poll != 0 {
				cfg.PollInterval = poll
			}
			override(&cfg.Listen, listen)
			override(&cfg.DB, db)
			override(&cfg.Fabric, fabricS)
			override(&cfg.FabricName, fabricName)
			override(&cfg.AgentListen, agent)
			override(&cfg.AgentAddressFile, agentF)
			override(&cfg.SFlowListen, sflowL)
			override(&cfg.Scheduler, schedS)
			override(&cfg.NodeMap, nodeMap)
			override(&cfg.Model.TraceRoot, traceRoot)
			override(&cfg.Auth.Anonymous, anon)
			override(&cfg.Auth.UsersFile, users)
			override(&cfg.TLSCert, tlsCert)
			override(&cfg.TLSKey, tlsKey)
			override(&cfg.AgentAuth, agentAu)
			override(&cfg.MungeSocket, mungeS)
			if agentNet != "" {
				cfg.AgentNetworks = strings.Split(agentNet, ",")
			}
			if schedIv != 0 {
				cfg.SchedulerInterval = schedIv
			}
			if backlog != 0 {
				cfg.StoreBacklogMiB = backlog
			}
			if agentBuf != 0 {
				cfg.AgentReadBuffer = agentBuf
			}
			if jobTO != 0 {
				cfg.JobTimeout = jobTO
			}
			if discover != 0 {
				cfg.DiscoverInterval = discover
			}
			if sweep != 0 {
				cfg.SweepInterval = sweep
			}
			if c.Flags().Changed("sweep-ca-ports") {
				cfg.SweepCAPorts = caPorts
			}
			cfg = cfg.WithDefaults()
			if err := cfg.Validate(); err != nil {
				return err
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level %q: want debug, info, warn or error", logLevel)
			}
			log := slog.New(slog.NewTextHandler(c.ErrOrStderr(), &slog.HandlerOptions{Level: level}))

			ctx := c.Context()
			var src fabric.Source
			if cfg.Role == daemon.RoleCollector {
				var err error
				if src, err = daemon.OpenSource(ctx, cfg.Fabric); err != nil {
					return fabric.WithAlternatives(err, fabric.AltSim, fabric.AltRoleAPI)
				}
				defer src.Close()
			}
			st, err := daemon.OpenStore(ctx, cfg.DB, cfg.FabricName)
			if err != nil {
				return err
			}
			defer st.Close()
			d := daemon.New(cfg, src, st, log)
			stdout := c.OutOrStdout()
			return d.Run(ctx, func(addr net.Addr) {
				scheme := "http"
				if cfg.TLSCert != "" {
					scheme = "https"
				}
				fmt.Fprintf(stdout, "netloom: serving on %s://%s (API /api/v1, metrics /metrics) since %s\n", scheme, addr, time.Now().Format(time.RFC3339))
				if a := d.AgentAddr(); a != "" {
					fmt.Fprintf(stdout, "netloom: MPI agents send to udp://%s\n", a)
				}
				if a := d.SFlowAddr(); a != "" {
					fmt.Fprintf(stdout, "netloom: sFlow collector on udp://%s\n", a)
				}
			})
		},
	}
	f := c.Flags()
	f.StringVar(&cfgPath, "config", "", "YAML config `file` (see docs/operations.md)")
	enumFlag(c, &role, "role", "", "what this daemon does: collector (the fabric, agents, scheduler, store and API) or api (the API and UI from the database alone; default collector)", "collector", "api")
	f.DurationVar(&poll, "poll-interval", 0, "with --role api: how often the database is read for the live views (default 2s)")
	f.StringVar(&listen, "listen", "", "HTTP listen `address` (default "+daemon.DefaultListen+")")
	f.StringVar(&db, "db", "", "store `URL`: a file path, sqlite:PATH or postgres://USER@HOST/DB (docs/postgres.md; default "+daemon.DefaultDB+")")
	f.StringVar(&fabricS, "fabric", "", "fabric `source`: ib, ib:CA:PORT, sim:SPEC or eth:FILE (default ib)")
	f.StringVar(&fabricName, "fabric-name", "", "`name` of the fabric this collector owns in the database; collectors on one database each give their own (default default)")
	f.DurationVar(&discover, "discover-interval", 0, "re-discovery `interval` (default 5m)")
	f.DurationVar(&sweep, "sweep-interval", 0, "counter sweep `interval`; sub-second allowed (default 30s)")
	f.BoolVar(&caPorts, "sweep-ca-ports", false, "also sweep host adapter ports (off: a host's page shows its link as the switch end counts it; on, at Stampede size: sweeps 25% longer, 2.4x the port samples stored; docs/cli.md)")
	enumFlag(c, &logLevel, "log-level", "info", "log `level`: debug, info, warn, error", "debug", "info", "warn", "error")
	f.StringVar(&agent, "agent-listen", "", "UDP `address` MPI agents send to, or off (default "+daemon.DefaultAgentListen+")")
	f.StringVar(&agentF, "agent-address-file", "", "`file` the agent address is written to for agents, - for none (default "+daemon.DefaultAgentAddressFile+")")
	f.StringVar(&sflowL, "sflow-listen", "", "UDP `address` the sFlow collector listens at, for the eth: fabric's switches (default off; docs/sflow.md)")
	f.IntVar(&backlog, "store-backlog", 0, "`MiB` of writes held while the database is unreachable, the oldest dropped beyond (default 1024)")
	f.IntVar(&agentBuf, "agent-read-buffer", 0, "agent socket receive buffer in `MiB` (default 256)")
	f.DurationVar(&jobTO, "job-timeout", 0, "end a job silent for this `long` (and 6 of its intervals; default 30s)")
	f.StringVar(&schedS, "scheduler", "", "batch `scheduler` jobs are learnt from: none or slurm[:OPTIONS] (default none)")
	f.DurationVar(&schedIv, "scheduler-interval", 0, "scheduler polling `interval` (default 10s)")
	enumFlag(c, &anon, "anonymous", "", "`role` of requests without a login: none or admin (default none; admin only on a single-user machine)", "none", "admin")
	f.StringVar(&users, "users", "", "htpasswd `file` of local accounts (default "+auth.DefaultUsersFile+"; see netloom user)")
	f.StringVar(&tlsCert, "tls-cert", "", "serve HTTPS with this certificate `file` (PEM; with --tls-key)")
	f.StringVar(&tlsKey, "tls-key", "", "private key `file` for --tls-cert")
	enumFlag(c, &agentAu, "agent-auth", "", "agent datagrams accepted: auto, munge or none (default auto: MUNGE-signed when munged runs, else none at all; none: any, unverified)", "auto", "munge", "none")
	f.StringVar(&mungeS, "munge-socket", "", "munged's socket `path` for --agent-auth (default $NETLOOM_MUNGE_SOCKET, else libmunge's)")
	f.StringVar(&agentNet, "agent-networks", "", "comma-separated CIDR `networks` agent datagrams may come from (default any)")
	f.StringVar(&traceRoot, "trace-root", "", "the only `folder` under which the API reads jobs' replay traces (netloom run --trace --output DIR below it; each job's files owned by its user, no links); unset: it reads none")
	f.StringVar(&nodeMap, "node-map", "", "`file` mapping node names to host adapters (NAME GUID or NAME \"DESCRIPTION\" per line)")
	completeFlag(c, "fabric", fabricSpecs...)
	completeFlag(c, "scheduler", "none", "slurm")
	completeFlag(c, "agent-listen", "off")
	return c
}

// fabricSpecs are the --fabric values completion offers.
var fabricSpecs = []string{"ib", "ib:", "sim:stampede", "sim:10x-stampede", "sim:fat-tree:hosts=", "eth:"}
