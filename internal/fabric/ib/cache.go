package ib

/*
#include <stdlib.h>
#include <infiniband/ibnetdisc.h>
*/
import "C"

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"github.com/netloom/netloom/internal/fabric"
)

// LoadCache returns the topology an ibnetdiscover cache file holds (the
// file `ibnetdiscover --cache FILE` or `netloom fabric discover --cache
// FILE` writes). It needs no port.
//
// The file is read here, not by libibnetdisc's ibnd_load_fabric, for two
// reasons measured and read in its source: that reader finds each port in
// hash chains of 137 buckets where all of a switch's ports share one, so
// its time grows with the square of the fabric (half of a 6,400-host
// load), and it trusts the file, writing past an array when a port number
// exceeds its node's port count. This reader is linear, and refuses a
// file that does not hold together with the record at fault.
func LoadCache(path string) (*fabric.Topology, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ib: cache: %w", err)
	}
	raw, err := decodeCache(data)
	if err != nil {
		return nil, fmt.Errorf("ib: cache %s: %w", path, err)
	}
	t, err := build(raw)
	if err != nil {
		return nil, fmt.Errorf("ib: cache %s: %w", path, err)
	}
	return t, nil
}

// writeCache writes f to path in ibnetdiscover's cache format with
// libibnetdisc's own writer, through a temporary file in the same folder
// renamed into place, so a reader never sees half a cache.
func writeCache(f *C.ibnd_fabric_t, path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("ib: write cache %s: %w", path, err)
	}
	name := tmp.Name()
	tmp.Close()
	defer os.Remove(name) // after a successful rename there is nothing left to remove
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	// The default flag lets libibnetdisc replace the empty file we made.
	if C.ibnd_cache_fabric(f, cname, C.IBND_CACHE_FABRIC_FLAG_DEFAULT) != 0 {
		return fmt.Errorf("ib: write cache %s: libibnetdisc could not write %s", path, name)
	}
	if err := os.Rename(name, path); err != nil {
		return fmt.Errorf("ib: write cache %s: %w", path, err)
	}
	return nil
}

// The cache layout, as libibnetdisc writes it (little endian): a header,
// then node records, then port records.
const (
	cacheMagic      = 0x8FE7832B
	cacheVersion    = 1
	cacheHeaderLen  = 28
	smpDataSize     = 64
	cacheNodeLen    = 15 + 3*smpDataSize // before the node's port keys
	cachePortKeyLen = 9                  // port GUID, port number
	cachePortLen    = 31 + smpDataSize
)

// portKey names a port record of a cache file: port GUID and number (a
// switch's ports share its GUID).
type portKey struct {
	guid uint64
	num  uint8
}

func (k portKey) String() string { return fmt.Sprintf("0x%016x:%d", k.guid, k.num) }

