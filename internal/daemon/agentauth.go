package daemon

import (
	"fmt"

	"github.com/netloom/netloom/internal/auth"
)

// validateAgentAuth checks agent_auth and agent_networks.
func (c Config) validateAgentAuth() error {
	switch c.AgentAuth {
	case "auto", "munge", "none":
	default:
		return fmt.Errorf("agent_auth %q: want auto, munge or none", c.AgentAuth)
	}
	_, err := auth.ParseNetworks("agent_networks", c.AgentNetworks)
	return err
}
