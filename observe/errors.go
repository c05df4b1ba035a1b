package observe

import (
	"errors"
	"fmt"
)

// Sentinel errors a *FormatError wraps, for errors.Is.
var (
	// ErrUnknownFormat: the input is neither a Perfetto trace nor ftrace text.
	ErrUnknownFormat = errors.New("not a Perfetto trace or ftrace text")
	// ErrTruncated: the input ends in the middle of a record.
	ErrTruncated = errors.New("truncated")
	// ErrCorrupt: a record does not decode.
	ErrCorrupt = errors.New("corrupt")
	// ErrEmpty: the input holds no scheduling events at all.
	ErrEmpty = errors.New("no scheduling events")
)

// FormatError says where in which file a trace stopped making sense. Offset is
// a byte offset into the (decompressed) stream for binary formats, Line a
// 1-based line number for text; the one that does not apply is zero.
type FormatError struct {
	File   string
	Offset int64
	Line   int
	Err    error
}

func (e *FormatError) Error() string {
	switch {
	case e.Line > 0:
		return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
	case e.Offset >= 0:
		return fmt.Sprintf("%s: byte %d: %v", e.File, e.Offset, e.Err)
	default:
		return fmt.Sprintf("%s: %v", e.File, e.Err)
	}
}

func (e *FormatError) Unwrap() error { return e.Err }
