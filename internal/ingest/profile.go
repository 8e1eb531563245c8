package ingest

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/netloom/netloom/internal/ingest/agentpb"
	"github.com/netloom/netloom/internal/store"
)

// Offline profiles: a job's rank-*.pb files (NETLOOM_OUTPUT) read record
// by record through the same decoding and tracker as live datagrams.

// maxProfileRecord bounds one record of an offline profile file: the final
// snapshot is written unchunked, with every peer.
const maxProfileRecord = 1 << 30

// FindProfileDir returns the directory holding a job's rank-*.pb files:
// dir itself, or its only job subdirectory (NETLOOM_OUTPUT holds one
// subdirectory per job).
func FindProfileDir(dir string) (string, error) {
	sub, err := FindProfileDirFS(os.DirFS(dir), dir)
	return filepath.Join(dir, sub), err
}

// FindProfileDirFS is FindProfileDir within fsys, named name in errors: it
// returns "." or the job subdirectory's name.
func FindProfileDirFS(fsys fs.FS, name string) (string, error) {
	if files, _ := fs.Glob(fsys, "rank-*.pb"); len(files) > 0 {
		return ".", nil
	}
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // its path is fsys's, not the one the user gave
		}
		return "", fmt.Errorf("profile directory %s: %w", name, err)
	}
	var jobs []string
	for _, e := range entries {
		if e.IsDir() {
			if files, _ := fs.Glob(fsys, path.Join(e.Name(), "rank-*.pb")); len(files) > 0 {
				jobs = append(jobs, e.Name())
			}
		}
	}
	switch len(jobs) {
	case 0:
		return "", fmt.Errorf("%s: no rank-*.pb profile files, here or in a job subdirectory", name)
	case 1:
		return jobs[0], nil
	}
	return "", fmt.Errorf("%s holds profiles of %d jobs (%s): name one", name, len(jobs), strings.Join(jobs, ", "))
}

// ReadProfile reads a job's offline profile (DIR/rank-N.pb files, each a
// sequence of varint-length-prefixed Datagrams) the way the daemon reads
// datagrams, and returns the job. A file that cannot be read in full is
// returned as a warning, a *ProfileError naming the file, its rank and
// what is wrong; the records before its fault are kept. The error, when
// no rank's file could be read, holds those *ProfileErrors
// (errors.As finds them).
func ReadProfile(dir string) (*store.Job, []error, error) {
	return ReadProfileFS(os.DirFS(dir), dir, maxProfileRecord)
}

// profileFile is one rank-*.pb file of a job: its path in the fs, its
// name for the user and the rank its name says (-1 if none).
type profileFile struct {
	path, display string
	rank          int
}

// fileRank is the rank a profile file's name says: rank-N.pb, N written
// as the agent writes it; -1 for another name.
func fileRank(name string) int {
	s, ok := strings.CutPrefix(path.Base(name), "rank-")
	s, ok2 := strings.CutSuffix(s, ".pb")
	r, err := strconv.Atoi(s)
	if !ok || !ok2 || err != nil || r < 0 || strconv.Itoa(r) != s {
		return -1
	}
	return r
}

