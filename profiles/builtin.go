package profiles

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// builtinFS holds the builtin profiles, one per id: builtin/<id>.toml, each
// with its rationale in comments.
//
//go:embed builtin/*.toml
var builtinFS embed.FS

// Builtins returns the compiled-in profiles, sorted by id, freshly parsed
// (callers may change them). They are tested to parse and lint clean, so a
// failure here is a build defect and panics.
func Builtins() []*Profile {
	var ps []*Profile
	for _, c := range BuiltinCandidates() {
		ps = append(ps, c.Profile)
	}
	return ps
}

// BuiltinCandidates returns the builtins with their sources, for Resolve.
func BuiltinCandidates() []Candidate {
	names, err := fs.Glob(builtinFS, "builtin/*.toml")
	if err != nil {
		panic(fmt.Sprintf("profiles: builtins: %v", err))
	}
	sort.Strings(names)
	cs := make([]Candidate, 0, len(names))
	for _, n := range names {
		data, err := builtinFS.ReadFile(n)
		if err != nil {
			panic(fmt.Sprintf("profiles: builtin %s: %v", n, err))
		}
		p, err := Parse(n, data)
		if err != nil {
			panic(fmt.Sprintf("profiles: builtin %v", err))
		}
		if want := strings.TrimSuffix(path.Base(n), ".toml"); p.ID != want {
			panic(fmt.Sprintf("profiles: builtin %s has id %q", n, p.ID))
		}
		cs = append(cs, Candidate{Profile: p, Source: n, Builtin: true})
	}
	return cs
}

// Builtin returns the builtin profile with the given id; the error wraps
// ErrUnknownProfile and lists the ids there are.
func Builtin(id string) (*Profile, error) {
	var ids []string
	for _, p := range Builtins() {
		if p.ID == id {
			return p, nil
		}
		ids = append(ids, p.ID)
	}
	return nil, fmt.Errorf("builtin profile %q: %w (builtins: %s)", id, ErrUnknownProfile, strings.Join(ids, ", "))
}

// BuiltinSource returns the TOML text of a builtin, comments included.
func BuiltinSource(id string) ([]byte, error) {
	data, err := builtinFS.ReadFile("builtin/" + id + ".toml")
	if err != nil {
		return nil, fmt.Errorf("builtin profile %q: %w", id, ErrUnknownProfile)
	}
	return data, nil
}
