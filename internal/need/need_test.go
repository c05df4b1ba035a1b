package need

import (
	"fmt"
	"testing"
)

// recorder is a TB that records how the test would have ended.
type recorder struct {
	skipped, failed string
}

func (r *recorder) Helper()           {}
func (r *recorder) Name() string      { return "TestSomething" }
func (r *recorder) Skip(args ...any)  { r.skipped = fmt.Sprint(args...) }
func (r *recorder) Fatal(args ...any) { r.failed = fmt.Sprint(args...) }

func TestUnmet(t *testing.T) {
	const want = "TestSomething needs redis-server: apt-get install redis-server (scripts/setup.sh installs it)"
	for _, tt := range []struct {
		ci                   string
		wantSkip, wantFailed string
	}{
		{ci: "", wantSkip: want},
		{ci: "1", wantFailed: want},
		{ci: "true", wantFailed: want},
	} {
		t.Run("CI="+tt.ci, func(t *testing.T) {
			t.Setenv("CI", tt.ci)
			t.Setenv("PATH", t.TempDir())
			var r recorder
			Tool(&r, "redis-server", "redis-server")
			if r.skipped != tt.wantSkip || r.failed != tt.wantFailed {
				t.Errorf("skipped %q, failed %q; want skipped %q, failed %q", r.skipped, r.failed, tt.wantSkip, tt.wantFailed)
			}
		})
	}
}

// TestMet: a need that is met ends nothing.
func TestMet(t *testing.T) {
	t.Setenv("CI", "1")
	var r recorder
	if p := Tool(&r, "sh", "dash"); p == "" {
		t.Error("Tool(sh) returned no path")
	}
	CPUs(&r, 1)
	Cores(&r, 2, 2)
	File(&r, "this test", "need_test.go", "")
	if r.skipped != "" || r.failed != "" {
		t.Errorf("met needs ended the test: skipped %q, failed %q", r.skipped, r.failed)
	}
}

func TestCores(t *testing.T) {
	t.Setenv("CI", "")
	var r recorder
	Cores(&r, 4, 2)
	if want := "TestSomething needs 4 physical cores: this machine has 2; run the tests on a larger one"; r.skipped != want {
		t.Errorf("skipped %q, want %q", r.skipped, want)
	}
}
