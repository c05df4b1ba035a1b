package profiles

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"temper.codes/temper-train/internal/testkit"
)

// TestParseBad loads every file in testdata/bad and compares the one-line
// errors with testdata/bad/errors.golden; each must also wrap its sentinel.
func TestParseBad(t *testing.T) {
	sentinels := map[string]error{
		"bad-id.toml":                ErrInvalid,
		"evidence-typo.toml":         ErrUnknownKey,
		"groups-not-array.toml":      ErrType,
		"int-overflow.toml":          ErrSyntax,
		"key-case.toml":              ErrUnknownKey,
		"missing-name.toml":          ErrMissing,
		"missing-treatment.toml":     ErrMissing,
		"nan.toml":                   ErrType,
		"no-id.toml":                 ErrMissing,
		"no-schema-version.toml":     ErrMissing,
		"prefix-not-array.toml":      ErrType,
		"schema-version-2.toml":      ErrSchemaVersion,
		"schema-version-string.toml": ErrSchemaVersion,
		"syntax.toml":                ErrSyntax,
		"unknown-match-key.toml":     ErrUnknownKey,
		"unknown-treatment.toml":     ErrInvalid,
		"wrong-type-int.toml":        ErrType,
		"zero-cores.toml":            ErrInvalid,
	}
	files, err := filepath.Glob("testdata/bad/*.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(sentinels) {
		t.Errorf("%d bad files, %d expectations", len(files), len(sentinels))
	}
	var got strings.Builder
	for _, f := range files {
		_, err := Load(f)
		if err == nil {
			t.Errorf("%s: loaded without error", f)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") {
			t.Errorf("%s: error is not one line: %q", f, msg)
		}
		if !strings.HasPrefix(msg, f) {
			t.Errorf("%s: error does not name the file: %q", f, msg)
		}
		if want := sentinels[filepath.Base(f)]; !errors.Is(err, want) {
			t.Errorf("%s: %v does not wrap %v", f, err, want)
		}
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("%s: %T is not a *ParseError", f, err)
		}
		got.WriteString(msg + "\n")
	}
	testkit.Golden(t, "testdata/bad/errors.golden", []byte(got.String()))
}

// TestParseErrorLines checks that errors name the line and key path of the
// offending key, array elements by index, whatever TOML syntax defines it.
func TestParseErrorLines(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{"top-level typo", "schema_version = 1\nid = \"x\"\n\ndescrption = \"d\"\n", "t.toml:4: descrption: unknown key (did you mean description?"},
		{"table key", "schema_version = 1\nid = \"x\"\n[traits]\nthreads = 3\nhot = 1\n", "t.toml:5: traits.hot: unknown key"},
		{"dotted key", "schema_version = 1\nid = \"x\"\ntraits.hotthreads = 1\n", "t.toml:3: traits.hotthreads: unknown key (did you mean hot_threads?"},
		{"second group", "schema_version = 1\nid = \"x\"\n[[thread_groups]]\nname = \"a\"\ntreatment = \"normal\"\nmatch = {all = true}\n[[thread_groups]]\nname = \"b\"\ntreatment = \"normal\"\nmatch = {all = true, bogus = 1}\n", "t.toml:10: thread_groups[1].match.bogus: unknown key"},
		{"inline array of tables", "schema_version = 1\nid = \"x\"\nthread_groups = [\n  {name = \"a\", treatment = \"normal\", match = {all = true}},\n  {name = \"b\", treatment = \"fast\", match = {all = true}},\n]\n", "t.toml:5: thread_groups[1].treatment: unknown treatment \"fast\""},
		{"evidence sub-table", "schema_version = 1\nid = \"x\"\n[[thread_groups]]\nname = \"a\"\ntreatment = \"normal\"\nmatch = {all = true}\n[[thread_groups]]\nname = \"b\"\ntreatment = \"normal\"\nmatch = {all = true}\n[thread_groups.evidence]\nclass = \"x\"\nthreads = \"3\"\n", "t.toml:13: thread_groups[1].evidence.threads: want an integer, got string \"3\""},
		{"key in a string is not a key", "schema_version = 1\nid = \"x\"\ndescription = \"\"\"\nbogus = 1\n\"\"\"\nbogus = 2\n", "t.toml:6: bogus: unknown key"},
		{"quoted key", "schema_version = 1\nid = \"x\"\n\"weird key\" = 1\n", "t.toml:3: weird key: unknown key"},
		{"float for int", "schema_version = 1\nid = \"x\"\n[traits]\nthreads = 2.5\n", "t.toml:4: traits.threads: want an integer, got float 2.5"},
		{"negative zero shape", "schema_version = 1\nid = \"x\"\n[machine_shape]\nlogical_cpus = -8\n", "t.toml:4: machine_shape.logical_cpus: -8: a machine has at least one"},
		{"earliest of several", "schema_version = 1\nid = \"x\"\n[traits]\nzzz = 1\naaa = 2\n", "t.toml:4: traits.zzz: unknown key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("t.toml", []byte(c.src))
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("got %v\nwant prefix %s", err, c.want)
			}
		})
	}
}

func TestParseAcceptsIntForFloat(t *testing.T) {
	p, err := Parse("t.toml", []byte("schema_version = 1\nid = \"x\"\n[traits]\nobserved_cpus_used = 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Traits.ObservedCPUsUsed != 2 {
		t.Errorf("observed_cpus_used = %v", p.Traits.ObservedCPUsUsed)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.toml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("got %v, want a not-exist error", err)
	}
}

func TestKeyLines(t *testing.T) {
	src := `schema_version = 1 # comment with key = 1
id = 'x'
a.b.c = [1, 2,
  3]
[t]
s = """multi
x = 1
"""
[[arr]]
k = { m = { n = 1 }, o = [ {p = 1}, {p = 2} ] }
[[arr]]
k = 2
[arr.sub]
q = 1
`
	want := map[string]int{
		"schema_version": 1, "id": 2, "a": 3, "a.b": 3, "a.b.c": 3,
		"t": 5, "t.s": 6, "arr": 9, "arr[0]": 9, "arr[0].k": 10, "arr[0].k.m.n": 10,
		"arr[0].k.o[1].p": 10, "arr[1].k": 12, "arr[1].sub": 13, "arr[1].sub.q": 14,
	}
	got := keyLines([]byte(src))
	for k, l := range want {
		if got[k] != l {
			t.Errorf("%s: line %d, want %d", k, got[k], l)
		}
	}
	if _, ok := got["t.x"]; ok {
		t.Error("a key inside a multi-line string was indexed")
	}
}
