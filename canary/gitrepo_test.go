package canary

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"temper.codes/temper-train/internal/testkit"
	"temper.codes/temper-train/profiles"
)

func lintCFS(p *profiles.Profile) []profiles.Finding {
	shape := profiles.Shape{LogicalCPUs: 2, Cores: 2, ThreadsPerCore: 1, NUMANodes: 1}
	return profiles.Lint(p, profiles.LintOptions{Backend: "cfs", Shape: &shape})
}

const goodProfile = `schema_version = 1
id = "svc"

[machine_shape]
logical_cpus = 2
cores = 2
threads_per_core = 1

[[thread_groups]]
name = "workers"
match = { comm_prefix = ["wl-worker"] }
treatment = "latency"

[[thread_groups]]
name = "rest"
match = { all = true }
treatment = "normal"
`

// TestGitRepo: what the repository commits (the profile's own id and
// shape, profiles.RelPath) and what it refuses.
func TestGitRepo(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, dir string)
		profile string
		err     string // "" commits
		dirty   bool   // the error wraps ErrDirtyRepo
	}{
		{"commits", nil, goodProfile, "", false},
		{"lint error never committed", nil, strings.Replace(goodProfile, `match = { all = true }`, `match = { }`, 1), "fails lint", false},
		{"untracked file", func(t *testing.T, dir string) { testkit.WriteTree(t, dir, map[string]string{"notes.txt": "x"}) }, goodProfile, "uncommitted changes", true},
		{"merge conflict", func(t *testing.T, dir string) {
			testkit.WriteTree(t, dir, map[string]string{"a.txt": "base\n"})
			testkit.Git(t, dir, "add", "a.txt")
			testkit.Git(t, dir, "commit", "-q", "-m", "a")
			testkit.Git(t, dir, "checkout", "-q", "-b", "other")
			testkit.WriteTree(t, dir, map[string]string{"a.txt": "other\n"})
			testkit.Git(t, dir, "commit", "-q", "-am", "other")
			testkit.Git(t, dir, "checkout", "-q", "-")
			testkit.WriteTree(t, dir, map[string]string{"a.txt": "mine\n"})
			testkit.Git(t, dir, "commit", "-q", "-am", "mine")
			exec.Command("git", "-C", dir, "merge", "-q", "other").Run() // conflicts
		}, goodProfile, "unresolved merge conflicts", true},
		{"hook refuses", func(t *testing.T, dir string) {
			testkit.WriteTree(t, dir, map[string]string{".git/hooks/pre-commit": "#!/bin/sh\necho no >&2\nexit 1\n"})
			os.Chmod(filepath.Join(dir, ".git/hooks/pre-commit"), 0o755)
		}, goodProfile, "not committed", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := testkit.GitRepo(t)
			r, err := OpenGitRepo(dir)
			if err != nil {
				t.Fatal(err)
			}
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			head := testkit.Git(t, dir, "rev-parse", "HEAD")
			commit, err := r.Commit([]byte(tc.profile), lintCFS, "svc: test\n\nevidence")
			path := filepath.Join(dir, "profiles", "svc", "2cpu-2c-smt1.toml")
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := testkit.Git(t, dir, "show", "--name-only", "--format=%s", commit); got != "svc: test\n\nprofiles/svc/2cpu-2c-smt1.toml" {
					t.Errorf("commit: %q", got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err %v, want one line with %q", err, tc.err)
			}
			if errors.Is(err, ErrDirtyRepo) != tc.dirty {
				t.Errorf("errors.Is(err, ErrDirtyRepo) = %v, want %v", !tc.dirty, tc.dirty)
			}
			if h := testkit.Git(t, dir, "rev-parse", "HEAD"); h != head {
				t.Errorf("HEAD moved to %s", h)
			}
			if _, err := os.Stat(path); err == nil {
				t.Errorf("%s left behind", path)
			}
		})
	}
}

// TestOpenGitRepo: a directory that is not the top of a clean work tree is
// refused before the loop starts.
func TestOpenGitRepo(t *testing.T) {
	repo := testkit.GitRepo(t)
	sub := filepath.Join(repo, "sub")
	os.Mkdir(sub, 0o755)
	for _, tc := range []struct {
		name, dir, err string
	}{
		{"not a work tree", t.TempDir(), "not a git work tree"},
		{"below the top", sub, "not the top of its work tree"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := OpenGitRepo(tc.dir); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("err %v, want %q", err, tc.err)
			}
		})
	}
}
