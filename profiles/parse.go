package profiles

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"temper.codes/temper-train/internal/bounded"
)

// idPattern is what a profile id may look like: it names a directory, a
// pod annotation value and a file stem.
var idPattern = regexp.MustCompile(`^[a-z0-9-]+$`)

// maxFileBytes caps a profile file: real ones are a few KiB.
const maxFileBytes = 4 << 20

// Load reads and parses the profile file at path; see Parse.
func Load(path string) (*Profile, error) {
	data, err := bounded.ReadFile(path, maxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("load profile: %w", err)
	}
	return Parse(path, data)
}

// Parse reads one schema v1 profile strictly. name (a file name) prefixes
// errors. Every error is a *ParseError naming the line and key, wrapping one of
// the sentinels (ErrSyntax, ErrUnknownKey, ErrType, ErrMissing,
// ErrSchemaVersion, ErrInvalid); when a file has several problems the one
// earliest in the file is reported.
//
// Parse checks what a profile must have to mean anything: a supported
// schema_version, a well-formed id, a name and a known treatment for every
// thread group, and only keys the schema has. Whether the profile is sound
// for a machine and a backend is Lint's job.
func Parse(name string, data []byte) (*Profile, error) {
	var tree map[string]any
	if _, err := toml.Decode(string(data), &tree); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, &ParseError{File: name, Line: pe.Position.Line, Key: pe.LastKey, Msg: "invalid TOML: " + pe.Message, Err: ErrSyntax}
		}
		return nil, &ParseError{File: name, Msg: err.Error(), Err: ErrSyntax}
	}
	d := &decoder{file: name, lines: keyLines(data)}

	// The version first: a file from a newer schema has keys this one does
	// not know, and "unsupported schema_version" is the useful message.
	switch v, ok := tree["schema_version"]; {
	case !ok:
		return nil, &ParseError{File: name, Key: "schema_version", Err: ErrMissing,
			Msg: fmt.Sprintf("missing; add schema_version = %d at the top", SchemaVersion)}
	case v != int64(SchemaVersion):
		d.fail("schema_version", ErrSchemaVersion, "%s is not supported; this temper-train reads schema_version = %d", tomlType(v), SchemaVersion)
		return nil, d.first()
	}

	p := &Profile{}
	d.table("", tree, reflect.ValueOf(p).Elem())
	if err := d.first(); err != nil {
		return nil, err
	}
	d.check(tree, p)
	if err := d.first(); err != nil {
		return nil, err
	}
	return p, nil
}

// check enforces what the schema requires beyond types.
func (d *decoder) check(tree map[string]any, p *Profile) {
	if _, ok := tree["id"]; !ok {
		d.fail("id", ErrMissing, `missing; add id = "your-workload" ([a-z0-9-]+)`)
	} else if !idPattern.MatchString(p.ID) {
		d.fail("id", ErrInvalid, "%q is not a valid id: use lowercase letters, digits and '-' ([a-z0-9-]+)", p.ID)
	}
	// Zero means "any" in a shape, so a zero that is written out is a
	// mistake: "cores = 0" describes no machine.
	if shape, ok := tree["machine_shape"].(map[string]any); ok {
		for _, f := range fieldsOf(reflect.TypeFor[Shape]()) {
			if n, ok := shape[f.name].(int64); ok && n <= 0 {
				d.fail("machine_shape."+f.name, ErrInvalid, "%d: a machine has at least one; leave the key out to match any machine", n)
			}
		}
	}
	groups, _ := tree["thread_groups"].([]map[string]any)
	if list, ok := tree["thread_groups"].([]any); ok {
		for _, g := range list {
			m, _ := g.(map[string]any)
			groups = append(groups, m)
		}
	}
	for i, g := range p.ThreadGroups {
		path := fmt.Sprintf("thread_groups[%d]", i)
		if _, ok := groups[i]["name"]; !ok {
			d.fail(path+".name", ErrMissing, `missing; every thread group needs a name = "..."`)
		}
		if _, ok := groups[i]["treatment"]; !ok {
			d.fail(path+".treatment", ErrMissing, "missing; set treatment to one of %s", treatmentList())
		} else if !slices.Contains(Treatments(), g.Treatment) {
			d.fail(path+".treatment", ErrInvalid, "unknown treatment %q (known: %s)", g.Treatment, treatmentList())
		}
	}
}

func treatmentList() string {
	var s []string
	for _, t := range Treatments() {
		s = append(s, string(t))
	}
	return strings.Join(s, ", ")
}
