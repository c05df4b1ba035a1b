package profiles

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
)

// Candidate is a profile Resolve may choose, with where it came from.
type Candidate struct {
	Profile *Profile
	// Source is the file the profile was read from: a path for files,
	// builtin/<id>.toml for builtins.
	Source  string
	Builtin bool
}

// RelPath is where a profile lives in a profiles tree: <id>/<shape-key>.toml,
// relative to the tree's root. synthesize writes there, LoadDir reads there
// and a profiles repository commits there.
func RelPath(id string, shape Shape) string {
	return filepath.Join(id, shape.Key()+".toml")
}

// LoadDir loads a profiles tree: dir/<id>/<shape-key>.toml, the layout
// synthesize writes and git keeps. Each file's id must equal its directory
// name and its machine_shape's key (Shape.Key) its file name, so that a
// file's path says what it is; anything else is an error naming the file.
// Files not ending in .toml and hidden files are ignored. The result is
// sorted by path. It stops at the first bad file.
func LoadDir(dir string) ([]Candidate, error) {
	var cs []Candidate
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if strings.HasPrefix(name, ".") && path != dir {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !strings.HasSuffix(name, ".toml") {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		parts := strings.Split(filepath.ToSlash(rel), "/")
		if len(parts) != 2 {
			return fmt.Errorf("%s: profiles live at <id>/<shape-key>.toml under %s; move it there", path, dir)
		}
		p, err := Load(path)
		if err != nil {
			return err
		}
		if p.ID != parts[0] {
			return fmt.Errorf("%s: id %q does not match its directory %q; move the file to %s", path, p.ID, parts[0], filepath.Join(dir, p.ID, parts[1]))
		}
		if want := RelPath(p.ID, p.MachineShape); filepath.ToSlash(want) != filepath.ToSlash(rel) {
			return fmt.Errorf("%s: machine_shape is %s but the file is named %s; rename it to %s.toml", path, p.MachineShape.Key(), parts[1], p.MachineShape.Key())
		}
		cs = append(cs, Candidate{Profile: p, Source: path})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load profiles: %w", err)
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].Source < cs[j].Source })
	return cs, nil
}
