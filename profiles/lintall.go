package profiles

import (
	"fmt"
	"io"
	"strings"
)

// LintInput is one profile for LintAll: Name names it in the output, and
// when Profile is nil it is the file LintAll loads.
type LintInput struct {
	Name    string
	Profile *Profile
}

// BuiltinInputs are the compiled-in profiles with the given ids as
// LintAll's inputs, named builtin/<id>.toml; the id "all" stands for every
// one. An unknown id is Builtin's error.
func BuiltinInputs(ids []string) ([]LintInput, error) {
	var in []LintInput
	for _, id := range ids {
		if id == "all" {
			for _, c := range BuiltinCandidates() {
				in = append(in, LintInput{Name: c.Source, Profile: c.Profile})
			}
			continue
		}
		p, err := Builtin(id)
		if err != nil {
			return nil, err
		}
		in = append(in, LintInput{Name: "builtin/" + id + ".toml", Profile: p})
	}
	return in, nil
}

// LintTally counts what LintAll found. Bad counts the profiles with an
// error finding or that did not load; a load error counts as an error.
type LintTally struct {
	Profiles, Bad, Errors, Warnings int
}

// Err is nil when no profile has an error, else one line that counts them.
func (t LintTally) Err() error {
	if t.Errors == 0 {
		return nil
	}
	return fmt.Errorf("lint: %d of %d profiles have errors (%d errors, %d warnings)", t.Bad, t.Profiles, t.Errors, t.Warnings)
}

// LintAll lints every input with opt and writes to w, one line each, every
// finding as NAME: FINDING (format formats it: a command names the options
// a finding points to by its flags; nil is Finding.String), a profile
// without findings as NAME: ok (the backends checked against), and a file
// that does not load as its error. It stops only when w fails.
func LintAll(w io.Writer, in []LintInput, opt LintOptions, format func(Finding) string) (LintTally, error) {
	if format == nil {
		format = Finding.String
	}
	against := opt.Backend
	if against == "" {
		against = strings.Join(ShippedBackends(), ", ")
	}
	t := LintTally{Profiles: len(in)}
	for _, x := range in {
		p := x.Profile
		if p == nil {
			var err error
			if p, err = Load(x.Name); err != nil {
				t.Bad++
				t.Errors++
				if _, err := fmt.Fprintln(w, strings.ReplaceAll(err.Error(), "\n", " ")); err != nil {
					return t, err
				}
				continue
			}
		}
		fs := Lint(p, opt)
		for _, f := range fs {
			if f.Severity == Error {
				t.Errors++
			} else {
				t.Warnings++
			}
			if _, err := fmt.Fprintf(w, "%s: %s\n", x.Name, format(f)); err != nil {
				return t, err
			}
		}
		if HasErrors(fs) {
			t.Bad++
		} else if len(fs) == 0 {
			if _, err := fmt.Fprintf(w, "%s: ok (%s)\n", x.Name, against); err != nil {
				return t, err
			}
		}
	}
	return t, nil
}

// Explain resolves pod among cands on machine (Resolve) and writes why, one
// step a line, then the outcome: "result: ID from SOURCE" or "result: no
// profile". When resolution fails it writes the steps so far and returns
// Resolve's error.
func Explain(w io.Writer, cands []Candidate, pod PodInfo, machine Shape) error {
	ch, err := Resolve(cands, pod, machine)
	for _, line := range ch.Explanation {
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	if err != nil {
		return err
	}
	if ch.Profile == nil {
		_, err = fmt.Fprintln(w, "result: no profile")
		return err
	}
	_, err = fmt.Fprintf(w, "result: %s from %s\n", ch.Profile.ID, ch.Source)
	return err
}
