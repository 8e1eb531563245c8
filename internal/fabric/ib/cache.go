package ib

/*
#include <stdlib.h>
#include <infiniband/ibnetdisc.h>
*/
import "C"

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"unsafe"

	"github.com/netloom/netloom/internal/fabric"
)

// LoadCache returns the topology an ibnetdiscover cache file holds (the
// file `ibnetdiscover --cache FILE` or `netloom fabric discover --cache
// FILE` writes), read by libibnetdisc's own reader. It needs no port.
//
// libibnetdisc trusts the file: a record whose port number exceeds its
// node's port count makes it write past an array. So the file's layout is
// checked first, and a file that does not hold together is refused with
// the record at fault, before libibnetdisc sees it.
func LoadCache(path string) (*fabric.Topology, error) {
	if err := checkCache(path); err != nil {
		return nil, fmt.Errorf("ib: cache %s: %w", path, err)
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	f := C.ibnd_load_fabric(cpath, 0)
	if f == nil {
		return nil, fmt.Errorf("ib: cache %s: libibnetdisc could not load it (a port names a node or port the file lacks)", path)
	}
	defer C.ibnd_destroy_fabric(f)
	t, err := convert(f)
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

// checkCache walks the records of a cache file and reports the first one
// that does not fit: a wrong magic number or version, a file shorter or
// longer than its counts say, a node with a port key beyond its ports.
func checkCache(path string) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	r := bufio.NewReaderSize(fh, 1<<16)
	var off int64
	read := func(b []byte, what string) error {
		n, err := io.ReadFull(r, b)
		off += int64(n)
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return fmt.Errorf("truncated: the file ends at byte %d, inside %s", off, what)
		}
		return err
	}
	hdr := make([]byte, cacheHeaderLen)
	if err := read(hdr, "the header"); err != nil {
		return err
	}
	le := binary.LittleEndian
	if m := le.Uint32(hdr[0:]); m != cacheMagic {
		return fmt.Errorf("not an ibnetdiscover cache: magic number 0x%08x, want 0x%08x", m, cacheMagic)
	}
	if v := le.Uint32(hdr[4:]); v != cacheVersion {
		return fmt.Errorf("cache format version %d, want %d", v, cacheVersion)
	}
	nodes, ports := le.Uint32(hdr[8:]), le.Uint32(hdr[12:])
	if nodes == 0 {
		return fmt.Errorf("the header counts no nodes")
	}
	node := make([]byte, cacheNodeLen)
	keys := make([]byte, 255*cachePortKeyLen)
	for i := uint32(0); i < nodes; i++ {
		what := fmt.Sprintf("node record %d of %d", i+1, nodes)
		if err := read(node, what); err != nil {
			return err
		}
		numPorts := int(node[4+smpDataSize+8+1])
		stored := int(node[cacheNodeLen-1])
		k := keys[:stored*cachePortKeyLen]
		if err := read(k, what); err != nil {
			return err
		}
		for j := 0; j < stored; j++ {
			if p := int(k[j*cachePortKeyLen+8]); p > numPorts {
				return fmt.Errorf("%s (GUID 0x%016x, byte %d): port %d, but the node has %d ports",
					what, le.Uint64(node[4+smpDataSize:]), off, p, numPorts)
			}
		}
	}
	port := make([]byte, cachePortLen)
	for i := uint32(0); i < ports; i++ {
		if err := read(port, fmt.Sprintf("port record %d of %d", i+1, ports)); err != nil {
			return err
		}
	}
	if n, _ := r.Read(make([]byte, 1)); n > 0 {
		return fmt.Errorf("%d bytes follow the last of the %d port records the header counts", fileSize(fh)-off, ports)
	}
	return nil
}

func fileSize(f *os.File) int64 {
	st, err := f.Stat()
	if err != nil {
		return 0
	}
	return st.Size()
}
