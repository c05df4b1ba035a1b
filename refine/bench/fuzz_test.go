package bench

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// fuzzParser checks what must hold of any input: Parse returns either a
// Result whose metrics all have a direction and are finite, or an error, and
// never panics. Seeds are the recorded outputs.
func fuzzParser(f *testing.F, tool string) {
	paths, _ := filepath.Glob(filepath.Join("testdata", tool, "*"))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		} else if b, err := os.ReadFile(filepath.Join(p, "stdout.txt")); err == nil {
			f.Add(b)
		}
	}
	a, err := Lookup(tool)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		res, err := a.Parse(Trial{Argv: []string{tool}, Stdout: out})
		if err != nil {
			if res.Metrics != nil {
				t.Fatalf("metrics with an error: %v", res.Metrics)
			}
			var pe *ParseError
			if errors.As(err, &pe) && pe.Tool != tool {
				t.Fatalf("ParseError names %q", pe.Tool)
			}
			return
		}
		if len(res.Metrics) == 0 {
			t.Fatal("a Result without metrics")
		}
		for k, v := range res.Metrics {
			if _, err := DirectionOf(k); err != nil {
				t.Fatal(err)
			}
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("%s = %v", k, v)
			}
		}
	})
}

func FuzzRedisBenchmark(f *testing.F) { fuzzParser(f, "redis-benchmark") }
func FuzzMemaslap(f *testing.F)       { fuzzParser(f, "memaslap") }
func FuzzSysbench(f *testing.F)       { fuzzParser(f, "sysbench") }
func FuzzWrk(f *testing.F)            { fuzzParser(f, "wrk") }
func FuzzJSONL(f *testing.F)          { fuzzParser(f, "jsonl") }

// FuzzPgbenchLog fuzzes the reading of a transaction log.
func FuzzPgbenchLog(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "pgbench", "*", pgbenchLogPrefix+".*"))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, log []byte) {
		lat, err := pgbench{}.parseLog("log", bytes.NewReader(log), nil)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.File != "log" || pe.Line < 1 {
				t.Fatalf("err = %v, want a ParseError naming the file and line", err)
			}
			return
		}
		for _, v := range lat {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Fatalf("latency %v", v)
			}
		}
		if len(lat) > 0 {
			slices.Sort(lat)
			m := map[string]float64{}
			summarize(m, lat)
			checkOrdered(t, m)
		}
	})
}
