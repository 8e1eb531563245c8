package daemon

import (
	"fmt"
	"net/netip"
	"os"
	"sync/atomic"

	"github.com/netloom/netloom/internal/auth"
	"github.com/netloom/netloom/internal/ingest"
	"github.com/netloom/netloom/internal/munge"
	"github.com/netloom/netloom/internal/store"
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

// MungeSocketEnv names munged's socket for the daemon and the agents when
// it is not libmunge's default (/run/munge/munge.socket.2).
const MungeSocketEnv = "NETLOOM_MUNGE_SOCKET"

// agentAuth turns agent_auth and agent_networks into what the agent
// listener accepts. "munge" needs a munged that answers now; "auto" uses
// it when it does and says which way it went.
func (d *Daemon) agentAuth() (ingest.AuthOptions, error) {
	var opt ingest.AuthOptions
	nets, err := auth.ParseNetworks("agent_networks", d.cfg.AgentNetworks)
	if err != nil {
		return opt, err
	}
	if len(nets) > 0 {
		opt.Source = func(a netip.Addr) bool { return auth.Contains(nets, a) }
	}
	mode := d.cfg.AgentAuth
	if mode == "" {
		mode = "auto"
	}
	sock := d.cfg.MungeSocket
	if sock == "" {
		sock = os.Getenv(MungeSocketEnv)
	}
	where := sock
	if where == "" {
		where = "the default socket"
	}
	if mode != "none" {
		c := munge.Client{Socket: sock}
		if err := c.Check(); err != nil {
			if mode == "munge" {
				return opt, fmt.Errorf("agent_auth munge: munged at %s does not answer (start munged, or set %s to its socket): %w",
					where, MungeSocketEnv, err)
			}
			d.log.Warn("agent authentication: none (agent_auth auto and munged does not answer): agents' datagrams are accepted unverified",
				"munge_socket", where, "err", err, "agent_networks", d.cfg.AgentNetworks)
			return opt, nil
		}
		var open atomic.Bool
		uid := os.Getuid()
		opt.Decode = func(cred []byte) (ingest.Credential, error) {
			m, err := c.Decode(cred)
			if err == nil && !m.Restricted && open.CompareAndSwap(false, true) {
				d.log.Warn("agents send MUNGE credentials any local user can decode, and so learn their session keys: "+
					"set NETLOOM_MUNGE_UID in the agents' environment to the daemon's uid", "uid", uid, "example_uid", m.UID)
			}
			return ingest.Credential{Payload: m.Payload, UID: m.UID, Encoded: m.Encoded, TTL: m.TTL}, err
		}
		d.log.Info("agent authentication: munge (datagrams need a MUNGE credential; job owners are the credentials' users)",
			"agent_auth", mode, "munge_socket", where, "agent_networks", d.cfg.AgentNetworks)
		return opt, nil
	}
	d.log.Info("agent authentication: none (agents' datagrams are accepted unverified)", "agent_networks", d.cfg.AgentNetworks)
	return opt, nil
}

// schedOwns says whether a verified datagram's user may report for a job
// the scheduler knows: the job's owner, by name or by uid.
func schedOwns(si store.SchedInfo, it ingest.Item) bool {
	return si.User == "" || si.User == it.User || (si.UID != 0 && si.UID == it.UID)
}
