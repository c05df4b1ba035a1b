package bench

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"temper.codes/temper-train/refine/stats"
)

// fixture is a recorded trial: the tool's stdout in testdata/<tool>/<name>
// (a file), or a directory holding stdout.txt and the files the tool wrote.
func fixture(t testing.TB, tool, name string, argv ...string) Trial {
	t.Helper()
	path := filepath.Join("testdata", tool, name)
	tr := Trial{Argv: append([]string{tool}, argv...)}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		tr.Dir = path
		path = filepath.Join(path, "stdout.txt")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tr.Stdout = b
	return tr
}

func TestParseFixtures(t *testing.T) {
	tests := []struct {
		tool, fixture string
		argv          []string
		want          map[string]float64 // exact figures the tool printed, or computed from its log
		open          bool
		absent        []string // metrics that must not be given
	}{
		{tool: "redis-benchmark", fixture: "csv-get.txt", want: map[string]float64{
			"throughput": 21762.79, "mean_ms": 0.778, "min_ms": 0.072, "p50_ms": 0.255, "p95_ms": 4.311, "p99_ms": 7.335, "max_ms": 8.903,
			"GET/throughput": 21762.79, "GET/p99_ms": 7.335}},
		{tool: "redis-benchmark", fixture: "csv-set-get-lpush.txt", want: map[string]float64{
			"SET/throughput": 16077.17, "GET/p50_ms": 0.471, "LPUSH/p99_ms": 8.727, "LPUSH/max_ms": 53.791},
			absent: []string{"throughput", "p99_ms"}},
		{tool: "redis-benchmark", fixture: "csv-pipelined-q.txt", want: map[string]float64{
			"SET/throughput": 124223.60, "GET/p99_ms": 8.631}},
		{tool: "memaslap", fixture: "stat-3s.txt", want: map[string]float64{
			"throughput": 20095, "mean_ms": 0.794, "min_ms": 0.017, "max_ms": 101.752,
			"p50_ms": 0.22770264344516608, "p90_ms": 1.902229197922677, "p99_ms": 8.116878573388208, "p999_ms": 51.99892827118453}},
		{tool: "memaslap", fixture: "tps5k-stat1h.txt", argv: []string{"-P", "5k"}, want: map[string]float64{
			"throughput": 15465, "mean_ms": 1.035, "max_ms": 65.139, "p50_ms": 0.23385408375971195, "p99_ms": 11.714077170923323}},
		{tool: "memaslap", fixture: "no-stat.txt", want: map[string]float64{"throughput": 31418}, absent: []string{"p99_ms", "mean_ms"}},
		{tool: "pgbench", fixture: "tpcb-c4-j2", want: map[string]float64{
			"throughput": 313.833006, "errors": 0, "p50_ms": 8.916, "p90_ms": 26.798, "p99_ms": 62.648, "p999_ms": 114.218, "max_ms": 114.218}},
		{tool: "pgbench", fixture: "rate400-c4-j2", argv: []string{"-R", "400"}, open: true, want: map[string]float64{
			"throughput": 279.065356, "errors": 0, "p50_ms": 311.205, "p99_ms": 541.046}},
		{tool: "pgbench", fixture: "rate2000-limit5", argv: []string{"-R", "2000", "--latency-limit=5"}, open: true, want: map[string]float64{
			"throughput": 256.025824, "errors": 3386, "p50_ms": 15.456, "p99_ms": 83.24, "max_ms": 106.588}},
		{tool: "sysbench", fixture: "oltp-read-write-p99.txt", want: map[string]float64{
			"throughput": 416.23, "qps": 8324.57, "errors": 0, "min_ms": 1.81, "mean_ms": 9.60, "max_ms": 107.52, "p99_ms": 41.10}},
		{tool: "sysbench", fixture: "oltp-read-only-rate200-p95.txt", argv: []string{"--rate=200"}, want: map[string]float64{
			"throughput": 199.83, "qps": 3197.35, "p95_ms": 121.08, "mean_ms": 17.34}, absent: []string{"p99_ms"}},
		{tool: "sysbench", fixture: "cpu-p99.txt", want: map[string]float64{
			"throughput": 912.74, "p99_ms": 32.53, "max_ms": 76.39}, absent: []string{"qps", "errors"}},
		{tool: "sysbench", fixture: "point-select-nopct.txt", want: map[string]float64{
			"throughput": 10188.17, "mean_ms": 0.39}, absent: []string{"p99_ms", "p95_ms"}},
		{tool: "wrk", fixture: "latency.txt", want: map[string]float64{
			"throughput": 6179.18, "mean_ms": 3.61, "max_ms": 40.73, "p50_ms": 2.03, "p75_ms": 5.41, "p90_ms": 8.84, "p99_ms": 18.53, "errors": 0}},
		{tool: "wrk", fixture: "latency-404.txt", want: map[string]float64{
			"throughput": 10944.67, "p50_ms": 0.803, "max_ms": 145.17, "errors": 22376}},
		{tool: "wrk", fixture: "no-latency.txt", want: map[string]float64{"throughput": 18610.65, "mean_ms": 0.98}, absent: []string{"p99_ms"}},
		{tool: "jsonl", fixture: "protocol.jsonl", want: map[string]float64{
			"throughput": 1520.5, "p99_ms": 7.25, "render_ms": 3.5, "frames_per_s": 60, "cache_errors": 2, "gc_pause_us": 180}},
		{tool: "jsonl", fixture: "open-loop.jsonl", open: true, want: map[string]float64{"p99_ms": 12}},
	}
	for _, tt := range tests {
		t.Run(tt.tool+"/"+tt.fixture, func(t *testing.T) {
			a, err := Lookup(tt.tool)
			if err != nil {
				t.Fatal(err)
			}
			tr := fixture(t, tt.tool, tt.fixture, tt.argv...)
			if tr.Dir != "" {
				tr.Pid = fixturePid(t, tr.Dir)
			}
			res, err := a.Parse(tr)
			if err != nil {
				t.Fatal(err)
			}
			if res.Tool != tt.tool || res.OpenLoop != tt.open {
				t.Errorf("Tool, OpenLoop = %q, %v; want %q, %v", res.Tool, res.OpenLoop, tt.tool, tt.open)
			}
			for k, want := range tt.want {
				got, ok := res.Metrics[k]
				if !ok || math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
					t.Errorf("%s = %v (given %v), want %v", k, got, ok, want)
				}
			}
			for _, k := range tt.absent {
				if v, ok := res.Metrics[k]; ok {
					t.Errorf("%s = %v, want it absent", k, v)
				}
			}
			for k := range res.Metrics {
				if _, err := DirectionOf(k); err != nil {
					t.Errorf("metric without a direction: %v", err)
				}
			}
			checkOrdered(t, res.Metrics)
		})
	}
}

