package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"image/png"
	"io"
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

// TestAnalyzePlot runs --plot on the workload trace: the pictures land in a
// directory the command creates, their paths follow the report (not when the
// JSON goes to stdout), and a path that is not a directory fails before
// anything is written.
func TestAnalyzePlot(t *testing.T) {
	base := t.TempDir()
	names := []string{"runtime-wakerate.svg", "runtime-wakerate.png", "runlength-cdf.svg",
		"runlength-cdf.png", "wakelatency-cdf.svg", "wakelatency-cdf.png"}
	cases := []struct {
		name      string
		args      []string
		dir       string
		listPaths bool // stdout ends with the written paths
		json      bool // stdout is the JSON alone
	}{
		{"report", []string{"--pid", "19560"}, filepath.Join(base, "a", "plots"), true, false},
		{"json to stdout", []string{"--pid", "19560", "--json", "-"}, filepath.Join(base, "b"), false, true},
		{"json to file", []string{"--pid", "19560", "--json", filepath.Join(base, "c.json")}, filepath.Join(base, "c"), true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"analyze", example, "--plot", c.dir}, c.args...)
			code, out, stderr := analyzeCLI(args...)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var listed []string
			for _, n := range names {
				p := filepath.Join(c.dir, n)
				if strings.Contains(out, "wrote "+p+"\n") {
					listed = append(listed, p)
				}
				data, err := os.ReadFile(p)
				if err != nil {
					t.Fatalf("%s not written: %v", n, err)
				}
				switch filepath.Ext(n) {
				case ".png":
					img, err := png.Decode(bytes.NewReader(data))
					if err != nil {
						t.Errorf("%s: %v", n, err)
					} else if b := img.Bounds(); b.Dx() != 960 || b.Dy() != 576 {
						t.Errorf("%s is %dx%d, want 960x576", n, b.Dx(), b.Dy())
					}
				case ".svg":
					if clusters := svgLegendEntries(t, n, data); clusters < 2 {
						t.Errorf("%s: %d cluster legend entries", n, clusters)
					}
				}
			}
			if c.listPaths {
				if len(listed) != len(names) || !strings.HasSuffix(out, "wrote "+listed[len(listed)-1]+"\n") {
					t.Errorf("stdout lists %d of the %d pictures at its end:\n%s", len(listed), len(names), out)
				}
				if !strings.Contains(out, "CLUSTERS") {
					t.Error("the report is missing")
				}
			}
			if c.json {
				var a map[string]any
				if err := json.Unmarshal([]byte(out), &a); err != nil || len(listed) != 0 {
					t.Errorf("--json - with --plot: stdout is not the JSON alone (%v, %d paths listed)", err, len(listed))
				}
			}
		})
	}

	t.Run("not a directory", func(t *testing.T) {
		dir := t.TempDir()
		file := filepath.Join(dir, "plots")
		if err := os.WriteFile(file, []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
		jsonOut := filepath.Join(dir, "a.json")
		for _, target := range []string{file, filepath.Join(file, "sub")} {
			code, out, stderr := analyzeCLI("analyze", example, "--pid", "19560", "--plot", target, "--json", jsonOut)
			if code != exitFailure || !strings.Contains(stderr, "--plot") || !strings.Contains(stderr, file) ||
				!strings.Contains(stderr, "not a directory") {
				t.Errorf("--plot %s: exit %d, stderr %q; want exit 1 naming --plot and the path", target, code, stderr)
			}
			if strings.Count(strings.TrimSpace(stderr), "\n") > 0 || out != "" {
				t.Errorf("--plot %s: error not one line (%q) or output printed (%q)", target, stderr, out)
			}
		}
		ents, _ := os.ReadDir(dir)
		if len(ents) != 1 {
			t.Errorf("files after the failures: %v (want only the file in the way)", ents)
		}
		if data, _ := os.ReadFile(file); string(data) != "keep" {
			t.Errorf("the file in the way was changed: %q", data)
		}
	})
}

// svgLegendEntries checks data is well-formed XML and counts its texts that
// are cluster legend entries.
func svgLegendEntries(t *testing.T, name string, data []byte) int {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	n, inText := 0, false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return n
		}
		if err != nil {
			t.Fatalf("%s: not well-formed XML: %v", name, err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			inText = e.Name.Local == "text"
		case xml.CharData:
			if inText && strings.HasPrefix(string(e), "cluster ") {
				n++
			}
		case xml.EndElement:
			inText = false
		}
	}
}

func TestAnalyzeHelp(t *testing.T) {
	code, out, _ := analyzeCLI("analyze", "--help")
	if code != exitOK || !strings.Contains(out, "Examples:") || !strings.Contains(out, "temper-train analyze") {
		t.Errorf("exit %d, no example in help:\n%s", code, out)
	}
}
