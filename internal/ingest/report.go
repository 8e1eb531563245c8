package ingest

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"encoding/csv"
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
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/netloom/netloom/internal/gpupath"
	"github.com/netloom/netloom/internal/ingest/agentpb"
	"github.com/netloom/netloom/internal/store"
)

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

// ProfileFault is what is wrong with a rank's profile file.
type ProfileFault string

// The faults of profile files.
const (
	ProfileUnreadable ProfileFault = "unreadable"    // could not be opened or read
	ProfileEmpty      ProfileFault = "empty"         // 0 bytes
	ProfileCutShort   ProfileFault = "cut short"     // it ends inside a record or its length prefix
	ProfileNotNetloom ProfileFault = "not a profile" // bytes that are not a Netloom record: a bad length prefix, not a Datagram
	ProfileRefused    ProfileFault = "refused"       // a Datagram the daemon's checks refuse (Err is the *RejectError)
	ProfileWrongRank  ProfileFault = "wrong rank"    // a record of another rank than the file's name says
)

// ProfileError says what is wrong with one rank's profile file: its
// message is File, then Detail ("DIR/rank-1.pb: cut short: the record
// says 5,321 bytes, 1,200 are there").
type ProfileError struct {
	File  string // as the user named it: DIR/[JOB/]rank-N.pb
	Rank  int    // the rank the file's name says (rank-N.pb); -1 for another name
	Fault ProfileFault
	// Record is the record at fault, from 1 (0: the file as a whole),
	// starting at byte Offset of the file; the Read records before it
	// were read and are in the job.
	Record int
	Offset int64
	Read   int
	Detail string // what is wrong, without the file's name
	Err    error  // the cause, when there is one: a *RejectError, a file system error
}

func (e *ProfileError) Error() string { return e.File + ": " + e.Detail }
func (e *ProfileError) Unwrap() error { return e.Err }

// RankFileError returns the first *ProfileError among errs (ReadProfile's
// warnings or error) of the file of rank, or nil.
func RankFileError(errs []error, rank int) *ProfileError {
	for _, err := range errs {
		var pe *ProfileError
		if errors.As(err, &pe) && pe.Rank == rank {
			return pe
		}
		if u, ok := err.(interface{ Unwrap() []error }); ok {
			if pe := RankFileError(u.Unwrap(), rank); pe != nil {
				return pe
			}
		}
	}
	return nil
}

// profileReadError is ReadProfile's error when no rank's file could be
// read: it holds the files' errors.
type profileReadError struct {
	msg  string
	errs []error
}

func (e *profileReadError) Error() string   { return e.msg }
func (e *profileReadError) Unwrap() []error { return e.errs }

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

// readBefore is what a file's fault message adds when records came before
// it: they were read.
func readBefore(read int) string {
	switch read {
	case 0:
		return ""
	case 1:
		return "; record 1 was read"
	}
	return fmt.Sprintf("; records 1-%d were read", read)
}

