package bench

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// redisBenchmark parses redis-benchmark's --csv output (redis-tools 7.0): a
// header naming the columns and one row per test:
//
//	"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
//	"SET","15444.02","0.997","0.056","0.359","4.103","10.599","24.623"
//
// Each row's metrics are named "<test>/<metric>" ("GET/p99_ms"); when the run
// had one test they are also given unprefixed ("p99_ms"). Percentiles of
// different commands are never merged.
//
// redis-benchmark has no rate option: every run is closed-loop (each client
// sends its next request when the previous one is answered).
type redisBenchmark struct{}

func (redisBenchmark) Name() string { return "redis-benchmark" }

// redisColumns maps redis-benchmark's CSV columns to canonical metrics.
// Columns not listed (a later version's additions) are ignored.
var redisColumns = map[string]string{
	"rps":            "throughput",
	"avg_latency_ms": "mean_ms",
	"min_latency_ms": "min_ms",
	"p50_latency_ms": "p50_ms",
	"p95_latency_ms": "p95_ms",
	"p99_latency_ms": "p99_ms",
	"max_latency_ms": "max_ms",
}

// Prepare adds --csv: without it redis-benchmark prints a human report with
// progress lines rewritten in place.
func (redisBenchmark) Prepare(argv []string, dir string) ([]string, error) {
	if hasFlag(argv, false, "--csv") {
		return slices.Clone(argv), nil
	}
	return append(slices.Clone(argv), "--csv"), nil
}

func (r redisBenchmark) Parse(t Trial) (Result, error) {
	perr := func(line int, text, format string, args ...any) error {
		return &ParseError{Tool: r.Name(), Line: line, Text: text, Msg: fmt.Sprintf(format, args...)}
	}
	lines := splitLines(t.Stdout)
	rd := csv.NewReader(bytes.NewReader(t.Stdout))
	textOf := func(n int) string {
		if n >= 1 && n <= len(lines) {
			return lines[n-1].text
		}
		return ""
	}
	header, err := rd.Read()
	if err == io.EOF {
		return Result{}, perr(1, "", "no output: expected the CSV header %q (was --csv given?)", `"test","rps",...`)
	}
	if err != nil {
		return Result{}, csvError(r.Name(), err, textOf)
	}
	if len(header) < 2 || header[0] != "test" {
		return Result{}, perr(1, textOf(1), "expected the CSV header starting with \"test\",\"rps\" (was --csv given?)")
	}
	cols := make([]string, len(header))
	seen := map[string]bool{}
	for i, h := range header[1:] {
		if seen[h] {
			return Result{}, perr(1, textOf(1), "column %q appears twice", h)
		}
		seen[h] = true
		cols[i+1] = redisColumns[h]
	}
	if !seen["rps"] {
		return Result{}, perr(1, textOf(1), "no \"rps\" column")
	}
	rd.FieldsPerRecord = len(header)
	res := Result{Tool: r.Name(), Metrics: map[string]float64{}}
	tests := 0
	var single map[string]float64
	for {
		rec, err := rd.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return Result{}, csvError(r.Name(), err, textOf)
		}
		n, _ := rd.FieldPos(0)
		test := rec[0]
		if strings.TrimSpace(test) == "" || strings.ContainsAny(test, "/\n") {
			return Result{}, perr(n, textOf(n), "bad test name %q", test)
		}
		if _, dup := res.Metrics[test+"/throughput"]; dup {
			return Result{}, perr(n, textOf(n), "test %q appears twice", test)
		}
		row := map[string]float64{}
		for i, f := range rec[1:] {
			v, ok := parseNumber(f)
			if !ok {
				return Result{}, perr(n, textOf(n), "column %q: %s", header[i+1], notFigure(f, strconv.Quote(f)+" is not a number"))
			}
			if name := cols[i+1]; name != "" {
				row[name] = v
				res.Metrics[test+"/"+name] = v
			}
		}
		tests++
		single = row
	}
	if tests == 0 {
		return Result{}, perr(endLine(lines), "", "output ends after the header: no test results (did the run fail?)")
	}
	if tests == 1 {
		for k, v := range single {
			res.Metrics[k] = v
		}
	}
	return res, nil
}

// csvError turns encoding/csv's error into a ParseError with its line.
func csvError(tool string, err error, textOf func(int) string) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		msg := pe.Err.Error()
		if errors.Is(pe.Err, csv.ErrFieldCount) {
			msg = "wrong number of columns (truncated line?)"
		}
		return &ParseError{Tool: tool, Line: pe.Line, Text: textOf(pe.Line), Msg: msg}
	}
	return &ParseError{Tool: tool, Line: 1, Msg: err.Error()}
}
