package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/netloom/netloom/internal/alert"
	"github.com/netloom/netloom/internal/auth"
	"github.com/netloom/netloom/internal/store"
)

// Config is everything `netloom serve` can be told, from flags or a YAML
// file (flags win). Zero values mean the documented defaults.
type Config struct {
	// Role is what this daemon does: "collector" (default: the fabric,
	// agents, scheduler, store writer and API) or "api" (the API and UI
	// from the database alone, re-read every PollInterval; default 2s).
	Role         string        `yaml:"role"`
	PollInterval time.Duration `yaml:"poll_interval"`

	Listen string `yaml:"listen"` // HTTP address
	DB     string `yaml:"db"`     // store URL: a path, or sqlite:PATH
	Fabric string `yaml:"fabric"` // "ib", "ib:CA:PORT", "sim:SPEC" or "eth:FILE"
	// FabricName names the fabric this collector owns in the database:
	// collectors on one database each give their own (default "default").
	FabricName string `yaml:"fabric_name"`

	DiscoverInterval time.Duration `yaml:"discover_interval"`
	SweepInterval    time.Duration `yaml:"sweep_interval"`
	SweepTimeout     time.Duration `yaml:"sweep_timeout"` // per query
	SweepRetries     int           `yaml:"sweep_retries"`
	SweepParallel    int           `yaml:"sweep_parallel"`
	// SweepCAPorts adds host adapter ports to the sweep. Off by default:
	// the switch end of every host link already counts its traffic (the
	// node API and page show a host's link from there, labelled so), and at
	// Stampede size adapter ports make a sweep 25% longer and, one stored
	// row per adapter, the port samples stored 2.4 times as large
	// (bench/README.md); only the adapter's own receive errors and
	// transmit wait need them.
	SweepCAPorts bool `yaml:"sweep_ca_ports"`
	// ResetThreshold clears 32-bit counters once one passes this fraction
	// of its maximum (0: off). 64-bit extended counters are never reset.
	ResetThreshold float64 `yaml:"reset_threshold"`

	// AgentListen is the UDP address MPI agents send to ("off": none; empty:
	// DefaultAgentListen, where a port in use only disables ingest);
	// AgentAddressFile where the daemon publishes it for agents ("-": nowhere).
	AgentListen string `yaml:"agent_listen"`
	// SFlowListen is the UDP address the sFlow collector listens at (empty:
	// off; docs/sflow.md). It needs an eth: fabric: only its switches'
	// datagrams are kept. SFlowMaxFlows bounds the flows it tracks
	// (default 100,000).
	SFlowListen      string `yaml:"sflow_listen"`
	SFlowMaxFlows    int    `yaml:"sflow_max_flows"`
	AgentAddressFile string `yaml:"agent_address_file"`
	// AgentReadBuffer is the agents' socket receive buffer in MiB (default
	// 256): how long a burst, or a slowdown of the daemon (a garbage
	// collection of a large live state), the kernel holds datagrams for.
	AgentReadBuffer int `yaml:"agent_read_buffer_mib"`
	// AgentAuth says which agent datagrams are accepted: "auto" (default:
	// MUNGE credentials are required when munged answers at start, else
	// none are accepted at all), "munge" (required; no start without
	// munged) or "none" (any, unverified: an administrator's choice).
	// AgentNetworks, when set, accepts datagrams only from these source
	// networks (CIDR), with or without MUNGE.
	AgentAuth     string   `yaml:"agent_auth"`
	AgentNetworks []string `yaml:"agent_networks"`
	// MungeSocket is munged's socket when not libmunge's default (also
	// from $NETLOOM_MUNGE_SOCKET, which agents read too).
	MungeSocket string `yaml:"munge_socket"`
	// JobTimeout ends a job that sent nothing for this long (at least 6
	// of its snapshot intervals).
	JobTimeout time.Duration `yaml:"job_timeout"`
	// AgentLimits bound the live jobs agents may make the daemon hold.
	AgentLimits AgentLimits `yaml:"agent_limits"`

	// Scheduler names the batch scheduler jobs are learnt from: "none"
	// (default) or "slurm" (with options, e.g. "slurm:accounting=off"),
	// polled every SchedulerInterval (default 10s).
	Scheduler         string        `yaml:"scheduler"`
	SchedulerInterval time.Duration `yaml:"scheduler_interval"`
	// NodeMap is a file mapping node names to host adapters where their
	// descriptions do not start with the node name (docs/operations.md).
	NodeMap string `yaml:"node_map"`
	// Model is what the API's what-if predictions read and run.
	Model ModelConfig `yaml:"model"`

	// StoreBacklogMiB bounds, in MiB of estimated memory, the writes held
	// while the database is unreachable (default 1024); beyond it the
	// oldest held writes are dropped and counted.
	StoreBacklogMiB int `yaml:"store_backlog_mib"`

	Retention RetentionConfig `yaml:"retention"`

	// Alerting is the alert rules and where alerts go (docs/alerts.md).
	Alerting alert.Config `yaml:"alerting"`

	// Auth is who may use the API and the UI (docs/security.md).
	Auth auth.Config `yaml:"auth"`
	// TLSCert and TLSKey, when set, serve HTTPS with this certificate.
	TLSCert string `yaml:"tls_cert"`
	TLSKey  string `yaml:"tls_key"`
}