// thousands writes n with commas: 5,321.
func thousands[T int | int64 | uint64](n T) string {
	if n < 0 {
		return "-" + thousands(uint64(-n))
	}
	s := strconv.FormatUint(uint64(n), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
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

// refused says that the daemon's checks refused record rec: "the record
// was refused (bad_rank): job j: rank 5 of world size 4".
func refused(rec string, err error) string {
	var re *RejectError
	if errors.As(err, &re) {
		return fmt.Sprintf("%s was refused (%s): %s", rec, re.Reason, re.Detail)
	}
	return fmt.Sprintf("%s was refused: %v", rec, err)
}

// datagramFields are the Datagram's fields by number.
var datagramFields = (&agentpb.Datagram{}).ProtoReflect().Descriptor().Fields()

// wireFault says what keeps b, a record's bytes at byte base of its file,
// from being a Datagram: its top-level fields' tags (each one of a
// Datagram's fields, with its wire type) and lengths, and each field's
// content. It returns "" when it finds nothing wrong. partial: b is the
// beginning of a record cut short, its last field may run past its end.
func wireFault(b []byte, base int64, partial bool) string {
	for i := 0; i < len(b); {
		where := thousands(base + int64(i))
		num, typ, n := protowire.ConsumeTag(b[i:])
		if n < 0 {
			if errors.Is(protowire.ParseError(n), io.ErrUnexpectedEOF) {
				if partial {
					return ""
				}
				return fmt.Sprintf("a field tag at byte %s runs past the record's end", where)
			}
			return fmt.Sprintf("no field tag at byte %s (%v)", where, protowire.ParseError(n))
		}
		if _, ok := wireTypeNames[typ]; !ok {
			return fmt.Sprintf("no field tag at byte %s (wire type %d does not exist)", where, typ)
		}
		fd := datagramFields.ByNumber(num)
		if fd == nil {
			return fmt.Sprintf("field %d at byte %s, which a Datagram does not have", num, where)
		}
		if want, ok := wireTypeOf(fd, typ); !ok {
			return fmt.Sprintf("field %d (%s) at byte %s is %s, not %s", num, fd.Name(), where, wireTypeNames[typ], wireTypeNames[want])
		}
		m := protowire.ConsumeFieldValue(num, typ, b[i+n:])
		if m < 0 {
			if errors.Is(protowire.ParseError(m), io.ErrUnexpectedEOF) {
				if partial {
					return ""
				}
				return fmt.Sprintf("field %d (%s) at byte %s runs past the record's end", num, fd.Name(), where)
			}
			return fmt.Sprintf("field %d (%s) at byte %s: %v", num, fd.Name(), where, protowire.ParseError(m))
		}
		if !partial {
			if err := proto.Unmarshal(b[i:i+n+m], new(agentpb.Datagram)); err != nil {
				return fmt.Sprintf("field %d (%s) at byte %s: %s", num, fd.Name(), where, protoDetail(err))
			}
		}
		i += n + m
	}
	return ""
}

// wireTypeOf says whether typ is a wire type of field fd, and which is.
func wireTypeOf(fd protoreflect.FieldDescriptor, typ protowire.Type) (protowire.Type, bool) {
	want := protowire.VarintType
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.StringKind, protoreflect.BytesKind:
		want = protowire.BytesType
	case protoreflect.GroupKind:
		want = protowire.StartGroupType
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		want = protowire.Fixed64Type
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		want = protowire.Fixed32Type
	}
	packed := fd.IsList() && want != protowire.BytesType && want != protowire.StartGroupType && typ == protowire.BytesType
	return want, typ == want || packed
}

// wireTypeNames are the wire types as messages name them.
var wireTypeNames = map[protowire.Type]string{protowire.VarintType: "a varint", protowire.Fixed64Type: "64-bit",
	protowire.BytesType: "length-delimited", protowire.StartGroupType: "a group's start", protowire.EndGroupType: "a group's end",
	protowire.Fixed32Type: "32-bit"}

// protoDetail is a protobuf error's message without its "proto:" prefix
// (which it writes with a space or a no-break space).
func protoDetail(err error) string {
	s := strings.TrimPrefix(err.Error(), "proto:")
	return strings.TrimLeft(s, " \u00a0")
}

// Report is the JSON document of `netloom report --json`.
type Report struct {
	Job        store.JobSummary                     `json:"job"`
	Ranks      int                                  `json:"ranks"`
	Nodes      []NodeView                           `json:"nodes"`
	Processes  []ProcessView                        `json:"processes"`
	Profile    *Profile                             `json:"profile"`
	Matrix     map[string]map[string][][]uint64     `json:"matrix"` // class -> bytes|msgs -> [sender][receiver]
	NodeMatrix map[string]map[string]map[string]any `json:"node_matrix"`
	Histogram  *Histogram                           `json:"histogram"`
	Regions    []RegionTotal                        `json:"regions"`
	// Startup is the time in MPI_Init (and _thread) and MPI_Finalize, all
	// ranks: part of the MPI and wall times (which both start at
	// MPI_Init's entry), given apart so that start-up does not swamp the
	// profile.
	Startup Startup `json:"startup"`
	// GPU is the ranks' GPU side: their MPI buffers by kind and path
	// between host and device memory, and their NCCL operations.
	GPU *gpupath.Summary `json:"gpu"`
	// Reorders are the times the job reordered its ranks itself
	// (netloom_reorder, docs/reorder.md), oldest first; [] when never.
	Reorders []store.JobReorder `json:"reorders"`
	// Warnings is never null: [] when there are none.
	Warnings []string `json:"warnings"`
}

// maxReportPairs bounds the rank pairs of a report's GPU section (the
// paths table sums them all).
const maxReportPairs = 4096

// Startup is the seconds all ranks spent starting and stopping MPI.
type Startup struct {
	InitSeconds     float64 `json:"mpi_init_seconds"`
	FinalizeSeconds float64 `json:"mpi_finalize_seconds"`
}

// BuildReport assembles the report of a job.
func BuildReport(j *store.Job, warnings []error) (*Report, error) {
	r := &Report{Job: j.JobSummary, Ranks: j.Ranks, Nodes: Nodes(j), Processes: make([]ProcessView, len(j.Processes)),
		Profile: BuildProfile(j), Matrix: map[string]map[string][][]uint64{}, NodeMatrix: map[string]map[string]map[string]any{},
		Histogram: BuildHistogram(j, -1), Regions: BuildRegions(j), GPU: gpupath.Summarize(j, maxReportPairs),
		Reorders: j.Reorders()}
	if r.Reorders == nil {
		r.Reorders = []store.JobReorder{}
	}
	for i := range j.Processes {
		r.Processes[i] = ViewProcess(&j.Processes[i])
	}
	for _, t := range r.Profile.Totals {
		switch t.Name {
		case "MPI_Init", "MPI_Init_thread":
			r.Startup.InitSeconds += float64(t.TimeNS) / 1e9
		case "MPI_Finalize":
			r.Startup.FinalizeSeconds += float64(t.TimeNS) / 1e9
		}
	}
	for _, c := range Classes {
		r.Matrix[c] = map[string][][]uint64{}
		r.NodeMatrix[c] = map[string]map[string]any{}
		for _, m := range []string{"bytes", "msgs"} {
			if j.Ranks <= MaxDenseRanks {
				rm, err := RankMatrix(j, c, m)
				if err != nil {
					return nil, err
				}
				r.Matrix[c][m] = rm.Values
			}
			nm, err := NodeMatrix(j, c, m)
			if err != nil {
				return nil, err
			}
			r.NodeMatrix[c][m] = map[string]any{"labels": nm.Labels, "matrix": nm.Values}
		}
	}
	r.Warnings = make([]string, 0, len(warnings))
	for _, w := range warnings {
		r.Warnings = append(r.Warnings, w.Error())
	}
	return r, nil
}

// WriteText prints MPInside-style tables: time per MPI function per rank,
// bytes and requests sent and received per function, and the rank-to-rank
// SIZE and REQUEST matrices of each class that carried traffic.
func WriteText(w io.Writer, r *Report) error {
	j := &r.Job
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "Netloom report: job %s, %d ranks on %d nodes", j.ID, j.Ranks, j.Nodes)
	if j.MPILibrary != "" {
		fmt.Fprintf(bw, ", %s", j.MPILibrary)
	}
	if j.Program != "" {
		fmt.Fprintf(bw, ", %s", j.Program)
	}
	// Wall: the job's, the longest rank's (from MPI_Init on); the MPI and
	// CPU times are sums over the ranks, set against the sum of the
	// ranks' wall times (rank-seconds).
	fmt.Fprintf(bw, "\nWall %.3fs (the longest rank; %.3f rank-seconds over %d ranks), MPI %.3fs in all ranks (%.1f%% of their wall time, the mean over ranks), CPU %.1f%% per rank; sent %s in %d messages (%s inter-node)\n",
		maxF(r.Profile.Wall), sumF(r.Profile.Wall), len(r.Profile.Wall), j.MPISeconds, j.MPIPercent, j.CPUPercent, bytesText(j.Total.Bytes), j.Total.Msgs, bytesText(j.InterNode.Bytes))
	if st := r.Startup; st.InitSeconds+st.FinalizeSeconds > 0 {
		rest := j.MPISeconds - st.InitSeconds - st.FinalizeSeconds
		fmt.Fprintf(bw, "Of the MPI time, MPI_Init %.3fs and MPI_Finalize %.3fs; the rest %.3fs", st.InitSeconds, st.FinalizeSeconds, max(rest, 0))
		if wall := sumF(r.Profile.Wall); wall > 0 {
			fmt.Fprintf(bw, " (%.1f%% of the rank-seconds)", 100*max(rest, 0)/wall)
		}
		fmt.Fprintln(bw)
	}
	for _, wn := range r.Warnings {
		fmt.Fprintf(bw, "warning: %s\n", wn)
	}

	p := r.Profile
	fmt.Fprintf(bw, "\nTime per MPI function per rank (seconds)\n")
	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "rank\tnode\twall\tmpi\t")
	waited := p.waited()
	for k, f := range p.Functions {
		if waited[k] { // MPInside's columns: the wait before a function, then the function
			fmt.Fprintf(tw, "%s\t", WaitColumn(f))
		}
		fmt.Fprintf(tw, "%s\t", f)
	}
	fmt.Fprintln(tw)
	for i, rank := range p.Ranks {
		fmt.Fprintf(tw, "%d\t%s\t%.3f\t%.3f\t", rank, r.Processes[i].Node, p.Wall[i], p.MPI[i])
		for k := range p.Functions {
			if waited[k] {
				fmt.Fprintf(tw, "%.4f\t", float64(p.WaitNS[i][k])/1e9)
			}
			fmt.Fprintf(tw, "%.4f\t", float64(p.TimeNS[i][k])/1e9)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	if len(p.WaitNS) > 0 {
		fmt.Fprintf(bw, "(b_X: waiting for the last rank before collective X, in a barrier the agent put there; w_recv: waiting in MPI_Recv for a late sender, in a probe the agent put there: NETLOOM_WAITS=1)\n")
	}

	fmt.Fprintf(bw, "\nMPI functions, all ranks (bytes and requests sent and received)\n")
	tw = tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "function\tcalls\ttime (s)\twait (s)\t% MPI\tranks\tbytes sent\tbytes received\t")
	for _, t := range p.Totals {
		fmt.Fprintf(tw, "%s\t%d\t%.4f\t%.4f\t%.1f\t%d\t%d\t%d\t\n", t.Name, t.Calls, float64(t.TimeNS)/1e9, float64(t.WaitNS)/1e9, t.MPIPercent, t.Ranks, t.BytesSent, t.BytesReceived)
	}
	tw.Flush()

	fmt.Fprintf(bw, "\nPer rank and function: requests, bytes sent, bytes received\n")
	tw = tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rank\tfunction\trequests\tbytes sent\tbytes received\t")
	for i, rank := range p.Ranks {
		for k, f := range p.Functions {
			if p.Calls[i][k] > 0 {
				fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t\n", rank, f, p.Calls[i][k], p.Sent[i][k], p.Received[i][k])
			}
		}
	}
	tw.Flush()

	names := map[string]string{"p2p": "point-to-point", "coll": "collective", "rma": "one-sided (RMA)"}
	for _, c := range Classes {
		mb := r.Matrix[c]["bytes"]
		if mb == nil || matrixZero(mb) {
			continue
		}
		for _, m := range []struct{ key, title string }{{"bytes", "SIZE (bytes)"}, {"msgs", "REQUEST (messages)"}} {
			fmt.Fprintf(bw, "\n%s matrix, %s; row = sender, column = receiver\n", m.title, names[c])
			writeMatrix(bw, r.Matrix[c][m.key])
		}
	}
	if len(r.Regions) > 0 {
		fmt.Fprintf(bw, "\nRegions\n")
		tw = tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
		waits := len(r.Profile.WaitNS) > 0
		fmt.Fprint(tw, "region\tranks\tentries\ttime (s)\tMPI time (s)\t")
		if waits {
			fmt.Fprint(tw, "wait (s)\t")
		}
		fmt.Fprintln(tw, "bytes sent\t")
		for _, g := range r.Regions {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.4f\t%.4f\t", g.Name, len(g.Ranks), g.Entries, float64(g.TimeNS)/1e9, float64(g.MPITimeNS)/1e9)
			if waits {
				fmt.Fprintf(tw, "%.4f\t", float64(g.WaitNS)/1e9)
			}
			fmt.Fprintf(tw, "%d\t\n", g.Classes.Total().Bytes)
		}
		tw.Flush()
	}
	writeGPU(bw, r.GPU)
	writeReorders(bw, r.Reorders)
	return bw.Flush()
}

