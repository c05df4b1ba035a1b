package machine

import (
	"strings"
	"testing"
)

func TestParseShape(t *testing.T) {
	cases := []struct {
		key  string
		want Shape
		err  string
	}{
		{"8cpu-4c-smt2", Shape{LogicalCPUs: 8, Cores: 4, ThreadsPerCore: 2}, ""},
		{"4c-smt2", Shape{Cores: 4, ThreadsPerCore: 2}, ""},
		{"smt2-4c", Shape{Cores: 4, ThreadsPerCore: 2}, ""},
		{"16cpu-8c-smt2-2numa", Shape{LogicalCPUs: 16, Cores: 8, ThreadsPerCore: 2, NUMANodes: 2}, ""},
		{"2cpu", Shape{LogicalCPUs: 2}, ""},
		{"any", Shape{}, ""},
		{"", Shape{}, "empty"},
		{"8cpu-4c-smt3", Shape{}, "logical_cpus = 8 but cores × threads_per_core = 4 × 3 = 12"},
		{"4cpu-8c", Shape{}, "fewer than cores"},
		{"8c-smt16", Shape{}, "no CPU has more than 8"},
		{"0c", Shape{}, "want a positive count"},
		{"08c", Shape{}, "want a positive count"},
		{"-4c", Shape{}, "part \"\""},
		{"4c-4c", Shape{}, "given twice"},
		{"8cores", Shape{}, "none of Ncpu, Nc, smtN, Nnuma"},
		{"6cpu-4c", Shape{}, "not a multiple of cores"},
		{"4c-8numa", Shape{}, "more than cores"},
	}
	for _, c := range cases {
		got, err := ParseShape(c.key)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: got %v, want error containing %q", c.key, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: got %+v, %v; want %+v", c.key, got, err, c.want)
		}
	}
}

// TestShapeKeyRoundTrip: ParseShape reads what Key writes.
func TestShapeKeyRoundTrip(t *testing.T) {
	for _, s := range []Shape{{}, {LogicalCPUs: 8, Cores: 4, ThreadsPerCore: 2}, {Cores: 2}, {ThreadsPerCore: 2}, {LogicalCPUs: 64, Cores: 32, ThreadsPerCore: 2, NUMANodes: 2}} {
		got, err := ParseShape(s.Key())
		if err != nil || got != s {
			t.Errorf("%+v → %q → %+v, %v", s, s.Key(), got, err)
		}
	}
}

func TestShapeMatches(t *testing.T) {
	m := Shape{LogicalCPUs: 8, Cores: 4, ThreadsPerCore: 2, NUMANodes: 1}
	cases := []struct {
		s    Shape
		want bool
	}{
		{Shape{}, true},
		{Shape{Cores: 4}, true},
		{Shape{LogicalCPUs: 8, Cores: 4, ThreadsPerCore: 2}, true},
		{Shape{Cores: 2}, false},
		{Shape{ThreadsPerCore: 1}, false},
		{Shape{NUMANodes: 2}, false},
	}
	for _, c := range cases {
		if got := c.s.Matches(m); got != c.want {
			t.Errorf("%s matches %s = %v, want %v", c.s.Key(), m.Key(), got, c.want)
		}
	}
	if !(Shape{Cores: 4}).Matches(Shape{}) {
		t.Error("an unknown machine rules nothing out")
	}
}
