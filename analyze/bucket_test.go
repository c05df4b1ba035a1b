package analyze

import (
	"math"
	"math/rand/v2"
	"testing"
)

// bucketBySearch is bucketOf as first written: a binary search of the
// sub-bucket bounds. The table lookup must agree with it everywhere.
func bucketBySearch(v int64) int {
	if v < 1 {
		v = 1
	}
	bits := math.Float64bits(float64(v))
	exp := int(bits>>52) - 1023
	mant := bits & (1<<52 - 1)
	lo, hi := 0, sketchSub-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if mantBounds[mid] <= mant {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return exp*sketchSub + lo
}

func TestBucketOfMatchesSearch(t *testing.T) {
	var values []int64
	// Every integer up to 2^16, where buckets are a few values wide.
	for v := int64(-2); v <= 1<<16; v++ {
		values = append(values, v)
	}
	// Both sides of every sub-bucket bound in every octave up to 2^62.
	for exp := 16; exp < 62; exp++ {
		for k := 0; k < sketchSub; k++ {
			b := int64(math.Ldexp(1+float64(mantBounds[k])/(1<<52), exp))
			for d := int64(-2); d <= 2; d++ {
				values = append(values, b+d)
			}
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 200_000 {
		values = append(values, r.Int64N(1<<uint(1+r.IntN(62))))
	}
	values = append(values, math.MaxInt64)
	for _, v := range values {
		if got, want := bucketOf(v), bucketBySearch(v); got != want {
			t.Fatalf("bucketOf(%d) = %d, want %d", v, got, want)
		}
	}
}
