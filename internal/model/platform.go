// Package model predicts what a job's run would take on another network or
// placement: its replay trace (the agent's NETLOOM_TRACE) replayed by
// SimGrid's SMPI on a platform built from the fabric (or calibrated to the
// machine the job ran on), as measured and under what-ifs. See docs/model.md.
package model

import (
	"encoding/xml"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/netloom/netloom/internal/fabric"
)

// HostFlops is the speed of every platform host: the agent writes compute
// gaps as flops at this rate (rank-N.ti.json's host_flops).
const HostFlops = 1e9

// The fabric platform's defaults: every link's latency on a route, and the
// loopback between ranks on one node (netloom model's --hop-latency and
// --loopback-*; the daemon's /model and netloom place use them as they
// are). The default loopback is never slower than the network: a platform
// raises its bandwidth to the fastest link's and lowers its latency to the
// quickest route's (NoSlowerThanNetwork), so that one message between ranks
// on one node is not predicted slower than between ranks on two (but for
// the 5% SimGrid's SHARED link costs against split-duplex ones). A
// node's ranks share its loopback, as they share the node's memory: its
// messages in flight at once divide its bandwidth (SimGrid's SHARED).
var (
	DefaultHopLatency = 100e-9
	DefaultLoopback   = Link{ID: "loopback", Bandwidth: 10e9, Latency: 300e-9, NoSlowerThanNetwork: true,
		From: "default: 10 GB/s and 300 ns, no slower than the network"}
)

// Link is one network resource: a fabric link (both directions apart) or
// a host's own link on a flat platform.
type Link struct {
	ID        string
	Bandwidth float64 // bytes per second, each direction
	Latency   float64 // seconds
	// NoSlowerThanNetwork, on a loopback, makes the platform built with
	// it raise the loopback's bandwidth to its fastest link's and lower
	// its latency to its quickest route's, where they are slower.
	NoSlowerThanNetwork bool
	// PairBandwidth, on a loopback, is what one message gets of it at
	// most (0: all of Bandwidth): a calibrated node's messages in flight
	// at once share Bandwidth, its aggregate, each at most one pair's.
	PairBandwidth float64
	// From, on a loopback, says where its figures came from.
	From string
}

// Use is a link crossed in one direction: Up is from the link's A side.
type Use struct {
	Link int // index into Platform.Links
	Up   bool
}

// Platform is what a replay runs on: hosts (a job's nodes), the links
// between them and the route of every ordered pair of hosts.
type Platform struct {
	Name  string
	Hosts []string
	Cores map[string]int
	Links []Link
	// Routes[[2]string{src, dst}] is the path between two hosts; a host
	// reaches itself through Loopback.
	Routes   map[[2]string][]Use
	Loopback Link
	// Alias maps a node name to the host in Hosts that stands for it: two
	// names of one host adapter (a node map's) are one host, whose ranks
	// talk through its loopback.
	Alias map[string]string
}

// Host is the platform's host for a node name: itself, or the host it is
// another name of (Alias).
func (p *Platform) Host(name string) string {
	if h, ok := p.Alias[name]; ok {
		return h
	}
	return name
}

// HostsOf is each rank's host on the platform, from its node name.
func (p *Platform) HostsOf(nodes []string) []string {
	if len(p.Alias) == 0 {
		return nodes
	}
	out := make([]string, len(nodes))
	for r, n := range nodes {
		out[r] = p.Host(n)
	}
	return out
}

// fitLoopback makes a loopback that asks for it no slower than the
// network (Link.NoSlowerThanNetwork): at least the fastest link's
// bandwidth, at most the quickest route's latency.
func (p *Platform) fitLoopback() {
	lo := &p.Loopback
	if !lo.NoSlowerThanNetwork {
		return
	}
	for _, l := range p.Links {
		lo.Bandwidth = max(lo.Bandwidth, l.Bandwidth)
	}
	for _, r := range p.Routes {
		lat := 0.0
		for _, u := range r {
			lat += p.Links[u.Link].Latency
		}
		lo.Latency = min(lo.Latency, lat)
	}
}

