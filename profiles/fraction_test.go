package profiles

import "testing"

func TestCPUFractionFor(t *testing.T) {
	cases := []struct {
		n, request, maxBP int
		want              int
		ok                bool
	}{
		{2, 2250, 10000, 8500, true},   // the seed: 0.85, not 0.9
		{3, 2250, 10000, 10000, true},  // ceil(2.25) = 3
		{1, 2250, 10000, 4000, true},   // 0.4 × 2.25 = 0.9
		{2, 1000, 10000, 0, false},     // one CPU cannot make two cores
		{1, 2000, 10000, 5000, true},   // 0.5 × 2 = 1 exactly
		{1, 2000, 3000, 3000, true},    // what is left of the request bounds it
		{40, 40500, 10000, 9800, true}, // narrow window (0.963, 0.988]: steps of 0.01
		{2, 2250, 4000, 0, false},      // 0.4 left: ceil(0.4 × 2.25) = 1
		{0, 2250, 10000, 0, false},     // no cores: no fraction
		{1, 1000, 20000, 10000, true},  // a bound above 1 is 1
	}
	for _, c := range cases {
		bp, _, ok := CPUFractionFor(c.n, c.request, c.maxBP)
		if bp != c.want || ok != c.ok {
			t.Errorf("CPUFractionFor(%d, %dm, %d) = %d %v, want %d %v", c.n, c.request, c.maxBP, bp, ok, c.want, c.ok)
		}
		if ok && ExclusiveCoresFor(float64(bp)/10000, c.request) != c.n {
			t.Errorf("CPUFractionFor(%d, %dm): %d does not give %d cores", c.n, c.request, bp, c.n)
		}
	}
}
