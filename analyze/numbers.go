package analyze

// Small numeric and formatting helpers shared by the analysis and its
// outputs.

import (
	"fmt"
	"math"
	"strings"
)

// rate is n per second over a window of seconds; 0 for an empty window.
func rate(n int64, window float64) float64 {
	if window <= 0 {
		return 0
	}
	return float64(n) / window
}

// ramp maps x linearly from 0 at lo to 1 at hi, clamped.
func ramp(x, lo, hi float64) float64 {
	switch {
	case x <= lo:
		return 0
	case x >= hi:
		return 1
	}
	return (x - lo) / (hi - lo)
}

// round3 rounds to three decimals, so JSON stays readable and the last bits
// of float arithmetic cannot show in it.
func round3(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return math.Round(x*1000) / 1000
}

// round4 rounds to four decimals (CPU shares: 0.01 % resolution).
func round4(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return math.Round(x*1e4) / 1e4
}

// fmtDur prints nanoseconds compactly: 950ns, 31µs, 2.1ms, 1.50s.
func fmtDur(ns int64) string {
	switch {
	case ns < 1000:
		return fmt.Sprintf("%dns", ns)
	case ns < 1e6:
		return fmt.Sprintf("%.0fµs", float64(ns)/1e3)
	case ns < 1e9:
		return fmt.Sprintf("%.1fms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%.2fs", float64(ns)/1e9)
}

// joinLimited joins at most limit items and says how many more there were.
func joinLimited(s []string, limit int) string {
	if len(s) > limit {
		return fmt.Sprintf("%s, ... (%d more)", joinStrings(s[:limit]), len(s)-limit)
	}
	return joinStrings(s)
}

func joinStrings(s []string) string { return strings.Join(s, ", ") }