// LoopbackSlower says how the platform's loopback is slower than its
// network ("": it is not): its bandwidth below the fastest link's, or its
// latency above the quickest route's.
func (p *Platform) LoopbackSlower() string {
	var fast, quick float64
	quick = -1
	for _, l := range p.Links {
		fast = max(fast, l.Bandwidth)
	}
	for _, r := range p.Routes {
		lat := 0.0
		for _, u := range r {
			lat += p.Links[u.Link].Latency
		}
		if quick < 0 || lat < quick {
			quick = lat
		}
	}
	var out []string
	if p.Loopback.Bandwidth < fast {
		out = append(out, fmt.Sprintf("its bandwidth %s is below the fastest link's %s", Rate(p.Loopback.Bandwidth), Rate(fast)))
	}
	if quick >= 0 && p.Loopback.Latency > quick {
		out = append(out, fmt.Sprintf("its latency %s is above the quickest route's %s", Duration(p.Loopback.Latency), Duration(quick)))
	}
	return strings.Join(out, " and ")
}

// Rate writes a bandwidth as GB/s (MB/s below 1 GB/s), 3 significant
// digits.
func Rate(b float64) string {
	if b < 1e9 {
		return strconv.FormatFloat(b/1e6, 'g', 3, 64) + " MB/s"
	}
	return strconv.FormatFloat(b/1e9, 'g', 3, 64) + " GB/s"
}

// Duration writes seconds as ns, us, ms or s, 3 significant digits.
func Duration(s float64) string {
	switch {
	case s == 0:
		return "0 s"
	case s < 1e-6:
		return strconv.FormatFloat(s*1e9, 'g', 3, 64) + " ns"
	case s < 1e-3:
		return strconv.FormatFloat(s*1e6, 'g', 3, 64) + " us"
	case s < 1:
		return strconv.FormatFloat(s*1e3, 'g', 3, 64) + " ms"
	}
	return strconv.FormatFloat(s, 'g', 3, 64) + " s"
}

// Flat is a platform whose hosts each have one link to a non-blocking
// switch (latency split between the two links of a route), and loopback
// for ranks on one host.
func Flat(name string, hosts []string, cores map[string]int, latency, bandwidth float64, loopback Link) *Platform {
	p := &Platform{Name: name, Hosts: hosts, Cores: cores, Routes: map[[2]string][]Use{}, Loopback: loopback}
	for _, h := range hosts {
		p.Links = append(p.Links, Link{ID: "link-" + h, Bandwidth: bandwidth, Latency: latency / 2})
	}
	for i, a := range hosts {
		for j, b := range hosts {
			if i != j {
				p.Routes[[2]string{a, b}] = []Use{{i, true}, {j, false}}
			}
		}
	}
	if loopback.NoSlowerThanNetwork { // also with one host, no route
		p.Loopback.Bandwidth = max(loopback.Bandwidth, bandwidth)
		p.Loopback.Latency = min(loopback.Latency, latency)
	}
	p.fitLoopback()
	return p
}

