package observe

import (
	"errors"
	"io"
	"runtime"
	"sync/atomic"
	"time"
)

// ReadAhead calls fn with every event of r, in order and in batches. With
// more than one CPU (GOMAXPROCS) it can read ahead: a goroutine of its own
// decodes the batches that follow while fn works, so decoding and fn run on
// two CPUs at once. It returns nil at the end of the trace, or r's error once
// fn has seen every event before it. fn must not keep the slice: its memory
// is reused for later batches. r must not be used by anything else until
// ReadAhead returns; then r.Info and r.Stats are complete.
//
// Reading ahead does not always pay: every event crosses from one CPU's cache
// to the other's, and a recycled batch back. On a 2-vCPU VM, analyzing make
// bench's 1.78 M-event trace took 67-81 ms read ahead against 119 ms in line
// in some hours, and ~150 ms read ahead in others (the same binary; profiled,
// the time went to writing events into batch memory the other CPU had just
// read; polling the channels instead of blocking did not change it). So
// ReadAhead times both ways on the trace itself: it reads 16 Ki events in line
// and 16 Ki ahead, keeps the faster for the next 1 Mi events (in line: 1 Mi
// the first time, twice as many each time reading ahead lost again), then
// times both again, and so on. Where reading ahead pays, the probes in line
// cost ~1%.
// A probe lasts about a millisecond, so a stint ahead keeps timing itself and
// ends early once 16 Ki of its events took longer than the last probe in line
// (a probe ahead that looked faster than it was cost up to 10% before). Time
// ahead is measured only once every batch in flight has gone round once: the
// first batches fill memory neither CPU touched lately, so a probe that
// counted them came out ~10% faster than reading ahead then ran (42 against
// 58 ns/event on one trace), and chose it where it lost.
func ReadAhead(r Reader, fn func([]Event)) error {
	ra := readAhead{r: r, fn: fn, inline: make([]Event, inlineLen)}
	if runtime.GOMAXPROCS(0) < 2 {
		for {
			if _, done, err := ra.stintInline(1 << 30); done {
				return err
			}
		}
	}
	// The trace's first events (process trees, every thread's first
	// appearance, cold caches) are slower to read and analyse whichever way:
	// they are not timed.
	if _, done, err := ra.stintInline(probeEvents); done {
		return err
	}
	// Each time reading ahead loses, in a probe or in the stint it won, the
	// next stint in line is twice as long: where the second CPU does not pay,
	// probing costs a few percent, and backing off makes that a few probes
	// per trace (measured at GOMAXPROCS=2 on make bench's long trace: 4%
	// slower than GOMAXPROCS=1 probing every stintEvents).
	stint := stintEvents
	for {
		// Time a stint each way, then run the faster for longer.
		tIn, done, err := ra.stintInline(probeEvents)
		if done {
			return err
		}
		tAhead, done, err := ra.stintAhead(warmEvents+probeEvents, 0)
		if done {
			return err
		}
		if tAhead < tIn {
			if tAhead, done, err = ra.stintAhead(stintEvents, tIn); done {
				return err
			}
			if tAhead < tIn {
				stint = stintEvents // reading ahead pays: probe at the usual rate
				continue
			}
		}
		// Reading ahead lost: a stint in line, longer each time.
		if _, done, err = ra.stintInline(stint); done {
			return err
		}
		stint = min(2*stint, maxStintEvents)
	}
}

const (
	aheadLen       = 4096                // events a batch read ahead holds: ~0.5 MiB, as a hand-over costs microseconds
	inFlight       = 4                   // batches read ahead at most
	inlineLen      = 256                 // events a batch read in line holds: 32 KiB, so it stays in L1
	probeEvents    = 4 * aheadLen        // events timed each way
	warmEvents     = inFlight * aheadLen // events read ahead before the timing starts: one round of every batch
	stintEvents    = 64 * probeEvents    // events read the faster way before timing both again
	maxStintEvents = 16 * stintEvents    // the longest stint in line, after reading ahead lost again and again
)

// readAhead is ReadAhead's state between stints.
type readAhead struct {
	r      Reader
	fn     func([]Event)
	inline []Event
	free   chan *batch // batches for the reading goroutine to fill; nil until the first stint ahead
	full   chan *batch
}

type batch struct {
	evs     []Event
	err     error
	end     bool // the trace ended (err says how)
	stopped bool // the reading goroutine stopped before this batch: it holds no events
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

// stintInline reads about n events on the caller's goroutine. It returns the
// time per event, and done with the trace's end error once the trace ended.
func (ra *readAhead) stintInline(n int) (float64, bool, error) {
	start := time.Now()
	seen := 0
	for seen < n {
		got, end, err := fill(ra.r, ra.inline)
		ra.fn(got)
		seen += len(got)
		if end {
			return 0, true, err
		}
	}
	return float64(time.Since(start)) / float64(seen), false, nil
}

// stintAhead reads about n events on a goroutine of its own, and stops it
// before returning (the caller may then read r itself). It returns the time
// per event after the first warmEvents (over all of them when it read no
// more). With limit > 0 (ns per event) it stops early once probeEvents of its
// events after the warm-up took longer than that.
func (ra *readAhead) stintAhead(n int, limit float64) (float64, bool, error) {
	if ra.free == nil {
		ra.free, ra.full = make(chan *batch, inFlight), make(chan *batch, inFlight+1)
		for range inFlight {
			ra.free <- &batch{evs: make([]Event, aheadLen)}
		}
	}
	var stop atomic.Bool
	go func() {
		for {
			if stop.Load() {
				ra.full <- &batch{stopped: true}
				return
			}
			b := <-ra.free
			b.evs, b.end, b.err = fill(ra.r, b.evs[:aheadLen])
			ra.full <- b
			if b.end {
				return
			}
		}
	}()
	seen := 0
	timedStart, timedSeen := time.Now(), 0 // the end of the warm-up (until then, the start)
	chunkStart, chunkSeen := timedStart, 0 // the chunk compared with limit
	for {
		b := <-ra.full
		if b.stopped {
			return float64(time.Since(timedStart)) / float64(max(seen-timedSeen, 1)), false, nil
		}
		ra.fn(b.evs)
		seen += len(b.evs)
		if b.end {
			return 0, true, b.err
		}
		ra.free <- b
		switch warm := timedSeen > 0; {
		case !warm && seen >= warmEvents:
			timedStart, timedSeen = time.Now(), seen
			chunkStart, chunkSeen = timedStart, seen
		case warm && limit > 0 && seen-chunkSeen >= probeEvents:
			now := time.Now()
			if float64(now.Sub(chunkStart))/float64(seen-chunkSeen) > limit {
				stop.Store(true) // slower than in line: use what is read, then stop
			}
			chunkStart, chunkSeen = now, seen
		}
		if seen >= n {
			// Use what is already read, then take r back.
			stop.Store(true)
		}
	}
}
