// Package tpchecktest holds a trace to trace_processor's importer rules in a
// test: package observe's tests and observe/record's both check every trace
// they write with it.
package tpchecktest

import (
	"testing"

	"temper.codes/temper-train/internal/tpcheck"
)

// Check holds a trace to trace_processor's importer rules (see tpcheck, which
// reads the bytes with protowire, not with observe's reader): it logs the
// report, fails the test on a broken rule, and returns the report.
func Check(t testing.TB, name string, data []byte) *tpcheck.Report {
	t.Helper()
	rep, err := tpcheck.Check(data)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Logf("%s: %s", name, rep)
	if err := rep.Err(); err != nil {
		t.Errorf("%s breaks trace_processor's import rules: %v", name, err)
	}
	return rep
}