// decodeCache reads the records of a cache file and joins them: each
// node's ports by the keys it lists, each port's link by its remote key.
// It reports the first thing that does not fit: a wrong magic number or
// version, a file shorter or longer than its counts say, a port beyond
// its node's port count, a key that names no record.
func decodeCache(data []byte) ([]rawNode, error) {
	le := binary.LittleEndian
	if len(data) < cacheHeaderLen {
		return nil, fmt.Errorf("truncated: the file ends at byte %d, inside the header (%d bytes)", len(data), cacheHeaderLen)
	}
	if m := le.Uint32(data[0:]); m != cacheMagic {
		return nil, fmt.Errorf("not an ibnetdiscover cache: magic number 0x%08x, want 0x%08x", m, cacheMagic)
	}
	if v := le.Uint32(data[4:]); v != cacheVersion {
		return nil, fmt.Errorf("cache format version %d, want %d", v, cacheVersion)
	}
	nNodes, nPorts := int(le.Uint32(data[8:])), int(le.Uint32(data[12:]))
	from := le.Uint64(data[16:])
	if nNodes == 0 {
		return nil, fmt.Errorf("the header counts no nodes")
	}
	off := cacheHeaderLen
	// what names the record being read, for errors only (a Sprintf per
	// record was a tenth of loading a 6,400-host cache).
	need := func(n int, what func() string) error {
		if off+n > len(data) {
			return fmt.Errorf("truncated: the file ends at byte %d, inside %s", len(data), what())
		}
		return nil
	}
	// Counts from the header bound nothing until the records are there.
	nodes := make([]rawNode, 0, min(nNodes, len(data)/cacheNodeLen))
	keys := make([][]portKey, 0, cap(nodes))
	nodeIndex := make(map[uint64]int, cap(nodes))
	for i := 0; i < nNodes; i++ {
		what := func() string { return fmt.Sprintf("node record %d of %d", i+1, nNodes) }
		if err := need(cacheNodeLen, what); err != nil {
			return nil, err
		}
		rec := data[off : off+cacheNodeLen]
		n := rawNode{
			smaLID:   le.Uint16(rec[0:]),
			guid:     le.Uint64(rec[68:]),
			typ:      int(rec[76]),
			numPorts: int(rec[77]),
			desc:     cString(rec[78+smpDataSize : 78+2*smpDataSize]),
		}
		stored := int(rec[cacheNodeLen-1])
		off += cacheNodeLen
		if err := need(stored*cachePortKeyLen, what); err != nil {
			return nil, err
		}
		ks := make([]portKey, stored)
		for j := range ks {
			k := data[off+j*cachePortKeyLen:]
			ks[j] = portKey{le.Uint64(k), k[8]}
			if int(ks[j].num) > n.numPorts {
				return nil, fmt.Errorf("%s (GUID 0x%016x, byte %d): port %d, but the node has %d ports",
					what(), n.guid, off+j*cachePortKeyLen+8, ks[j].num, n.numPorts)
			}
		}
		off += stored * cachePortKeyLen
		if _, dup := nodeIndex[n.guid]; dup {
			return nil, fmt.Errorf("%s: node GUID 0x%016x appears twice", what(), n.guid)
		}
		nodeIndex[n.guid] = len(nodes)
		n.ports = make([]*rawPort, n.numPorts+1)
		nodes = append(nodes, n)
		keys = append(keys, ks)
	}
	if _, ok := nodeIndex[from]; !ok {
		return nil, fmt.Errorf("the header's starting node 0x%016x has no node record", from)
	}
	type portRec struct {
		port   *rawPort
		owner  uint64
		remote portKey
		used   bool
	}
	ports := make(map[portKey]*portRec, min(nPorts, len(data)/cachePortLen))
	order := make([]*portRec, 0, cap(nodes))
	for i := 0; i < nPorts; i++ {
		what := func() string { return fmt.Sprintf("port record %d of %d", i+1, nPorts) }
		if err := need(cachePortLen, what); err != nil {
			return nil, err
		}
		rec := data[off : off+cachePortLen]
		k := portKey{le.Uint64(rec[0:]), rec[8]}
		pr := &portRec{
			port:   &rawPort{guid: k.guid, lid: le.Uint16(rec[10:]), info: rec[13 : 13+smpDataSize]},
			owner:  le.Uint64(rec[13+smpDataSize:]),
			remote: portKey{le.Uint64(rec[22+smpDataSize:]), rec[30+smpDataSize]},
		}
		pr.port.linked = rec[21+smpDataSize] != 0
		if _, dup := ports[k]; dup {
			return nil, fmt.Errorf("%s (byte %d): port %s appears twice", what(), off, k)
		}
		if _, ok := nodeIndex[pr.owner]; !ok {
			return nil, fmt.Errorf("%s (byte %d): port %s belongs to node 0x%016x, which has no node record", what(), off, k, pr.owner)
		}
		ports[k] = pr
		order = append(order, pr)
		off += cachePortLen
	}
	if off != len(data) {
		return nil, fmt.Errorf("%d bytes follow the last of the %d port records the header counts", len(data)-off, nPorts)
	}
	for i, pr := range order {
		if !pr.port.linked {
			continue
		}
		r, ok := ports[pr.remote]
		if !ok {
			return nil, fmt.Errorf("port record %d of %d: its link leads to port %s, which has no port record", i+1, nPorts, pr.remote)
		}
		pr.port.remoteNode, pr.port.remotePort = r.owner, int(pr.remote.num)
	}
	for i := range nodes {
		for _, k := range keys[i] {
			pr, ok := ports[k]
			if !ok {
				return nil, fmt.Errorf("node record %d of %d (GUID 0x%016x): port %s has no port record", i+1, nNodes, nodes[i].guid, k)
			}
			if pr.used {
				return nil, fmt.Errorf("node record %d of %d (GUID 0x%016x): port %s is another node's too", i+1, nNodes, nodes[i].guid, k)
			}
			pr.used = true
			nodes[i].ports[k.num] = pr.port
		}
	}
	return nodes, nil
}

// cString is a NUL-terminated string in a fixed field.
func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}