// ReadProfileFS is ReadProfile within fsys (named name in messages), its
// records no longer than maxRecord bytes.
func ReadProfileFS(fsys fs.FS, name string, maxRecord int) (*store.Job, []error, error) {
	sub, err := FindProfileDirFS(fsys, name)
	if err != nil {
		return nil, nil, err
	}
	names, err := fs.Glob(fsys, path.Join(sub, "rank-*.pb"))
	if err != nil {
		return nil, nil, err
	}
	dir := filepath.Join(name, sub)
	files := make([]profileFile, len(names))
	for i, f := range names {
		files[i] = profileFile{path: f, display: filepath.Join(name, f), rank: fileRank(f)}
	}
	// In rank order (rank-10.pb after rank-9.pb), other names last.
	slices.SortStableFunc(files, func(a, b profileFile) int {
		return cmp.Compare(uint(a.rank), uint(b.rank))
	})
	lim := Limits{MaxBytes: maxRecord, MaxChunks: 1 << 20}.WithDefaults()
	tr := NewTracker(Options{Limits: lim, MaxPendingBytes: 1 << 40, JobTimeout: 1 << 62, Linger: 1 << 62}, nil)
	var warnings []error
	var latest time.Time
	bad := map[int]bool{} // ranks whose file has no record read
	// Every file is read before any is added: each rank's node must be
	// known when the other ranks' traffic to it is placed (KnowNode).
	recs := make([][]profileRecord, len(files))
	for i, f := range files {
		var err *ProfileError
		recs[i], err = readProfileFile(fsys, f, lim)
		if err != nil {
			warnings = append(warnings, err)
			if len(recs[i]) == 0 && f.rank >= 0 {
				bad[f.rank] = true
			}
		}
		for _, r := range recs[i] {
			if r.d.Process != nil {
				tr.KnowNode(r.d.JobId, int(r.d.Rank), r.d.Process.Node)
			}
		}
	}
	for i, f := range files {
		for k, r := range recs[i] {
			now := time.Unix(0, r.d.TimeUnixNs)
			if now.After(latest) {
				latest = now
			}
			if err := tr.Add(r.d, r.size, now); err != nil {
				rec := "the record"
				if r.n > 1 {
					rec = fmt.Sprintf("record %d (at byte %s)", r.n, thousands(r.off))
				}
				warnings = append(warnings, &ProfileError{File: f.display, Rank: f.rank, Fault: ProfileRefused, Record: r.n, Offset: r.off, Read: k,
					Detail: refused(rec, err) + readBefore(k), Err: err})
				if k == 0 && f.rank >= 0 {
					bad[f.rank] = true
				}
				break
			}
		}
	}
	tr.Flush()
	live := tr.Publish(latest)
	if len(live.Jobs) == 0 {
		switch len(warnings) {
		case 0:
			return nil, nil, fmt.Errorf("%s: no complete rank snapshot in %s", dir, plural(len(files), "rank-*.pb file"))
		case 1:
			return nil, warnings, &profileReadError{msg: fmt.Sprintf("%s: no rank's profile could be read: %v", dir, warnings[0]), errs: warnings}
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s: no rank's profile could be read from its %s:", dir, plural(len(files), "rank-*.pb file"))
		for _, w := range warnings {
			fmt.Fprintf(&b, "\n  %v", w)
		}
		return nil, warnings, &profileReadError{msg: b.String(), errs: warnings}
	}
	if len(live.Jobs) > 1 {
		var ids []string
		for id := range live.Jobs {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		return nil, warnings, fmt.Errorf("%s: profiles of several jobs (%s)", dir, strings.Join(ids, ", "))
	}
	for _, lj := range live.Jobs {
		j := lj.Full()
		if j.Reporting < j.Ranks {
			warnings = append(warnings, missingRanks(j, bad))
		}
		return j, warnings, nil
	}
	panic("unreachable")
}

// missingRanks says which of a job's ranks have no profile: those whose
// file was bad (its error comes before) and those with no file.
func missingRanks(j *store.Job, bad map[int]bool) error {
	have := map[int]bool{}
	for _, p := range j.Processes {
		have[p.Rank] = true
	}
	const most = 20
	var list []string
	for r := 0; r < j.Ranks && len(list) < most; r++ {
		if have[r] {
			continue
		}
		why := "no file"
		if bad[r] {
			why = "bad file"
		}
		list = append(list, fmt.Sprintf("%d (%s)", r, why))
	}
	n := j.Ranks - j.Reporting
	more := ""
	if n > len(list) {
		more = fmt.Sprintf(" and %d more", n-len(list))
	}
	return fmt.Errorf("%d of %d ranks have no profile: %s %s%s", n, j.Ranks, map[bool]string{true: "rank", false: "ranks"}[n == 1],
		strings.Join(list, ", "), more)
}

// plural is "1 thing" or "n things".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return strconv.Itoa(n) + " " + thing + "s"
}

// profileRecord is one valid record of a profile file: the n-th, at byte
// off.
type profileRecord struct {
	d       *Datagram
	size, n int
	off     int64
}

// readProfileFile reads a profile file's records up to the first bad one,
// and says what is wrong with it. A record longer than the file's rest is
// refused before its bytes are allocated.
func readProfileFile(fsys fs.FS, pf profileFile, lim Limits) ([]profileRecord, *ProfileError) {
	fault := func(f ProfileFault, n int, off int64, read int, err error, format string, a ...any) *ProfileError {
		return &ProfileError{File: pf.display, Rank: pf.rank, Fault: f, Record: n, Offset: off, Read: read, Err: err,
			Detail: fmt.Sprintf(format, a...) + readBefore(read)}
	}
	unreadable := func(err error) *ProfileError {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // its path is fsys's, not the one the user gave
		}
		return fault(ProfileUnreadable, 0, 0, 0, err, "cannot read: %v", err)
	}
	f, err := fsys.Open(pf.path)
	if err != nil {
		return nil, unreadable(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, unreadable(err)
	}
	if st.IsDir() {
		return nil, fault(ProfileUnreadable, 0, 0, 0, nil, "a directory, not a file")
	}
	size := st.Size()
	if size == 0 {
		return nil, fault(ProfileEmpty, 0, 0, 0, nil, "empty (0 bytes): the rank wrote no record")
	}
	br := bufio.NewReaderSize(f, 1<<20)
	var recs []profileRecord
	var off int64
	for n := 1; ; n++ {
		read := n - 1
		// rec is record n as messages name it: "the record" when it is the
		// file's first (the agent writes one), else "record n (at byte off)";
		// it is rec within parentheses that say where.
		rec, it := "the record", "the record"
		if n > 1 {
			rec, it = fmt.Sprintf("record %d (at byte %s)", n, thousands(off)), "it"
		}
		notProfile := func(format string, a ...any) *ProfileError {
			what := "not a Netloom profile"
			if n > 1 {
				what = fmt.Sprintf("garbage after record %d, at byte %s", read, thousands(off))
			}
			return fault(ProfileNotNetloom, n, off, read, nil, "%s (%s)", what, fmt.Sprintf(format, a...))
		}
		// The length prefix.
		var prefix []byte
		for len(prefix) < binary.MaxVarintLen64 {
			b, err := br.ReadByte()
			if err == io.EOF {
				break
			}
			if err != nil {
				return recs, unreadable(err)
			}
			prefix = append(prefix, b)
			if b < 0x80 {
				break
			}
		}
		if len(prefix) == 0 {
			return recs, nil // the end, between records
		}
		length, k := protowire.ConsumeVarint(prefix)
		switch {
		case k < 0 && prefix[len(prefix)-1] >= 0x80 && len(prefix) < binary.MaxVarintLen64:
			where := "the record's length prefix"
			if n > 1 {
				where = fmt.Sprintf("record %d's length prefix (at byte %s)", n, thousands(off))
			}
			return recs, fault(ProfileCutShort, n, off, read, nil, "cut short: the file ends inside %s", where)
		case k < 0:
			return recs, notProfile("bad length prefix: more than 64 bits")
		case length == 0:
			return recs, notProfile("bad length prefix: %s says 0 bytes", it)
		case length > uint64(lim.MaxBytes):
			return recs, notProfile("bad length prefix: %s says %s bytes, more than the %s a record may hold",
				it, thousands(length), thousands(lim.MaxBytes))
		}
		at := off + int64(k) // the record's bytes
		left := max(size-at, 0)
		b := make([]byte, min(int64(length), left))
		got, err := io.ReadFull(br, b)
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return recs, unreadable(err)
		}
		if uint64(got) < length {
			// A record cut short is the beginning of a Datagram; other
			// bytes are not a profile, whatever their length prefix says.
			if wireFault(b[:got], at, true) != "" {
				return recs, notProfile("bad length prefix: %s says %s bytes, the file holds %s after it", it, thousands(length), thousands(got))
			}
			return recs, fault(ProfileCutShort, n, off, read, nil, "cut short: %s says %s bytes, %s are there", rec, thousands(length), thousands(got))
		}
		m := new(agentpb.Datagram)
		if err := proto.Unmarshal(b, m); err != nil {
			why := wireFault(b, at, false)
			if why == "" {
				why = protoDetail(err)
			}
			return recs, notProfile("%s is not a Datagram: %s", it, why)
		}
		d := FromProto(m)
		if err := Validate(d, lim); err != nil {
			if unknown := len(m.ProtoReflect().GetUnknown()) > 0; m.Version == 0 || unknown {
				why := wireFault(b, at, false)
				switch {
				case why != "":
				case unknown:
					why = "it has fields a Datagram does not have"
				default:
					why = "it has no version field"
				}
				return recs, notProfile("%s is not a Datagram: %s", it, why)
			}
			return recs, fault(ProfileRefused, n, off, read, err, "%s", refused(rec, err))
		}
		if pf.rank >= 0 && int(d.Rank) != pf.rank {
			if n == 1 {
				return recs, fault(ProfileWrongRank, n, off, read, nil, "holds rank %d's profile (job %s), not rank %d's", d.Rank, d.JobId, pf.rank)
			}
			return recs, fault(ProfileWrongRank, n, off, read, nil, "%s is rank %d's (job %s), not rank %d's", rec, d.Rank, d.JobId, pf.rank)
		}
		recs = append(recs, profileRecord{d: d, size: len(b), n: n, off: off})
		off = at + int64(length)
	}
}
