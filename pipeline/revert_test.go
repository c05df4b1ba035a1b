package pipeline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"temper.codes/temper-train/scheduler/lease"
)

// TestRevertFile: a state file given is the one restored; one that cannot
// be read is an error, nothing reported restored. (The stale-directory
// path is apply --revert's end-to-end test: it works on the node's real
// state directory.)
func TestRevertFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the node's lease lives in /run/temper-train: needs root")
	}
	missing := filepath.Join(t.TempDir(), "apply-1.json")
	r, err := Revert(context.Background(), missing, 0, nil)
	if errors.Is(err, lease.ErrHeld) {
		t.Skipf("another run holds the node: %v", err)
	}
	if err == nil || len(r.Files) != 0 || r.None {
		t.Errorf("Revert(%s) = %+v, %v; want an error and nothing restored", missing, r, err)
	}
}
