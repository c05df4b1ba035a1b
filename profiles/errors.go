package profiles

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors wrapped by *ParseError; test for them with errors.Is.
var (
	// ErrSyntax: the file is not valid TOML.
	ErrSyntax = errors.New("TOML syntax error")
	// ErrUnknownKey: a key the schema does not have (a typo, or a field from
	// a newer schema).
	ErrUnknownKey = errors.New("unknown key")
	// ErrType: a value of the wrong TOML type or out of range.
	ErrType = errors.New("wrong type")
	// ErrMissing: a required key is absent.
	ErrMissing = errors.New("missing key")
	// ErrSchemaVersion: schema_version is not one this package reads.
	ErrSchemaVersion = errors.New("unsupported schema_version")
	// ErrInvalid: a value of the right type that the schema does not allow
	// (a bad id, an unknown treatment).
	ErrInvalid = errors.New("invalid value")
	// ErrUnknownProfile: no profile has the id asked for.
	ErrUnknownProfile = errors.New("unknown profile")
)

// ParseError is a problem with one key of one profile file. Its message is one
// line: "file:line: key: what is wrong and what to do".
type ParseError struct {
	File string // as given to Parse or Load
	Line int    // 1-based; 0 when the key is absent or its line is unknown
	Key  string // the key's path, e.g. thread_groups[1].match.comm_regx
	Msg  string
	Err  error // the sentinel (ErrUnknownKey, ...)
}

func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	// Keys and values quoted from the file may hold line breaks; the message
	// stays one line.
	return strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace(b.String())
}

// Unwrap returns the sentinel, for errors.Is.
func (e *ParseError) Unwrap() error { return e.Err }
