package ledger

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Identity is what makes a ledger's trials comparable with a resuming run's:
// the same profile on the same machine, target, benchmark (command and
// adapter), backend (and whether its CPU ceilings were on) and tool
// versions. Each field is the Header field of the
// same name as the resuming run would write it.
type Identity struct {
	ProfileHash string
	Machine     Machine
	Target      string
	Bench       []string
	Adapter     string
	Backend     string
	NoCeilings  bool
	Tools       map[string]string
}

// Identity is the identity a run writing h has.
func (h Header) Identity() Identity {
	return Identity{ProfileHash: h.ProfileHash, Machine: h.Machine, Target: h.Target, Bench: h.Bench,
		Adapter: h.Adapter, Backend: h.Backend, NoCeilings: h.NoCeilings, Tools: h.Tools}
}

// Check refuses to resume a ledger made by a run that differs from want in
// any field of Identity: trials of two experiments must not mix in one
// ledger. The error is one line naming the first field that differs, both
// values, and wraps ErrMismatch.
func (l *Ledger) Check(path string, want Identity) error {
	h := l.Header
	differ := func(field, was, now string) error {
		return fmt.Errorf("%w: %s was made with %s %s, this run has %s; start a new ledger", ErrMismatch, path, field, was, now)
	}
	switch {
	case h.ProfileHash != want.ProfileHash:
		return fmt.Errorf("%w: %s was made for profile %s (%.12s), not this one (%.12s); start a new ledger",
			ErrMismatch, path, h.Profile, h.ProfileHash, want.ProfileHash)
	case h.Machine != want.Machine:
		m := want.Machine
		return fmt.Errorf("%w: %s was made on %s (%s, kernel %s, cpu %q), this is %s (%s, kernel %s, cpu %q); start a new ledger",
			ErrMismatch, path, h.Machine.Hostname, h.Machine.Shape, h.Machine.Kernel, h.Machine.CPUModel, m.Hostname, m.Shape, m.Kernel, m.CPUModel)
	case h.Target != want.Target:
		return differ("target", strconv.Quote(h.Target), strconv.Quote(want.Target))
	case !slices.Equal(h.Bench, want.Bench):
		return differ("benchmark", quoteArgv(h.Bench), quoteArgv(want.Bench))
	case h.Adapter != want.Adapter:
		return differ("adapter", strconv.Quote(h.Adapter), strconv.Quote(want.Adapter))
	case h.Backend != want.Backend:
		return differ("backend", strconv.Quote(h.Backend), strconv.Quote(want.Backend))
	case h.NoCeilings != want.NoCeilings:
		return differ("the scheduler's CPU ceilings", ceilings(h.NoCeilings), ceilings(want.NoCeilings))
	}
	tools := maps.Clone(h.Tools)
	if tools == nil {
		tools = map[string]string{}
	}
	maps.Copy(tools, want.Tools)
	for _, k := range slices.Sorted(maps.Keys(tools)) {
		was, ok1 := h.Tools[k]
		now, ok2 := want.Tools[k]
		if ok1 != ok2 || was != now {
			return differ(k+" version", versionOrNone(was, ok1), versionOrNone(now, ok2))
		}
	}
	return nil
}

func versionOrNone(v string, ok bool) string {
	if !ok {
		return "(none recorded)"
	}
	return strconv.Quote(v)
}

// quoteArgv writes argv as one line, each argument quoted where it must be.
func quoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\") {
			a = strconv.Quote(a)
		}
		q[i] = a
	}
	return "[" + strings.Join(q, " ") + "]"
}

// ceilings names a run's NoCeilings setting for Check's error.
func ceilings(off bool) string {
	if off {
		return "off (--no-ceilings)"
	}
	return "on"
}
