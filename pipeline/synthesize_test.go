package pipeline

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/synthesize"
)

// TestSynthesizeExports: exports are made and written beside the profile,
// an output over an input or another output is a *ClashError naming both
// in the caller's words and writes nothing, and Report lists what was
// written.
func TestSynthesizeExports(t *testing.T) {
	a := analyzeWorkload(t, "testdata/traces/workload-tracefs.txt.gz", AnalyzeOptions{})
	shape, err := profiles.ParseShape("2cpu-2c-smt1")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	analysis := filepath.Join(dir, "analysis.json")
	opts := func(out string, exports ...Export) SynthesizeOptions {
		return SynthesizeOptions{Out: out, Exports: exports,
			Options: synthesize.Options{ID: "wl", Source: analysis, Shape: &shape}}
	}
	helm := Export{Kind: synthesize.ExportHelm, File: filepath.Join(dir, "values.yaml")}
	layered := Export{Kind: synthesize.ExportLayered, File: filepath.Join(dir, "layered.json"), Name: "--export scx-layered"}

	clashes := []struct {
		name string
		opts SynthesizeOptions
		want string
	}{
		{"export over the analysis", opts("", Export{Kind: synthesize.ExportHelm, File: analysis}),
			"the helm export would be written to " + analysis + ", which is the analysis"},
		{"two exports to one file", opts("", helm, Export{Kind: synthesize.ExportLayered, File: helm.File, Name: "--export scx-layered"}),
			"--export scx-layered would be written to " + helm.File + ", which is the helm export"},
	}
	for _, c := range clashes {
		_, err := Synthesize(a.Analysis, c.opts)
		var ce *ClashError
		if !errors.As(err, &ce) || err.Error() != c.want {
			t.Errorf("%s: %v, want a ClashError %q", c.name, err, c.want)
		}
		if _, err := os.Stat(helm.File); err == nil {
			t.Errorf("%s: wrote %s", c.name, helm.File)
		}
	}
	if _, err := Synthesize(a.Analysis, opts("", Export{Kind: "yaml", File: "x", Name: "--export yaml"})); !errors.Is(err, synthesize.ErrExportKind) || !strings.HasPrefix(err.Error(), "--export yaml: ") {
		t.Errorf("unknown kind: %v", err)
	}

	s, err := Synthesize(a.Analysis, opts(filepath.Join(dir, "profiles"), helm, layered))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range s.Exports {
		if got := readFile(t, e.File); !bytes.Equal(got, e.Data) || len(got) == 0 {
			t.Errorf("%s: %d bytes, Data %d", e.File, len(got), len(e.Data))
		}
	}
	var b bytes.Buffer
	if err := s.Report(&b); err != nil {
		t.Fatal(err)
	}
	want := "wrote " + s.Path + "\nwrote " + helm.File + " (helm)\nwrote " + layered.File + " (scx-layered)\ndeploy: "
	if !strings.Contains(b.String(), want) || !strings.Contains(b.String(), s.Path) {
		t.Errorf("report lacks %q:\n%s", want, b.String())
	}

	s, err = Synthesize(a.Analysis, opts(""))
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := s.Report(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "wrote") || !strings.Contains(b.String(), "./wl.toml") {
		t.Errorf("nothing written: the report should deploy ./wl.toml and say nothing was written:\n%s", b.String())
	}
}
