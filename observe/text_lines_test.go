package observe

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// checkLines reads data line by line with a TextReader capped at maxLine
// bytes and checks every line against a plain split of data: the same bytes,
// or, for the first line over the cap, an error naming its line number, the
// cap and the byte offset where it starts.
func checkLines(t *testing.T, data []byte, maxLine, bufSize int) {
	t.Helper()
	r := newTextReader(bufio.NewReaderSize(bytes.NewReader(data), bufSize), "lines")
	r.maxLine = maxLine
	off := 0
	for n := 1; ; n++ {
		got, err := r.readLine()
		if off == len(data) {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("line %d: at the end got %q, %v; want io.EOF", n, got, err)
			}
			return
		}
		seg := data[off:]
		if i := bytes.IndexByte(seg, '\n'); i >= 0 {
			seg = seg[:i+1]
		}
		content := bytes.TrimSuffix(seg, []byte("\n"))
		if len(content) > maxLine {
			var fe *FormatError
			if !errors.As(err, &fe) || !errors.Is(err, ErrCorrupt) || fe.Line != n {
				t.Fatalf("line %d of %d bytes over a %d-byte cap: got %q, %v", n, len(content), maxLine, got, err)
			}
			want := fmt.Sprintf("lines:%d: line at byte %d exceeds the %d-byte line limit", n, off, maxLine)
			if msg := err.Error(); !strings.HasPrefix(msg, want) || strings.Contains(msg, "\n") {
				t.Fatalf("error %q, want it to start %q", msg, want)
			}
			return
		}
		if err != nil {
			t.Fatalf("line %d (%q): %v", n, content, err)
		}
		if want := bytes.TrimRight(content, "\r\n"); !bytes.Equal(got, want) {
			t.Fatalf("line %d: got %q, want %q", n, got, want)
		}
		off += len(seg)
	}
}

func TestTextReaderLineCap(t *testing.T) {
	long := strings.Repeat("x", 40)
	for _, tc := range []struct {
		name, data string
	}{
		{"empty", ""},
		{"short lines", "a\nbb\r\nccc\n"},
		{"last line without newline", "a\nbb"},
		{"line at the cap", long[:32] + "\nok\n"},
		{"line at the cap without newline", long[:32]},
		{"line over the cap", "ok\n" + long + "\nnever read\n"},
		{"line over the cap without newline", "ok\nok\n" + long},
		{"line over the cap by a carriage return", long[:32] + "\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, buf := range []int{16, 64} { // lines longer and shorter than bufio's buffer
				checkLines(t, []byte(tc.data), 32, buf)
			}
		})
	}
}

// TestTextReaderLineBomb: a huge line costs the cap, not the line. A 64 MiB
// line of zeros is refused after reading about MaxTextLine of it.
func TestTextReaderLineBomb(t *testing.T) {
	// Enough whole lines for the format sniffer's 4 KiB to see text only.
	head := "# tracer: nop\n" + strings.Repeat(strings.Split(fuzzTextSeed, "\n")[2]+"\n", 40)
	r, err := NewReader(io.MultiReader(strings.NewReader(head), io.LimitReader(zeros{}, 64<<20)), "bomb")
	if err != nil {
		t.Fatal(err)
	}
	var ev Event
	for err == nil {
		err = r.Next(&ev)
	}
	want := fmt.Sprintf("bomb:42: line at byte %d exceeds the %d-byte line limit: corrupt", len(head), MaxTextLine)
	if err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	if tr := r.(*TextReader); tr.off > int64(len(head))+MaxTextLine+256<<10 {
		t.Fatalf("read %d bytes to refuse the line; the cap is %d", tr.off, MaxTextLine)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// FuzzTextReaderLines checks the text reader's line splitting with a small
// cap and a small buffer, so that lines longer than both are common.
func FuzzTextReaderLines(f *testing.F) {
	f.Add([]byte(fuzzTextSeed), uint8(200), uint8(16))
	f.Add([]byte("a\r\nbb\n\n"+strings.Repeat("z", 300)), uint8(8), uint8(16))
	f.Fuzz(func(t *testing.T, data []byte, maxLine, buf uint8) {
		checkLines(t, data, int(maxLine), 16+int(buf))
	})
}
