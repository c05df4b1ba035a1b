// Package bench runs one trial of a load tool and turns the tool's own output
// into named metrics.
//
// Each supported tool has an Adapter: it prepares the command line (adding the
// flags its parser needs, such as pgbench's per-transaction log in the trial's
// scratch directory) and parses what the tool printed. Adapters parse the real
// output of the versions Debian 12 ships; testdata/ holds recordings of each.
// Output that does not parse is a *ParseError naming the tool and the line, never
// a number: a failed trial must not enter the statistics as a measurement.
package bench

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"temper.codes/temper-train/refine/stats"
)

// ErrUnknownMetric is wrapped by DirectionOf for a name whose direction it
// cannot tell.
var ErrUnknownMetric = errors.New("metric direction unknown")

// DirectionOf tells which way the named metric improves. The rule, in order:
//
//   - a "label/" prefix (redis-benchmark's per-test metrics, "GET/p99_ms") is
//     ignored;
//   - "throughput" and "qps" are higher-is-better, "errors" lower;
//   - a name ending in a time unit, "_ns", "_us", "_ms" or "_s" ("p99_ms",
//     "mean_ms", a JSON-lines "render_ms"), is a latency: lower;
//   - a name ending in "_per_s" (a JSON-lines "frames_per_s") is a rate: higher;
//   - a name ending in "_errors" is lower.
//
// Anything else is an error naming the metric: a metric whose direction is
// guessed could be tuned the wrong way.
func DirectionOf(metric string) (stats.Direction, error) {
	name := metric
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	switch name {
	case "throughput", "qps":
		return stats.HigherIsBetter, nil
	case "errors":
		return stats.LowerIsBetter, nil
	}
	if strings.HasSuffix(name, "_per_s") && len(name) > len("_per_s") {
		return stats.HigherIsBetter, nil
	}
	for _, s := range timeSuffixes {
		if strings.HasSuffix(name, s) && len(name) > len(s) {
			return stats.LowerIsBetter, nil
		}
	}
	if strings.HasSuffix(name, "_errors") && len(name) > len("_errors") {
		return stats.LowerIsBetter, nil
	}
	return 0, fmt.Errorf("%w: %q (name it throughput, qps, errors, or with a suffix _ms/_us/_ns/_s (lower is better), _per_s (higher) or _errors (lower))", ErrUnknownMetric, metric)
}

var timeSuffixes = []string{"_ns", "_us", "_ms", "_s"}

// IsCount reports whether the named metric counts events per trial
// ("errors", a JSON-lines "dropped_errors"; a "label/" prefix is ignored)
// rather than measuring a time or a rate. A count is often 0 in the
// baseline, where a relative change does not exist, so its guard compares
// absolute rates (stats.Count).
func IsCount(metric string) bool {
	name := metric[strings.LastIndexByte(metric, '/')+1:]
	return name == "errors" || strings.HasSuffix(name, "_errors") && len(name) > len("_errors")
}

// Result is what one trial measured.
type Result struct {
	Tool string // the adapter's name
	// Metrics by canonical name: "throughput" (operations per second),
	// "p50_ms", "p90_ms", "p99_ms", "p999_ms", "mean_ms", "max_ms", "errors",
	// ..., and a JSON-lines benchmark's own names. DirectionOf knows each.
	Metrics map[string]float64
	// OpenLoop is set when the tool issued requests on a fixed schedule and
	// timed each from its scheduled start, so that a stall delays the clock of
	// every request queued behind it (no coordinated omission). A tool that
	// merely caps its rate but times requests from when they were sent is not
	// open-loop.
	OpenLoop bool
}

// Trial is what a parser gets from one run of its tool.
type Trial struct {
	Argv   []string // the command as run (after Prepare)
	Dir    string   // the trial's scratch directory
	Pid    int      // the tool's process id (pgbench names its logs by it); 0 if unknown
	Stdout []byte
}

