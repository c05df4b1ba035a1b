package analyze

import (
	"math"
	"slices"
)

// Sketch is a fixed-size streaming quantile estimator for positive durations
// (nanoseconds). It keeps the first sketchExact samples exactly, so small
// samples — most threads' — give exact nearest-rank quantiles; beyond that it
// folds everything into log-spaced buckets, sketchSub per power of two, so a
// quantile is within ±2.2 % of the true sample value (half a bucket's width,
// 2^(1/16)). Memory is bounded by the range of values seen, never by their
// number: 1 ns to 100 s spans at most 37·16 buckets.
//
// Quantiles use the nearest-rank definition: Quantile(q) is the smallest
// sample v such that at least ⌈q·n⌉ samples are ≤ v.
type Sketch struct {
	n      int64
	sum    float64
	min    int64
	max    int64
	base   int      // bucket index of counts[0]
	counts []uint32 // bucket counts once folded
	folded bool
	// exact holds the first samples, while n ≤ sketchExact. It comes last
	// so that the fields every Add touches share a cache line.
	exact [sketchExact]int64
}

const (
	sketchExact = 32
	sketchSub   = 16 // buckets per power of two
)

// mantBounds[k] is the float64 mantissa (52 bits) at which sub-bucket k of
// an octave begins: ⌈(2^(k/sketchSub) − 1) · 2^52⌉.
var mantBounds = func() (b [sketchSub]uint64) {
	for k := range b {
		b[k] = uint64(math.Ceil((math.Exp2(float64(k)/sketchSub) - 1) * (1 << 52)))
	}
	return b
}()

// mantCells[c] is the sub-bucket in which mantissa cell c (the top
// mantCellBits bits of the mantissa) begins. A cell is narrower than any
// sub-bucket (1/256 of an octave against at least 2^(1/16) − 1 ≈ 0.044), so
// at most one sub-bucket boundary falls inside it.
var mantCells = func() (c [1 << mantCellBits]uint8) {
	for i := range c {
		m := uint64(i) << (52 - mantCellBits)
		for k := sketchSub - 1; k >= 0; k-- {
			if mantBounds[k] <= m {
				c[i] = uint8(k)
				break
			}
		}
	}
	return c
}()

const mantCellBits = 8

// bucketOf returns the bucket index of v ≥ 1: ⌊log2(v) · sketchSub⌋,
// computed from the float's exponent and mantissa without a logarithm: the
// mantissa's top bits give the sub-bucket, or the one before a boundary
// inside their cell (every run and wake latency goes through here).
func bucketOf(v int64) int {
	if v < 1 {
		v = 1
	}
	bits := math.Float64bits(float64(v))
	exp := int(bits>>52) - 1023
	mant := bits & (1<<52 - 1)
	k := int(mantCells[mant>>(52-mantCellBits)])
	if k+1 < sketchSub && mantBounds[k+1] <= mant {
		k++
	}
	return exp*sketchSub + k
}

// bucketValue is the representative value of bucket b: the geometric middle
// of its bounds.
func bucketValue(b int) float64 {
	return math.Exp2((float64(b) + 0.5) / sketchSub)
}

// Add records one sample; values below 1 count as 1.
func (s *Sketch) Add(v int64) {
	if v < 1 {
		v = 1
	}
	if s.n == 0 || v < s.min {
		s.min = v
	}
	if v > s.max {
		s.max = v
	}
	s.sum += float64(v)
	if !s.folded && s.n < sketchExact {
		s.exact[s.n] = v
		s.n++
		return
	}
	if !s.folded {
		s.folded = true
		for _, e := range s.exact {
			s.count(bucketOf(e))
		}
	}
	// The common case, a bucket in range, is counted here rather than in a
	// call to count: it runs for every sample.
	b := bucketOf(v)
	if i := b - s.base; uint(i) < uint(len(s.counts)) {
		s.counts[i]++
	} else {
		s.count(b)
	}
	s.n++
}

