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

// TestReadAhead checks that every event arrives once, in order, in line and
// read ahead on another goroutine, at batch boundaries and between them, and
// that a read error comes back only after the events before it.
func TestReadAhead(t *testing.T) {
	broken := errors.New("damaged")
	for _, procs := range []int{1, 2} {
		for _, n := range []int{0, 1, 255, 256, 4095, 4096, 4097, 3*4096 + 17, stintEvents + 3*probeEvents + 5, 2*stintEvents + 5*probeEvents + 4096} {
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

// TestReadAheadStopsEarly checks that a stint ahead that runs slower than its
// limit hands r back early, and that reading then goes on in line with no
// event lost or repeated.
func TestReadAheadStopsEarly(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	n := stintEvents + 3*aheadLen
	var got int64
	ra := readAhead{r: &countingReader{n: n, err: io.EOF}, inline: make([]Event, inlineLen), fn: func(evs []Event) {
		for i := range evs {
			got++
			if evs[i].TS != got {
				t.Fatalf("event %d has TS %d", got, evs[i].TS)
			}
		}
	}}
	// No stint can read an event in a picosecond: it stops after its first
	// probeEvents (plus the batches already read ahead).
	if _, done, err := ra.stintAhead(stintEvents, 1e-3); done || err != nil {
		t.Fatalf("stint ahead: done %v, err %v", done, err)
	}
	if got >= int64(stintEvents) || got < probeEvents {
		t.Errorf("the stint ahead read %d events; it should have stopped after %d (+ %d in flight)", got, probeEvents, inFlight*aheadLen)
	}
	for {
		if _, done, err := ra.stintInline(1 << 30); done {
			if err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if got != int64(n) {
		t.Errorf("read %d events, want %d", got, n)
	}
}
