// Package echo bounds what an error message repeats of its input: enough
// to recognize it, never the megabytes a request or a file may carry.
package echo

import (
	"fmt"
	"strconv"
)

// Cut is s's first limit bytes, backed up so as not to split a UTF-8
// sequence, and how many bytes it leaves out.
func Cut(s string, limit int) (head string, more int) {
	if len(s) <= limit {
		return s, 0
	}
	n := limit
	for n > 0 && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n], len(s) - n
}

// Clip is s cut to limit bytes, saying how many more there were.
func Clip(s string, limit int) string {
	head, more := Cut(s, limit)
	if more == 0 {
		return s
	}
	return fmt.Sprintf("%s... (%d more bytes)", head, more)
}

// Quote is Clip with the kept part quoted.
func Quote(s string, limit int) string {
	head, more := Cut(s, limit)
	if more == 0 {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%s... (%d more bytes)", strconv.Quote(head), more)
}
