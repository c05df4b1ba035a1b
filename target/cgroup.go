package target

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"temper.codes/temper-train/internal/mountinfo"
)

// Filesystem magic numbers (linux/magic.h) telling cgroup v1 and v2 apart.
const (
	cgroup1Magic = 0x27e0eb
	cgroup2Magic = 0x63677270
)

// cgroupMount is a mounted cgroup hierarchy from /proc/self/mountinfo.
type cgroupMount struct {
	Dir     string   // mount point
	Version int      // 1 or 2
	Options []string // v1: the super options, which name the controllers ("cpu") or the hierarchy ("name=systemd")
}

// has reports whether a v1 mount carries the controller or name option opt.
func (m cgroupMount) has(opt string) bool { return slices.Contains(m.Options, opt) }

// cgroupMounts picks the cgroup and cgroup2 mounts out of a mount table, in
// its order.
func cgroupMounts(all []mountinfo.Mount) []cgroupMount {
	var mounts []cgroupMount
	for _, m := range all {
		switch m.FSType {
		case "cgroup":
			mounts = append(mounts, cgroupMount{Dir: m.MountPoint, Version: 1, Options: m.SuperOptions})
		case "cgroup2":
			mounts = append(mounts, cgroupMount{Dir: m.MountPoint, Version: 2})
		}
	}
	return mounts
}

// defaultCgroupRoots orders the hierarchies in which cgroups are looked up:
// the cgroup2 mount first (the only one on a pure v2 machine, and the one
// the kubelet uses when /sys/fs/cgroup is cgroup2), then the v1 cpu
// controller's mount (a v1 kubelet creates every pod cgroup there), then the
// v1 name=systemd hierarchy (systemd's own tree of slices and scopes).
func defaultCgroupRoots(mounts []cgroupMount) []string {
	var v2, cpu, systemd string
	for _, m := range mounts {
		switch {
		case m.Version == 2 && v2 == "":
			v2 = m.Dir
		case m.Version == 1 && m.has("cpu") && cpu == "":
			cpu = m.Dir
		case m.Version == 1 && m.has("name=systemd") && systemd == "":
			systemd = m.Dir
		}
	}
	var roots []string
	for _, d := range []string{v2, cpu, systemd} {
		if d != "" {
			roots = append(roots, d)
		}
	}
	return roots
}

// cgroupRoots returns the roots to search: the given ones, or the default
// ones of this machine.
func cgroupRoots(given []string) ([]string, error) {
	if len(given) > 0 {
		return given, nil
	}
	all, err := mountinfo.Read()
	if err != nil {
		return nil, fmt.Errorf("find cgroup mounts: %w", err)
	}
	roots := defaultCgroupRoots(cgroupMounts(all))
	if len(roots) == 0 {
		return nil, newError(ErrNotFound, nil, "no cgroup filesystem is mounted (/proc/self/mountinfo lists no cgroup or cgroup2 mount)")
	}
	return roots, nil
}

// cgroupVersion returns 1 or 2 if dir is a directory in a cgroup v1 or v2
// filesystem; 0 with a nil error if it is a directory elsewhere.
func cgroupVersion(dir string) (int, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return 0, err
	}
	if !fi.IsDir() {
		return 0, fmt.Errorf("%s is not a directory", dir)
	}
	switch st.Type {
	case cgroup1Magic:
		return 1, nil
	case cgroup2Magic:
		return 2, nil
	}
	return 0, nil
}

// lookupCgroup finds the cgroup directory for path: an existing absolute
// directory in a cgroup filesystem as it is, otherwise path relative to each
// root in turn (a leading "/" is the hierarchy root, as in /proc/PID/cgroup).
// It returns the directory and its cgroup version.
func lookupCgroup(path string, roots []string) (string, int, error) {
	clean := filepath.Clean(path)
	if filepath.IsAbs(clean) {
		v, err := cgroupVersion(clean)
		switch {
		case err == nil && v == 0:
			return "", 0, newError(ErrNotFound, nil, fmt.Sprintf("cgroup %s: not a cgroup directory (it is not in a cgroup or cgroup2 filesystem; see /proc/self/mountinfo)", path))
		case err == nil:
			return clean, v, nil
		case !errors.Is(err, fs.ErrNotExist):
			return "", 0, fmt.Errorf("cgroup %s: %w", path, err)
		}
		// An absolute path that does not exist may be a path inside a
		// hierarchy (/kubepods.slice/…), unless it already points into a
		// cgroup mount, in which case it simply does not exist.
		for _, r := range roots {
			if strings.HasPrefix(clean, filepath.Clean(r)+"/") {
				return "", 0, newError(ErrNotFound, nil, fmt.Sprintf("cgroup %s does not exist", path))
			}
		}
	}
	tried := make([]string, 0, len(roots))
	for _, r := range roots {
		dir := filepath.Join(r, clean)
		v, err := cgroupVersion(dir)
		if errors.Is(err, fs.ErrNotExist) {
			tried = append(tried, dir)
			continue
		}
		if err != nil {
			return "", 0, fmt.Errorf("cgroup %s: %w", path, err)
		}
		if v == 0 {
			return "", 0, fmt.Errorf("cgroup root %s is not in a cgroup or cgroup2 filesystem", r)
		}
		return dir, v, nil
	}
	return "", 0, newError(ErrNotFound, nil, fmt.Sprintf("cgroup %s not found (tried %s)", path, strings.Join(tried, ", ")))
}

// resolveCgroup makes a cgroup target of path.
func resolveCgroup(path string, givenRoots []string) (*Target, error) {
	roots, err := cgroupRoots(givenRoots)
	if err != nil {
		return nil, err
	}
	dir, version, err := lookupCgroup(path, roots)
	if err != nil {
		return nil, err
	}
	tgids, err := cgroupTgids(dir)
	if err != nil {
		return nil, err
	}
	if len(tgids) == 0 {
		return nil, newError(ErrNothingMatched, nil, fmt.Sprintf("cgroup %s has no processes, in it or below it: nothing matched", dir))
	}
	return &Target{
		Kind:          KindCgroup,
		Description:   fmt.Sprintf("cgroup %s (v%d)", dir, version),
		Tgids:         tgids,
		Cgroup:        dir,
		CgroupVersion: version,
	}, nil
}

// cgroupTgids lists the processes in the cgroup dir and all its descendant
// cgroups, sorted and without duplicates (a v1 cgroup.procs may repeat a
// tgid). Cgroups removed during the walk are skipped; dir itself missing is
// ErrNotFound.
func cgroupTgids(dir string) ([]int, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, newError(ErrNotFound, nil, fmt.Sprintf("cgroup %s no longer exists", dir))
	}
	seen := map[int]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != dir && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			if p != dir && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENODEV)) {
				return nil // removed while walking
			}
			return err
		}
		for _, line := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(line)
			if err != nil {
				return fmt.Errorf("%s/cgroup.procs: %q is not a pid", p, line)
			}
			seen[pid] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list processes of cgroup %s: %w", dir, err)
	}
	tgids := make([]int, 0, len(seen))
	for pid := range seen {
		tgids = append(tgids, pid)
	}
	slices.Sort(tgids)
	return tgids, nil
}