// checkOrdered checks what must hold of any latency summary: percentiles do
// not decrease with the rank and lie within [min, max].
func checkOrdered(t *testing.T, m map[string]float64) {
	t.Helper()
	prev := m["min_ms"]
	for _, k := range []string{"p50_ms", "p75_ms", "p90_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms"} {
		v, ok := m[k]
		if !ok {
			continue
		}
		if v < prev {
			t.Errorf("%s = %v is below a lower percentile (%v): %v", k, v, prev, m)
		}
		prev = v
	}
}

// pgbench's log files are named by the pid of the run that wrote them.
func fixturePid(t testing.TB, dir string) int {
	paths, _ := filepath.Glob(filepath.Join(dir, pgbenchLogPrefix+".*"))
	if len(paths) == 0 {
		return 0
	}
	pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(paths[0]), pgbenchLogPrefix+"."), ".")
	n, err := strconv.Atoi(pid)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPgbenchMeanMatchesReport checks the latencies read from the log
// against the mean pgbench printed itself, computed by pgbench from the same
// transactions.
func TestPgbenchMeanMatchesReport(t *testing.T) {
	re := regexp.MustCompile(`latency average = ([0-9.]+) ms`)
	// pgbench computes the average from the transactions only when it keeps
	// latency statistics (under -R, as here); otherwise it prints duration ×
	// clients / transactions.
	for _, name := range []string{"rate400-c4-j2", "rate2000-limit5"} {
		tr := fixture(t, "pgbench", name)
		tr.Pid = fixturePid(t, tr.Dir)
		res, err := pgbench{}.Parse(tr)
		if err != nil {
			t.Fatal(err)
		}
		m := re.FindSubmatch(tr.Stdout)
		if m == nil {
			t.Fatalf("%s: no latency average in the report", name)
		}
		want, _ := strconv.ParseFloat(string(m[1]), 64)
		// pgbench prints three decimals.
		if got := res.Metrics["mean_ms"]; math.Abs(got-want) > 0.0006 {
			t.Errorf("%s: mean_ms %v from the log, pgbench's report %v", name, got, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	read := func(tool, name string) []byte { return fixture(t, tool, name).Stdout }
	truncate := func(b []byte, atLine int) []byte {
		ls := strings.SplitAfter(string(b), "\n")
		return []byte(strings.Join(ls[:atLine], ""))
	}
	tests := []struct {
		tool   string
		stdout []byte
		line   int
		msg    string // a part of the message
	}{
		{"redis-benchmark", nil, 1, "no output"},
		{"redis-benchmark", []byte("====== GET ======\n"), 1, "CSV header"},
		{"redis-benchmark", truncate(read("redis-benchmark", "csv-get.txt"), 1), 2, "no test results"},
		{"redis-benchmark", []byte(`"test","rps"` + "\n" + `"GET","12.5"` + "\n" + `"SET","x"` + "\n"), 3, "not a number"},
		{"redis-benchmark", []byte(`"test","rps","p50_latency_ms"` + "\n" + `"GET","12.5"` + "\n"), 2, "columns"},
		{"redis-benchmark", []byte(`"test","rps"` + "\n" + `"GET","1"` + "\n" + `"GET","2"` + "\n"), 3, "twice"},
		{"redis-benchmark", []byte(`"test","rps"` + "\n" + `"GET","1` + "\n"), 2, "quote"},
		{"memaslap", truncate(read("memaslap", "stat-3s.txt"), 20), 21, "Run time"},
		{"memaslap", []byte("Total Statistics (10 events)\n   Min: 1\n   Max: 9\n   Avg: 5\n   Log2 Dist:\n       0: 3 4\n\nRun time: 1.0s Ops: 10 TPS: 10 Net_rate: 1.0M/s\n"), 7, "histogram counts 7 events"},
		{"memaslap", []byte("Total Statistics (3 events)\n   Min: 1\n   Bogus: 9\n"), 3, "Log2 Dist"},
		{"memaslap", []byte("Run time: 3.0s Ops: 94265 TPS: x Net_rate: 35.1M/s\n"), 1, "not a number"},
		{"sysbench", truncate(read("sysbench", "oltp-read-write-p99.txt"), 27), 28, "Latency"},
		{"sysbench", []byte("    transactions:   947    (abc per sec.)\n"), 1, "not a number"},
		{"sysbench", []byte("Latency (ms):\n         min:                                    x\n"), 2, "not a number"},
		{"wrk", truncate(read("wrk", "latency.txt"), 10), 11, "Requests/sec"},
		{"wrk", []byte("    Latency     3.19ms    4.17ms  41.47xs   89.03%\n"), 1, "not a duration"},
		{"wrk", []byte("    Latency     3.19qq    4.17ms  41.47ms   89.03%\n"), 1, "not a duration"},
		{"wrk", read("wrk", "all-read-errors.txt"), 11, "no request completed (14898"},
		{"jsonl", nil, 1, "no metric"},
		{"jsonl", []byte(`{"metric": "p99_ms", "value": 3}` + "\n" + `{"metric": "p99_ms", "value": 4}` + "\n"), 2, "twice"},
		{"jsonl", []byte("\n" + `{"metric": "latency", "value": 3}` + "\n"), 2, "latency"},
		{"jsonl", []byte(`{"metric": "p99_ms", "value": 3, "unit": "us"}` + "\n"), 1, "contradicts"},
		{"jsonl", []byte(`{"metric": "p99_ms", "vaule": 3}` + "\n"), 1, "unknown field"},
		{"jsonl", []byte(`{"metric": "p99_ms", "value": 3}{}` + "\n"), 1, "more than one"},
		{"jsonl", []byte(`p99_ms 3` + "\n"), 1, "not a JSON object"},
		{"jsonl", []byte(`{"metric": "p99_ms", "value": "3"}` + "\n"), 1, "not a JSON object"},
		// A figure that cannot be negative and is: refused as such, with the
		// tool and line, by every adapter.
		{"jsonl", []byte(`{"metric": "p99_ms", "value": 3}` + "\n" + `{"metric": "render", "value": -5, "unit": "ms"}` + "\n"), 2, `metric "render_ms": value -5 is negative`},
		{"jsonl", []byte(`{"metric": "frames", "value": -0.5, "unit": "frames/s"}` + "\n"), 1, "value -0.5 is negative"},
		{"jsonl", []byte(`{"metric": "errors", "value": -1}` + "\n"), 1, "value -1 is negative"},
		{"redis-benchmark", []byte(`"test","rps"` + "\n" + `"GET","-12.5"` + "\n"), 2, `column "rps": -12.5 is negative`},
		{"memaslap", []byte("Run time: 3.0s Ops: 94265 TPS: -3 Net_rate: 35.1M/s\n"), 1, "TPS -3 is negative"},
		{"memaslap", []byte("Total Statistics (-10 events)\n"), 1, "-10 is negative"},
		{"memaslap", []byte("Total Statistics (3 events)\n   Min: -1\n"), 2, "Min: -1 is negative"},
		{"memaslap", []byte("Total Statistics (3 events)\n   Min: 1\n   Max: 9\n   Avg: 5\n   Log2 Dist:\n       0: 3 -4\n"), 6, "bucket count -4 is negative"},
		{"sysbench", []byte("    transactions:   947    (-31.5 per sec.)\n"), 1, "rate -31.5 is negative"},
		{"sysbench", []byte("Latency (ms):\n         min:                                    -2.5\n"), 2, "-2.5 is negative"},
		{"wrk", []byte("    Latency    -3.19ms    4.17ms  41.47ms   89.03%\n"), 1, "-3.19 is negative"},
		{"wrk", []byte("    Latency     3.19ms    4.17ms  -41.47us   89.03%\n"), 1, "-41.47 is negative"},
		{"wrk", []byte("  -5 requests in 10.00s, 1.2MB read\n"), 1, "request count -5 is negative"},
		{"wrk", []byte("  Socket errors: connect 0, read -2, write 0, timeout 0\n"), 1, "read count -2 is negative"},
		{"wrk", []byte("  Non-2xx or 3xx responses: -7\n"), 1, "-7 is negative"},
		{"wrk", []byte("Requests/sec:  -100.5\n"), 1, "requests/sec -100.5 is negative"},
	}
	for _, tt := range tests {
		a, err := Lookup(tt.tool)
		if err != nil {
			t.Fatal(err)
		}
		_, err = a.Parse(Trial{Argv: []string{tt.tool}, Stdout: tt.stdout})
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("%s %q: err = %v, want a *ParseError", tt.tool, tt.stdout, err)
			continue
		}
		if pe.Tool != tt.tool || pe.Line != tt.line || !strings.Contains(pe.Error(), tt.msg) {
			t.Errorf("%s %q:\n got %v (line %d)\nwant line %d, containing %q", tt.tool, tt.stdout, err, pe.Line, tt.line, tt.msg)
		}
		if strings.Contains(pe.Error(), "\n") {
			t.Errorf("%s: error spans lines: %q", tt.tool, pe.Error())
		}
	}
}

// TestPgbenchLogErrors: a log cut short or garbled is an error naming the file
// and line.
func TestPgbenchLogErrors(t *testing.T) {
	src := fixture(t, "pgbench", "tpcb-c4-j2")
	pid := fixturePid(t, src.Dir)
	logs, _ := filepath.Glob(filepath.Join(src.Dir, pgbenchLogPrefix+".*"))
	tests := []struct {
		name string
		edit func(string) string // applied to the first log
		file bool                // the error names the first log's file
		line int
		msg  string
	}{
		{"truncated", func(s string) string { return s[:len(s)/2] }, false, 0, ""},
		{"garbled", func(s string) string { return strings.Replace(s, "\n", "\n1 2 x 0 1795642658 477394\n", 3) }, true, 2, "latency"},
		{"short line", func(s string) string { return "1 1\n" + s }, true, 1, "expected"},
		{"negative latency", func(s string) string { return "0 1 -477 0 1795642658 477394\n" + s }, true, 1, "latency -477 is negative"},
		{"negative field", func(s string) string { return "0 -1 477 0 1795642658 477394\n" + s }, true, 1, "field 2 -1 is negative"},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			if l == logs[0] {
				b = []byte(tt.edit(string(b)))
			}
			os.WriteFile(filepath.Join(dir, filepath.Base(l)), b, 0o644)
		}
		_, err := pgbench{}.Parse(Trial{Argv: []string{"pgbench"}, Dir: dir, Pid: pid, Stdout: src.Stdout})
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("%s: err = %v, want a *ParseError", tt.name, err)
			continue
		}
		if tt.file && (pe.File != filepath.Base(logs[0]) || pe.Line != tt.line || !strings.Contains(pe.Msg, tt.msg)) {
			t.Errorf("%s: %v; want %s line %d (%q)", tt.name, err, filepath.Base(logs[0]), tt.line, tt.msg)
		}
		t.Logf("%s: %v", tt.name, err)
	}
	// No log at all: the run's -l was lost.
	_, err := pgbench{}.Parse(Trial{Argv: []string{"pgbench"}, Dir: t.TempDir(), Pid: pid, Stdout: src.Stdout})
	if pe := (*ParseError)(nil); !errors.As(err, &pe) {
		t.Errorf("no logs: err = %v, want a *ParseError", err)
	}
}

