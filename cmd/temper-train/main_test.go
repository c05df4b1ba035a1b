package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"temper.codes/temper-train/internal/tpcheck"
	"temper.codes/temper-train/observe"
)

const example = "../../testdata/traces/workload-tracefs.txt.gz"

func runCLI(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	truncated := filepath.Join(dir, "cut.pftrace")
	data, err := os.ReadFile("../../testdata/golden/roundtrip.pftrace")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(truncated, data[:len(data)-5], 0o644)
	cases := []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"version"}, exitOK, ""},
		{[]string{"trace", "summary", example}, exitOK, ""},
		{[]string{"bogus"}, exitUsage, "unknown command"},
		{[]string{"trace", "summary"}, exitUsage, "accepts 1 arg"},
		{[]string{"trace", "summary", "--top", "-1", example}, exitUsage, "--top"},
		{[]string{"trace", "summary", "--nope", example}, exitUsage, "unknown flag"},
		{[]string{"trace", "summary", filepath.Join(dir, "missing")}, exitFailure, "no such file"},
		{[]string{"trace", "summary", truncated}, exitFailure, "cut.pftrace: byte "},
		{[]string{"trace", "convert", truncated, filepath.Join(dir, "out.pftrace")}, exitFailure, "truncated"},
		{[]string{"trace", "check", "../../testdata/golden/roundtrip.pftrace"}, exitOK, ""},
		{[]string{"trace", "check", truncated}, exitFailure, "malformed trace"},
	}
	for _, c := range cases {
		code, _, stderr := runCLI(c.args...)
		if code != c.code || !strings.Contains(stderr, c.err) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, c.code, c.err)
		}
		if c.code == exitFailure && strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("%v: error is not one line: %q", c.args, stderr)
		}
	}
	// A failed convert leaves no output behind, not even a temporary file.
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("files left after failed convert: %v", ents)
	}
}

func TestHelpHasExamples(t *testing.T) {
	for _, args := range [][]string{{"version", "--help"}, {"trace", "summary", "--help"}, {"trace", "convert", "--help"}} {
		code, out, _ := runCLI(args...)
		if code != exitOK || !strings.Contains(out, "Examples:") || !strings.Contains(out, "temper-train ") {
			t.Errorf("%v: exit %d, no example in help:\n%s", args, code, out)
		}
	}
}

// TestSummaryAndConvert runs the README's demo path: summarise the example,
// convert it to Perfetto, and check both views agree.
func TestSummaryAndConvert(t *testing.T) {
	code, out, stderr := runCLI("trace", "summary", "--json", "--top", "0", example)
	if code != exitOK {
		t.Fatalf("summary: %s", stderr)
	}
	var text observe.SummaryJSON
	if err := json.Unmarshal([]byte(out), &text); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, th := range text.Threads {
		names[th.Name] = true
	}
	for _, want := range []string{"wl-acceptor", "wl-worker-0", "wl-logger", "wl-syncer", "wl-compute-0", "wl-timer"} {
		if !names[want] {
			t.Errorf("summary lacks thread %s", want)
		}
	}
	pf := filepath.Join(t.TempDir(), "example.pftrace.gz")
	if code, _, stderr := runCLI("trace", "convert", example, pf); code != exitOK {
		t.Fatalf("convert: %s", stderr)
	}
	code, out, stderr = runCLI("trace", "summary", "--json", "--top", "0", pf)
	if code != exitOK {
		t.Fatalf("summary of converted: %s", stderr)
	}
	var conv observe.SummaryJSON
	if err := json.Unmarshal([]byte(out), &conv); err != nil {
		t.Fatal(err)
	}
	if conv.Format != "perfetto" || !conv.Gzip {
		t.Errorf("converted trace reads as %s gzip=%v", conv.Format, conv.Gzip)
	}
	// What convert wrote, held to trace_processor's import rules (read with
	// protowire, not with our reader).
	data, err := os.ReadFile(pf)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := tpcheck.Check(data)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("converted %s: %s", example, rep)
	if err := rep.Err(); err != nil || rep.Filtered {
		t.Errorf("converted %s breaks trace_processor's import rules (filtered=%v): %v", example, rep.Filtered, err)
	}
	// Every event survives conversion (observe's round-trip tests), but ftrace
	// text prints microseconds and orders events of different CPUs within one
	// microsecond by their unprinted nanoseconds; once converted, such ties are
	// ordered by CPU. A waking and a switch of one thread on two CPUs inside one
	// microsecond can then swap, moving one wakeup: allow 1% on counts and 0.1%
	// of the trace span on times, per thread.
	if len(text.Threads) != len(conv.Threads) {
		t.Fatalf("%d threads after conversion, %d before", len(conv.Threads), len(text.Threads))
	}
	near := func(a, b, tol int64) bool { d := a - b; return d <= tol && -d <= tol }
	timeTol := text.SpanNS / 1000
	for i, a := range text.Threads {
		b := conv.Threads[i]
		countTol := max(a.SwitchOuts/100, 1)
		if a.Tid != b.Tid || a.Name != b.Name || a.SwitchOuts != b.SwitchOuts || a.Preemptions != b.Preemptions ||
			!near(a.Wakeups, b.Wakeups, countTol) || !near(a.Running, b.Running, timeTol) ||
			!near(a.Runnable, b.Runnable, timeTol) || !near(a.Sleeping, b.Sleeping, timeTol) ||
			!near(a.DiskWait, b.DiskWait, timeTol) {
			t.Errorf("thread differs after conversion:\ntext     %+v\nperfetto %+v", a, b)
		}
	}
}

// TestCPUProfileFlag checks the hidden --cpuprofile flag writes a profile
// (runtime/pprof writes gzipped protobuf), and that a path it cannot create is
// a clear error.
func TestCPUProfileFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	if code, _, stderr := runCLI("trace", "summary", "--cpuprofile", path, example); code != exitOK {
		t.Fatalf("summary --cpuprofile: exit %d: %s", code, stderr)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s is not a profile: %v", path, err)
	}
	if b, err := io.ReadAll(zr); err != nil || len(b) == 0 {
		t.Errorf("%s: %d bytes of profile, %v", path, len(b), err)
	}
	bad := filepath.Join(t.TempDir(), "missing", "cpu.prof")
	code, _, stderr := runCLI("trace", "summary", "--cpuprofile", bad, example)
	if code != exitFailure || !strings.Contains(stderr, "--cpuprofile") || !strings.Contains(stderr, bad) {
		t.Errorf("unwritable profile path: exit %d, stderr %q", code, stderr)
	}
}
