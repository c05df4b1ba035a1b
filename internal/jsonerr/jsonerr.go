// Package jsonerr turns encoding/json decoding errors into one-line errors
// that say where the input went wrong, for the files temper-train reads
// (snapshots, analyses).
package jsonerr

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Decode describes err, returned by json.Unmarshal(data, ...), in one line.
// what names the document for a top-level type mismatch, e.g. "a snapshot".
// Syntax errors stay wrapped (errors.As finds the *json.SyntaxError).
func Decode(err error, data []byte, what string) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || err.Error() == "unexpected end of JSON input":
		return fmt.Errorf("truncated JSON: input ends after %d bytes", len(data))
	case errors.As(err, &syn):
		return fmt.Errorf("invalid JSON at byte %d: %w", syn.Offset, err)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return fmt.Errorf("not %s: top-level JSON %s, want an object", what, typ.Value)
		}
		return fmt.Errorf("field %s: JSON %s where %s is expected", typ.Field, typ.Value, typ.Type)
	}
	return fmt.Errorf("decode: %s", oneLine(err.Error()))
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
