package cfs

import (
	"path/filepath"
	"testing"

	"temper.codes/temper-train/scheduler"
	"temper.codes/temper-train/scheduler/schedulertest"
)

// TestContract holds the CFS backend to the contract every backend keeps,
// on the host's kernel.
func TestContract(t *testing.T) {
	schedulertest.NeedBackend(t, New(Options{}))
	schedulertest.TestBackend(t, func(t *testing.T) scheduler.Backend {
		return New(Options{StateFile: filepath.Join(t.TempDir(), "state.json"), Note: func(m string) { t.Log(m) }})
	})
}
