package canary

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"temper.codes/temper-train/internal/atomicfile"
	"temper.codes/temper-train/profiles"
)

// ProfilesDir is the directory of a profiles repository that holds the
// profiles, in synthesize's layout (profiles.RelPath under it).
const ProfilesDir = "profiles"

// ErrDirtyRepo is wrapped when the repository has changes of its own: the
// loop never commits over them.
var ErrDirtyRepo = errors.New("profiles repository not clean")

// ErrNoGit is wrapped when the git command is missing.
var ErrNoGit = errors.New("the git command is missing (scripts/setup.sh installs it)")

// GitRepo is a git repository of profiles that the loop commits the
// profiles that pass to, one commit each. It runs the git command rather
// than a Go git library: no new dependency, and the user's git
// configuration (identity, signing, hooks) applies to the commits as it
// does to their own.
type GitRepo struct{ dir string }

// OpenGitRepo returns the repository whose work tree's top is dir, after
// Check.
func OpenGitRepo(dir string) (*GitRepo, error) {
	r := &GitRepo{dir: dir}
	if err := r.Check(); err != nil {
		return nil, err
	}
	return r, nil
}

// Dir is the repository's work tree.
func (r *GitRepo) Dir() string { return r.dir }

func (r *GitRepo) git(args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", r.dir}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if msg == "" {
			msg = err.Error()
		}
		line, _, _ := strings.Cut(msg, "\n")
		return "", fmt.Errorf("git %s: %s", args[0], line)
	}
	return strings.TrimSpace(out.String()), nil
}

// Check fails unless the repository's directory is the top of a git work
// tree with nothing uncommitted and no merge or rebase under way.
func (r *GitRepo) Check() error {
	if _, err := exec.LookPath("git"); err != nil {
		return ErrNoGit
	}
	top, err := r.git("rev-parse", "--show-toplevel")
	if err != nil {
		return fmt.Errorf("%s: not a git work tree (%v); create it with 'git init %s'", r.dir, err, r.dir)
	}
	abs, _ := filepath.Abs(r.dir)
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	if top != abs {
		return fmt.Errorf("%s: not the top of its work tree; give %s", r.dir, top)
	}
	st, err := r.git("status", "--porcelain", "--untracked-files=all")
	if err != nil {
		return fmt.Errorf("%s: %w", r.dir, err)
	}
	if st != "" {
		lines := strings.Split(st, "\n")
		what := "uncommitted changes"
		for _, l := range lines {
			if len(l) >= 2 && (l[0] == 'U' || l[1] == 'U' || l[:2] == "AA" || l[:2] == "DD") {
				what = "unresolved merge conflicts"
				break
			}
		}
		return fmt.Errorf("%w: %s has %s (%d path(s), first %q); commit, stash or resolve them first: nothing was committed",
			ErrDirtyRepo, r.dir, what, len(lines), strings.TrimSpace(lines[0]))
	}
	gitDir, err := r.git("rev-parse", "--git-dir")
	if err != nil {
		return err
	}
	if !filepath.IsAbs(gitDir) {
		gitDir = filepath.Join(r.dir, gitDir)
	}
	for _, f := range []string{"MERGE_HEAD", "rebase-merge", "rebase-apply", "CHERRY_PICK_HEAD"} {
		if _, err := os.Stat(filepath.Join(gitDir, f)); err == nil {
			return fmt.Errorf("%w: %s has a merge, rebase or cherry-pick under way (%s); finish or abort it first: nothing was committed", ErrDirtyRepo, r.dir, f)
		}
	}
	return nil
}

// Commit writes the profile file src to profiles/<id>/<shape>.toml (the
// profile's own id and shape, profiles.RelPath) and commits that one path
// with msg. A profile that fails lint is never committed; a repository that
// is not clean is an error and nothing is written. On a failed commit (a
// hook refused it) the file is put back as it was. It returns the new
// commit's hash.
func (r *GitRepo) Commit(src []byte, lint func(*profiles.Profile) []profiles.Finding, msg string) (string, error) {
	p, err := profiles.Parse("candidate", src)
	if err != nil {
		return "", fmt.Errorf("not committed: %w", err)
	}
	if f, bad := profiles.FirstError(lint(p)); bad {
		return "", fmt.Errorf("not committed: the profile fails lint: %s", f)
	}
	if err := r.Check(); err != nil {
		return "", err
	}
	rel := filepath.Join(ProfilesDir, profiles.RelPath(p.ID, p.MachineShape))
	path := filepath.Join(r.dir, rel)
	old, oldErr := os.ReadFile(path)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	if err := writeFile(path, src); err != nil {
		return "", err
	}
	undo := func() {
		r.git("reset", "-q", "--", rel)
		if oldErr == nil {
			writeFile(path, old)
		} else {
			os.Remove(path)
		}
	}
	if _, err := r.git("add", "--", rel); err != nil {
		undo()
		return "", err
	}
	if _, err := r.git("commit", "-q", "-m", msg, "--", rel); err != nil {
		undo()
		return "", fmt.Errorf("%s: %w (the profile was not committed)", r.dir, err)
	}
	return r.git("rev-parse", "HEAD")
}

func writeFile(path string, b []byte) error {
	return atomicfile.Write(path, 0o644, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}
