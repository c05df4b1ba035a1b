package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// sysbench parses sysbench 1.0's final report. Throughput is the transactions
// per second of an OLTP test ("transactions: 947 (309.82 per sec.)"), else the
// events per second a test such as cpu prints, else total events over total
// time; an OLTP test also gives qps and errors (its ignored errors). The
// "Latency (ms)" section gives min_ms, mean_ms, max_ms and the percentile
// chosen with --percentile as pNN_ms (99 → p99_ms, 99.9 → p999_ms).
//
// sysbench's --rate paces events through a queue, but its latency histogram
// times each event from when a worker picks it up, not from when it was
// queued (sysbench 1.0, sb_event_start): the queueing delay is left out, so a
// run is never reported as open-loop.
type sysbench struct{}

func (sysbench) Name() string { return "sysbench" }

// Prepare asks for the 99th percentile when the command does not choose one
// (sysbench's default is the 95th).
func (sysbench) Prepare(argv []string, dir string) ([]string, error) {
	if hasFlag(argv, false, "--percentile") {
		return slices.Clone(argv), nil
	}
	return insertAfterCommand(argv, "--percentile=99"), nil
}

func (s sysbench) Parse(t Trial) (Result, error) {
	lines := splitLines(t.Stdout)
	perr := func(l line, format string, args ...any) error {
		return &ParseError{Tool: s.Name(), Line: l.n, Text: l.text, Msg: fmt.Sprintf(format, args...)}
	}
	res := Result{Tool: s.Name(), Metrics: map[string]float64{}}
	m := res.Metrics
	// rate parses "N (X per sec.)" and returns X.
	rate := func(l line, f []string) (float64, error) {
		if len(f) != 4 || !strings.HasPrefix(f[1], "(") || f[2] != "per" || f[3] != "sec.)" {
			return 0, perr(l, "expected \"N (X per sec.)\"")
		}
		v, ok := parseNumber(strings.TrimPrefix(f[1], "("))
		if !ok {
			return 0, perr(l, "rate %s", notFigure(strings.TrimPrefix(f[1], "("), strconv.Quote(f[1])+" is not a number"))
		}
		return v, nil
	}
	number := func(l line, f []string, unit string) (float64, error) {
		if len(f) != 1 {
			return 0, perr(l, "expected one number")
		}
		v, ok := parseNumber(strings.TrimSuffix(f[0], unit))
		if !ok {
			return 0, perr(l, "%s", notFigure(strings.TrimSuffix(f[0], unit), strconv.Quote(f[0])+" is not a number"))
		}
		return v, nil
	}
	var (
		events, totalTime   float64
		haveEvents, haveTim bool
		inLatency           bool
		latencyLines        int
		err                 error
	)
	for _, l := range lines {
		text := strings.TrimSpace(l.text)
		if text == "Latency (ms):" {
			inLatency = true
			continue
		}
		if text == "" || !strings.HasPrefix(l.text, " ") {
			inLatency = false
		}
		if inLatency {
			key, val, ok := strings.Cut(text, ":")
			if !ok {
				return Result{}, perr(l, "expected \"name: value\" in the Latency section")
			}
			f := strings.Fields(val)
			var v float64
			switch {
			case key == "min", key == "avg", key == "max":
				if v, err = number(l, f, ""); err != nil {
					return Result{}, err
				}
				m[map[string]string{"min": "min_ms", "avg": "mean_ms", "max": "max_ms"}[key]] = v
				latencyLines++
			case strings.HasSuffix(key, "th percentile"):
				pct := strings.TrimSuffix(key, "th percentile")
				if _, err := strconv.ParseFloat(pct, 64); err != nil || strings.Trim(pct, "0123456789.") != "" {
					return Result{}, perr(l, "percentile %q is not a number", pct)
				}
				if v, err = number(l, f, ""); err != nil {
					return Result{}, err
				}
				m["p"+strings.ReplaceAll(pct, ".", "")+"_ms"] = v
			}
			continue
		}
		switch {
		case strings.HasPrefix(text, "transactions:"):
			if m["throughput"], err = rate(l, strings.Fields(text[len("transactions:"):])); err != nil {
				return Result{}, err
			}
		case strings.HasPrefix(text, "queries:"):
			if m["qps"], err = rate(l, strings.Fields(text[len("queries:"):])); err != nil {
				return Result{}, err
			}
		case strings.HasPrefix(text, "ignored errors:"):
			f := strings.Fields(text[len("ignored errors:"):])
			if len(f) != 4 {
				return Result{}, perr(l, "expected \"N (X per sec.)\"")
			}
			if m["errors"], err = number(l, f[:1], ""); err != nil {
				return Result{}, err
			}
		case strings.HasPrefix(text, "events per second:"):
			if _, ok := m["throughput"]; !ok {
				if m["throughput"], err = number(l, strings.Fields(text[len("events per second:"):]), ""); err != nil {
					return Result{}, err
				}
			}
		case strings.HasPrefix(text, "total number of events:"):
			if events, err = number(l, strings.Fields(text[len("total number of events:"):]), ""); err != nil {
				return Result{}, err
			}
			haveEvents = true
		case strings.HasPrefix(text, "total time:"):
			if totalTime, err = number(l, strings.Fields(text[len("total time:"):]), "s"); err != nil {
				return Result{}, err
			}
			haveTim = true
		}
	}
	end := &ParseError{Tool: s.Name(), Line: endLine(lines)}
	if !haveEvents || !haveTim || latencyLines != 3 {
		end.Msg = "output ends without the General statistics and Latency (ms) sections (truncated, or the run failed)"
		return Result{}, end
	}
	if _, ok := m["throughput"]; !ok {
		if totalTime == 0 {
			end.Msg = "total time is 0 s: no throughput"
			return Result{}, end
		}
		m["throughput"] = events / totalTime
	}
	return res, nil
}
