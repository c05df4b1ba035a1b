// Package console is how the long-running commands talk to a person on
// stderr: one progress line, rewritten in place on a terminal and repeated
// now and then otherwise, with log lines printed above it; and notes a
// backend repeats at every apply, printed once.
package console

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Line is a progress line on w. Safe for concurrent use.
type Line struct {
	mu    sync.Mutex
	w     io.Writer
	quiet bool          // no progress (log lines are still printed)
	every time.Duration // how often a line is printed when w is not a terminal
	tty   bool
	drawn bool
	last  time.Time
}

// NewLine is a progress line on w, printed at most every interval when w
// is not a terminal; quiet shows no progress at all.
func NewLine(w io.Writer, quiet bool, every time.Duration) *Line {
	l := &Line{w: w, quiet: quiet, every: every}
	if f, ok := w.(*os.File); ok {
		_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
		l.tty = err == nil
	}
	return l
}

// Update shows text as the progress.
func (l *Line) Update(text string) {
	if l.quiet {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tty {
		fmt.Fprintf(l.w, "\r\033[K%s", text)
		l.drawn = true
		return
	}
	if time.Since(l.last) >= l.every {
		fmt.Fprintln(l.w, text)
		l.last = time.Now()
	}
}

// Log prints a line above the progress.
func (l *Line) Log(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clear()
	fmt.Fprintf(l.w, format+"\n", args...)
}

// Done ends the progress line, leaving the last progress shown.
func (l *Line) Done() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.drawn {
		fmt.Fprintln(l.w)
		l.drawn = false
	}
}

// Clear removes the progress line.
func (l *Line) Clear() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clear()
}

func (l *Line) clear() {
	if l.drawn {
		fmt.Fprint(l.w, "\r\033[K")
		l.drawn = false
	}
}

// Once returns a note function that passes each distinct message to print
// once: backends repeat their notes at every apply. Safe for concurrent
// use.
func Once(print func(msg string)) func(msg string) {
	var mu sync.Mutex
	seen := map[string]bool{}
	return func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		if !seen[msg] {
			seen[msg] = true
			print(msg)
		}
	}
}
