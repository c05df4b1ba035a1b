package analyze

import (
	"math"
	"testing"
)

func TestSketchExactSmall(t *testing.T) {
	var s Sketch
	for _, v := range []int64{10, 1, 9, 2, 8, 3, 7, 4, 6, 5} {
		s.Add(v)
	}
	cases := []struct {
		q    float64
		want int64
	}{{0.1, 1}, {0.5, 5}, {0.9, 9}, {0.91, 10}, {0.99, 10}, {1, 10}}
	for _, c := range cases {
		if got := s.Quantile(c.q); got != c.want {
			t.Errorf("Quantile(%v) = %d, want %d", c.q, got, c.want)
		}
	}
	if !s.Exact() || s.Count() != 10 || s.Mean() != 5.5 || s.Max() != 10 {
		t.Errorf("exact %v count %d mean %v max %d", s.Exact(), s.Count(), s.Mean(), s.Max())
	}
	// Time-weighted median: total 55, cumulative over sorted values reaches
	// 27.5 at 7 (1+...+7 = 28).
	if got := s.WeightedQuantile(0.5); got != 7 {
		t.Errorf("WeightedQuantile(0.5) = %d, want 7", got)
	}
}

func TestSketchEmpty(t *testing.T) {
	var s Sketch
	if s.Quantile(0.5) != 0 || s.WeightedQuantile(0.5) != 0 || s.Mean() != 0 || s.Count() != 0 {
		t.Error("empty sketch should report zeros")
	}
}

// TestSketchFolded checks the bucketed phase: within ±2.2 % of the exact
// nearest-rank quantile, clamped to the observed range, and memory bounded
// by the value range, not the sample count.
func TestSketchFolded(t *testing.T) {
	var s Sketch
	const n = 100000
	for i := int64(1); i <= n; i++ {
		s.Add(i * 1000) // 1 µs .. 100 ms
	}
	if s.Exact() {
		t.Fatal("sketch should have folded")
	}
	for _, q := range []float64{0.01, 0.5, 0.9, 0.99} {
		want := float64(int64(math.Ceil(q*n)) * 1000)
		got := float64(s.Quantile(q))
		if math.Abs(got-want)/want > 0.022 {
			t.Errorf("Quantile(%v) = %v, want %v ± 2.2%%", q, got, want)
		}
	}
	if got := s.Quantile(1); got != n*1000 {
		t.Errorf("Quantile(1) = %d, want the max %d", got, n*1000)
	}
	// Weighted median of 1..n: √0.5·n.
	want := math.Sqrt(0.5) * n * 1000
	if got := float64(s.WeightedQuantile(0.5)); math.Abs(got-want)/want > 0.03 {
		t.Errorf("WeightedQuantile(0.5) = %v, want %v ± 3%%", got, want)
	}
	// 1 µs .. 100 ms is 17 octaves: at most 17·16+1 buckets.
	if len(s.counts) > 17*sketchSub+1 {
		t.Errorf("%d buckets for 17 octaves", len(s.counts))
	}
	if s.Mean() != float64(n+1)/2*1000 {
		t.Errorf("mean %v is not exact", s.Mean())
	}
}

// TestSketchGrowsDown covers buckets added below the first one.
func TestSketchGrowsDown(t *testing.T) {
	var s Sketch
	for i := 0; i < sketchExact+10; i++ {
		s.Add(1e6)
	}
	s.Add(10)
	if p := s.Quantile(0.5); s.Quantile(0.001) != 10 || math.Abs(float64(p)-1e6)/1e6 > 0.022 {
		t.Errorf("p0.1 %d, p50 %d; want 10 and 1 ms ± 2.2%%", s.Quantile(0.001), p)
	}
}

// TestBucketOf checks the logarithm-free bucket index against the formula.
func TestBucketOf(t *testing.T) {
	for v := int64(1); v < 1<<40; v = v*3/2 + 1 {
		for _, x := range []int64{v - 1, v, v + 1} {
			if x < 1 {
				continue
			}
			want := int(math.Floor(math.Log2(float64(x)) * sketchSub))
			if got := bucketOf(x); got != want {
				// Accept disagreement only where log2 itself rounds at a boundary.
				if math.Abs(math.Log2(float64(x))*sketchSub-math.Round(math.Log2(float64(x))*sketchSub)) > 1e-9 {
					t.Errorf("bucketOf(%d) = %d, want %d", x, got, want)
				}
			}
		}
	}
}