// AgentLimits bound the live jobs (running, and finished ones for 2
// minutes) held for agents, so that one sender or one user cannot fill the
// table and have everyone else's new jobs refused (docs/security.md,
// "Agent data"). A refused job is not lost: its ranks send again at their
// next snapshot, counters cumulative, and it starts then.
type AgentLimits struct {
	// MaxJobs bounds live jobs in all (too_many_jobs beyond).
	MaxJobs int `yaml:"max_jobs"`
	// MaxJobsPerUser bounds one user's live jobs (too_many_user_jobs
	// beyond; default a quarter of MaxJobs; negative: no limit). The user
	// is the verified one, or without authentication the one claimed.
	MaxJobsPerUser int `yaml:"max_jobs_per_user"`
	// NewJobsPerSource is how many new jobs a second one source address
	// may start on average, NewJobsBurst how many at once (new_job_rate
	// beyond; NewJobsPerSource negative: no limit).
	NewJobsPerSource float64 `yaml:"new_jobs_per_source"`
	NewJobsBurst     int     `yaml:"new_jobs_burst"`
}

// Defaults of AgentLimits. A node starts a job's ranks, and sends its
// first datagram, from its own address: 200 at once covers a node of 200
// cores filled with single-rank MPI jobs at one moment, and 10 a second
// sustained is more than any batch scheduler starts on one node (Slurm's
// whole-cluster throughput is some hundreds a second). A flooding sender
// then holds at most 200 + 10/s × (job_timeout + the 2-minute linger) =
// 1,700 jobs at the defaults, a sixth of the table, where it filled the
// table in a second before. A quarter of the table per user leaves room
// for three more such users and is above Slurm's default largest job
// array (1,001).
const (
	DefaultAgentMaxJobs          = 10000
	DefaultAgentNewJobsPerSource = 10
	DefaultAgentNewJobsBurst     = 200
)

func (l AgentLimits) withDefaults() AgentLimits {
	set(&l.MaxJobs, DefaultAgentMaxJobs)
	set(&l.MaxJobsPerUser, max(l.MaxJobs/4, 1))
	set(&l.NewJobsPerSource, DefaultAgentNewJobsPerSource)
	set(&l.NewJobsBurst, DefaultAgentNewJobsBurst)
	return l
}

func (l AgentLimits) validate() error {
	switch {
	case l.MaxJobs < 1 || l.MaxJobs > 10_000_000:
		return fmt.Errorf("agent_limits.max_jobs %d: must be 1..10000000", l.MaxJobs)
	case l.MaxJobsPerUser > l.MaxJobs:
		return fmt.Errorf("agent_limits.max_jobs_per_user %d: must be at most max_jobs (%d), or negative for no limit", l.MaxJobsPerUser, l.MaxJobs)
	case math.IsNaN(l.NewJobsPerSource) || math.IsInf(l.NewJobsPerSource, 0) || l.NewJobsPerSource > 1e6:
		return fmt.Errorf("agent_limits.new_jobs_per_source %g: must be a number of new jobs a second up to 1000000, or negative for no limit", l.NewJobsPerSource)
	case l.NewJobsBurst < 1 || l.NewJobsBurst > 10_000_000:
		return fmt.Errorf("agent_limits.new_jobs_burst %d: must be 1..10000000", l.NewJobsBurst)
	}
	return nil
}

// Defaults.
const (
	DefaultListen           = "localhost:8466"
	DefaultDB               = "netloom.db"
	DefaultFabric           = "ib"
	DefaultDiscoverInterval = 5 * time.Minute
	DefaultSweepInterval    = 30 * time.Second
	DefaultAgentListen      = "0.0.0.0:8467"
	DefaultAgentAddressFile = "/run/netloom/agent-address"
	DefaultJobTimeout       = 30 * time.Second
	DefaultAgentReadBuffer  = 256 // MiB
	DefaultScheduler        = "none"
	DefaultSchedInterval    = 10 * time.Second
	DefaultStoreBacklogMiB  = 1024
)

