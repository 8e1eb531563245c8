package ingest

// The protobuf wire format read in place: the primitives every decoder of
// this package is built on (decode_msg.go's messages, decode_rows.go's
// rows, decode.go's datagram). They call nothing else of the package.

import (
	"encoding/binary"
	"errors"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

var errMalformed = errors.New("malformed field")

// ascii says whether b is ASCII, inline (node names nearly always are,
// and a call to utf8.Valid for ten bytes cost more than its check).
func ascii(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// tagAt reads the field tag at b[off:] as protowire.ConsumeTag does, and
// returns the offset after it (negative if malformed). tagAt, bytesAt and
// varintAt read one-byte values, the usual case, without binary.Uvarint's
// loop: with it they were a third of the cost of decoding a 1,024-row
// datagram. (They are too large for the compiler to inline.)
func tagAt(b []byte, off int) (protowire.Number, protowire.Type, int) {
	if off < len(b) && b[off] < 0x80 { // one byte: fields 1 to 15
		v := b[off]
		if v>>3 == 0 {
			return 0, 0, -1
		}
		return protowire.Number(v >> 3), protowire.Type(v & 7), off + 1
	}
	v, n := binary.Uvarint(b[off:])
	if n <= 0 || v>>3 == 0 || v>>3 > uint64(protowire.MaxValidNumber) {
		return 0, 0, -1
	}
	return protowire.Number(v >> 3), protowire.Type(v & 7), off + n
}

// bytesAt reads a length-delimited value at b[off:].
func bytesAt(b []byte, off int) ([]byte, int) {
	l, next := varintAt(b, off)
	if next < 0 || l > uint64(len(b)-next) {
		return nil, -1
	}
	return b[next : next+int(l)], next + int(l)
}

// varintAt reads a varint at b[off:].
func varintAt(b []byte, off int) (uint64, int) {
	if off < len(b) && b[off] < 0x80 {
		return uint64(b[off]), off + 1
	}
	v, n := binary.Uvarint(b[off:])
	if n <= 0 {
		return 0, -1
	}
	return v, off + n
}

var errStringUTF8 = errors.New("string field is not valid UTF-8")

// fields calls f for each field of the message b, skipping those f does
// not know (it returns a negative offset and no error for them).
func fields(b []byte, f func(num protowire.Number, typ protowire.Type, at int) (int, error)) error {
	for off := 0; off < len(b); {
		num, typ, at := tagAt(b, off)
		if at < 0 {
			return errMalformed
		}
		next, err := f(num, typ, at)
		if err != nil {
			return err
		}
		if next < 0 {
			n := protowire.ConsumeFieldValue(num, typ, b[at:])
			if n < 0 {
				return protowire.ParseError(n)
			}
			next = at + n
		}
		off = next
	}
	return nil
}

// stringOf is a string field's value, which must be UTF-8.
func stringOf(v []byte) (string, error) {
	if !ascii(v) && !utf8.Valid(v) {
		return "", errStringUTF8
	}
	return string(v), nil
}