// FromRoutes is the fabric as its forwarding tables route between the
// given hosts: every link a route crosses, at its width and speed, with
// hopLatency per link. lid maps a host name to its adapter's LID. Names
// of one adapter (a node map that maps a job's node to another node's
// adapter) are one host, the first of them in hosts (Alias), with the
// cores of all of them.
func FromRoutes(name string, routes *fabric.Routes, names []string, cores map[string]int, lid func(string) (fabric.LID, error),
	hopLatency float64, loopback Link) (*Platform, error) {
	p := &Platform{Name: name, Cores: map[string]int{}, Routes: map[[2]string][]Use{}, Loopback: loopback}
	topo := routes.Topology()
	index := map[string]int{}
	var hosts []string
	var lids []fabric.LID
	byLID := map[fabric.LID]string{}
	for _, h := range names {
		l, err := lid(h)
		if err != nil {
			return nil, fmt.Errorf("host %s: %w", h, err)
		}
		if first, ok := byLID[l]; ok {
			if p.Alias == nil {
				p.Alias = map[string]string{}
			}
			p.Alias[h] = first
			p.Cores[first] += cores[h]
			continue
		}
		byLID[l] = h
		hosts, lids = append(hosts, h), append(lids, l)
		p.Cores[h] = cores[h]
	}
	p.Hosts = hosts
	for i, a := range hosts {
		for j, b := range hosts {
			if i == j {
				continue
			}
			r, err := routes.Path(lids[i], lids[j])
			if err != nil {
				return nil, fmt.Errorf("route %s -> %s: %w", a, b, err)
			}
			var path []Use
			for _, hop := range r.Hops {
				out := fabric.PortRef{GUID: hop.GUID, Port: hop.Port}
				l, ok := topo.LinkAt(out)
				if !ok {
					return nil, fmt.Errorf("route %s -> %s: no link at %s", a, b, out)
				}
				k, seen := index[l.ID()]
				if !seen {
					k = len(p.Links)
					index[l.ID()] = k
					bw := l.Capacity()
					if bw <= 0 {
						return nil, fmt.Errorf("link %s: unknown width %q or speed %q", l.ID(), l.Width, l.Speed)
					}
					p.Links = append(p.Links, Link{ID: l.ID(), Bandwidth: bw, Latency: hopLatency})
				}
				path = append(path, Use{Link: k, Up: l.A == out})
			}
			if len(path) == 0 {
				return nil, fmt.Errorf("route %s -> %s: no link between LIDs %d and %d", a, b, lids[i], lids[j])
			}
			p.Routes[[2]string{a, b}] = path
		}
	}
	p.fitLoopback()
	return p, nil
}

// Scaled is the platform with every link (loopback included) at
// bandwidth x bw and latency x lat.
func (p *Platform) Scaled(name string, bw, lat float64) *Platform {
	q := *p
	q.Name = name
	q.Links = make([]Link, len(p.Links))
	for i, l := range p.Links {
		q.Links[i] = Link{ID: l.ID, Bandwidth: l.Bandwidth * bw, Latency: l.Latency * lat}
	}
	q.Loopback = Link{ID: p.Loopback.ID, Bandwidth: p.Loopback.Bandwidth * bw, Latency: p.Loopback.Latency * lat,
		PairBandwidth: p.Loopback.PairBandwidth * bw, From: p.Loopback.From}
	return &q
}

// With is the platform with every inter-host link at bandwidth bw (bytes
// per second, 0: unchanged) and latency lat per link (negative:
// unchanged); loopback stays.
func (p *Platform) With(name string, bw, lat float64) *Platform {
	q := p.Scaled(name, 1, 1)
	for i := range q.Links {
		if bw > 0 {
			q.Links[i].Bandwidth = bw
		}
		if lat >= 0 {
			q.Links[i].Latency = lat
		}
	}
	return q
}

// perfectBandwidth stands for infinite bandwidth: SimGrid needs a number.
const perfectBandwidth = 1e15

// Perfect is the platform with a perfect network: no latency, no
// bandwidth limit, between hosts and within them (MPInside's bound).
func (p *Platform) Perfect(name string) *Platform {
	q := p.With(name, perfectBandwidth, 0)
	q.Loopback = Link{ID: p.Loopback.ID, Bandwidth: perfectBandwidth, From: p.Loopback.From}
	return q
}

type xmlPlatform struct {
	XMLName xml.Name `xml:"platform"`
	Version string   `xml:"version,attr"`
	Zone    xmlZone  `xml:"zone"`
}

type xmlZone struct {
	ID      string     `xml:"id,attr"`
	Routing string     `xml:"routing,attr"`
	Hosts   []xmlHost  `xml:"host"`
	Links   []xmlLink  `xml:"link"`
	Routes  []xmlRoute `xml:"route"`
}

