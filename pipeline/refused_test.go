package pipeline_test

import (
	"fmt"
	"strings"
	"testing"

	"temper.codes/temper-train/pipeline"
	"temper.codes/temper-train/profiles"
)

// TestRefusedErrorListsAll: a refusal for several lint errors names every one
// of them, one per line, up to pipeline.MaxListed.
func TestRefusedErrorListsAll(t *testing.T) {
	finding := func(i int) profiles.Finding {
		return profiles.Finding{Severity: profiles.Error, Group: i, GroupName: fmt.Sprintf("g%d", i), Field: "slice_us", Message: "out of range"}
	}
	for _, n := range []int{2, pipeline.MaxListed, pipeline.MaxListed + 3} {
		var fs []profiles.Finding
		for i := range n {
			fs = append(fs, finding(i))
		}
		lines := strings.Split((&pipeline.RefusedError{Path: "p.toml", Errors: fs}).Error(), "\n")
		if want := fmt.Sprintf("p.toml: %d lint errors; nothing was changed:", n); lines[0] != want {
			t.Errorf("%d errors: first line %q, want %q", n, lines[0], want)
		}
		listed := min(n, pipeline.MaxListed)
		for i := range listed {
			if want := "  p.toml: " + finding(i).String(); lines[1+i] != want {
				t.Errorf("%d errors: line %d %q, want %q", n, 1+i, lines[1+i], want)
			}
		}
		wantLines := 1 + listed
		if n > pipeline.MaxListed {
			wantLines++
			if last := lines[len(lines)-1]; last != fmt.Sprintf("  (and %d more)", n-pipeline.MaxListed) {
				t.Errorf("%d errors: last line %q", n, last)
			}
		}
		if len(lines) != wantLines {
			t.Errorf("%d errors: %d lines, want %d:\n%s", n, len(lines), wantLines, strings.Join(lines, "\n"))
		}
	}
}
