package ingest

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/netloom/netloom/internal/ingest/agentpb"
)

// What is wrong with a profile file, said for a person: the fault, where
// in the file, and which field of which record.

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
