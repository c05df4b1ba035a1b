package analyze

import (
	"math/rand/v2"
	"testing"

	"temper.codes/temper-train/observe"
)

// edgeCounts must count exactly what a map[wakeKey]int64 counts, for keys
// that pack into its word and for those that do not.
func TestEdgeCountsMatchMap(t *testing.T) {
	tests := []struct {
		name    string
		wakings int
		keys    func(r *rand.Rand) wakeKey
	}{
		{"few pairs", 10_000, func(r *rand.Rand) wakeKey {
			return wakeKey{waker: r.Int32N(5), wakee: 1 + r.Int32N(5), irq: observe.IRQContext(r.IntN(3)), fromD: r.IntN(2) == 0}
		}},
		{"many pairs, table grows", 200_000, func(r *rand.Rand) wakeKey {
			return wakeKey{waker: r.Int32N(3000), wakee: 1 + r.Int32N(3000), irq: observe.IRQContext(r.IntN(3)), fromD: r.IntN(2) == 0}
		}},
		{"largest packable UTIDs", 1000, func(r *rand.Rand) wakeKey {
			return wakeKey{waker: 1<<31 - 1 - r.Int32N(2), wakee: 1<<29 - 1 - r.Int32N(2), irq: observe.IRQHard, fromD: true}
		}},
		{"UTIDs that do not pack", 1000, func(r *rand.Rand) wakeKey {
			return wakeKey{waker: r.Int32N(3), wakee: 1<<29 + r.Int32N(3), irq: observe.IRQContext(r.IntN(3))}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			want := map[wakeKey]int64{}
			got := map[wakeKey]int64{}
			var e edgeCounts
			for range tc.wakings {
				k := tc.keys(r)
				want[k]++
				e.add(k, got)
			}
			e.flush(got)
			if len(got) != len(want) {
				t.Fatalf("%d pairs, want %d", len(got), len(want))
			}
			for k, n := range want {
				if got[k] != n {
					t.Fatalf("%+v: %d wakings, want %d", k, got[k], n)
				}
			}
			if e.used != 0 || e.keys != nil {
				t.Fatal("flush left counts behind")
			}
		})
	}
}
