package profiles

import (
	"fmt"
	"strings"
)

// Severity says whether a finding stops a profile (Error) or is advice
// (Warning). Under --strict warnings count as errors.
type Severity int

// Severities.
const (
	Warning Severity = iota + 1
	Error
)

func (s Severity) String() string {
	switch s {
	case Warning:
		return "warning"
	case Error:
		return "error"
	}
	return fmt.Sprintf("severity(%d)", int(s))
}

// Finding is one problem Lint found.
type Finding struct {
	Severity Severity
	// Group is the index of the thread group in Profile.ThreadGroups, or -1
	// for the profile as a whole; GroupName is its name.
	Group     int
	GroupName string
	// Field is the key the finding is about, relative to the group (e.g.
	// "exclusive_cores", "match.comm_regex") or to the profile (e.g.
	// "machine_shape", "fingerprint.images[0]").
	Field string
	// Backend is set when the finding holds for one backend only.
	Backend string
	Message string
	// Option is the LintOptions setting that resolves the finding, or
	// that made it what it is; Hint says so, %s standing for the option's
	// name. Both are empty when no option is involved.
	Option Option
	Hint   string
}

// Option is a setting of LintOptions a finding points to. A program that
// takes the setting under a name of its own (a command-line flag) names it
// that way with Format.
type Option int

// Options a finding can point to.
const (
	// OptionRequest is LintOptions.RequestMillicores.
	OptionRequest Option = iota + 1
	// OptionShape is LintOptions.Shape.
	OptionShape
	// OptionDemote is LintOptions.Demote, which reports what Demote does.
	OptionDemote
)

func (o Option) String() string {
	switch o {
	case OptionRequest:
		return "LintOptions.RequestMillicores"
	case OptionShape:
		return "LintOptions.Shape"
	case OptionDemote:
		return "LintOptions.Demote"
	}
	return fmt.Sprintf("option(%d)", int(o))
}

// String formats f as one line: `error: group "x": field: message (hint)`,
// naming the option by its LintOptions field.
func (f Finding) String() string {
	return f.Format(Option.String)
}

// Format formats f as String does, with name(f.Option) as the option's
// name in the hint.
func (f Finding) Format(name func(Option) string) string {
	var b strings.Builder
	b.WriteString(f.Severity.String())
	b.WriteString(": ")
	if f.Group >= 0 {
		fmt.Fprintf(&b, "group %q: ", f.GroupName)
	}
	if f.Field != "" {
		b.WriteString(f.Field)
		b.WriteString(": ")
	}
	if f.Backend != "" {
		fmt.Fprintf(&b, "[%s] ", f.Backend)
	}
	b.WriteString(f.Message)
	if f.Hint != "" {
		b.WriteString(" (")
		b.WriteString(strings.ReplaceAll(f.Hint, "%s", name(f.Option)))
		b.WriteString(")")
	}
	return b.String()
}

// HasErrors reports whether any finding is an error.
func HasErrors(fs []Finding) bool {
	for _, f := range fs {
		if f.Severity == Error {
			return true
		}
	}
	return false
}

// FirstError is the first error among fs, the one a caller that refuses a
// profile names; ok is false when fs holds warnings only.
func FirstError(fs []Finding) (f Finding, ok bool) {
	for _, f := range fs {
		if f.Severity == Error {
			return f, true
		}
	}
	return Finding{}, false
}

// Split separates fs into its errors and the rest (warnings), each in
// Lint's order: what refuses a profile, and what is only reported.
func Split(fs []Finding) (errs, warnings []Finding) {
	for _, f := range fs {
		if f.Severity == Error {
			errs = append(errs, f)
		} else {
			warnings = append(warnings, f)
		}
	}
	return errs, warnings
}
