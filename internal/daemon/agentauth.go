package daemon

import (
	"fmt"
	"net/netip"
	"os"
	"sync/atomic"

	"github.com/netloom/netloom/internal/api"
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

// Agent authentication in force, as /api/v1/status shows administrators.
const (
	AgentAuthMunge    = "munge"
	AgentAuthNone     = "none"
	AgentAuthRefusing = "refusing"
)

// agentAuth turns agent_auth and agent_networks into what the agent
// listener accepts, and says which it is. "munge" needs a munged that
// answers now; "auto" uses it when it does, and otherwise refuses every
// datagram: unverified datagrams name any user they like (a job appears in
// another user's list, another user's rank or job is taken over), so they
// are accepted only when an administrator chose agent_auth none.
func (d *Daemon) agentAuth() (ingest.AuthOptions, api.AgentAuth, error) {
	var opt ingest.AuthOptions
	st := api.AgentAuth{Networks: d.cfg.AgentNetworks}
	nets, err := auth.ParseNetworks("agent_networks", d.cfg.AgentNetworks)
	if err != nil {
		return opt, st, err
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
				return opt, st, fmt.Errorf("agent_auth munge: munged at %s does not answer (start munged, or set %s to its socket): %w",
					where, MungeSocketEnv, err)
			}
			opt.Refuse = fmt.Sprintf("munged at %s did not answer when the daemon started (agent_auth auto)", where)
			st.Mode = AgentAuthRefusing
			st.Reason = fmt.Sprintf("agent_auth auto and munged at %s does not answer (%v): every agent datagram is refused. "+
				"Start munged (or set %s to its socket) and restart the daemon, or set agent_auth: none (--agent-auth none) "+
				"to accept unverified datagrams", where, err, MungeSocketEnv)
			d.log.Warn("agent authentication: REFUSING ALL AGENT DATAGRAMS: agent_auth auto and munged does not answer, "+
				"so no datagram can be verified. Fix: start munged (or set "+MungeSocketEnv+" to its socket) and restart, "+
				"or set agent_auth: none (--agent-auth none) to accept unverified datagrams on a trusted network",
				"munge_socket", where, "err", err, "agent_networks", d.cfg.AgentNetworks)
			return opt, st, nil
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
		st.Mode, st.Reason = AgentAuthMunge, fmt.Sprintf("agent_auth %s: datagrams need a MUNGE credential that munged at %s verifies", mode, where)
		return opt, st, nil
	}
	d.log.Info("agent authentication: none (agent_auth none: agents' datagrams are accepted unverified and name any user they like)",
		"agent_networks", d.cfg.AgentNetworks)
	st.Mode, st.Reason = AgentAuthNone, "agent_auth none: datagrams are accepted unverified; the user each claims is believed"
	return opt, st, nil
}

// schedOwns says whether a verified datagram's user may report for a job
// the scheduler knows: the job's owner, by name or by uid.
func schedOwns(si store.SchedInfo, it ingest.Item) bool {
	return si.User == "" || si.User == it.User || (si.UID != 0 && si.UID == it.UID)
}
