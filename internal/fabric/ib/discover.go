package ib

/*
#include <stdlib.h>
#include <string.h>
#include <infiniband/ibnetdisc.h>
#include <infiniband/mad.h>
#include "mad.h"

static ibnd_port_t *nl_node_port(ibnd_node_t *n, int i) { return n->ports[i]; }

static ibnd_fabric_t *nl_discover(char *ca, int port, unsigned max_smps, unsigned timeout_ms,
				  unsigned retries)
{
	ibnd_config_t cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.max_smps = max_smps;
	cfg.timeout_ms = timeout_ms;
	cfg.retries = retries;
	return ibnd_discover_fabric(ca, port, NULL, &cfg);
}
*/
import "C"

import (
	"context"
	"fmt"
	"slices"
	"unsafe"

	"github.com/netloom/netloom/internal/fabric"
)

// Discover walks the fabric from the local port with directed-route SMPs
// on the pipelined engine (see walk): its time grows linearly with the
// fabric, and canceling ctx stops it between steps.
func (s *Source) Discover(ctx context.Context) (*fabric.Topology, error) {
	if err := s.lockOpen(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	return s.walk(ctx)
}

// lockOpen takes the source for one operation, when ctx is not done and
// the port is open; the caller unlocks s.mu when it returns nil.
func (s *Source) lockOpen(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.port == nil {
		s.mu.Unlock()
		return fmt.Errorf("ib: source is closed")
	}
	return nil
}

// DiscoverCache discovers the fabric with libibnetdisc and also writes
// what it found to the file cache in ibnetdiscover's cache format (as
// `ibnetdiscover --cache` does, with libibnetdisc's own writer), for
// LoadCache, `ibnetdiscover --load-cache` and `ibqueryerrors --load-cache`
// to reuse; "" writes none. libibnetdisc's walk costs more than Discover's
// on big fabrics (it files every port of a switch in one chain of a
// 137-bucket hash table) and cannot be canceled once started.
func (s *Source) DiscoverCache(ctx context.Context, cache string) (*fabric.Topology, error) {
	if err := s.lockOpen(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	// libibnetdisc opens its own port. Under umad2sim, replies go to the
	// agent that registered a class last, even once its port is closed,
	// and a closed port's agents stay allocated to the next port opened
	// with its fd. So: close ours, let libibnetdisc run, open ours again
	// and, under umad2sim, free the agents libibnetdisc left behind. On
	// real hardware this costs one reopen.
	C.nl_close(s.port)
	s.port = nil
	defer func() {
		if s.port != nil && s.sim {
			C.nl_unregister_others(s.port)
		}
	}()
	var cca *C.char
	if s.opt.CA != "" {
		cca = C.CString(s.opt.CA)
		defer C.free(unsafe.Pointer(cca))
	}
	smps := min(s.opt.Parallel, 16)
	f := C.nl_discover(cca, C.int(s.opt.Port), C.unsigned(smps),
		C.unsigned(s.opt.Timeout/1e6), C.unsigned(s.opt.Retries))
	p, err := openPort(s.opt)
	if err != nil {
		if f != nil {
			C.ibnd_destroy_fabric(f)
		}
		return nil, fmt.Errorf("ib: discover: reopening the port: %w", err)
	}
	s.port = p
	if f == nil {
		return nil, fmt.Errorf("ib: discover from %s port %d: ibnd_discover_fabric failed", caName(s.opt.CA), s.opt.Port)
	}
	defer C.ibnd_destroy_fabric(f)
	t, err := convert(f)
	if err != nil {
		return nil, err
	}
	if cache != "" {
		if err := writeCache(f, cache); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// rawNode is a node as libibnetdisc holds it and its cache file stores
// it, before it becomes a fabric.Node.
type rawNode struct {
	guid     uint64
	typ      int
	desc     string
	numPorts int
	smaLID   uint16
	ports    []*rawPort // by port number, 0..numPorts; nil where none
}

// rawPort is one port of a rawNode: its PortInfo and where it leads.
type rawPort struct {
	guid    uint64
	lid     uint16
	info    []byte // PortInfo, 64 bytes
	extInfo []byte // Mellanox ExtendedPortInfo, 64 bytes, or nil
	// the port at the other end of the link, if any
	remoteNode uint64
	remotePort int
	linked     bool
}

// convert turns libibnetdisc's node list into the fabric model.
func convert(f *C.ibnd_fabric_t) (*fabric.Topology, error) {
	var raw []rawNode
	for n := f.nodes; n != nil; n = n.next {
		rn := rawNode{
			guid:     uint64(n.guid),
			typ:      int(n._type),
			desc:     C.GoString(&n.nodedesc[0]),
			numPorts: int(n.numports),
			smaLID:   uint16(n.smalid),
			ports:    make([]*rawPort, int(n.numports)+1),
		}
		for i := range rn.ports {
			p := C.nl_node_port(n, C.int(i))
			if p == nil {
				continue
			}
			rp := &rawPort{
				guid:    uint64(p.guid),
				lid:     uint16(p.base_lid),
				info:    C.GoBytes(unsafe.Pointer(&p.info[0]), C.int(len(p.info))),
				extInfo: C.GoBytes(unsafe.Pointer(&p.ext_info[0]), C.int(len(p.ext_info))),
			}
			if r := p.remoteport; r != nil && r.node != nil {
				rp.remoteNode, rp.remotePort, rp.linked = uint64(r.node.guid), int(r.portnum), true
			}
			rn.ports[i] = rp
		}
		raw = append(raw, rn)
	}
	return build(raw)
}

// build turns raw nodes into the fabric model, in time linear in the
// nodes and ports.
func build(raw []rawNode) (*fabric.Topology, error) {
	nodes := make([]fabric.Node, 0, len(raw))
	var links []fabric.Link
	seen := map[[2]fabric.PortRef]int{} // index in links
	for _, n := range raw {
		node := fabric.Node{
			GUID:        fabric.GUID(n.guid),
			Description: n.desc,
			Ports:       n.numPorts,
		}
		switch n.typ {
		case C.IB_NODE_SWITCH:
			node.Type = fabric.Switch
			node.LID = fabric.LID(n.smaLID)
		case C.IB_NODE_ROUTER:
			node.Type = fabric.Router
		default:
			node.Type = fabric.CA
		}
		if node.Type != fabric.Switch {
			node.PortLIDs = make([]fabric.LID, node.Ports+1)
			node.PortGUIDs = make([]fabric.GUID, node.Ports+1)
		}
		// Extended link speeds are advertised in the capability mask of
		// a switch's port 0 or of the CA port itself.
		var swCap uint32
		if node.Type == fabric.Switch && len(n.ports) > 0 && n.ports[0] != nil {
			swCap = uint32(portFieldsOf(n.ports[0]).capmask)
		}
		for i := 1; i <= node.Ports && i < len(n.ports); i++ {
			p := n.ports[i]
			if p == nil {
				continue
			}
			if node.Type != fabric.Switch {
				node.PortLIDs[i] = fabric.LID(p.lid)
				node.PortGUIDs[i] = fabric.GUID(p.guid)
				if node.LID == 0 && p.lid != 0 && p.linked {
					node.LID = fabric.LID(p.lid)
				}
			}
			if !p.linked {
				continue
			}
			f := portFieldsOf(p)
			capMask := swCap
			if node.Type != fabric.Switch {
				capMask = uint32(f.capmask)
			}
			l := fabric.NewLink(
				fabric.PortRef{GUID: node.GUID, Port: i},
				fabric.PortRef{GUID: fabric.GUID(p.remoteNode), Port: p.remotePort},
				width(&f), speed(&f, capMask), state(&f))
			w, s := capable(&f, capMask)
			k := [2]fabric.PortRef{l.A, l.B}
			if at, ok := seen[k]; ok {
				// the other end: the link can do what both ends can
				links[at].MaxWidth = lower(links[at].MaxWidth, w, widthOrder)
				links[at].MaxSpeed = lower(links[at].MaxSpeed, s, speedOrder)
			} else {
				seen[k] = len(links)
				l.MaxWidth, l.MaxSpeed = w, s
				links = append(links, l)
			}
		}
		if node.Type != fabric.Switch && node.LID == 0 {
			for _, l := range node.PortLIDs {
				if l != 0 {
					node.LID = l
					break
				}
			}
		}
		nodes = append(nodes, node)
	}
	t, err := fabric.NewTopology(nodes, links)
	if err != nil {
		return nil, fmt.Errorf("ib: discovered fabric: %w", err)
	}
	return t, nil
}

// field reads a PortInfo field with libibmad's decoder.
func field(info []byte, f C.enum_MAD_FIELDS) uint32 {
	if len(info) < smpDataSize {
		return 0
	}
	return uint32(C.mad_get_field(unsafe.Pointer(&info[0]), 0, f))
}

// portFieldsOf decodes what the topology needs of p's PortInfo (and
// Mellanox ExtendedPortInfo) in one cgo call.
func portFieldsOf(p *rawPort) C.struct_nl_port_fields {
	var f C.struct_nl_port_fields
	if len(p.info) < smpDataSize {
		return f
	}
	var ext unsafe.Pointer
	if len(p.extInfo) >= smpDataSize {
		ext = unsafe.Pointer(&p.extInfo[0])
	}
	C.nl_port_fields(unsafe.Pointer(&p.info[0]), ext, &f)
	return f
}

// width names PortInfo.LinkWidthActive the way ibnetdiscover prints it.
func width(f *C.struct_nl_port_fields) string {
	switch f.width_active {
	case 1:
		return "1X"
	case 2:
		return "4X"
	case 4:
		return "8X"
	case 8:
		return "12X"
	case 16:
		return "2X"
	}
	return "unknown"
}

// capHasExtSpeeds is PortInfo.CapabilityMask.IsExtendedSpeedsSupported.
const capHasExtSpeeds = 1 << 14

// speed names the active link speed: an extended speed (FDR and later)
// when the port supports and uses one, else FDR10 (Mellanox extended
// PortInfo), else the base speed.
func speed(f *C.struct_nl_port_fields, capMask uint32) string {
	if capMask&capHasExtSpeeds != 0 {
		switch f.speed_ext_active {
		case 1:
			return "FDR"
		case 2:
			return "EDR"
		case 4:
			return "HDR"
		case 8:
			return "NDR"
		}
	}
	if f.mlnx_speed_active == 1 {
		return "FDR10"
	}
	switch f.speed_active {
	case 1:
		return "SDR"
	case 2:
		return "DDR"
	case 4:
		return "QDR"
	}
	return "unknown"
}

// Link widths and speeds, slowest first, by their PortInfo bit (IBA
// 14.2.5.6: LinkWidthSupported/Enabled, LinkSpeedSupported/Enabled,
// LinkSpeedExtSupported/Enabled).
type bitName struct {
	bit  C.uint32_t
	name string
}

var (
	widthOrder = []string{"1X", "2X", "4X", "8X", "12X"}
	speedOrder = []string{"SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR"}
	// fastest first
	widthBits = []bitName{{8, "12X"}, {4, "8X"}, {2, "4X"}, {16, "2X"}, {1, "1X"}}
	speedBits = []bitName{{4, "QDR"}, {2, "DDR"}, {1, "SDR"}}
	extBits   = []bitName{{8, "NDR"}, {4, "HDR"}, {2, "EDR"}, {1, "FDR"}}
)

// best is the fastest of the names whose bits are set in mask (bits:
// fastest first).
func best(mask C.uint32_t, bits []bitName) string {
	for _, b := range bits {
		if mask&b.bit != 0 {
			return b.name
		}
	}
	return ""
}

// lower is the slower of two names ("" when either is unknown).
func lower(a, b string, order []string) string {
	if a == "" || b == "" {
		return ""
	}
	if slices.Index(order, b) < slices.Index(order, a) {
		return b
	}
	return a
}

// capable is the widest width and fastest speed the port both supports
// and has enabled: extended speeds when its capability mask says so, else
// FDR10 (Mellanox ExtendedPortInfo), else the base speeds. "" when the
// port's PortInfo does not say.
func capable(f *C.struct_nl_port_fields, capMask uint32) (string, string) {
	w := best(f.width_supported&f.width_enabled, widthBits)
	s := best(f.speed_supported&f.speed_enabled, speedBits)
	if f.mlnx_speed_supported&f.mlnx_speed_enabled&1 != 0 {
		s = "FDR10"
	}
	if capMask&capHasExtSpeeds != 0 {
		if ext := best(f.speed_ext_supported&f.speed_ext_enabled, extBits); ext != "" {
			s = ext
		}
	}
	if w == "" || s == "" {
		return "", ""
	}
	return w, s
}

func state(f *C.struct_nl_port_fields) string {
	switch f.state {
	case 1:
		return "Down"
	case 2:
		return "Init"
	case 3:
		return "Armed"
	case 4:
		return "Active"
	}
	return "unknown"
}
