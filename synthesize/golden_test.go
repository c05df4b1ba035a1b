package synthesize

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/profiles"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares data with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, data []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./synthesize -run %s -update to create it)", err, t.Name())
	}
	if !bytes.Equal(data, want) {
		t.Errorf("%s differs from the golden file (go test ./synthesize -run %s -update rewrites it):\n%s", path, t.Name(), data)
	}
}

// traceCase is a real trace under testdata/traces and how analyze is told
// which threads are the workload's.
type traceCase struct {
	name  string // golden file stem
	trace string // relative to the repository root
	opts  analyze.Options
}

// traces are the real traces profiles are synthesized from in tests: the C
// test workload (testdata/workload; its pid is in the trace's .json), and
// the real servers as their traces are recorded.
var traces = []traceCase{
	{name: "workload", trace: "testdata/traces/workload-tracefs.txt.gz", opts: analyze.Options{Pids: []int{19560}}},
}

// TestGolden analyses each real trace and synthesizes it for several
// shapes: the machine the trace was recorded on (2 CPUs, no SMT), an SMT
// node with the seed's 2250m request, and a shape known only by its logical
// CPU count. It also exports the SMT profile to scx_layered and Helm.
func TestGolden(t *testing.T) {
	for _, tc := range traces {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Path = tc.trace
			a, err := analyze.AnalyzeFile(filepath.Join("..", tc.trace), opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range []struct {
				shape   string
				request int
				exports bool
			}{
				{"2cpu-2c-smt1", 0, false},
				{"8cpu-4c-smt2", 2250, true},
				{"2cpu", 0, false},
			} {
				t.Run(v.shape, func(t *testing.T) {
					opt := Options{ID: tc.name, Source: tc.name + "-analysis.json", Shape: shapeP(t, v.shape), RequestMillicores: v.request}
					r, err := Synthesize(a, opt)
					if err != nil {
						t.Fatal(err)
					}
					checkProfile(t, a, r)
					data, err := r.TOML()
					if err != nil {
						t.Fatal(err)
					}
					golden(t, tc.name+"-"+v.shape+".toml", data)
					if !v.exports {
						return
					}
					spec, err := LayeredSpec(r.Profile)
					if err != nil {
						t.Fatal(err)
					}
					checkLayeredEquivalent(t, a, r.Profile, spec)
					golden(t, tc.name+"-"+v.shape+".layered.json", spec)
					values, err := HelmValues(tc.name, data)
					if err != nil {
						t.Fatal(err)
					}
					if got := helmProfile(t, tc.name, values); got != string(data) {
						t.Errorf("helm values do not carry the TOML byte for byte")
					}
					golden(t, tc.name+"-"+v.shape+".values.yaml", values)
				})
			}
		})
	}
}

// TestGoldenParses: every golden profile loads strictly and lints clean.
func TestGoldenParses(t *testing.T) {
	files, err := filepath.Glob("testdata/*.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		p, err := profiles.Load(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		for _, fd := range profiles.Lint(p, profiles.LintOptions{}) {
			if fd.Severity == profiles.Error {
				t.Errorf("%s: %s", f, fd)
			}
		}
	}
}
