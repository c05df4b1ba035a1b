package bench

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// memaslap parses memaslap's report (Debian's memcaslap, libmemcached-tools
// 1.1): the closing line "Run time: 3.0s Ops: 32893 TPS: 10820 Net_rate: 12.1M/s"
// gives the throughput, and the final "Total Statistics (N events)" block,
// printed when -S is given, the latencies:
//
//	Total Statistics (32877 events)
//	   Min:        20
//	   Max:    117347
//	   Avg:      1474
//	   ...
//	   Log2 Dist:
//	       4:        0      486     2272     3483
//	       8:    12194     5228     1354     1954
//
// Latencies are in microseconds. The only distribution memaslap prints is that
// power-of-two histogram: a row "k: c0 c1 c2 c3" counts events in the buckets
// k..k+3, bucket b holding latencies in (2^(b-1), 2^b] µs (memaslap rounds the
// log up; the recorded Min and Max fall in the first and last non-empty
// buckets). Percentiles are interpolated linearly within their bucket and
// clamped to [Min, Max], so they are estimates good to the bucket's width —
// which is why mean_ms and max_ms, exact figures, are given too.
//
// memaslap's --tps paces requests but times each from its send, so it is not
// open-loop (and in the recordings it did not hold the rate it was given).
type memaslap struct{}

func (memaslap) Name() string { return "memaslap" }

// Prepare adds -S (stat frequency) when absent: without it memaslap prints no
// latency at all. An hour's period makes it print just the final block for
// any shorter run; a longer run prints periodic blocks too, which are skipped.
func (memaslap) Prepare(argv []string, dir string) ([]string, error) {
	if hasFlag(argv, true, "-S", "--stat_freq") {
		return append([]string(nil), argv...), nil
	}
	return append(append([]string(nil), argv...), "-S", "1h"), nil
}

func (m memaslap) Parse(t Trial) (Result, error) {
	lines := splitLines(t.Stdout)
	perr := func(l line, format string, args ...any) error {
		return &ParseError{Tool: m.Name(), Line: l.n, Text: l.text, Msg: fmt.Sprintf(format, args...)}
	}
	res := Result{Tool: m.Name(), Metrics: map[string]float64{}}
	// The last "Total Statistics (N events)" block is the whole run's.
	block := -1
	var events float64
	for i, l := range lines {
		rest, ok := strings.CutPrefix(strings.TrimSpace(l.text), "Total Statistics (")
		if !ok {
			continue
		}
		num, ok := strings.CutSuffix(rest, " events)")
		v, ok2 := parseNumber(num)
		if !ok || !ok2 || v != math.Trunc(v) {
			return Result{}, perr(l, "%s", notFigure(num, "expected \"Total Statistics (N events)\""))
		}
		block, events = i, v
	}
	if block >= 0 {
		if err := m.parseBlock(res.Metrics, lines[block+1:], events, lines); err != nil {
			return Result{}, err
		}
	}
	found := false
	for _, l := range lines {
		f, ok := fieldsAfter(l.text, "Run time:")
		if !ok {
			continue
		}
		// Run time: 3.0s Ops: 32893 TPS: 10820 Net_rate: 12.1M/s
		if len(f) != 7 || f[1] != "Ops:" || f[3] != "TPS:" || f[5] != "Net_rate:" {
			return Result{}, perr(l, "expected \"Run time: Ts Ops: N TPS: N Net_rate: R\"")
		}
		tps, ok := parseNumber(f[4])
		if !ok {
			return Result{}, perr(l, "TPS %s", notFigure(f[4], strconv.Quote(f[4])+" is not a number"))
		}
		res.Metrics["throughput"] = tps
		found = true
	}
	if !found {
		return Result{}, &ParseError{Tool: m.Name(), Line: endLine(lines), Msg: "output ends without the \"Run time: ... TPS: ...\" line (truncated, or the run failed)"}
	}
	return res, nil
}

