package cfs

import "math"

// prioToWeight is the kernel's sched_prio_to_weight table
// (kernel/sched/core.c): the CFS load weight of nice -20 … 19. Each step is
// about 1.25×, so one nice level is about 10% CPU between two busy threads.
var prioToWeight = [40]float64{
	/* -20 */ 88761, 71755, 56483, 46273, 36291,
	/* -15 */ 29154, 23254, 18705, 14949, 11916,
	/* -10 */ 9548, 7620, 6100, 4904, 3906,
	/*  -5 */ 3121, 2501, 1991, 1586, 1277,
	/*   0 */ 1024, 820, 655, 526, 423,
	/*   5 */ 335, 272, 215, 172, 137,
	/*  10 */ 110, 87, 70, 56, 45,
	/*  15 */ 36, 29, 23, 18, 15,
}

// NiceForWeight maps a profile weight (sched_ext style: 1..10000, 100 = a
// default thread) onto the nice level whose CFS weight is nearest to
// 1024·w/100, nearest on the table's geometric scale, clamped to -20..19.
// Weight 0 is no weight: the backend sets no nice for it (treatments), and
// NiceForWeight gives nice 0, a default thread's.
func NiceForWeight(w int) int {
	if w <= 0 {
		return 0
	}
	target := math.Log(1024 * float64(w) / 100)
	best, bestDist := 0, math.Inf(1)
	for i, kw := range prioToWeight {
		if d := math.Abs(math.Log(kw) - target); d < bestDist {
			best, bestDist = i, d
		}
	}
	return best - 20
}
