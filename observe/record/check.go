//go:build linux

package record

import (
	"fmt"
	"os"
)

// MaxBufferBytes is the largest ring buffer a recording asks the kernel for.
const MaxBufferBytes = 1 << 30

// OptionError is an Options field out of range: Field is its name in
// Options, Want what it must be and Got what it was. A command maps Field
// to the flag that sets it.
type OptionError struct {
	Field string
	Want  string
	Got   any
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("%s must be %s, got %v", e.Field, e.Want, e.Got)
}

// Check reports the first bound, size or attach mode of o out of range, as
// an *OptionError. It is for options a person chose, so Duration and
// BufferBytes must be given: Run replaces a zero with its default (10 s,
// 16 MiB), but a person who types 0 does not mean that.
func (o Options) Check() error {
	switch {
	case o.Duration <= 0:
		return &OptionError{Field: "Duration", Want: "positive", Got: o.Duration}
	case o.MaxEvents < 0:
		return &OptionError{Field: "MaxEvents", Want: "≥ 0", Got: o.MaxEvents}
	case o.MaxBytes < 0:
		return &OptionError{Field: "MaxBytes", Want: "≥ 0", Got: o.MaxBytes}
	}
	if err := checkBuffer(o.BufferBytes); err != nil {
		return err
	}
	switch o.Attach {
	case AttachAuto, AttachBTF, AttachRawTP:
		return nil
	}
	return &OptionError{Field: "Attach", Want: fmt.Sprintf("%q (auto), %q or %q", AttachAuto, AttachBTF, AttachRawTP), Got: fmt.Sprintf("%q", o.Attach)}
}

// checkBuffer is the ring buffer's rule: the kernel wants a power of two
// of at least a page, and the map's size is 32 bits.
func checkBuffer(n int) error {
	if n < os.Getpagesize() || n&(n-1) != 0 || n > MaxBufferBytes {
		return &OptionError{Field: "BufferBytes", Want: fmt.Sprintf("a power of two between %d bytes and 1GiB", os.Getpagesize()), Got: n}
	}
	return nil
}
