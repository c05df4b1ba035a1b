package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/profiles"
)

// synthesizeCLI runs the CLI with the synthesize command registered
// (main.go may not register it yet), with run's exit-code mapping.
func synthesizeCLI(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	root := newRootCmd(&o, &e)
	if c, _, err := root.Find([]string{"synthesize"}); err != nil || c == root {
		root.AddCommand(newSynthesizeCmd())
	}
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK, o.String(), e.String()
	}
	e.WriteString("temper-train: " + err.Error() + "\n")
	var ue usageError
	if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown") {
		return exitUsage, o.String(), e.String()
	}
	return exitFailure, o.String(), e.String()
}

// workloadAnalysis writes the analysis of the test workload's trace to dir.
func workloadAnalysis(t *testing.T, dir string) string {
	t.Helper()
	a, err := analyze.File(example, analyze.Options{Pids: []int{19560}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "analysis.json")
	if err := a.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSynthesizeCommand(t *testing.T) {
	dir := t.TempDir()
	analysis := workloadAnalysis(t, dir)
	out := filepath.Join(dir, "profiles")
	layered, values := filepath.Join(dir, "wl.layered.json"), filepath.Join(dir, "wl-values.yaml")

	code, stdout, stderr := synthesizeCLI("synthesize", analysis, "--id", "wl", "--shape", "2cpu-2c-smt1", "--out", out,
		"--export", "scx-layered", layered, "--export", "helm="+values)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	path := filepath.Join(out, "wl", "2cpu-2c-smt1.toml")
	for _, want := range []string{
		"profile wl for 2cpu-2c-smt1 (request 1000m, 13 threads, 1 hot)",
		"compute           normal     2        1    -      -             1800      -       comm_prefix=\"wl-compute\"",
		`rest              normal     4        0    -      -             250       -       all`,
		"wrote " + path,
		"wrote " + layered + " (scx-layered)",
		`deploy: helm upgrade temper deploy/helm/temper --reuse-values --set-file 'agent.profiles.wl\.toml'=` + path,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	p, err := profiles.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if p.ID != "wl" || len(p.ThreadGroups) != 4 || p.ThreadGroups[0].Treatment != profiles.Latency {
		t.Errorf("profile: %+v", p)
	}
	first, _ := os.ReadFile(path)
	for _, f := range []string{layered, values} {
		if data, err := os.ReadFile(f); err != nil || len(data) == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}

	// Again: the same bytes; the file is replaced, not refused.
	if code, _, stderr := synthesizeCLI("synthesize", analysis, "--id", "wl", "--shape", "2cpu-2c-smt1", "--out", out); code != exitOK {
		t.Fatalf("second run: exit %d: %s", code, stderr)
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(first, again) {
		t.Error("a second run wrote different bytes")
	}

	// --out -: only the TOML on stdout, and it is the file's content.
	code, stdout, stderr = synthesizeCLI("synthesize", analysis, "--id", "wl", "--shape", "2cpu-2c-smt1", "--out", "-")
	if code != exitOK || stdout != string(first) || !strings.Contains(stderr, "profile wl for 2cpu-2c-smt1") {
		t.Errorf("--out -: exit %d, stdout equal to the file: %v, stderr:\n%s", code, stdout == string(first), stderr)
	}

	// The snapshot gives the shape (2 cores, SMT2) and the pod's request.
	code, stdout, stderr = synthesizeCLI("synthesize", analysis, "--id", "web", "--out", out,
		"--snapshot", "../../observe/snapshot/testdata/snapshot.golden.json")
	if code != exitOK || !strings.Contains(stdout, "profile web for 4cpu-2c-smt2 (request 500m") {
		t.Errorf("--snapshot: exit %d:\n%s%s", code, stdout, stderr)
	}
	snapProfile, err := profiles.Load(filepath.Join(out, "web", "4cpu-2c-smt2.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if tr := snapProfile.Traits; tr.CPULimitMillicores != 2000 || tr.ThrottledFraction != 0 {
		t.Errorf("traits from the snapshot: %+v", tr)
	}
	if imgs := snapProfile.Fingerprint.Images; len(imgs) != 1 || imgs[0] != "web:*" {
		t.Errorf("images %q", imgs)
	}

	// A logical-CPU-only shape: the demotion is a warning on stderr.
	code, _, stderr = synthesizeCLI("synthesize", analysis, "--id", "wl", "--shape", "2cpu", "--out", out)
	if code != exitOK || !strings.Contains(stderr, "temper-train: warning: group compute (sync_compute): demoted to normal") {
		t.Errorf("--shape 2cpu: exit %d, stderr:\n%s", code, stderr)
	}
}

func TestSynthesizeCommandErrors(t *testing.T) {
	dir := t.TempDir()
	analysis := workloadAnalysis(t, dir)
	garbage := filepath.Join(dir, "garbage.json")
	if err := os.WriteFile(garbage, []byte(`{"schema": "temper-train/snapshot/v1"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no id", []string{analysis, "--shape", "2cpu-2c-smt1"}, exitUsage, "no profile id: pass --id"},
		{"bad id", []string{analysis, "--id", "WL", "--shape", "2cpu-2c-smt1"}, exitFailure, `--id: profile id "WL": use lowercase letters`},
		{"no analysis", []string{"--id", "wl"}, exitUsage, "requires at least 1 arg"},
		{"impossible shape", []string{analysis, "--id", "wl", "--shape", "8cpu-3c-smt2"}, exitUsage,
			`--shape: shape "8cpu-3c-smt2": logical_cpus = 8 but cores × threads_per_core = 3 × 2 = 6`},
		{"shape the trace contradicts", []string{analysis, "--id", "wl", "--shape", "1cpu-1c-smt1"}, exitFailure, "has 1 logical CPUs but the trace saw events on 2"},
		{"no shape at all", []string{analysis, "--id", "wl"}, exitFailure, "no machine shape: no snapshot, no shape given, and the analysis' trace did not record its CPU count: pass --snapshot snapshot.json (written by observe) or --shape"},
		{"bad request", []string{analysis, "--id", "wl", "--shape", "2c", "--request", "lots"}, exitUsage, `--request: "lots" is not a CPU quantity`},
		{"unknown export", []string{analysis, "--id", "wl", "--shape", "2c", "--export", "yaml=x"}, exitUsage, `--export "yaml": unknown kind`},
		{"export without a file", []string{analysis, "--id", "wl", "--shape", "2c", "--export", "helm"}, exitUsage, "--export helm needs a FILE"},
		{"export over the analysis", []string{analysis, "--id", "wl", "--shape", "2c", "--export", "helm", analysis}, exitUsage, "--export helm would be written to " + analysis + ", which is the analysis"},
		{"two analyses", []string{analysis, analysis, "--id", "wl", "--shape", "2c"}, exitUsage, "unexpected argument"},
		{"missing file", []string{filepath.Join(dir, "nope.json"), "--id", "wl", "--shape", "2c"}, exitFailure, "analysis " + filepath.Join(dir, "nope.json") + ": open"},
		{"not an analysis", []string{garbage, "--id", "wl", "--shape", "2c"}, exitFailure, `schema "temper-train/snapshot/v1", want "temper-train/analysis/v1"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"synthesize"}, c.args...)
			args = append(args, "--out", out)
			code, stdout, stderr := synthesizeCLI(args...)
			if code != c.code || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, want %d; stderr lacks %q:\n%s", code, c.code, c.want, stderr)
			}
			if lines := strings.Count(strings.TrimSpace(strings.ReplaceAll(stderr, "Run 'temper-train --help' for usage.", "")), "\n"); lines > 0 {
				t.Errorf("error is more than one line:\n%s", stderr)
			}
			if stdout != "" {
				t.Errorf("stdout on failure: %q", stdout)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("a failed run left %s behind", out)
			}
		})
	}
}
