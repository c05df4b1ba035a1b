package ledger

import (
	"errors"
	"strings"
	"testing"
)

func identity() Identity {
	h := header()
	return Identity{ProfileHash: h.ProfileHash, Machine: h.Machine, Target: h.Target, Bench: h.Bench,
		Adapter: h.Adapter, Backend: h.Backend, NoCeilings: h.NoCeilings, Tools: h.Tools}
}

// TestCheck: a resume that differs from the ledger in any field is refused
// with one line naming the field.
func TestCheck(t *testing.T) {
	l := &Ledger{Header: header()}
	if err := l.Check("l", identity()); err != nil {
		t.Fatalf("the same run: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Identity)
		want string
	}{
		{"profile", func(i *Identity) { i.ProfileHash = "other" }, "made for profile p.toml"},
		{"hostname", func(i *Identity) { i.Machine.Hostname = "elsewhere" }, "this is elsewhere"},
		{"cpu model", func(i *Identity) { i.Machine.CPUModel = "Other CPU" }, `cpu "Other CPU"`},
		{"target", func(i *Identity) { i.Target = "pid 99 (redis)" }, `with target "pid 42 (redis)", this run has "pid 99 (redis)"`},
		{"benchmark", func(i *Identity) { i.Bench = []string{"./load", "-n", "2"} }, `with benchmark [./load -n 1], this run has [./load -n 2]`},
		{"benchmark argument with a space", func(i *Identity) { i.Bench = []string{"./load", "-n 1"} }, `this run has [./load "-n 1"]`},
		{"adapter", func(i *Identity) { i.Adapter = "wrk" }, `with adapter "jsonl", this run has "wrk"`},
		{"backend", func(i *Identity) { i.Backend = "sched_ext" }, `with backend "cfs", this run has "sched_ext"`},
		{"ceilings", func(i *Identity) { i.NoCeilings = true }, "with the scheduler's CPU ceilings on, this run has off (--no-ceilings)"},
		{"tool version", func(i *Identity) { i.Tools = map[string]string{"temper-train": "v2", "go": "go1.26"} }, `with temper-train version "v1", this run has "v2"`},
		{"tool missing", func(i *Identity) { i.Tools = map[string]string{"temper-train": "v1"} }, `with go version "go1.26", this run has (none recorded)`},
		{"tool added", func(i *Identity) {
			i.Tools = map[string]string{"temper-train": "v1", "go": "go1.26", "load": "sha256:1"}
		}, `with load version (none recorded), this run has "sha256:1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := identity()
			want.Tools = map[string]string{"temper-train": "v1", "go": "go1.26"}
			tc.edit(&want)
			err := l.Check("d/ledger.jsonl", want)
			if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("got %v\nwant ErrMismatch, one line containing %q", err, tc.want)
			}
		})
	}
}
