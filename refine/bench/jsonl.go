package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"temper.codes/temper-train/refine/stats"
)

// jsonl parses the generic JSON-lines protocol, for a benchmark no other
// adapter knows: each non-blank line of its standard output is one object
//
//	{"metric": "render", "value": 12.5, "unit": "ms"}
//
// and a line {"open_loop": true} declares that the benchmark issued its work
// on a fixed schedule and timed it from there.
//
// A metric's direction is read from its name (DirectionOf's rule). The unit,
// when given, is appended to a name that does not already end with it, so
// that the name carries the direction: "render" in "ms" becomes "render_ms"
// (lower is better), "frames" in "frames/s" (any "X/s") becomes
// "frames_per_s" (higher). Units are ns, us (or µs), ms, s, a rate X/s, or any
// other word when the name alone gives the direction ("errors" in "count").
// A unit that contradicts the name ("p99_ms" in "us") is an error, as is a
// metric given twice, an unknown field, or any line that is not such an
// object.
type jsonl struct{}

func (jsonl) Name() string { return "jsonl" }

func (jsonl) Prepare(argv []string, dir string) ([]string, error) { return slices.Clone(argv), nil }

type jsonlLine struct {
	Metric   *string  `json:"metric"`
	Value    *float64 `json:"value"`
	Unit     string   `json:"unit"`
	OpenLoop *bool    `json:"open_loop"`
}

var timeUnits = map[string]string{"ns": "_ns", "us": "_us", "µs": "_us", "ms": "_ms", "s": "_s"}

func (j jsonl) Parse(t Trial) (Result, error) {
	lines := splitLines(t.Stdout)
	res := Result{Tool: j.Name(), Metrics: map[string]float64{}}
	for _, l := range lines {
		perr := func(format string, args ...any) error {
			return &ParseError{Tool: j.Name(), Line: l.n, Text: l.text, Msg: fmt.Sprintf(format, args...)}
		}
		if strings.TrimSpace(l.text) == "" {
			continue
		}
		var v jsonlLine
		dec := json.NewDecoder(strings.NewReader(l.text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			return Result{}, perr("not a JSON object {\"metric\": ..., \"value\": ..., \"unit\": ...}: %v", err)
		}
		if _, err := dec.Token(); err != io.EOF {
			return Result{}, perr("more than one JSON value on the line")
		}
		if v.OpenLoop != nil {
			if v.Metric != nil || v.Value != nil || v.Unit != "" {
				return Result{}, perr("\"open_loop\" goes on a line of its own")
			}
			res.OpenLoop = *v.OpenLoop
			continue
		}
		if v.Metric == nil || v.Value == nil {
			return Result{}, perr("a metric line needs \"metric\" and \"value\"")
		}
		name, err := jsonlName(*v.Metric, v.Unit)
		if err != nil {
			return Result{}, perr("%v", err)
		}
		if _, dup := res.Metrics[name]; dup {
			return Result{}, perr("metric %q given twice (one trial gives one value per metric)", name)
		}
		if *v.Value < 0 {
			return Result{}, perr("metric %q: value %s", name, negativeMsg(strconv.FormatFloat(*v.Value, 'g', -1, 64)))
		}
		res.Metrics[name] = *v.Value
	}
	if len(res.Metrics) == 0 {
		return Result{}, &ParseError{Tool: j.Name(), Line: endLine(lines), Msg: "no metric line in the output"}
	}
	return res, nil
}

// jsonlName is the metric's name with the unit's suffix, checked against
// DirectionOf.
func jsonlName(metric, unit string) (string, error) {
	if metric == "" || strings.ContainsFunc(metric, func(r rune) bool { return r <= ' ' || r == '/' || r == '"' }) {
		return "", fmt.Errorf("metric name %q: want a word without spaces or slashes", metric)
	}
	suffix, unitDir := "", stats.Direction(0)
	if s, ok := timeUnits[unit]; ok {
		suffix, unitDir = s, stats.LowerIsBetter
	} else if strings.HasSuffix(unit, "/s") && len(unit) > 2 {
		suffix, unitDir = "_per_s", stats.HigherIsBetter
	}
	name := metric
	if nameDir, err := DirectionOf(metric); err == nil {
		// The name gives the direction; a unit must agree with it, and a
		// time unit must be the one the name ends with.
		timeName := slices.ContainsFunc(timeSuffixes, func(s string) bool { return strings.HasSuffix(metric, s) })
		if unitDir != 0 && (unitDir != nameDir || (unitDir == stats.LowerIsBetter && timeName && !strings.HasSuffix(metric, suffix))) {
			return "", fmt.Errorf("metric %q: unit %q contradicts the name", metric, unit)
		}
	} else if suffix != "" {
		name += suffix
	}
	if _, err := DirectionOf(name); err != nil {
		return "", err
	}
	return name, nil
}
