package canary

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"temper.codes/temper-train/internal/need"
	"temper.codes/temper-train/profiles"
)

// gitRepo makes an empty profiles repository with a committer identity of
// its own.
func gitRepo(t *testing.T) string {
	t.Helper()
	need.Tool(t, "git", "git")
	dir := filepath.Join(t.TempDir(), "profiles-repo")
	for _, args := range [][]string{{"init", "-q", dir}, {"-C", dir, "config", "user.name", "canary test"},
		{"-C", dir, "config", "user.email", "canary@test.invalid"}, {"-C", dir, "commit", "-q", "--allow-empty", "-m", "empty"}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func writeFileT(t *testing.T, dir, name, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

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
		{"untracked file", func(t *testing.T, dir string) { writeFileT(t, dir, "notes.txt", "x") }, goodProfile, "uncommitted changes", true},
		{"merge conflict", func(t *testing.T, dir string) {
			writeFileT(t, dir, "a.txt", "base\n")
			gitOut(t, dir, "add", "a.txt")
			gitOut(t, dir, "commit", "-q", "-m", "a")
			gitOut(t, dir, "checkout", "-q", "-b", "other")
			writeFileT(t, dir, "a.txt", "other\n")
			gitOut(t, dir, "commit", "-q", "-am", "other")
			gitOut(t, dir, "checkout", "-q", "-")
			writeFileT(t, dir, "a.txt", "mine\n")
			gitOut(t, dir, "commit", "-q", "-am", "mine")
			exec.Command("git", "-C", dir, "merge", "-q", "other").Run() // conflicts
		}, goodProfile, "unresolved merge conflicts", true},
		{"hook refuses", func(t *testing.T, dir string) {
			writeFileT(t, dir, ".git/hooks/pre-commit", "#!/bin/sh\necho no >&2\nexit 1\n")
			os.Chmod(filepath.Join(dir, ".git/hooks/pre-commit"), 0o755)
		}, goodProfile, "not committed", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := gitRepo(t)
			r, err := OpenGitRepo(dir)
			if err != nil {
				t.Fatal(err)
			}
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			head := gitOut(t, dir, "rev-parse", "HEAD")
			commit, err := r.Commit([]byte(tc.profile), lintCFS, "svc: test\n\nevidence")
			path := filepath.Join(dir, "profiles", "svc", "2cpu-2c-smt1.toml")
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := gitOut(t, dir, "show", "--name-only", "--format=%s", commit); got != "svc: test\n\nprofiles/svc/2cpu-2c-smt1.toml" {
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
			if h := gitOut(t, dir, "rev-parse", "HEAD"); h != head {
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
	repo := gitRepo(t)
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
