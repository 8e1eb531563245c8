package daemon

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/netloom/netloom/internal/api"
	"github.com/netloom/netloom/internal/jobfiles"
)

// ModelConfig is what the API's what-if predictions (GET
// /jobs/{job}/model) may read and run (docs/security.md, "What the daemon
// reads").
type ModelConfig struct {
	// TraceRoot is the only folder under which the daemon reads the traces
	// jobs wrote (netloom run --trace --output DIR with DIR below it),
	// each job's folder and files owned by its user, reached without
	// symbolic links. Empty (the default): the daemon reads no traces and
	// users predict with `netloom model DIR` themselves.
	TraceRoot string `yaml:"trace_root"`
	// MaxActions bounds one job's traces' actions (default 2 million);
	// MaxTraceMiB the bytes read of one job's folder (default 8192),
	// MaxFileMiB of one file (default 1024).
	MaxActions  int `yaml:"max_actions"`
	MaxTraceMiB int `yaml:"max_trace_mib"`
	MaxFileMiB  int `yaml:"max_file_mib"`
	// Timeout bounds one prediction (default 2m).
	Timeout time.Duration `yaml:"timeout"`
	// PerUser bounds one user's predictions waiting or running (default
	// 4), Queue all waiting (default 8), Replays those running (default 1),
	// MaxScenarios the scenarios of one request (default 8).
	PerUser      int `yaml:"per_user"`
	Queue        int `yaml:"queue"`
	Replays      int `yaml:"replays"`
	MaxScenarios int `yaml:"max_scenarios"`
}

func (m ModelConfig) withDefaults() ModelConfig {
	d := api.DefaultModelOptions
	set(&m.MaxActions, d.MaxActions)
	set(&m.MaxTraceMiB, int(d.Files.MaxTotalBytes>>20))
	set(&m.MaxFileMiB, int(d.Files.MaxFileBytes>>20))
	set(&m.Timeout, d.Timeout)
	set(&m.PerUser, d.PerUser)
	set(&m.Queue, d.Queue)
	set(&m.Replays, d.Replays)
	set(&m.MaxScenarios, d.MaxScenarios)
	return m
}

func (m ModelConfig) validate() error {
	switch {
	case m.TraceRoot != "" && !filepath.IsAbs(m.TraceRoot):
		return fmt.Errorf("model.trace_root %q: want an absolute path", m.TraceRoot)
	case m.MaxActions < 1:
		return fmt.Errorf("model.max_actions %d: must be positive", m.MaxActions)
	case m.MaxTraceMiB < 1 || m.MaxFileMiB < 1:
		return fmt.Errorf("model.max_trace_mib %d, max_file_mib %d: must be positive", m.MaxTraceMiB, m.MaxFileMiB)
	case m.Timeout < time.Second || m.Timeout > time.Hour:
		return fmt.Errorf("model.timeout %s: must be 1s..1h", m.Timeout)
	case m.PerUser < 1 || m.Queue < 1 || m.Replays < 1 || m.Replays > 64:
		return fmt.Errorf("model.per_user %d, queue %d, replays %d: must be positive (replays at most 64)", m.PerUser, m.Queue, m.Replays)
	case m.MaxScenarios < 1 || m.MaxScenarios > 64:
		return fmt.Errorf("model.max_scenarios %d: must be 1..64", m.MaxScenarios)
	}
	return nil
}

// apiOptions is the config as the API takes it.
func (m ModelConfig) apiOptions() api.ModelOptions {
	return api.ModelOptions{TraceRoot: m.TraceRoot, MaxActions: m.MaxActions,
		Files:   jobfiles.Limits{MaxFileBytes: int64(m.MaxFileMiB) << 20, MaxTotalBytes: int64(m.MaxTraceMiB) << 20, MaxEntries: api.DefaultModelOptions.Files.MaxEntries},
		Timeout: m.Timeout, PerUser: m.PerUser, Queue: m.Queue, Replays: m.Replays, MaxScenarios: m.MaxScenarios}
}
