package bench

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{in: "redis-benchmark -c 20 --csv", want: []string{"redis-benchmark", "-c", "20", "--csv"}},
		{in: `wrk  'a b'  "c \"d\" \\" e\ f`, want: []string{"wrk", "a b", `c "d" \`, "e f"}},
		{in: `x ''`, want: []string{"x", ""}},
		{in: "   ", want: nil},
		{in: `x 'open`, err: "unterminated ' quote"},
		{in: `x "open`, err: `unterminated " quote`},
	} {
		got, err := Split(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("Split(%q) error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Split(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestParseCommand(t *testing.T) {
	script := filepath.Join(t.TempDir(), "bench.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho '{}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := ParseCommand(script+" 1", "jsonl")
	if err != nil || c.Adapter.Name() != "jsonl" || len(c.Argv) != 2 {
		t.Fatalf("ParseCommand = %+v, %v", c, err)
	}
	if v := ToolVersions(c); !strings.HasPrefix(v[filepath.Base(script)], "sha256:") || v["go"] == "" {
		t.Errorf("ToolVersions = %v, want the script's sha256 and Go's version", v)
	}
	for _, tc := range []struct {
		line, adapter string
		cmdErr        bool
		is            error
		want          string
	}{
		{line: "  ", cmdErr: true, want: `"  ": empty command`},
		{line: "x 'y", adapter: "jsonl", cmdErr: true, want: "unterminated"},
		{line: "no-such-tool-xyz", adapter: "jsonl", cmdErr: true, want: "no-such-tool-xyz: executable file not found"},
		{line: "no-such-tool-xyz", is: ErrNoAdapter},
		{line: "x", adapter: "memtier", want: "memtier_benchmark is not packaged"},
	} {
		_, err := ParseCommand(tc.line, tc.adapter)
		var ce *CommandError
		if err == nil || errors.As(err, &ce) != tc.cmdErr || (tc.is != nil && !errors.Is(err, tc.is)) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseCommand(%q, %q) error %v; want CommandError %v, %v, %q", tc.line, tc.adapter, err, tc.cmdErr, tc.is, tc.want)
		}
	}
}
