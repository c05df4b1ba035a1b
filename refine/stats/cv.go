package stats

import (
	"math"

	"gonum.org/v1/gonum/stat"
)

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

// Noise is the robust relative spread of x: 1.4826·MAD / |median|, which
// equals the CV for normal noise but is not inflated by the rare outlier
// run that a tail-latency benchmark produces. The rank tests refine
// decides with are as robust, so this is the noise that sizes their n. It
// is 0 for fewer than two values.
func Noise(x []float64) float64 {
	if len(x) < 2 {
		return 0
	}
	m := mid(x)
	if m == 0 {
		return 0
	}
	dev := make([]float64, len(x))
	for i, v := range x {
		dev[i] = math.Abs(v - m)
	}
	return 1.4826 * mid(dev) / math.Abs(m)
}

// mid is the sample median, the mean of the middle two for even n.
func mid(x []float64) float64 {
	s := sorted(x)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// MADSigma is the robust standard deviation of x, 1.4826·MAD around its
// median: the σ of normal noise, unmoved by the odd outlier. It is 0 for
// fewer than two values.
func MADSigma(x []float64) float64 {
	if len(x) < 2 {
		return 0
	}
	m := mid(x)
	dev := make([]float64, len(x))
	for i, v := range x {
		dev[i] = math.Abs(v - m)
	}
	return 1.4826 * mid(dev)
}
