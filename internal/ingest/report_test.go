package ingest

import (
	"encoding/binary"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"
)

// FuzzReadProfile feeds offline profile files the agent did not write to
// the reader the daemon uses on a job's folder: it must refuse or accept
// without a panic, allocate no record longer than the file holds, and name
// the file in every error.
func FuzzReadProfile(f *testing.F) {
	prefix := func(n uint64, rest int) []byte {
		var b [binary.MaxVarintLen64]byte
		k := binary.PutUvarint(b[:], n)
		return append(b[:k], make([]byte, rest)...)
	}
	f.Add(prefix(1<<30, 4096)) // a 1 GiB length prefix in a 4 KiB file
	f.Add(prefix(1<<62, 16))
	f.Add(prefix(3, 3))
	f.Add([]byte{})
	f.Add([]byte("0 compute 1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fsys := fstest.MapFS{"job/rank-0.pb": {Data: b}}
		_, warnings, err := ReadProfileFS(fsys, "/traces/u", 1<<20)
		for _, w := range append(warnings, err) {
			if w != nil && !strings.Contains(w.Error(), "/traces/u") {
				t.Errorf("the error does not name the folder: %v", w)
			}
		}
	})
}

// A record's length prefix larger than the file is refused before the
// record is allocated (a 4 KiB file claiming 1 GiB allocated 1 GiB).
func TestReadProfileLengthBeyondFile(t *testing.T) {
	var b [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(b[:], 1<<30)
	fsys := fstest.MapFS{"rank-0.pb": {Data: append(b[:k], make([]byte, 4096)...)}}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, warnings, err := ReadProfileFS(fsys, "dir", 1<<30)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Errorf("read a profile from a bad record (warnings %v)", warnings)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Errorf("allocated %d MiB for a 4 KiB file", got>>20)
	}
}