// count counts one sample in bucket b, growing the bucket range either way.
func (s *Sketch) count(b int) {
	switch {
	case len(s.counts) == 0:
		s.base = b
		s.counts = append(s.counts, 0)
	case b < s.base:
		grow := s.base - b
		s.counts = append(make([]uint32, grow, grow+len(s.counts)), s.counts...)
		s.base = b
	case b >= s.base+len(s.counts):
		s.counts = append(s.counts, make([]uint32, b-s.base-len(s.counts)+1)...)
	}
	s.counts[b-s.base]++
}

// Count is the number of samples.
func (s *Sketch) Count() int64 { return s.n }

// Mean is the exact mean of the samples, 0 when there are none.
func (s *Sketch) Mean() float64 {
	if s.n == 0 {
		return 0
	}
	return s.sum / float64(s.n)
}

// Sum is the exact sum of the samples.
func (s *Sketch) Sum() float64 { return s.sum }

// Max is the largest sample, 0 when there are none.
func (s *Sketch) Max() int64 { return s.max }

// Exact reports whether quantiles are exact (no more than sketchExact samples).
func (s *Sketch) Exact() bool { return !s.folded }

// Quantile returns the nearest-rank q-quantile (0 < q ≤ 1), 0 without samples.
func (s *Sketch) Quantile(q float64) int64 {
	if s.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(s.n)))
	rank = min(max(rank, 1), s.n)
	if !s.folded {
		v := slices.Clone(s.exact[:s.n])
		slices.Sort(v)
		return v[rank-1]
	}
	var cum int64
	for i, c := range s.counts {
		cum += int64(c)
		if cum >= rank {
			return s.clamp(bucketValue(s.base + i))
		}
	}
	return s.max
}

// WeightedQuantile returns the value below which a fraction q of the samples'
// total (not their number) lies: for run lengths, the run length that half of
// the CPU time is spent in runs at least as long as (q = 0.5). Robust where
// many short runs hide that most time goes to long ones.
func (s *Sketch) WeightedQuantile(q float64) int64 {
	if s.n == 0 || s.sum <= 0 {
		return 0
	}
	target := q * s.sum
	if !s.folded {
		v := slices.Clone(s.exact[:s.n])
		slices.Sort(v)
		var cum float64
		for _, x := range v {
			cum += float64(x)
			if cum >= target {
				return x
			}
		}
		return v[len(v)-1]
	}
	// Bucket weights are count × representative value; scale the target to
	// their total so rounding in the representatives cannot overshoot.
	var total float64
	for i, c := range s.counts {
		total += float64(c) * bucketValue(s.base+i)
	}
	target = q * total
	var cum float64
	for i, c := range s.counts {
		cum += float64(c) * bucketValue(s.base+i)
		if cum >= target {
			return s.clamp(bucketValue(s.base + i))
		}
	}
	return s.max
}

// Bin is a number of samples at one value (nanoseconds).
type Bin struct {
	Value int64
	Count int64
}

// Bins returns the samples by increasing value: each distinct sample with
// its count while the sketch is exact, else each non-empty bucket's count
// at its representative value rounded into [min, max] — the value Quantile
// answers for that bucket, so the cumulative counts of the bins cross ⌈q·n⌉
// exactly at Quantile(q). Counts sum to Count.
func (s *Sketch) Bins() []Bin {
	var out []Bin
	if !s.folded {
		v := slices.Clone(s.exact[:s.n])
		slices.Sort(v)
		for _, x := range v {
			if n := len(out); n > 0 && out[n-1].Value == x {
				out[n-1].Count++
			} else {
				out = append(out, Bin{x, 1})
			}
		}
		return out
	}
	for i, c := range s.counts {
		if c == 0 {
			continue
		}
		v := s.clamp(bucketValue(s.base + i))
		if n := len(out); n > 0 && out[n-1].Value == v {
			out[n-1].Count += int64(c) // the lowest and highest buckets may clamp together
		} else {
			out = append(out, Bin{v, int64(c)})
		}
	}
	return out
}

// clamp rounds a bucket value into the observed [min, max].
func (s *Sketch) clamp(v float64) int64 {
	r := int64(math.Round(v))
	return min(max(r, s.min), s.max)
}
