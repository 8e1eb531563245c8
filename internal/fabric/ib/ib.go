// Package ib reads an InfiniBand fabric through the local management stack:
// topology by libibnetdisc, port counters (PMA) and forwarding tables
// (SMP) by a pipelined umad engine, the way infiniband-diags talk to the
// fabric. It works against ibsim under the umad2sim preload library too.
package ib

/*
#cgo CFLAGS: -std=gnu11 -Wall -Wextra -Werror
#cgo LDFLAGS: -libnetdisc -libmad -libumad
#include <stdlib.h>
#include "mad.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/netloom/netloom/internal/fabric"
)

// Options choose the local port and bound management queries.
type Options struct {
	// CA is the local adapter name ("mlx5_0"); "" means the first.
	CA string
	// Port is the local port number; 0 means the first active one.
	Port int
	// Timeout bounds one query (SMP or PMA) before a retry; default 200ms.
	Timeout time.Duration
	// Retries per query after the first try; default 2.
	Retries int
	// Parallel is how many queries ForwardingTables and discovery keep in
	// flight; default 64 (discovery: 16).
	Parallel int
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = 200 * time.Millisecond
	}
	if o.Retries <= 0 {
		o.Retries = 2
	}
	if o.Parallel <= 0 {
		o.Parallel = 64
	}
	return o
}

// Source implements fabric.Source over the local umad port. Its methods
// are safe for concurrent use; queries are serialized on the port.
type Source struct {
	opt Options

	mu   sync.Mutex
	port *C.struct_nl_port
	// capTopo is the topology caps belongs to: the PMA capability mask
	// (ClassPortInfo) of each node is read once per topology.
	capTopo *fabric.Topology
	caps    map[fabric.GUID]uint16
	queries []C.struct_nl_query // reused between batches
	// maxWindow caps queries in flight whatever the caller asks; see
	// simulatorWindow.
	maxWindow int
	sim       bool // under umad2sim
}

var _ fabric.Source = (*Source)(nil)

// Open opens the local port.
func Open(opt Options) (*Source, error) {
	opt = opt.withDefaults()
	p, err := openPort(opt)
	if err != nil {
		return nil, err
	}
	sim := umad2sim()
	return &Source{opt: opt, port: p, maxWindow: simulatorWindow(sim), sim: sim}, nil
}

// MaxInFlight is the most queries the source keeps in flight, whatever
// SweepOptions.Parallel asks.
func (s *Source) MaxInFlight() int { return s.maxWindow }

// simulatorWindow is the most queries in flight that cannot deadlock
// under umad2sim, or C.NL_MAX_WINDOW on real hardware. ibsim and umad2sim
// talk over Unix datagram sockets that hold max_dgram_qlen messages (10 by
// default); ibsim spins when it cannot write a reply, and umad2sim's reader
// thread waits on a lock its blocked writer holds. So once both queues
// fill, everything stops: keep fewer in flight than both can hold, with
// room for other clients' MADs in ibsim's queue.
func simulatorWindow(sim bool) int {
	if !sim {
		return C.NL_MAX_WINDOW
	}
	qlen := 10
	if b, err := os.ReadFile("/proc/sys/net/unix/max_dgram_qlen"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 {
			qlen = n
		}
	}
	return max(1, min(3*qlen/2, C.NL_MAX_WINDOW))
}

func caName(ca string) string {
	if ca == "" {
		return "(first CA)"
	}
	return ca
}

func openPort(opt Options) (*C.struct_nl_port, error) {
	var cca *C.char
	if opt.CA != "" {
		cca = C.CString(opt.CA)
		defer C.free(unsafe.Pointer(cca))
	}
	var msg [256]C.char
	var stage, errno C.int
	p := C.nl_open(cca, C.int(opt.Port), &msg[0], C.int(len(msg)), &stage, &errno)
	if p == nil {
		if stage == 1 {
			return nil, &fabric.NoLocalPortError{Err: errors.New(C.GoString(&msg[0])), Reason: noPortReason(opt, syscall.Errno(errno), umad2sim())}
		}
		return nil, fmt.Errorf("ib: open port %s/%d: %s", caName(opt.CA), opt.Port, C.GoString(&msg[0]))
	}
	return p, nil
}

// umad2sim says whether the process runs under ibsim's umad2sim preload.
func umad2sim() bool { return strings.Contains(os.Getenv("LD_PRELOAD"), "umad2sim") }

// noPortReason says in words why the local port could not be opened.
func noPortReason(opt Options, errno syscall.Errno, sim bool) string {
	switch {
	case sim:
		return "under umad2sim: is ibsim running, and IBSIM_SOCKNAME its socket?"
	case errno == syscall.EACCES || errno == syscall.EPERM:
		return "no access to /dev/infiniband/umad*: run as root, or as a user the device files allow"
	case opt.CA != "" && (errno == syscall.ENODEV || errno == syscall.ENOENT || errno == syscall.EINVAL):
		return fmt.Sprintf("no adapter %q with port %d here: ibstat lists them", opt.CA, opt.Port)
	}
	return "no InfiniBand adapter, or the ib_umad kernel module is not loaded"
}

// Close releases the port.
func (s *Source) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.port != nil {
		C.nl_close(s.port)
		s.port = nil
	}
	return nil
}

// query is one MAD to send; the Go mirror of the C request fields.
type query struct {
	lid     fabric.LID
	class   uint8
	method  uint8
	attr    uint16
	mod     uint32
	in      [C.NL_IN_LEN]byte
	inBytes int
	// directed route (class classSMIDR): the port to leave by at each hop
	path []byte
}

// result is one query's outcome.
type result struct {
	err  error
	time time.Time
	out  []byte // NL_OUT_LEN bytes of reply data; valid until the next batch
}

// batch runs queries with at most window in flight in one cgo call. The
// caller holds s.mu. Canceling ctx stops it early.
func (s *Source) batch(ctx context.Context, qs []query, window int, timeout time.Duration, retries int) ([]result, error) {
	if s.port == nil {
		return nil, fmt.Errorf("ib: source is closed")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cap(s.queries) < len(qs) {
		s.queries = make([]C.struct_nl_query, len(qs))
	}
	cq := s.queries[:len(qs)]
	for i := range qs {
		q := &qs[i]
		c := &cq[i]
		*c = C.struct_nl_query{}
		c.dlid = C.uint16_t(q.lid)
		c.mgmt_class = C.uint8_t(q.class)
		c.method = C.uint8_t(q.method)
		c.attr_id = C.uint16_t(q.attr)
		c.attr_mod = C.uint32_t(q.mod)
		for j := 0; j < q.inBytes; j++ {
			c.in[j] = C.uint8_t(q.in[j])
		}
		c.dr_hops = C.uint8_t(len(q.path))
		for j, port := range q.path {
			c.dr_path[j+1] = C.uint8_t(port)
		}
	}
	res := make([]result, len(qs))
	if len(qs) == 0 {
		return res, nil
	}
	ms := int(timeout / time.Millisecond)
	if ms < 1 {
		ms = 1
	}
	window = max(1, min(window, s.maxWindow))
	C.nl_set_cancel(s.port, 0)
	stop := context.AfterFunc(ctx, func() { C.nl_set_cancel(s.port, 1) })
	C.nl_batch(s.port, &cq[0], C.int(len(cq)), C.int(window), C.int(ms), C.int(retries))
	stop()
	for i := range cq {
		c := &cq[i]
		r := &res[i]
		q := &qs[i]
		switch c.err {
		case C.NL_OK:
			r.time = time.Unix(0, int64(c.time_ns))
			r.out = unsafe.Slice((*byte)(unsafe.Pointer(&c.out[0])), len(c.out))
		case C.NL_ETIMEOUT:
			if c.sys_errno != 0 {
				r.err = fmt.Errorf("%s to %s: failed %d tries, last with umad status %d (%v)", q.name(), q.target(), c.tries, c.sys_errno, syscall.Errno(c.sys_errno))
			} else {
				r.err = fmt.Errorf("%s to %s: no reply after %d tries of %s", q.name(), q.target(), c.tries, timeout)
			}
		case C.NL_ESEND:
			r.err = fmt.Errorf("%s to %s: send: %w", q.name(), q.target(), syscall.Errno(c.sys_errno))
		case C.NL_ESTATUS:
			r.err = fmt.Errorf("%s to %s: MAD status 0x%04x", q.name(), q.target(), uint16(c.status))
		default:
			r.err = fmt.Errorf("%s to %s: %w", q.name(), q.target(), context.Cause(ctx))
		}
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	return res, nil
}

// target names where q goes: "LID 7", or a directed route "route 0,1,3".
func (q *query) target() string {
	if q.class != classSMIDR {
		return fmt.Sprintf("LID %d", q.lid)
	}
	var b strings.Builder
	b.WriteString("route 0")
	for _, p := range q.path {
		fmt.Fprintf(&b, ",%d", p)
	}
	return b.String()
}

func (q *query) name() string {
	verb := "get"
	if q.method == methodSet {
		verb = "set"
	}
	n := attrName(q.class, q.attr)
	if q.class == classPerf && q.attr != attrClassPortInfo {
		return fmt.Sprintf("%s %s port %d", verb, n, q.in[1])
	}
	if q.attr == attrLFT {
		return fmt.Sprintf("%s %s block %d", verb, n, q.mod)
	}
	return verb + " " + n
}

const (
	classSMI   = C.NL_CLASS_SMI
	classSMIDR = C.NL_CLASS_SMI_DR
	classPerf  = C.NL_CLASS_PERF
	methodGet  = C.NL_GET
	methodSet  = C.NL_SET

	attrClassPortInfo = 0x0001
	attrNodeDesc      = 0x0010
	attrNodeInfo      = 0x0011
	attrPortInfo      = 0x0015
	attrPortCounters  = 0x0012
	attrPortCountersX = 0x001D
	attrSwitchInfo    = 0x0012
	attrLFT           = 0x0019
)

func attrName(class uint8, attr uint16) string {
	switch {
	case attr == attrClassPortInfo:
		return "ClassPortInfo"
	case class == classPerf && attr == attrPortCounters:
		return "PortCounters"
	case class == classPerf && attr == attrPortCountersX:
		return "PortCountersExtended"
	case class != classPerf && attr == attrSwitchInfo:
		return "SwitchInfo"
	case class != classPerf && attr == attrNodeDesc:
		return "NodeDescription"
	case class != classPerf && attr == attrNodeInfo:
		return "NodeInfo"
	case class != classPerf && attr == attrPortInfo:
		return "PortInfo"
	case class == classSMI && attr == attrLFT:
		return "LinearForwardingTable"
	}
	return fmt.Sprintf("attribute 0x%04x", attr)
}