// writeGPU prints the GPU buffers' paths and kinds per function, when
// any rank was probed (else one line saying why none was), and the NCCL
// operations, when any rank reported some.
func writeGPU(bw *bufio.Writer, g *gpupath.Summary) {
	if g == nil {
		return
	}
	b := &g.Buffers
	if b.ProbedRanks == 0 {
		fmt.Fprintf(bw, "\nGPU buffers not probed: %s\n", b.NotProbed)
	} else {
		fmt.Fprintf(bw, "\nGPU buffers (%s; %d of %d ranks probed): bytes and messages by path, sender's memory -> receiver's\n", b.Source, b.ProbedRanks, b.Ranks)
		for _, e := range b.ProbeErrors {
			fmt.Fprintf(bw, "probe failed on %d ranks (rank %d first): %s\n", e.Ranks, e.FirstRank, e.Error)
		}
		tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "path\twhere\tbytes\tmessages\tsplit\t")
		for _, p := range b.Paths {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t\n", p.Path, p.Locality, p.Bytes, p.Msgs, splitText(p.Split))
		}
		tw.Flush()
		if len(b.Paths) == 0 {
			fmt.Fprintln(bw, "(no traffic between probed ranks)")
		}
		fmt.Fprintln(bw, "(H: host memory, pageable or pinned; D: device or managed memory; point-to-point messages; exact: both sides counted the same messages and bytes and one side used one kind of memory, so the other side's split is the paths')")
		undetermined := slices.ContainsFunc(b.Paths, func(p gpupath.PathRow) bool { return !p.Exact })
		if undetermined {
			fmt.Fprintln(bw, "(mixed: both sides used both kinds, the paths are not determined: H->? and D->? are the sender's count, ?->H and ?->D the receiver's,"+
				" of the same messages; counts differ: the sides did not count the same messages and bytes (a receive posted larger than its message, or in flight), so the paths are not determined either; receiver unknown: the receiver has no row for that sender (not probed, MPI_ANY_SOURCE, or not among its busiest peers); sender unknown: likewise the sender)")
		}
		if len(b.Functions) > 0 {
			fmt.Fprintf(bw, "\nBuffer kinds per function, all probed ranks (bytes/buffers)\n")
			tw = tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "function\tranks\tsend pageable\tsend pinned\tsend device\tsend managed\trecv pageable\trecv pinned\trecv device\trecv managed\t")
			kinds := func(k store.BufferKinds) string {
				var s strings.Builder
				for _, t := range []store.Traffic{k.Pageable, k.Pinned, k.Device, k.Managed} {
					fmt.Fprintf(&s, "%d/%d\t", t.Bytes, t.Msgs)
				}
				return s.String()
			}
			for _, f := range b.Functions {
				fmt.Fprintf(tw, "%s\t%d\t%s%s\n", f.Name, f.Ranks, kinds(f.Send), kinds(f.Recv))
			}
			tw.Flush()
		}
	}
	n := &g.NCCL
	if len(n.Ops) == 0 {
		if len(n.Versions) > 0 { // the plugin ran, NCCL told it no operation
			fmt.Fprintf(bw, "\nNCCL operations: none reported (NCCL %s told the plugin of no operation; NCCL starts no profiler event for a one-rank communicator)\n",
				strings.Join(n.Versions, ", "))
		}
		return
	}
	fmt.Fprintf(bw, "\nNCCL operations (%s; %d ranks", n.Source, n.Ranks)
	if len(n.Versions) > 0 {
		fmt.Fprintf(bw, "; NCCL %s", strings.Join(n.Versions, ", "))
	}
	for _, v := range n.ProfilerInterfaces {
		fmt.Fprintf(bw, "; profiler interface v%d", v)
	}
	fmt.Fprintln(bw, "), all ranks")
	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "communicator\tsize\toperation\talgorithm\tprotocol\tranks\tcalls\tbytes\ttime (s)\t")
	dash := func(s string) string { return cmp.Or(s, "-") }
	for _, o := range n.Ops {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%d\t%d\t%.6f\t\n", o.Comm, o.CommSize, o.Name, dash(o.Algorithm), dash(o.Protocol), o.Ranks, o.Calls, o.Bytes, float64(o.TimeNS)/1e9)
	}
	tw.Flush()
	fmt.Fprintf(bw, "network bytes per peer: %s; link attribution: %s\n", n.PeersFrom, n.LinkAttribution)
}

