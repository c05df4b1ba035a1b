package pipeline

import (
	"context"
	"fmt"
	"strings"
	"time"

	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/scheduler"
	"temper.codes/temper-train/target"
)

// ApplyOptions configure Apply.
type ApplyOptions struct {
	// Backend puts the profile in force (see ChooseBackend).
	Backend scheduler.Backend
	// For stops the session after this long; 0 keeps it until ctx ends or
	// the target exits.
	For time.Duration
	// Demote gives an exclusive group too big for this machine latency
	// treatment (profiles.Demote) instead of refusing the profile.
	Demote bool
	// Warn receives each lint warning, Note each group Demote changed
	// (nil: dropped).
	Warn func(profiles.Finding)
	Note func(string)
}

// RefusedError is a profile Apply refused before changing anything: the
// file it came from and its lint errors, in Lint's order.
type RefusedError struct {
	Path   string
	Errors []profiles.Finding
}

func (e *RefusedError) Error() string { return e.Format(profiles.Finding.String) }

// Format is Error with the findings formatted by format (a command names
// the options it takes under its own flags; see profiles.Finding.Format).
// One error is one line; several are listed one per line (up to
// MaxListed), none hidden behind a count.
func (e *RefusedError) Format(format func(profiles.Finding) string) string {
	if len(e.Errors) == 1 {
		return fmt.Sprintf("%s: %s; nothing was changed", e.Path, format(e.Errors[0]))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d lint errors; nothing was changed:", e.Path, len(e.Errors))
	for i, f := range e.Errors {
		if i == MaxListed {
			fmt.Fprintf(&b, "\n  (and %d more)", len(e.Errors)-MaxListed)
			break
		}
		fmt.Fprintf(&b, "\n  %s: %s", e.Path, format(f))
	}
	return b.String()
}

// MaxListed bounds how many lint errors one refusal lists.
const MaxListed = 20

// Apply puts the profile p, read from path (which names it in errors), in
// force on tgt and returns the running session; Session.Stop reverts it,
// and the caller must call it. Before anything changes, p is linted for
// the backend, this machine's shape and, for a pod, the pod's CPU request:
// a lint error refuses it (*RefusedError). With opts.Demote the exclusive
// groups too big for the machine are demoted first; the session's plan
// holds the profile in force.
func Apply(ctx context.Context, tgt *target.Target, path string, p *profiles.Profile, opts ApplyOptions) (*scheduler.Session, error) {
	warn, note := opts.Warn, opts.Note
	if warn == nil {
		warn = func(profiles.Finding) {}
	}
	if note == nil {
		note = func(string) {}
	}
	topo, shape, err := thisMachine()
	if err != nil {
		return nil, err
	}
	lint := profiles.LintOptions{Backend: opts.Backend.Name(), Shape: &shape, Demote: opts.Demote}
	if tgt.Pod != nil {
		for _, c := range tgt.Pod.Containers {
			lint.RequestMillicores += int(c.CPURequestMilli)
		}
	}
	refused, warnings := profiles.Split(profiles.Lint(p, lint))
	for _, f := range warnings {
		warn(f)
	}
	if len(refused) > 0 {
		return nil, &RefusedError{Path: path, Errors: refused}
	}
	if opts.Demote {
		var notes []string
		p, notes = profiles.Demote(p, shape)
		for _, n := range notes {
			note(n)
		}
	}
	plan, err := scheduler.NewPlan(p, topo, scheduler.ThreadsOf(tgt.Refresh))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// A signal (ctx) stops the session, which reads the closing stats and
	// then reverts.
	return scheduler.Start(ctx, opts.Backend, plan, scheduler.Options{For: opts.For})
}
