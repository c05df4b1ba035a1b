package observe

import (
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"strings"

	"temper.codes/temper-train/internal/atomicfile"
)

// Converted is what Convert wrote.
type Converted struct {
	Events int64 // events written
	Bytes  int64 // size of the file written
}

// Convert reads the trace in (any format Open reads) and writes it to out
// as a Perfetto trace, gzip-compressed when out ends in ".gz". out is
// written whole or not at all.
func Convert(in, out string) (Converted, error) {
	var c Converted
	r, err := Open(in)
	if err != nil {
		return c, err
	}
	defer r.Close()
	err = atomicfile.Write(out, 0o644, func(f io.Writer) error {
		var zw *gzip.Writer
		if strings.HasSuffix(out, ".gz") {
			zw = gzip.NewWriter(f)
			f = zw
		}
		// The reader learns the kernel release from the trace itself, which
		// for a Perfetto input comes before its events.
		var w *PerfettoWriter
		err := ForEach(r, func(ev *Event) error {
			if w == nil {
				w = NewPerfettoWriter(f, r.Info())
			}
			if err := w.Write(ev); err != nil {
				return fmt.Errorf("%s: %w", out, err)
			}
			c.Events++
			return nil
		})
		if err != nil {
			return err
		}
		if w == nil { // a trace without events: still a valid one
			w = NewPerfettoWriter(f, r.Info())
		}
		if err := w.Close(); err != nil {
			return fmt.Errorf("%s: %w", out, err)
		}
		if zw != nil {
			return zw.Close()
		}
		return nil
	})
	if err != nil {
		return c, err
	}
	st, err := os.Stat(out)
	if err != nil {
		return c, err
	}
	c.Bytes = st.Size()
	return c, nil
}