// splitText is how a path row's split reads in the report.
func splitText(split string) string {
	switch split {
	case gpupath.Mixed:
		return "mixed: not determined"
	case gpupath.CountsDiffer:
		return "counts differ: not determined"
	}
	return split
}

func writeMatrix(w io.Writer, m [][]uint64) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "\t")
	for c := range m {
		fmt.Fprintf(tw, "%d\t", c)
	}
	fmt.Fprintln(tw)
	for r, row := range m {
		fmt.Fprintf(tw, "%d\t", r)
		for _, v := range row {
			fmt.Fprintf(tw, "%d\t", v)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

func matrixZero(m [][]uint64) bool {
	for _, row := range m {
		if slices.ContainsFunc(row, func(v uint64) bool { return v != 0 }) {
			return false
		}
	}
	return true
}

func maxF(v []float64) float64 {
	var m float64
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

func sumF(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s
}

func bytesText(b uint64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := uint64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}

// WriteCSV writes ranks.csv, functions.csv and matrix-<class>-<bytes|msgs>.csv
// into dir.
func WriteCSV(dir string, r *Report) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("csv directory: %w", err)
	}
	var written []string
	write := func(name string, rows [][]string) error {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		cw := csv.NewWriter(f)
		if err := cw.WriteAll(rows); err != nil {
			f.Close()
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		written = append(written, path)
		return nil
	}
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	fl := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	rows := [][]string{{"rank", "node", "host", "pid", "wall_seconds", "mpi_seconds", "cpu_user_seconds", "cpu_system_seconds",
		"vm_hwm", "p2p_bytes", "p2p_msgs", "coll_bytes", "coll_msgs", "rma_bytes", "rma_msgs", "intra_node_bytes", "inter_node_bytes"}}
	for _, p := range r.Processes {
		rows = append(rows, []string{strconv.Itoa(p.Rank), p.Node, p.Host, strconv.Itoa(int(p.PID)), fl(p.Wall), fl(p.MPI), fl(p.CPUUser),
			fl(p.CPUSystem), u(p.VmHWM), u(p.Traffic.P2P.Bytes), u(p.Traffic.P2P.Msgs), u(p.Traffic.Coll.Bytes), u(p.Traffic.Coll.Msgs),
			u(p.Traffic.RMA.Bytes), u(p.Traffic.RMA.Msgs), u(p.IntraNode.Bytes), u(p.InterNode.Bytes)})
	}
	if err := write("ranks.csv", rows); err != nil {
		return written, err
	}
	rows = [][]string{{"rank", "function", "calls", "time_ns", "bytes_sent", "bytes_received", "wait_ns"}}
	pr := r.Profile
	for i, rank := range pr.Ranks {
		for k, f := range pr.Functions {
			if pr.Calls[i][k] > 0 || pr.TimeNS[i][k] > 0 {
				wait := uint64(0)
				if len(pr.WaitNS) > 0 {
					wait = pr.WaitNS[i][k]
				}
				rows = append(rows, []string{strconv.Itoa(rank), f, u(pr.Calls[i][k]), u(pr.TimeNS[i][k]), u(pr.Sent[i][k]), u(pr.Received[i][k]), u(wait)})
			}
		}
	}
	if err := write("functions.csv", rows); err != nil {
		return written, err
	}
	for _, c := range Classes {
		for _, m := range []string{"bytes", "msgs"} {
			mx := r.Matrix[c][m]
			if mx == nil {
				continue
			}
			head := []string{"sender\\receiver"}
			for i := range mx {
				head = append(head, strconv.Itoa(i))
			}
			rows = [][]string{head}
			for i, row := range mx {
				line := []string{strconv.Itoa(i)}
				for _, v := range row {
					line = append(line, u(v))
				}
				rows = append(rows, line)
			}
			if err := write(fmt.Sprintf("matrix-%s-%s.csv", c, m), rows); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}
