package scheduler

import (
	"fmt"
	"io"
)

// Write writes the closing summary of a stopped session to a person: the
// profile and backend, the target, how long it ran and why it stopped
// (reason, in the caller's words as for NewReport), whether every change
// was reverted, and the closing stats table when they were read.
func (s Summary) Write(w io.Writer, profile, backend, target, reason string) error {
	fmt.Fprintf(w, "profile   %s (backend %s)\n", profile, backend)
	fmt.Fprintf(w, "target    %s\n", target)
	fmt.Fprintf(w, "stopped   after %.2f s: %s\n", s.Elapsed.Seconds(), reason)
	reverted := "every change"
	if s.RevertErr != nil {
		reverted = "FAILED (see the error below)"
	}
	_, err := fmt.Fprintf(w, "reverted  %s\n", reverted)
	if s.StatsErr == nil {
		fmt.Fprintln(w)
		err = WriteStats(w, s.Stats, s.Elapsed)
	}
	return err
}

// Errs are the errors of a stopped session, in order: the one that stopped
// it, the revert's (retry, when not empty, is appended to it: the caller's
// advice on how to retry) and the stats'. Nil when it stopped cleanly.
func (s Summary) Errs(retry string) []error {
	var errs []error
	if s.Err != nil {
		errs = append(errs, s.Err)
	}
	if s.RevertErr != nil {
		errs = append(errs, fmt.Errorf("revert: %w%s", s.RevertErr, retry))
	}
	if s.StatsErr != nil {
		errs = append(errs, fmt.Errorf("stats: %w", s.StatsErr))
	}
	return errs
}