type xmlHost struct {
	ID    string `xml:"id,attr"`
	Speed string `xml:"speed,attr"`
	Core  int    `xml:"core,attr"`
}

type xmlLink struct {
	ID        string `xml:"id,attr"`
	Bandwidth string `xml:"bandwidth,attr"`
	Latency   string `xml:"latency,attr"`
	Sharing   string `xml:"sharing_policy,attr,omitempty"`
}

type xmlRoute struct {
	Src   string       `xml:"src,attr"`
	Dst   string       `xml:"dst,attr"`
	Sym   string       `xml:"symmetrical,attr"`
	Links []xmlLinkCtn `xml:"link_ctn"`
}

type xmlLinkCtn struct {
	ID        string `xml:"id,attr"`
	Direction string `xml:"direction,attr,omitempty"`
}

func bps(b float64) string { return strconv.FormatFloat(b, 'g', -1, 64) + "Bps" }
func sec(s float64) string { return strconv.FormatFloat(s, 'g', -1, 64) + "s" }

// WriteXML writes the platform as a SimGrid platform file (version 4.1,
// one zone with full routing; split-duplex links, each direction apart).
func (p *Platform) WriteXML(w io.Writer) error {
	z := xmlZone{ID: "netloom", Routing: "Full"}
	for _, h := range p.Hosts {
		c := max(p.Cores[h], 1)
		z.Hosts = append(z.Hosts, xmlHost{ID: h, Speed: strconv.FormatFloat(HostFlops, 'g', -1, 64) + "f", Core: c})
	}
	for i, l := range p.Links {
		z.Links = append(z.Links, xmlLink{ID: "l" + strconv.Itoa(i), Bandwidth: bps(l.Bandwidth), Latency: sec(l.Latency), Sharing: "SPLITDUPLEX"})
	}
	// loopback: one per host, shared by every transfer between its ranks
	// (SHARED: they copy through the node's one memory). A FATPIPE, as
	// SimGrid's own cluster loopback, gave each message in flight the
	// whole bandwidth: 64 messages of a window crossed a node 64 times as
	// fast as one (issue 42). With a PairBandwidth, each message also
	// crosses a FATPIPE at it: one message at a time goes at one pair's
	// bandwidth, many at once share the aggregate.
	for _, h := range p.Hosts {
		z.Links = append(z.Links, xmlLink{ID: "lo-" + h, Bandwidth: bps(p.Loopback.Bandwidth), Latency: sec(p.Loopback.Latency), Sharing: "SHARED"})
		route := xmlRoute{Src: h, Dst: h, Sym: "NO", Links: []xmlLinkCtn{{ID: "lo-" + h}}}
		if pb := p.Loopback.PairBandwidth; pb > 0 && pb < p.Loopback.Bandwidth {
			z.Links = append(z.Links, xmlLink{ID: "lop-" + h, Bandwidth: bps(pb), Latency: "0s", Sharing: "FATPIPE"})
			route.Links = append(route.Links, xmlLinkCtn{ID: "lop-" + h})
		}
		z.Routes = append(z.Routes, route)
	}
	keys := make([][2]string, 0, len(p.Routes))
	for k := range p.Routes {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	for _, k := range keys {
		if len(p.Routes[k]) == 0 { // SimGrid aborts on an empty route
			return fmt.Errorf("route %s -> %s: no links", k[0], k[1])
		}
		r := xmlRoute{Src: k[0], Dst: k[1], Sym: "NO"}
		for _, u := range p.Routes[k] {
			d := "DOWN"
			if u.Up {
				d = "UP"
			}
			r.Links = append(r.Links, xmlLinkCtn{ID: "l" + strconv.Itoa(u.Link), Direction: d})
		}
		z.Routes = append(z.Routes, r)
	}
	if _, err := io.WriteString(w, xml.Header+`<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">`+"\n"); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", " ")
	if err := enc.Encode(xmlPlatform{Version: "4.1", Zone: z}); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
