package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"temper.codes/temper-train/analyze"
)

// analyzeCLI runs the CLI with the analyze command registered (main.go may
// not register it yet), with run's exit-code mapping.
func analyzeCLI(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	root := newRootCmd(&o, &e)
	if c, _, err := root.Find([]string{"analyze"}); err != nil || c == root {
		root.AddCommand(newAnalyzeCmd())
	}
	root.SetArgs(args)
	err := root.Execute()
	switch {
	case err == nil:
		return exitOK, o.String(), e.String()
	default:
		e.WriteString("temper-train: " + err.Error() + "\n")
		var ue usageError
		if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown") {
			return exitUsage, o.String(), e.String()
		}
		return exitFailure, o.String(), e.String()
	}
}

func TestAnalyzeCommand(t *testing.T) {
	dir := t.TempDir()
	jsonPath, dotPath := filepath.Join(dir, "analysis.json"), filepath.Join(dir, "wakes.dot")
	code, out, stderr := analyzeCLI("analyze", example, "--pid", "19560", "--json", jsonPath, "--dot", dotPath)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"CLUSTERS", "latency_critical", "WAKE EDGES", "LINT"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var a analyze.Analysis
	if err := json.Unmarshal(data, &a); err != nil {
		t.Fatal(err)
	}
	if a.Schema != analyze.Schema || len(a.Threads) != 13 || len(a.Clusters) == 0 {
		t.Errorf("analysis: schema %q, %d threads, %d clusters", a.Schema, len(a.Threads), len(a.Clusters))
	}
	dot, err := os.ReadFile(dotPath)
	if err != nil || !bytes.HasPrefix(dot, []byte("digraph wakes {")) {
		t.Errorf("DOT file: %v %.40q", err, dot)
	}

	// --json - puts only JSON on stdout, identical to the file.
	code, out, stderr = analyzeCLI("analyze", example, "--pid", "19560", "--json", "-")
	if code != exitOK {
		t.Fatalf("--json -: exit %d: %s", code, stderr)
	}
	if out != string(data) {
		t.Error("--json - differs from --json FILE (or is not deterministic)")
	}

	// No target: every user thread, and the report says so.
	code, out, _ = analyzeCLI("analyze", example)
	if code != exitOK || !strings.Contains(out, "every user thread in the trace") {
		t.Errorf("no target: exit %d, report does not say every user thread was analysed", code)
	}
	code, out, _ = analyzeCLI("analyze", example, "--process", "wl-main")
	if code != exitOK || !strings.Contains(out, `processes named "wl-main": 13 threads in 1 process`) {
		t.Errorf("--process: exit %d:\n%s", code, out)
	}
}

func TestAnalyzeBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	notTrace := write("notes.txt", "\x00\x01binary garbage that is no trace\x02")
	badSnap := write("snap.json", `{"schema": "temper-train/snapshot/v0"}`)
	jsonOut := filepath.Join(dir, "out.json")
	cases := []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"analyze"}, exitUsage, "accepts 1 arg"},
		{[]string{"analyze", filepath.Join(dir, "missing.pftrace")}, exitFailure, "no such file"},
		{[]string{"analyze", notTrace}, exitFailure, "notes.txt"},
		{[]string{"analyze", example, "--pid", "abc"}, exitUsage, `"abc" is not a process id`},
		{[]string{"analyze", example, "--pid", "0"}, exitUsage, `"0" is not a process id`},
		{[]string{"analyze", example, "--pid", "1,,2"}, exitUsage, "not a process id"},
		{[]string{"analyze", example, "--pid", "1", "--process", "x"}, exitUsage, "exclude each other"},
		{[]string{"analyze", example, "--pid", "999999"}, exitFailure, "no thread of process 999999 in the trace"},
		{[]string{"analyze", example, "--process", "nginx"}, exitFailure, `no process named "nginx"`},
		{[]string{"analyze", example, "--snapshot", badSnap}, exitFailure, `schema "temper-train/snapshot/v0", want "temper-train/snapshot/v1"`},
		{[]string{"analyze", example, "--snapshot", filepath.Join(dir, "nosnap.json")}, exitFailure, "no such file"},
		{[]string{"analyze", example, "--edges", "-1"}, exitUsage, "--edges"},
		{[]string{"analyze", example, "--json", jsonOut, "--dot", jsonOut}, exitUsage, "same file"},
		{[]string{"analyze", example, "--json", filepath.Join(dir, "no/such/dir/a.json")}, exitFailure, "a.json"},
	}
	for _, c := range cases {
		code, stdout, stderr := analyzeCLI(c.args...)
		if code != c.code || !strings.Contains(stderr, c.err) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, c.code, c.err)
		}
		if code == exitFailure && strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("%v: error is not one line: %q", c.args, stderr)
		}
		if code != exitOK && stdout != "" {
			t.Errorf("%v: failed but printed %q", c.args, stdout)
		}
	}
	// Failures leave no output files behind, not even temporary ones.
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Errorf("files after failures: %v", ents)
	}
}

func TestAnalyzeHelp(t *testing.T) {
	code, out, _ := analyzeCLI("analyze", "--help")
	if code != exitOK || !strings.Contains(out, "Examples:") || !strings.Contains(out, "temper-train analyze") {
		t.Errorf("exit %d, no example in help:\n%s", code, out)
	}
}
