package pipeline

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/internal/need"
	"temper.codes/temper-train/observe/record"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/scheduler/cfs"
	"temper.codes/temper-train/synthesize"
	"temper.codes/temper-train/target"
)

// workload is the committed trace of testdata/workload and its process.
const (
	workloadTrace = "../testdata/traces/workload-tracefs.txt.gz"
	workloadPid   = 19560
)

// analyzeWorkload analyses the committed workload trace, named label in
// the analysis (analyze's and synthesize's golden tests name it
// differently), writing the outputs opts names.
func analyzeWorkload(t *testing.T, label string, opts AnalyzeOptions) *Analyzed {
	t.Helper()
	opts.Path, opts.Pids = label, []int{workloadPid}
	a, err := Analyze(workloadTrace, opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// readFile reads a file the test expects to exist.
func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAnalyze: the analysis is analyze's (its golden report), the JSON
// written is what analyze writes, and the DOT comes first among the files.
func TestAnalyze(t *testing.T) {
	dir := t.TempDir()
	a := analyzeWorkload(t, "workload-tracefs.txt.gz", AnalyzeOptions{JSON: filepath.Join(dir, "analysis.json"), DOT: filepath.Join(dir, "wakes.dot")})
	var report bytes.Buffer
	if err := a.Analysis.Report(&report, analyze.ReportOptions{Edges: 15, AllThreads: "--json", GiveSnapshot: "pass --snapshot"}); err != nil {
		t.Fatal(err)
	}
	if want := readFile(t, "../analyze/testdata/report-workload.txt"); !bytes.Equal(report.Bytes(), want) {
		t.Errorf("report differs from analyze/testdata/report-workload.txt:\n%s", report.Bytes())
	}
	var js bytes.Buffer
	if err := a.Write(&js); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, "analysis.json")); !bytes.Equal(got, js.Bytes()) {
		t.Errorf("analysis.json is not the analysis written")
	}
	if len(a.Wrote) == 0 || a.Wrote[0] != filepath.Join(dir, "wakes.dot") || (len(a.Wrote) == 1) == (a.NoSVG == "") {
		t.Errorf("wrote %v (no SVG: %q), want the DOT file, then its SVG or why not", a.Wrote, a.NoSVG)
	}
}

// TestAnalyzePlotsDir: a plots path that is a file fails before the
// analysis, as a *PlotsError.
func TestAnalyzePlotsDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Analyze("no-such-trace", AnalyzeOptions{Plots: file})
	var pe *PlotsError
	if !errors.As(err, &pe) {
		t.Errorf("Analyze with plots in a file: %v, want a *PlotsError", err)
	}
}

// TestSynthesize: the profile synthesized from the analysis in memory is
// synthesize's golden one, and it is written at profiles.RelPath.
func TestSynthesize(t *testing.T) {
	a := analyzeWorkload(t, "testdata/traces/workload-tracefs.txt.gz", AnalyzeOptions{})
	shape, err := profiles.ParseShape("2cpu-2c-smt1")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	s, err := Synthesize(a.Analysis, SynthesizeOptions{Out: out,
		Options: synthesize.Options{ID: "workload", Source: "workload-analysis.json", Shape: &shape}})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(out, profiles.RelPath("workload", shape)); s.Path != want {
		t.Errorf("wrote %s, want %s", s.Path, want)
	}
	if got, want := readFile(t, s.Path), readFile(t, "../synthesize/testdata/workload-2cpu-2c-smt1.toml"); !bytes.Equal(got, want) {
		t.Errorf("%s differs from synthesize/testdata/workload-2cpu-2c-smt1.toml:\n%s", s.Path, got)
	}
	if _, err := Synthesize(a.Analysis, SynthesizeOptions{Options: synthesize.Options{ID: "Bad ID", Shape: &shape}}); !errors.Is(err, synthesize.ErrID) {
		t.Errorf("a bad id: %v, want synthesize.ErrID", err)
	}
}

// TestMakeDir: a directory is made once, a file in the way is a *DirError.
func TestMakeDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	for _, want := range []bool{true, false} {
		if created, err := MakeDir(dir); err != nil || created != want {
			t.Errorf("MakeDir = %v, %v; want created %v", created, err, want)
		}
	}
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	var de *DirError
	if _, err := MakeDir(file); !errors.As(err, &de) || de.Dir != file {
		t.Errorf("MakeDir(a file) = %v, want a *DirError naming it", err)
	}
}

// TestObserve traces a busy shell loop started for the purpose: the trace
// and snapshot are written, the snapshot counts the recorded events, and
// the stopped command's exit state is returned.
func TestObserve(t *testing.T) {
	need.Root(t, "to load BPF")
	if err := record.CheckTracing(); err != nil {
		need.Unmet(t, "BPF tracing", err.Error())
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tgt, err := target.Resolve(ctx, target.Spec{Command: []string{sh, "-c", "while :; do sleep 0.01; done"}})
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Stop(time.Second)
	dir := filepath.Join(t.TempDir(), "obs")
	attached := false
	obs, err := Observe(ctx, tgt, ObserveOptions{Dir: dir, StopCommand: true, OnAttached: func() { attached = true },
		Record: record.Options{Duration: time.Second, BufferBytes: 1 << 20, Attach: record.AttachAuto, TracingChecked: true}})
	if err != nil {
		t.Fatal(err)
	}
	if obs.TracePath != filepath.Join(dir, TraceFile) || obs.SnapshotPath != filepath.Join(dir, SnapshotFile) {
		t.Errorf("paths %s, %s", obs.TracePath, obs.SnapshotPath)
	}
	for _, p := range []string{obs.TracePath, obs.SnapshotPath} {
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", p, err)
		}
	}
	if !attached || obs.Record.Events == 0 || obs.Snapshot.Events.Total != obs.Record.Events {
		t.Errorf("attached %v, %d events recorded, snapshot says %d", attached, obs.Record.Events, obs.Snapshot.Events.Total)
	}
	if obs.Exit == nil || obs.StopErr != nil {
		t.Errorf("the command's exit state %v, stop error %v", obs.Exit, obs.StopErr)
	}
}

// TestChooseBackendName: a name that is none of the backends is refused
// before anything is probed.
func TestChooseBackendName(t *testing.T) {
	if _, err := ChooseBackend("bpf", cfs.Options{}); !errors.Is(err, ErrBackendName) {
		t.Errorf("ChooseBackend(bpf) = %v, want ErrBackendName", err)
	}
}
