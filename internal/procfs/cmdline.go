package procfs

import (
	"bytes"
	"strings"
)

// Cmdline is the contents of a process's cmdline file: its arguments, each
// followed by a NUL. A process may rewrite it (PostgreSQL's backends show
// "postgres: walwriter" with no NUL between words), so Args and String are
// two views of what the process shows, not of how it was started.
type Cmdline []byte

// Args splits the command line at NUL bytes, trailing NULs dropped; an
// empty command line (a kernel thread, an exited process) has none.
func (c Cmdline) Args() []string {
	s := strings.TrimRight(string(c), "\x00")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}

// String reads the command line as one string, the way ps shows it: NUL
// bytes become spaces and trailing spaces are trimmed.
func (c Cmdline) String() string {
	return strings.TrimRight(string(bytes.ReplaceAll(c, []byte{0}, []byte{' '})), " ")
}
