package pictures

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/internal/need"
	"temper.codes/temper-train/internal/testkit"
	"temper.codes/temper-train/observe/snapshot"
)

const serversDir = "../../testdata/traces/servers"

// analyzeServer analyses a committed real-server trace with its snapshot,
// naming it by the server so the pictures' titles do not depend on the
// working directory.
func analyzeServer(t *testing.T, name string) *analyze.Analysis {
	t.Helper()
	dir := filepath.Join(serversDir, name)
	snap, err := snapshot.Load(filepath.Join(dir, "snapshot.json"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := analyze.File(filepath.Join(dir, "trace.pftrace.gz"), analyze.Options{Path: name + "/trace.pftrace.gz", Snapshot: snap})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestServerPicturesGolden draws the Redis and MariaDB traces' pictures and
// wake graph (DOT) and compares them byte for byte with the committed
// goldens in testdata/SERVER/ (go test ./analyze/pictures -run
// TestServerPicturesGolden -update rewrites them): the pictures are
// deterministic, and a change to them shows up in review.
func TestServerPicturesGolden(t *testing.T) {
	for _, server := range []string{"redis", "mariadb"} {
		t.Run(server, func(t *testing.T) {
			a := analyzeServer(t, server)
			dir := t.TempDir()
			paths, err := Write(a, dir)
			if err != nil {
				t.Fatal(err)
			}
			dot := filepath.Join(dir, "wake-graph.dot")
			if err := a.WriteDOTFile(dot); err != nil {
				t.Fatal(err)
			}
			for _, p := range append(paths, dot) {
				got, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				testkit.Golden(t, filepath.Join("testdata", server, filepath.Base(p)), got)
			}
		})
	}
}

// needDot needs Graphviz's dot: the wake graph's SVG is laid out by it.
func needDot(t *testing.T) {
	t.Helper()
	need.Tool(t, "dot", "graphviz")
}

// TestWakeGraphSVG lays out the real servers' wake graphs with Graphviz:
// dot accepts them (2.43 rejected MariaDB's before newrank), the SVG is
// whole, names every drawn thread and carries the caption; the same
// analysis gives the same SVG. Without dot on PATH the error is
// ErrNoGraphviz and no file is written.
func TestWakeGraphSVG(t *testing.T) {
	needDot(t)
	for _, server := range []string{"redis", "mariadb", "postgres", "memcached"} {
		t.Run(server, func(t *testing.T) {
			a := analyzeServer(t, server)
			path := filepath.Join(t.TempDir(), "wake-graph.svg")
			if err := WakeGraphSVG(a, path); err != nil {
				t.Fatal(err)
			}
			svg, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			doc := parseSVG(t, path, svg)
			var dot bytes.Buffer
			if err := a.WriteDOT(&dot); err != nil {
				t.Fatal(err)
			}
			if !slicesContainsPrefix(doc.texts, "wake graph of "+server+"/trace.pftrace.gz, ") {
				t.Errorf("no caption in the SVG: %q", doc.texts)
			}
			for _, th := range a.Threads {
				id := `"` + th.Comm + "/"
				if strings.Contains(dot.String(), id) && !slicesContainsPrefix(doc.texts, th.Comm) {
					t.Errorf("thread %s/%d is in the DOT but not in the SVG", th.Comm, th.Tid)
				}
			}
			again := filepath.Join(t.TempDir(), "again.svg")
			if err := WakeGraphSVG(a, again); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(again); !bytes.Equal(b, svg) {
				t.Error("the SVG differs between two layouts of the same graph")
			}
		})
	}
	t.Run("no graphviz", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		path := filepath.Join(t.TempDir(), "wake-graph.svg")
		err := WakeGraphSVG(analyzeWorkload(t), path)
		if !errors.Is(err, ErrNoGraphviz) {
			t.Fatalf("error %v, want ErrNoGraphviz", err)
		}
		if _, serr := os.Stat(path); serr == nil {
			t.Error("wrote a file without dot")
		}
	})
}

// slicesContainsPrefix reports whether a text starts with prefix.
func slicesContainsPrefix(texts []string, prefix string) bool {
	for _, s := range texts {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}
