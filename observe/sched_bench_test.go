package observe

import (
	"fmt"
	"testing"
)

// BenchmarkSched measures thread-state reconstruction alone, on events
// already decoded: what observe.Sched adds to every analysis on top of the
// decoder. The callbacks only count, as a cheap consumer would.
func BenchmarkSched(b *testing.B) {
	for _, threads := range []int{300, 3000} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			var evs []Event
			synthEvents(1_000_000, 8, threads, func(ev *Event) { evs = append(evs, *ev) })
			b.ReportAllocs()
			var rows int64
			for b.Loop() {
				s := NewSched(NewThreads())
				s.Rows = RowFuncs{
					OnSlice: func(r SliceRow) { rows++ },
					OnState: func(r StateRow) { rows++ },
				}
				for i := range evs {
					s.Add(&evs[i])
				}
				s.Finish()
			}
			if rows == 0 {
				b.Fatal("no rows")
			}
			perOp := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(float64(len(evs))/perOp, "events/s")
			b.ReportMetric(perOp*1e9/float64(len(evs)), "ns/event")
		})
	}
}