// set sets *v to d when it is the zero value.
func set[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// WithDefaults fills every zero field with its default.
func (c Config) WithDefaults() Config {
	set(&c.Role, RoleCollector)
	set(&c.PollInterval, DefaultPollInterval)
	set(&c.Listen, DefaultListen)
	set(&c.DB, DefaultDB)
	set(&c.Fabric, DefaultFabric)
	set(&c.FabricName, store.DefaultFabric)
	set(&c.AgentAddressFile, DefaultAgentAddressFile)
	set(&c.Scheduler, DefaultScheduler)
	set(&c.SchedulerInterval, DefaultSchedInterval)
	set(&c.JobTimeout, DefaultJobTimeout)
	c.AgentLimits = c.AgentLimits.withDefaults()
	c.Model = c.Model.withDefaults()
	set(&c.AgentReadBuffer, DefaultAgentReadBuffer)
	set(&c.DiscoverInterval, DefaultDiscoverInterval)
	set(&c.StoreBacklogMiB, DefaultStoreBacklogMiB)
	set(&c.SweepInterval, DefaultSweepInterval)
	c.Retention = c.Retention.withDefaults()
	set(&c.AgentAuth, "auto")
	c.Auth = c.Auth.WithDefaults()
	c.Alerting = c.Alerting.WithDefaults()
	return c
}

// Validate reports the first field with an impossible value.
func (c Config) Validate() error {
	switch {
	case c.Role != RoleCollector && c.Role != RoleAPI:
		return fmt.Errorf("role %q: want collector or api", c.Role)
	case store.CheckFabricName("fabric_name", c.FabricName) != nil:
		return store.CheckFabricName("fabric_name", c.FabricName)
	case c.PollInterval < 100*time.Millisecond:
		return fmt.Errorf("poll_interval %s: must be at least 100ms", c.PollInterval)
	case c.DiscoverInterval < time.Second:
		return fmt.Errorf("discover_interval %s: must be at least 1s", c.DiscoverInterval)
	case c.SweepInterval < 10*time.Millisecond:
		return fmt.Errorf("sweep_interval %s: must be at least 10ms", c.SweepInterval)
	case c.SweepTimeout < 0:
		return fmt.Errorf("sweep_timeout %s: must not be negative", c.SweepTimeout)
	case c.SweepRetries < 0 || c.SweepRetries > 10:
		return fmt.Errorf("sweep_retries %d: must be 0..10", c.SweepRetries)
	case c.SweepParallel < 0 || c.SweepParallel > 4096:
		return fmt.Errorf("sweep_parallel %d: must be 0..4096", c.SweepParallel)
	case c.ResetThreshold < 0 || c.ResetThreshold >= 1:
		return fmt.Errorf("reset_threshold %g: must be 0 (off) or a fraction below 1", c.ResetThreshold)
	case c.SchedulerInterval < 100*time.Millisecond:
		return fmt.Errorf("scheduler_interval %s: must be at least 100ms", c.SchedulerInterval)
	case c.JobTimeout < 0:
		return fmt.Errorf("job_timeout %s: must not be negative", c.JobTimeout)
	case c.AgentReadBuffer < 1 || c.AgentReadBuffer > 4096:
		return fmt.Errorf("agent_read_buffer_mib %d: must be 1..4096", c.AgentReadBuffer)
	case c.StoreBacklogMiB < 1 || c.StoreBacklogMiB > 1<<20:
		return fmt.Errorf("store_backlog_mib %d: must be 1..1048576", c.StoreBacklogMiB)
	case c.SFlowListen != "" && checkUDPAddr(c.SFlowListen) != nil:
		return fmt.Errorf("sflow_listen %q: %w", c.SFlowListen, checkUDPAddr(c.SFlowListen))
	case c.SFlowMaxFlows < 0 || c.SFlowMaxFlows > 100_000_000:
		return fmt.Errorf("sflow_max_flows %d: must be 0 (default 100000)..100000000", c.SFlowMaxFlows)
	case parseAgentListen(c.AgentListen) != nil:
		return parseAgentListen(c.AgentListen)
	case c.Retention.validate() != nil:
		return c.Retention.validate()
	case c.AgentLimits.validate() != nil:
		return c.AgentLimits.validate()
	case c.Model.validate() != nil:
		return c.Model.validate()
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return errors.New("tls_cert and tls_key: set both or neither")
	}
	if err := c.validateAgentAuth(); err != nil {
		return err
	}
	return c.Auth.Validate()
}

// LoadConfig reads a YAML config file. Unknown keys and bad values are
// errors that name the file, line and key.
func LoadConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return ParseConfig(b, path)
}

// ParseConfig parses YAML config text; name is used in errors.
func ParseConfig(b []byte, name string) (Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("config %s: %w", name, err)
	}
	if err := c.WithDefaults().Validate(); err != nil {
		return Config{}, fmt.Errorf("config %s: %w", name, err)
	}
	return c, nil
}
