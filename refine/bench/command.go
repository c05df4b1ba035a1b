package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// CommandError is a benchmark command line that cannot be run: it does not
// split into words, is empty, or names no program on $PATH.
type CommandError struct {
	Line string // the command line as given
	Err  error
}

func (e *CommandError) Error() string { return fmt.Sprintf("%q: %v", e.Line, e.Err) }
func (e *CommandError) Unwrap() error { return e.Err }

// ParseCommand turns a benchmark command line into a Command: split into
// words as a shell would (Split), with the adapter named (adapter), else
// detected from the program's name, and the program found on $PATH. A line
// that cannot be run is a *CommandError; an adapter that cannot be told
// wraps ErrNoAdapter.
func ParseCommand(line, adapter string) (Command, error) {
	argv, err := Split(line)
	if err == nil && len(argv) == 0 {
		err = errors.New("empty command")
	}
	if err != nil {
		return Command{}, &CommandError{Line: line, Err: err}
	}
	var a Adapter
	if adapter != "" {
		a, err = Lookup(adapter)
	} else {
		a, err = Detect(argv)
	}
	if err != nil {
		return Command{}, err
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		return Command{}, &CommandError{Line: line, Err: fmt.Errorf("%s: %v", argv[0], errors.Unwrap(err))}
	}
	return Command{Argv: argv, Adapter: a}, nil
}

// Split splits a command line the way a POSIX shell splits words: blanks
// separate, single quotes keep everything, double quotes keep all but \"
// and \\, a backslash outside quotes escapes the next byte.
func Split(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case quote == '"':
			switch {
			case c == '"':
				quote = 0
			case c == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\'):
				i++
				cur.WriteByte(s[i])
			default:
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			in = true
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}

// ToolVersions records Go's version and the benchmark's, for a ledger: a
// known load tool's version line (its --version, -v or -V), or for a jsonl
// benchmark, a script that must not be run outside a trial, the sha256 of
// its file.
func ToolVersions(c Command) map[string]string {
	v := map[string]string{"go": runtime.Version()}
	if len(c.Argv) == 0 {
		return v
	}
	tool := c.Argv[0]
	name := filepath.Base(tool)
	if c.Adapter != nil && c.Adapter.Name() == "jsonl" {
		if path, err := exec.LookPath(tool); err == nil {
			if b, err := os.ReadFile(path); err == nil {
				sum := sha256.Sum256(b)
				v[name] = "sha256:" + hex.EncodeToString(sum[:])
			}
		}
		return v
	}
	for _, flag := range []string{"--version", "-v", "-V"} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		out, err := exec.CommandContext(ctx, tool, flag).CombinedOutput()
		cancel()
		line, _, _ := bytes.Cut(bytes.TrimSpace(out), []byte("\n"))
		if err == nil && len(line) > 0 && len(line) < 200 {
			v[name] = string(line)
			break
		}
	}
	return v
}
