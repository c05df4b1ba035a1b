// Package pipeline strings the training stages together on typed values:
// Observe traces a live target and snapshots it, Analyze finds its thread
// groups, Synthesize writes a profile for them, Refine measures the
// profile against stock with a benchmark and keeps what helps, and Train
// runs all four. The commands are flags and printing around these calls;
// the canary loop calls the same stages each cycle (Fresh, Live).
//
// Every output file is optional, written whole or not at all, and never
// read back: each stage hands the next its value.
package pipeline

import (
	"errors"
	"fmt"
	"os"
)

// DirError is an output directory that cannot be made.
type DirError struct {
	Dir string
	Err error
}

func (e *DirError) Error() string { return fmt.Sprintf("%s: %v", e.Dir, e.Err) }
func (e *DirError) Unwrap() error { return e.Err }

// MakeDir creates dir if needed and says whether it did; an error is a
// *DirError.
func MakeDir(dir string) (created bool, err error) {
	fi, err := os.Stat(dir)
	switch {
	case err == nil && fi.IsDir():
		return false, nil
	case err == nil:
		return false, &DirError{dir, errors.New("exists and is not a directory")}
	case !errors.Is(err, os.ErrNotExist):
		return false, &DirError{dir, err}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, &DirError{dir, err}
	}
	return true, nil
}
