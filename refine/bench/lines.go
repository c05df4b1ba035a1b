package bench

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// line is one line of a tool's output with its 1-based number.
type line struct {
	n    int
	text string
}

// splitLines splits output into lines, dropping a trailing '\r' of each, so
// that the parsers see what a terminal would show last on the line.
func splitLines(b []byte) []line {
	var out []line
	n := 0
	for len(b) > 0 {
		n++
		var l []byte
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			l, b = b[:i], b[i+1:]
		} else {
			l, b = b, nil
		}
		l = bytes.TrimSuffix(l, []byte("\r"))
		out = append(out, line{n, string(l)})
	}
	return out
}

// endLine is the number a ParseError gives to output that ends too early.
func endLine(ls []line) int {
	if len(ls) == 0 {
		return 1
	}
	return ls[len(ls)-1].n + 1
}

// parseNumber parses a finite, non-negative float: every figure the tools
// print is a count, a rate or a duration.
func parseNumber(s string) (float64, bool) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, false
	}
	return v, true
}

// notFigure is the message for a figure s that parseNumber refused: one of
// its own when s is a negative number (a tool printing one is broken, and
// saying "not a number" would hide that), else msg.
func notFigure(s, msg string) string {
	if v, err := strconv.ParseFloat(s, 64); err == nil && v < 0 {
		return negativeMsg(s)
	}
	return msg
}

// negativeMsg says that s, a negative figure, cannot be one.
func negativeMsg(s string) string {
	return fmt.Sprintf("%s is negative: a latency, rate, count or error count never is", s)
}

// fieldsAfter returns the fields of text after the prefix, and whether the
// (space-trimmed) text starts with it.
func fieldsAfter(text, prefix string) ([]string, bool) {
	t := strings.TrimSpace(text)
	if !strings.HasPrefix(t, prefix) {
		return nil, false
	}
	return strings.Fields(t[len(prefix):]), true
}

// percentiles are the quantiles every latency sample or histogram is
// summarised by, with their canonical names.
var percentiles = []struct {
	q    float64
	name string
}{{0.50, "p50_ms"}, {0.90, "p90_ms"}, {0.99, "p99_ms"}, {0.999, "p999_ms"}}

// summarize adds the canonical latency metrics of sorted samples, in
// milliseconds, to m. Quantiles are nearest-rank: the smallest sample with at
// least q of the samples at or below it, so every figure is a latency that was
// measured.
func summarize(m map[string]float64, sortedMs []float64) {
	n := len(sortedMs)
	if n == 0 {
		return
	}
	sum := 0.0
	for _, v := range sortedMs {
		sum += v
	}
	m["mean_ms"] = sum / float64(n)
	m["max_ms"] = sortedMs[n-1]
	for _, p := range percentiles {
		i := int(math.Ceil(p.q*float64(n))) - 1
		m[p.name] = sortedMs[max(0, min(i, n-1))]
	}
}
