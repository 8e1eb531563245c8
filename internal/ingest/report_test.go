package ingest

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"

	"google.golang.org/protobuf/encoding/protowire"
)

// FuzzReadProfile feeds offline profile files the agent did not write to
// the reader the daemon uses on a job's folder: it must refuse or accept
// without a panic, allocate no record longer than the file holds, name the
// folder in every error, and give a bad file's fault as a *ProfileError
// naming the file and its rank, with no empty part (no "::", ": :", "()").
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
	rec := profileRecordBytes(f, 0, 1, 0)
	f.Add(rec)                                                                      // a valid profile
	f.Add(rec[:len(rec)/2])                                                         // cut short
	f.Add(rec[:1])                                                                  // cut inside the length prefix
	f.Add(append(append([]byte{}, rec...), "garbage!!"...))                         // a valid record, then garbage
	f.Add(append(append([]byte{}, rec...), rec[:len(rec)-9]...))                    // a valid record, then one cut short
	f.Add(profileRecordBytes(f, 3, 4, 0))                                           // another rank's record
	f.Add(protowire.AppendBytes(nil, []byte{0x08, 0x80}))                           // a field cut inside the record
	f.Add(protowire.AppendBytes(nil, []byte("hello world")))                        // not a Datagram
	f.Add([]byte{0x00, 0x0a})                                                       // a 0-byte record
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}) // a prefix beyond 64 bits
	f.Add(protowire.AppendBytes(nil, []byte{0x0f, 0x01}))                           // wire type 7
	f.Add(randomBytes(4096))
	f.Fuzz(func(t *testing.T, b []byte) {
		fsys := fstest.MapFS{"job/rank-0.pb": {Data: b}}
		_, warnings, err := ReadProfileFS(fsys, "/traces/u", 1<<20)
		for _, w := range append(warnings, err) {
			if w == nil {
				continue
			}
			msg := w.Error()
			if !strings.Contains(msg, "/traces/u") {
				t.Errorf("the error does not name the folder: %v", w)
			}
			for _, empty := range []string{"::", ": :", "()", ": )", ":\n", " ,"} {
				if strings.Contains(msg, empty) {
					t.Errorf("the error has an empty part (%q): %v", empty, w)
				}
			}
		}
		if len(warnings) > 0 || err != nil {
			pe := RankFileError(append(warnings, err), 0)
			if pe == nil || pe.File != "/traces/u/job/rank-0.pb" || pe.Rank != 0 || pe.Fault == "" || pe.Detail == "" {
				t.Errorf("no *ProfileError of rank 0's file among %v, %v: %+v", warnings, err, pe)
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

// profileRecordBytes is rank's final snapshot (seq) of a world-rank job
// "j" as the agent writes it to its profile file: a varint length, then
// the Datagram.
func profileRecordBytes(t testing.TB, rank, world int, seq uint64) []byte {
	return protowire.AppendBytes(nil, encode(t, snapshot("j", rank, world, seq, true)))
}

// Each bad rank file gets an error naming the file and what is wrong with
// it, word for word; the other ranks are read, and so are the records
// before the fault.
func TestReadProfileBadFiles(t *testing.T) {
	rec := profileRecordBytes(t, 1, 3, 0)  // 323 bytes: a 2-byte prefix and 321 bytes
	rec2 := profileRecordBytes(t, 1, 3, 1) // the snapshot after it, 329 bytes
	cat := func(bs ...[]byte) []byte {
		var r []byte
		for _, b := range bs {
			r = append(r, b...)
		}
		return r
	}
	if len(rec) != 323 || len(rec2) != 329 {
		t.Fatalf("records of %d and %d bytes: the messages below count on 323 and 329", len(rec), len(rec2))
	}
	for _, c := range []struct {
		name   string
		data   []byte
		fault  ProfileFault
		record int
		read   int // records read before the fault
		want   string
	}{
		{"cut short", rec[:161], ProfileCutShort, 1, 0, "cut short: the record says 321 bytes, 159 are there"},
		{"cut inside the length prefix", rec[:1], ProfileCutShort, 1, 0, "cut short: the file ends inside the record's length prefix"},
		{"zero-length file", nil, ProfileEmpty, 0, 0, "empty (0 bytes): the rank wrote no record"},
		{"length prefix beyond the file", cat(protowire.AppendVarint(nil, 5321), rec[2:]), ProfileCutShort, 1, 0,
			"cut short: the record says 5,321 bytes, 321 are there"},
		{"length prefix beyond the file, then not a Datagram", cat(protowire.AppendVarint(nil, 5321), make([]byte, 1200)), ProfileNotNetloom, 1, 0,
			"not a Netloom profile (bad length prefix: the record says 5,321 bytes, the file holds 1,200 after it)"},
		{"length prefix beyond any record", protowire.AppendVarint(nil, 1<<40), ProfileNotNetloom, 1, 0,
			"not a Netloom profile (bad length prefix: the record says 1,099,511,627,776 bytes, more than the 1,048,576 a record may hold)"},
		{"length prefix beyond 64 bits", cat(bytesOf(0xff, 10), rec), ProfileNotNetloom, 1, 0, "not a Netloom profile (bad length prefix: more than 64 bits)"},
		{"zero-length record", []byte{0, 1, 2}, ProfileNotNetloom, 1, 0, "not a Netloom profile (bad length prefix: the record says 0 bytes)"},
		{"text", []byte("0 compute 1\n"), ProfileNotNetloom, 1, 0,
			"not a Netloom profile (bad length prefix: the record says 48 bytes, the file holds 11 after it)"},
		{"not a Datagram", []byte("\x0chello world!"), ProfileNotNetloom, 1, 0,
			"not a Netloom profile (the record is not a Datagram: field 13 (regions) at byte 1 is a varint, not length-delimited)"},
		{"a field cut inside the record", []byte{2, 0x08, 0x80}, ProfileNotNetloom, 1, 0,
			"not a Netloom profile (the record is not a Datagram: field 1 (version) at byte 1 runs past the record's end)"},
		{"a valid record, then garbage", cat(rec, []byte("garbage!!")), ProfileNotNetloom, 2, 1,
			"garbage after record 1, at byte 323 (bad length prefix: it says 103 bytes, the file holds 8 after it); record 1 was read"},
		{"two valid records, then one cut short", cat(rec, rec2, rec2[:60]), ProfileCutShort, 3, 2,
			"cut short: record 3 (at byte 652) says 327 bytes, 58 are there; records 1-2 were read"},
		{"another rank's record", profileRecordBytes(t, 2, 3, 0), ProfileWrongRank, 1, 0, "holds rank 2's profile (job j), not rank 1's"},
		{"a record the daemon refuses", profileRecordBytes(t, 5, 3, 0), ProfileRefused, 1, 0,
			"the record was refused (bad_rank): job j: rank 5 of world size 3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fsys := fstest.MapFS{"job/rank-0.pb": {Data: profileRecordBytes(t, 0, 3, 0)}, "job/rank-1.pb": {Data: c.data},
				"job/rank-2.pb": {Data: profileRecordBytes(t, 2, 3, 0)}}
			j, warnings, err := ReadProfileFS(fsys, "/p", 1<<20)
			if err != nil {
				t.Fatalf("the other ranks were not read: %v", err)
			}
			want := []string{"/p/job/rank-1.pb: " + c.want}
			if c.read == 0 {
				want = append(want, "1 of 3 ranks have no profile: rank 1 (bad file)")
			}
			if got := errorStrings(warnings); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("warnings:\n got %q\nwant %q", got, want)
			}
			if want := 2 + min(c.read, 1); j.Reporting != want {
				t.Errorf("%d ranks reported, want %d", j.Reporting, want)
			}
			var pe *ProfileError
			if !errors.As(warnings[0], &pe) || pe.File != "/p/job/rank-1.pb" || pe.Rank != 1 || pe.Fault != c.fault || pe.Record != c.record || pe.Read != c.read {
				t.Errorf("the warning as a *ProfileError: %+v", pe)
			}
			if got := RankFileError(warnings, 1); got != pe {
				t.Errorf("RankFileError(warnings, 1) = %v", got)
			}
			if got := RankFileError(warnings, 0); got != nil {
				t.Errorf("RankFileError(warnings, 0) = %v, rank 0's file is good", got)
			}
			var re *RejectError
			if got := errors.As(warnings[0], &re); got != (c.fault == ProfileRefused) {
				t.Errorf("the refusal's *RejectError: %v", re)
			}
		})
	}
}

func bytesOf(b byte, n int) []byte { return []byte(strings.Repeat(string([]byte{b}), n)) }

func errorStrings(errs []error) []string {
	var s []string
	for _, e := range errs {
		s = append(s, e.Error())
	}
	return s
}

// No rank's file readable: the error names each file and what is wrong,
// and holds their *ProfileErrors.
func TestReadProfileNoFileReadable(t *testing.T) {
	rec := profileRecordBytes(t, 0, 2, 0)
	_, _, err := ReadProfileFS(fstest.MapFS{"rank-0.pb": {Data: rec[:100]}}, "/p", 1<<20)
	if want := "/p: no rank's profile could be read: /p/rank-0.pb: cut short: the record says 287 bytes, 98 are there"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
	if pe := RankFileError([]error{err}, 0); pe == nil || pe.Fault != ProfileCutShort {
		t.Errorf("RankFileError of the error: %+v", pe)
	}
	_, _, err = ReadProfileFS(fstest.MapFS{"rank-0.pb": {Data: nil}, "rank-1.pb": {Data: []byte("\x03abc")}, "rank-x.pb": {Data: rec[:1]}}, "/p", 1<<20)
	want := "/p: no rank's profile could be read from its 3 rank-*.pb files:\n" +
		"  /p/rank-0.pb: empty (0 bytes): the rank wrote no record\n" +
		"  /p/rank-1.pb: not a Netloom profile (the record is not a Datagram: field 12 (functions) at byte 1 is 64-bit, not length-delimited)\n" +
		"  /p/rank-x.pb: cut short: the file ends inside the record's length prefix"
	if err == nil || err.Error() != want {
		t.Errorf("error:\n%v\nwant\n%s", err, want)
	}
	var pe *ProfileError
	if !errors.As(err, &pe) || pe.Rank != 0 || RankFileError([]error{err}, 1) == nil {
		t.Errorf("the error's *ProfileErrors: %+v", pe)
	}
}

// Files are read in rank order (rank-10.pb after rank-9.pb), a file whose
// name says no rank is read as it is, and a missing rank is said to have
// no file.
func TestReadProfileRankOrder(t *testing.T) {
	fsys := fstest.MapFS{}
	for r := range 12 {
		if r != 4 {
			fsys[fmt.Sprintf("rank-%d.pb", r)] = &fstest.MapFile{Data: profileRecordBytes(t, r, 13, 0)}
		}
	}
	fsys["rank-10.pb"].Data = nil
	fsys["rank-9.pb"].Data = []byte{0x80}
	fsys["rank-twelve.pb"] = &fstest.MapFile{Data: profileRecordBytes(t, 12, 13, 0)}
	j, warnings, err := ReadProfileFS(fsys, "/p", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/p/rank-9.pb: cut short: the file ends inside the record's length prefix",
		"/p/rank-10.pb: empty (0 bytes): the rank wrote no record",
		"3 of 13 ranks have no profile: ranks 4 (no file), 9 (bad file), 10 (bad file)",
	}
	if got := errorStrings(warnings); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("warnings:\n got %q\nwant %q", got, want)
	}
	if j.Reporting != 10 {
		t.Errorf("%d ranks reported, want 10", j.Reporting)
	}
}

// report --json always has "warnings": [] when there are none.
func TestReportWarningsNeverNull(t *testing.T) {
	fsys := fstest.MapFS{"rank-0.pb": {Data: profileRecordBytes(t, 0, 1, 0)}}
	j, warnings, err := ReadProfileFS(fsys, "/p", 1<<20)
	if err != nil || len(warnings) > 0 {
		t.Fatal(err, warnings)
	}
	r, err := BuildReport(j, warnings)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"warnings":[]`) {
		t.Errorf("no \"warnings\":[] in %.300s...", b)
	}
}

// randomBytes is n bytes of a fixed pseudo-random sequence.
func randomBytes(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}
