package observe

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"
)

// countingReader returns n switch events with TS 1..n, then err (io.EOF for a
// clean end).
type countingReader struct {
	n, i int
	err  error
}

func (r *countingReader) Next(ev *Event) error {
	if r.i >= r.n {
		return r.err
	}
	r.i++
	*ev = Event{TS: int64(r.i), Kind: KindSwitch, CPU: 0, Tid: int32(r.i)}
	return nil
}
func (r *countingReader) Info() TraceInfo  { return TraceInfo{} }
func (r *countingReader) Stats() ReadStats { return ReadStats{} }
func (r *countingReader) Close() error     { return nil }

// TestReadAhead checks that every event arrives once, in order, in line
// (GOMAXPROCS=1) and read ahead on another goroutine, at batch boundaries and
// between them, with every batch in flight and beyond, and that a read error
// comes back only after the events before it.
func TestReadAhead(t *testing.T) {
	broken := errors.New("damaged")
	for _, procs := range []int{1, 2} {
		for _, n := range []int{0, 1, inlineLen - 1, inlineLen, aheadLen - 1, aheadLen, aheadLen + 1, 3*aheadLen + 17, inFlight * aheadLen, 5*inFlight*aheadLen + 3} {
			for _, end := range []error{io.EOF, broken} {
				t.Run(fmt.Sprintf("procs=%d/n=%d/%v", procs, n, end), func(t *testing.T) {
					defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
					var got int64
					err := ReadAhead(&countingReader{n: n, err: end}, func(evs []Event) {
						for i := range evs {
							got++
							if evs[i].TS != got {
								t.Fatalf("event %d has TS %d", got, evs[i].TS)
							}
						}
					})
					if got != int64(n) {
						t.Errorf("fn saw %d events, want %d", got, n)
					}
					if end == io.EOF && err != nil {
						t.Errorf("clean end: err = %v", err)
					}
					if end == broken && !errors.Is(err, broken) {
						t.Errorf("err = %v, want %v", err, broken)
					}
				})
			}
		}
	}
}
