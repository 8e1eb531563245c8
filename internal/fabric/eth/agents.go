package eth

import (
	"context"
	"net"
	"net/netip"
	"time"

	"github.com/netloom/netloom/internal/fabric"
)

// Agent is a switch of the last discovered topology as an sFlow agent
// names itself: the addresses it is polled at (the eth file's address, a
// host name resolved) and its ports by ifIndex, numbered as the topology
// numbers them.
type Agent struct {
	GUID  fabric.GUID
	Name  string
	Addrs []netip.Addr
	Ports map[uint32]int // ifIndex -> port number
}

// Agents lists the switches of the last discovery (nil before one).
func (s *Source) Agents(ctx context.Context) []Agent {
	s.mu.Lock()
	var out []Agent
	var hosts []string
	if s.lay != nil {
		for g, l := range s.lay.switches {
			a := Agent{GUID: g, Name: l.name.Name, Ports: make(map[uint32]int, len(l.ifPort))}
			for i, p := range l.ifPort {
				a.Ports[uint32(i)] = p
			}
			out = append(out, a)
			hosts = append(hosts, l.view.host)
		}
	}
	s.mu.Unlock()
	for i, h := range hosts {
		if ip, err := netip.ParseAddr(h); err == nil {
			out[i].Addrs = []netip.Addr{ip.Unmap()}
			continue
		}
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		ips, _ := net.DefaultResolver.LookupNetIP(c, "ip", h)
		cancel()
		for _, ip := range ips {
			out[i].Addrs = append(out[i].Addrs, ip.Unmap())
		}
	}
	return out
}
