package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// wrk parses wrk 4.1's report, run with --latency:
//
//	  Thread Stats   Avg      Stdev     Max   +/- Stdev
//	    Latency     3.19ms    4.17ms  41.47ms   89.03%
//	  Latency Distribution
//	     50%    1.80ms
//	     ...
//	     99%   20.39ms
//	  Socket errors: connect 0, read 0, write 0, timeout 5
//	  Non-2xx or 3xx responses: 11482
//	Requests/sec:   7239.53
//
// Throughput is Requests/sec; mean_ms and max_ms come from the Latency row,
// pNN_ms from the distribution; errors counts socket errors and non-2xx/3xx
// responses. wrk is closed-loop: each connection sends its next request when
// the previous one is answered (wrk2's -R, which fixes that, is not packaged
// in Debian 12).
type wrk struct{}

func (wrk) Name() string { return "wrk" }

// Prepare adds --latency, without which wrk prints no percentiles.
func (wrk) Prepare(argv []string, dir string) ([]string, error) {
	if hasFlag(argv, false, "--latency") || hasFlag(argv, false, "-L") {
		return slices.Clone(argv), nil
	}
	return insertAfterCommand(argv, "--latency"), nil
}

func (w wrk) Parse(t Trial) (Result, error) {
	lines := splitLines(t.Stdout)
	perr := func(l line, format string, args ...any) error {
		return &ParseError{Tool: w.Name(), Line: l.n, Text: l.text, Msg: fmt.Sprintf(format, args...)}
	}
	res := Result{Tool: w.Name(), Metrics: map[string]float64{}}
	m := res.Metrics
	errs := 0.0
	inDist, haveLatency, haveRate := false, false, false
	var requestsLine *line
	requests := 0.0
	for _, l := range lines {
		text := strings.TrimSpace(l.text)
		f := strings.Fields(text)
		if inDist {
			if len(f) == 2 && strings.HasSuffix(f[0], "%") {
				pct := strings.TrimSuffix(f[0], "%")
				if _, err := strconv.ParseFloat(pct, 64); err != nil || strings.Trim(pct, "0123456789.") != "" {
					return Result{}, perr(l, "percentile %q is not a number", f[0])
				}
				v, err := wrkDuration(f[1])
				if err != nil {
					return Result{}, perr(l, "%v", err)
				}
				m["p"+strings.ReplaceAll(strings.TrimSuffix(pct, ".000"), ".", "")+"_ms"] = v
				continue
			}
			inDist = false
		}
		switch {
		case len(f) > 0 && f[0] == "Latency" && len(f) != 2:
			// Latency   avg stdev max +/-stdev
			if len(f) != 5 {
				return Result{}, perr(l, "expected \"Latency avg stdev max +/-stdev\"")
			}
			avg, err := wrkDuration(f[1])
			if err == nil {
				m["mean_ms"] = avg
				m["max_ms"], err = wrkDuration(f[3])
			}
			if err != nil {
				return Result{}, perr(l, "%v", err)
			}
			haveLatency = true
		case text == "Latency Distribution":
			inDist = true
		case len(f) >= 3 && f[1] == "requests" && f[2] == "in":
			// 21843 requests in 3.02s, 5.00MB read
			v, ok := parseNumber(f[0])
			if !ok {
				return Result{}, perr(l, "request count %s", notFigure(f[0], strconv.Quote(f[0])+" is not a number"))
			}
			requests, requestsLine = v, &l
		case strings.HasPrefix(text, "Socket errors:"):
			// Socket errors: connect 0, read 0, write 0, timeout 5
			g := strings.Fields(strings.ReplaceAll(strings.TrimPrefix(text, "Socket errors:"), ",", ""))
			if len(g) != 8 {
				return Result{}, perr(l, "expected \"Socket errors: connect N, read N, write N, timeout N\"")
			}
			for i := 1; i < len(g); i += 2 {
				v, ok := parseNumber(g[i])
				if !ok {
					return Result{}, perr(l, "%s count %s", g[i-1], notFigure(g[i], strconv.Quote(g[i])+" is not a number"))
				}
				errs += v
			}
		case strings.HasPrefix(text, "Non-2xx or 3xx responses:"):
			s := strings.TrimSpace(strings.TrimPrefix(text, "Non-2xx or 3xx responses:"))
			v, ok := parseNumber(s)
			if !ok {
				return Result{}, perr(l, "%s", notFigure(s, "expected a count of responses"))
			}
			errs += v
		case strings.HasPrefix(text, "Requests/sec:"):
			s := strings.TrimSpace(strings.TrimPrefix(text, "Requests/sec:"))
			v, ok := parseNumber(s)
			if !ok {
				return Result{}, perr(l, "requests/sec %s", notFigure(s, "is not a number"))
			}
			m["throughput"], haveRate = v, true
		}
	}
	if !haveLatency || !haveRate {
		return Result{}, &ParseError{Tool: w.Name(), Line: endLine(lines), Msg: "output ends without the Latency and Requests/sec lines (truncated, or the run failed)"}
	}
	if requestsLine == nil {
		return Result{}, &ParseError{Tool: w.Name(), Line: endLine(lines), Msg: "output has no \"N requests in T\" line"}
	}
	if requests == 0 {
		// wrk then prints latencies of 0.00us: no measurement at all.
		return Result{}, perr(*requestsLine, "no request completed (%.0f socket errors and bad responses)", errs)
	}
	m["errors"] = errs
	return res, nil
}

// wrkDuration parses wrk's durations ("812.00us", "1.80ms", "2.01s", "1.00m")
// into milliseconds.
func wrkDuration(s string) (float64, error) {
	if num, ok := strings.CutSuffix(s, "us"); ok {
		// Divided, not multiplied by 1e-3: 286.00us is 0.286, not 0.28600000000000003.
		if v, ok := parseNumber(num); ok {
			return v / 1000, nil
		}
		return 0, fmt.Errorf("%s", notFigure(num, strconv.Quote(s)+" is not a duration (us, ms, s, m, h)"))
	}
	for _, u := range []struct {
		suffix string
		ms     float64
	}{{"ms", 1}, {"s", 1e3}, {"m", 60e3}, {"h", 3600e3}} {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			if v, ok := parseNumber(num); ok {
				return v * u.ms, nil
			}
			return 0, fmt.Errorf("%s", notFigure(num, strconv.Quote(s)+" is not a duration (us, ms, s, m, h)"))
		}
	}
	return 0, fmt.Errorf("%q is not a duration (us, ms, s, m, h)", s)
}
