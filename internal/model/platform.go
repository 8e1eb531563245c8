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

	"github.com/netloom/netloom/internal/fabric"
)

// HostFlops is the speed of every platform host: the agent writes compute
// gaps as flops at this rate (rank-N.ti.json's host_flops).
const HostFlops = 1e9

// The fabric platform's defaults: every link's latency on a route, and the
// loopback between ranks on one node (netloom model's --hop-latency and
// --loopback-*; the daemon's /model and netloom place use them as they are).
var (
	DefaultHopLatency = 100e-9
	DefaultLoopback   = Link{ID: "loopback", Bandwidth: 10e9, Latency: 300e-9}
)

// Link is one network resource: a fabric link (both directions apart) or
// a host's own link on a flat platform.
type Link struct {
	ID        string
	Bandwidth float64 // bytes per second, each direction
	Latency   float64 // seconds
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
	return p
}

// FromRoutes is the fabric as its forwarding tables route between the
// given hosts: every link a route crosses, at its width and speed, with
// hopLatency per link. lid maps a host name to its adapter's LID.
func FromRoutes(name string, routes *fabric.Routes, hosts []string, cores map[string]int, lid func(string) (fabric.LID, error),
	hopLatency float64, loopback Link) (*Platform, error) {
	p := &Platform{Name: name, Hosts: hosts, Cores: cores, Routes: map[[2]string][]Use{}, Loopback: loopback}
	topo := routes.Topology()
	index := map[string]int{}
	lids := make([]fabric.LID, len(hosts))
	for i, h := range hosts {
		l, err := lid(h)
		if err != nil {
			return nil, fmt.Errorf("host %s: %w", h, err)
		}
		lids[i] = l
	}
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
			p.Routes[[2]string{a, b}] = path
		}
	}
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
	q.Loopback = Link{ID: p.Loopback.ID, Bandwidth: p.Loopback.Bandwidth * bw, Latency: p.Loopback.Latency * lat}
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
	q.Loopback = Link{ID: p.Loopback.ID, Bandwidth: perfectBandwidth}
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
	// loopback: one per host, shared by its ranks
	for _, h := range p.Hosts {
		z.Links = append(z.Links, xmlLink{ID: "lo-" + h, Bandwidth: bps(p.Loopback.Bandwidth), Latency: sec(p.Loopback.Latency)})
		z.Routes = append(z.Routes, xmlRoute{Src: h, Dst: h, Sym: "NO", Links: []xmlLinkCtn{{ID: "lo-" + h}}})
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
