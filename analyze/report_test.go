package analyze

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"temper.codes/temper-train/internal/table"
	"temper.codes/temper-train/internal/testkit"
)

// TestReportGolden renders the report of the committed workload trace and
// of a real server trace in both views against testdata goldens
// (go test ./analyze -run TestReportGolden -update rewrites them). The
// default view must fit table.Width columns on every line; the wide view
// must hold every column of the default one and more.
func TestReportGolden(t *testing.T) {
	cases := []struct {
		name string
		a    func(t *testing.T) *Analysis
	}{
		{"workload", func(t *testing.T) *Analysis { return analyzeWorkload(t, nil) }},
		{"redis", func(t *testing.T) *Analysis { a, _, _ := analyzeServer(t, "redis"); return a }},
		{"mariadb", func(t *testing.T) *Analysis { a, _, _ := analyzeServer(t, "mariadb"); return a }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := c.a(t)
			for _, wide := range []bool{false, true} {
				var b bytes.Buffer
				if err := a.Report(&b, ReportOptions{Edges: 15, Wide: wide, AllThreads: "--json", GiveSnapshot: "pass --snapshot"}); err != nil {
					t.Fatal(err)
				}
				name := "report-" + c.name + ".txt"
				if wide {
					name = "report-" + c.name + ".wide.txt"
				}
				testkit.Golden(t, filepath.Join("testdata", name), b.Bytes())
				for i, line := range strings.Split(b.String(), "\n") {
					if n := utf8.RuneCountInString(line); !wide && n > table.Width && !strings.HasPrefix(line, "trace ") {
						t.Errorf("%s line %d is %d columns wide, more than %d:\n%s", name, i+1, n, table.Width, line)
					}
				}
				if wide != strings.Contains(b.String(), "SRC/CHAIN/IO/HARDIRQ") || wide != strings.Contains(b.String(), "PREEMPT/S/D %") {
					t.Errorf("%s: wide columns shown %v, want %v", name, !wide, wide)
				}
				for _, col := range []string{"CLASS", "CPU%", "RUN p90", "WAKES/s", "WAKE p99", "FAMILIES", "TOP WAKER"} {
					if !strings.Contains(b.String(), col) {
						t.Errorf("%s lacks the column %s", name, col)
					}
				}
			}
		})
	}
}
