package observe

import (
	"errors"
	"io"
	"runtime"
)

// ReadAhead calls fn with every event of r, in order and in batches. With
// more than one CPU (GOMAXPROCS > 1) it reads ahead: a goroutine of its own
// decodes the batches that follow while fn works on one, so decoding and fn
// run on two CPUs at once. With one CPU it reads in line. Which way it reads
// depends on GOMAXPROCS only, never on timing.
//
// It returns nil at the end of the trace, or r's error once fn has seen every
// event before it. fn must not keep the slice: its memory is reused for later
// batches. r must not be used by anything else until ReadAhead returns; then
// r.Info and r.Stats are complete.
func ReadAhead(r Reader, fn func([]Event)) error {
	if runtime.GOMAXPROCS(0) < 2 {
		return readInline(r, fn)
	}
	free, full := make(chan *batch, inFlight), make(chan *batch, inFlight)
	for range inFlight {
		free <- &batch{evs: make([]Event, aheadLen)}
	}
	// fn cannot stop the reading early, so the goroutine ends with the
	// trace, having handed over its last batch.
	go func() {
		for {
			b := <-free
			b.evs, b.end, b.err = fill(r, b.evs[:aheadLen])
			full <- b
			if b.end {
				return
			}
		}
	}()
	for {
		b := <-full
		fn(b.evs)
		if b.end {
			return b.err
		}
		free <- b
	}
}

const (
	aheadLen  = 4096 // events a batch read ahead holds: ~0.5 MiB, as a hand-over costs microseconds
	inFlight  = 4    // batches read ahead at most
	inlineLen = 256  // events a batch read in line holds: 32 KiB, so it stays in L1
)

// batch is one batch read ahead; end says the trace ended after its events,
// err how (nil for a clean end).
type batch struct {
	evs []Event
	err error
	end bool
}

// readInline calls fn with every event of r, read on the caller's goroutine.
func readInline(r Reader, fn func([]Event)) error {
	evs := make([]Event, inlineLen)
	for {
		got, end, err := fill(r, evs)
		fn(got)
		if end {
			return err
		}
	}
}

// fill reads events into evs; it returns those read and, at the end of the
// trace, a nil error (io.EOF) or the read error.
func fill(r Reader, evs []Event) ([]Event, bool, error) {
	n := 0
	for n < len(evs) {
		got, err := readBatch(r, evs[n:])
		n += got
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return evs[:n], true, err
		}
	}
	return evs, false, nil
}
