package profiles

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const anyProfile = "schema_version = 1\nid = \"redis\"\n[[thread_groups]]\nname = \"all\"\nmatch = { all = true }\ntreatment = \"latency\"\n"

// yieldPreempt has one warning: preempt is ignored at yield treatment.
var yieldPreempt = strings.Replace(anyProfile, `"latency"`, `"yield"`, 1) + "preempt = true\n"

func TestLintAll(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.toml", anyProfile)
	typo := write("typo.toml", strings.Replace(anyProfile, "treatment", "treatmnt", 1))
	warn := write("warn.toml", yieldPreempt)
	missing := filepath.Join(dir, "missing.toml")
	for _, tc := range []struct {
		name   string
		in     []LintInput
		opt    LintOptions
		format func(Finding) string
		lines  []string // prefixes, one per line
		tally  LintTally
		err    string
	}{
		{name: "clean", in: []LintInput{{Name: good}}, lines: []string{good + ": ok (sched_ext, cfs)"}, tally: LintTally{Profiles: 1}},
		{name: "one backend", in: []LintInput{{Name: good}}, opt: LintOptions{Backend: BackendCFS}, lines: []string{good + ": ok (cfs)"}, tally: LintTally{Profiles: 1}},
		{name: "load errors count", in: []LintInput{{Name: typo}, {Name: missing}, {Name: good}},
			lines: []string{typo + ":", "load profile: ", good + ": ok"}, tally: LintTally{Profiles: 3, Bad: 2, Errors: 2},
			err: "lint: 2 of 3 profiles have errors (2 errors, 0 warnings)"},
		{name: "warning", in: []LintInput{{Name: warn}}, lines: []string{warn + `: warning: group "all": preempt:`}, tally: LintTally{Profiles: 1, Warnings: 1}},
		{name: "strict", in: []LintInput{{Name: warn}}, opt: LintOptions{Strict: true}, lines: []string{warn + `: error: group "all": preempt:`},
			tally: LintTally{Profiles: 1, Bad: 1, Errors: 1}, err: "lint: 1 of 1 profiles have errors (1 errors, 0 warnings)"},
		{name: "format", in: []LintInput{{Name: "mine", Profile: mustParse(t, yieldPreempt)}},
			format: func(Finding) string { return "FOUND" }, lines: []string{"mine: FOUND"}, tally: LintTally{Profiles: 1, Warnings: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			tally, err := LintAll(&b, tc.in, tc.opt, tc.format)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
			if len(lines) != len(tc.lines) {
				t.Fatalf("wrote\n%s\nwant %d lines", b.String(), len(tc.lines))
			}
			for i, l := range lines {
				if !strings.HasPrefix(l, tc.lines[i]) {
					t.Errorf("line %d = %q; want prefix %q", i, l, tc.lines[i])
				}
			}
			if tally != tc.tally {
				t.Errorf("tally %+v; want %+v", tally, tc.tally)
			}
			if err := tally.Err(); (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
				t.Errorf("Err() = %v; want %q", err, tc.err)
			}
		})
	}
}

func mustParse(t *testing.T, s string) *Profile {
	t.Helper()
	p, err := Parse("test.toml", []byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBuiltinInputs(t *testing.T) {
	in, err := BuiltinInputs([]string{"redis", "all"})
	if err != nil {
		t.Fatal(err)
	}
	if len(in) != 1+len(BuiltinCandidates()) || in[0].Name != "builtin/redis.toml" || in[0].Profile.ID != "redis" {
		t.Errorf("BuiltinInputs = %d inputs, first %q", len(in), in[0].Name)
	}
	for _, x := range in {
		if x.Profile == nil || !strings.HasPrefix(x.Name, "builtin/") {
			t.Errorf("input %q without its profile", x.Name)
		}
	}
	if _, err := BuiltinInputs([]string{"nope"}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown id: %v", err)
	}
}

func TestExplain(t *testing.T) {
	cands := BuiltinCandidates()
	for _, tc := range []struct {
		name string
		pod  PodInfo
		last string
		err  string
	}{
		{name: "annotation", pod: PodInfo{Annotations: map[string]string{AnnotationProfile: "redis"}}, last: "result: redis from builtin/redis.toml"},
		{name: "nothing matches", pod: PodInfo{Images: []string{"example.com/none-such:1"}}, last: "result: no profile"},
		{name: "unknown id", pod: PodInfo{Annotations: map[string]string{AnnotationProfile: "nope"}}, err: "names no profile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			err := Explain(&b, cands, tc.pod, Shape{})
			if tc.err != "" {
				want, _ := Resolve(cands, tc.pod, Shape{})
				if err == nil || !strings.Contains(err.Error(), tc.err) || b.String() != strings.Join(append(want.Explanation, ""), "\n") {
					t.Errorf("Explain error %v after\n%s", err, b.String())
				}
				return
			}
			lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
			if err != nil || len(lines) < 2 || lines[len(lines)-1] != tc.last {
				t.Errorf("Explain = %v,\n%s\nwant last line %q", err, b.String(), tc.last)
			}
		})
	}
	if err := Explain(failWriter{}, cands, PodInfo{}, Shape{}); !errors.Is(err, errWrite) {
		t.Errorf("write error: %v", err)
	}
}

var errWrite = errors.New("write failed")

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errWrite }