// Adapter knows one load tool's command line and output.
type Adapter interface {
	// Name is the adapter's name, as given to Lookup.
	Name() string
	// Prepare returns the command to run for a trial with scratch directory
	// dir: argv with the flags the parser needs added. It refuses flags that
	// would make the output unparsable. argv is not modified.
	Prepare(argv []string, dir string) ([]string, error)
	// Parse turns the trial's output into a Result, or a *ParseError.
	Parse(t Trial) (Result, error)
}

var adapters = []Adapter{redisBenchmark{}, memaslap{}, pgbench{}, sysbench{}, wrk{}, jsonl{}}

// Names lists the adapters' names.
func Names() []string {
	names := make([]string, len(adapters))
	for i, a := range adapters {
		names[i] = a.Name()
	}
	return names
}

// Lookup returns the adapter with the given name.
func Lookup(name string) (Adapter, error) {
	for _, a := range adapters {
		if a.Name() == name {
			return a, nil
		}
	}
	if name == "memtier" {
		return nil, fmt.Errorf("adapter %q: memtier_benchmark is not packaged in Debian 12; use memaslap (Debian's memcaslap, package libmemcached-tools)", name)
	}
	return nil, fmt.Errorf("unknown adapter %q (known: %s)", name, strings.Join(Names(), ", "))
}

// commandAdapters maps a command's base name to its adapter. Debian installs
// memaslap as memcaslap.
var commandAdapters = map[string]string{
	"redis-benchmark": "redis-benchmark",
	"memaslap":        "memaslap",
	"memcaslap":       "memaslap",
	"pgbench":         "pgbench",
	"sysbench":        "sysbench",
	"wrk":             "wrk",
}

// Detect picks the adapter from the base name of argv[0].
func Detect(argv []string) (Adapter, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("empty benchmark command")
	}
	base := filepath.Base(argv[0])
	if name, ok := commandAdapters[base]; ok {
		return Lookup(name)
	}
	return nil, fmt.Errorf("cannot tell the output format of %q from its name (adapters: %s): %w", base, strings.Join(Names(), ", "), ErrNoAdapter)
}

// ErrNoAdapter is wrapped by Detect for a command whose output format it
// cannot tell: the caller must name the adapter (Lookup).
var ErrNoAdapter = errors.New("name the adapter")

// ParseError is output that does not parse.
type ParseError struct {
	Tool string
	File string // the file that did not parse, relative to the trial dir; "" for the tool's standard output
	Line int    // 1-based; one past the last line when the output ends early
	Text string // the line, as printed (may be empty)
	Msg  string
}

func (e *ParseError) Error() string {
	where := "output"
	if e.File != "" {
		where = e.File
	}
	s := fmt.Sprintf("%s %s line %d: %s", e.Tool, where, e.Line, e.Msg)
	if e.Text != "" {
		t := e.Text
		if len(t) > 120 {
			t = t[:120] + "..."
		}
		s += fmt.Sprintf(": %q", t)
	}
	return s
}

// hasFlag reports whether argv (after argv[0]) holds one of the flags, alone
// ("-l", "--latency") or with an attached value ("--log-prefix=x", "-R100").
// Short flags match with an attached value only when attached is set.
func hasFlag(argv []string, attached bool, flags ...string) bool {
	for _, a := range argv[min(1, len(argv)):] {
		if a == "--" {
			return false
		}
		for _, f := range flags {
			if a == f {
				return true
			}
			if strings.HasPrefix(f, "--") && strings.HasPrefix(a, f+"=") {
				return true
			}
			if attached && !strings.HasPrefix(f, "--") && strings.HasPrefix(a, f) && !strings.HasPrefix(a, "--") {
				return true
			}
		}
	}
	return false
}

// insertAfterCommand returns argv with extra inserted after argv[0].
func insertAfterCommand(argv []string, extra ...string) []string {
	out := make([]string, 0, len(argv)+len(extra))
	out = append(out, argv[0])
	out = append(out, extra...)
	return append(out, argv[1:]...)
}
