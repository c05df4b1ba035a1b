package observe

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
)

// Reader streams a trace's events in timestamp order.
type Reader interface {
	// Next fills ev with the next event. It returns io.EOF after the last one and
	// a *FormatError when the input is damaged.
	Next(ev *Event) error
	// Info describes the recording as far as the trace has said so far.
	Info() TraceInfo
	// Stats counts what was read, lost and skipped so far.
	Stats() ReadStats
	// Close releases the underlying file.
	Close() error
}

// batchReader is a Reader that hands out many events per call, saving a
// call per event (PerfettoReader does). nextBatch fills evs from the front and
// returns how many it filled: at least one, with a nil error, or none with
// the error that ends the trace (io.EOF at its end), as Next would.
type batchReader interface {
	nextBatch(evs []Event) (int, error)
}

// readBatch reads into evs as batchReader.nextBatch does: a batch from a
// batchReader, one event from any other Reader.
func readBatch(r Reader, evs []Event) (int, error) {
	if br, ok := r.(batchReader); ok {
		return br.nextBatch(evs)
	}
	if err := r.Next(&evs[0]); err != nil {
		return 0, err
	}
	return 1, nil
}

// TraceInfo describes a recording.
type TraceInfo struct {
	Format        string // FormatPerfetto or FormatFtraceText
	Gzip          bool   // the file was gzip-compressed
	Sysname       string // uname -s of the traced machine, when recorded
	KernelRelease string // uname -r
	KernelVersion string // uname -v
	Machine       string // uname -m
	NumCPUs       int    // 0 when not recorded
	// Filtered says the recorder kept only the switches that involve its
	// targets (observe --filter-switches): a CPU's switches do not chain, and
	// other tasks' states are incomplete. Perfetto traces carry it as the
	// trace attribute temper_train.switches = "filtered".
	Filtered bool
}

// Trace formats.
const (
	FormatPerfetto    = "perfetto"
	FormatFtraceText  = "ftrace-text"
	maxPacketBytes    = 64 << 20
	defaultSortWindow = int64(1e9)
)

// ReadStats counts what a reader saw besides the events it returned.
type ReadStats struct {
	Events int64 // events returned by Next
	// LostEvents counts events the recorder dropped, per CPU, where the trace
	// says how many; LostGaps counts drops of unknown size (Perfetto's
	// lost_events flag on a bundle).
	LostEvents map[int32]int64
	LostGaps   map[int32]int64
	// Skipped counts records that were read but carry nothing the model uses,
	// by event or packet name.
	Skipped map[string]int64
	// Cropped counts events dropped because they precede the point from which
	// every CPU's data is complete (as trace_processor crops).
	Cropped int64
	// OutOfOrder counts events returned behind an event already returned.
	OutOfOrder int64
	// NoCPUBundles counts Perfetto ftrace bundles without a cpu field and
	// NoCPUEvents the events in them: skipped, as trace_processor skips them
	// (it counts ftrace_bundle_tokenizer_errors), not read as CPU 0.
	NoCPUBundles, NoCPUEvents int64
}

func (s *ReadStats) skip(name string) {
	if s.Skipped == nil {
		s.Skipped = map[string]int64{}
	}
	s.Skipped[name]++
}

// TotalLost sums LostEvents over CPUs.
func (s *ReadStats) TotalLost() (events, gaps int64) {
	for _, n := range s.LostEvents {
		events += n
	}
	for _, n := range s.LostGaps {
		gaps += n
	}
	return events, gaps
}

// Open opens a trace file of any supported format, gzip-compressed or not.
func Open(path string) (Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	r, err := NewReader(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &fileReader{Reader: r, f: f}, nil
}

type fileReader struct {
	Reader
	f *os.File
}

func (r *fileReader) Close() error { return r.f.Close() }

// nextBatch implements batchReader for whichever Reader the file holds.
func (r *fileReader) nextBatch(evs []Event) (int, error) { return readBatch(r.Reader, evs) }

// NewReader detects the format of r (gzip, Perfetto protobuf or ftrace text)
// and returns a Reader for it. name is used in error messages.
func NewReader(r io.Reader, name string) (Reader, error) {
	br := bufio.NewReaderSize(r, 256<<10)
	head, err := br.Peek(2)
	if len(head) == 0 {
		if err == nil || errors.Is(err, io.EOF) {
			return nil, &FormatError{File: name, Offset: 0, Err: fmt.Errorf("empty file: %w", ErrEmpty)}
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	gz := false
	if len(head) == 2 && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, &FormatError{File: name, Offset: 0, Err: fmt.Errorf("gzip header: %v: %w", err, ErrCorrupt)}
		}
		br = bufio.NewReaderSize(zr, 256<<10)
		gz = true
	}
	sniff, peekErr := br.Peek(4096)
	var rd Reader
	switch sniffFormat(sniff) {
	case FormatPerfetto:
		rd = newPerfettoReader(br, name)
	case FormatFtraceText:
		rd = newTextReader(br, name)
	default:
		if peekErr != nil && !errors.Is(peekErr, io.EOF) && !errors.Is(peekErr, bufio.ErrBufferFull) {
			sentinel := ErrCorrupt
			if errors.Is(peekErr, io.ErrUnexpectedEOF) {
				sentinel = ErrTruncated
			}
			return nil, &FormatError{File: name, Offset: int64(len(sniff)), Err: fmt.Errorf("decompress: %v: %w", peekErr, sentinel)}
		}
		return nil, &FormatError{File: name, Offset: 0, Err: fmt.Errorf("%w (expected a .pftrace/.perfetto-trace or /sys/kernel/tracing/trace text, optionally gzipped)", ErrUnknownFormat)}
	}
	setGzip(rd, gz)
	return rd, nil
}

func setGzip(r Reader, gz bool) {
	switch r := r.(type) {
	case *PerfettoReader:
		r.info.Gzip = gz
	case *TextReader:
		r.info.Gzip = gz
	}
}

// sniffFormat guesses a format from the first bytes of a stream. A Perfetto
// trace is a sequence of field-1 length-delimited records (first byte 0x0a
// followed by a varint length) and holds binary bytes early on; ftrace text is
// printable.
func sniffFormat(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	binary := bytes.ContainsFunc(b, func(r rune) bool {
		return r == 0 || r == 0xfffd || (r < 0x20 && r != '\n' && r != '\r' && r != '\t')
	})
	if !binary && looksLikeFtraceText(b) {
		return FormatFtraceText
	}
	if b[0] == 0x0a && (binary || len(b) < 2) {
		return FormatPerfetto
	}
	return ""
}

// ForEach calls fn for every event r returns, in order, until the end of the
// trace (returning nil), a read error, or an error from fn. The event is
// reused between calls: copy what must outlive the call.
func ForEach(r Reader, fn func(*Event) error) error {
	evs := make([]Event, inlineLen)
	for {
		got, end, err := fill(r, evs)
		for i := range got {
			if err := fn(&got[i]); err != nil {
				return err
			}
		}
		if end {
			return err
		}
	}
}
