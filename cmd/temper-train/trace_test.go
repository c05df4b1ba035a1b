package main

import (
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"temper.codes/temper-train/internal/table"
	"temper.codes/temper-train/internal/testkit"
)

// TestSummaryTableGolden renders `trace summary` of the committed workload
// trace in the default view and with -o wide / --wide against testdata
// goldens (-update rewrites them): the default fits table.Width columns,
// the wide view adds the switch-out, preemption and CPU counts.
func TestSummaryTableGolden(t *testing.T) {
	cases := []struct {
		args   []string
		golden string
	}{
		{[]string{"trace", "summary", example}, "summary-workload.txt"},
		{[]string{"trace", "summary", "-o", "wide", example}, "summary-workload.wide.txt"},
		{[]string{"trace", "summary", "--wide", example}, "summary-workload.wide.txt"},
	}
	for _, c := range cases {
		code, out, stderr := runCLI(c.args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d: %s", c.args, code, stderr)
		}
		testkit.Golden(t, filepath.Join("testdata", c.golden), []byte(out))
		wide := strings.HasSuffix(c.golden, ".wide.txt")
		if wide != strings.Contains(out, "SWITCH-OUTS") {
			t.Errorf("%v: SWITCH-OUTS shown: %v, want %v", c.args, !wide, wide)
		}
		for i, line := range strings.Split(out, "\n") {
			if n := utf8.RuneCountInString(line); !wide && n > table.Width && !strings.HasPrefix(line, "trace ") && !strings.HasPrefix(line, "events ") {
				t.Errorf("line %d is %d columns wide:\n%s", i+1, n, line)
			}
		}
	}
	if code, _, stderr := runCLI("trace", "summary", "-o", "json", example); code != exitUsage || !strings.Contains(stderr, "want wide") {
		t.Errorf("-o json: exit %d, %q; want a usage error naming wide", code, stderr)
	}
}
