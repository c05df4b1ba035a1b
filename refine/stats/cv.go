package stats

import "gonum.org/v1/gonum/stat"

// CV is the coefficient of variation (sample standard deviation over the
// mean) of x: the run-to-run noise an A/A calibration measures. It is 0
// for fewer than two values.
func CV(x []float64) float64 {
	if len(x) < 2 {
		return 0
	}
	mean, sd := stat.MeanStdDev(x, nil)
	if mean == 0 {
		return 0
	}
	if mean < 0 {
		mean = -mean
	}
	return sd / mean
}
