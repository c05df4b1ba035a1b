package testkit

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"temper.codes/temper-train/internal/need"
)

// GitRepo makes a git repository with one empty commit and a committer
// identity of its own, so that commits in it do not depend on the
// machine's git configuration, and returns its work tree.
func GitRepo(t testing.TB) string {
	t.Helper()
	need.Tool(t, "git", "git")
	dir := filepath.Join(t.TempDir(), "repo")
	Git(t, "", "init", "-q", dir)
	Git(t, dir, "config", "user.name", "temper-train test")
	Git(t, dir, "config", "user.email", "test@temper-train.invalid")
	Git(t, dir, "commit", "-q", "--allow-empty", "-m", "empty")
	return dir
}

// Git runs git with args in the work tree dir ("": the working directory)
// and returns its output, trimmed; a failure fails the test with the
// output.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	if dir != "" {
		args = append([]string{"-C", dir}, args...)
	}
	out, err := exec.Command("git", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}