func TestDirectionOf(t *testing.T) {
	tests := []struct {
		metric string
		want   stats.Direction
	}{
		{"throughput", stats.HigherIsBetter}, {"qps", stats.HigherIsBetter}, {"errors", stats.LowerIsBetter},
		{"p50_ms", stats.LowerIsBetter}, {"p999_ms", stats.LowerIsBetter}, {"mean_ms", stats.LowerIsBetter}, {"max_ms", stats.LowerIsBetter},
		{"GET/p99_ms", stats.LowerIsBetter}, {"LRANGE_100 (first 100 elements)/throughput", stats.HigherIsBetter},
		{"render_s", stats.LowerIsBetter}, {"gc_us", stats.LowerIsBetter}, {"frames_per_s", stats.HigherIsBetter}, {"cache_errors", stats.LowerIsBetter},
	}
	for _, tt := range tests {
		got, err := DirectionOf(tt.metric)
		if err != nil || got != tt.want {
			t.Errorf("DirectionOf(%q) = %v, %v; want %v", tt.metric, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "latency", "_ms", "GET/", "ops", "tps"} {
		if _, err := DirectionOf(bad); !errors.Is(err, ErrUnknownMetric) || !strings.Contains(err.Error(), strconv.Quote(bad)) {
			t.Errorf("DirectionOf(%q) = %v; want ErrUnknownMetric naming it", bad, err)
		}
	}
}

func TestIsCount(t *testing.T) {
	for metric, want := range map[string]bool{
		"errors": true, "cache_errors": true, "GET/errors": true, "SET/dropped_errors": true,
		"_errors": false, "throughput": false, "p99_ms": false, "errors_per_s": false, "errors/p99_ms": false,
	} {
		if got := IsCount(metric); got != want {
			t.Errorf("IsCount(%q) = %v, want %v", metric, got, want)
		}
	}
}

func TestLookupDetect(t *testing.T) {
	for _, c := range []struct{ argv0, want string }{
		{"redis-benchmark", "redis-benchmark"}, {"/usr/bin/memcaslap", "memaslap"}, {"memaslap", "memaslap"},
		{"/usr/lib/postgresql/15/bin/pgbench", "pgbench"}, {"sysbench", "sysbench"}, {"wrk", "wrk"},
	} {
		a, err := Detect([]string{c.argv0, "x"})
		if err != nil || a.Name() != c.want {
			t.Errorf("Detect(%q) = %v, %v; want %s", c.argv0, a, err, c.want)
		}
	}
	if _, err := Detect([]string{"./mybench"}); !errors.Is(err, ErrNoAdapter) || !strings.Contains(err.Error(), "jsonl") {
		t.Errorf("Detect(./mybench) = %v; want ErrNoAdapter listing the adapters", err)
	}
	if _, err := Lookup("nope"); err == nil || !strings.Contains(err.Error(), "jsonl") {
		t.Errorf("Lookup(nope) = %v; want an error listing the names", err)
	}
	if _, err := Lookup("memtier"); err == nil || !strings.Contains(err.Error(), "memaslap") {
		t.Errorf("Lookup(memtier) = %v; want the pointer to memaslap", err)
	}
}

func TestPrepare(t *testing.T) {
	tests := []struct {
		tool    string
		argv    []string
		want    string // the prepared command, joined by spaces; DIR stands for the trial dir
		wantErr string
	}{
		{"redis-benchmark", []string{"redis-benchmark", "-t", "get"}, "redis-benchmark -t get --csv", ""},
		{"redis-benchmark", []string{"redis-benchmark", "--csv", "-t", "get"}, "redis-benchmark --csv -t get", ""},
		{"memaslap", []string{"memcaslap", "-s", "h:1"}, "memcaslap -s h:1 -S 1h", ""},
		{"memaslap", []string{"memcaslap", "-S5s"}, "memcaslap -S5s", ""},
		{"pgbench", []string{"pgbench", "-T", "5", "db"}, "pgbench -l --log-prefix=DIR/pgbench_log -T 5 db", ""},
		{"pgbench", []string{"pgbench", "-l", "db"}, "pgbench -l --log-prefix=DIR/pgbench_log db", ""},
		{"pgbench", []string{"pgbench", "--log-prefix=x", "db"}, "", "remove --log-prefix"},
		{"pgbench", []string{"pgbench", "--aggregate-interval", "1", "db"}, "", "remove --aggregate-interval"},
		{"sysbench", []string{"sysbench", "cpu", "run"}, "sysbench --percentile=99 cpu run", ""},
		{"sysbench", []string{"sysbench", "--percentile=95", "cpu", "run"}, "sysbench --percentile=95 cpu run", ""},
		{"wrk", []string{"wrk", "http://x/"}, "wrk --latency http://x/", ""},
		{"jsonl", []string{"./b", "--x"}, "./b --x", ""},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		a, _ := Lookup(tt.tool)
		in := append([]string(nil), tt.argv...)
		got, err := a.Prepare(tt.argv, dir)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s Prepare(%q) = %q, %v; want error %q", tt.tool, tt.argv, got, err, tt.wantErr)
			}
			continue
		}
		if s := strings.ReplaceAll(strings.Join(got, " "), dir, "DIR"); err != nil || s != tt.want {
			t.Errorf("%s Prepare(%q) = %q, %v; want %q", tt.tool, tt.argv, s, err, tt.want)
		}
		if strings.Join(in, " ") != strings.Join(tt.argv, " ") {
			t.Errorf("%s Prepare modified its argument: %q", tt.tool, tt.argv)
		}
	}
}