// parseBlock parses the lines after "Total Statistics (N events)".
func (m memaslap) parseBlock(metrics map[string]float64, ls []line, events float64, all []line) error {
	perr := func(l line, format string, args ...any) error {
		return &ParseError{Tool: m.Name(), Line: l.n, Text: l.text, Msg: fmt.Sprintf(format, args...)}
	}
	stats := map[string]float64{}
	var buckets []float64 // counts by bucket index
	i := 0
	for ; i < len(ls); i++ {
		f := strings.Fields(ls[i].text)
		if len(f) == 2 && (f[0] == "Min:" || f[0] == "Max:" || f[0] == "Avg:" || f[0] == "Geo:" || f[0] == "Std:") {
			v, ok := parseNumber(f[1])
			if !ok {
				return perr(ls[i], "%s %s", f[0], notFigure(f[1], strconv.Quote(f[1])+" is not a number"))
			}
			stats[f[0]] = v
			continue
		}
		if len(f) == 2 && f[0] == "Log2" && f[1] == "Dist:" {
			i++
			break
		}
		return perr(ls[i], "expected Min/Max/Avg/Geo/Std or \"Log2 Dist:\"")
	}
	for ; i < len(ls); i++ {
		f := strings.Fields(ls[i].text)
		if len(f) == 0 {
			break
		}
		k, err := strconv.Atoi(strings.TrimSuffix(f[0], ":"))
		if err != nil || !strings.HasSuffix(f[0], ":") || k < 0 || k > 64 || k%4 != 0 || len(f) < 2 || len(f) > 5 {
			return perr(ls[i], "expected a histogram row \"k: c0 c1 c2 c3\"")
		}
		for j, s := range f[1:] {
			c, ok := parseNumber(s)
			if !ok || c != math.Trunc(c) {
				return perr(ls[i], "bucket count %s", notFigure(s, strconv.Quote(s)+" is not a count"))
			}
			b := k + j
			for len(buckets) <= b {
				buckets = append(buckets, 0)
			}
			buckets[b] += c
		}
	}
	end := line{n: endLine(all)}
	if i < len(ls) {
		end = ls[i]
	}
	for _, k := range []string{"Min:", "Max:", "Avg:"} {
		if _, ok := stats[k]; !ok {
			return perr(end, "the Total Statistics block has no %s line (truncated output?)", k)
		}
	}
	total := 0.0
	for _, c := range buckets {
		total += c
	}
	if total != events || events == 0 {
		return perr(end, "the Log2 histogram counts %.0f events, the block header %.0f (truncated output?)", total, events)
	}
	lo, hi := stats["Min:"], stats["Max:"]
	if lo > hi || stats["Avg:"] < lo || stats["Avg:"] > hi {
		return perr(end, "Min %.0f, Avg %.0f, Max %.0f are inconsistent", lo, stats["Avg:"], hi)
	}
	metrics["mean_ms"] = stats["Avg:"] / 1000
	metrics["max_ms"] = hi / 1000
	metrics["min_ms"] = lo / 1000
	for _, p := range percentiles {
		metrics[p.name] = log2Quantile(buckets, total, p.q, lo, hi) / 1000
	}
	return nil
}

// log2Quantile estimates the q-quantile of a histogram whose bucket b holds
// values in (2^(b-1), 2^b] (bucket 0: up to 1), interpolating linearly within
// the bucket and clamping to the observed [lo, hi].
func log2Quantile(buckets []float64, total, q, lo, hi float64) float64 {
	rank := q * total
	cum := 0.0
	for b, c := range buckets {
		if c == 0 || cum+c < rank {
			cum += c
			continue
		}
		left, right := 0.0, 1.0
		if b > 0 {
			left, right = math.Ldexp(1, b-1), math.Ldexp(1, b)
		}
		v := left + (right-left)*(rank-cum)/c
		return math.Min(math.Max(v, lo), hi)
	}
	return hi
}
