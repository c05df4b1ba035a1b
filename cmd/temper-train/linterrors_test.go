package main

import (
	"fmt"
	"strings"
	"testing"

	"temper.codes/temper-train/profiles"
)

// TestLintErrorsListsAll: a refusal for several lint errors names every one
// of them, one per line, up to maxListed.
func TestLintErrorsListsAll(t *testing.T) {
	finding := func(i int) profiles.Finding {
		return profiles.Finding{Severity: profiles.Error, Group: i, GroupName: fmt.Sprintf("g%d", i), Field: "slice_us", Message: "out of range"}
	}
	for _, n := range []int{2, maxListed, maxListed + 3} {
		var fs []profiles.Finding
		for i := range n {
			fs = append(fs, finding(i))
		}
		lines := strings.Split(lintErrors("p.toml", fs).Error(), "\n")
		if want := fmt.Sprintf("p.toml: %d lint errors; nothing was changed:", n); lines[0] != want {
			t.Errorf("%d errors: first line %q, want %q", n, lines[0], want)
		}
		listed := min(n, maxListed)
		for i := range listed {
			if want := "  p.toml: " + finding(i).String(); lines[1+i] != want {
				t.Errorf("%d errors: line %d %q, want %q", n, 1+i, lines[1+i], want)
			}
		}
		wantLines := 1 + listed
		if n > maxListed {
			wantLines++
			if last := lines[len(lines)-1]; last != fmt.Sprintf("  (and %d more)", n-maxListed) {
				t.Errorf("%d errors: last line %q", n, last)
			}
		}
		if len(lines) != wantLines {
			t.Errorf("%d errors: %d lines, want %d:\n%s", n, len(lines), wantLines, strings.Join(lines, "\n"))
		}
	}
}
